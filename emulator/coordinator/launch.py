"""Finding and running ``mpiexec``: the wheel's launcher beside this Python, whether this
process already runs under one, and a run that Ctrl-C ends without leaving ranks behind."""

import os
import shutil
import signal
import subprocess
import sys


def under_mpiexec():
    """True in a rank started by an MPI launcher (MPICH's Hydra or Open MPI's)."""
    return any(k in os.environ for k in ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE"))


def mpiexec_path():
    """The ``mpiexec`` of this Python's environment (the ``mpich`` wheel's), else the PATH's."""
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return local if os.path.exists(local) else shutil.which("mpiexec")


def cleanup_flags(*, one_host):
    """The Hydra clean-up flag for a job on one host or across hosts.

    On one host every rank hangs off one Hydra proxy, which by default kills them all when
    one dies; ``-disable-auto-cleanup`` keeps the rest alive so the coordinator can name the
    dead node. Across hosts (the namespace testbed, a hostfile) each host has its own proxy
    and a dead rank takes only its own host's processes, so the default is kept: with the
    flag, Hydra tells every proxy of each exiting rank (SIGUSR1, even after MPI_Finalize),
    and a proxy that has already exited makes that write fail, ending mpiexec with SIGPIPE
    or status 255 after a complete job (MPICH 5.0.2's Hydra, about 5 runs in 6 on 10 hosts).
    """
    return ["-disable-auto-cleanup"] if one_host else []


def run_mpiexec(argv, *, grace_seconds=10.0):
    """Run an mpiexec command line and return its status. On Ctrl-C, mpiexec gets SIGINT
    (it passes it on to every rank) and a grace period to end the job, then SIGKILL; the
    ranks of the job are not left behind either way."""
    proc = subprocess.Popen(argv)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=grace_seconds)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.kill()
            proc.wait()
        raise

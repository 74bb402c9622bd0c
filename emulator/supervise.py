"""Run one MPI rank as a child, so that a rank killed by a signal looks like an ordinary
exit to the MPI launcher.

Hydra (MPICH's mpiexec) ends the whole job when one of its processes dies of a signal, even
with ``-disable-auto-cleanup``; an exit status it leaves alone. An emulated node killed with
``kill -9`` must not take the cluster with it, so each rank runs under this supervisor::

    mpiexec -disable-auto-cleanup -n 11 python -m emulator.supervise python -m emulator ...

The rank inherits the process-manager connection (``PMI_FD``). SIGINT and SIGTERM are passed
on; Hydra's SIGUSR1 failure notice is ignored (the coordinator finds failures itself). The
supervisor exits with the rank's status, ``128 + N`` for a rank killed by signal N.
"""

import os
import signal
import subprocess
import sys


def rank_command(args):
    """The argv of one supervised emulator rank running ``python -m emulator ARGS``."""
    return [sys.executable, "-m", "emulator.supervise", sys.executable, "-m", "emulator",
            *args]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m emulator.supervise COMMAND [ARG ...]", file=sys.stderr)
        return 2
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    fds = tuple(int(os.environ[k]) for k in ("PMI_FD",) if os.environ.get(k, "").isdigit())
    proc = subprocess.Popen(argv, pass_fds=fds)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda number, frame: proc.send_signal(number))
    while True:
        try:
            status = proc.wait()
            break
        except InterruptedError:  # pragma: no cover - wait is restarted by Python
            continue
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())

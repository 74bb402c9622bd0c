"""Finding and running ``mpiexec``: the wheel's launcher beside this Python, whether this
process already runs under one, and a run that Ctrl-C ends without leaving ranks behind."""

import os
import shutil
import signal
import sys
import time


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


def machines_here(count):
    """``mpiexec`` arguments that make ``count`` machines of this one: a Hydra proxy each,
    started without ssh. MPICH takes each proxy for a machine (its ranks' shared memory
    apart from the others'), so the model is served across them as across real hosts; ranks
    go round robin. One machine needs no arguments."""
    names = ",".join(f"h{i}" for i in range(1, count + 1))
    return [] if count == 1 else ["-launcher", "fork", "-hosts", names]


def user_environment(**extra: str) -> dict:
    """The environment for a program started from here: this process's, with ``extra``,
    without the one BLAS thread this process gave itself (:func:`emulator._one_blas_thread`)."""
    from .. import _BLAS_THREADS_ENV, _blas_default  # read now: entry() may have set it

    env = dict(os.environ, **extra)
    if _blas_default:
        env.pop(_BLAS_THREADS_ENV, None)
    return env


STARTED_FILE_ENV = "NODESEL_STARTED_FILE"
# How long a job's ranks may take to start and join (65 ranks on 2 cores join in a few
# seconds); past it, MPI's start-up would otherwise wait for ever, without a word.
START_TIMEOUT_SECONDS = 120.0


def report_started():
    """On rank 0, once every rank has joined: tell :func:`run_mpiexec` the job has started."""
    path = os.environ.pop(STARTED_FILE_ENV, "")
    if path:
        with open(path, "w"):
            pass


def run_mpiexec(argv, *, grace_seconds=10.0, start_timeout_seconds=None, stdout=None,
                stderr=None, cancel=None):
    """Run an mpiexec command line (its standard output to ``stdout``, a file or
    ``subprocess.DEVNULL``; default ours; its standard error to ``stderr`` likewise) and
    return its status. Setting ``cancel`` (a :class:`threading.Event`) ends the job as
    Ctrl-C does, from any thread. On Ctrl-C, mpiexec gets SIGINT
    (it passes it on to every rank) and a grace period to end the job, then SIGKILL; the
    ranks of the job are not left behind either way.

    With ``start_timeout_seconds``, rank 0 must call :func:`report_started` within that time;
    if it does not (a rank that cannot reach the launcher or its peers waits in MPI's
    start-up for ever), the job is ended the same way and :class:`UserError` says so."""
    import subprocess  # with threading, 3 ms of every command's start: imported for a job
    import tempfile
    import threading

    from ..errors import UserError
    from . import stop

    began = time.time()
    with tempfile.TemporaryDirectory(prefix="nodesel-start-") as tmp:
        started = os.path.join(tmp, "started")
        env = user_environment(**{STARTED_FILE_ENV: started, stop.LAUNCHED_ENV: "1"})
        # SIGPIPE stays ignored in mpiexec (Python's setting): a proxy that ends before
        # mpiexec's last write to it otherwise kills mpiexec (status -13, about 1 run in 75
        # of a one-rank job on a busy machine) though every rank exited as it should. Hydra
        # gives the ranks SIGPIPE's default back.
        proc = subprocess.Popen(argv, env=env,
                                stdout=subprocess.PIPE if stdout is None else stdout,
                                stderr=subprocess.PIPE if stderr is None else stderr,
                                restore_signals=False)
        stopping = threading.Event()
        # ours where the caller has none: Hydra's notices of a stop go to both
        relays = [threading.Thread(target=_relay, args=(source, stopping, fd), daemon=True)
                  for source, fd in ((proc.stdout, 1), (proc.stderr, 2)) if source]
        for relay in relays:
            relay.start()
        # SIGTERM (a batch system's or kill's) and SIGHUP end the job as Ctrl-C does, so
        # that what the caller made for it (a testbed) is taken down in its finally
        main = threading.current_thread() is threading.main_thread()
        previous = {s: signal.signal(s, stop.on_signal) for s in stop.SIGNALS} if main else {}
        try:
            if start_timeout_seconds is not None:
                deadline = time.monotonic() + start_timeout_seconds
                while not os.path.exists(started):
                    try:
                        return proc.wait(timeout=0.25)  # ended before it started
                    except subprocess.TimeoutExpired:
                        if time.monotonic() > deadline:
                            _end(proc, signal.SIGTERM, grace_seconds)
                            raise UserError(
                                f"the MPI job's ranks did not all start within "
                                f"{start_timeout_seconds:.0f} s and the job was ended: "
                                f"{' '.join(argv[:12])} ...") from None
            while cancel is not None and proc.poll() is None:
                if cancel.wait(CANCEL_POLL_SECONDS):
                    stopping.set()
                    _end(proc, signal.SIGINT, grace_seconds)
            return proc.wait()
        except KeyboardInterrupt:
            stopping.set()
            _end(proc, signal.SIGINT, grace_seconds)
            raise
        finally:
            for relay in relays:
                relay.join(timeout=5.0)  # what the job said is out before the caller speaks
            for s, handler in previous.items():
                signal.signal(s, handler)
            # ranks that ended without MPI's finalize (stopped, killed) leave MPICH's
            # shared memory behind: what no live process maps any more goes
            stop.remove_orphan_segments(began, patience_seconds=ORPHAN_PATIENCE_SECONDS)


# Hydra's own complaints about ranks that left on a stop (a proxy that could not write to a
# rank gone, an abort's notice, the banner of a rank's bad termination on stdout): dropped
# once a stop is under way, as the stop line says it
HYDRA_CHATTER = (b"[proxy:", b"[mpiexec@", b"HYDU_", b"HYD_", b"Abort(",
                 b"application called MPI_Abort", b"BAD TERMINATION OF ONE OF YOUR",
                 b"=   PID ", b"=   EXIT CODE:", b"=   CLEANING UP REMAINING PROCESSES",
                 b"=   YOU CAN IGNORE THE BELOW CLEANUP", b"YOUR APPLICATION TERMINATED WITH",
                 b"This typically refers to a problem with your application",
                 b"Please see the FAQ page for debugging suggestions")
BANNER_RULE = b"=" * 40  # the banner's top and bottom lines are longer runs of "="


ORPHAN_PATIENCE_SECONDS = 2.0  # for a job's last ranks to let go of MPICH's shared memory
CANCEL_POLL_SECONDS = 0.1  # how often a job that may be cancelled from another thread is seen


def _relay(source, stopping, fd=2):
    """Pass the job's stderr (or, ``fd`` 1, its stdout) on as it comes (progress bars
    included); once ``stopping`` is set, line by line, without Hydra's chatter."""
    pending = b""
    while True:
        try:
            chunk = os.read(source.fileno(), 65536)
        except OSError:
            break
        if not chunk:
            break
        if not stopping.is_set():
            _write(fd, chunk)
            continue
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if not _chatter(line):
                _write(fd, line + b"\n")
    if pending and not _chatter(pending):
        _write(fd, pending)
    source.close()


def _chatter(line):
    return any(mark in line for mark in HYDRA_CHATTER) or \
        (line.startswith(BANNER_RULE) and not line.strip(b"= \r"))


def _write(fd, data):
    try:
        (sys.stdout if fd == 1 else sys.stderr).flush()
        os.write(fd, data)
    except (OSError, ValueError):  # closed
        pass


def _end(proc, sig, grace_seconds):
    """Send ``sig`` to mpiexec (it passes it on to every rank), then SIGKILL after a grace."""
    import subprocess

    proc.send_signal(sig)
    try:
        proc.wait(timeout=grace_seconds)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        proc.kill()
        proc.wait()

"""How a run that is stopped ends: the signal, the one line, and what the run leaves behind.

A command the user started (and every rank under the user's own ``mpiexec``) turns its first
SIGINT, SIGTERM or SIGHUP into :class:`Stopped`, a ``KeyboardInterrupt`` that remembers the
signal, so every ``finally`` (results written, a testbed taken down) runs on the way out;
the signals after the first are ignored. The command then prints one line (:func:`line`)
and exits with 128 + the signal's number, as shells report a process a signal ended.

MPICH keeps a rank's intra-node channels in POSIX shared memory (``/dev/shm/mpich_shm_*``;
the UCX it talks through between machines, ``ucx_shm_posix_*``) and unlinks it in
``MPI_Finalize``: a rank that is killed, or that ends without finalizing,
leaves its segment behind. Once every rank of a machine has attached MPICH's segment, the
runtime unlinks its name (the memory lives on while a rank maps it), so a job killed whole
(Hydra dead of a SIGHUP, every rank SIGKILLed) leaves nothing. A stopped rank unlinks the
segments it maps itself (:func:`unlink_own_segments`); for ranks that were killed before
that, :func:`orphan_segments` finds what
a run left: segments of this user, made or changed since the run started, that no live
process maps any more (a live run's are mapped by its ranks, so another run's segments are
never taken).
"""

import os
import signal
import sys
import time
from types import FrameType
from typing import Any, Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SHM_DIR = "/dev/shm"
MPICH_PREFIX = "mpich_shm_"
SEGMENT_PREFIXES = (MPICH_PREFIX, "ucx_shm_posix_")  # MPICH's own, and its UCX's


class Stopped(KeyboardInterrupt):
    """The run was stopped by signal ``signum``."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


_received: Optional[int] = None  # the signal that stopped this process, once one has


def on_signal(signum: int, frame: Optional[FrameType]) -> None:
    """The handler: the first stop raises :class:`Stopped`, the ones after are ignored."""
    global _received
    # set first: a stop that comes while the handlers are being set to ignore is reported
    # by CPython as "ignored due to race condition", which is dropped only once stopped
    _received = signum
    for s in SIGNALS:  # the first stop is the one: mpiexec and a supervisor both pass it on
        signal.signal(s, signal.SIG_IGN)
    raise Stopped(signum)


def received() -> Optional[int]:
    """The signal that stopped this process, or None: a failure met while a stop winds the
    run down (a node that left for the same stop) is part of the stop, not an error."""
    return _received


def install() -> None:
    """Make SIGINT, SIGTERM and SIGHUP stop this process with :class:`Stopped` (the main
    thread's, where Python runs handlers)."""
    global _hook
    for s in SIGNALS:
        signal.signal(s, on_signal)
    if sys.unraisablehook is not _quiet_late_signals:
        _hook, sys.unraisablehook = sys.unraisablehook, _quiet_late_signals


_hook = sys.unraisablehook


def _quiet_late_signals(unraisable: Any) -> None:
    """A second signal that came while the first was being handled is ignored, as meant;
    CPython reports it as an unraisable "Signal N ignored due to race condition" (with a
    traceback on stderr), which is dropped once this process was stopped. Anything else
    goes to the hook there was."""
    if _received is not None and isinstance(unraisable.exc_value, OSError) and \
            "ignored due to race condition" in str(unraisable.exc_value):
        return
    _hook(unraisable)


def await_stop(seconds: float) -> None:
    """Raise :class:`Stopped` if this process was stopped, or if a stop on its way arrives
    within ``seconds``; return if none came."""
    if _received is not None:
        raise Stopped(_received)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)


def signum_of(interrupt: BaseException) -> int:
    """The signal behind a ``KeyboardInterrupt`` (SIGINT for a plain one: Ctrl-C)."""
    return getattr(interrupt, "signum", int(signal.SIGINT))


def exit_status(signum: int) -> int:
    return 128 + int(signum)


def line(signum: int, out: Optional[str] = None) -> str:
    """``nodesel: stopped by SIGTERM; results so far in X`` (without X where the command
    keeps no results folder, or made none)."""
    text = f"nodesel: stopped by {signal.Signals(signum).name}"
    if out and os.path.isdir(out):
        text += f"; results so far in {out}"
    return text


LAUNCHED_ENV = "NODESEL_LAUNCHED"  # set by a nodesel command for the ranks it starts


def _user_launched_rank() -> Optional[str]:
    """This process's rank in a job the user's own mpiexec started, else None."""
    if LAUNCHED_ENV in os.environ:
        return None
    return os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK"))


def says_it_here() -> bool:
    """True on the rank that reports a stop: rank 0 of a job the user's own mpiexec started
    (in a job a nodesel command started, that command does)."""
    return _user_launched_rank() == "0"


# Under the user's own mpiexec, Hydra kills every rank once one has exited with an error:
# a stopped node rank waits for rank 0 to write its results and say its line, this long
# at most (Slurm's KillWait gives 30 s), then goes
LINE_WAIT_SECONDS = 8.0
SAID_TAG = 32766  # on COMM_WORLD, which the run's own messages never use (MPI: up to 32767)
SAID_SEND_SECONDS = 1.0  # rank 0's word on its way to the node ranks, at most this long


def _world() -> Any:
    """MPI's COMM_WORLD where MPI is running in this process, else None."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return None
    return mpi.COMM_WORLD


def rank_0_has_said_it() -> None:
    """On rank 0 of a job the user's own mpiexec started, stopped, its line printed: tell
    each node rank (waiting in :func:`let_rank_0_say_it`) that it may go."""
    world = _world() if _user_launched_rank() == "0" else None
    if world is None:
        return
    from mpi4py import MPI

    requests = [world.Isend(b"", dest=r, tag=SAID_TAG) for r in range(1, world.Get_size())]
    deadline = time.monotonic() + SAID_SEND_SECONDS
    while not MPI.Request.Testall(requests) and time.monotonic() < deadline:
        time.sleep(0.005)


def let_rank_0_say_it(wait_seconds: float = LINE_WAIT_SECONDS) -> None:
    """On a node rank of a job the user's own mpiexec started, stopped: wait until rank 0
    has written what it keeps and said its line (:func:`rank_0_has_said_it`), at most
    ``wait_seconds``, so that Hydra, seeing this rank gone, does not kill rank 0 first."""
    rank = _user_launched_rank()
    if rank in (None, "0"):
        return
    world = _world()
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        if world is not None and world.Iprobe(source=0, tag=SAID_TAG):
            return
        time.sleep(0.01)


def _mapped_segments(directory: str = SHM_DIR) -> set:
    """Paths under ``directory`` that some process maps (from /proc/PID/maps)."""
    mapped = set()
    prefix = directory.rstrip("/") + "/"
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps") as f:
                for entry in f:
                    at = entry.find(prefix)
                    if at >= 0:
                        mapped.add(entry[at:].strip().removesuffix(" (deleted)"))
        except OSError:  # gone, or not ours to read
            continue
    return mapped


def unlink_own_segments(prefixes: tuple = SEGMENT_PREFIXES) -> None:
    """A stopped rank, before it leaves without MPI's finalize: unlink the MPICH segments
    it maps (its job's; the others' mappings stay valid, only the names go). ``prefixes``:
    the segments' names begin so."""
    try:
        with open("/proc/self/maps") as f:
            own = {e[e.find(SHM_DIR + "/"):].strip().removesuffix(" (deleted)")
                   for e in f
                   if any(SHM_DIR + "/" + prefix in e for prefix in prefixes)}
    except OSError:
        return
    for path in own:
        try:
            os.unlink(path)
        except OSError:  # another rank of the job was first
            pass


def orphan_segments(since_seconds: float, *, directory: str = SHM_DIR,
                    mapped: Optional[set] = None) -> list:
    """MPICH's segments in ``directory`` that this user made or changed at or after
    ``since_seconds`` (epoch) and that no live process maps. ``mapped``: the mapped paths
    (default: read from /proc)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    uid = os.getuid()
    found = []
    for e in entries:
        if not e.name.startswith(SEGMENT_PREFIXES):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if st.st_uid == uid and st.st_ctime >= since_seconds - 1:
            found.append(e.path)
    if not found:
        return []
    in_use = _mapped_segments(directory) if mapped is None else mapped
    return [p for p in found if p not in in_use]


def remove_orphan_segments(since_seconds: float, *, directory: str = SHM_DIR,
                           patience_seconds: float = 0.0) -> list:
    """Unlink :func:`orphan_segments`; returns the paths removed. With ``patience_seconds``,
    segments made since then that a process still maps are waited for that long (a job's
    last ranks may still be on their way out when its launcher ends)."""
    removed = []
    deadline = time.monotonic() + patience_seconds
    while True:
        for path in orphan_segments(since_seconds, directory=directory):
            try:
                os.unlink(path)
                removed.append(path)
            except FileNotFoundError:
                pass
        if time.monotonic() >= deadline or not orphan_segments(
                since_seconds, directory=directory, mapped=set()):
            return removed
        time.sleep(0.1)

"""The model's owner when it is served to mirrors (``_mirror``: a host's flows), and the
polling thread it runs in, without MPI: it takes flow starts, solves, and reports each
flow's end and release to the hosts of its parties. The served model over MPI
(:mod:`emulator.shaping.served`) and the relay of real programs
(:mod:`emulator.interpose.relay`, a mirror in the same process) build on it."""

import ctypes
import gc
import sys
import threading
import time
from typing import Any, Callable, Optional

from . import _mirror  # type: ignore[attr-defined]  # compiled

# the MPI tag of the owner's reports to a host's agent (emulator/shaping/served.py)
REPORTS_TAG = 12
# At the end each agent says bye to the owner and the owner to each agent once all have, so
# no message is left unreceived (UCX warns about those at finalize, on stdout); a side that
# is gone is waited for this long
BYE_SECONDS = 10.0
NAP_MIN_SECONDS = 0.00001
NAP_MAX_SECONDS = 0.0001
PR_SET_TIMERSLACK = 29
# A rank that runs a relay hands the GIL over this often (Python's default, 5 ms, would hold
# a report that long behind a busy main thread)
SWITCH_INTERVAL_SECONDS = 0.0002


# the third generation's threshold while a loop must answer on time: no full collection
FULL_COLLECTIONS_OFF = 1 << 30


def hold_full_collections() -> Callable[[], None]:
    """Keep the garbage collector from walking this process's whole heap while its loops
    relay: what it holds now is frozen out of the collector's sight, and no full collection
    runs (the young generations still do). A full collection holds the GIL through every
    object; on rank 0 of `nodesel measure` over 4 machines (the forecasts of 8,128 pairs)
    that stalled the owner's thread, and every flow's end, by up to 0.23 s. Returns what
    undoes it."""
    gc.freeze()
    young, middle, full = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTIONS_OFF)

    def undo() -> None:
        gc.set_threshold(young, middle, full)
        gc.unfreeze()

    return undo


def precise_thread_timers() -> None:
    """Sleeps of this thread that end on time (1 us timer slack: Linux keeps it per
    thread); else each nap of a relay lasts 50 us more than asked."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Loop(threading.Thread):
    """A polling loop: ``step()`` returns True when it did something (then it naps short,
    else longer, up to ``nap_max_seconds``), ``stop()`` ends it after its current step.
    ``nap(seconds)`` is how it waits (a sleep; a subclass may wake on more)."""

    nap_max_seconds = NAP_MAX_SECONDS

    def __init__(self, name: str, comm: Any) -> None:
        super().__init__(name=name, daemon=True)
        self.comm = comm
        self._stopping = threading.Event()
        self._sends: list = []  # requests of sends not yet complete
        self.error: Optional[Exception] = None
        # called with the error that ended the loop, in its thread (None: seen at close)
        self.on_error: Optional[Callable[[Exception], None]] = None

    def start(self) -> None:
        sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)  # for the whole process
        super().start()

    def run(self) -> None:
        precise_thread_timers()
        nap = NAP_MIN_SECONDS
        try:
            while not self._stopping.is_set():
                busy = self.step()
                nap = NAP_MIN_SECONDS if busy else min(nap * 2, self.nap_max_seconds)
                self.nap(min(nap, self.due()))
            deadline = time.monotonic() + BYE_SECONDS
            while not self.finish() and time.monotonic() < deadline:
                time.sleep(NAP_MAX_SECONDS)
            while self._sends and time.monotonic() < deadline:  # let them be received
                self._sends = [r for r in self._sends if not r.Test()]
                time.sleep(NAP_MAX_SECONDS)
        except Exception as e:  # the run sees it at close, or on_error at once
            self.error = e
            if self.on_error is not None:
                self.on_error(e)

    def step(self) -> bool:
        raise NotImplementedError

    def nap(self, seconds: float) -> None:
        time.sleep(seconds)

    def finish(self) -> bool:
        """One step of the goodbyes; True once they are over."""
        raise NotImplementedError

    def send(self, message: Any, rank: int, tag: int) -> None:
        """Send without blocking: the owner and an agent in one rank send to each other, and
        two blocking sends there can wait on each other for ever."""
        self._sends = [r for r in self._sends if not r.Test()]
        self._sends.append(self.comm.isend(message, rank, tag))

    def due(self) -> float:
        return NAP_MAX_SECONDS

    def stop(self) -> None:
        """Ask the loop to end (its goodbyes take at most BYE_SECONDS); :meth:`join` it."""
        self._stopping.set()


class ModelOwner(Loop):
    """The model's owner: flow starts in (:meth:`_event`), ends and releases out to each
    flow's hosts (:meth:`_report`, through :meth:`send`). Subclasses take the starts in
    their :meth:`step`."""

    def __init__(self, name: str, comm: Any, model: Any, node_host: list, agents: list) -> None:
        super().__init__(name, comm)
        self.fluid = model.fluid
        self.node_host = node_host
        self.host_of_rank = {rank: host for host, rank in enumerate(agents)}
        self.agents = agents
        # (owner slot, gen) -> (id, gen, sender's host, receiver's host, receiver's bell)
        self.flows: dict = {}
        self.persistent: dict = {}  # (id, gen) -> (owner slot, gen)
        self._byes: set = set()
        self.fluid.track(True)

    def due(self) -> float:
        return max(self.fluid.next_event() - time.time(), 0.0)

    def _event(self, host: int, event: tuple) -> None:
        kind, gid, ggen, src, dst, amount, bound, resource, persistent, bucket, wall, bell = event
        if kind == _mirror.END:
            mine = self.persistent.pop((gid, ggen), None)
            if mine is not None:
                self.fluid.drop(*mine)
            return
        # a start from the future is an error of the clock estimate (a loaded host's pings):
        # it would carry the model, and every flow after it, ahead of the time
        wall = min(wall, time.time())
        slot, gen, _ = self.fluid.add(wall, src, dst, amount, bound=bound, resource=resource,
                                      persistent=bool(persistent), bucket=bool(bucket))
        if persistent:
            self.persistent[(gid, ggen)] = (slot, gen)
        else:
            self.flows[(slot, gen)] = (gid, ggen, host, self.node_host[dst], bell)

    def _report(self) -> bool:
        reports: dict = {}
        for slot, gen, kind, wall in self.fluid.take_log():
            flow = self.flows.get((slot, gen))
            if flow is None:
                continue
            gid, ggen, sender, receiver, bell = flow
            reports.setdefault(sender, []).append((gid, ggen, kind, wall))
            if kind == _mirror.DONE:
                if receiver != sender:
                    reports.setdefault(receiver, []).append((gid, ggen, kind, wall, bell))
                del self.flows[(slot, gen)]
                self.fluid.drop(slot, gen)
        for host, batch in reports.items():
            self.send(batch, self.agents[host], REPORTS_TAG)
        return bool(reports)

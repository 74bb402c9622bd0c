"""The cluster's model served to ranks on several hosts: one owner solves, each host mirrors.

When the ranks of an emulated cluster are not all on one machine (MPI's
``COMM_TYPE_SHARED`` split gives more than one group), :func:`served_model` makes:

- **the owner**, a thread of rank 0: the one full model of the cluster
  (:class:`~emulator.network.sharing.ClusterModel`, private to rank 0). It takes the flow
  starts and ends the hosts send, solves, and reports each flow's end (and a large send's
  release) to the hosts of its sender and its receiver as soon as the model reaches it;
- **a mirror per host** (``_mirror.c``), in an MPI shared-memory window of that host's
  ranks: the flows its ranks take part in. A send takes a slot there at once (the flow's id
  is its host and slot: no round trip), and a party reads its flow there, through the same
  C interface as the one-host model, so the message path is unchanged;
- **an agent per host**, a thread of the host's first rank: it sends its mirror's new
  starts to the owner in batches and writes the owner's reports into the mirror, which rings
  the parties' doorbells.

A flow's end reaches its parties a relay later than the model reached it (the owner's wake,
one MPI message, the agent's poll): under dilation K that is K times smaller against the
flow. Only rank 0 holds the full description; a node rank holds its host's mirror and the
O(n) table of node indexes. Compute phases are solved in a model of each node rank's own
(a node's CPU is shared by its own jobs alone). MPI RMA is not used: over TCP it has no
hardware support, progress would need a spinning thread, and a rank that died holding a
lock would hang everyone.
"""

import os
import sys
import threading
import time
from typing import Any, Callable, Mapping, Optional

from mpi4py import MPI

from ..errors import MachineFailure
from ..files import digits_only
from ..network import _mirror  # type: ignore[attr-defined]  # compiled
from ..network.owner import BYE_SECONDS, REPORTS_TAG, Loop, ModelOwner, hold_full_collections

# one tag per kind and direction (REPORTS_TAG, 12, is the owner's): rank 0 is both the owner
# and its machine's agent
STARTS_TAG, PING_TAG, PONG_TAG, BYE_TAG, BYE_BACK_TAG = 11, 13, 14, 15, 16
MIRROR_SLOTS = 16384
# Clocks: each agent asks the owner's time this often (the first CLOCK_FIRST pings faster),
# and keeps the offset of the fastest of its last CLOCK_SAMPLES exchanges (NTP's filter)
CLOCK_PERIOD_SECONDS, CLOCK_FIRST_SECONDS, CLOCK_FIRST, CLOCK_SAMPLES = 1.0, 0.005, 8, 8
# A machine whose agent sends nothing (its clock pings come every CLOCK_PERIOD_SECONDS) for
# this long is taken for dead or cut off, and so is the owner by an agent whose ping it does
# not answer (the agents of machines 2, 3, ... 2 s later each, so that one says it); the
# variable sets it (seconds)
HOST_SILENT_ENV, HOST_SILENT_SECONDS, HOST_SILENT_STAGGER_SECONDS = \
    "NODESEL_HOST_SILENT_SECONDS", 10.0, 2.0
# A test hook: how far each host's clock is off (seconds, by host number, comma separated),
# as if its machine's clock were: namespaces cannot shift the real-time clock
SKEW_ENV = "NODESEL_CLOCK_SKEW_SECONDS"
# The most flows the owner's model holds at once: by default as many as the machines' mirrors
# hold together (a flow is in both while it runs), at most OWNER_FLOWS_MAX; this variable
# sets it (a test makes it small)
OWNER_FLOWS_ENV, OWNER_FLOWS_MAX = "NODESEL_OWNER_MAX_FLOWS", 1 << 18


class Served(RuntimeError):
    """The model cannot be served (the MPI library's thread support)."""


def host_silent_seconds(environ: Optional[Mapping[str, str]] = None) -> float:
    """How long a machine may send nothing: HOST_SILENT_SECONDS, unless HOST_SILENT_ENV
    says (:class:`Served` if that is not a number of seconds above the ping period's).

    >>> host_silent_seconds({}), host_silent_seconds({HOST_SILENT_ENV: "3"})
    (10.0, 3.0)
    >>> host_silent_seconds({HOST_SILENT_ENV: "0.5"})
    Traceback (most recent call last):
    emulator.shaping.served.Served: NODESEL_HOST_SILENT_SECONDS='0.5': not a finite time over 1 s
    """
    given = (os.environ if environ is None else environ).get(HOST_SILENT_ENV)
    if not given:
        return HOST_SILENT_SECONDS
    try:
        seconds = float(given)
    except ValueError:
        seconds = float("nan")
    if not CLOCK_PERIOD_SECONDS < seconds < float("inf"):
        raise Served(f"{HOST_SILENT_ENV}={given!r}: not a finite time over "
                     f"{CLOCK_PERIOD_SECONDS:g} s")
    return seconds


def end_job(message: str) -> None:
    """What a served loop that fails on a node rank does by default: say why and end the
    whole job (a host whose flows never end would hang it), in that one line: MPICH's own
    "Abort(3) on node ..." line goes to /dev/null."""
    print(f"nodesel: error: {message}", file=sys.stderr, flush=True)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    MPI.COMM_WORLD.Abort(3)


class LocalResources:
    """What a node rank needs of the cluster's resources: the indexes of each node's port up
    and CPU (O(n)), ``cpu(node)`` as :class:`~emulator.network.sharing.Resources` gives."""

    def __init__(self, index: dict) -> None:
        self.index = index

    def cpu(self, node: str) -> int:
        return self.index[("cpu", node)]


class ClockOffset:
    """A host's clock against the owner's, from NTP's four timestamps: the agent sends at
    t1 (its clock), the owner receives at t2 and answers at t3 (its clock), the answer
    arrives at t4. Each exchange gives an offset ((t2 - t1) + (t3 - t4)) / 2 (the owner's
    clock minus this host's) and a round trip (t4 - t1) - (t3 - t2); the estimate is the
    offset of the fastest of the last ``samples`` exchanges, whose error is at most half its
    round trip.

    >>> clock = ClockOffset()
    >>> clock.add(10.0, 12.0005, 12.0006, 10.0011)  # the owner 2 s ahead, 1 ms round trip
    >>> clock.add(11.0, 13.0002, 13.0003, 11.0005)  # a faster exchange (0.4 ms): kept
    >>> round(clock.seconds, 6), round(clock.round_trip_seconds, 6)
    (2.0, 0.0004)
    """

    def __init__(self, samples: int = CLOCK_SAMPLES) -> None:
        self.samples: list = []
        self.keep = samples
        self.seconds = 0.0
        self.round_trip_seconds = float("inf")

    def add(self, t1: float, t2: float, t3: float, t4: float) -> None:
        self.samples = [*self.samples[-(self.keep - 1):],
                        ((t4 - t1) - (t3 - t2), ((t2 - t1) + (t3 - t4)) / 2)]
        self.round_trip_seconds, self.seconds = min(self.samples)


def host_skew_seconds(host: int, environ: Optional[dict] = None) -> float:
    """This host's clock skew from the test hook (0 without it)."""
    values = (environ if environ is not None else os.environ).get(SKEW_ENV, "")
    skews = [float(v) for v in values.split(",") if v.strip()]
    return skews[host] if host < len(skews) else 0.0


class Owner(ModelOwner):
    """The model's owner (rank 0): starts in over MPI, ends and releases out."""

    def __init__(self, comm: Any, model: Any, node_host: list, agents: list, *,
                 machines: Optional[list] = None,
                 silent_seconds: float = HOST_SILENT_SECONDS) -> None:
        super().__init__("nodesel-model-owner", comm, model, node_host, agents)
        # each machine as an error names it
        self.machines = machines or [f"machine {h + 1} of {len(agents)}"
                                     for h in range(len(agents))]
        self.silent_seconds = silent_seconds
        now = time.monotonic()
        self.heard = dict.fromkeys(agents, now)  # agent's rank -> when it last sent
        self._next_check = now + CLOCK_PERIOD_SECONDS

    def step(self) -> bool:
        status = MPI.Status()
        got = False
        while self.comm.Iprobe(MPI.ANY_SOURCE, PING_TAG, status):  # an agent's clock ping
            t2 = time.time()
            source = status.Get_source()
            t1 = self.comm.recv(source=source, tag=PING_TAG)
            self.send((t1, t2, time.time()), source, PONG_TAG)
            self.heard[source] = time.monotonic()
        while self.comm.Iprobe(MPI.ANY_SOURCE, STARTS_TAG, status):
            source = status.Get_source()
            events = self.comm.recv(source=source, tag=STARTS_TAG)
            self.heard[source] = time.monotonic()
            host = self.host_of_rank[source]
            for event in events:
                self._event(host, event)
            got = True
        self._check_silence()
        self.fluid.advance(time.time())
        return self._report() or got

    def _check_silence(self) -> None:
        """:class:`MachineFailure` naming a machine (not the owner's) whose agent has sent
        nothing, not even a clock ping, for ``silent_seconds``."""
        now = time.monotonic()
        if now < self._next_check:
            return
        self._next_check = now + CLOCK_PERIOD_SECONDS
        for host, rank in enumerate(self.agents):
            if host and now - self.heard[rank] > self.silent_seconds:
                raise MachineFailure(
                    f"{self.machines[host]} sent nothing for {self.silent_seconds:g} s (its "
                    f"agent, rank {rank}, pings every {CLOCK_PERIOD_SECONDS:g} s): down or cut "
                    "off; the run cannot go on without its nodes' flows")

    def finish(self) -> bool:
        """Answer pings and take starts until every agent has said bye, then say bye."""
        self.step()
        status = MPI.Status()
        while self.comm.Iprobe(MPI.ANY_SOURCE, BYE_TAG, status):
            self.comm.recv(source=status.Get_source(), tag=BYE_TAG)
            self._byes.add(status.Get_source())
        if len(self._byes) < len(self.agents):
            return False
        for rank in self.agents:
            self.send(None, rank, BYE_BACK_TAG)
        return True

class Agent(Loop):
    """A host's agent: its mirror's starts to the owner, the owner's reports into it. Every
    time it relays is moved between this host's clock and the owner's by the estimated
    offset (:class:`ClockOffset`); ``skew_seconds`` makes this host's clock read that far
    off (the test hook)."""

    def __init__(self, comm: Any, mirror: Any, owner_rank: int = 0,
                 skew_seconds: float = 0.0, *, silent_seconds: Optional[float] = None,
                 owner_machine: str = "machine 1") -> None:
        super().__init__("nodesel-model-agent", comm)
        self.mirror, self.owner_rank = mirror, owner_rank
        self.skew = skew_seconds
        self.clock = ClockOffset()
        self.lost = self.pings = 0
        self._next_ping = self._pinged = 0.0
        self._pinging = self._said_bye = False
        self.ready = threading.Event()  # set once the first pings have estimated the clock
        # a ping unanswered this long (None: never, as on the owner's own machine) ends the run
        self.silent_seconds, self.owner_machine = silent_seconds, owner_machine

    def step(self) -> bool:
        busy = self._ping()
        if self._pinging and self.silent_seconds is not None and \
                time.monotonic() - self._pinged > self.silent_seconds:
            raise MachineFailure(
                f"the served model's owner, rank {self.owner_rank} on {self.owner_machine}, "
                f"answered no clock ping for {self.silent_seconds:g} s: down or cut off")
        if self.mirror.pending():
            shift = self.skew + self.clock.seconds  # this host's true time -> the owner's
            events = [(*e[:10], e[10] + shift, e[11]) for e in self.mirror.take()]
            self.send(events, self.owner_rank, STARTS_TAG)
            busy = True
        return self.step_reports() or busy

    def step_reports(self) -> bool:
        """The owner's reports into the mirror."""
        busy = False
        while self.comm.Iprobe(self.owner_rank, REPORTS_TAG):
            reports = self.comm.recv(source=self.owner_rank, tag=REPORTS_TAG)
            shift = self.skew + self.clock.seconds
            self.lost += self.mirror.apply([(*r[:3], r[3] - shift, *r[4:]) for r in reports])
            busy = True
        return busy

    def finish(self) -> bool:
        """Say bye once (no ping left unanswered), then take reports until the owner's."""
        if not self._said_bye:
            if self._pinging and not self._ping():
                return False
            self.send(None, self.owner_rank, BYE_TAG)
            self._said_bye = True
        self.step_reports()
        if not self.comm.Iprobe(self.owner_rank, BYE_BACK_TAG):
            return False
        self.comm.recv(source=self.owner_rank, tag=BYE_BACK_TAG)
        for tag in (REPORTS_TAG, PONG_TAG):  # what came before it and is still waiting
            while self.comm.Iprobe(self.owner_rank, tag):
                self.comm.recv(source=self.owner_rank, tag=tag)
        return True

    def _ping(self) -> bool:
        """Ask the owner's time when due; take its answer when it has come."""
        if self._pinging and self.comm.Iprobe(self.owner_rank, PONG_TAG):
            t1, t2, t3 = self.comm.recv(source=self.owner_rank, tag=PONG_TAG)
            self.clock.add(t1, t2, t3, time.time() + self.skew)
            self._pinging = False
            if self.pings >= CLOCK_FIRST:
                self.ready.set()
            return True
        now = time.time()
        if not self._pinging and now >= self._next_ping:
            self.send(now + self.skew, self.owner_rank, PING_TAG)
            self.pings += 1
            self._pinging = True
            self._pinged = time.monotonic()
            first = self.pings < CLOCK_FIRST
            self._next_ping = now + (CLOCK_FIRST_SECONDS if first else CLOCK_PERIOD_SECONDS)
        return False


class ServedModel:
    """A rank's view of the served model: ``fluid`` (its host's mirror), ``index`` (node
    name -> model index), ``resources`` (:class:`LocalResources`); on rank 0 also the full
    model's ``set_clock`` and ``clock``. ``close()`` is collective."""

    served = True

    def __init__(self, mirror: Any, index: dict, resources: LocalResources, hosts: int,
                 owner: Any = None, owner_loop: Any = None, owner_flows: int = 0) -> None:
        self.fluid, self.index, self.resources = mirror, index, resources
        self.hosts = hosts
        self.owner = owner  # the full model, on rank 0
        self.owner_loop, self.owner_flows = owner_loop, owner_flows  # its thread, its table
        self.close: Callable[[], None] = lambda: None

    def failure(self) -> Optional[str]:
        """On rank 0, what ended the owner's thread, in one line (None while it runs, and
        on the other ranks): the run cannot go on without it."""
        error = self.owner_loop.error if self.owner_loop is not None else None
        if error is None:
            return None
        if isinstance(error, MachineFailure):
            return str(error)
        if "flow table is full" in str(error):
            return (f"the served model's owner holds at most {self.owner_flows} flows at once, "
                    f"and more were under way: set {OWNER_FLOWS_ENV} higher")
        return f"the served model's owner failed: {type(error).__name__}: {error}"

    def set_clock(self, **kwargs: Any) -> bool:
        return self.owner.set_clock(**kwargs)

    def clock(self) -> dict:
        return self.owner.clock()


def owner_max_flows(machines: int, mirror_slots: int,
                    environ: Optional[Mapping[str, str]] = None) -> int:
    """How many flows the owner's model holds at once: what ``machines`` mirrors of
    ``mirror_slots`` hold together, at most OWNER_FLOWS_MAX, unless OWNER_FLOWS_ENV says
    (:class:`Served` if it is not a positive whole number).

    >>> owner_max_flows(3, 16384, {}), owner_max_flows(64, 16384, {})
    (49152, 262144)
    >>> owner_max_flows(3, 16384, {OWNER_FLOWS_ENV: "4"})
    4
    >>> owner_max_flows(3, 16384, {OWNER_FLOWS_ENV: "lots"})
    Traceback (most recent call last):
    emulator.shaping.served.Served: NODESEL_OWNER_MAX_FLOWS='lots': not a positive whole number
    >>> owner_max_flows(3, 16384, {OWNER_FLOWS_ENV: "\N{SUPERSCRIPT TWO}"})
    Traceback (most recent call last):
    emulator.shaping.served.Served: NODESEL_OWNER_MAX_FLOWS='²': not a positive whole number
    """
    given = (os.environ if environ is None else environ).get(OWNER_FLOWS_ENV)
    if not given:
        return min(machines * mirror_slots, OWNER_FLOWS_MAX)
    digits = given.strip()
    if not digits_only(digits) or int(digits) < 1:
        raise Served(f"{OWNER_FLOWS_ENV}={given!r}: not a positive whole number")
    return int(given)


def _machine(host: int, hosts: int, places: list) -> str:
    """How an error names a machine: its number, name and first ranks."""
    ranks = [r for r, (h, _) in enumerate(places) if h == host]
    name = next(n for h, n in places if h == host)
    more = ", ..." if len(ranks) > 6 else ""
    return f"machine {host + 1} of {hosts} ({name}; ranks {', '.join(map(str, ranks[:6]))}{more})"


def start_loops(loops: list, *, ready_seconds: float = 30.0) -> Callable[[], None]:
    """Start the owner's and agents' threads (none: nothing) with full collections held off
    (:func:`~emulator.network.owner.hold_full_collections`) and wait until each agent knows
    its host's clock; returns what gives the collector back. Raises :class:`Served`, the
    collector given back, if an agent's clock is not known within ``ready_seconds``."""
    if not loops:
        return lambda: None
    release = hold_full_collections()
    for loop in loops:
        loop.start()
    for loop in loops:  # no flow before this host's clock is known
        if isinstance(loop, Agent) and not loop.ready.wait(timeout=ready_seconds):
            release()  # a caller that handles the error gets its collector back
            raise Served("the model's owner did not answer this host's clock pings in "
                         f"{ready_seconds:g} s")
    return release


def _full_model(cluster: Any, timeline: Any, places: list, rank_nodes: Optional[list],
                owner_flows: int) -> tuple:
    """On rank 0: the full model, and what every rank needs of it: each node's machine
    (``places``: each rank's), node name -> model index, and each node's port up and CPU."""
    from ..network import cluster as clusters
    from ..network.sharing import ClusterModel

    full = ClusterModel(cluster, timeline, max_flows=owner_flows)
    names = clusters.node_names(cluster)
    if rank_nodes is None:
        rank_nodes = [None, *names][:len(places)]
    node_host = [0] * len(full.nodes)
    for r, name in enumerate(rank_nodes):
        if name is not None:
            node_host[full.index[name]] = places[r]
    index = {name: full.index[name] for name in names}
    small = {key: full.resources.index[key] for name in names
             for key in (("up", name), ("cpu", name))}
    return full, (node_host, index, small)


def served_model(comm: Any, local: Any, cluster: Any, timeline: Any, *,
                 rank_nodes: Optional[list] = None, max_slots: int = MIRROR_SLOTS,
                 on_failure: Optional[Callable[[str], None]] = None) -> ServedModel:
    """The model served over the ranks of ``comm`` (collective), ``local`` its split by
    machine. ``rank_nodes``: the node each rank emulates (None for none; by default the
    runtime's: rank r >= 1 emulates the r-th node), which says the machine of each node's
    flows. Rank 0 owns the model; raises :class:`Served` on every rank where MPI cannot run
    the owner's and agents' threads. An agent that fails (the owner silent past
    :func:`host_silent_seconds`, among others) calls ``on_failure`` (default :func:`end_job`)
    with why, in its thread; the owner's failure is :meth:`ServedModel.failure`, for rank 0's
    main thread to see."""
    if not comm.allreduce(MPI.Query_thread() >= MPI.THREAD_MULTIPLE, op=MPI.LAND):
        raise Served("serving the model across hosts needs MPI_THREAD_MULTIPLE")
    rank, first = comm.Get_rank(), local.Get_rank() == 0
    leaders = sorted(r for r in comm.allgather(rank if first else None) if r is not None)
    if leaders[0] != 0:
        raise Served("rank 0 must lead its host")
    host = leaders.index(local.bcast(rank if first else None, root=0))
    places = comm.allgather((host, MPI.Get_processor_name()))  # rank -> its machine
    machines = [_machine(h, len(leaders), places) for h in range(len(leaders))]
    places = [h for h, _ in places]
    owner_flows = owner_max_flows(len(leaders), max_slots)  # the same environment: all raise
    silent_seconds = host_silent_seconds()
    full, table = _full_model(cluster, timeline, places, rank_nodes, owner_flows) \
        if rank == 0 else (None, None)
    node_host, index, small = comm.bcast(table, root=0)
    served = comm.Dup()
    size = _mirror.mirror_bytes(len(node_host), max_slots)
    window = MPI.Win.Allocate_shared(size if first else 0, 1, comm=local)
    memory, _ = window.Shared_query(0)
    from ..network.sharing import BUFFER_BITS

    def attach(create: bool) -> Any:
        return _mirror.Mirror(host, len(leaders), node_host, max_slots, BUFFER_BITS,
                              window=memory, create=create)

    mirror = attach(True) if first else None
    local.Barrier()  # made before anyone attaches
    mirror = mirror or attach(False)
    loops: list = []
    owner = None
    if rank == 0:
        owner = Owner(served, full, node_host, leaders, machines=machines,
                      silent_seconds=silent_seconds)
        loops.append(owner)
    if first:
        agent = Agent(served, mirror, skew_seconds=host_skew_seconds(host),
                      silent_seconds=None if host == 0 else
                      silent_seconds + HOST_SILENT_STAGGER_SECONDS * (host - 1),
                      owner_machine=machines[0])
        agent.on_error = lambda e: (on_failure or end_job)(str(e))
        loops.append(agent)
    release_collector = start_loops(loops)
    model = ServedModel(mirror, index, LocalResources(small), len(leaders), owner=full,
                        owner_loop=owner, owner_flows=owner_flows)

    def close() -> None:
        comm.Barrier()  # every rank's flows are over
        for loop in loops:  # all asked first: rank 0's owner waits for its own agent's bye
            loop.stop()
        for loop in loops:
            loop.join(timeout=2 * BYE_SECONDS)
        release_collector()
        mirror.detach()
        window.Free()
        served.Free()
        local.Free()
        for loop in loops:
            if loop.error is not None:
                raise loop.error

    model.close = close
    return model

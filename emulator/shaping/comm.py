"""In-process traffic shaping: a communicator whose messages take the emulated network's time.

Model
-----
Each message is a *flow* from its sender's node to its receiver's node. The payload moves
through MPI at once (into a buffer at the receiver); what is emulated is *when* it is
delivered. The receiving rank runs a fluid model of all flows entering it: at every instant
a flow from u to v progresses at ::

    rate = min(pair_mbps(u, v, t) / flows from u to v,
               port_mbps(v) / flows entering v,
               port_mbps(u) / flows leaving u)

where ``pair_mbps`` comes from the scenario at the current scenario time, so a bandwidth
change during a long message is honoured from the instant it happens. The sender tells the
receivers of its open flows whenever its number of flows changes (a message posted: its
count then; or one finished: one fewer from the time its receiver saw the last byte, which
also corrects the counts it gave meanwhile, before it knew), so the egress share follows
too. Links are full duplex: the two directions of a pair do not share. Each pair is
a token bucket, as the kernel's HTB class for it: after an idle spell the first bytes of a
message, up to the bucket (:func:`emulator.network.flowmodel.burst_bytes`, about two
frames), pass at once. A message is delivered ``latency`` after its last byte arrives. A send
completes once what it has not yet transmitted fits the sender's socket buffer
(``SEND_BUFFER_BYTES``), as with MPI over TCP: a message that fits completes at once and the
sender moves on while it drains; a larger one holds the sender until its remainder fits.

The model is evaluated lazily in event order (flow starts, flow completions, scenario
changes), and only again when a flow comes or goes or its next event is due. Waiting ranks
never spin: every wait polls MPI with ``Test``/``Iprobe`` and sleeps between polls, until
the next computed delivery or until a peer on the same machine rings its doorbell
(:mod:`emulator.shaping.doorbell`) after sending, so timing holds on an oversubscribed machine.
Sleeps for a delivery aim early by how late this process has been waking (a moving average,
at most ``LEAD_MAX_SECONDS`` and never before the last byte), so deliveries land on time on
average.

A message of up to ``EAGER_BYTES`` is one MPI message (a 32-byte header, then the payload).
A larger one is a header and the payload, then a final notice from the receiver when its
last byte arrives in the model (the sender's flow count drops then); one larger than the
send buffer also gets a release notice when its remainder fits. Notices name the send by
its sequence number, so they need not come in the order the sends were made.

Collectives (:mod:`emulator.shaping.collectives`) are built from these shaped point-to-point
messages, so they are shaped too.

This module is the model's reference and the Python message path. Where the compiled one
binds to the MPI library (:mod:`emulator.shaping.engine`), ``ShapedComm(...)`` makes a
:class:`~emulator.shaping.engine.CompiledShapedComm`: the same model, wire format and waits
with the per-message work in C.
"""

import bisect
import math
import pickle
import struct
import threading
import time
from collections import deque

from mpi4py import MPI

from ..errors import NodeFailure
from ..network.flowmodel import burst_bytes
from . import doorbell
from .collectives import COLLECTIVE_TAG_BASE, Collectives
from .timing import Aim

POLL_MIN_SECONDS = 0.00005
POLL_MAX_SECONDS = 0.0002
# With doorbells a wait sleeps until a ring, its next event, or at most this long (a safety
# net); for doorbell.EARLY_RING_SECONDS after a ring that brought nothing (it may have come
# before its message) it sleeps no longer than the time since the ring.
# Both paths miss a wake-up now and then (not found: seen as a short send behind a large one
# on one tag waiting for the large one's release, 207 ms instead of 32 on the compiled path),
# and the net bounds what that costs; a waiting rank wakes 100 times a second at most.
BELL_MAX_SECONDS = 0.01
# The Python path misses more often, and keeps a 1 ms net.
PYTHON_BELL_MAX_SECONDS = 0.001
# A compute phase on a time-shared node sleeps until its end, a ring (a message, or a change
# of its CPU share) or this long: what arrives meanwhile is delivered at its modelled time.
COMPUTE_NAP_SECONDS = 0.02
LEAD_MAX_SECONDS = 0.0001
LEAD_WEIGHT = 0.1
MIN_STEP_SECONDS = 1e-6
EAGER_BYTES = 16 * 1024  # sent with the header in one MPI message, never acknowledged
SEND_BUFFER_BYTES = 512 * 1024  # a TCP socket's send buffer after Linux autotuning on a LAN
# Sends still in flight, kept here (not on a communicator) so their buffers live until MPI is
# done with them, even after the group's communicator is gone.
_IN_FLIGHT = []
# Jobs that time-share a node run in threads of its rank: one thread at a time adds to or
# tests the sends in flight (MPI forbids completing one request in two threads at once).
_IN_FLIGHT_LOCK = threading.Lock()
# How late this process delivers after a timed sleep (wake-up and progress), a moving
# average: sleeps aim that much early, so deliveries land on time on average. Capped, so a
# host with its cores busy stays late rather than delivering early.
_lead_seconds = 0.0
# Compute phases end on time on average (see emulator.shaping.timing).
_COMPUTE_AIM = Aim(max_seconds=0.001)
POLL_MOVING_SECONDS = 0.00005
_HEADER, _PAYLOAD, _ACK, _EGRESS = 0, 1, 2, 3
_TAG_SLOTS = 4
_HEADER_FORMAT = struct.Struct("dddq")  # send wall time, bytes, sender's open flows, seq
_BUFFER_BITS = SEND_BUFFER_BYTES * 8.0
_NOTE_FORMAT = struct.Struct("dd")  # wall time, sender's open flows from then (or _ENDED)
# A note's count that says "one of my flows ended at this time": every count the sender gave
# for a later time was made before it knew, so it is one too many (see _note_egress).
_ENDED = -1
_NOTICE_FORMAT = struct.Struct("dq?")  # wall time, the send's seq, final (else release)


def _keep(request):
    """Hold a send's request (and so its buffer) until MPI is done with it."""
    with _IN_FLIGHT_LOCK:
        _IN_FLIGHT.append(request)


def _nbytes(buf):
    return memoryview(buf).nbytes


def _as_bytes(buf):
    return memoryview(buf).cast("B")


class Network:
    """Where a communicator's nodes are and how fast the links between them are right now.

    Parameters
    ----------
    pair_mbps : callable
        ``pair_mbps(u, v, scenario_seconds)`` -> Mbit/s; may have ``next_change(u, v, t)``.
    port_mbps : dict
        Port capacity of each node.
    latency_seconds : float
        One-way latency added to every message.
    epoch : float
        Wall-clock time (``time.time()``) at scenario time 0, the same on every rank.
    time_scale : float
        Scenario seconds per wall second.
    """

    def __init__(self, pair_mbps, port_mbps, *, latency_seconds=0.0, epoch=None, time_scale=1.0):
        self.pair_mbps = pair_mbps
        self.port_mbps = port_mbps
        self.latency_seconds = latency_seconds
        self.epoch = time.time() if epoch is None else epoch
        self.time_scale = time_scale

    def scenario_time(self, wall):
        return (wall - self.epoch) * self.time_scale

    def wall_time(self, scenario_seconds):
        return self.epoch + scenario_seconds / self.time_scale

    def rate_bps(self, u, v, wall):
        return self.pair_mbps(u, v, self.scenario_time(wall)) * 1e6

    def next_change_wall(self, u, v, wall):
        nxt = getattr(self.pair_mbps, "next_change", None)
        if nxt is None:
            return math.inf
        t = nxt(u, v, self.scenario_time(wall))
        return math.inf if math.isinf(t) else self.wall_time(t)


class _Flow:
    __slots__ = ("src", "tag", "nbytes", "start", "credit_bits", "remaining_bits", "done_at",
                 "release_at", "released", "acked", "seq", "buffer", "staged", "request",
                 "bound")

    def __init__(self, src, tag, nbytes, start, seq, credit_bits=0.0):
        self.src, self.tag, self.nbytes, self.start, self.seq = src, tag, nbytes, start, seq
        self.credit_bits = credit_bits  # bits the bucket's burst saves at the pair's rate
        self.remaining_bits = nbytes * 8.0 - credit_bits
        self.done_at = None if nbytes else start
        self.release_at = None  # when the remainder fits the sender's buffer
        self.released = self.acked = nbytes <= EAGER_BYTES  # notices to the sender, sent
        self.buffer = None
        self.staged = True  # the payload sits in our buffer, not yet the receiver's
        self.request = None
        self.bound = None


class Request:
    """A pending shaped send or receive; finish it with :meth:`Wait` or :meth:`Test`."""

    def __init__(self, comm, peer, tag, buf=None):
        self.comm, self.peer, self.tag, self.buf = comm, peer, tag, buf
        self.done = False
        self.nbytes = 0
        # a receive's flow start and delivery (last byte plus latency) in the model
        self.start_at = self.due_at = math.nan
        self.flow = None  # the incoming flow bound to this receive
        self._mpi = []

    def Test(self):
        self.comm._progress()
        return self.done

    def Wait(self):
        self.comm._wait_until(lambda: self.done)

    @staticmethod
    def Waitall(requests):
        if requests:
            requests[0].comm._wait_until(lambda: all(r.done for r in requests))

    wait, test = Wait, Test


# Filled in by .engine: the compiled communicator class, and whether to use it now.
COMPILED = {"class": None, "use": None}


def tag_base(comm, context):
    """The first MPI tag of a context's block. Groups that run at once never share a rank,
    so contexts only keep a job apart from the late messages of earlier ones: they are
    reused cyclically within the MPI tag bound."""
    span = _TAG_SLOTS * (COLLECTIVE_TAG_BASE * 2)
    contexts = max(1, (comm.Get_attr(MPI.TAG_UB) + 1) // span)
    return (context % contexts) * span


class ShapedComm(Collectives):
    """An mpi4py-like communicator over a group of node ranks, shaped by :class:`Network`.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        A communicator containing every member (normally a duplicate of COMM_WORLD reserved
        for shaped traffic). Ranks not in ``members`` never see this traffic.
    members : list of int
        Ranks of ``comm`` in this group, in group-rank order.
    nodes : list
        Node name of each member (same order), for bandwidth lookups.
    network : Network
    context : int
        Distinguishes concurrent groups on the same ``comm`` (tags are offset by it).
    timeout_seconds : float
        A wait longer than this raises :class:`NodeFailure` naming the peer.
    doorbells : list, optional
        Doorbell address of each member (same order) when all share this rank's machine
        and network namespace (:func:`emulator.doorbell.place`); without them waits poll.
    bell : Doorbell, optional
        This member's own bell (default the process's): a job in a thread of its own has
        a bell of its own, so a ring wakes the thread it is meant for.
    """

    def __new__(cls, *args, **kwargs):
        # the compiled message path where it binds (.engine registers it on import)
        if cls is ShapedComm and COMPILED["use"] is not None and COMPILED["use"]():
            cls = COMPILED["class"]
        return super().__new__(cls)

    def __init__(self, comm, members, nodes, network, *, context=0, timeout_seconds=120.0,
                 doorbells=None, bell=None):
        self._join(comm, members, nodes, network)
        self.timeout_seconds = timeout_seconds
        self._tag_base = tag_base(comm, context)
        self._flows = []  # incoming, not yet delivered, in arrival order
        self._posted = deque()  # posted receives, in order
        self._sends = {}  # seq -> larger send whose flow is still open (no final notice yet)
        self._seq = 0
        self._clock = None  # wall time up to which the fluid model has run
        self._commit = None  # (wall time, {flow: (remaining bits, done_at)}) at the last delivery
        self._egress = {}  # source -> ([times], [flow counts]) of that sender's egress
        self._finish = math.inf
        self._horizon = math.inf  # wall time of the model's next event
        self._next_release = math.inf  # when the next flow's remainder will fit the buffer
        self._dirty = False  # flows came or went since the model last ran
        self._busy = False
        self._status = MPI.Status()
        self._index = {world: i for i, world in enumerate(self.members)}
        self._port_bps = [network.port_mbps[n] * 1e6 for n in self.nodes]
        self._pair = {}  # source -> (from, until, bit/s): the current piece of the scenario
        self._bucket = {}  # source -> (tokens in bits, busy until): the pair's token bucket
        self._bell = (bell or doorbell.local()) if doorbells else None
        self._bells = doorbells if self._bell is not None else None
        self.bytes_sent = 0
        self.messages_sent = 0
        self._arrivals = 0  # messages taken from MPI so far
        self._open_ring = None  # (monotonic time, arrivals then): a ring, nothing came yet
        # (NodeCPU, job) when compute phases share the node's CPU with other jobs
        self.shared_cpu = None
        # the longest sleep of a wait with doorbells (its safety net)
        self.bell_max_seconds = PYTHON_BELL_MAX_SECONDS

    def _join(self, comm, members, nodes, network):
        """The group: its communicator, members, their nodes, and this rank's place."""
        self.comm = comm
        self.members = list(members)
        self.nodes = list(nodes)
        self.network = network
        self.rank = self.members.index(comm.Get_rank())
        self.size = len(self.members)
        self.node = self.nodes[self.rank]

    # -- mpi4py-like surface -----------------------------------------------------------

    def _mpi_tag(self, tag, slot):
        if not 0 <= tag < 2 * COLLECTIVE_TAG_BASE:
            raise ValueError(f"tag {tag} out of range")
        return self._tag_base + tag * _TAG_SLOTS + slot

    def Isend(self, buf, dest, tag=0):
        req = Request(self, dest, tag)
        data = _as_bytes(buf)
        nbytes = req.nbytes = data.nbytes
        world_dest = self.members[dest]
        now = time.time()
        open_flows = self._sends
        self._seq += 1
        if nbytes <= EAGER_BYTES:
            # header and a copy of the payload in one message, done at once as MPI's eager
            # protocol (the caller may reuse its buffer) and never acknowledged
            packet = bytearray(_HEADER_FORMAT.size + nbytes)
            _HEADER_FORMAT.pack_into(packet, 0, now, nbytes, max(len(open_flows), 1), self._seq)
            packet[_HEADER_FORMAT.size:] = data
            # the request holds the packet, which must outlive this communicator
            _keep(self.comm.Isend(packet, world_dest, self._mpi_tag(tag, _HEADER)))
            req.done = True
        else:
            egress = len(open_flows) + 1
            header = _HEADER_FORMAT.pack(now, nbytes, egress, self._seq)
            req._mpi = [self.comm.Isend(header, world_dest, self._mpi_tag(tag, _HEADER)),
                        self.comm.Isend(data, world_dest, self._mpi_tag(tag, _PAYLOAD))]
            self._announce_egress(now, egress, open_flows.values(), skip=dest)
            req._released = nbytes <= SEND_BUFFER_BYTES  # else: when the receiver says so
            self._sends[self._seq] = req
        self._ring(dest)
        self.bytes_sent += nbytes
        self.messages_sent += 1
        return req

    def _ring(self, peer):
        if self._bells is not None:
            self._bell.ring(self._bells[peer])

    def _announce_egress(self, t, count, flows, skip=None):
        """Tell the receivers of ``flows`` that this sender has ``count`` flows from ``t``
        (``_ENDED``: one flow fewer from ``t`` on)."""
        for peer in sorted({r.peer for r in flows} - {skip}):
            _keep(self.comm.Isend(_NOTE_FORMAT.pack(t, count), self.members[peer],
                                  self._mpi_tag(0, _EGRESS)))
            self._ring(peer)

    def Irecv(self, buf, source, tag=0):
        req = Request(self, source, tag, buf)
        # MPI order: a receive takes the earliest message from (source, tag) that no earlier
        # receive has taken, so a header that came first is bound now, before later ones.
        flow = next((f for f in self._flows if f.src == source and f.tag == tag
                     and f.bound is None), None)
        if flow is not None:
            flow.bound, req.flow = req, flow
        self._posted.append(req)
        return req

    def Send(self, buf, dest, tag=0):
        self.Isend(buf, dest, tag).Wait()

    def Recv(self, buf, source, tag=0):
        self.Irecv(buf, source, tag).Wait()

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=None, recvtag=None):
        source = dest if source is None else source
        recvtag = sendtag if recvtag is None else recvtag
        r = self.Irecv(recvbuf, source, recvtag)
        s = self.Isend(sendbuf, dest, sendtag)
        Request.Waitall([r, s])

    def send(self, obj, dest, tag=0):
        self.Send(pickle.dumps(obj), dest, tag)

    def recv(self, source, tag=0):
        req = self.Irecv(None, source, tag)
        req.Wait()
        return pickle.loads(req.data)

    # -- progress engine ---------------------------------------------------------------

    def _poll_headers(self):
        """Register every header that has arrived. Payload and ack receives are posted before
        their messages can arrive, so the first unmatched message from a source is a header.

        Messages are taken source by source: a member that has moved on to a later group
        may already have sent to this rank, and that message must wait without hiding the
        ones of this group behind it (MPI keeps each source's messages in order)."""
        status = self._status
        while True:
            # A probe that finds nothing still drives MPI's progress, which may bring a
            # message in: probe twice before concluding that nothing came.
            if not (self.comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)
                    or self.comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)):
                return
            world, full_tag = status.Get_source(), status.Get_tag()
            if world in self._index and self._ours(full_tag):
                break
            if full_tag % _TAG_SLOTS not in (_ACK, _EGRESS):
                break  # maybe a later group's: leave it, take this group's source by source
            # a late notice to an earlier group of this node (from anyone): drop it
            self.comm.Recv(bytearray(max(_NOTICE_FORMAT.size, _NOTE_FORMAT.size)), world, full_tag)
        for world in self.members:
            while self.comm.Iprobe(world, MPI.ANY_TAG, status) and self._take(world, status):
                pass

    def _ours(self, full_tag):
        return 0 <= full_tag - self._tag_base < _TAG_SLOTS * 2 * COLLECTIVE_TAG_BASE

    def _take(self, world, status):
        """Receive the probed message from ``world`` if it is this group's (or a late notice
        to an earlier group, dropped); False if it must be left for a later group."""
        full_tag = status.Get_tag()
        mpi_tag = full_tag - self._tag_base
        src = self._index[world]
        ours = self._ours(full_tag)
        if full_tag % _TAG_SLOTS in (_EGRESS, _ACK):
            self._arrivals += 1
        if full_tag % _TAG_SLOTS == _EGRESS:  # context bases are multiples of 4
            note = bytearray(_NOTE_FORMAT.size)
            self.comm.Recv(note, world, full_tag)
            if ours:  # else: a late note to an earlier group of this node; drop it
                t, count = _NOTE_FORMAT.unpack(note)
                self._note_egress(src, t, int(count))
            return True
        if full_tag % _TAG_SLOTS == _ACK:
            notice = bytearray(_NOTICE_FORMAT.size)
            self.comm.Recv(notice, world, full_tag)
            if ours:  # else: a late notice to an earlier group of this node; drop it
                self._on_notice(src, *_NOTICE_FORMAT.unpack(notice))
            return True
        if not ours or mpi_tag % _TAG_SLOTS != _HEADER:
            return False  # a later group's message, or not the emulator's: leave it
        self._arrivals += 1
        tag = mpi_tag // _TAG_SLOTS
        packet = bytearray(status.Get_count(MPI.BYTE))
        self.comm.Recv(packet, world, full_tag)
        start, nbytes, egress, seq = _HEADER_FORMAT.unpack_from(packet)
        nbytes = int(nbytes)
        if nbytes:
            self._note_egress(src, start, int(egress))
        flow = _Flow(src, tag, nbytes, start, seq, self._burst_credit(src, start, nbytes * 8.0))
        # Bind the flow to the first matching posted receive, in order (MPI matching
        # semantics); a large payload then lands in the user's buffer with no extra copy.
        flow.bound = next((r for r in self._posted if r.peer == src and r.tag == tag
                           and r.flow is None), None)
        if flow.bound is not None:
            flow.bound.flow = flow
        if nbytes <= EAGER_BYTES:  # the payload came with the header
            flow.buffer = memoryview(packet)[_HEADER_FORMAT.size:]
        else:
            bound = flow.bound
            if bound is not None and bound.buf is not None and _nbytes(bound.buf) >= nbytes:
                flow.buffer, flow.staged = _as_bytes(bound.buf)[:nbytes], False
            else:
                flow.buffer = bytearray(nbytes)
            flow.request = self.comm.Irecv(flow.buffer, world, self._mpi_tag(tag, _PAYLOAD))
        self._flows.append(flow)
        self._dirty = True
        return True

    def _note_egress(self, src, t, count):
        """From wall time ``t`` on, sender ``src`` has ``count`` flows open; with ``_ENDED``,
        one fewer than it said from ``t`` on.

        A sender counts a flow until its receiver's final notice reaches it, so a count it
        gives (in a header, or when it posts a send) can include a flow that had already
        ended: its next send right after a receive, say. The end comes later, stamped with
        the time the flow ended, and corrects every count given for a time after it."""
        times, counts = self._egress.setdefault(src, ([], []))
        k = bisect.bisect_right(times, t)
        before = counts[k - 1] if k else 1
        if count == _ENDED:
            for i in range(k, len(counts)):
                counts[i] -= 1
            count = before - 1
        elif before == max(1, count):
            return  # no change
        else:
            count = max(1, count)
        times.insert(k, t)
        counts.insert(k, count)
        self._dirty = True

    def _egress_bps(self, src, t):
        """Sender ``src``'s port share per flow at wall time t, and when that next changes."""
        times, counts = self._egress.get(src, ((), ()))
        k = bisect.bisect_right(times, t)
        flows = max(counts[k - 1], 1) if k else 1
        return self._port_bps[src] / flows, (times[k] if k < len(times) else math.inf)

    def _pair_bps(self, src, t):
        """Available bandwidth from ``src`` to this node at wall time t, and when it next
        changes. The scenario is asked once per piece of constant bandwidth."""
        lo, hi, bps = self._pair.get(src, (math.inf, math.inf, 0.0))
        if lo <= t < hi:
            return bps, hi
        node, net = self.nodes[src], self.network
        bps, nxt = net.rate_bps(node, self.node, t), net.next_change_wall(node, self.node, t)
        if t < lo < nxt:  # no change from t up to the known piece: it extends back to t
            nxt = hi
        self._pair[src] = (t, nxt, bps)
        return bps, nxt

    def _burst_credit(self, src, start, bits):
        """What the pair's token bucket saves a new flow: its first bytes, up to the tokens
        saved while the pair was idle, pass at once, as through the kernel's HTB class.
        Returns the bits to take off the flow's size."""
        rate = min(self._pair_bps(src, start)[0], self._port_bps[src])  # the class's rate
        if not bits or rate <= 0:
            return 0.0
        full = burst_bytes(rate / 1e6) * 8.0
        tokens, busy_until = self._bucket.get(src, (full, -math.inf))
        tokens = min(full, tokens + rate * max(0.0, start - busy_until))
        credit = min(tokens, bits)
        self._bucket[src] = (tokens - credit, max(busy_until, start) + (bits - credit) / rate)
        return credit

    def _rates(self, t):
        """Active flows at wall time t, their rates in bit/s (same order), and the time of
        the next change of any of those rates (scenario or sender egress)."""
        active = [f for f in self._flows if f.done_at is None and f.start <= t]
        if not active:
            return active, [], math.inf
        ingress = self._port_bps[self.rank]
        if len(active) == 1:
            src = active[0].src
            pair, pair_change = self._pair_bps(src, t)
            egress, egress_change = self._egress_bps(src, t)
            return active, [min(pair, ingress, egress)], min(pair_change, egress_change)
        per_src = {}
        for f in active:
            per_src[f.src] = per_src.get(f.src, 0) + 1
        ingress /= len(active)
        change = math.inf
        for src, n in per_src.items():
            pair, pair_change = self._pair_bps(src, t)
            egress, egress_change = self._egress_bps(src, t)
            per_src[src] = min(pair / n, ingress, egress)
            change = min(change, pair_change, egress_change)
        return active, [per_src[f.src] for f in active], change

    def _run_model(self, now):
        """Run the fluid model of incoming flows up to wall time ``now``; return the wall
        time of the next completion at the current rates (``inf`` if none).

        Headers become visible a little after their send time (they need MPI progress, and
        can queue behind another message's payload), so the model is re-run on every call
        from the last *commit* (the last delivery, which cannot be undone) with every flow
        known by now. A flow sent before the last commit but seen after it starts at the
        commit time.
        """
        if self._commit is None:
            if not self._flows:
                self._clock, self._horizon, self._next_release = now, math.inf, math.inf
                return math.inf
            self._commit = (min(f.start for f in self._flows), {})
        t, snapshot = self._commit
        for f in self._flows:
            if f in snapshot:
                f.remaining_bits, f.done_at, f.release_at = snapshot[f]
            else:
                f.start = max(f.start, t)
                f.remaining_bits = f.nbytes * 8.0 - f.credit_bits
                f.done_at = None if f.nbytes else f.start
                f.release_at = None
        while True:
            active, rates, change = self._rates(t)
            finish = min((t + f.remaining_bits / r for f, r in zip(active, rates) if r > 0),
                         default=math.inf)
            start = min((f.start for f in self._flows if f.done_at is None and f.start > t),
                        default=math.inf)  # the next flow to start
            if not active and start == math.inf:
                t = max(t, now)  # nothing moves until a new flow comes
            if t >= now:
                self._clock = t
                self._next_release = min((t + (f.remaining_bits - _BUFFER_BITS) / r
                                          for f, r in zip(active, rates)
                                          if f.release_at is None and r > 0), default=math.inf)
                self._horizon = min(finish, change, self._next_release, start)
                return finish
            # Wall times are ~1.7e9 s, where a float64 step is ~0.24 us: never step by less
            # than MIN_STEP_SECONDS, and call a flow done within that much of its end.
            horizon = max(min(now, change, finish, start), t + MIN_STEP_SECONDS)
            for f, r in zip(active, rates):
                before = f.remaining_bits
                f.remaining_bits -= r * (horizon - t)
                if f.remaining_bits <= r * MIN_STEP_SECONDS:
                    f.remaining_bits = 0.0
                    f.done_at = horizon
                if f.release_at is None and \
                        f.remaining_bits <= _BUFFER_BITS + r * MIN_STEP_SECONDS:
                    f.release_at = min(t + (before - _BUFFER_BITS) / r, horizon)
            t = horizon

    def _commit_model(self):
        """Fix the model's state at its clock (after a delivery). With nothing pending there
        is nothing to fix, and the next flow starts at its own send time."""
        self._commit = (self._clock, {f: (f.remaining_bits, f.done_at, f.release_at)
                                      for f in self._flows}) if self._flows else None
        self._dirty = True

    def _notify(self, flow, at, final):
        """Tell a flow's sender that it finished (``final``) or was released at ``at``."""
        _keep(self.comm.Isend(_NOTICE_FORMAT.pack(at, flow.seq, final),
                              self.members[flow.src], self._mpi_tag(flow.tag, _ACK)))
        self._ring(flow.src)

    def _notices(self, now):
        """Send the releases and final acks that are due by ``now``."""
        for f in self._flows:
            if f.acked:
                continue
            if not f.released and f.release_at is not None and f.release_at <= now:
                f.released = True
                if f.nbytes > SEND_BUFFER_BYTES:
                    self._notify(f, f.release_at, False)
            if f.done_at is not None and f.done_at <= now:
                f.acked = f.released = True
                self._notify(f, f.done_at, True)

    def _deliver(self, now):
        """Complete posted receives whose message has been delivered by ``now``, and sends
        that the receiver released or acknowledged."""
        self._notices(now)
        progressed = False
        lead = self._lead()
        for req in list(self._posted):
            flow = req.flow
            if flow is None or flow.done_at is None or flow.request is not None:
                continue  # not arrived, not finished in the model, or payload still moving
            if flow.done_at + self.network.latency_seconds - lead > now:
                continue
            self._flows.remove(flow)
            self._posted.remove(req)
            if req.buf is None:
                req.data = bytes(flow.buffer)
            elif flow.staged:
                target = _as_bytes(req.buf)
                if flow.nbytes > target.nbytes:
                    raise ValueError(f"message of {flow.nbytes} bytes from rank {req.peer} "
                                     f"does not fit a {target.nbytes}-byte buffer")
                target[:flow.nbytes] = flow.buffer
            req.nbytes = flow.nbytes
            req.start_at, req.due_at = flow.start, flow.done_at + self.network.latency_seconds
            req.done = True
            if not flow.acked:
                flow.acked = flow.released = True
                self._notify(flow, flow.done_at, True)
            progressed = True
        if progressed:
            self._commit_model()
        return self._check_sends() or progressed

    def _lead(self):
        """How early a delivery may be aimed: the measured lateness, never before the last
        byte."""
        return min(_lead_seconds, self.network.latency_seconds)

    def _on_notice(self, src, at, seq, final):
        """A receiver released send ``seq`` (its remainder fits the send buffer) or saw its
        last byte at wall time ``at`` (``final``: the flow is over)."""
        req = self._sends.get(seq)
        if req is None or req.peer != src:
            return
        req._released = True
        if final:
            if req._mpi:
                MPI.Request.Waitall(req._mpi)
                req._mpi = []
            req.done = True
            del self._sends[seq]
            self._announce_egress(at, _ENDED, self._sends.values())

    def _check_sends(self):
        """Complete sends once MPI has the payload and their remainder fits the send
        buffer."""
        progressed = False
        for req in self._sends.values():
            if not req.done and req._released and not req._mpi:
                req.done = progressed = True
        return progressed

    def _next_due(self, finish):
        """Wall time of the next delivery (a finished flow's, or the next completion's) or
        release."""
        due = [f.done_at for f in self._flows if f.done_at is not None and f.bound is not None]
        lead = self._lead()
        releases = [f.release_at for f in self._flows
                    if not f.released and f.release_at is not None]
        return min([min(due + [finish]) + self.network.latency_seconds - lead, finish,
                    self._next_release] + releases)

    def _moving(self):
        """Drive the real MPI data movement; True while some payload is still in flight.

        MPICH moves a large message only while both ends are inside MPI, and a small one
        that found the receiver's queue full only while the sender is, so while payloads or
        sends are in flight the waits poll briskly (``POLL_MOVING_SECONDS``) instead of
        sleeping long: that lasts as long as a memory copy, not as long as the emulated
        transfer.
        """
        moving = False
        for f in self._flows:
            if f.request is not None:
                if f.request.Test():
                    f.request = None
                else:
                    moving = True
        if _IN_FLIGHT and _IN_FLIGHT_LOCK.acquire(blocking=False):
            try:
                _IN_FLIGHT[:] = [r for r in _IN_FLIGHT if not r.Test()]
                # a send MPI has not pushed out yet moves only while this rank calls MPI
                moving = moving or bool(_IN_FLIGHT)
            finally:
                _IN_FLIGHT_LOCK.release()
        for req in self._sends.values():
            if req._mpi:
                if MPI.Request.Testall(req._mpi):
                    req._mpi = []
                else:
                    moving = True
        return moving

    def _progress(self):
        self._poll_headers()
        self._busy = self._moving()
        now = time.time()
        if self._dirty or now >= self._horizon:
            self._dirty = False
            self._finish = self._run_model(now)
        return self._deliver(now)

    def _wait_until(self, condition, timeout=None, until=math.inf, nap_max=None):
        """Progress until ``condition()``; never sleep past wall time ``until``.

        With doorbells a wait sleeps until a ring, the next due delivery, the model's next
        event or ``until`` (at most ``BELL_MAX_SECONDS``, a safety net; after a ring that
        brought nothing, briskly for a millisecond); without them it polls,
        with sleeps growing from ``POLL_MIN_SECONDS`` to ``POLL_MAX_SECONDS``. While payloads
        move through MPI it polls every ``POLL_MOVING_SECONDS``.
        """
        global _lead_seconds
        timeout = self.timeout_seconds if timeout is None else timeout
        start = time.monotonic()
        pause = POLL_MIN_SECONDS if self._bell is None else (nap_max or self.bell_max_seconds)
        aim = None  # the wall time a sleep for a due delivery aimed at
        while True:
            if aim is None and condition():  # done already, or woken for ``until``
                return
            if self._progress():
                if self._bell is None:
                    pause = POLL_MIN_SECONDS
                if aim is not None:
                    late = min(max(time.time() - aim, 0.0), LEAD_MAX_SECONDS)
                    _lead_seconds += LEAD_WEIGHT * (late - _lead_seconds)
            aim = None
            if condition():
                return
            if time.monotonic() - start > timeout:
                pending = [*self._posted, *self._sends.values()]
                waiting = sorted({self.nodes[r.peer] for r in pending if not r.done})
                raise NodeFailure(", ".join(map(str, waiting)) or "?",
                                  f"no message within {self.timeout_seconds:.0f} s")
            now = time.time()
            due = self._next_due(self._finish) - now
            nap = POLL_MOVING_SECONDS if self._busy else min(pause, self._early_ring_cap())
            if 0 < due <= nap:
                nap, aim = due, now + due
            # never past the model's next event (a rate change moves the deliveries)
            nap = max(0.0, min(nap, due, until - now, self._horizon - now))
            if self._bell is None:
                time.sleep(nap)
                pause = min(pause * 2, POLL_MAX_SECONDS)
            elif self._bell.wait(nap):
                aim = None  # woken early: no measure of lateness
                self._open_ring = (time.monotonic(), self._arrivals)

    def _early_ring_cap(self):
        """A ring may come before its message is visible to ``Iprobe``: until something
        arrives, or for ``doorbell.EARLY_RING_SECONDS`` after the ring, sleeps are no longer
        than the time since the ring (see :func:`doorbell.early_ring_cap`). Kept across
        waits: a wait may end on the ring's wake-up."""
        if self._open_ring is None:
            return math.inf
        since = time.monotonic() - self._open_ring[0]
        if self._arrivals != self._open_ring[1] or since > doorbell.EARLY_RING_SECONDS:
            self._open_ring = None
            return math.inf
        return doorbell.early_ring_cap(since)

    def compute(self, seconds):
        """Let ``seconds`` of wall time pass while still progressing incoming messages. The
        wait aims early by how late phases have been ending (:class:`emulator.timing.Aim`),
        so phases last ``seconds`` on average. On a time-shared node (``shared_cpu``) the
        phase is ``seconds`` of CPU work at the node's shared pace
        (:mod:`emulator.coordinator.cpushare`)."""
        if self.shared_cpu is not None:
            cpu, job = self.shared_cpu
            # another phase starting or ending rings this job's bell: the pace changed
            wake = None if self._bell is None else (lambda: self._bell.ring(self._bell.address))
            cpu.compute(job, seconds, lambda deadline, version: self._wait_until(
                lambda: time.time() >= deadline or cpu.version != version,
                timeout=deadline - time.time() + self.timeout_seconds, until=deadline,
                nap_max=COMPUTE_NAP_SECONDS), wake=wake)
            return
        _COMPUTE_AIM.pace(seconds, lambda aim: self._wait_until(
            lambda: time.time() >= aim, timeout=seconds + self.timeout_seconds, until=aim))

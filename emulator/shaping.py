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
receivers of its open flows whenever its number of flows changes (a message posted, or one
finished at the time its receiver reports in the ack), so the egress share follows too. Links are full
duplex: the two directions of a pair do not share. A message is delivered ``latency``
after its last byte arrives. Sends of up to ``EAGER_BYTES`` complete at once, as with MPI's
eager protocol; larger sends complete when the receiver has the message (rendezvous), so
the sender feels the same pacing.

The model is evaluated lazily in event order (flow starts, flow completions, scenario
changes). Waiting ranks never spin: every wait polls MPI with ``Test``/``Iprobe`` and sleeps
between polls, and sleeps exactly until the next computed delivery when one is due, so
timing holds on an oversubscribed machine.

Collectives (:mod:`emulator.collectives`) are built from these shaped point-to-point
messages, so they are shaped too.
"""

import bisect
import math
import pickle
import time
from collections import deque

import numpy as np
from mpi4py import MPI

from .collectives import COLLECTIVE_TAG_BASE, Collectives
from .errors import NodeFailure

POLL_MIN_SECONDS = 0.00005
POLL_MAX_SECONDS = 0.0002
MIN_STEP_SECONDS = 1e-6
EAGER_BYTES = 16 * 1024  # sends up to this size complete at once, as MPI's eager protocol
# Sends still in flight, kept here (not on a communicator) so their buffers live until MPI is
# done with them, even after the group's communicator is gone.
_IN_FLIGHT = []
POLL_MOVING_SECONDS = 0.00005
_HEADER, _PAYLOAD, _ACK, _EGRESS = 0, 1, 2, 3
_TAG_SLOTS = 4


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
    __slots__ = ("src", "tag", "nbytes", "start", "remaining_bits", "done_at",
                 "buffer", "request", "bound")

    def __init__(self, src, tag, nbytes, start):
        self.src, self.tag, self.nbytes, self.start = src, tag, nbytes, start
        self.remaining_bits = nbytes * 8.0
        self.done_at = None if nbytes else start
        self.buffer = None
        self.request = None
        self.bound = None


class Request:
    """A pending shaped send or receive; finish it with :meth:`Wait` or :meth:`Test`."""

    def __init__(self, comm, peer, tag, buf=None):
        self.comm, self.peer, self.tag, self.buf = comm, peer, tag, buf
        self.done = False
        self.nbytes = 0
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
    """

    def __init__(self, comm, members, nodes, network, *, context=0, timeout_seconds=120.0):
        self.comm = comm
        self.members = list(members)
        self.nodes = list(nodes)
        self.network = network
        self.rank = self.members.index(comm.Get_rank())
        self.size = len(self.members)
        self.node = self.nodes[self.rank]
        self.timeout_seconds = timeout_seconds
        # Each context owns a block of tags. Groups that run at once never share a rank, so
        # contexts only keep a job apart from the late messages of earlier ones: they are
        # reused cyclically within the MPI tag bound.
        span = _TAG_SLOTS * (COLLECTIVE_TAG_BASE * 2)
        contexts = max(1, (comm.Get_attr(MPI.TAG_UB) + 1) // span)
        self._tag_base = (context % contexts) * span
        self._flows = []  # incoming, not yet delivered, in arrival order
        self._posted = deque()  # posted receives, in order
        self._sends = []  # outstanding sends awaiting an ack
        self._clock = None  # wall time up to which the fluid model has run
        self._commit = None  # (wall time, {flow: (remaining bits, done_at)}) at the last delivery
        self._egress = {}  # source -> ([times], [flow counts]) of that sender's egress
        self._finish = math.inf
        self._busy = False
        self.bytes_sent = 0
        self.messages_sent = 0

    # -- mpi4py-like surface -----------------------------------------------------------

    def _mpi_tag(self, tag, slot):
        if not 0 <= tag < 2 * COLLECTIVE_TAG_BASE:
            raise ValueError(f"tag {tag} out of range")
        return self._tag_base + tag * _TAG_SLOTS + slot

    def Isend(self, buf, dest, tag=0):
        req = Request(self, dest, tag)
        data = _as_bytes(buf)
        nbytes = req.nbytes = data.nbytes
        eager = nbytes <= EAGER_BYTES
        if eager:
            data = bytearray(data)  # the caller may reuse its buffer at once
        world_dest = self.members[dest]
        now = time.time()
        open_flows = [r for r in self._sends if r.nbytes]
        egress = len(open_flows) + (0 if eager else 1)
        header = np.array([now, nbytes, max(egress, 1)], dtype=np.float64)
        req._mpi = [self.comm.Isend(header, world_dest, self._mpi_tag(tag, _HEADER))]
        if nbytes:
            req._mpi.append(self.comm.Isend(data, world_dest, self._mpi_tag(tag, _PAYLOAD)))
        if not eager:
            self._announce_egress(now, egress, open_flows, skip=dest)
        if eager:  # done now, as MPI's eager protocol, and never acknowledged
            req.done = True
            _IN_FLIGHT.extend(req._mpi)  # the buffers must outlive this communicator
            req._mpi = []
        else:
            req._ack = np.empty(1, dtype=np.float64)
            req._ack_req = self.comm.Irecv(req._ack, world_dest, self._mpi_tag(tag, _ACK))
            self._sends.append(req)
        self.bytes_sent += nbytes
        self.messages_sent += 1
        return req

    def _announce_egress(self, t, count, flows, skip=None):
        """Tell the receivers of ``flows`` that this sender has ``count`` flows from ``t``."""
        msg = np.array([t, count], dtype=np.float64)
        for peer in sorted({r.peer for r in flows} - {skip}):
            _IN_FLIGHT.append(self.comm.Isend(msg.copy(), self.members[peer],
                                              self._mpi_tag(0, _EGRESS)))

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
        their messages can arrive, so the first unmatched message from a source is a header."""
        status = MPI.Status()
        while self.comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, status):
            world, mpi_tag = status.Get_source(), status.Get_tag() - self._tag_base
            ours = world in self.members and 0 <= mpi_tag < _TAG_SLOTS * 2 * COLLECTIVE_TAG_BASE
            if status.Get_tag() % _TAG_SLOTS == _EGRESS:  # context bases are multiples of 4
                note = np.empty(2, dtype=np.float64)
                self.comm.Recv(note, world, status.Get_tag())
                if ours:  # else: a late note to an earlier group of this node; drop it
                    self._note_egress(self.members.index(world), float(note[0]), int(note[1]))
                continue
            if not ours or mpi_tag % _TAG_SLOTS != _HEADER:
                break  # not ours; leave it
            src, tag = self.members.index(world), mpi_tag // _TAG_SLOTS
            header = np.empty(3, dtype=np.float64)
            self.comm.Recv(header, world, status.Get_tag())
            if header[1] > 0:
                self._note_egress(src, float(header[0]), int(header[2]))
            start = float(header[0])
            flow = _Flow(src, tag, int(header[1]), start)
            # Bind the flow to the first matching posted receive, in order (MPI matching
            # semantics); its payload then lands in the user's buffer with no extra copy.
            flow.bound = next((r for r in self._posted if r.peer == src and r.tag == tag
                               and r.flow is None), None)
            if flow.bound is not None:
                flow.bound.flow = flow
                if flow.bound.buf is not None and _nbytes(flow.bound.buf) >= flow.nbytes:
                    flow.buffer = _as_bytes(flow.bound.buf)[:flow.nbytes]
            if flow.buffer is None:
                flow.buffer = bytearray(flow.nbytes)
            if flow.nbytes:
                flow.request = self.comm.Irecv(flow.buffer, world, self._mpi_tag(tag, _PAYLOAD))
            self._flows.append(flow)

    def _note_egress(self, src, t, count):
        times, counts = self._egress.setdefault(src, ([], []))
        k = bisect.bisect_right(times, t)
        times.insert(k, t)
        counts.insert(k, max(1, count))

    def _egress_flows(self, src, t):
        times, counts = self._egress.get(src, ((), ()))
        k = bisect.bisect_right(times, t) - 1
        return counts[k] if k >= 0 else 1

    def _next_egress_change(self, src, t):
        times, _ = self._egress.get(src, ((), ()))
        k = bisect.bisect_right(times, t)
        return times[k] if k < len(times) else math.inf

    def _rates(self, t):
        """Active flows at wall time t, their rates in bit/s, and the time of the next
        change of any of those rates (scenario or sender egress)."""
        active = [f for f in self._flows if f.done_at is None and f.start <= t]
        pair_count, rates, change = {}, {}, math.inf
        for f in active:
            pair_count[f.src] = pair_count.get(f.src, 0) + 1
        if active:
            ingress = self.network.port_mbps[self.node] * 1e6 / len(active)
        for f in active:
            src_node = self.nodes[f.src]
            egress = self.network.port_mbps[src_node] * 1e6 / self._egress_flows(f.src, t)
            pair = self.network.rate_bps(src_node, self.node, t) / pair_count[f.src]
            rates[f] = min(pair, ingress, egress)
            change = min(change, self.network.next_change_wall(src_node, self.node, t),
                         self._next_egress_change(f.src, t))
        return active, rates, change

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
                self._clock = now
                return math.inf
            self._commit = (min(f.start for f in self._flows), {})
        t, snapshot = self._commit
        for f in self._flows:
            if f in snapshot:
                f.remaining_bits, f.done_at = snapshot[f]
            else:
                f.start = max(f.start, t)
                f.remaining_bits = f.nbytes * 8.0
                f.done_at = None if f.nbytes else f.start
        while True:
            active, rates, change = self._rates(t)
            finish = min((t + f.remaining_bits / rates[f] for f in active if rates[f] > 0),
                         default=math.inf)
            if t >= now:
                self._clock = t
                return finish
            starts = [f.start for f in self._flows if f.done_at is None and f.start > t]
            # Wall times are ~1.7e9 s, where a float64 step is ~0.24 us: never step by less
            # than MIN_STEP_SECONDS, and call a flow done within that much of its end.
            horizon = max(min([now, change, finish] + starts), t + MIN_STEP_SECONDS)
            for f in active:
                f.remaining_bits -= rates[f] * (horizon - t)
                if f.remaining_bits <= rates[f] * MIN_STEP_SECONDS:
                    f.remaining_bits = 0.0
                    f.done_at = horizon
            t = horizon

    def _commit_model(self):
        """Fix the model's state at its clock (after a delivery). With nothing pending there
        is nothing to fix, and the next flow starts at its own send time."""
        self._commit = (self._clock, {f: (f.remaining_bits, f.done_at) for f in self._flows}) \
            if self._flows else None

    def _deliver(self, now):
        """Complete posted receives whose message has been delivered by ``now``."""
        progressed = False
        for req in list(self._posted):
            flow = req.flow
            if flow is None or flow.done_at is None or flow.request is not None:
                continue  # not arrived, not finished in the model, or payload still moving
            if flow.done_at + self.network.latency_seconds > now:
                continue
            self._flows.remove(flow)
            self._posted.remove(req)
            if req.buf is None:
                req.data = bytes(flow.buffer)
            elif flow.buffer.__class__ is bytearray:  # staged: it came before the receive
                target = _as_bytes(req.buf)
                if flow.nbytes > target.nbytes:
                    raise ValueError(f"message of {flow.nbytes} bytes from rank {req.peer} "
                                     f"does not fit a {target.nbytes}-byte buffer")
                target[:flow.nbytes] = flow.buffer
            req.nbytes = flow.nbytes
            req.done = True
            if flow.nbytes > EAGER_BYTES:  # rendezvous: the sender waits for this
                self.comm.Send(np.array([flow.done_at], dtype=np.float64),
                               self.members[req.peer], self._mpi_tag(req.tag, _ACK))
            progressed = True
        if progressed:
            self._commit_model()
        for req in list(self._sends):
            if req._ack_req.Test():
                if req._mpi:
                    MPI.Request.Waitall(req._mpi)
                    req._mpi = []
                req.done = True
                self._sends.remove(req)
                progressed = True
                if req.nbytes:
                    still_open = [r for r in self._sends if r.nbytes]
                    self._announce_egress(float(req._ack[0]), len(still_open), still_open)
        return progressed

    def _next_due(self, finish):
        """Wall time of the next delivery: a finished flow's, or the next completion's."""
        due = [f.done_at for f in self._flows if f.done_at is not None] + [finish]
        return min(due) + self.network.latency_seconds

    def _moving(self):
        """Drive the real MPI data movement; True while some payload is still in flight.

        MPICH moves a large message only while both ends are inside MPI, so while payloads
        are in flight the waits poll briskly (``POLL_MOVING_SECONDS``) instead of sleeping
        long: that lasts as long as a memory copy, not as long as the emulated transfer.
        """
        moving = False
        for f in self._flows:
            if f.request is not None:
                if f.request.Test():
                    f.request = None
                else:
                    moving = True
        _IN_FLIGHT[:] = [r for r in _IN_FLIGHT if not r.Test()]
        for req in self._sends:
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
        self._finish = self._run_model(now)
        return self._deliver(now)

    def _wait_until(self, condition, timeout=None):
        timeout = self.timeout_seconds if timeout is None else timeout
        start = time.monotonic()
        pause = POLL_MIN_SECONDS
        while True:
            if self._progress():
                pause = POLL_MIN_SECONDS
            if condition():
                return
            if time.monotonic() - start > timeout:
                waiting = sorted({self.nodes[r.peer] for r in list(self._posted) + self._sends
                                  if not r.done})
                raise NodeFailure(", ".join(map(str, waiting)) or "?",
                                  f"no message within {self.timeout_seconds:.0f} s")
            nap = min(POLL_MOVING_SECONDS if self._busy else pause,
                      max(0.0, self._next_due(self._finish) - time.time()))
            time.sleep(nap)
            pause = min(pause * 2, POLL_MAX_SECONDS)

    def compute(self, seconds):
        """Let ``seconds`` of wall time pass while still progressing incoming messages."""
        end = time.time() + seconds
        self._wait_until(lambda: time.time() >= end, timeout=seconds + self.timeout_seconds)

"""In-process traffic shaping: a communicator whose messages take the emulated network's time.

Model
-----
Each message is a *flow* from its sender's node to its receiver's node in the cluster's one
fluid model (:mod:`emulator.network.sharing`): every active flow of every job and
communicator, and every background flow, shares every link it crosses, max-min fair, and
the rates are solved again whenever a flow starts or ends or the scenario changes. All ranks
of a machine map one model in MPI shared memory (:mod:`emulator.shaping.window`). The
payload moves through MPI at once (into a buffer at the receiver); what is emulated is
*when* it is delivered: ``latency`` after the model has moved its last byte. Each pair is a
token bucket, as the kernel's HTB class for it: after an idle spell the first bytes of a
message, up to the bucket (about two frames), pass at once. A send completes once what its
flow has not yet moved fits the sender's socket buffer (``SEND_BUFFER_BYTES``), as with MPI
over TCP: a message that fits completes at once and the sender moves on while it drains; a
larger one holds the sender until its remainder fits.

The sender registers the flow in the model and sends a 32-byte header naming it (the
flow's start, its size, its slot in the model) with the payload, or before it; the
receiver reads its flows' state from the model whenever it looks. Waiting ranks never spin:
a wait sleeps until its next delivery, its flow's projected end, a release or the
scenario's next change, or until a peer on the same machine rings its doorbell
(:mod:`emulator.shaping.doorbell`): a sender rings after sending, and the model rings a
party whose flow a re-solve brought earlier than it last read. Sleeps for a delivery aim
early by how late this process has been waking (a moving average, at most
``LEAD_MAX_SECONDS`` and never before the last byte), so deliveries land on time on average.

With time dilation K (``Network.dilation``) one emulated second lasts K wall seconds: the
model's capacities are divided by K, latencies and compute phases multiplied by K.

Collectives (:mod:`emulator.shaping.collectives`) are built from these shaped point-to-point
messages, so they are shaped too.

This module is the message path's reference in Python and its fallback. Where the compiled
one binds to the MPI library (:mod:`emulator.shaping.engine`), ``ShapedComm(...)`` makes a
:class:`~emulator.shaping.engine.CompiledShapedComm`: the same wire format and waits, over
the same model, with the per-message work in C.
"""

import math
import pickle
import struct
import threading
import time
from collections import deque

from mpi4py import MPI

from ..errors import NodeFailure
from ..network import _fluid
from . import doorbell
from .collectives import COLLECTIVE_TAG_BASE, Collectives
from .network import Network  # noqa: F401  (also imported from here)
from .timing import Aim

POLL_MIN_SECONDS = 0.00005
POLL_MAX_SECONDS = 0.0002
# With doorbells a wait sleeps until a ring, its next event, or at most this long (a safety
# net); for doorbell.EARLY_RING_SECONDS after a ring that brought nothing (it may have come
# before its message) it sleeps no longer than the time since the ring.
BELL_MAX_SECONDS = 0.01
# The Python path keeps a 1 ms net.
PYTHON_BELL_MAX_SECONDS = 0.001
# A compute phase on a time-shared node sleeps until its end, a ring (a message, or a change
# of its CPU share) or this long: what arrives meanwhile is delivered at its modelled time.
COMPUTE_NAP_SECONDS = 0.02
LEAD_MAX_SECONDS = 0.0001
LEAD_WEIGHT = 0.1
EAGER_BYTES = 16 * 1024  # sent with the header in one MPI message
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
_HEADER, _PAYLOAD = 0, 1
_TAG_SLOTS = 2
_HEADER_FORMAT = struct.Struct("ddqq")  # the flow's start (wall), bytes, model slot, generation


def _keep(request):
    """Hold a send's request (and so its buffer) until MPI is done with it."""
    with _IN_FLIGHT_LOCK:
        _IN_FLIGHT.append(request)


def _nbytes(buf):
    return memoryview(buf).nbytes


def _as_bytes(buf):
    return memoryview(buf).cast("B")


class _Flow:
    """An incoming message: its flow in the model and its payload."""

    __slots__ = ("src", "tag", "nbytes", "slot", "gen", "start", "end", "wake", "done",
                 "buffer", "staged", "request", "bound")

    def __init__(self, src, tag, nbytes, start, slot, gen):
        self.src, self.tag, self.nbytes, self.start = src, tag, nbytes, start
        self.slot, self.gen = slot, gen
        self.end = self.wake = None
        self.done = False
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
        self._slot = None  # a larger send's flow in the model, held until released
        self._released = True
        self._wake = math.inf

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
        Node name of each member (same order), nodes of the network's model.
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
        self._sends = []  # larger sends not yet done
        self._drops = []  # (slot, gen, party): references to give back to the model
        self._busy = False
        self._status = MPI.Status()
        self._index = {world: i for i, world in enumerate(self.members)}
        self._bell = (bell or doorbell.local()) if doorbells else None
        self._bells = doorbells if self._bell is not None else None
        self.bytes_sent = 0
        self.messages_sent = 0
        self._arrivals = 0  # messages taken from MPI so far
        self._open_ring = None  # (monotonic time, arrivals then): a ring, nothing came yet
        # (the node's CPU, job) when compute phases share it with other jobs or a local user
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
        index = network.model.index
        missing = [n for n in self.nodes if n not in index]
        if missing:
            raise ValueError(f"nodes {missing} are not in the network's model")
        self._model_nodes = [index[n] for n in self.nodes]
        self._fluid = network.model.fluid
        # the wall latency of a message from each member to this rank
        self._latency = network.wall_latencies_to(self.node, self.nodes)

    @property
    def dilation(self):
        """Wall seconds per emulated second."""
        return self.network.dilation

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
        holds = nbytes > SEND_BUFFER_BYTES
        bells = self._bells
        slot, gen, start = self._fluid.add(
            time.time(), self._model_nodes[self.rank], self._model_nodes[dest], nbytes * 8.0,
            refs=1 + holds, sender_bell=bells[self.rank] if bells and holds else None,
            receiver_bell=bells[dest] if bells else None)
        header = _HEADER_FORMAT.pack(start, nbytes, slot, gen)
        if nbytes <= EAGER_BYTES:
            # header and a copy of the payload in one message, done at once as MPI's eager
            # protocol (the caller may reuse its buffer)
            packet = bytearray(header) + data
            # the request holds the packet, which must outlive this communicator
            _keep(self.comm.Isend(packet, world_dest, self._mpi_tag(tag, _HEADER)))
            req.done = True
        else:
            req._mpi = [self.comm.Isend(header, world_dest, self._mpi_tag(tag, _HEADER)),
                        self.comm.Isend(data, world_dest, self._mpi_tag(tag, _PAYLOAD))]
            req._released = not holds  # else: when what is left fits the send buffer
            if holds:
                req._slot, req._wake = (slot, gen), start
            self._sends.append(req)
        self._ring(dest)
        self.bytes_sent += nbytes
        self.messages_sent += 1
        return req

    def _ring(self, peer):
        if self._bells is not None:
            self._bell.ring(self._bells[peer])

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

    def wait_any(self, requests, *, until=math.inf, timeout=None):
        """Wait until one of ``requests`` is done, or wall time ``until``; the indices of
        those done."""
        self._wait_until(lambda: time.time() >= until or any(r.done for r in requests),
                         timeout=timeout, until=until)
        return [i for i, r in enumerate(requests) if r.done]

    def send(self, obj, dest, tag=0):
        self.Send(pickle.dumps(obj), dest, tag)

    def recv(self, source, tag=0):
        req = self.Irecv(None, source, tag)
        req.Wait()
        return pickle.loads(req.data)

    # -- progress engine ---------------------------------------------------------------

    def _poll_headers(self):
        """Register every header that has arrived. Payload receives are posted when their
        header is taken, so the first unmatched message from a source is a header.

        Messages are taken source by source: a member that has moved on to a later group
        may already have sent to this rank, and that message must wait without hiding the
        ones of this group behind it (MPI keeps each source's messages in order)."""
        status = self._status
        # A probe that finds nothing still drives MPI's progress, which may bring a message
        # in: probe twice before concluding that nothing came.
        if not (self.comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)
                or self.comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)):
            return
        for world in self.members:
            while self.comm.Iprobe(world, MPI.ANY_TAG, status) and self._take(world, status):
                pass

    def _ours(self, full_tag):
        return 0 <= full_tag - self._tag_base < _TAG_SLOTS * 2 * COLLECTIVE_TAG_BASE

    def _take(self, world, status):
        """Receive the probed header from ``world`` if it is this group's; False if it must
        be left for a later group."""
        full_tag = status.Get_tag()
        mpi_tag = full_tag - self._tag_base
        if not self._ours(full_tag) or mpi_tag % _TAG_SLOTS != _HEADER:
            return False  # a later group's message, or not the emulator's: leave it
        self._arrivals += 1
        src, tag = self._index[world], mpi_tag // _TAG_SLOTS
        packet = bytearray(status.Get_count(MPI.BYTE))
        self.comm.Recv(packet, world, full_tag)
        start, nbytes, slot, gen = _HEADER_FORMAT.unpack_from(packet)
        nbytes = int(nbytes)
        flow = _Flow(src, tag, nbytes, start, slot, gen)
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
        return True

    def _look(self, now):
        """Read the model: the state of every incoming flow not yet done and of every send
        not yet released; give back the references let go of since the last look."""
        fluid = self._fluid
        for slot, gen, party in self._drops:
            fluid.drop(slot, gen, party=party)
        self._drops.clear()
        for f in self._flows:
            if not f.done:
                view = fluid.view(f.slot, f.gen, wall=now, party=_fluid.RECEIVER)
                f.done, f.end = view["done"], view["end"]
                f.wake = f.end if f.done else min(f.end, view["next_change"])
        for req in self._sends:
            if req._slot is not None:
                view = fluid.view(*req._slot, wall=now, party=_fluid.SENDER)
                if view["released"]:
                    req._released = True
                    fluid.drop(*req._slot, party=_fluid.SENDER)
                    req._slot = None
                else:
                    req._wake = min(view["release"], view["next_change"])

    def _deliver(self, now):
        """Complete posted receives whose message has been delivered by ``now``, and sends
        that are released and moved."""
        progressed = False
        for req in list(self._posted):
            flow = req.flow
            if flow is None or not flow.done or flow.request is not None:
                continue  # not arrived, not finished in the model, or payload still moving
            if flow.end + self._latency[flow.src] - self._lead(flow.src) > now:
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
            req.start_at, req.due_at = flow.start, flow.end + self._latency[flow.src]
            req.done = True
            self._drops.append((flow.slot, flow.gen, _fluid.RECEIVER))
            progressed = True
        for req in self._sends:
            if not req.done and req._released and not req._mpi:
                req.done = progressed = True
        self._sends = [r for r in self._sends if not r.done]
        return progressed

    def _lead(self, src):
        """How early a delivery from member ``src`` may be aimed: the measured lateness,
        never before the last byte."""
        return min(_lead_seconds, self._latency[src])

    def _next_due(self):
        """Wall time to look again: the next delivery, a flow's end or release, or the
        scenario's next change."""
        # a message no receive has taken waits for one
        due = [f.end + self._latency[f.src] - self._lead(f.src) if f.done else f.wake
               for f in self._flows
               if f.wake is not None and (f.bound is not None or not f.done)]
        due += [r._wake for r in self._sends if r._slot is not None]
        return min(due, default=math.inf)

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
        self._look(now)
        return self._deliver(now)

    def _wait_until(self, condition, timeout=None, until=math.inf, nap_max=None):
        """Progress until ``condition()``; never sleep past wall time ``until``.

        With doorbells a wait sleeps until a ring, the next due delivery or event, or
        ``until`` (at most ``bell_max_seconds``, a safety net; after a ring that brought
        nothing, briskly for a while); without them it polls, with sleeps growing from
        ``POLL_MIN_SECONDS`` to ``POLL_MAX_SECONDS``. While payloads move through MPI it
        polls every ``POLL_MOVING_SECONDS``.
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
                pending = [*self._posted, *self._sends]
                waiting = sorted({self.nodes[r.peer] for r in pending if not r.done})
                raise NodeFailure(", ".join(map(str, waiting)) or "?",
                                  f"no message within {self.timeout_seconds:.0f} s")
            now = time.time()
            due = self._next_due() - now
            nap = POLL_MOVING_SECONDS if self._busy else min(pause, self._early_ring_cap())
            if 0 < due <= nap:
                nap, aim = due, now + due
            nap = max(0.0, min(nap, due, until - now))
            if self._bell is None:
                time.sleep(nap)
                pause = min(pause * 2, POLL_MAX_SECONDS)
            elif self._bell.wait(nap):
                aim = None  # woken early: no measure of lateness
                self._open_ring = (time.monotonic(), self._arrivals)

    def __del__(self):
        """Give the model back every reference this communicator still holds."""
        try:
            fluid = self._fluid
        except AttributeError:
            return
        held = [*self._drops, *((f.slot, f.gen, _fluid.RECEIVER) for f in self._flows),
                *((*r._slot, _fluid.SENDER) for r in self._sends if r._slot is not None)]
        try:
            for slot, gen, party in held:
                fluid.drop(slot, gen, party=party)
        except RuntimeError:
            pass  # the model was closed first (the run is over)

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
        """A compute phase of ``seconds`` (emulated), progressing incoming messages
        meanwhile. On a node whose CPU is shared (``shared_cpu``: other jobs, a local user)
        the node's CPU decides when it ends (:mod:`emulator.coordinator.cpushare`); alone on
        its CPU it lasts ``seconds`` times the dilation of wall time, aimed early by how
        late phases have been ending (:class:`emulator.timing.Aim`), so phases last
        ``seconds`` on average."""
        if self.shared_cpu is not None:
            cpu, job = self.shared_cpu
            # the model rings this job's bell when a re-solve brings the phase's end earlier
            bell = None if self._bell is None else self._bell.address

            def wait_until(end, changed):
                self._wait_until(lambda: time.time() >= end or changed(),
                                 timeout=max(end - time.time(), 0.0) + self.timeout_seconds,
                                 until=end, nap_max=COMPUTE_NAP_SECONDS)

            cpu.compute(job, seconds, wait_until, bell=bell)
            return
        seconds *= self.dilation
        _COMPUTE_AIM.pace(seconds, lambda aim: self._wait_until(
            lambda: time.time() >= aim, timeout=seconds + self.timeout_seconds, until=aim))

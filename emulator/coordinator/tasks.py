"""The work node ranks run for the coordinator, by name: a registry of work functions
``fn(comm, **kwargs) -> result`` (:func:`work` adds one) and the built-in ones: bandwidth
probes, transfers, timed flows and NAS skeletons, each run on a group's shaped
communicator."""

import math
import time

import numpy as np

from skeletons.comm import MPIComm, wait_all  # noqa: E402  (plain communicators, no spinning)

WORK = {}


def work(fn):
    """Register a work function ``fn(comm, **kwargs) -> result`` by its name."""
    WORK[fn.__name__] = fn
    return fn


@work
def probe(comm, *, size_bytes=1 << 20, repetitions=1):
    """Bandwidth probe between the group's two ranks. Rank 1 says it is ready (so a receiver
    that woke late on a busy host is not timed), then rank 0 sends ``size_bytes`` with its
    send time in the first 8 bytes; rank 1 takes the time of receipt and returns the
    achieved Mbit/s of each repetition (timed at the receiver; clocks of one host, or
    synchronised clocks on a real cluster), per emulated second."""
    buf = np.ones(max(size_bytes, 8), dtype=np.uint8)  # touched: no page faults mid-copy
    stamp = buf[:8].view(np.float64)
    ready = np.zeros(1, dtype=np.uint8)
    rates = []
    for rep in range(repetitions):
        if comm.rank == 0:
            comm.Recv(ready, 1, tag=1)
            stamp[0] = time.time()
            comm.Send(buf, 1, tag=2 + rep)
        else:
            comm.Send(ready, 0, tag=1)
            comm.Recv(buf, 0, tag=2 + rep)
            seconds = (time.time() - float(stamp[0])) / comm.dilation
            rates.append(buf.nbytes * 8 / seconds / 1e6)
    return rates if comm.rank == 1 else None


@work
def transfer(comm, *, size_bytes, flows=1):
    """``flows`` concurrent messages of ``size_bytes`` from group rank 0 to rank 1. The send
    time rides in the first message; rank 1 returns the seconds from it to the last
    delivery."""
    bufs = [np.ones(max(size_bytes, 8), dtype=np.uint8) for _ in range(flows)]  # pre-faulted
    stamp = bufs[0][:8].view(np.float64)
    if comm.rank == 0:
        stamp[0] = time.time()
        wait_all([comm.Isend(b, 1, tag=10 + i) for i, b in enumerate(bufs)])
        return None
    wait_all([comm.Irecv(b, 0, tag=10 + i) for i, b in enumerate(bufs)])
    return (time.time() - float(stamp[0])) / comm.dilation


FLOW_POLL_SECONDS = 0.001


@work
def flows(comm, *, flows, start_wall, timeout_seconds):
    """The flows of ``nodesel flows``: ``flows`` is a list of ``(id, start_seconds, src,
    dst, size_bytes)`` with group ranks. Each rank sends its flows as one message each at
    wall time ``start_wall`` + start_seconds (dilated), and takes the time each of its incoming
    flows is delivered. Returns ``{"ends": {id: delivery wall time} of the flows it received,
    "ready_wall": when it could send and receive}``; a flow whose sender or receiver was
    not ready in time may be late (:func:`late_flows`)."""
    me, dilation = comm.rank, comm.dilation
    if isinstance(comm, MPIComm):
        # real traffic: tests every millisecond at most, which times flows of tens of ms
        # well and leaves the cores to the kernel's TCP (at 0.2 ms, twelve ranks polling on
        # two cores delayed some flows by a third)
        comm.poll_max_seconds = FLOW_POLL_SECONDS
    out = sorted((f for f in flows if f[2] == me), key=lambda f: (f[1], f[0]))
    # a source's messages come in the order it sends them (MPI's order on one tag)
    incoming = sorted((f for f in flows if f[3] == me), key=lambda f: (f[2], f[1], f[0]))
    payload = np.ones(max((f[4] for f in out), default=1), dtype=np.uint8)  # pre-faulted
    # one byte each way between every pair that has a flow, before the clock starts: real
    # MPI connects a pair on its first message (TCP and the transport's wire-up), which
    # would land on the first flow's time
    peers = sorted({f[3] for f in out} | {f[2] for f in incoming})
    hello = [np.zeros(1, dtype=np.uint8) for _ in range(2 * len(peers))]
    wait_all([comm.Irecv(hello[2 * k], p, tag=1) for k, p in enumerate(peers)]
             + [comm.Isend(hello[2 * k + 1], p, tag=1) for k, p in enumerate(peers)])
    comm.Barrier()
    ids = [f[0] for f in incoming]
    # pre-faulted too: MPI copies a payload in one call, and into fresh pages that took 20-30
    # ms with 13 ranks on 2 cores, the rank's own sends due meanwhile leaving that late
    pending = [comm.Irecv(np.ones(f[4], dtype=np.uint8), f[2], tag=0) for f in incoming]
    ready = time.time()
    sends, ends = [], {}
    deadline = time.monotonic() + timeout_seconds
    while pending or out:
        due = start_wall + out[0][1] * dilation if out else math.inf
        left = max(deadline - time.monotonic(), 0.0)
        done = comm.wait_any(pending, until=due, timeout=left)
        now = time.time()
        ends.update((ids[i], now) for i in done)
        ids = [fid for i, fid in enumerate(ids) if i not in done]
        pending = [r for i, r in enumerate(pending) if i not in done]
        while out and time.time() >= start_wall + out[0][1] * dilation:
            _, _, _, dst, size = out.pop(0)
            sends.append(comm.Isend(payload[:size], dst, tag=0))
    wait_all(sends)
    return {"ends": ends, "ready_wall": ready}


def late_flows(flows: list, ready_seconds: dict, model_ends: list) -> dict:
    """``{flow id: seconds}`` of the flows a rank not ready in time may have made late: the
    sender ready after the flow's start, or the receiver after the flow's end in the model;
    the seconds are the larger gap. ``flows`` as :func:`flows` takes them,
    ``ready_seconds`` the time each group rank was ready and ``model_ends`` each flow's end
    in the model, on the flows' clock (emulated seconds).

    >>> flows = [(0, 0.0, 1, 2, 10), (1, 0.5, 1, 2, 10), (2, 0.0, 2, 1, 10)]
    >>> late_flows(flows, {1: 0.25, 2: 0.0}, [0.375, 0.75, 0.125])  # rank 1 ready at 0.25 s
    {0: 0.25, 2: 0.125}
    """
    late = {}
    for (fid, start, src, dst, _), end in zip(flows, model_ends):
        gap = max(ready_seconds[src] - start, ready_seconds[dst] - end)
        if gap > 0:
            late[fid] = gap
    return late


@work
def skeleton(comm, *, name, npb_class="S", iterations=None, compute="modeled"):
    """Run a NAS skeleton (:mod:`skeletons`) on the shaped group; returns its result."""
    from skeletons import run

    return run(name, comm, npb_class, compute=compute, iterations=iterations).to_json()


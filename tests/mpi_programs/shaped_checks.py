"""Shaped-communicator checks, run under mpiexec with 5 ranks; rank 0 prints JSON results.

Ranks 1..4 are nodes n1..n4 of a crossbar (ports of 100, 100, 1000 and 1000 Mbit/s); rank 0
only collects (and sets the model's clock). Pairs n1-n2 have 10 Mbit/s, n3-n4 100 Mbit/s
until CHANGE_AT scenario seconds and 25 after, the others 100. All ranks share the cluster's
one model in MPI shared memory. Every check is timed at the receiver with the sender's
timestamp carried in the message. Groups wake each other with doorbells, as the runtime's
do, except where a check says it polls.
"""

import json
import sys
import time

import numpy as np
from mpi4py import MPI

from emulator.network.cluster import cluster_from_dict, crossbar
from emulator.network.cluster import links as cluster_links
from emulator.network.scenario import Timeline
from emulator.shaping import doorbell
from emulator.shaping.comm import SEND_BUFFER_BYTES, Network, ShapedComm
from emulator.shaping.window import shared_model

world = MPI.COMM_WORLD
rank = world.Get_rank()
NODES = ["n1", "n2", "n3", "n4"]
MEMBERS = [1, 2, 3, 4]
CHANGE_AT = 1000.0  # scenario seconds; the clock is moved there for check 5

cluster = crossbar(NODES, capacity_mbps=100.0, latency_ms=0.0)
for n in ("n3", "n4"):
    cluster.nodes[n]["capacity_mbps"] = 1000.0
LINKS = cluster_links(cluster)
BANDWIDTH = {frozenset(("n1", "n2")): 10.0, frozenset(("n3", "n4")): 100.0}
timeline = Timeline(LINKS, [BANDWIDTH.get(frozenset((a, b)), 100.0) for a, b, _ in LINKS],
                    [(CHANGE_AT, [frozenset((a, b)) for a, b, _ in LINKS].index(
                        frozenset(("n3", "n4"))), 25.0)], {"kind": "trace"})
model = shared_model(world, cluster, timeline)
epoch = world.bcast(time.time())
if rank == 0:
    model.set_clock(epoch=epoch)
world.Barrier()
network = Network(model, latency_seconds=0.0)
results = {}
data = world.Dup()
BELLS = world.allgather(doorbell.local().address)


def group(members, context, bells=True):
    if rank not in members:
        return None
    return ShapedComm(data, members, [NODES[m - 1] for m in members], network,
                      context=context, timeout_seconds=60,
                      doorbells=[BELLS[m] for m in members] if bells else None)


def timed_transfer(comm, size, flows=1, dests=(1,)):
    """Rank 0 of ``comm`` sends ``flows`` messages to each of ``dests``; each receiver
    returns seconds from the send stamp to its last delivery."""
    if comm.rank == 0:
        bufs = [np.ones(size, dtype=np.uint8) for _ in range(flows * len(dests))]
        stamp = time.time()
        for b in bufs:
            b[:8].view(np.float64)[0] = stamp
        reqs = [comm.Isend(b, d, tag=5 + i) for i, (b, d) in
                enumerate(zip(bufs, [d for d in dests for _ in range(flows)]))]
        reqs[0].Waitall(reqs)
        return None
    if comm.rank in dests:
        bufs = [np.empty(size, dtype=np.uint8) for _ in range(flows)]
        k = dests.index(comm.rank)
        reqs = [comm.Irecv(b, 0, tag=5 + k * flows + i) for i, b in enumerate(bufs)]
        reqs[0].Waitall(reqs)
        global LAST_SEND_STAMP
        LAST_SEND_STAMP = float(bufs[0][:8].view(np.float64)[0])
        return time.time() - LAST_SEND_STAMP
    return None


def report(name, value):
    """Gather a check's values; no rank starts the next check before all are done (a sender
    whose messages fit the send buffer moves on while they are still being received)."""
    values = world.gather(value, root=0)
    if rank == 0:
        results[name] = [v for v in values if v is not None]
    world.Barrier()


def send_and_receive(comm, size, behind=0):
    """Rank 0 sends ``size`` bytes to rank 1 (right behind a message of ``behind`` bytes):
    seconds until the send completed at the sender, and until delivery at the receiver
    (both from the send stamp; the receiver's also as the model gave it)."""
    buf, first = np.ones(size, dtype=np.uint8), np.ones(behind, dtype=np.uint8)
    if comm.rank == 0:
        reqs = [comm.Isend(first, 1, tag=8)] if behind else []
        stamp = time.time()
        buf[:8].view(np.float64)[0] = stamp
        reqs.append(comm.Isend(buf, 1, tag=9))
        reqs[0].Waitall(reqs)
        return ("sent", time.time() - stamp)
    reqs = [comm.Irecv(first, 0, tag=8)] if behind else []
    req = comm.Irecv(buf, 0, tag=9)
    req.Wait()
    delivered = time.time() - float(buf[:8].view(np.float64)[0])
    if reqs:
        reqs[0].Wait()
    return ("delivered", delivered, req.due_at - req.start_at)  # wall; the model's


MiB = 1 << 20
c = group([1, 2, 3, 4], 14)
report("engine", type(c).__name__ if c else None)  # which message path the run used
results["model"] = type(model).__name__  # one machine's shared model, or the served one
# 1. one flow, 1 MiB at 10 Mbit/s (n1 -> n2), with doorbells and with polling alone
c = group([1, 2], 1)
report("one_flow_10", timed_transfer(c, MiB) if c else None)
c = group([1, 2], 11, bells=False)
report("one_flow_10_polled", timed_transfer(c, MiB) if c else None)
# 2. four concurrent flows of 1 MiB on the 100 Mbit/s pair n3 -> n4
c = group([3, 4], 2)
report("four_flows_100", timed_transfer(c, MiB, flows=4) if c else None)
# 3. port sharing: n1 sends 1 MiB to n3 and n4 at once; pairs 100, n1's port 100
c = group([1, 3, 4], 3)
report("port_shared", timed_transfer(c, MiB, dests=(1, 2)) if c else None)
# 4. disjoint groups at once: n1->n2 (10) and n3->n4 (100) concurrently
c = group([1, 2], 4) if rank in (1, 2) else group([3, 4], 5)
size = MiB // 8 if rank in (1, 2) else (5 * MiB) // 4  # both ~0.105 s alone
report("concurrent_groups", (NODES[rank - 1], timed_transfer(c, size)) if c else None)
# 5. bandwidth change 100 -> 25 Mbit/s 0.2 s into a 4 MiB message n3 -> n4: the model's clock
# is set so that the change comes 0.5 s from now, and the message leaves 0.3 s from now
epoch = world.bcast(time.time() - (CHANGE_AT - 0.5))
if rank == 0:
    model.set_clock(epoch=epoch)
world.Barrier()
start_at = CHANGE_AT - 0.2
c = group([3, 4], 6)
if c:
    c.compute(max(0.0, epoch + start_at - time.time()))
seconds = timed_transfer(c, 4 * MiB) if c else None
# the change comes CHANGE_AT - (send time) into the message (time scale 1)
report("changed", [seconds, CHANGE_AT - (LAST_SEND_STAMP - epoch)] if seconds else None)
# 6. collectives on 4 ranks and on 3 ranks (non-power of two): values must be right
for members, context in (([1, 2, 3, 4], 7), ([2, 3, 4], 8)):
    c = group(members, context)
    if c:
        n, r = c.size, c.rank
        out = np.zeros(3)
        c.Allreduce(np.full(3, r + 1.0), out)
        ok = bool(np.all(out == n * (n + 1) / 2))
        red = np.zeros(2)
        c.Reduce(np.full(2, float(r)), red, op=MPI.MAX, root=n - 1)
        ok &= (r != n - 1) or bool(np.all(red == n - 1))
        b = np.arange(4.0) if r == 1 else np.zeros(4)
        c.Bcast(b, root=1)
        ok &= bool(np.all(b == np.arange(4.0)))
        g = np.zeros(n * 2, dtype=np.int64)
        c.Allgather(np.array([r, 10 * r]), g)
        ok &= g.tolist() == [v for i in range(n) for v in (i, 10 * i)]
        a = np.zeros(n, dtype=np.int64)
        c.Alltoall(np.array([100 * r + d for d in range(n)]), a)
        ok &= a.tolist() == [100 * s + r for s in range(n)]
        counts = [d + 1 for d in range(n)]
        sendv = np.concatenate([np.full(d + 1, r) for d in range(n)])
        rcounts = [r + 1] * n
        recvv = np.zeros(sum(rcounts), dtype=sendv.dtype)
        c.Alltoallv(sendv, counts, recvv, rcounts)
        ok &= recvv.tolist() == [s for s in range(n) for _ in range(r + 1)]
        c.Barrier()
        report(f"collectives_{len(members)}", ok)
    else:
        report(f"collectives_{len(members)}", None)

# 7. send buffer, n1 -> n2 at 10 Mbit/s: a message that fits completes at once; a larger one
# when its remainder fits
for size, context in ((SEND_BUFFER_BYTES // 2, 9), (SEND_BUFFER_BYTES + 256 * 1024, 10)):
    c = group([1, 2], context)
    report(f"send_buffer_{size}", dict([send_and_receive(c, size)[:2]]) if c else None)
# 8. token bucket, n1 -> n2 at 10 Mbit/s with 100 Mbit/s ports: after an idle spell a short
# message passes at once; one sent right behind a longer one is paced (and shares the pair)
c = group([1, 2], 12)
if c:
    c.compute(0.05)  # idle: the bucket fills
    idle = send_and_receive(c, 3000)
    c.Barrier()
    busy = send_and_receive(c, 3000, behind=50000)
    report("bucket", {"idle": idle, "busy": busy})
else:
    report("bucket", None)

# 9. two sends on one tag, n1 -> n2 at 10 Mbit/s: the later, shorter one finishes first; the
# longer send must still complete only when its own remainder fits the send buffer
c = group([1, 2], 13)
if c:
    large, short = np.ones(SEND_BUFFER_BYTES + 256 * 1024, np.uint8), np.ones(20000, np.uint8)
    start = time.time()
    if c.rank == 0:
        reqs = [c.Isend(large, 1, tag=4), c.Isend(short, 1, tag=4)]
        reqs[1].Wait()
        short_done = time.time() - start
        reqs[0].Wait()
        report("same_tag", {"short_sent": short_done, "large_sent": time.time() - start})
    else:
        reqs = [c.Irecv(large, 0, tag=4), c.Irecv(short, 0, tag=4)]
        reqs[0].Waitall(reqs)
        report("same_tag", None)
else:
    report("same_tag", None)

# 10. a send right after an exchange whose partner is busy: n1 and n3 exchange 400 KiB (n3 is
# busy for 60 ms before it waits), then n1 sends 400 KiB to n4 at once. n1's flow to n3 ended
# in the model before this one began, so n1's 100 Mbit/s port is the new flow's alone.
c = group([1, 3, 4], 15)
if c:
    size = 400 * 1024
    out, into, flag = np.ones(size, np.uint8), np.zeros(size, np.uint8), np.zeros(1)
    if c.rank == 0:
        reqs = [c.Irecv(into, 1, tag=1), c.Isend(out, 1, tag=1)]
        reqs[0].Waitall(reqs)
        reqs = [c.Isend(out, 2, tag=2), c.Irecv(flag, 2, tag=3)]
        reqs[0].Waitall(reqs)  # n1 waits, so it reads n3's notice when it comes
        report("ended_before_heard", None)
    elif c.rank == 1:
        reqs = [c.Irecv(into, 0, tag=1), c.Isend(out, 0, tag=1)]
        time.sleep(0.06)  # busy elsewhere: no progress, no notice
        reqs[0].Waitall(reqs)
        report("ended_before_heard", None)
    else:
        r = c.Irecv(into, 0, tag=2)
        r.Wait()
        c.Isend(flag, 0, tag=3).Wait()
        report("ended_before_heard", r.due_at - r.start_at)
else:
    report("ended_before_heard", None)

# each message waits its path's latency: the crossbar's model, with the latencies of a tree
# (n1 and n2 behind switch s, n3 behind t, 0.1 ms per node link, 20 ms between the switches)
TREE = cluster_from_dict({"topology": "tree", "latency_ms": 0.1, "switches": ["s", "t"],
                          "nodes": [{"name": "n1", "switch": "s"}, {"name": "n2", "switch": "s"},
                                    {"name": "n3", "switch": "t"}],
                          "links": [{"a": "s", "b": "t", "latency_ms": 20.0}]})
c = None
if rank in (1, 2, 3):
    c = ShapedComm(data, [1, 2, 3], NODES[:3], Network(model, cluster=TREE), context=16,
                   timeout_seconds=60, doorbells=[BELLS[m] for m in (1, 2, 3)])
report("path_latency", (NODES[rank - 1], timed_transfer(c, 8, dests=(1, 2))) if c else None)

del c
model.close()
if rank == 0:
    print(json.dumps({"results": results}))
    sys.stdout.flush()

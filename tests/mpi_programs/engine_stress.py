"""The shaped communicator's message path under stress, for heap errors and lost bytes.

Run under mpiexec with 5 ranks (rank 0 only reports) and glibc's heap checks on
(MALLOC_CHECK_=3, MALLOC_PERTURB_). Every round, on a fast network so that rounds are short:

- two jobs at once in two threads of every node rank, each on a communicator of its own
  with a bell of its own (as time-shared jobs run);
- in each job every rank sends every other rank messages of every size class (empty, with
  the header, just above it, staged, larger than the send buffer), several on one tag, with
  receives posted before and after the sends, some into None;
- then collectives, and a new group on a new context while the last messages of the old one
  may still be on their way.

All ranks share the cluster's one network model in MPI shared memory.

Every byte received is checked. Rank 0 prints JSON: rounds done and bytes checked.
"""

import json
import os
import random
import sys
import threading
import time

import numpy as np
from mpi4py import MPI

from emulator.network.cluster import crossbar
from emulator.network.scenario import full_capacity_timeline
from emulator.shaping import doorbell
from emulator.shaping.comm import SEND_BUFFER_BYTES, Network, ShapedComm
from emulator.shaping.window import shared_model

ROUNDS = int(os.environ.get("STRESS_ROUNDS", "20"))
SIZES = (0, 100, 16 * 1024, 16 * 1024 + 1, 100_000, SEND_BUFFER_BYTES + 4096)
NODES = ["n1", "n2", "n3", "n4"]
world = MPI.COMM_WORLD
rank = world.Get_rank()
cluster = crossbar(["n0"] + NODES, capacity_mbps=4000.0)  # rank 0 is n0, and sends nothing
model = shared_model(world, cluster, full_capacity_timeline(cluster))
if rank == 0:
    model.set_clock(epoch=time.time())
world.Barrier()
network = Network(model, latency_seconds=0.00002)
nodes_comm = world.Split(0 if rank else MPI.UNDEFINED, rank)
JOBS = 2
# one communicator and one bell per job, made collectively before the threads start
job_comms = [nodes_comm.Dup() for _ in range(JOBS)] if rank else []
bells = [doorbell.Doorbell() for _ in range(JOBS)] if rank else []
addresses = [c.allgather(b.address) for c, b in zip(job_comms, bells)]


def payload(src, dst, k, round_):
    size = SIZES[k]
    return (np.arange(size, dtype=np.uint64) * 2654435761
            + (src * 131 + dst * 17 + k * 7 + round_)).astype(np.uint8)


def job(j, round_, checked):
    comm = ShapedComm(job_comms[j], [0, 1, 2, 3], NODES, network, context=round_ % 7,
                      timeout_seconds=60, doorbells=addresses[j], bell=bells[j])
    me, rng = comm.rank, random.Random(round_ * 10 + j * 1000 + rank)
    tags = 3
    # receives: one per message, posted in a random order, half before the sends; the i-th
    # receive posted for (peer, tag) takes the i-th message sent on it (MPI order)
    wanted = [(peer, k) for peer in range(4) if peer != me for k in range(len(SIZES))]
    rng.shuffle(wanted)
    early = len(wanted) // 2
    recvs, posted = [], []

    def post(peer, k):
        into = None if rng.random() < 0.2 else np.zeros(max(SIZES) + 8, np.uint8)
        recvs.append((comm.Irecv(into, peer, k % tags), into))
        posted.append((peer, k % tags))

    for peer, k in wanted[:early]:
        post(peer, k)
    sends = [comm.Isend(payload(me, peer, k, round_), peer, k % tags)
             for peer in range(4) if peer != me for k in range(len(SIZES))]
    for peer, k in wanted[early:]:
        post(peer, k)
    recvs[0][0].Waitall([r for r, _ in recvs] + sends)
    sent_order = {}  # (peer, tag) -> the k of its messages, in the order they were sent
    for k in range(len(SIZES)):
        for peer in range(4):
            sent_order.setdefault((peer, k % tags), []).append(k)
    taken = {}
    for (req, into), key in zip(recvs, posted):
        k = sent_order[key][taken.get(key, 0)]
        taken[key] = taken.get(key, 0) + 1
        want = payload(key[0], me, k, round_)
        got = np.frombuffer(req.data, np.uint8) if into is None else into[:req.nbytes]
        if req.nbytes != want.size or not np.array_equal(got, want):
            raise SystemExit(f"rank {rank} job {j}: wrong bytes from rank {key[0]}")
        checked[j] += want.size
    total = np.zeros(2)
    comm.Allreduce(np.array([1.0, float(me)]), total)
    if total.tolist() != [4.0, 6.0]:
        raise SystemExit(f"rank {rank} job {j}: Allreduce gave {total.tolist()}")
    comm.Barrier()


checked = [0] * JOBS
errors = []
for round_ in range(ROUNDS):
    if rank:
        def run(j):
            try:
                job(j, round_, checked)
            except BaseException as e:  # report from the main thread
                errors.append(f"{type(e).__name__}: {e}")

        threads = [threading.Thread(target=run, args=(j,)) for j in range(JOBS)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        if errors:
            sys.stderr.write("\n".join(errors) + "\n")
            world.Abort(3)
    world.Barrier()
report = world.gather({"checked_bytes": sum(checked), "engine": type(ShapedComm(
    job_comms[0], [0, 1, 2, 3], NODES, network)).__name__ if rank else None,
    "flows_left": model.fluid.counts()["active"]})
model.close()
if rank == 0:
    print(json.dumps({"rounds": ROUNDS, "ranks": report[1:]}), flush=True)

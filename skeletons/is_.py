"""IS skeleton: the whole of NPB IS's is.c, its untimed first ranking included.

Numbers from the NPB 3.3 specification: TOTAL_KEYS and MAX_KEY per class (S: 2^16/2^11,
A: 2^23/2^19), 10 ranking iterations, NUM_BUCKETS = 2^10. Per ranking (``rank``) each rank
counts its keys into buckets, ``MPI_Allreduce``s the bucket sizes (NUM_BUCKETS +
TEST_ARRAY_SIZE ints), ``MPI_Alltoall``s the send counts (one int per rank) and
``MPI_Alltoallv``s the keys (about total_keys/p^2 per pair), then ranks the keys it received.
One ranking runs untimed before the timed ones; afterwards the time is reduced to the root
and ``full_verify`` sends each rank's largest key to the next rank and reduces the
verification count. Compute: about 10 integer operations per local key per ranking.
"""

import numpy as np

from emulator.selection.patterns import IS_NUM_BUCKETS, IS_TEST_ARRAY_SIZE

from . import register
from .comm import wait_all


@register
def is_(run):
    p, comm, n = run.params, run.comm, run.size
    keys_local = p["total_keys"] // n
    counts = [keys_local // n + (1 if d < keys_local % n else 0) for d in range(n)]
    keys = run.buffer(keys_local, np.int32)
    received = run.buffer(sum(counts), np.int32)
    buckets = run.buffer(IS_NUM_BUCKETS + IS_TEST_ARRAY_SIZE, np.int32)
    totals = np.empty_like(buckets)
    send_counts = np.array(counts, dtype=np.int32)
    recv_counts = np.empty_like(send_counts)
    one_key, key_got = run.buffer(1, np.int32), run.buffer(1, np.int32)
    seconds, seconds_max = run.buffer(1), run.buffer(1)

    def rank():
        run.compute(5 * keys_local)  # bucket counting
        with run.phase("allreduce buckets"):
            comm.Allreduce(buckets, totals)
        with run.phase("alltoall counts"):
            comm.Alltoall(send_counts, recv_counts)
        with run.phase("alltoallv keys"):
            comm.Alltoallv(keys, counts, received, [int(c) for c in recv_counts])
        run.compute(5 * keys_local)  # local ranking

    with run.phase("set-up"):
        rank()  # untimed, "to guarantee initialization of all data and code pages"
    niter = run.niter(p["niter"])
    for _ in range(niter):
        rank()
    comm.Reduce(seconds, seconds_max)  # the benchmark time, to the root
    with run.phase("full verify"):  # the largest key goes to the next rank
        reqs = []
        if run.rank > 0:
            reqs.append(comm.Irecv(key_got, run.rank - 1, 1000))
        if run.rank < n - 1:
            reqs.append(comm.Isend(one_key, run.rank + 1, 1000))
        wait_all(reqs)
        comm.Reduce(one_key, key_got)  # the verification count
    return niter

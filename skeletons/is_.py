"""IS skeleton: the bucket-sort ranking of NPB IS (``rank`` in is.c).

Numbers from the NPB 3.3 specification: TOTAL_KEYS and MAX_KEY per class (S: 2^16/2^11,
A: 2^23/2^19), 10 ranking iterations, NUM_BUCKETS = 2^10. Per iteration each rank counts
its keys into buckets, ``MPI_Allreduce``s the bucket sizes (NUM_BUCKETS + TEST_ARRAY_SIZE
ints), ``MPI_Alltoall``s the send counts (one int per rank) and ``MPI_Alltoallv``s the keys
(about total_keys/p^2 per pair), then ranks the keys it received. Compute: about 10 integer
operations per local key per iteration.
"""

import numpy as np

from emulator.selection.patterns import IS_NUM_BUCKETS, IS_TEST_ARRAY_SIZE

from . import register


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
    niter = run.niter(p["niter"])
    for _ in range(niter):
        run.compute(5 * keys_local)  # bucket counting
        with run.phase("allreduce buckets"):
            comm.Allreduce(buckets, totals)
        with run.phase("alltoall counts"):
            comm.Alltoall(send_counts, recv_counts)
        with run.phase("alltoallv keys"):
            comm.Alltoallv(keys, counts, received, [int(c) for c in recv_counts])
        run.compute(5 * keys_local)  # local ranking
    return niter

"""EP skeleton: NPB EP's Gaussian pairs, which need no communication until the end.

Numbers from the NPB 3.3 specification: 2^(m+1) random numbers per class (S: m = 24, A: 28).
Compute: about 30 flops per random number (the linear congruential generator, the
acceptance test, log and sqrt), over p. At the end three ``MPI_Allreduce`` calls sum sx, sy
and the ten annulus counts q.
"""

from . import register


@register
def ep(run):
    comm = run.comm
    run.compute(30 * 2 ** (run.params["m"] + 1) / run.size)
    with run.phase("reductions"):
        for count in (1, 1, 10):
            comm.Allreduce(run.buffer(count), run.buffer(count))
    return 1

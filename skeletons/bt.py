"""BT skeleton: NPB BT's block-tridiagonal ADI time steps on the multi-partition.

Numbers from the NPB 3.3 specification: an n^3 grid and niter per class (S: 12^3, 60;
A: 64^3, 200). Messages per face point: ``copy_faces`` 2 layers x 5 variables; the forward
solve sends 5x5 blocks and a right-hand side (30 doubles), back substitution 5 doubles
(see :mod:`skeletons._multipartition`). Compute: about 3200 flops per grid point per step
(NPB BT class A performs about 168 Gflop), over p.
"""

from . import register
from ._multipartition import time_steps


@register
def bt(run):
    return time_steps(run, 3200)

"""SP skeleton: NPB SP's scalar-pentadiagonal ADI time steps on the multi-partition.

Numbers from the NPB 3.3 specification: an n^3 grid and niter per class (S: 12^3, 100;
A: 64^3, 400). Same neighbours as BT with smaller solve messages: 11 doubles per face point
forward, 2 back (see :mod:`skeletons._multipartition`). Compute: about 810 flops per grid
point per step (NPB SP class A performs about 85 Gflop), over p.
"""

from . import register
from ._multipartition import time_steps


@register
def sp(run):
    return time_steps(run, 810)

"""MG skeleton: the V-cycle multigrid of NPB MG (mg.f).

Numbers from the NPB 3.3 specification: an n^3 grid and niter per class (S: 32^3, 4;
A: 256^3, 4). Processes form the periodic pi1 x pi2 x pi3 grid of ``setup``; ``comm3``
swaps the faces of the local sub-grid with the two neighbours along each axis (``give3``
and ``take3``), at every level of the V-cycle (:func:`emulator.patterns.mg_comm3_levels`).
Each iteration ends with ``norm2u3``: two ``MPI_Allreduce`` of one double. Compute: about 58
flops per fine-grid point per iteration, times 8/7 for the coarser levels, over p.
"""

import numpy as np

from emulator.selection.patterns import mg_comm3_levels, mg_grid, mg_local_shape, mg_neighbours

from . import register
from .comm import wait_all


@register
def mg(run):
    p, comm, me = run.params, run.comm, run.rank
    dims = mg_grid(run.size)
    levels = mg_comm3_levels(p["n"])
    neighbours = mg_neighbours(me, dims)
    faces = {}
    for level in set(levels):
        local = mg_local_shape(p["n"], dims, level)
        faces[level] = {axis: local[(axis + 1) % 3] * local[(axis + 2) % 3] for axis in range(3)}
    bufs = {(level, axis): (run.buffer(size), run.buffer(size))
            for level, per_axis in faces.items() for axis, size in per_axis.items()}
    points = p["n"] ** 3 / run.size
    norm, got = run.buffer(1), run.buffer(1)

    def comm3(level):
        with run.phase("comm3"):
            reqs = []
            for k, (axis, other) in enumerate(neighbours):
                send, recv = bufs[(level, axis)]
                recv = np.empty_like(recv)
                reqs.append(comm.Irecv(recv, other, 10 + k))
                # the neighbour in the opposite direction listens with the mirrored tag
                reqs.append(comm.Isend(send, other, 10 + (k ^ 1)))
            wait_all(reqs)

    # 58 * 8/7 flops per fine point and iteration, split over the comm3 calls by level size
    weights = [8.0 ** (level - levels[-1]) for level in levels]
    flops = [58 * 8 / 7 * points * w / sum(weights) for w in weights]
    niter = run.niter(p["niter"])
    for _ in range(niter):
        for level, level_flops in zip(levels, flops):
            run.compute(level_flops)
            comm3(level)
        with run.phase("norm2u3"):
            comm.Allreduce(norm, got)
            comm.Allreduce(norm, got)
    return niter

"""MG skeleton: the whole of NPB MG's mg.f, set-up included.

Numbers from the NPB 3.3 specification: an n^3 grid and niter per class (S: 32^3, 4;
A: 256^3, 4). Processes form the periodic pi1 x pi2 x pi3 grid of ``setup``. ``comm3`` goes
axis by axis: post both receives (``ready``), send the two faces (``give3``: axis 1 sends
(n2-2)(n3-2) doubles, axis 2 n1(n3-2), axis 3 n1 n2, with n the local sizes with ghosts),
wait for both (``take3``). The program, as mg.f runs it:

- set-up: ``zran3`` (ten rounds of four allreduces to find the charges, then ``comm3`` on
  the finest grid), ``norm2u3`` (two allreduces), ``resid``, ``norm2u3``, one untimed
  iteration, ``zran3`` again;
- timed: ``resid``, ``norm2u3``, niter iterations (``mg3P``, ``resid``), ``norm2u3``, and the
  reduce of the time.

An iteration calls ``comm3`` at the levels of :func:`emulator.selection.patterns.mg_comm3_levels`.
Compute: about 58 flops per fine-grid point per iteration, times 8/7 for the coarser levels,
over p.
"""

import numpy as np

from emulator.selection.patterns import (
    MG_ZRAN3_CHARGES,
    mg_comm3_levels,
    mg_face_doubles,
    mg_grid,
    mg_neighbours,
)

from . import register
from .comm import wait_all


@register
def mg(run):
    p, comm, me = run.params, run.comm, run.rank
    dims = mg_grid(run.size)
    levels = mg_comm3_levels(p["n"])
    top = levels[-1]
    by_axis = {}
    for axis, other in mg_neighbours(me, dims):
        by_axis.setdefault(axis, []).append(other)
    bufs = {}
    for level in set(levels):
        faces = mg_face_doubles(p["n"], dims, level)
        bufs[level] = {axis: (run.buffer(faces[axis]), run.buffer(faces[axis])) for axis in by_axis}
    points = p["n"] ** 3 / run.size
    scalar, got = run.buffer(1), run.buffer(1)
    four, four_got = run.buffer(4, np.int32), run.buffer(4, np.int32)

    def comm3(level):
        with run.phase("comm3"):
            for axis, (plus, minus) in sorted(by_axis.items()):
                send, recv = bufs[level][axis]
                into = [np.empty_like(recv), np.empty_like(recv)]
                # ready(-1), ready(+1); give3(+1), give3(-1); take3(-1), take3(+1)
                reqs = [comm.Irecv(into[0], minus, 10 + 2 * axis),
                        comm.Irecv(into[1], plus, 11 + 2 * axis),
                        comm.Isend(send, plus, 10 + 2 * axis),
                        comm.Isend(send, minus, 11 + 2 * axis)]
                wait_all(reqs)

    def norm2u3():
        with run.phase("norm2u3"):
            comm.Allreduce(scalar, got)
            comm.Allreduce(scalar, got)

    def zran3():
        with run.phase("zran3"):
            comm.Barrier()
            for _ in range(MG_ZRAN3_CHARGES):  # the globally best charges, one by one
                comm.Allreduce(scalar, got)
                comm.Allreduce(four, four_got)
                comm.Allreduce(scalar, got)
                comm.Allreduce(four, four_got)
            comm.Barrier()
        comm3(top)

    # 58 * 8/7 flops per fine point and iteration, split over the comm3 calls by level size
    weights = [8.0 ** (level - top) for level in levels]
    flops = [58 * 8 / 7 * points * w / sum(weights) for w in weights]
    resid_flops = flops[-1]

    def iteration():
        for level, level_flops in zip(levels, flops):
            run.compute(level_flops)
            comm3(level)

    with run.phase("set-up"):
        zran3()
        norm2u3()
        run.compute(resid_flops)
        comm3(top)  # resid
        norm2u3()
        iteration()  # the untimed warm-up
        zran3()
        comm.Barrier()
    run.compute(resid_flops)
    comm3(top)  # resid
    norm2u3()
    niter = run.niter(p["niter"])
    for _ in range(niter):
        iteration()
    norm2u3()
    comm.Reduce(scalar, got)  # the benchmark time, to the root
    return niter

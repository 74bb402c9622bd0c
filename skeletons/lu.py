"""LU skeleton: the SSOR iteration of NPB LU (ssor.f, blts.f, buts.f, exchange_*.f).

Numbers from the NPB 3.3 specification: an n^3 grid and itmax per class (S: 12^3, 50;
A: 64^3, 250). Processes form the xdim x ydim grid of ``proc_grid`` with north/south and
east/west neighbours (not periodic). Per iteration ``rhs`` swaps two ghost layers of 5
variables with every neighbour (``exchange_3``); ``blts`` sweeps the k-planes as a
wavefront, receiving a line of 5 doubles per grid point from north and west before each
plane and sending one south and east after it (``exchange_1``); ``buts`` sweeps back the
other way. Compute: about 1820 flops per grid point per iteration (NPB LU class A performs
about 119 Gflop), 40% in rhs and 30% in each sweep, over p.
"""

from emulator.selection.patterns import lu_grid

from . import register
from .comm import wait_all

FLOPS_PER_POINT = 1820


@register
def lu(run):
    p, comm, me = run.params, run.comm, run.rank
    n = p["n"]
    xdim, ydim = lu_grid(run.size)
    row, col = me % xdim, me // xdim
    north = me - 1 if row > 0 else None
    south = me + 1 if row + 1 < xdim else None
    west = me - xdim if col > 0 else None
    east = me + xdim if col + 1 < ydim else None
    len_ns, len_ew = n // ydim, n // xdim  # lines shared with north/south, east/west
    line = {north: len_ns, south: len_ns, west: len_ew, east: len_ew}
    peers = [q for q in (north, south, west, east) if q is not None]
    points = n ** 3 / run.size
    planes = n - 2

    ghosts = {q: (run.buffer(2 * 5 * line[q] * n), run.buffer(2 * 5 * line[q] * n)) for q in peers}
    lines = {q: (run.buffer(5 * line[q]), run.buffer(5 * line[q])) for q in peers}

    def sweep(before, after, tag):
        for _ in range(planes):
            if before:
                with run.phase("pipeline wait"):
                    wait_all([comm.Irecv(lines[q][1], q, tag) for q in before])
            run.compute(0.3 * FLOPS_PER_POINT * points / planes)
            if after:
                with run.phase("pipeline send"):
                    wait_all([comm.Isend(lines[q][0], q, tag) for q in after])

    niter = run.niter(p["niter"])
    for _ in range(niter):
        run.compute(0.4 * FLOPS_PER_POINT * points)  # rhs
        with run.phase("exchange_3"):
            reqs = [comm.Irecv(ghosts[q][1], q, 1) for q in peers]
            reqs += [comm.Isend(ghosts[q][0], q, 1) for q in peers]
            wait_all(reqs)
        sweep([q for q in (north, west) if q is not None],
              [q for q in (south, east) if q is not None], 2)  # blts
        sweep([q for q in (south, east) if q is not None],
              [q for q in (north, west) if q is not None], 3)  # buts
    return niter

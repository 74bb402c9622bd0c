"""LU skeleton: the whole of NPB LU's lu.f (ssor.f, rhs.f, erhs.f, blts.f, buts.f,
exchange_*.f), its untimed first SSOR step included.

Numbers from the NPB 3.3 specification: an n^3 grid and itmax per class (S: 12^3, 50;
A: 64^3, 250). Processes form the xdim x ydim grid of ``proc_grid`` with north/south and
east/west neighbours (not periodic). Every ``rhs`` (and ``erhs``) swaps two ghost layers of 5
variables with every neighbour (``exchange_3``: 10 ny nz doubles north/south, 10 nx nz
east/west); ``blts`` sweeps the k-planes as a wavefront, receiving a line of 5 doubles per
interior grid point (``exchange_1``: jst..jend or ist..iend, which leave out the global
boundary) from north and west before each plane and sending one south and east after it;
``buts`` sweeps back the other way. The program: ``erhs``, ``ssor(1)`` (untimed), then
``ssor(itmax)``; each ``ssor`` calls ``rhs`` once before its steps and once per step, and sums
5 norms (``l2norm``) before and at its last step; ``error`` and ``pintgr`` sum a few more
scalars (``pintgr``'s line exchanges, tens of doubles, are left out). Compute: about 1820
flops per grid point per step (NPB LU class A performs about 119 Gflop), 40% in rhs and 30%
in each sweep, over p.
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
    ny, nx = n // ydim, n // xdim  # local sizes: lines shared with north/south, east/west
    # exchange_1 lines run over jst..jend (north/south) or ist..iend (east/west)
    line_ns = ny - (west is None) - (east is None)
    line_ew = nx - (north is None) - (south is None)
    ghost = {north: ny, south: ny, west: nx, east: nx}
    line = {north: line_ns, south: line_ns, west: line_ew, east: line_ew}
    peers = [q for q in (north, south, west, east) if q is not None]
    points = n ** 3 / run.size
    planes = n - 2

    ghosts = {q: (run.buffer(10 * ghost[q] * n), run.buffer(10 * ghost[q] * n)) for q in peers}
    lines = {q: (run.buffer(5 * line[q]), run.buffer(5 * line[q])) for q in peers}
    norms, got = run.buffer(5), run.buffer(5)

    def sweep(before, after, tag):
        for _ in range(planes):
            if before:
                with run.phase("pipeline wait"):
                    wait_all([comm.Irecv(lines[q][1], q, tag) for q in before])
            run.compute(0.3 * FLOPS_PER_POINT * points / planes)
            if after:
                with run.phase("pipeline send"):
                    wait_all([comm.Isend(lines[q][0], q, tag) for q in after])

    def rhs():
        run.compute(0.4 * FLOPS_PER_POINT * points)
        with run.phase("exchange_3"):
            reqs = [comm.Irecv(ghosts[q][1], q, 1) for q in peers]
            reqs += [comm.Isend(ghosts[q][0], q, 1) for q in peers]
            wait_all(reqs)

    def l2norm():
        with run.phase("l2norm"):
            comm.Allreduce(norms, got)

    def ssor(steps):
        rhs()
        l2norm()
        comm.Barrier()
        for _ in range(steps):
            sweep([q for q in (north, west) if q is not None],
                  [q for q in (south, east) if q is not None], 2)  # blts
            sweep([q for q in (south, east) if q is not None],
                  [q for q in (north, west) if q is not None], 3)  # buts
            rhs()
        l2norm()  # delunm and rsdnm at the last step
        l2norm()
        comm.Allreduce(norms[:1], got[:1])  # the time, its maximum

    with run.phase("set-up"):
        rhs()  # erhs
        ssor(1)  # untimed, "to touch all data pages"
    niter = run.niter(p["niter"])
    ssor(niter)
    with run.phase("verification"):
        comm.Allreduce(norms, got)  # error
        for _ in range(3):  # pintgr's three surface integrals
            comm.Allreduce(norms[:1], got[:1])
    return niter

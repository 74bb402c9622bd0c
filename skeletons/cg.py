"""CG skeleton: the whole of NPB CG's cg.f, its untimed first iteration included.

Numbers from the NPB 3.3 MPI source and specification: na, nonzer and niter per class (S:
1400/7/15, A: 14000/11/15); cgitmax = 25 CG steps per outer iteration; a num_proc_rows x
num_proc_cols process grid (cols = rows or 2 rows). Per mat-vec, the partial products are
summed across the process row in log2(npcols) exchanges with ``reduce_exch_proc`` of
naa/nprows doubles (half of it on non-square grids), then exchanged with the transpose
processor ``exch_proc``; each CG step also sum-reduces two scalars over the row partners.
Each outer iteration (``conj_grad``, then x.z and z.z summed over the row partners, two
doubles) runs once untimed before the niter timed ones; the time is reduced to the root.
Compute: 2 flops per nonzero of the local block per mat-vec (about na*(nonzer+1)^2 nonzeros
in all), plus 10 flops per vector element per CG step.
"""

from emulator.selection.patterns import cg_grid, cg_partners

from . import register
from .comm import wait_all

CG_STEPS = 25


def _exchange(run, partner, send, recv, tag):
    comm = run.comm
    wait_all([comm.Irecv(recv, partner, tag), comm.Isend(send, partner, tag)])


@register
def cg(run):
    p, me = run.params, run.rank
    nprows, npcols = cg_grid(run.size)
    reduce, exch = cg_partners(run.size)[me]
    row_len = p["na"] // nprows
    seg = row_len if nprows == npcols else (row_len + 1) // 2
    send, recv = run.buffer(seg), run.buffer(seg)
    one, got = run.buffer(1), run.buffer(1)
    two, got_two = run.buffer(2), run.buffer(2)
    nnz_local = p["na"] * (p["nonzer"] + 1) ** 2 / run.size
    vec_local = p["na"] / npcols

    def matvec():
        run.compute(2 * nnz_local)
        with run.phase("row reduce"):
            for partner in reversed(reduce):
                _exchange(run, partner, send, recv, 1)
        if exch != me:
            with run.phase("transpose"):
                _exchange(run, exch, send, recv, 2)

    def row_sum(values, into):
        with run.phase("dot products"):
            for partner in reduce:
                _exchange(run, partner, values, into, 3)

    def outer_iteration():
        row_sum(one, got)  # rho = r.r
        for _ in range(CG_STEPS):
            matvec()
            run.compute(10 * vec_local)
            row_sum(one, got)  # p.q
            row_sum(one, got)  # rho = r.r
        matvec()  # residual ||x - A z||
        row_sum(one, got)
        row_sum(two, got_two)  # x.z and z.z, for zeta and the new x

    with run.phase("set-up"):
        outer_iteration()  # untimed, "to init all code and data page tables"
        run.comm.Barrier()
    niter = run.niter(p["niter"])
    for _ in range(niter):
        outer_iteration()
    run.comm.Reduce(one, got)  # the benchmark time, to the root
    return niter

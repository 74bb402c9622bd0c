"""The BT/SP multi-partition time step, shared by :mod:`skeletons.bt` and :mod:`skeletons.sp`.

NPB BT and SP give each of the p = q^2 processes q cells, arranged so that every process
holds one cell of every slab in each direction (``make_set``). A time step does
``copy_faces`` (to the successor and the predecessor in each of the three directions, all
posted at once, the faces of the cells not last, or not first, in that direction) and, per
direction, a solve pipelined over the q stages: forward elimination sends to the
successor, back substitution to the predecessor. Message sizes are the NPB 3.3 sources'
(:func:`emulator.selection.patterns.multipartition_messages`). Both programs make one time
step untimed ("to touch all code") before the niter timed ones.
"""

import math

from emulator.selection.patterns import multipartition_messages, multipartition_neighbours

from .comm import wait_all


def time_steps(run, flops_per_point):
    comm, me = run.comm, run.rank
    p = run.params
    q = math.isqrt(run.size)
    messages = multipartition_messages(run.name, run.size, p["n"])
    copy, forward, backward = messages[me]
    succ, pred = multipartition_neighbours(run.size)[me]
    points = p["n"] ** 3 / run.size
    # receive buffers as large as the largest message of their kind (a peer's may differ)
    widest = max(max(max(c) for c in m[0]) for m in messages)
    deepest = max(max(max(s) for s in m[1] + m[2]) for m in messages)
    faces_out = [(run.buffer(copy[d][0]), run.buffer(copy[d][1])) for d in range(3)]
    faces_in = [run.buffer(widest) for _ in range(6)]
    solve_in = run.buffer(deepest)
    solve_out = {size: run.buffer(size) for m in (forward, backward) for sizes in m
                 for size in sizes}
    solve_flops = 0.8 * flops_per_point * points / (3 * 2 * q)

    def time_step():
        if q > 1:
            with run.phase("copy_faces"):
                reqs = []
                for d in range(3):
                    reqs.append(comm.Irecv(faces_in[2 * d], pred[d], 10 + 2 * d))
                    reqs.append(comm.Irecv(faces_in[2 * d + 1], succ[d], 11 + 2 * d))
                for d in range(3):
                    reqs.append(comm.Isend(faces_out[d][0], succ[d], 10 + 2 * d))
                    reqs.append(comm.Isend(faces_out[d][1], pred[d], 11 + 2 * d))
                wait_all(reqs)
        run.compute(0.2 * flops_per_point * points)  # compute_rhs and add
        for d in range(3):  # x_solve, y_solve, z_solve
            # sends are non-blocking, as in NPB: every process sends at stage 0
            pending = []
            for stage in range(q):
                if stage > 0:
                    with run.phase("solve"):
                        comm.Recv(solve_in, pred[d], 20 + d)
                run.compute(solve_flops)
                if stage < q - 1:
                    pending.append(comm.Isend(solve_out[forward[d][stage]], succ[d], 20 + d))
            for stage in reversed(range(q)):
                if stage < q - 1:
                    with run.phase("solve"):
                        comm.Recv(solve_in, succ[d], 30 + d)
                run.compute(solve_flops)
                if stage > 0:
                    pending.append(comm.Isend(solve_out[backward[d][stage]], pred[d], 30 + d))
            with run.phase("solve"):
                wait_all(pending)

    with run.phase("set-up"):
        time_step()  # untimed
    niter = run.niter(p["niter"])
    for _ in range(niter):
        time_step()
    return niter

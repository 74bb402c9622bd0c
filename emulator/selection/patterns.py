"""Communication pattern graphs.

A pattern graph has the ranks ``0..m-1`` as vertices. An edge joins two ranks that exchange
data in the application's dominant communication; its ``bytes`` attribute is the number of
bytes the two ranks exchange per iteration, both directions together. The graph attribute
``rounds`` (:func:`emulator.network.sharing.pattern_rounds`) counts the messages per
iteration that each wait their path's latency, one after another: the application's
critical path of latencies.

The NAS patterns follow the structure of the NPB 3.x MPI sources: which ranks talk, and how
much per iteration of the main loop, for the class named in the graph attribute ``npb_class``
(default A, the application size). What a benchmark exchanges outside its main loop (the
untimed first iteration of CG, IS, LU and MG, MG's set-up, LU's ``erhs``) is spread over the
iterations. Small collectives (scalar allreduces for norms and checksums) are left out of the bytes:
they are not the dominant communication; ``rounds`` counts them, where they weigh. Patterns
from matrices and files: :mod:`.patternfile`.
"""

import math
from dataclasses import dataclass

from ..errors import ProcessCountError, UnknownPatternError

DOUBLE_BYTES = 8
IS_NUM_BUCKETS = 1 << 10
IS_TEST_ARRAY_SIZE = 5
INT_BYTES = 4
COMPLEX_BYTES = 16

# NPB 3.x problem sizes (NPB specification, NAS-95-020 and NPB 3.3 npbparams).
CLASS_PARAMS = {
    "cg": {"S": dict(na=1400, nonzer=7, niter=15), "W": dict(na=7000, nonzer=8, niter=15),
           "A": dict(na=14000, nonzer=11, niter=15), "B": dict(na=75000, nonzer=13, niter=75)},
    "is": {"S": dict(total_keys=2**16, max_key=2**11, niter=10),
           "W": dict(total_keys=2**20, max_key=2**16, niter=10),
           "A": dict(total_keys=2**23, max_key=2**19, niter=10),
           "B": dict(total_keys=2**25, max_key=2**21, niter=10)},
    "ft": {"S": dict(nx=64, ny=64, nz=64, niter=6), "W": dict(nx=128, ny=128, nz=32, niter=6),
           "A": dict(nx=256, ny=256, nz=128, niter=6), "B": dict(nx=512, ny=256, nz=256, niter=20)},
    "mg": {"S": dict(n=32, niter=4), "W": dict(n=128, niter=4),
           "A": dict(n=256, niter=4), "B": dict(n=256, niter=20)},
    "lu": {"S": dict(n=12, niter=50), "W": dict(n=33, niter=300),
           "A": dict(n=64, niter=250), "B": dict(n=102, niter=250)},
    "bt": {"S": dict(n=12, niter=60), "W": dict(n=24, niter=200),
           "A": dict(n=64, niter=200), "B": dict(n=102, niter=200)},
    "sp": {"S": dict(n=12, niter=100), "W": dict(n=36, niter=400),
           "A": dict(n=64, niter=400), "B": dict(n=102, niter=400)},
    "ep": {"S": dict(m=24), "W": dict(m=25), "A": dict(m=28), "B": dict(m=30)},
}
NAS_BENCHMARKS = ("bt", "cg", "ep", "ft", "is", "lu", "mg", "sp")
GENERIC_PATTERNS = ("ring", "chain", "grid", "torus", "all-to-all", "pairs", "star")
MAX_NPROCS = 4096
MG_ZRAN3_CHARGES = 10  # mm in mg.f's zran3: ten +1 and ten -1 charges, found one by one


def is_power_of_two(n):
    return n >= 1 and n & (n - 1) == 0


def is_square(n):
    return n >= 1 and math.isqrt(n) ** 2 == n


def allowed_nprocs(name):
    """Human-readable rule for the process counts a pattern allows."""
    if name in ("bt", "sp"):
        return "a square (1, 4, 9, 16, ...)"
    if name in NAS_BENCHMARKS:
        return "a power of two (1, 2, 4, 8, ...)"
    return "any count >= 1"


def check_nprocs(name, nprocs):
    """Raise :class:`ProcessCountError` unless ``nprocs`` is allowed for ``name``."""
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise ProcessCountError(f"process count must be a positive integer, got {nprocs!r}")
    if nprocs > MAX_NPROCS:
        raise ProcessCountError(f"process count {nprocs} exceeds the maximum {MAX_NPROCS}")
    ok = True
    if name in ("bt", "sp"):
        ok = is_square(nprocs)
    elif name in NAS_BENCHMARKS:
        ok = is_power_of_two(nprocs)
    if not ok:
        raise ProcessCountError(
            f"{name.upper()} does not run on {nprocs} processes; NPB needs {allowed_nprocs(name)}")


def new_pattern(name, nprocs, npb_class=None):
    """A pattern of ``nprocs`` ranks (nodes 0..nprocs-1) and no edge yet."""
    import networkx as nx  # here: a node rank running a skeleton never builds one

    graph = nx.Graph(name=name, nprocs=nprocs)
    if npb_class:
        graph.graph["npb_class"] = npb_class
    graph.add_nodes_from(range(nprocs))
    return graph


def log_rounds(nprocs):
    """Rounds of a dissemination barrier or a binomial tree: ceil(log2 p)."""
    return (nprocs - 1).bit_length()


def allreduce_rounds(nprocs):
    """Rounds of an ``Allreduce`` as :mod:`emulator.shaping.collectives` runs it: recursive
    doubling on a power of two, else a reduce then a broadcast."""
    return log_rounds(nprocs) * (1 if is_power_of_two(nprocs) else 2)


def alltoall_rounds(nprocs):
    """Rounds of a pairwise-exchange ``Alltoall(v)``: p - 1."""
    return nprocs - 1


def _set_rounds(graph, per_run, niter):
    """Spread a run's rounds over its iterations, as its bytes are."""
    graph.graph["rounds"] = per_run / niter
    return graph


def _add_bytes(graph, a, b, nbytes):
    """Add ``nbytes`` to the undirected edge a-b (no edge for a == b: local copy)."""
    if a == b or nbytes <= 0:
        return
    if graph.has_edge(a, b):
        graph[a][b]["bytes"] += int(nbytes)
    else:
        graph.add_edge(a, b, bytes=int(nbytes))


# -- NAS patterns ------------------------------------------------------------------------


def _all_pairs(graph, nbytes):
    """Join every pair of ranks with ``nbytes`` (an all-to-all exchange)."""
    nodes = sorted(graph.nodes)
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            _add_bytes(graph, a, b, nbytes)
    return graph


def uniform_pattern(nprocs, nbytes=1 << 20):
    """Every pair of ranks exchanging ``nbytes`` each iteration, in p - 1 rounds: the
    pattern of a program whose own is not known."""
    return _set_rounds(_all_pairs(new_pattern("uniform", nprocs), nbytes),
                       alltoall_rounds(nprocs), 1)


def cg_grid(nprocs):
    """NPB CG process grid: ``(nprows, npcols)``, npcols = nprows or 2*nprows."""
    log2 = nprocs.bit_length() - 1
    npcols = 2 ** ((log2 + 1) // 2)
    return nprocs // npcols, npcols


def cg_partners(nprocs):
    """Per rank: the row-reduce partners (``reduce_exch_proc``) and the transpose partner.

    From NPB CG ``setup_submatrix_info``.
    """
    nprows, npcols = cg_grid(nprocs)
    l2npcols = npcols.bit_length() - 1
    out = []
    for me in range(nprocs):
        proc_row, proc_col = divmod(me, npcols)
        if npcols == nprows:
            exch = (me % nprows) * nprows + me // nprows
        else:
            exch = 2 * ((me // 2) % nprows * nprows + me // 2 // nprows) + me % 2
        reduce, div = [], npcols
        for _ in range(l2npcols):
            j = (proc_col + div // 2) % div + proc_col // div * div
            reduce.append(proc_row * npcols + j)
            div //= 2
        out.append((reduce, exch))
    return out


def cg_pattern(nprocs, npb_class="A"):
    """CG: the sparse matrix-vector product of ``conj_grad``.

    Edges come from the row sum-reduction (``reduce_exch_proc``, log2(npcols) partners) and the
    exchange with the transpose processor (``exch_proc``). Each of the 26 mat-vec products per
    outer iteration (25 CG steps and the residual) sends ``naa/nprows`` doubles per reduce step
    and per transpose on square grids, half of it on non-square grids; the row partners also
    sum 52 scalars and one pair of norms. The untimed first outer iteration is spread over the
    niter timed ones. On 4 ranks this gives the 3 pairs of Goteti and Subhlok: 0-1 and 2-3
    (row reduce), 1-2 (transpose).
    """
    check_nprocs("cg", nprocs)
    p = CLASS_PARAMS["cg"][npb_class]
    nprows, npcols = cg_grid(nprocs)
    row_len = p["na"] // nprows
    seg = row_len if nprows == npcols else (row_len + 1) // 2
    matvecs, scalars = 26, 52 + 2
    runs = (p["niter"] + 1) / p["niter"]  # the untimed first iteration, spread
    graph = new_pattern("cg", nprocs, npb_class)
    for me, (reduce, exch) in enumerate(cg_partners(nprocs)):
        for partner in reduce:  # both sides send their segments and scalars
            if partner > me:
                _add_bytes(graph, me, partner,
                           2 * runs * (matvecs * seg + scalars) * DOUBLE_BYTES)
        if exch > me:
            _add_bytes(graph, me, exch, 2 * runs * matvecs * seg * DOUBLE_BYTES)
    # a step per reduce partner and the transpose per mat-vec; a step per reduce partner
    # per row sum (53: the 52 scalars, then the pair of norms); the barrier and the time
    per_iteration = max(matvecs * (len(reduce) + (exch != me)) + (scalars - 1) * len(reduce)
                        for me, (reduce, exch) in enumerate(cg_partners(nprocs)))
    return _set_rounds(graph, (p["niter"] + 1) * per_iteration + 2 * log_rounds(nprocs),
                       p["niter"])


def is_pattern(nprocs, npb_class="A"):
    """IS: all-to-all. Each ranking iteration does ``MPI_Alltoall`` of the bucket counts and
    ``MPI_Alltoallv`` of the keys (about total_keys/p^2 keys between each pair), after an
    ``MPI_Allreduce`` of the bucket sizes (recursive doubling: partners r XOR 2^k), which at
    class S on 8 ranks weighs as much as the keys. The untimed first ranking is spread over
    the niter timed ones."""
    check_nprocs("is", nprocs)
    p = CLASS_PARAMS["is"][npb_class]
    runs = (p["niter"] + 1) / p["niter"]
    per_pair = runs * (p["total_keys"] * INT_BYTES // (nprocs * nprocs) + INT_BYTES)
    graph = _all_pairs(new_pattern("is", nprocs, npb_class), 2 * per_pair)
    bucket_bytes = runs * (IS_NUM_BUCKETS + IS_TEST_ARRAY_SIZE) * INT_BYTES
    mask = 1
    while mask < nprocs:
        for r in range(nprocs):
            if r < r ^ mask:
                _add_bytes(graph, r, r ^ mask, 2 * bucket_bytes)
        mask <<= 1
    # each ranking: the allreduce, the alltoall, the alltoallv; then the time, the
    # verification's chain to the next rank and its count
    ranking = allreduce_rounds(nprocs) + 2 * alltoall_rounds(nprocs)
    return _set_rounds(graph, (p["niter"] + 1) * ranking + 2 * log_rounds(nprocs)
                       + (nprocs > 1), p["niter"])


def ft_pattern(nprocs, npb_class="A"):
    """FT: all-to-all. With the 1-D layout each iteration's inverse 3-D FFT does one global
    transpose (``MPI_Alltoall``) of nx*ny*nz complex values; the initial forward FFT's
    transposes (once untimed, once timed) are spread over the iterations."""
    check_nprocs("ft", nprocs)
    p = CLASS_PARAMS["ft"][npb_class]
    per_pair = p["nx"] * p["ny"] * p["nz"] * COMPLEX_BYTES * (p["niter"] + 2) \
        // (nprocs * nprocs * p["niter"])
    graph = _all_pairs(new_pattern("ft", nprocs, npb_class), 2 * per_pair)
    # a transpose per FFT (niter + 2 of them), a checksum's allreduce per iteration
    return _set_rounds(graph, (p["niter"] + 2) * alltoall_rounds(nprocs)
                       + p["niter"] * allreduce_rounds(nprocs), p["niter"])


def ep_pattern(nprocs, npb_class="A"):
    """EP: no dominant communication (only three scalar reductions at the end)."""
    check_nprocs("ep", nprocs)
    return _set_rounds(new_pattern("ep", nprocs, npb_class), 3 * allreduce_rounds(nprocs), 1)


def mg_grid(nprocs):
    """NPB MG process grid ``(pi1, pi2, pi3)`` from ``setup``: dx = log_p/3, dy = (log_p-dx)/2."""
    log_p = nprocs.bit_length() - 1
    dx = log_p // 3
    dy = (log_p - dx) // 2
    pi1, pi2 = 2 ** dx, 2 ** dy
    return pi1, pi2, nprocs // (pi1 * pi2)


def mg_comm3_levels(n):
    """Levels (1 = coarsest, log2 n = finest) of the ``comm3`` calls of one MG iteration
    (``mg3P`` then ``resid``): ``rprj3`` on the way down, ``psinv`` at the bottom, ``resid``
    and ``psinv`` on the way up, and the closing ``resid`` on the finest grid."""
    top = int(round(math.log2(n)))
    down = list(range(top - 1, 0, -1))
    up = [level for level in range(2, top + 1) for _ in range(2)]
    return down + [1] + up + [top]


# Finest-level ``comm3`` calls of mg.f outside its iterations: ``zran3`` twice (before and
# after the untimed warm-up iteration), ``resid`` before the warm-up and before the timed loop.
MG_SETUP_COMM3 = 4


def mg_local_shape(n, dims, level):
    """Local sub-grid (with one ghost layer each side) of a level on the process grid."""
    side = 2 ** level
    return [max(side // d, 1) + 2 for d in dims]


def mg_face_doubles(n, dims, level):
    """Doubles in one ``give3`` message along each axis: axis 1 sends (n2-2)(n3-2), axis 2
    n1(n3-2) and axis 3 n1 n2, the local sizes n with ghosts (the later axes carry the ghost
    layers the earlier ones filled)."""
    n1, n2, n3 = mg_local_shape(n, dims, level)
    return [(n2 - 2) * (n3 - 2), n1 * (n3 - 2), n1 * n2]


def mg_neighbours(me, dims):
    """(axis, neighbour) for the two neighbours along each axis of the periodic grid."""
    coord = [me % dims[0], me // dims[0] % dims[1], me // (dims[0] * dims[1])]
    out = []
    for axis in range(3):
        if dims[axis] == 1:
            continue
        for step in (1, -1):
            nb = list(coord)
            nb[axis] = (coord[axis] + step) % dims[axis]
            out.append((axis, nb[0] + nb[1] * dims[0] + nb[2] * dims[0] * dims[1]))
    return out


def mg_pattern(nprocs, npb_class="A"):
    """MG: ``comm3`` face exchanges with the two neighbours along each axis of the periodic
    3-D process grid (:func:`mg_face_doubles`), at every level of the V-cycle
    (:func:`mg_comm3_levels`) for the iterations and the untimed warm-up, and on the finest
    level for the set-up (``MG_SETUP_COMM3``); spread over the iterations."""
    check_nprocs("mg", nprocs)
    p = CLASS_PARAMS["mg"][npb_class]
    dims = mg_grid(nprocs)
    top = int(round(math.log2(p["n"])))
    levels = mg_comm3_levels(p["n"]) * (p["niter"] + 1) + [top] * MG_SETUP_COMM3
    graph = new_pattern("mg", nprocs, npb_class)
    for me in range(nprocs):
        for axis, other in mg_neighbours(me, dims):
            face = sum(mg_face_doubles(p["n"], dims, level)[axis] for level in levels)
            # what ``me`` sends over the run, per iteration; the peer adds its own
            _add_bytes(graph, me, other, face * DOUBLE_BYTES / p["niter"])
    # a comm3 waits for its axes one after another, both neighbours of an axis at once;
    # zran3 (twice) has 4 allreduces per charge and 2 barriers, norm2u3 (3 times) 2
    # allreduces; a barrier after the warm-up, the time's reduce
    axes = sum(d > 1 for d in dims)
    allreduces = 2 * 4 * MG_ZRAN3_CHARGES + 3 * 2
    per_run = len(levels) * axes + allreduces * allreduce_rounds(nprocs) \
        + (2 * 2 + 1 + 1) * log_rounds(nprocs)
    return _set_rounds(graph, per_run, p["niter"])


def lu_grid(nprocs):
    """NPB LU process grid ``(xdim, ydim)`` from ``proc_grid``."""
    ndim = nprocs.bit_length() - 1
    xdim = 2 ** (ndim // 2)
    if ndim % 2 == 1:
        xdim *= 2
    return xdim, nprocs // xdim


def lu_pattern(nprocs, npb_class="A"):
    """LU: the 2-D (non-periodic) domain decomposition. Per SSOR step, ``blts``/``buts``
    pipeline one message of 5 doubles per interior grid line to the south/east and
    north/west neighbour for every k-plane, and ``rhs`` swaps two ghost layers
    (``exchange_3``). Over the run: itmax + 1 steps (one untimed) and itmax + 4 ghost swaps
    (``erhs``, and ``rhs`` before each ``ssor``); spread over the itmax steps."""
    check_nprocs("lu", nprocs)
    p = CLASS_PARAMS["lu"][npb_class]
    xdim, ydim = lu_grid(nprocs)
    n, steps = p["n"], p["niter"]
    graph = new_pattern("lu", nprocs, npb_class)
    for me in range(nprocs):
        row, col = me % xdim, me // xdim
        for other, length, lost in ((me + 1, n // ydim, (col == 0) + (col == ydim - 1)),
                                    (me + xdim, n // xdim, (row == 0) + (row == xdim - 1))):
            if other == me + 1 and row + 1 >= xdim or other == me + xdim and col + 1 >= ydim:
                continue
            # a line each way per plane and step (blts one way, buts the other; the two ranks
            # share the face's global boundaries), ghost layers both ways per swap
            sweeps = (steps + 1) * 2 * (n - 2) * 5 * (length - lost) * DOUBLE_BYTES
            ghosts = (steps + 4) * 2 * 10 * length * n * DOUBLE_BYTES
            _add_bytes(graph, me, other, (sweeps + ghosts) / steps)
    # each sweep's wavefront crosses the grid corner to corner (later planes follow in its
    # wake); every ghost swap is one round; 12 allreduces (norms, the time, verification)
    per_run = (steps + 1) * 2 * (xdim + ydim - 2) + (steps + 4) * (nprocs > 1) \
        + 12 * allreduce_rounds(nprocs)
    return _set_rounds(graph, per_run, steps)


def multipartition_neighbours(nprocs):
    """Successor and predecessor per direction (x, y, z) in the BT/SP multi-partition, as
    ``make_set`` has them: node = i + q j with i = node mod q; the z neighbours are diagonal."""
    q = math.isqrt(nprocs)
    out = []
    for node in range(nprocs):
        i, j = node % q, node // q
        succ = [(i + 1) % q + q * j, i + q * ((j + 1) % q), (i - 1) % q + q * ((j + 1) % q)]
        pred = [(i - 1) % q + q * j, i + q * ((j - 1) % q), (i + 1) % q + q * ((j - 1) % q)]
        out.append((succ, pred))
    return out


def multipartition_cells(nprocs, n):
    """Each rank's q cells (``make_set``), as (coordinates 1..q, sizes) per direction: the
    bottom cell at (node mod q, node div q, 0), each next one a step up in z, +1 in x and
    -1 in y (cyclically); a direction's first n mod q coordinates get one point more."""
    q = math.isqrt(nprocs)
    size, excess = divmod(n, q)
    out = []
    for node in range(nprocs):
        coord, cells = [node % q, node // q, 0], []
        for c in range(q):
            if c:
                coord = [(coord[0] + 1) % q, (coord[1] - 1) % q, c]
            one = tuple(x + 1 for x in coord)
            cells.append((one, tuple(size + 1 if x <= excess else size for x in one)))
        out.append(cells)
    return out


def multipartition_messages(name, nprocs, n):
    """Doubles each BT/SP rank sends per time step, from the NPB 3.3 sources.

    Returns per rank ``(copy, forward, backward)``: ``copy[d]`` = (to the successor, to the
    predecessor) in direction d (``copy_faces``: 2 layers x 5 variables of the faces of the
    cells that are not last, or not first, in d); ``forward[d][s]`` and ``backward[d][s]``
    the solve messages from the rank's cell at stage s (0-based) to the successor (stages
    0..q-2) and to the predecessor (stages 1..q-1). BT sends fixed buffers of
    MAX_CELL_DIM^2 points (n div q + 1 squared) of 30 (C' and rhs') and 5 (U) doubles; SP
    sends 22 and 10 doubles per face point inside the global boundary.
    """
    q = math.isqrt(nprocs)
    box = (n // q + 1) ** 2
    out = []
    for cells in multipartition_cells(nprocs, n):
        copy, forward, backward = [], [], []
        for d in range(3):
            o1, o2 = [x for x in range(3) if x != d]
            face = {co: sz[o1] * sz[o2] for co, sz in cells}
            copy.append((sum(10 * face[co] for co, _ in cells if co[d] != q),
                         sum(10 * face[co] for co, _ in cells if co[d] != 1)))
            by_stage = sorted(cells, key=lambda cell: cell[0][d])
            if name == "bt":
                fwd, bwd = [30 * box] * q, [5 * box] * q
            else:
                inner = [math.prod(sz[o] - (co[o] == 1) - (co[o] == q) for o in (o1, o2))
                         for co, sz in by_stage]
                fwd, bwd = [22 * x for x in inner], [10 * x for x in inner]
            forward.append(fwd)
            backward.append(bwd)
        out.append((copy, forward, backward))
    return out


def _multipartition_pattern(name, nprocs, npb_class):
    check_nprocs(name, nprocs)
    p = CLASS_PARAMS[name][npb_class]
    q = math.isqrt(nprocs)
    graph = new_pattern(name, nprocs, npb_class)
    neighbours = multipartition_neighbours(nprocs)
    for me, (copy, forward, backward) in enumerate(multipartition_messages(name, nprocs, p["n"])):
        succ, pred = neighbours[me]
        for d in range(3):
            sent = {}
            sent[succ[d]] = copy[d][0] + sum(forward[d][:q - 1])
            sent[pred[d]] = sent.get(pred[d], 0) + copy[d][1] + sum(backward[d][1:])
            for other, doubles in sent.items():
                # what ``me`` sends; the peer adds its own. The untimed first step spread
                _add_bytes(graph, me, other,
                           doubles * DOUBLE_BYTES * (p["niter"] + 1) / p["niter"])
    # per step: copy_faces at once, then each direction's solve forward and back, stage by
    # stage; the untimed first step spread
    per_step = (q > 1) + 3 * 2 * (q - 1)
    return _set_rounds(graph, (p["niter"] + 1) * per_step, p["niter"])


def bt_pattern(nprocs, npb_class="A"):
    """BT: multi-partition on a sqrt(p) x sqrt(p) grid. ``copy_faces`` and the pipelined
    ``x/y/z_solve`` talk to the successor and predecessor cell in each of three directions
    (the third is the diagonal). On 4 ranks every pair talks: all-to-all, as Goteti and
    Subhlok say."""
    return _multipartition_pattern("bt", nprocs, npb_class)


def sp_pattern(nprocs, npb_class="A"):
    """SP: the same multi-partition neighbours as BT, with the smaller scalar-pentadiagonal
    solve messages."""
    return _multipartition_pattern("sp", nprocs, npb_class)


_NAS = {"bt": bt_pattern, "cg": cg_pattern, "ep": ep_pattern, "ft": ft_pattern,
        "is": is_pattern, "lu": lu_pattern, "mg": mg_pattern, "sp": sp_pattern}

# -- generic patterns --------------------------------------------------------------------

UNIT_BYTES = 1_000_000


def grid_shape(nprocs):
    """Rows and columns of the most nearly square 2-D grid with ``nprocs`` cells."""
    rows = math.isqrt(nprocs)
    while nprocs % rows:
        rows -= 1
    return rows, nprocs // rows


def generic_pattern(name, nprocs):
    """Generic patterns, 1 MB per edge per iteration: ring, chain, 2-D grid, 2-D torus,
    all-to-all, pairs (0-1, 2-3, ...) and star (rank 0 is the hub)."""
    check_nprocs(name, nprocs)
    graph = new_pattern(name, nprocs)
    if name == "ring":
        edges = [(i, (i + 1) % nprocs) for i in range(nprocs)] if nprocs > 2 else \
            [(0, 1)] if nprocs == 2 else []
    elif name == "chain":
        edges = [(i, i + 1) for i in range(nprocs - 1)]
    elif name in ("grid", "torus"):
        rows, cols = grid_shape(nprocs)
        wrap = name == "torus"
        edges = []
        for r in range(rows):
            for c in range(cols):
                me = r * cols + c
                if c + 1 < cols or (wrap and cols > 2):
                    edges.append((me, r * cols + (c + 1) % cols))
                if r + 1 < rows or (wrap and rows > 2):
                    edges.append((me, ((r + 1) % rows) * cols + c))
    elif name == "all-to-all":
        edges = [(a, b) for a in range(nprocs) for b in range(a + 1, nprocs)]
    elif name == "pairs":
        edges = [(i, i + 1) for i in range(0, nprocs - 1, 2)]
    elif name == "star":
        edges = [(0, i) for i in range(1, nprocs)]
    else:
        raise UnknownPatternError(f"unknown pattern {name!r}")
    for a, b in edges:
        if a != b and not graph.has_edge(a, b):
            graph.add_edge(a, b, bytes=UNIT_BYTES)
    return graph


def pattern_names():
    return NAS_BENCHMARKS + GENERIC_PATTERNS


def builtin_pattern(name, nprocs, *, npb_class="A"):
    """A built-in pattern by name (case-insensitive), for ``nprocs`` ranks."""
    key = name.lower()
    if key in ("alltoall", "all-all", "complete"):
        key = "all-to-all"
    if key in _NAS:
        if npb_class not in CLASS_PARAMS[key]:
            raise UnknownPatternError(f"unknown NPB class {npb_class!r}; choose from S, W, A, B")
        return _NAS[key](nprocs, npb_class)
    if key in GENERIC_PATTERNS:
        return generic_pattern(key, nprocs)
    raise UnknownPatternError(
        f"unknown pattern {name!r}; built-in patterns are {', '.join(pattern_names())}, "
        "or give the path of a pattern file")


@dataclass(frozen=True)
class PatternSummary:
    name: str
    nprocs_rule: str
    description: str


def describe_patterns():
    out = []
    for name in pattern_names():
        if name in _NAS:
            doc = _NAS[name].__doc__.strip().split("\n")[0]
        else:
            doc = f"generic {name} pattern"
        out.append(PatternSummary(name, allowed_nprocs(name), doc))
    return out

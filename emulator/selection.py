"""Node selection by max-min bandwidth pruning (seed 004, Figure 1) and the baselines.

All functions are pure: they take a network status graph and a pattern graph (see
:mod:`emulator.netgraph` and :mod:`emulator.patterns`) and return a :class:`Selection`; the
input graphs are never modified.

The objective is the Figure 1 one: choose m compute nodes and a rank -> node mapping that
maximise the minimum available bandwidth over the pattern's edges. A pattern edge maps to a
path that may cross routers but no other compute node, so the search runs on the *pair
bandwidth matrix*: for every pair of compute nodes, the widest router-only path.

Figure 1 deletes edges in increasing bandwidth order until the pattern no longer embeds.
The pattern embeds after deleting every edge below ``t`` exactly when it embeds (subgraph
monomorphism) into the graph of pairs with bandwidth >= ``t``, and that is monotone in ``t``;
so :func:`max_min_select` bisects over the sorted distinct bandwidths, testing O(log E)
thresholds instead of E. :func:`figure1_select` keeps the literal loop, with networkx's VF2
matcher as the test, as the reference.
"""

import heapq
import itertools
import math
import random
import time
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from .errors import PatternDoesNotFitError, TooManyProcessesError
from .flowmodel import predict_comm_seconds
from .netgraph import COMPUTE, compute_nodes
from .patterns import generic_pattern

NO_PATH = -np.inf
DEFAULT_TIME_BUDGET_SECONDS = 5.0


@dataclass
class Candidate:
    nodes: list
    mapping: dict  # rank -> node
    bottleneck_mbps: float | None
    predicted_seconds: float = 0.0

    def to_json(self):
        return {"nodes": list(self.nodes),
                "mapping": {str(r): n for r, n in sorted(self.mapping.items())},
                "bottleneck_mbps": self.bottleneck_mbps,
                "predicted_comm_seconds": self.predicted_seconds}


@dataclass
class Selection:
    method: str
    bottleneck_mbps: float | None
    exact: bool
    candidates: list = field(default_factory=list)

    def to_json(self):
        return {"method": self.method, "bottleneck_mbps": self.bottleneck_mbps,
                "exact": self.exact, "candidates": [c.to_json() for c in self.candidates]}


# -- pair bandwidths ---------------------------------------------------------------------


def pair_bandwidths(network, *, weight="bandwidth_mbps"):
    """Widest router-only path bandwidth between every pair of compute nodes.

    Returns
    -------
    nodes : list
        The compute nodes, in graph order.
    matrix : numpy.ndarray
        ``matrix[i, j]`` is the bandwidth of the widest path from ``nodes[i]`` to ``nodes[j]``
        whose inner vertices are all routers; ``-inf`` where there is none and on the
        diagonal.
    """
    nodes = compute_nodes(network)
    routers = [n for n in network if network.nodes[n].get("kind", COMPUTE) != COMPUTE]
    ci = {n: i for i, n in enumerate(nodes)}
    ri = {n: i for i, n in enumerate(routers)}
    n, r = len(nodes), len(routers)
    matrix = np.full((n, n), NO_PATH)
    attach = np.full((n, r), NO_PATH)
    widest = np.full((r, r), NO_PATH)
    for u, v, bw in network.edges(data=weight):
        bw = float(bw)
        if u in ci and v in ci:
            i, j = ci[u], ci[v]
            matrix[i, j] = matrix[j, i] = max(matrix[i, j], bw)
        elif u in ri and v in ri:
            i, j = ri[u], ri[v]
            widest[i, j] = widest[j, i] = max(widest[i, j], bw)
        else:
            c, rr = (ci[u], ri[v]) if u in ci else (ci[v], ri[u])
            attach[c, rr] = max(attach[c, rr], bw)
    if r:
        np.fill_diagonal(widest, np.inf)
        for k in range(r):  # Floyd-Warshall in the (max, min) semiring, routers only
            np.maximum(widest, np.minimum(widest[:, k:k + 1], widest[k:k + 1, :]), out=widest)
        reach = np.full((n, r), NO_PATH)  # best bottleneck from node i to router r'
        for k in range(r):
            rows = np.nonzero(attach[:, k] > NO_PATH)[0]
            if rows.size:
                via = np.minimum(attach[rows, k:k + 1], widest[k:k + 1, :])
                reach[rows] = np.maximum(reach[rows], via)
        for k in range(r):
            cols = np.nonzero(attach[:, k] > NO_PATH)[0]
            if cols.size:
                via = np.minimum(reach[:, k:k + 1], attach[cols, k][None, :])
                matrix[:, cols] = np.maximum(matrix[:, cols], via)
    np.fill_diagonal(matrix, NO_PATH)
    return nodes, matrix


# -- the embedding search ---------------------------------------------------------------


class _OutOfTime(Exception):
    pass


def _pattern_order(pattern):
    """Ranks in search order: each next rank has the most already-placed neighbours."""
    ranks = sorted(pattern.nodes)
    order, placed = [], set()
    while len(order) < len(ranks):
        best = max((r for r in ranks if r not in placed),
                   key=lambda r: (sum(1 for q in pattern[r] if q in placed), pattern.degree(r), -r))
        order.append(best)
        placed.add(best)
    pos = {r: i for i, r in enumerate(order)}
    back = [[pos[q] for q in pattern[r] if pos[q] < i] for i, r in enumerate(order)]
    ahead = [[pos[q] for q in pattern[r] if pos[q] > i] for i, r in enumerate(order)]
    degree = [pattern.degree(r) for r in order]
    return order, back, ahead, degree


class _Matcher:
    """Subgraph-monomorphism search of a pattern into thresholded pair graphs, on bitsets.

    At each threshold the graph's vertices are relabelled by decreasing degree, so the search
    tries well-connected nodes first; neighbourhoods are Python integers used as bitsets. A
    search can be told to use every node of ``include`` and none of ``exclude``.
    """

    CACHE_LEVELS = 24

    def __init__(self, matrix, pattern, deadline):
        self.matrix = matrix
        self.order, self.back, self.ahead, self.degree = _pattern_order(pattern)
        self.m = len(self.order)
        self.deadline = deadline
        self.steps = 0
        self._cache = {}

    def _graph(self, threshold):
        if threshold in self._cache:
            return self._cache[threshold]
        adj = self.matrix >= threshold
        deg = adj.sum(axis=1)
        perm = np.argsort(-deg, kind="stable")
        inverse = np.empty_like(perm)
        inverse[perm] = np.arange(perm.size)
        packed = np.packbits(adj[np.ix_(perm, perm)], axis=1, bitorder="little")
        bits = [int.from_bytes(row.tobytes(), "little") for row in packed]
        deg = deg[perm]
        masks = {d: int.from_bytes(np.packbits(deg >= d, bitorder="little").tobytes(), "little")
                 for d in set(self.degree)}
        if len(self._cache) >= self.CACHE_LEVELS:
            self._cache.pop(next(iter(self._cache)))
        self._cache[threshold] = (perm, inverse, bits, masks)
        return self._cache[threshold]

    def embed(self, threshold, include=(), exclude=()):
        """One embedding at ``threshold`` as a tuple of node indices by rank, or ``None``.

        Raises ``_OutOfTime`` past the deadline.
        """
        perm, inverse, adj, masks = self._graph(threshold)
        order, back, ahead, m = self.order, self.back, self.ahead, self.m
        dmask = [masks[d] for d in self.degree]
        inc = sum(1 << int(inverse[i]) for i in include)
        exc = sum(1 << int(inverse[i]) for i in exclude)
        assign = [0] * m

        def domain(pos, used, placed):
            cand = dmask[pos] & ~used
            for q in back[pos]:
                if q < placed:
                    cand &= adj[assign[q]]
            return cand

        def extend(pos, used):
            if pos == m:
                return True
            missing = (inc & ~used).bit_count()
            if missing > m - pos:
                return False
            cand = domain(pos, used, pos)
            if missing == m - pos:
                cand &= inc
            while cand:
                self.steps += 1
                if self.steps & 1023 == 0 and time.monotonic() > self.deadline:
                    raise _OutOfTime
                low = cand & -cand
                cand ^= low
                assign[pos] = low.bit_length() - 1
                now = used | low
                if all(domain(f, now, pos + 1) for f in ahead[pos]) and extend(pos + 1, now):
                    return True
            return False

        if not extend(0, exc):
            return None
        by_rank = [0] * m
        for i, r in enumerate(order):
            by_rank[r] = int(perm[assign[i]])
        return tuple(by_rank)


# -- public API --------------------------------------------------------------------------


def _check_request(network, pattern):
    nodes = compute_nodes(network)
    m = pattern.number_of_nodes()
    if m > len(nodes):
        raise TooManyProcessesError(
            f"the job needs {m} nodes but the network has only {len(nodes)} compute nodes")
    if m == 0:
        raise TooManyProcessesError("the pattern has no ranks")
    return nodes, m


def _bottleneck(pattern, mapping_idx, matrix):
    values = [matrix[mapping_idx[a], mapping_idx[b]] for a, b in pattern.edges]
    return float(min(values)) if values else None


def _port_lookup(network, nodes):
    """Port capacity of each compute node: the ``capacity_mbps`` node attribute, else the
    largest ``capacity_mbps`` of its edges, else unlimited."""
    ports = {}
    for n in nodes:
        cap = network.nodes[n].get("capacity_mbps")
        if cap is None:
            caps = [d["capacity_mbps"] for _, _, d in network.edges(n, data=True)
                    if "capacity_mbps" in d]
            cap = max(caps) if caps else math.inf
        ports[n] = float(cap)
    return ports


def _candidate(pattern, nodes, matrix, idx_by_rank, ports):
    index = {nodes[i]: i for i in idx_by_rank}
    mapping = {r: nodes[i] for r, i in enumerate(idx_by_rank)}
    seconds = predict_comm_seconds(
        pattern, mapping, lambda u, v: matrix[index[u], index[v]], port_mbps=ports.__getitem__)
    group = sorted((nodes[i] for i in idx_by_rank), key=lambda n: nodes.index(n))
    return Candidate(group, mapping, _bottleneck(pattern, idx_by_rank, matrix), seconds)


def max_min_select(network, pattern, *, candidates=3, weight="bandwidth_mbps",
                   time_budget_seconds=DEFAULT_TIME_BUDGET_SECONDS, max_groups=None,
                   method="pattern"):
    """Select node groups that maximise the minimum bandwidth over the pattern's edges.

    Parameters
    ----------
    network : networkx.Graph
        Network status graph; compute nodes and routers (node attribute ``kind``).
    pattern : networkx.Graph
        Pattern graph on ranks ``0..m-1``; edges may carry ``bytes``.
    candidates : int
        How many distinct node groups to return (k).
    weight : str
        Edge attribute holding the available bandwidth.
    time_budget_seconds : float
        Wall-clock budget. When the exact search would pass it, the best embedding found is
        returned with ``exact=False``.
    max_groups : int, optional
        How many groups to collect and rank at most (default ``max(8k, 64)``).

    Returns
    -------
    Selection
        ``bottleneck_mbps`` is the best group's bottleneck (``None`` for a pattern with no
        edges); candidates are ranked by bottleneck, then by predicted communication time.

    Notes
    -----
    Candidate groups are enumerated as seed 004 describes, by backtracking the last edge
    deletions: starting at the optimal threshold, every embedding of the pattern into the
    graph of pairs at or above the threshold is enumerated and its node set kept; while fewer
    than k distinct groups are known, the threshold is lowered to the next distinct bandwidth
    (re-adding the edges deleted last) and the enumeration repeats. A group first found at
    threshold t has bottleneck exactly t, because every higher threshold was searched before.

    Raises
    ------
    TooManyProcessesError
        The pattern has more ranks than the network has compute nodes.
    PatternDoesNotFitError
        The pattern does not embed even when every pair with a path is kept.

    Examples
    --------
    >>> import networkx as nx
    >>> from emulator.patterns import generic_pattern
    >>> g = nx.Graph()
    >>> g.add_weighted_edges_from([("a", "b", 90), ("b", "c", 80), ("a", "c", 10)],
    ...                           weight="bandwidth_mbps")
    >>> s = max_min_select(g, generic_pattern("chain", 3), candidates=1)
    >>> s.bottleneck_mbps, s.candidates[0].mapping
    (80.0, {0: 'a', 1: 'b', 2: 'c'})
    """
    if candidates < 1:
        raise ValueError(f"candidates must be >= 1, got {candidates}")
    nodes, m = _check_request(network, pattern)
    max_groups = max_groups or max(8 * candidates, 64)
    start = time.monotonic()
    deadline = start + time_budget_seconds
    _, matrix = pair_bandwidths(network, weight=weight)
    ports = _port_lookup(network, nodes)
    relabel = {r: i for i, r in enumerate(sorted(pattern.nodes))}
    pattern = nx.relabel_nodes(pattern, relabel)

    if pattern.number_of_edges() == 0:
        groups = itertools.islice(itertools.combinations(range(len(nodes)), m), candidates)
        cands = [_candidate(pattern, nodes, matrix, g, ports) for g in groups]
        return Selection(method, None, True, cands)

    values = np.unique(np.fromiter(
        (float(w) for _, _, w in network.edges(data=weight)), dtype=float))
    matcher = _Matcher(matrix, pattern, deadline)
    exact = True

    first = matcher.embed(values[0]) if values.size else None
    if first is None:
        raise PatternDoesNotFitError(
            f"pattern {pattern.graph.get('name', '')!s} with {m} ranks and "
            f"{pattern.number_of_edges()} edges does not embed in the network even at "
            "bandwidth 0 (the compute nodes are not connected as the pattern needs)")
    # Bisection: values[lo] is feasible; values[hi] and above are not (or not provably).
    lo, hi, best = 0, _upper_bound_index(values, matrix, pattern) + 1, first
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            found = matcher.embed(values[mid])
        except _OutOfTime:
            exact, found = False, None
        if found:
            lo, best = mid, found
        else:
            hi = mid
    level_of = {v: i for i, v in enumerate(values)}
    cands = _lawler_groups(matcher, values, level_of, best, candidates, max_groups,
                           deadline + 0.2 * time_budget_seconds)
    cands = [_candidate(pattern, nodes, matrix, emb, ports) for emb in cands]
    cands.sort(key=lambda c: (-c.bottleneck_mbps, c.predicted_seconds, repr(c.nodes)))
    return Selection(method, cands[0].bottleneck_mbps, exact, cands[:candidates])


def _lawler_groups(matcher, values, level_of, best, k, max_groups, deadline):
    """Embeddings of the best distinct node groups, by Lawler's partition of the search space.

    After a group {v1..vm} is taken, the groups that remain are split into m disjoint
    subproblems: subproblem i must use v1..v(i-1) and must not use vi. Each subproblem's
    optimum is found lazily, searching down from its parent's bottleneck, so groups come out
    in order of bottleneck. Groups tied with the k-th are collected too (up to
    ``max_groups``) so the caller can rank ties by predicted time.
    """
    matcher.deadline = deadline
    matrix = matcher.matrix
    edges = [(matcher.order[i], matcher.order[q])
             for i in range(matcher.m) for q in matcher.back[i]]

    def level(emb):
        return level_of[min(matrix[emb[a], emb[b]] for a, b in edges)]

    def solve(include, exclude, top):
        """Embedding at the highest level <= top: gallop down from top, then bisect."""
        emb = matcher.embed(values[top], include, exclude)
        if emb is not None:
            return emb
        bad, step = top, 1
        while True:
            probe = max(bad - step, 0)
            emb = matcher.embed(values[probe], include, exclude)
            if emb is not None:
                break
            if probe == 0:
                return None
            bad, step = probe, step * 2
        lo = probe
        while bad - lo > 1:
            mid = (lo + bad) // 2
            found = matcher.embed(values[mid], include, exclude)
            if found is not None:
                lo, emb = mid, found
            else:
                bad = mid
        return emb

    taken = []
    # heap entries: (-level, is_lazy, counter, include, exclude, embedding or parent level)
    counter = itertools.count()
    heap = [(-level(best), 0, next(counter), (), (), best)]
    kth_level = None
    while heap and len(taken) < max_groups:
        neg, lazy, _, include, exclude, payload = heapq.heappop(heap)
        if kth_level is not None and -neg < kth_level:
            break
        if lazy:
            try:
                emb = solve(include, exclude, payload)
            except _OutOfTime:
                break
            if emb is not None:
                heapq.heappush(heap, (-level(emb), 0, next(counter), include, exclude, emb))
            continue
        emb = payload
        taken.append(emb)
        if len(taken) == k:
            kth_level = -neg
        group = sorted(set(emb))
        for i, v in enumerate(group):
            if v in include:
                continue
            sub_inc = tuple(sorted(set(include) | set(group[:i])))
            heapq.heappush(heap, (neg, 1, next(counter), sub_inc, exclude + (v,), -neg))
    return taken


def _upper_bound_index(values, matrix, pattern):
    """Index of the largest value that can possibly be feasible.

    A rank of degree d needs a node with d pairs at or above the threshold, and the m ranks
    need m distinct nodes with at least the smallest pattern degree.
    """
    n = matrix.shape[0]
    degrees = sorted((d for _, d in pattern.degree), reverse=True)
    m = len(degrees)
    big, small = degrees[0], degrees[-1]
    bound = np.inf
    if 0 < big < n:
        bound = min(bound, np.partition(matrix, n - big, axis=1)[:, n - big].max())
    if 0 < small < n:
        kth = np.partition(matrix, n - small, axis=1)[:, n - small]
        bound = min(bound, np.partition(kth, n - m)[n - m])
    return int(np.searchsorted(values, bound, side="right")) - 1 if np.isfinite(bound) \
        else len(values) - 1


def all_all_select(network, nprocs, **kwargs):
    """The all-all baseline (Subhlok, Lieu and Lowekamp 1999): the same max-min search with
    the complete pattern K_m, so every pair of selected nodes counts."""
    return max_min_select(network, generic_pattern("all-to-all", nprocs), method="all-all",
                          **kwargs)


def random_select(network, pattern, *, seed=None, candidates=1):
    """The random baseline: a seeded uniform choice of m nodes and of the mapping.

    Examples
    --------
    >>> import networkx as nx
    >>> from emulator.patterns import generic_pattern
    >>> g = nx.complete_graph(["a", "b", "c", "d"])
    >>> nx.set_edge_attributes(g, 50.0, "bandwidth_mbps")
    >>> random_select(g, generic_pattern("ring", 3), seed=1).bottleneck_mbps
    50.0
    """
    nodes, m = _check_request(network, pattern)
    _, matrix = pair_bandwidths(network)
    ports = _port_lookup(network, nodes)
    pattern = nx.relabel_nodes(pattern, {r: i for i, r in enumerate(sorted(pattern.nodes))})
    rng = random.Random(seed)
    total = math.comb(len(nodes), m)
    seen, cands = set(), []
    while len(cands) < min(candidates, total):
        idx = rng.sample(range(len(nodes)), m)  # a uniform group in a uniform order
        if frozenset(idx) in seen:
            continue
        seen.add(frozenset(idx))
        cands.append(_candidate(pattern, nodes, matrix, tuple(idx), ports))
    bottleneck = cands[0].bottleneck_mbps
    if bottleneck is not None and not np.isfinite(bottleneck):
        bottleneck = None
    return Selection("random", bottleneck, True, cands)


def figure1_select(network, pattern, *, weight="bandwidth_mbps", deadline_seconds=None):
    """The literal Figure 1 loop, kept as the reference for tests and benchmarks.

    Delete the minimum-bandwidth edge, one at a time, and test after every deletion whether
    the pattern still embeds (networkx VF2 subgraph monomorphism); when it no longer does,
    undo the last deletion and return an embedding. Slow by design: one test per edge.

    Raises ``TimeoutError`` after ``deadline_seconds``.
    """
    nodes, m = _check_request(network, pattern)
    _, matrix = pair_bandwidths(network, weight=weight)
    pattern = nx.relabel_nodes(pattern, {r: i for i, r in enumerate(sorted(pattern.nodes))})
    graph = nx.Graph()
    graph.add_nodes_from(range(len(nodes)))
    iu = np.argwhere(np.triu(matrix > NO_PATH, 1))
    edges = sorted(((float(matrix[i, j]), int(i), int(j)) for i, j in iu))
    graph.add_weighted_edges_from(((i, j, w) for w, i, j in edges), weight=weight)
    stop = None if deadline_seconds is None else time.monotonic() + deadline_seconds

    def embeds():
        return nx.algorithms.isomorphism.GraphMatcher(graph, pattern).subgraph_is_monomorphic()

    if not embeds():
        raise PatternDoesNotFitError("pattern does not embed even at bandwidth 0")
    if pattern.number_of_edges() == 0:
        emb = tuple(range(m))
    else:
        for w, i, j in edges:
            if stop is not None and time.monotonic() > stop:
                raise TimeoutError("the literal Figure 1 loop passed its deadline")
            graph.remove_edge(i, j)
            if not embeds():
                graph.add_edge(i, j, **{weight: w})
                break
        matcher = nx.algorithms.isomorphism.GraphMatcher(graph, pattern)
        g_to_p = next(matcher.subgraph_monomorphisms_iter())
        emb = tuple(g for _, g in sorted((p, g) for g, p in g_to_p.items()))
    cand = _candidate(pattern, nodes, matrix, emb, _port_lookup(network, nodes))
    return Selection("figure1", cand.bottleneck_mbps, True, [cand])


SELECTORS = {"pattern": max_min_select, "all-all": all_all_select, "random": random_select}

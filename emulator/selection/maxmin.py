"""Node selection by max-min bandwidth pruning (Goteti and Subhlok, Figure 1) and the baselines.

All functions are pure: they take a network status graph and a pattern graph (see
:mod:`emulator.network.netgraph` and :mod:`emulator.selection.patterns`) and return a :class:`Selection`; the
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

import itertools
import math
import random
import time
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from ..errors import PatternDoesNotFitError, TooManyProcessesError
from ..network.flowmodel import predict_comm_seconds
from ..network.netgraph import COMPUTE, compute_nodes
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


def _symmetry_chains(pattern, order):
    """For each search position, an earlier position whose node index it must exceed.

    Two safe kinds of symmetry are broken: twins (ranks u, v with N(u) - {v} = N(v) - {u}
    can swap, so a class of pairwise twins can be sorted), and interchangeable clique
    components (K1, K2, ... of the same size can swap whole, so they can be sorted by their
    first node). Every node group keeps an embedding that obeys the chains, so searches
    stay exact while visiting far fewer symmetric copies.
    """
    pos = {r: i for i, r in enumerate(order)}
    prev = [None] * len(order)
    classes = []
    for r in order:  # greedy classes of pairwise twins, in search order
        for cls in classes:
            if all(set(pattern[r]) - {q} == set(pattern[q]) - {r} for q in cls):
                cls.append(r)
                break
        else:
            classes.append([r])
    for cls in classes:
        for a, b in zip(cls, cls[1:]):
            prev[pos[b]] = pos[a]
    anchors = {}
    for comp in nx.connected_components(pattern):
        if all(pattern.degree(r) == len(comp) - 1 for r in comp):  # a clique component
            anchors.setdefault(len(comp), []).append(min(pos[r] for r in comp))
    for firsts in anchors.values():
        firsts.sort()
        for a, b in zip(firsts, firsts[1:]):
            if prev[b] is None:
                prev[b] = a
    return prev


class _Matcher:
    """Subgraph-monomorphism search of a pattern into thresholded pair graphs, on bitsets.

    At each threshold the graph's vertices are relabelled by decreasing degree, so the search
    tries well-connected nodes first; neighbourhoods are Python integers used as bitsets. A
    search can be told to find a node group different from given ones.
    """

    CACHE_LEVELS = 24

    def __init__(self, matrix, pattern, deadline):
        self.matrix = matrix
        self.order, self.back, self.ahead, self.degree = _pattern_order(pattern)
        self.after = _symmetry_chains(pattern, self.order)
        self.m = len(self.order)
        self.complete = self.m >= 3 and pattern.number_of_edges() == self.m * (self.m - 1) // 2
        self.deadline = deadline
        self.steps = 0
        self._cache = {}

    def _clique(self, adj, cand, avoid):
        """A clique of size m (node bits) by branch and bound with a greedy-colouring bound
        (Tomita and Seki's MCQ): a candidate set that colours with c colours holds no clique
        larger than c."""
        m, chosen = self.m, []

        def colour_order(cand):
            order, colours, colour, rest = [], [], 0, cand
            while rest:
                colour += 1
                q = rest
                while q:
                    low = q & -q
                    v = low.bit_length() - 1
                    rest &= ~low
                    q &= ~low & ~adj[v]
                    order.append(v)
                    colours.append(colour)
            return order, colours

        def grow(cand, need, used):
            if need == 0:
                return True
            order, colours = colour_order(cand)
            for v, colour in zip(reversed(order), reversed(colours)):
                if colour < need:
                    return False
                if time.monotonic() > self.deadline:  # a step here costs a colouring
                    raise _OutOfTime
                bit = 1 << v
                now = used | bit
                if need == 1 and any(now & ~group == 0 for group in avoid):
                    cand &= ~bit
                    continue
                chosen.append(v)
                if grow(cand & adj[v], need - 1, now):
                    return True
                chosen.pop()
                cand &= ~bit
            return False

        return chosen if grow(cand, m, 0) else None

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

    def embed(self, threshold, avoid=()):
        """One embedding at ``threshold`` as a tuple of node indices by rank, or ``None``.

        ``avoid`` lists node groups (sets of indices) the embedding's group must differ from:
        it must use, for each of them, a node outside it. Raises ``_OutOfTime`` past the
        deadline.
        """
        perm, inverse, adj, masks = self._graph(threshold)
        order, back, ahead, m, after = self.order, self.back, self.ahead, self.m, self.after
        dmask = [masks[d] for d in self.degree]
        avoid = [sum(1 << int(inverse[i]) for i in group) for group in avoid]
        everyone = masks[min(self.degree)]  # nodes with enough pairs at this threshold
        if self.complete:
            found = self._clique(adj, everyone, avoid)
            return None if found is None else tuple(sorted(int(perm[v]) for v in found))
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
            free = everyone & ~used
            if free.bit_count() < m - pos:
                return False  # not enough nodes left
            for group in avoid:  # still inside an avoided group, with no way out of it
                if used & ~group == 0 and free & ~group == 0:
                    return False
            cand = domain(pos, used, pos)
            if after[pos] is not None:  # symmetry: above the chained position's node
                cand &= ~((2 << assign[after[pos]]) - 1)
            if pos == m - 1:  # the last node must take the group out of every avoided one
                for group in avoid:
                    if used & ~group == 0:
                        cand &= ~group
            while cand:
                self.steps += 1
                if self.steps & 1023 == 0 and time.monotonic() > self.deadline:
                    raise _OutOfTime
                low = cand & -cand
                cand ^= low
                assign[pos] = low.bit_length() - 1
                now = used | low
                # forward check: every later neighbour still has a candidate
                if all(domain(f, now, pos + 1) for f in ahead[pos]) and extend(pos + 1, now):
                    return True
            return False

        if not extend(0, 0):
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
        Wall-clock budget for the whole call: 80% for the optimum, the rest for further
        candidates. When the exact search would pass it, the best embedding found is
        returned with ``exact=False``. The first embedding (at the lowest bandwidth) is
        always searched to the end, since without it there is no answer.
    max_groups : int, optional
        How many groups to collect and rank at most (default ``max(8k, 64)``).

    Returns
    -------
    Selection
        ``bottleneck_mbps`` is the best group's bottleneck (``None`` for a pattern with no
        edges); candidates are ranked by bottleneck, then by predicted communication time.

    Notes
    -----
    Candidate groups follow Goteti and Subhlok's "backtracking the last few edge deletions": each next
    group is found at the highest threshold where the pattern embeds in a node group that
    differs from every group found so far, by bisection below the previous group's
    threshold, so deleted edges are re-added only as far as needed. Every higher threshold
    was searched first, so a group first found at threshold t has bottleneck exactly t and
    the groups come out best first. Groups tied with the k-th are collected briefly and
    ranked by the predicted communication time of a flow model
    (:func:`emulator.flowmodel.predict_comm_seconds`). Searches break two safe symmetries
    (twin ranks, interchangeable clique components), and complete patterns use a clique
    search with a colouring bound.

    Raises
    ------
    TooManyProcessesError
        The pattern has more ranks than the network has compute nodes.
    PatternDoesNotFitError
        The pattern does not embed even when every pair with a path is kept.

    Examples
    --------
    >>> import networkx as nx
    >>> from emulator.selection.patterns import generic_pattern
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
    deadline = start + 0.8 * time_budget_seconds  # the rest is for further candidates
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
    # the first embedding, at the lowest threshold, is the answer of last resort: it is
    # searched to the end, whatever the budget
    matcher = _Matcher(matrix, pattern, math.inf)
    exact = True

    first = matcher.embed(values[0]) if values.size else None
    matcher.deadline = deadline
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
    cands = _next_groups(matcher, values, lo, best, candidates, max_groups,
                         start + time_budget_seconds, 0.02 * time_budget_seconds)
    cands = [_candidate(pattern, nodes, matrix, emb, ports) for emb in cands]
    cands.sort(key=lambda c: (-c.bottleneck_mbps, c.predicted_seconds, repr(c.nodes)))
    return Selection(method, cands[0].bottleneck_mbps, exact, cands[:candidates])


def _next_groups(matcher, values, top, best, k, max_groups, deadline, tie_seconds):
    """Embeddings of the best distinct node groups, best first.

    Seed 004 backtracks the last few edge deletions to find more groups. Here, each next
    group is the highest threshold at which the pattern embeds in a node group different
    from every group found so far, found by bisection below the previous group's threshold
    (re-adding deleted edges only as far as needed). Because every higher threshold was
    searched first, a group first found at threshold t has bottleneck exactly t. Groups
    tied with the k-th are collected too (up to ``max_groups``), for the caller to rank by
    predicted time. Stops early, with the groups found so far, past ``deadline``.
    """
    matcher.deadline = deadline
    groups, level = [best], top
    tie_level = top if k == 1 else None
    every_group = math.comb(matcher.matrix.shape[0], matcher.m)
    try:
        while len(groups) < min(max_groups, every_group):
            avoid = [set(g) for g in groups]
            if tie_level is not None:  # ties only sharpen the ranking: a short search
                matcher.deadline = min(deadline, time.monotonic() + tie_seconds)
            emb = matcher.embed(values[level], avoid)
            if emb is None:
                if tie_level is not None or level == 0:
                    break
                bad, lo = level, -1  # bisect for the highest level that still has one
                while bad - lo > 1:
                    mid = (lo + bad) // 2
                    found = matcher.embed(values[mid], avoid)
                    if found is not None:
                        lo, emb = mid, found
                    else:
                        bad = mid
                if emb is None:
                    break
                level = lo
            groups.append(emb)
            if len(groups) == k:
                tie_level = level
    except _OutOfTime:
        pass
    return groups


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
    >>> from emulator.selection.patterns import generic_pattern
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

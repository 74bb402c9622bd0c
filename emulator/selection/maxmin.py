"""Node selection by max-min bandwidth pruning (Goteti and Subhlok, Figure 1) and the baselines.

All functions are pure: they take a network status graph and a pattern graph (see
:mod:`emulator.network.netgraph` and :mod:`emulator.selection.patterns`) and return a
:class:`Selection`; the input graphs are never modified.

The objective is the Figure 1 one: choose m compute nodes and a rank -> node mapping that
maximise the minimum available bandwidth over the pattern's edges. A pattern edge maps to a
path that may cross routers but no other compute node, so the search runs on the *pair
bandwidth matrix*: for every pair of compute nodes, the widest router-only path.

Figure 1 deletes edges in increasing bandwidth order until the pattern no longer embeds.
The pattern embeds after deleting every edge below ``t`` exactly when it embeds (subgraph
monomorphism) into the graph of pairs with bandwidth >= ``t``, and that is monotone in ``t``;
so :func:`max_min_select` searches the sorted distinct bandwidths by bisection while the
bracket is wide, then ascends (each search starts just above the last embedding's
bottleneck, so one search, the proof, comes out empty). Each test is a backtracking search
on bitsets (:mod:`.matcher`: in C, ``_search.c``, with Python as the fallback) that places the
rank with the fewest nodes left first, checks forward through adjacency and common-neighbour
counts (a pattern pair sharing k neighbours needs a node pair sharing k), and breaks the
pattern's symmetries with conditions from its automorphism group. Complete patterns use a
clique branch and bound with a colouring bound that raises its threshold as it finds
cliques; patterns of disjoint pairs are bottleneck matchings (polynomial). :func:`figure1_select`
keeps the literal loop, with networkx's VF2 matcher as the test, as the reference.
"""

import itertools
import math
import random
import time
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from ..errors import PatternDoesNotFitError, TooManyProcessesError
from ..network.cluster import latency_function
from ..network.sharing import pattern_seconds
from ..network.netgraph import COMPUTE, compute_nodes
from .patterns import generic_pattern
from . import matcher as _matcher
from .matcher import Matcher, OutOfTime

NO_PATH = -np.inf
DEFAULT_TIME_BUDGET_SECONDS = 5.0
# bracket (in distinct bandwidths) below which searches ascend, and below which a complete
# pattern's search is one branch and bound, on 256 nodes; both scale with 1/n^2, as a
# restart's cost (thresholding the pair matrix) grows with n^2
ASCEND_LEVELS = 256
CLIQUE_LEVELS = 4096
CLIQUE_PROBES = 3  # bisection steps, at least, before it
SYMMETRY_SHARE = 0.1  # of the time budget, at most, for the pattern's automorphisms


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
    direct = [(ci[u], ci[v], bw) for u, v, bw in network.edges(data=weight)
              if u in ci and v in ci]  # a Graph has one edge per pair: set, no max needed
    if direct:
        i, j, bw = (np.array(column) for column in zip(*direct))
        matrix[i, j] = matrix[j, i] = bw.astype(float)
    for u, v, bw in network.edges(data=weight):
        if u in ci and v in ci:
            continue
        bw = float(bw)
        if u in ri and v in ri:
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
    edge_caps = {}  # one pass over the edges
    for u, v, cap in network.edges(data="capacity_mbps"):
        if cap is not None:
            for end in (u, v):
                edge_caps[end] = max(edge_caps.get(end, -math.inf), float(cap))
    ports = {}
    for n in nodes:
        cap = network.nodes[n].get("capacity_mbps")
        ports[n] = float(cap) if cap is not None else edge_caps.get(n, math.inf)
    return ports


def _costs(network, costs):
    """What a candidate's predicted time charges each message: ``costs``
    (:func:`emulator.network.sharing.message_costs`), else the network graph's own links'
    latency (:func:`emulator.network.cluster.latency_function`) and no cost."""
    if costs is None:
        return {"latency_seconds": latency_function(network), "message_seconds": 0.0}
    return dict(costs)


def _candidate(pattern, nodes, matrix, idx_by_rank, ports, costs):
    index = {nodes[i]: i for i in idx_by_rank}
    mapping = {r: nodes[i] for r, i in enumerate(idx_by_rank)}
    seconds = pattern_seconds(pattern, mapping, lambda u, v: matrix[index[u], index[v]],
                              port_mbps=ports.__getitem__, **costs)
    group = sorted((nodes[i] for i in idx_by_rank), key=lambda n: nodes.index(n))
    return Candidate(group, mapping, _bottleneck(pattern, idx_by_rank, matrix), seconds)


def max_min_select(network, pattern, *, candidates=3, weight="bandwidth_mbps",
                   time_budget_seconds=DEFAULT_TIME_BUDGET_SECONDS, max_groups=None,
                   method="pattern", costs=None):
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
    costs : dict, optional
        Per message, for the predicted time (as ``message_costs``; default: links' latency).

    Returns
    -------
    Selection
        ``bottleneck_mbps`` is the best group's bottleneck (``None`` for a pattern with no
        edges); candidates are ranked by bottleneck, then by predicted communication time.

    Notes
    -----
    Candidate groups follow Goteti and Subhlok's "backtracking the last few edge deletions":
    each next group is the best embedding in a node group that differs from every group found
    so far, searched up to the previous group's threshold, so deleted edges are re-added only
    as far as needed, and the groups come out best first (a complete pattern's branch and
    bound finds the k best in one pass). Groups tied with the k-th are collected briefly and
    ranked by the predicted communication time of a flow model
    (:func:`emulator.network.sharing.pattern_seconds`). Searches break the pattern's
    symmetries (conditions from its automorphism group, or twin ranks and interchangeable
    clique components when those remove more), so each node group is searched once.

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
    start = time.monotonic()
    _, matrix = pair_bandwidths(network, weight=weight)
    ports = _port_lookup(network, nodes)
    costs = _costs(network, costs)
    pattern = nx.relabel_nodes(pattern, {r: i for i, r in enumerate(sorted(pattern.nodes))})
    if pattern.number_of_edges() == 0:
        groups = itertools.islice(itertools.combinations(range(len(nodes)), m), candidates)
        cands = [_candidate(pattern, nodes, matrix, g, ports, costs) for g in groups]
        return Selection(method, None, True, cands)
    values = _bandwidth_values(network, matrix, weight)
    found, exact = _embeddings(matrix, values, pattern, candidates,
                               max_groups or max(8 * candidates, 64), start,
                               time_budget_seconds)
    cands = [_candidate(pattern, nodes, matrix, emb, ports, costs) for emb in found]
    cands.sort(key=lambda c: (-c.bottleneck_mbps, c.predicted_seconds, repr(c.nodes)))
    return Selection(method, cands[0].bottleneck_mbps, exact, cands[:candidates])


def _bandwidth_values(network, matrix, weight):
    """The distinct thresholds worth testing: every bottleneck is a pair bandwidth, and
    every pair bandwidth an edge's bandwidth."""
    if network.number_of_edges() < matrix.size // 4:
        return np.unique(np.fromiter(
            (float(w) for _, _, w in network.edges(data=weight)), dtype=float))
    return np.unique(matrix[matrix > NO_PATH])


def _embeddings(matrix, values, pattern, candidates, max_groups, start, budget_seconds):
    """The best embeddings of ``pattern`` (ranks 0..m-1) and whether the best is proven
    optimal: the first, at the lowest threshold, searched to the end whatever the budget
    (the answer of last resort), then 80% of the budget for the optimum, the rest for
    further candidates."""
    matcher = Matcher(matrix, pattern, math.inf, start + SYMMETRY_SHARE * budget_seconds)
    first = matcher.embed(values[0]) if values.size else None
    matcher.deadline = start + 0.8 * budget_seconds
    if first is None:
        raise PatternDoesNotFitError(
            f"pattern {pattern.graph.get('name', '')!s} with {pattern.number_of_nodes()} "
            f"ranks and {pattern.number_of_edges()} edges does not embed in the network even "
            "at bandwidth 0 (the compute nodes are not connected as the pattern needs)")
    # Ascend: every embedding found lifts the threshold just above its own bottleneck, so
    # only the last search, the proof that nothing better exists, comes out empty (a
    # bisection would prove several empty thresholds, and empty ones cost the most).
    top = _upper_bound_index(values, matrix, pattern)
    exact = True
    if all(d == 1 for _, d in pattern.degree):  # disjoint pairs: a matching problem
        groups = [_best_matching(matrix, values, pattern, first, top)]
    else:
        groups, exact = _ascend(matcher, values, first, top, k=candidates)
    return _next_groups(matcher, values, groups, candidates, max_groups,
                        start + budget_seconds, 0.02 * budget_seconds), exact


def _next_groups(matcher, values, groups, k, max_groups, deadline, tie_seconds):
    """Embeddings of the best distinct node groups, best first, after ``groups`` (the best
    ones, already proven).

    Goteti and Subhlok backtrack the last few edge deletions to find more groups. Here, each next
    group is the best embedding in a node group different from every group found so far,
    searched (:func:`_ascend`) up to the previous group's threshold, so deleted edges are
    re-added only as far as needed. Groups tied with the k-th are collected too (up to
    ``max_groups``), for the caller to rank by predicted time. Stops early, with the groups
    found so far, past ``deadline``.
    """
    matcher.deadline = deadline
    groups, level = list(groups), matcher.level(groups[-1], values)
    tie_level = level if len(groups) >= k else None
    every_group = math.comb(matcher.matrix.shape[0], matcher.m)
    try:
        while len(groups) < min(max_groups, every_group):
            avoid = [set(g) for g in groups]
            if tie_level is not None:  # ties only sharpen the ranking: a short search
                matcher.deadline = min(deadline, time.monotonic() + tie_seconds)
                emb = matcher.embed(values[tie_level], avoid)
                if emb is None:
                    break
            else:  # the best group left is at or below the previous group's level
                emb = matcher.embed(values[0], avoid)
                if emb is None:
                    break
                found, complete = _ascend(matcher, values, emb, level, avoid)
                emb = found[0]
                if not complete:
                    groups.append(emb)
                    break
                level = matcher.level(emb, values)
            groups.append(emb)
            if len(groups) == k:
                tie_level = level
    except OutOfTime:
        pass
    return groups


def _ascend(matcher, values, emb, top, avoid=(), k=1):
    """The best embedding at or above ``emb``'s bottleneck and at most ``values[top]``.

    Bisection while the bracket is wide, then ascent: each search starts just above the
    bottleneck of the last embedding found, so only the last one comes out empty. Empty
    searches near the optimum cost the most, and a bisection makes several of them. A
    complete pattern, once the bracket is narrow, finishes with one branch and bound in C
    (:meth:`Matcher.best_cliques`) that also finds up to ``k`` best groups.
    Returns a list of embeddings, best first, and whether they were proven best (``False``
    when out of time).
    """
    lo, hi = matcher.level(emb, values), top + 1
    scale = (256 / max(256, matcher.matrix.shape[0])) ** 2
    probes = 0
    while hi - lo > 1:
        # the branch and bound climbs one clique at a time: start it near the optimum
        if (matcher.complete and _matcher._search is not None and probes >= CLIQUE_PROBES
                and hi - lo <= CLIQUE_LEVELS * scale):
            return matcher.best_cliques(values, emb, hi - 1, avoid, k)
        probes += 1
        mid = (lo + hi) // 2 if hi - lo > ASCEND_LEVELS * scale else lo + 1
        try:
            found = matcher.embed(values[mid], avoid)
        except OutOfTime:
            return [emb], False
        if found is None:
            hi = mid
        else:
            emb, lo = found, matcher.level(found, values)
    return [emb], True


def _best_matching(matrix, values, pattern, emb, top):
    """The best embedding of a pattern of disjoint pairs, exactly and in polynomial time: it
    embeds at threshold t when the graph of pairs >= t has a matching of as many edges
    (bottleneck matching: bisection over thresholds; a greedy matching, heaviest pairs
    first, settles most thresholds, Edmonds' blossom algorithm in networkx the rest)."""
    pairs = sorted(tuple(sorted(e)) for e in pattern.edges)
    need = len(pairs)

    def matching(threshold):
        rows, cols = np.nonzero(np.triu(matrix >= threshold, 1))
        if rows.size < need:
            return None
        heaviest = np.argsort(-matrix[rows, cols], kind="stable")
        taken, chosen = set(), []
        for e in heaviest:
            i, j = int(rows[e]), int(cols[e])
            if i not in taken and j not in taken:
                taken.update((i, j))
                chosen.append((i, j))
                if len(chosen) == need:
                    break
        if len(chosen) < need:
            graph = nx.Graph()
            graph.add_edges_from(zip(rows.tolist(), cols.tolist()))
            chosen = list(nx.max_weight_matching(graph, maxcardinality=True))
            if len(chosen) < need:
                return None
            chosen.sort(key=lambda e: -matrix[e])
        by_rank = [0] * (2 * need)
        for (a, b), (i, j) in zip(pairs, chosen[:need]):
            by_rank[a], by_rank[b] = i, j
        return tuple(by_rank)

    def level(found):
        bottleneck = min(matrix[found[a], found[b]] for a, b in pairs)
        return int(np.searchsorted(values, bottleneck, side="right")) - 1

    lo, hi = level(emb), top + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        found = matching(values[mid])
        if found is None:
            hi = mid
        else:
            emb, lo = found, level(found)
    return emb


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


def random_select(network, pattern, *, seed=None, candidates=1, costs=None):
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
    costs = _costs(network, costs)
    pattern = nx.relabel_nodes(pattern, {r: i for i, r in enumerate(sorted(pattern.nodes))})
    rng = random.Random(seed)
    total = math.comb(len(nodes), m)
    seen, cands = set(), []
    while len(cands) < min(candidates, total):
        idx = rng.sample(range(len(nodes)), m)  # a uniform group in a uniform order
        if frozenset(idx) in seen:
            continue
        seen.add(frozenset(idx))
        cands.append(_candidate(pattern, nodes, matrix, tuple(idx), ports, costs))
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
    cand = _candidate(pattern, nodes, matrix, emb, _port_lookup(network, nodes),
                      _costs(network, None))
    return Selection("figure1", cand.bottleneck_mbps, True, [cand])


SELECTORS = {"pattern": max_min_select, "all-all": all_all_select, "random": random_select}

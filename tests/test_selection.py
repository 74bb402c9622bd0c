"""Node selection against brute force, the literal Figure 1 loop, and bad input."""

import itertools
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulator.errors import PatternDoesNotFitError, TooManyProcessesError
from emulator.selection.maxmin import (
    all_all_select,
    figure1_select,
    max_min_select,
    pair_bandwidths,
    random_select,
)
from emulator.selection.patterns import builtin_pattern, generic_pattern

BANDWIDTHS = st.sampled_from([10.0, 12.5, 20.0, 25.0, 33.3, 50.0, 70.0, 100.0])


@st.composite
def crossbars(draw):
    n = draw(st.integers(2, 9))
    graph = nx.Graph()
    graph.add_nodes_from((f"n{i}", {"kind": "compute"}) for i in range(1, n + 1))
    for a, b in itertools.combinations(list(graph), 2):
        if draw(st.floats(0, 1)) < 0.85:
            graph.add_edge(a, b, bandwidth_mbps=draw(BANDWIDTHS))
    return graph


@st.composite
def router_trees(draw):
    """Compute nodes hang off a random tree of routers; a few direct links too."""
    n = draw(st.integers(2, 9))
    routers = draw(st.integers(1, 3))
    graph = nx.Graph()
    for r in range(routers):
        graph.add_node(f"r{r}", kind="router")
        if r:
            graph.add_edge(f"r{r}", f"r{draw(st.integers(0, r - 1))}", bandwidth_mbps=draw(BANDWIDTHS))
    for i in range(1, n + 1):
        graph.add_node(f"n{i}", kind="compute")
        graph.add_edge(f"n{i}", f"r{draw(st.integers(0, routers - 1))}",
                       bandwidth_mbps=draw(BANDWIDTHS))
    if n >= 2 and draw(st.booleans()):
        graph.add_edge("n1", "n2", bandwidth_mbps=draw(BANDWIDTHS))
    return graph


@st.composite
def patterns(draw, max_m):
    m = draw(st.integers(2, max(2, min(max_m, 5))))
    kind = draw(st.sampled_from(["ring", "chain", "star", "pairs", "all-to-all", "grid", "random"]))
    if kind != "random":
        return generic_pattern(kind, m)
    graph = nx.Graph()
    graph.add_nodes_from(range(m))
    for a, b in itertools.combinations(range(m), 2):
        if draw(st.booleans()):
            graph.add_edge(a, b, bytes=draw(st.integers(1, 10**6)))
    return graph


def brute_force_groups(network, pattern):
    """Best bottleneck of every node group, over every mapping."""
    nodes, matrix = pair_bandwidths(network)
    m = pattern.number_of_nodes()
    best = {}
    for perm in itertools.permutations(range(len(nodes)), m):
        value = min((matrix[perm[a], perm[b]] for a, b in pattern.edges), default=math.inf)
        key = frozenset(perm)
        best[key] = max(best.get(key, -math.inf), value)
    return nodes, matrix, best


def mapped_bottleneck(pattern, mapping, nodes, matrix):
    index = {n: i for i, n in enumerate(nodes)}
    return min(matrix[index[mapping[a]], index[mapping[b]]] for a, b in pattern.edges)


def check_against_brute_force(network, pattern, k=3):
    nodes, matrix, best = brute_force_groups(network, pattern)
    if pattern.number_of_nodes() > len(nodes):
        return
    if pattern.number_of_edges() == 0:
        assert max_min_select(network, pattern, candidates=k).bottleneck_mbps is None
        return
    optimum = max(best.values())
    if optimum == -math.inf:
        with pytest.raises(PatternDoesNotFitError):
            max_min_select(network, pattern, candidates=k)
        return
    before = nx.node_link_data(network, edges="links")
    result = max_min_select(network, pattern, candidates=k)
    assert nx.node_link_data(network, edges="links") == before, "input graph was modified"
    assert result.exact
    assert result.bottleneck_mbps == optimum
    groups = [frozenset(c.nodes) for c in result.candidates]
    assert len(set(groups)) == len(groups), "candidate groups are not distinct"
    feasible = sorted((v for v in best.values() if v > -math.inf), reverse=True)
    assert [c.bottleneck_mbps for c in result.candidates] == feasible[:k]
    for cand in result.candidates:
        assert sorted(cand.mapping) == list(range(pattern.number_of_nodes()))
        assert set(cand.mapping.values()) == set(cand.nodes)
        assert cand.bottleneck_mbps == mapped_bottleneck(pattern, cand.mapping, nodes, matrix)

    literal = figure1_select(network, pattern)
    assert literal.bottleneck_mbps == optimum


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_crossbar_matches_brute_force(data):
    network = data.draw(crossbars())
    check_against_brute_force(network, data.draw(patterns(len(network))))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_router_tree_matches_brute_force(data):
    network = data.draw(router_trees())
    n = sum(1 for _, k in network.nodes(data="kind") if k == "compute")
    check_against_brute_force(network, data.draw(patterns(n)))


def test_router_paths_never_cross_compute_nodes():
    # a - b - c in a chain of compute nodes: a and c have no path (b is a compute node)
    g = nx.Graph()
    g.add_edge("a", "b", bandwidth_mbps=100.0)
    g.add_edge("b", "c", bandwidth_mbps=100.0)
    nodes, matrix = pair_bandwidths(g)
    assert matrix[nodes.index("a"), nodes.index("c")] == -np.inf
    with pytest.raises(PatternDoesNotFitError):
        max_min_select(g, generic_pattern("all-to-all", 3))


def test_widest_router_path_is_used():
    g = nx.Graph()
    g.add_node("s1", kind="switch")
    g.add_node("s2", kind="switch")
    g.add_edge("a", "s1", bandwidth_mbps=100.0)
    g.add_edge("b", "s2", bandwidth_mbps=100.0)
    g.add_edge("s1", "s2", bandwidth_mbps=30.0)
    g.add_node("r", kind="router")
    g.add_edge("s1", "r", bandwidth_mbps=60.0)
    g.add_edge("r", "s2", bandwidth_mbps=80.0)
    nodes, matrix = pair_bandwidths(g)
    assert matrix[nodes.index("a"), nodes.index("b")] == 60.0


def ten_node_crossbar(seed):
    rng = np.random.default_rng(seed)
    g = nx.Graph()
    names = [f"n{i}" for i in range(1, 11)]
    g.add_nodes_from(names, kind="compute")
    for a, b in itertools.combinations(names, 2):
        g.add_edge(a, b, bandwidth_mbps=float(rng.choice([10, 20, 25, 33.3, 50, 100])))
    return g


def test_cg_uses_its_three_pairs():
    """On a network where only three disjoint-ish fast pairs exist, CG (3 pairs) finds them at
    full speed while all-all cannot."""
    g = nx.complete_graph([f"n{i}" for i in range(1, 7)])
    nx.set_edge_attributes(g, 10.0, "bandwidth_mbps")
    for a, b in [("n1", "n2"), ("n2", "n3"), ("n3", "n4")]:
        g[a][b]["bandwidth_mbps"] = 100.0
    cg = max_min_select(g, builtin_pattern("cg", 4), candidates=1)
    assert cg.bottleneck_mbps == 100.0
    assert all_all_select(g, 4, candidates=1).bottleneck_mbps == 10.0


def test_ties_are_ranked_by_predicted_time():
    g = ten_node_crossbar(3)
    result = max_min_select(g, builtin_pattern("cg", 4), candidates=3)
    keys = [(-c.bottleneck_mbps, c.predicted_seconds) for c in result.candidates]
    assert keys == sorted(keys)


def test_random_baseline_is_seeded_and_uniform():
    g = ten_node_crossbar(1)
    p = builtin_pattern("cg", 4)
    a = random_select(g, p, seed=7, candidates=3)
    b = random_select(g, p, seed=7, candidates=3)
    assert a.to_json() == b.to_json()
    counts = {}
    for seed in range(2000):
        for node in random_select(g, p, seed=seed).candidates[0].nodes:
            counts[node] = counts.get(node, 0) + 1
    # each node is chosen with probability 4/10: 800 of 2000, binomial sd ~ 22
    assert all(abs(c - 800) < 110 for c in counts.values()), counts


def test_pattern_without_edges():
    g = ten_node_crossbar(2)
    result = max_min_select(g, builtin_pattern("ep", 4), candidates=2)
    assert result.bottleneck_mbps is None
    assert len(result.candidates) == 2


def test_too_many_processes():
    g = ten_node_crossbar(0)
    with pytest.raises(TooManyProcessesError, match="16 nodes"):
        max_min_select(g, builtin_pattern("cg", 16))


def test_time_budget_is_reported_not_silent():
    """An all-to-all search that cannot finish in a tiny budget says exact=false."""
    rng = np.random.default_rng(0)
    n = 120
    g = nx.Graph()
    for a, b in itertools.combinations(range(n), 2):
        g.add_edge(a, b, bandwidth_mbps=float(rng.random()))
    result = max_min_select(g, generic_pattern("all-to-all", 12), time_budget_seconds=0.05)
    assert result.exact is False
    best = result.candidates[0]
    nodes, matrix = pair_bandwidths(g)
    assert best.bottleneck_mbps == mapped_bottleneck(
        generic_pattern("all-to-all", 12), best.mapping, nodes, matrix)

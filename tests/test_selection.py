"""Node selection against brute force, the literal Figure 1 loop, and bad input."""

import contextlib
import itertools
import math
import time

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulator.errors import PatternDoesNotFitError, TooManyProcessesError
from emulator.selection import matcher, maxmin, symmetry
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


@contextlib.contextmanager
def searches(kind):
    """Run selection with the C searches (as installed) or the Python fallback."""
    if kind == "c" and matcher._search is None:
        pytest.fail("the C searches are not built: pip install -e . compiles them")
    saved = matcher._search
    if kind == "python":
        matcher._search = None
    try:
        yield
    finally:
        matcher._search = saved


@pytest.mark.parametrize("kind", ["c", "python"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_crossbar_matches_brute_force(kind, data):
    network = data.draw(crossbars())
    with searches(kind):
        check_against_brute_force(network, data.draw(patterns(len(network))))


@pytest.mark.parametrize("kind", ["c", "python"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_router_tree_matches_brute_force(kind, data):
    network = data.draw(router_trees())
    n = sum(1 for _, k in network.nodes(data="kind") if k == "compute")
    with searches(kind):
        check_against_brute_force(network, data.draw(patterns(n)))


def random_crossbar(n, seed, levels=None):
    """A crossbar with uniform random pair bandwidths (rounded to ``levels`` values)."""
    rng = np.random.default_rng(seed)
    g = nx.Graph()
    g.add_nodes_from(range(n), kind="compute")
    for a, b in itertools.combinations(range(n), 2):
        value = rng.uniform(10, 100) if levels is None else float(rng.integers(1, levels + 1))
        g.add_edge(a, b, bandwidth_mbps=float(value))
    return g


@pytest.mark.parametrize("name,m,n", [
    ("mg", 8, 14), ("grid", 9, 14), ("ring", 8, 14), ("cg", 8, 14), ("lu", 8, 14),
    ("pairs", 8, 8), ("pairs", 6, 14), ("all-to-all", 5, 14), ("star", 6, 14)])
@pytest.mark.parametrize("seed", [0, 1])
def test_pruned_searches_match_the_literal_loop(name, m, n, seed):
    """Past brute force's reach, with every pruning at work (common neighbours, automorphism
    conditions, bottleneck matching, the clique branch and bound): C and Python agree on the
    k best groups, and the optimum is the literal Figure 1 loop's (VF2, no pruning)."""
    g = random_crossbar(n, seed)
    pattern = (generic_pattern(name, m) if name in ("pairs", "all-to-all", "star", "ring")
               else builtin_pattern(name, m))
    results = {}
    for kind in ("c", "python"):
        with searches(kind):
            result = max_min_select(g, pattern, candidates=3)
        assert result.exact
        results[kind] = [c.bottleneck_mbps for c in result.candidates]
        nodes, matrix = pair_bandwidths(g)
        for cand in result.candidates:
            assert cand.bottleneck_mbps == mapped_bottleneck(pattern, cand.mapping, nodes, matrix)
        assert len({frozenset(c.nodes) for c in result.candidates}) == len(result.candidates)
    assert results["c"] == results["python"]
    assert results["c"][0] == figure1_select(g, pattern).bottleneck_mbps


def test_clique_branch_and_bound_past_the_bisection():
    """More distinct bandwidths than the clique bracket: bisection first, then one branch
    and bound for the best three groups; Python's threshold-by-threshold search agrees."""
    g = random_crossbar(110, 3)
    assert g.number_of_edges() > maxmin.CLIQUE_LEVELS
    pattern = generic_pattern("all-to-all", 6)
    with searches("c"):
        fast = max_min_select(g, pattern, candidates=3)
    with searches("python"):
        slow = max_min_select(g, pattern, candidates=3)
    assert fast.exact and slow.exact
    assert [c.bottleneck_mbps for c in fast.candidates] == \
        [c.bottleneck_mbps for c in slow.candidates]


def count_automorphisms(pattern):
    matcher = nx.algorithms.isomorphism.GraphMatcher(pattern, pattern)
    return sum(1 for _ in matcher.isomorphisms_iter())


@pytest.mark.parametrize("pattern", [
    builtin_pattern("mg", 8), builtin_pattern("mg", 16), generic_pattern("ring", 9),
    builtin_pattern("grid", 16), builtin_pattern("cg", 8), generic_pattern("star", 6),
    nx.petersen_graph(), nx.convert_node_labels_to_integers(nx.circular_ladder_graph(5))])
def test_automorphism_conditions_remove_every_symmetric_copy(pattern):
    """The orbits found by the stabiliser chain multiply to the automorphism group's order
    (so each node group's embeddings are searched once), and the conditions hold for at
    least one of a group's embeddings (they are safe)."""
    order = symmetry.pattern_order(pattern)[0]
    pairs, factor = symmetry.automorphism_conditions(pattern, order, time.monotonic() + 30)
    assert factor == count_automorphisms(pattern)
    index = {r: i for i, r in enumerate(order)}
    rng = np.random.default_rng(0)
    for _ in range(20):  # a random injection of the ranks: one automorphic copy obeys
        nodes = rng.permutation(50)[:len(order)]
        matcher = nx.algorithms.isomorphism.GraphMatcher(pattern, pattern)
        assert any(all(nodes[index[sigma[order[a]]]] < nodes[index[sigma[order[b]]]]
                       for a, b in pairs) for sigma in matcher.isomorphisms_iter())


def test_compiled_search_rejects_inconsistent_buffers():
    if matcher._search is None:
        pytest.fail("the C searches are not built: pip install -e . compiles them")
    words = np.zeros((4, 1), dtype="<u8")
    with pytest.raises(ValueError, match="adjacency has 16 bytes"):
        matcher._search.clique(4, 1, 3, words[:2], words[0], words[:0], math.inf)  # 2 rows of 4
    with pytest.raises(ValueError):
        matcher._search.embed(4, 1, 2, words, words[0], words[:1], words[:0],
                             np.array([[0, 5, 0]], dtype=np.int32),
                             np.zeros((0, 2), dtype=np.int32),
                             np.zeros((0, 2), dtype=np.int32), math.inf)


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


@pytest.mark.parametrize("kind", ["c", "python"])
def test_time_budget_is_reported_not_silent(kind):
    """An all-to-all search that cannot finish in a tiny budget says exact=false (the proof
    for 18 of 200 nodes with random bandwidths takes seconds even in C)."""
    g = random_crossbar(200, 0)
    pattern = generic_pattern("all-to-all", 18)
    with searches(kind):
        result = max_min_select(g, pattern, time_budget_seconds=0.05)
    assert result.exact is False
    best = result.candidates[0]
    nodes, matrix = pair_bandwidths(g)
    assert best.bottleneck_mbps == mapped_bottleneck(pattern, best.mapping, nodes, matrix)


@pytest.mark.parametrize("kind", ["c", "python"])
def test_pairs_where_the_greedy_matching_fails(kind):
    """a-b-c-d with b-c the heaviest pair: heaviest-first pairing takes b-c and strands a and
    d, so the perfect matching at 90 needs the blossom algorithm."""
    g = nx.complete_graph(["a", "b", "c", "d"])
    nx.set_edge_attributes(g, 1.0, "bandwidth_mbps")
    g["b"]["c"]["bandwidth_mbps"] = 100.0
    g["a"]["b"]["bandwidth_mbps"] = g["c"]["d"]["bandwidth_mbps"] = 90.0
    with searches(kind):
        result = max_min_select(g, generic_pattern("pairs", 4), candidates=1)
    assert result.exact and result.bottleneck_mbps == 90.0
    assert {frozenset((result.candidates[0].mapping[0], result.candidates[0].mapping[1])),
            frozenset((result.candidates[0].mapping[2], result.candidates[0].mapping[3]))} == \
        {frozenset("ab"), frozenset("cd")}


# -- results worked by hand ----------------------------------------------------------------


def triangle_and_one(names=("n1", "n2", "n3", "n4")):
    """The first three nodes joined at 100 Mbit/s, the fourth at 10 Mbit/s to each."""
    g = nx.Graph()
    g.add_nodes_from((name, {"kind": "compute"}) for name in names)
    for a, b in itertools.combinations(names, 2):
        g.add_edge(a, b, bandwidth_mbps=10.0 if names[3] in (a, b) else 100.0)
    return g


def test_a_selection_in_json_is_worked_by_hand():
    """A ring of 3 goes on the 100 Mbit/s triangle; each edge's 1 MB goes half each way
    over its own pair: 4 Mbit at 100 Mbit/s, 0.04 s."""
    found = max_min_select(triangle_and_one(), generic_pattern("ring", 3), candidates=1)
    js = found.to_json()
    mapping = js["candidates"][0].pop("mapping")
    assert js == {"method": "pattern", "bottleneck_mbps": 100.0, "exact": True,
                  "candidates": [{"nodes": ["n1", "n2", "n3"], "bottleneck_mbps": 100.0,
                                  "predicted_comm_seconds": pytest.approx(0.04)}]}
    assert sorted(mapping) == ["0", "1", "2"] and sorted(mapping.values()) == ["n1", "n2", "n3"]
    every = all_all_select(triangle_and_one(), 3).to_json()
    assert every["method"] == "all-all" and every["exact"] is True
    assert [(c["nodes"], c["bottleneck_mbps"], c["predicted_comm_seconds"])
            for c in every["candidates"]] == [(["n1", "n2", "n3"], 100.0, pytest.approx(0.04)),
                                              (["n1", "n2", "n4"], 10.0, pytest.approx(0.4)),
                                              (["n1", "n3", "n4"], 10.0, pytest.approx(0.4))]


def test_random_candidates_are_distinct_groups_up_to_all_there_are():
    ring = generic_pattern("ring", 3)
    three = random_select(triangle_and_one(), ring, seed=2, candidates=3)
    assert (three.method, three.exact, len(three.candidates)) == ("random", True, 3)
    assert len({frozenset(c.nodes) for c in three.candidates}) == 3
    every = random_select(triangle_and_one(), ring, seed=2, candidates=10)
    assert sorted(sorted(c.nodes) for c in every.candidates) == [
        ["n1", "n2", "n3"], ["n1", "n2", "n4"], ["n1", "n3", "n4"], ["n2", "n3", "n4"]]


def test_one_rank_has_no_bottleneck_and_no_rank_is_refused():
    alone = random_select(triangle_and_one(), generic_pattern("ring", 1), seed=2)
    assert alone.bottleneck_mbps is None and [len(c.nodes) for c in alone.candidates] == [1]
    one = max_min_select(triangle_and_one(), generic_pattern("ring", 1))
    assert (one.method, one.bottleneck_mbps, one.exact) == ("pattern", None, True)
    with pytest.raises(TooManyProcessesError, match="^the pattern has no ranks$"):
        max_min_select(triangle_and_one(), nx.Graph())


def test_pair_bandwidths_through_a_router_whatever_the_edges_order():
    """n1 -- n3 direct at 5; n1 (50) and n2 (20) on router r1: n1-n2 20, n3 reaches no one
    else. Edges come compute node first, the direct one before the others."""
    g = nx.Graph()
    g.add_node("n1", kind="compute")
    g.add_node("n3", kind="compute")
    g.add_edge("n1", "n3", bandwidth_mbps=5.0)
    g.add_edge("n1", "r1", bandwidth_mbps=50.0)
    g.add_edge("n2", "r1", bandwidth_mbps=20.0)
    g.nodes["r1"]["kind"], g.nodes["n2"]["kind"] = "router", "compute"
    nodes, matrix = pair_bandwidths(g)
    assert nodes == ["n1", "n3", "n2"]
    inf = -math.inf
    assert matrix.tolist() == [[inf, 5.0, 20.0], [5.0, inf, inf], [20.0, inf, inf]]


def test_ports_come_from_the_node_else_its_widest_edge():
    """A ring of 3 on the triangle: each node sends 4 Mbit to each of two peers and gets as
    much. A 20 Mbit/s port on n1 gives each of its flows 10: 0.4 s. Without one, a port is
    its node's widest edge's capacity_mbps: 40 for n1 and n2, 16 for n3 (8 each, 0.5 s)."""
    ring = generic_pattern("ring", 3)
    g = triangle_and_one()
    g.nodes["n1"]["capacity_mbps"] = 20
    assert max_min_select(g, ring, candidates=1).candidates[0].predicted_seconds == \
        pytest.approx(0.4)
    g = triangle_and_one()
    g["n2"]["n1"]["capacity_mbps"], g["n2"]["n3"]["capacity_mbps"] = 40, 16
    assert max_min_select(g, ring, candidates=1).candidates[0].predicted_seconds == \
        pytest.approx(0.5)


def test_a_candidates_nodes_are_in_the_networks_order():
    found = max_min_select(triangle_and_one(("c", "a", "b", "d")), generic_pattern("ring", 3))
    assert found.candidates[0].nodes == ["c", "a", "b"]


def test_what_cannot_be_selected_is_said_in_full():
    two = nx.Graph()
    two.add_nodes_from((n, {"kind": "compute"}) for n in ("n1", "n2", "n3"))
    two.add_edge("n1", "n2", bandwidth_mbps=5.0)
    with pytest.raises(PatternDoesNotFitError, match=(
            r"^pattern ring with 3 ranks and 3 edges does not embed in the network even at "
            r"bandwidth 0 \(the compute nodes are not connected as the pattern needs\)$")):
        max_min_select(two, generic_pattern("ring", 3))
    with pytest.raises(ValueError, match="^candidates must be >= 1, got 0$"):
        max_min_select(two, generic_pattern("ring", 2), candidates=0)


def test_the_literal_figure_1_loop_worked_by_hand():
    ring = generic_pattern("ring", 3)
    found = figure1_select(triangle_and_one(), ring).to_json()
    assert (found["method"], found["bottleneck_mbps"], found["exact"]) == ("figure1", 100.0, True)
    assert [c["nodes"] for c in found["candidates"]] == [["n1", "n2", "n3"]]
    measured = triangle_and_one()
    for _, _, data in measured.edges(data=True):
        data["measured_mbps"] = data.pop("bandwidth_mbps") / 2
    assert figure1_select(measured, ring, weight="measured_mbps").bottleneck_mbps == 50.0
    alone = figure1_select(triangle_and_one(), generic_pattern("ring", 1))
    assert [c.nodes for c in alone.candidates] == [["n1"]]
    assert figure1_select(triangle_and_one(), ring, deadline_seconds=60).bottleneck_mbps == 100
    with pytest.raises(TimeoutError, match="^the literal Figure 1 loop passed its deadline$"):
        figure1_select(triangle_and_one(), ring, deadline_seconds=0)
    two = nx.Graph()
    two.add_nodes_from((n, {"kind": "compute"}) for n in ("n1", "n2", "n3"))
    two.add_edge("n1", "n2", bandwidth_mbps=5.0)
    with pytest.raises(PatternDoesNotFitError,
                       match="^pattern does not embed even at bandwidth 0$"):
        figure1_select(two, ring)


def test_other_options_reach_the_all_all_search_and_no_path_has_no_bottleneck():
    assert len(all_all_select(triangle_and_one(), 3, candidates=1).candidates) == 1
    apart = nx.Graph()
    apart.add_nodes_from((n, {"kind": "compute"}) for n in ("n1", "n2"))
    assert random_select(apart, generic_pattern("ring", 2), seed=1).bottleneck_mbps is None


def four_pairs(bw=None):
    """a-b 90, a-c 80, a-d 10, b-c 70, b-d 20, c-d 30 (or ``bw``) as a matrix, and its
    values."""
    bw = bw or {(0, 1): 90, (0, 2): 80, (0, 3): 10, (1, 2): 70, (1, 3): 20, (2, 3): 30}
    matrix = np.full((4, 4), -np.inf)
    for (i, j), b in bw.items():
        matrix[i, j] = matrix[j, i] = b
    return matrix, np.array(sorted(set(bw.values())), dtype=float)


# a-b 90 and c-d 85, every other pair at most 40: three nodes have a pair >= 85, but no
# node has two pairs above 40
TWO_FAST = {(0, 1): 90, (2, 3): 85, (0, 2): 10, (0, 3): 20, (1, 2): 30, (1, 3): 40}


@pytest.mark.parametrize("pattern, bw, bound", [
    (generic_pattern("ring", 3), None, 70.0),  # three nodes with two pairs >= t: a, b, c
    (generic_pattern("star", 3), None, 80.0),  # a hub with two pairs >= t: a, at 80
    (generic_pattern("star", 3), TWO_FAST, 40.0),  # the hub's two pairs bind, not the leaves
    (generic_pattern("all-to-all", 4), None, 10.0),  # every pair: the slowest
    (generic_pattern("ring", 1), None, 90.0),  # no edges: every value
])
def test_the_upper_bound_worked_by_hand(pattern, bw, bound):
    matrix, values = four_pairs(bw)
    assert values[maxmin._upper_bound_index(values, matrix, pattern)] == bound


@pytest.mark.parametrize("weights, best", [
    ({}, 30.0),  # a-b with c-d (30) beats a-c with b-d (20) and a-d with b-c (10)
    # b-c heaviest: taken first, it leaves a and d with no pair >= 40; the blossom
    # algorithm then finds a-b with c-d
    ({(1, 2): 90, (0, 1): 50, (2, 3): 40, (0, 2): 5, (1, 3): 5, (0, 3): 5}, 40.0),
])
def test_the_best_matching_of_two_pairs_worked_by_hand(weights, best):
    matrix, values = four_pairs()
    for (i, j), b in weights.items():
        matrix[i, j] = matrix[j, i] = b
    values = np.unique(matrix[np.isfinite(matrix)])
    pairs = generic_pattern("pairs", 4)
    worst = (0, 3, 1, 2) if not weights else (1, 3, 0, 2)  # a start at the lowest level
    found = maxmin._best_matching(matrix, values, pairs, worst, len(values) - 1)
    assert sorted(found) == [0, 1, 2, 3]
    assert min(matrix[found[a], found[b]] for a, b in pairs.edges) == best


@pytest.mark.parametrize("seed", range(3))
def test_the_python_search_takes_the_c_searchs_steps(seed):
    """The fallback searches alike, node for node: on random pair graphs, at every
    threshold and with the first group found to be avoided, both find the same embeddings
    in the same number of steps (the symmetry conditions, the fail-first choice and the
    forward checks all change the count)."""
    rng = np.random.default_rng(seed)
    n = 12
    matrix = np.triu(rng.choice([10.0, 20.0, 50.0, 100.0], size=(n, n)), 1)
    matrix = matrix + matrix.T
    np.fill_diagonal(matrix, -np.inf)
    for name, m in [("ring", 6), ("grid", 6), ("star", 5), ("chain", 5), ("pairs", 6)]:
        runs = {}
        for kind in ("c", "python"):
            with searches(kind):
                found = matcher.Matcher(matrix, generic_pattern(name, m), math.inf, math.inf)
                got = [found.embed(t) for t in (10.0, 20.0, 50.0, 100.0)]
                first = next((set(g) for g in got if g is not None), None)
                if first is not None:
                    got += [found.embed(t, avoid=[first]) for t in (10.0, 20.0, 50.0)]
                runs[kind] = (got, found.steps)
        assert runs["python"] == runs["c"], (name, runs)
        assert runs["c"][1] > 0


@pytest.mark.parametrize("name, m, complete", [
    ("ring", 3, True), ("all-to-all", 4, True), ("all-to-all", 2, False), ("ring", 4, False),
    ("star", 4, False), ("chain", 3, False)])
def test_complete_patterns_of_three_ranks_or_more_take_the_clique_search(name, m, complete):
    matrix = np.full((5, 5), 10.0)
    np.fill_diagonal(matrix, -np.inf)
    assert matcher.Matcher(matrix, generic_pattern(name, m), math.inf).complete is complete


def test_groups_tied_on_bandwidth_go_nearest_first_by_their_links_latency():
    """Every pair has 100 Mbit/s; a-b are 0.1 ms apart, every other pair 5 ms. The predicted
    time charges the pattern's round its latency, so a-b come first."""
    g = nx.complete_graph(["c", "d", "a", "b"])
    nx.set_edge_attributes(g, 100.0, "bandwidth_mbps")
    nx.set_edge_attributes(g, 5.0, "latency_ms")
    g["a"]["b"]["latency_ms"] = 0.1
    pattern = generic_pattern("pairs", 2)
    pattern.edges[0, 1]["bytes"] = 0
    got = max_min_select(g, pattern, candidates=2)
    assert [sorted(c.nodes) for c in got.candidates][0] == ["a", "b"]
    assert [c.predicted_seconds for c in got.candidates] == \
        [pytest.approx(0.0001), pytest.approx(0.005)]
    near = {"latency_seconds": lambda u, v: 0.0, "message_seconds": 0.001}
    costly = max_min_select(g, pattern, candidates=1, costs=near)
    assert costly.candidates[0].predicted_seconds == pytest.approx(0.001)
    assert random_select(g, pattern, seed=1, costs=near).candidates[0].predicted_seconds == \
        pytest.approx(0.001)

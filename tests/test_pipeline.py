"""The pure parts of the pipeline and the experiment report: trial rounds, the oracle,
confidence intervals, the summary, table and plot."""

import itertools
import json
import math
import random

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from emulator.coordinator.pipeline import JobSpec, oracle, predicted_seconds, select, trial_rounds
from emulator.errors import UserError
from emulator.experiments.report import (
    markdown_table,
    paired_difference,
    plot_figure3,
    summarize,
    t_interval,
)
from emulator.network.sharing import pattern_seconds


@given(st.lists(st.sets(st.integers(0, 9), min_size=1, max_size=4), min_size=1, max_size=8))
def test_trial_rounds_never_put_intersecting_groups_together(groups):
    groups = [sorted(g) for g in groups]
    rounds = trial_rounds(groups)
    assert sorted(i for r in rounds for i in r) == list(range(len(groups)))
    for r in rounds:
        for i, j in itertools.combinations(r, 2):
            assert not set(groups[i]) & set(groups[j])


def test_disjoint_candidates_share_a_round():
    assert trial_rounds([["a", "b"], ["c", "d"], ["e", "f"]]) == [[0, 1, 2]]
    assert trial_rounds([["a", "b"], ["b", "c"], ["c", "a"]]) == [[0], [1], [2]]


def _random_network(rng, n):
    return {frozenset(p): rng.choice([10.0, 20.0, 25.0, 33.3, 50.0, 100.0])
            for p in itertools.combinations(range(n), 2)}


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["cg", "is", "mg", "lu"]))
def test_oracle_is_the_least_predicted_placement(seed, benchmark):
    rng = random.Random(seed)
    bw = _random_network(rng, 6)
    nodes = list(range(6))
    pattern = JobSpec(benchmark, 4).pattern()

    def pair(u, v):
        return bw[frozenset((u, v))]

    def port(u):
        return 100.0

    mapping, best = oracle(pattern, nodes, pair, port, 15)
    assert best == pytest.approx(predicted_seconds(pattern, mapping, pair, port, 15))
    every = [predicted_seconds(pattern, dict(enumerate(p)), pair, port, 15)
             for p in itertools.permutations(nodes, 4)]
    assert best == pytest.approx(min(every))
    # so no method's choice can be predicted faster
    for method in ("pattern", "all-all", "random"):
        graph = nx.Graph()
        for p, value in bw.items():
            graph.add_edge(*sorted(p), bandwidth_mbps=value)
        for n in graph.nodes:
            graph.nodes[n]["capacity_mbps"] = 100.0
        chosen = select(method, graph, JobSpec(benchmark, 4), seed=seed).candidates[0].mapping
        assert best <= predicted_seconds(pattern, chosen, pair, port, 15) * (1 + 1e-9)


def test_oracle_breaks_port_ties_by_the_widest_bottleneck():
    # a star on 3 ranks: rank 0 talks to 1 and 2, so its port caps every placement alike
    pattern = nx.Graph()
    pattern.add_edge(0, 1, bytes=1_000_000)
    pattern.add_edge(0, 2, bytes=1_000_000)
    bw = {frozenset("ab"): 60.0, frozenset("ac"): 60.0, frozenset("bc"): 55.0,
          frozenset("ad"): 90.0, frozenset("bd"): 90.0, frozenset("cd"): 10.0}

    def pair(u, v):
        return bw[frozenset((u, v))]

    mapping, seconds = oracle(pattern, list("abcd"), pair, lambda u: 100.0, 1)
    tied = predicted_seconds(pattern, {0: "a", 1: "b", 2: "d"}, pair, lambda u: 100.0, 1)
    assert seconds == pytest.approx(tied)  # the flow model cannot tell these apart
    assert mapping[0] == "d" and {mapping[1], mapping[2]} == {"a", "b"}  # 90 Mbit/s both


def test_oracle_refuses_too_many_placements_and_too_few_nodes():
    with pytest.raises(UserError, match="only 3 are up"):
        oracle(JobSpec("cg", 4).pattern(), ["a", "b", "c"], lambda u, v: 1.0, None, 1)
    with pytest.raises(UserError, match="placements"):
        oracle(JobSpec("cg", 8).pattern(), [f"n{i}" for i in range(40)], lambda u, v: 1.0,
               None, 1)


def test_flow_model_prediction_worked_by_hand():
    """A star of 2.5 MB edges from rank 0: each edge is 10 Mbit each way. On 50 Mbit/s pairs
    behind 100 Mbit/s ports, node a's two flows out (and two in) get 50 each: 0.2 s an
    iteration. Behind 60 Mbit/s ports they share a's port, 30 each: 1/3 s."""
    import networkx as nx

    star = nx.Graph()
    star.add_edge(0, 1, bytes=2_500_000)
    star.add_edge(0, 2, bytes=2_500_000)
    mapping = {0: "a", 1: "b", 2: "c"}
    assert predicted_seconds(star, mapping, lambda u, v: 50.0, lambda u: 100.0, 15) \
        == pytest.approx(15 * 0.2)
    assert predicted_seconds(star, mapping, lambda u, v: 50.0, lambda u: 60.0, 15) \
        == pytest.approx(15 / 3)
    cg = JobSpec("cg", 4).pattern()  # and a NAS pattern: proportional to its iterations
    one = pattern_seconds(cg, dict(enumerate("abcd")), lambda u, v: 50.0,
                          port_mbps=lambda u: 100.0)
    assert one > 0 and predicted_seconds(cg, dict(enumerate("abcd")), lambda u, v: 50.0,
                                         lambda u: 100.0, 15) == pytest.approx(15 * one)


@pytest.mark.parametrize("values", [[1.0, 2.0, 4.0, 8.0], [10.0, 10.5], [3.0, -1.0, 2.5, 7.0, 0.0]])
def test_t_interval_matches_scipy(values):
    mean, lo, hi = t_interval(values)
    ref = stats.t.interval(0.9, len(values) - 1, loc=sum(values) / len(values),
                           scale=stats.sem(values))
    assert (lo, hi) == pytest.approx(ref)
    assert mean == pytest.approx(sum(values) / len(values))
    assert t_interval([5.0]) == (5.0, None, None)


def _rows():
    rows, slot = [], 0
    for benchmark, base in (("cg", 10.0), ("is", 30.0)):
        for repeat in range(3):
            for method, extra in (("random", 40.0), ("all-all", 20.0), ("pattern", 10.0),
                                  ("oracle", 5.0)):
                rows.append({"slot": slot, "benchmark": benchmark, "method": method,
                             "slowdown_pct": base + extra + repeat,
                             "overhead_pct": 4.0 if method == "pattern" else 0.0,
                             "overhead_seconds": 1.0, "predicted_seconds": 2.0})
            rows.append({"slot": slot, "benchmark": benchmark, "method": "dedicated",
                         "slowdown_pct": 0.0, "app_full_seconds": 25.0,
                         "predicted_seconds": 1.0})
            slot += 1
    return rows


CONFIG = {"benchmarks": ["cg", "is"], "methods": ["pattern", "all-all", "random"],
          "repeats": 3, "nprocs": 4}


def test_summary_holds_the_documented_keys_and_means():
    summary = summarize(_rows(), CONFIG, complete=True)
    assert summary["slowdown_pct"]["cg"] == {"pattern": 21.0, "all-all": 31.0, "random": 51.0}
    assert summary["oracle_slowdown_pct"] == {"cg": 16.0, "is": 36.0}
    assert summary["overhead_pct"] == {"cg": 4.0, "is": 4.0}
    assert summary["pattern_to_random"] == pytest.approx(((21 + 41) / 2) / ((51 + 71) / 2))
    lo, hi = summary["slowdown_ci90_pct"]["cg"]["pattern"]
    assert lo < 21.0 < hi
    diff = summary["paired_difference_pct"]["pattern - random"]["cg"]
    assert diff["mean"] == pytest.approx(-30.0) and diff["n"] == 3
    assert diff["ci90"] == [pytest.approx(-30.0), pytest.approx(-30.0)]  # constant difference
    json.dumps(summary)  # serialisable


def test_paired_difference_uses_only_slots_both_methods_ran():
    rows = _rows()
    rows = [r for r in rows if not (r["slot"] == 0 and r["method"] == "random")]
    assert paired_difference(rows, "cg", "pattern", "random")["n"] == 2


def test_table_and_plot(tmp_path):
    summary = summarize(_rows(), CONFIG, complete=True)
    table = markdown_table(summary)
    lines = table.splitlines()
    assert lines[0].startswith("| benchmark | pattern [%] | all-all [%] | random [%] | oracle [%]")
    assert any(line.startswith("| cg | 21.0 ± ") for line in lines)
    assert "pattern/random mean slowdown: 0.508" in table
    path = tmp_path / "fig.png"
    plot_figure3(summary, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]


def test_two_runs_show_their_values_not_an_interval(tmp_path):
    rows = [r for r in _rows() if r["slot"] not in (2, 5)]  # two repeats per benchmark
    summary = summarize(rows, dict(CONFIG, repeats=2), complete=True)
    lo, hi = summary["slowdown_ci90_pct"]["cg"]["pattern"]
    assert hi - lo > 6  # t(1) at 90%: 6.31 standard errors either side of 21.5
    assert summary["slowdown_runs_pct"]["cg"]["pattern"] == [20.0, 21.0]
    table = markdown_table(summary)
    assert "| cg | 20.5 (20.0, 21.0) | 30.5 (30.0, 31.0) |" in table
    assert "±" not in table.split("\n\n")[0]
    assert "fewer than 3 runs" in table
    path = tmp_path / "fig.png"
    plot_figure3(summary, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_select_rejects_an_unknown_method():
    with pytest.raises(UserError, match="unknown method"):
        select("fastest", nx.complete_graph(4), JobSpec("cg", 4))


def test_full_iterations_follow_the_npb_class():
    assert JobSpec("cg", 4).full_iterations() == 15
    assert JobSpec("bt", 4).full_iterations() == 200
    assert JobSpec("ep", 4).full_iterations() == 1
    assert math.isfinite(JobSpec("mg", 4).full_iterations())

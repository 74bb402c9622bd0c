"""The pattern library: NAS structure, generic patterns, matrices and pattern files."""

import json

import networkx as nx
import pytest

from emulator.errors import InputFileError, ProcessCountError, UnknownPatternError
from emulator.selection.patternfile import load_pattern, pattern_from_matrix, resolve_pattern
from emulator.selection.patterns import (
    NAS_BENCHMARKS,
    builtin_pattern,
    cg_partners,
    generic_pattern,
    lu_grid,
    mg_grid,
)


def edges(graph):
    return sorted(tuple(sorted(e)) for e in graph.edges)


def test_cg_on_four_ranks_uses_three_pairs():
    assert edges(builtin_pattern("cg", 4)) == [(0, 1), (1, 2), (2, 3)]


def test_cg_partners_follow_npb_setup():
    # 8 ranks: 2 rows x 4 columns; row reduce partners XOR 2 then XOR 1 within the row
    reduce, exch = cg_partners(8)[5]
    assert reduce == [7, 4]
    assert exch == 3


@pytest.mark.parametrize("name", ["is", "ft", "bt", "sp"])
def test_all_to_all_on_four_ranks(name):
    assert edges(builtin_pattern(name, 4)) == edges(nx.complete_graph(4))


def test_bt_on_nine_ranks_has_six_neighbours_each():
    graph = builtin_pattern("bt", 9)
    assert all(d == 6 for _, d in graph.degree)


def test_lu_and_mg_grids():
    assert lu_grid(8) == (4, 2)
    assert mg_grid(8) == (2, 2, 2)
    assert edges(builtin_pattern("lu", 4)) == [(0, 1), (0, 2), (1, 3), (2, 3)]
    assert all(d == 3 for _, d in builtin_pattern("mg", 8).degree)  # the 3-cube


def test_ep_has_no_edges():
    assert builtin_pattern("ep", 8).number_of_edges() == 0


@pytest.mark.parametrize("name", NAS_BENCHMARKS)
def test_every_edge_carries_bytes(name):
    n = 4
    graph = builtin_pattern(name, n)
    assert sorted(graph.nodes) == list(range(n))
    assert all(b > 0 for _, _, b in graph.edges(data="bytes"))


def test_class_s_is_smaller_than_class_a():
    s = sum(b for *_, b in builtin_pattern("cg", 4, npb_class="S").edges(data="bytes"))
    a = sum(b for *_, b in builtin_pattern("cg", 4, npb_class="A").edges(data="bytes"))
    assert s < a


@pytest.mark.parametrize("name,nprocs", [("cg", 6), ("bt", 8), ("sp", 2), ("is", 0), ("lu", 3)])
def test_disallowed_process_counts(name, nprocs):
    with pytest.raises(ProcessCountError, match=str(nprocs)):
        builtin_pattern(name, nprocs)


def test_unknown_pattern():
    with pytest.raises(UnknownPatternError, match="unknown pattern 'xx'"):
        builtin_pattern("xx", 4)


def test_generic_patterns():
    assert edges(generic_pattern("ring", 4)) == [(0, 1), (0, 3), (1, 2), (2, 3)]
    assert edges(generic_pattern("chain", 3)) == [(0, 1), (1, 2)]
    assert edges(generic_pattern("pairs", 4)) == [(0, 1), (2, 3)]
    assert edges(generic_pattern("star", 3)) == [(0, 1), (0, 2)]
    assert generic_pattern("grid", 6).number_of_edges() == 7
    assert all(d == 4 for _, d in generic_pattern("torus", 9).degree)


def test_matrix_threshold_keeps_dominant_edges():
    m = [[0, 100, 1, 0], [100, 0, 0, 0], [1, 0, 0, 50], [0, 0, 50, 0]]
    graph = pattern_from_matrix(m, threshold=0.1)
    assert edges(graph) == [(0, 1), (2, 3)]
    assert graph[0][1]["bytes"] == 200
    assert edges(pattern_from_matrix(m, threshold=0.0)) == [(0, 1), (0, 2), (2, 3)]


def test_pattern_files(tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_text("0,1,2\n0,10,0\n0,0,0\n5,0,0\n")
    graph = load_pattern(csv)
    assert edges(graph) == [(0, 1), (0, 2)]
    js = tmp_path / "m.json"
    js.write_text(json.dumps({"bytes": [[0, 5], [5, 0]]}))
    assert edges(load_pattern(js)) == [(0, 1)]
    nl = tmp_path / "p.json"
    nl.write_text(json.dumps(nx.node_link_data(generic_pattern("ring", 5), edges="links")))
    assert resolve_pattern(str(nl), 5).number_of_edges() == 5
    with pytest.raises(ProcessCountError, match="has 5 ranks"):
        resolve_pattern(str(nl), 4)


def test_bad_pattern_files(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("0,1\n1,x\n")
    with pytest.raises(InputFileError, match="line 2"):
        load_pattern(bad)
    ragged = tmp_path / "ragged.json"
    ragged.write_text(json.dumps({"bytes": [[0, 1], [1]]}))
    with pytest.raises(InputFileError, match="matrix"):
        load_pattern(ragged)
    ranks = tmp_path / "ranks.json"
    ranks.write_text(json.dumps({"nodes": [{"id": 1}, {"id": 2}], "links": []}))
    with pytest.raises(InputFileError, match="0..m-1"):
        load_pattern(ranks)
    ring = nx.node_link_data(generic_pattern("ring", 4), edges="links")
    for nbytes in (float("inf"), float("nan"), -1, True):
        ring["links"][1]["bytes"] = nbytes
        weights = tmp_path / "weights.json"
        weights.write_text(json.dumps(ring))  # inf and nan as JSON's Infinity and NaN
        with pytest.raises(InputFileError, match=r"edge \d-\d: bytes must be a finite number"):
            load_pattern(weights)


def test_a_pattern_file_gives_its_rounds_or_is_taken_at_its_largest_degree(tmp_path):
    from emulator.network.sharing import pattern_rounds

    star = nx.node_link_data(generic_pattern("star", 5), edges="links")
    plain = tmp_path / "star.json"
    plain.write_text(json.dumps(star))
    assert pattern_rounds(load_pattern(plain)) == 4.0  # the hub's four partners
    star["graph"]["rounds"] = 7
    given = tmp_path / "rounds.json"
    given.write_text(json.dumps(star))
    assert pattern_rounds(load_pattern(given)) == 7.0
    for bad in (-1, "many", True):
        star["graph"]["rounds"] = bad
        given.write_text(json.dumps(star))
        with pytest.raises(InputFileError, match="graph.rounds"):
            load_pattern(given)
    assert pattern_rounds(pattern_from_matrix([[0, 5], [5, 0]], rounds=3)) == 3.0


@pytest.mark.parametrize("name", NAS_BENCHMARKS)
def test_every_nas_pattern_counts_its_rounds_by_its_process_grid(name):
    """More ranks, more rounds (wider collectives, longer pipelines); one rank waits none."""
    few, many = (builtin_pattern(name, n, npb_class="S").graph["rounds"] for n in (4, 16))
    assert 0 < few < many
    assert builtin_pattern(name, 1, npb_class="S").graph["rounds"] == 0

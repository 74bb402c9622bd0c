"""Generated clusters: racks behind a core switch and k-ary fat trees, as files users load."""

import networkx as nx
import pytest

from emulator.cli import main
from emulator.network import generate
from emulator.network.cluster import cluster_from_dict, load_cluster, node_names
from emulator.network.sharing import simulate

MB = 1_000_000


def test_racks_have_their_nodes_ports_and_oversubscribed_uplinks():
    graph = cluster_from_dict(generate.racks(32, 32, port_mbps=1000, oversubscription=4))
    names = node_names(graph)
    assert len(names) == 1024 and names[:2] == ["n1", "n2"]
    assert nx.is_tree(graph)
    assert graph["n33"]["rack2"]["capacity_mbps"] == 1000
    assert all(graph[f"rack{r}"]["core"]["capacity_mbps"] == 8000 for r in range(1, 33))
    assert graph["rack1"]["core"]["latency_ms"] == 0.1


def test_a_rack_uplink_is_shared_as_its_oversubscription_says():
    # 4 racks of 4 at 100 Mbit/s, 2:1: each uplink carries 200 Mbit/s. Four flows out of
    # rack 1 share it at 50 each: 1 MB takes 0.16 s; inside a rack a flow has its port
    cluster = cluster_from_dict(generate.racks(4, 4, port_mbps=100, oversubscription=2))
    out = [(0.0, f"n{i}", f"n{4 + i}", MB) for i in range(1, 5)]
    assert simulate(cluster, out, latency_seconds=0.0, bucket=False) == \
        [pytest.approx(0.16)] * 4
    assert simulate(cluster, [(0.0, "n1", "n2", MB)], latency_seconds=0.0, bucket=False) == \
        [pytest.approx(0.08)]


def test_a_fat_tree_has_k_cubed_over_four_nodes_and_full_bisection():
    k = 8
    graph = cluster_from_dict(generate.fat_tree(k, link_mbps=100))
    names = node_names(graph)
    assert len(names) == k ** 3 // 4 and nx.is_tree(graph)
    assert graph["edge1-1"]["pod1"]["capacity_mbps"] == 100 * k / 2
    assert graph["pod1"]["core"]["capacity_mbps"] == 100 * (k / 2) ** 2
    # half the nodes send to the other half, every flow across the core: each at its port
    half = len(names) // 2
    flows = [(0.0, names[i], names[i + half], MB) for i in range(half)]
    assert simulate(graph, flows, latency_seconds=0.0, bucket=False) == \
        [pytest.approx(0.08)] * half


@pytest.mark.parametrize("make, message", [
    (lambda: generate.racks(0, 4), "racks must be a whole number >= 1"),
    (lambda: generate.racks(2, 4, uplink_mbps=10, oversubscription=2), "not both"),
    (lambda: generate.racks(2, 4, oversubscription=0), "oversubscription must be"),
    (lambda: generate.fat_tree(5), "k must be an even integer"),
    (lambda: generate.fat_tree(4, link_mbps=-1), "link_mbps must be"),
])
def test_impossible_clusters_are_refused_before_any_work(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_the_command_writes_a_file_that_loads_as_the_same_cluster(tmp_path, capsys):
    out = tmp_path / "ft.toml"
    assert main(["cluster", "generate", "fat-tree", "--k", "4", "--link-mbps", "100",
                 "--out", str(out)]) == 0
    assert "16 nodes, 13 switches" in capsys.readouterr().out
    text = out.read_text()
    assert text.startswith("# 16 nodes, 13 switches; node ports 100 Mbit/s")
    assert "# Written by: nodesel cluster generate fat-tree --k 4 --link-mbps 100" in text
    loaded = load_cluster(str(out))
    made = cluster_from_dict(generate.fat_tree(4, link_mbps=100))
    assert nx.utils.graphs_equal(loaded, made)


@pytest.mark.parametrize("argv, message", [
    (["racks", "--racks", "2"], "needs --racks and --nodes-per-rack"),
    (["fat-tree"], "needs --k"),
    (["fat-tree", "--k", "3"], "k must be an even integer >= 2, got 3"),
    # a port of inf Mbit/s or a latency of nan was written, and loaded
    (["fat-tree", "--k", "4", "--link-mbps", "inf"], "link_mbps must be a finite number > 0"),
    (["racks", "--racks", "2", "--nodes-per-rack", "2", "--port-mbps", "1e999"],
     "port_mbps must be a finite number > 0, got inf"),
])
def test_bad_requests_get_one_line(tmp_path, capsys, argv, message):
    assert main(["cluster", "generate", *argv, "--out", str(tmp_path / "c.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not (tmp_path / "c.toml").exists()


@pytest.mark.parametrize("name, nodes", [("racks256", 256), ("racks1024", 1024),
                                         ("fattree1024", 1024)])
def test_the_shipped_big_clusters_load(name, nodes):
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    graph = load_cluster(os.path.join(root, "hostfiles", f"{name}.toml"))
    assert len(node_names(graph)) == nodes

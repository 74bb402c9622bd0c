"""The node ranks' view of a cluster, against the graph it is made from."""

import os
import pickle
import random
import subprocess
import sys

import networkx as nx
import pytest

from emulator.network import cluster as clusters
from emulator.network.cluster import cluster_from_dict, crossbar, load_cluster
from emulator.network.generate import fat_tree
from emulator.network.view import ClusterView

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def random_tree(seed, shortcuts=0):
    """A tree of 3-8 switches with 2-12 nodes, random link latencies, some links without
    one (networkx weighs those 1); ``shortcuts`` more links between switches make cycles."""
    rng = random.Random(seed)
    switches = [f"s{i}" for i in range(rng.randint(3, 8))]
    graph = nx.Graph(topology="tree", latency_ms=0.1)
    for i, s in enumerate(switches):
        graph.add_node(s, kind="switch")
        if i:
            data = {"capacity_mbps": 100.0}
            if rng.random() < 0.7:
                data["latency_ms"] = rng.choice([0.0, 0.05, 0.3, 2.5])
            graph.add_edge(s, switches[rng.randrange(i)], **data)
    for n in range(rng.randint(2, 12)):
        graph.add_node(f"n{n}", kind="compute", capacity_mbps=100.0,
                       memory_mb=rng.choice([256, 512, 1024]), slots=1)
        graph.add_edge(f"n{n}", rng.choice(switches), capacity_mbps=100.0,
                       latency_ms=rng.choice([0.01, 0.1]))
    for _ in range(shortcuts):
        a, b = rng.sample(switches, 2)
        graph.add_edge(a, b, capacity_mbps=100.0, latency_ms=rng.choice([0.01, 9.0]))
    return graph


@pytest.mark.parametrize("seed", range(25))
def test_a_views_latencies_are_the_graphs(seed):
    """On trees, and on graphs with cycles (the shortest path, as networkx finds it)."""
    graph = random_tree(seed, shortcuts=seed % 3)
    view = ClusterView.of(graph)
    names = clusters.node_names(graph)
    assert view.names == tuple(names)
    assert clusters.node_names(view) == names
    for node in names:
        assert view.latencies_from(node, names) == pytest.approx(
            clusters.latencies_from(graph, node, names), abs=1e-12)
        assert clusters.latencies_from(view, node, names[::-1]) == pytest.approx(
            clusters.latencies_from(graph, node, names[::-1]), abs=1e-12)
    assert view.memory_mb == {n: graph.nodes[n]["memory_mb"] for n in names}


def test_shipped_and_generated_clusters_keep_latencies_and_memory():
    for graph in (load_cluster(os.path.join(ROOT, "hostfiles", "racks12.toml")),
                  cluster_from_dict(fat_tree(4, latency_ms=0.2)),
                  crossbar(5, latency_ms=0.7, memory_mb=2048)):
        view = ClusterView.of(graph)
        names = clusters.node_names(graph)
        for node in (names[0], names[-1]):
            assert view.latencies_from(node, names) == pytest.approx(
                clusters.path_latency_seconds(graph, [node] + names)[0][1:], abs=1e-12)
        assert set(view.memory_mb.values()) == {graph.nodes[n]["memory_mb"] for n in names}
        assert ClusterView.of(view) is view


def test_a_view_is_used_without_networkx():
    """Unpickled in a process where networkx cannot be imported: what a node rank does with
    it (its names, memory, latencies; its own CPU's model) works."""
    view = ClusterView.of(cluster_from_dict(fat_tree(4)))
    code = ("import pickle, sys; sys.modules['networkx'] = None\n"
            "from emulator.network import cluster as clusters\n"
            "from emulator.network.sharing import ClusterModel, node_plan\n"
            "view = pickle.loads(sys.stdin.buffer.read())\n"
            "names = clusters.node_names(view)\n"
            "model = ClusterModel(None, None, max_flows=4, plan=node_plan(names[3]))\n"
            "print(len(names), view.memory_mb[names[3]], model.resources.cpu(names[3]),\n"
            "      round(clusters.latencies_from(view, names[0], names)[-1] * 1e6))")
    proc = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(view),
                          capture_output=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    # 16 nodes; n1 to n16 crosses 6 links of 0.1 ms (node, edge, pod, core and down again)
    assert proc.stdout.decode().split() == ["16", "512", "2", "600"]

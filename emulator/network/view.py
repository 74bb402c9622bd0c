"""What a node rank needs of its cluster, as plain data: the compute nodes in order, each
one's memory, and the one-way latency between nodes (the links' latencies, or the
crossbar's one). Rank 0 keeps the cluster's graph; the node ranks get this view instead, so
they neither unpickle nor import networkx, and hold O(nodes + links) of it.

>>> from emulator.network.cluster import crossbar
>>> view = ClusterView.of(crossbar(3, latency_ms=0.5))
>>> view.names, view.memory_mb["n2"], view.latencies_from("n1", ["n1", "n3"])
(('n1', 'n2', 'n3'), 512, [0.0, 0.0005])
"""

import heapq
from dataclasses import dataclass
from typing import Any

DEFAULT_LATENCY_MS = 0.1  # a cluster's one-way latency where its file says none


@dataclass(frozen=True)
class ClusterView:
    """A cluster without its graph. ``edges``: every link as ``(a, b, latency_ms)`` (empty
    for a crossbar, whose every pair is ``latency_ms`` apart); ``fabric_ms``: ``(switch,
    fabric_latency_ms)`` of each switch a route crossing it pays (a SimGrid backbone's)."""

    topology: str
    latency_ms: float
    names: tuple
    memory_mb: dict
    edges: tuple = ()
    fabric_ms: tuple = ()

    @classmethod
    def of(cls, cluster: Any) -> "ClusterView":
        """The view of a cluster graph (:mod:`emulator.network.cluster`); a view is its
        own."""
        if isinstance(cluster, cls):
            return cluster
        names = tuple(n for n, k in cluster.nodes(data="kind") if k == "compute")
        topology = cluster.graph.get("topology")
        # a link without a latency weighs 1, as networkx's shortest paths have it
        edges = () if topology == "crossbar" else tuple(
            (a, b, float(d.get("latency_ms", 1))) for a, b, d in cluster.edges(data=True))
        fabric_ms = tuple((v, float(ms)) for v, ms in cluster.nodes(data="fabric_latency_ms")
                          if ms)
        return cls(topology, float(cluster.graph.get("latency_ms", DEFAULT_LATENCY_MS)),
                   names, {n: cluster.nodes[n]["memory_mb"] for n in names}, edges, fabric_ms)

    def latencies_from(self, node: str, nodes: list) -> list:
        """One-way latency in seconds from ``node`` to each of ``nodes``: 0 to itself, the
        crossbar's ``latency_ms`` or the sum of the links' (and fabrics') on the path."""
        if self.topology == "crossbar":
            one = self.latency_ms / 1000.0
            return [0.0 if b == node else one for b in nodes]
        adjacent: dict = {}
        for a, b, ms in self.edges:
            adjacent.setdefault(a, []).append((b, ms))
            adjacent.setdefault(b, []).append((a, ms))
        best, todo, fabric = {node: 0.0}, [(0.0, node)], dict(self.fabric_ms)
        while todo:
            ms, here = heapq.heappop(todo)
            if ms > best[here]:
                continue
            for there, step in adjacent.get(here, ()):
                step += fabric.get(there, 0.0)  # a switch entered is one passed through
                if ms + step < best.get(there, float("inf")):
                    best[there] = ms + step
                    heapq.heappush(todo, (ms + step, there))
        return [best[b] / 1000.0 for b in nodes]

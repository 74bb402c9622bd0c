"""Network status graphs: read, validate and write networkx node-link JSON.

A network status graph has compute nodes and routers/switches as vertices (node attribute
``kind``: ``"compute"``, ``"router"`` or ``"switch"``; default ``"compute"``). Edges carry the
available bandwidth ``bandwidth_mbps`` and, optionally, ``capacity_mbps`` and ``latency_ms``.
"""

import json

import networkx as nx

from ..errors import InputFileError
from ..files import finite_number, read_input_text

COMPUTE = "compute"
ROUTER_KINDS = ("router", "switch")
NODE_KINDS = (COMPUTE,) + ROUTER_KINDS


def compute_nodes(graph):
    """Compute nodes of a network graph, in graph order."""
    return [n for n, kind in graph.nodes(data="kind", default=COMPUTE) if kind == COMPUTE]


def to_node_link(graph):
    """Node-link data of ``graph`` (edges under the ``"links"`` key, as networkx and d3 use)."""
    return nx.node_link_data(graph, edges="links")


def load_json(path):
    """Parse a JSON file, turning syntax errors into :class:`InputFileError`."""
    text = read_input_text(path, "JSON file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputFileError(path, f"line {e.lineno} column {e.colno}",
                             f"malformed JSON: {e.msg}") from None


def _number(value, path, where, name, *, minimum=0.0, allow_zero=True):
    if not finite_number(value):
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        raise InputFileError(path, where, f"{name} must be "
                             f"{'finite' if numeric else 'a number'}, got {value!r}")
    if value < minimum or (not allow_zero and value == 0):
        bound = "positive" if not allow_zero else f">= {minimum}"
        raise InputFileError(path, where, f"{name} must be {bound}, got {value!r}")
    return float(value)


def graph_from_node_link(data, path="<network>", *, require_bandwidth=True):
    """Validate node-link data and build an undirected graph.

    Raises :class:`InputFileError` for a missing key, an unknown node kind, an edge naming a
    node that is not listed, a duplicate node, or a negative or non-numeric bandwidth.
    """
    if not isinstance(data, dict):
        raise InputFileError(path, "top level", "expected a node-link JSON object")
    if "nodes" not in data or not isinstance(data["nodes"], list):
        raise InputFileError(path, "nodes", "missing list of nodes")
    edge_key = "links" if "links" in data else "edges"
    if not isinstance(data.get(edge_key), list):
        raise InputFileError(path, "links", "missing list of links (or edges)")
    graph = nx.Graph()
    graph.graph.update(data.get("graph") or {})
    for i, node in enumerate(data["nodes"]):
        where = f"nodes[{i}]"
        if not isinstance(node, dict) or "id" not in node:
            raise InputFileError(path, where, "each node needs an 'id'")
        node_id = node["id"]
        if node_id in graph:
            raise InputFileError(path, where, f"duplicate node {node_id!r}")
        attrs = {k: v for k, v in node.items() if k != "id"}
        kind = attrs.setdefault("kind", COMPUTE)
        if kind not in NODE_KINDS:
            raise InputFileError(path, where,
                                 f"unknown kind {kind!r}; expected one of {NODE_KINDS}")
        graph.add_node(node_id, **attrs)
    for i, edge in enumerate(data[edge_key]):
        where = f"{edge_key}[{i}]"
        if not isinstance(edge, dict) or "source" not in edge or "target" not in edge:
            raise InputFileError(path, where, "each edge needs 'source' and 'target'")
        u, v = edge["source"], edge["target"]
        for end in (u, v):
            if end not in graph:
                raise InputFileError(path, where, f"edge names unknown node {end!r}")
        if u == v:
            raise InputFileError(path, where, f"self-loop on node {u!r}")
        attrs = {k: val for k, val in edge.items() if k not in ("source", "target")}
        if "bandwidth_mbps" in attrs:
            attrs["bandwidth_mbps"] = _number(attrs["bandwidth_mbps"], path, where,
                                              "bandwidth_mbps")
        elif require_bandwidth:
            raise InputFileError(path, where, "edge has no 'bandwidth_mbps'")
        for name in ("capacity_mbps", "latency_ms", "true_bandwidth_mbps"):
            if name in attrs:
                attrs[name] = _number(attrs[name], path, where, name,
                                      allow_zero=(name != "capacity_mbps"))
        graph.add_edge(u, v, **attrs)
    return graph


def read_graph(path):
    """Read a network status graph from a node-link JSON file."""
    return graph_from_node_link(load_json(path), path)

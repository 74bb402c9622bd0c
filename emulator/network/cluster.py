"""Cluster descriptions: which nodes exist and how they are wired.

A cluster is a plain networkx graph (topology as data; nothing here touches the kernel).
Compute nodes have ``kind="compute"``, a port ``capacity_mbps`` and ``memory_mb``; switches
and routers have ``kind="switch"``/``"router"``. Edges are physical links with
``capacity_mbps`` and ``latency_ms``. The graph attribute ``topology`` is ``"crossbar"`` (one
full-crossbar switch: every pair of nodes is its own path, as in Goteti and Subhlok's testbed) or
``"tree"`` (switches/routers with per-link capacities).

Cluster files are TOML or JSON (that form, or networkx node-link JSON as ``nodesel cluster
show --json`` prints it)::

    topology = "tree"            # or "crossbar" (then only nodes and defaults are needed)
    capacity_mbps = 100          # default port capacity
    memory_mb = 512              # default node memory
    latency_ms = 0.1
    switches = ["core", "rack1", "rack2"]
    nodes = [{name = "n1", switch = "rack1"}, {name = "n2", switch = "rack2"}]
    links = [{a = "rack1", b = "core", capacity_mbps = 1000},
             {a = "rack2", b = "core", capacity_mbps = 1000}]

``nodes`` may also be a count (names ``n1..nN``) or a list of names. Hostfiles in the MPICH
(``host:slots``) or Open MPI (``host slots=N``) format give a crossbar of those hosts.
"""

import json
import os
import re

from ..errors import InputFileError
from ..files import digits_only, finite_number, read_input_text
from .view import DEFAULT_LATENCY_MS, ClusterView

DEFAULT_NODES = 10
DEFAULT_CAPACITY_MBPS = 100.0
DEFAULT_MEMORY_MB = 512
SWITCH = "sw0"


def crossbar(nodes=DEFAULT_NODES, *, capacity_mbps=DEFAULT_CAPACITY_MBPS,
             memory_mb=DEFAULT_MEMORY_MB, latency_ms=DEFAULT_LATENCY_MS, slots=None):
    """Nodes ``n1..nN`` (or the given names), each on a port of one full-crossbar switch."""
    names = [f"n{i}" for i in range(1, nodes + 1)] if isinstance(nodes, int) else list(nodes)
    if not names:
        raise ValueError("a cluster needs at least one node")
    if capacity_mbps <= 0:
        raise ValueError(f"capacity_mbps must be positive, got {capacity_mbps}")
    import networkx as nx  # here: node ranks, which take a view, never import it

    graph = nx.Graph(topology="crossbar", latency_ms=latency_ms)
    graph.add_node(SWITCH, kind="switch")
    for name in names:
        graph.add_node(name, kind="compute", capacity_mbps=float(capacity_mbps),
                       memory_mb=int(memory_mb), slots=(slots or {}).get(name, 1))
        graph.add_edge(name, SWITCH, capacity_mbps=float(capacity_mbps), latency_ms=latency_ms)
    return graph


def node_names(cluster):
    """Compute nodes in order; rank i (1-based) emulates ``node_names(cluster)[i - 1]``."""
    if isinstance(cluster, ClusterView):
        return list(cluster.names)
    return [n for n, k in cluster.nodes(data="kind") if k == "compute"]


def links(cluster):
    """The links whose bandwidth a scenario varies, as ``(a, b, capacity_mbps)``.

    Crossbar: every pair of nodes (each pair's path is shared by its own competing streams).
    Tree: the physical links but FATPIPE ones (each flow's bound, never shared).
    """
    if cluster.graph.get("topology") == "crossbar":
        names = node_names(cluster)
        cap = {n: cluster.nodes[n]["capacity_mbps"] for n in names}
        return [(a, b, min(cap[a], cap[b]))
                for i, a in enumerate(names) for b in names[i + 1:]]
    return [(a, b, d["capacity_mbps"]) for a, b, d in cluster.edges(data=True)
            if d.get("sharing") != "fatpipe"]


def pair_path_links(cluster):
    """For each pair of compute nodes, the indices (into :func:`links`) of the links its
    traffic crosses."""
    link_list = links(cluster)
    index = {frozenset((a, b)): i for i, (a, b, _) in enumerate(link_list)}
    names = node_names(cluster)
    out = {}
    crossbar_topology = cluster.graph.get("topology") == "crossbar"
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if crossbar_topology:
                path_links = [index[frozenset((a, b))]]
            else:
                import networkx as nx

                path = nx.shortest_path(cluster, a, b)
                path_links = [index[frozenset(e)] for e in zip(path, path[1:])
                              if frozenset(e) in index]
            out[(a, b)] = out[(b, a)] = path_links
    return out


def pair_fixed_mbps(cluster):
    """For each pair of compute nodes of a tree whose path crosses switch fabrics or
    FATPIPE links (which no scenario varies), the least of their capacities."""
    import networkx as nx

    fixed = {v for v, d in cluster.nodes(data=True) if d.get("fabric_mbps") is not None}
    fat = any(d.get("sharing") == "fatpipe" for _, _, d in cluster.edges(data=True))
    if cluster.graph.get("topology") != "tree" or not (fixed or fat):
        return {}
    out = {}
    names = node_names(cluster)
    for i, a in enumerate(names):
        paths = nx.single_source_shortest_path(cluster, a)
        for b in names[i + 1:]:
            path = paths[b]
            caps = [cluster.nodes[v]["fabric_mbps"] for v in path[1:-1] if v in fixed] + \
                [cluster[u][v]["capacity_mbps"] for u, v in zip(path, path[1:])
                 if cluster[u][v].get("sharing") == "fatpipe"]
            if caps:
                out[(a, b)] = out[(b, a)] = min(caps)
    return out


def path_latency_seconds(cluster, nodes):
    """One-way latency between each ordered pair of ``nodes`` (names; repeats allowed), a
    list of rows in seconds: 0 within a node; on a crossbar the cluster's ``latency_ms``;
    on a tree the sum of the ``latency_ms`` of the links on the pair's path and the
    ``fabric_latency_ms`` of the switches between (a SimGrid backbone's latency).

    >>> g = cluster_from_dict({"topology": "tree", "latency_ms": 0.1, "switches": ["s", "t"],
    ...     "nodes": [{"name": "a", "switch": "s"}, {"name": "b", "switch": "s"},
    ...               {"name": "c", "switch": "t"}],
    ...     "links": [{"a": "s", "b": "t", "latency_ms": 1.0}]})
    >>> [[round(x * 1000, 3) for x in row] for row in path_latency_seconds(g, ["a", "b", "c"])]
    [[0.0, 0.2, 1.2], [0.2, 0.0, 1.2], [1.2, 1.2, 0.0]]
    """
    rows = {a: latencies_from(cluster, a, nodes) for a in set(nodes)}
    return [rows[a] for a in nodes]


def latencies_from(cluster, node, nodes):
    """One-way latency from ``node`` to each of ``nodes`` (seconds), as
    :func:`path_latency_seconds` has it; one shortest-path search."""
    if isinstance(cluster, ClusterView):
        return cluster.latencies_from(node, nodes)
    if cluster.graph.get("topology") == "crossbar":
        one = cluster.graph.get("latency_ms", DEFAULT_LATENCY_MS) / 1000.0
        return [0.0 if b == node else one for b in nodes]
    import networkx as nx

    fabric = {v: ms for v, ms in cluster.nodes(data="fabric_latency_ms") if ms}
    weight = "latency_ms" if not fabric else \
        (lambda u, v, d: d.get("latency_ms", 1) + fabric.get(v, 0.0))  # switches entered
    lengths = nx.single_source_dijkstra_path_length(cluster, node, weight=weight)
    return [lengths[b] / 1000.0 for b in nodes]


def latency_function(graph):
    """``latency(u, v)``, one-way seconds between two nodes of ``graph``: a cluster's (or
    view's) as :func:`latencies_from` has them, or a status graph's along its links'
    ``latency_ms``; None for a status graph whose links give no latency. Each source's row
    is computed once."""
    if isinstance(graph, ClusterView) or "topology" in graph.graph:
        names = node_names(graph)

        def row(a):
            return dict(zip(names, latencies_from(graph, a, names)))
    elif any(ms is not None for *_, ms in graph.edges(data="latency_ms")):
        import networkx as nx

        def row(a):
            lengths = nx.single_source_dijkstra_path_length(
                graph, a, weight=lambda u, v, d: d.get("latency_ms", 0.0))
            return {b: ms / 1000.0 for b, ms in lengths.items()}
    else:
        return None
    rows = {}

    def latency(u, v):
        if u not in rows:
            rows[u] = row(u)
        return rows[u][v]

    return latency


# -- files -------------------------------------------------------------------------------

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def _positive(path, where, value, name):
    if not (finite_number(value) and value > 0):
        raise InputFileError(path, where, f"{name} must be a positive number, got {value!r}")
    return value


def _latency(path, where, value, name=None):
    """``value`` if it is a finite number >= 0; the error says ``name`` after ``where``."""
    if not (finite_number(value) and value >= 0):
        raise InputFileError(path, where, (f"{name} " if name else "")
                             + f"must be a number >= 0, got {value!r}")
    return value


def _check_name(path, where, name):
    if not isinstance(name, str) or not _NAME.match(name):
        raise InputFileError(path, where, f"invalid name {name!r} (letters, digits, '_', '.', '-')")
    return name


def cluster_from_dict(data, path="<cluster>"):
    """Build a cluster graph from parsed TOML/JSON, validating every field."""
    if not isinstance(data, dict):
        raise InputFileError(path, "top level", "expected a table/object")
    data = dict(data.get("cluster", data))
    known = {"topology", "capacity_mbps", "memory_mb", "latency_ms", "nodes", "switches", "links"}
    for key in data:
        if key not in known:
            raise InputFileError(path, key, f"unknown field; expected one of {sorted(known)}")
    topology = data.get("topology", "crossbar")
    if topology not in ("crossbar", "tree"):
        raise InputFileError(path, "topology", f"must be 'crossbar' or 'tree', got {topology!r}")
    defaults = _defaults(data, path)
    nodes = _nodes(data.get("nodes", DEFAULT_NODES), defaults, path)
    if topology == "crossbar":
        return _crossbar_from(data, nodes, defaults, path)
    return _tree_from(data, nodes, defaults, path)


def _defaults(data, path):
    """(capacity_mbps, memory_mb, latency_ms) of the file, checked."""
    cap = _positive(path, "capacity_mbps", data.get("capacity_mbps", DEFAULT_CAPACITY_MBPS),
                    "capacity_mbps")
    memory = _positive(path, "memory_mb", data.get("memory_mb", DEFAULT_MEMORY_MB), "memory_mb")
    latency = _latency(path, "latency_ms", data.get("latency_ms", DEFAULT_LATENCY_MS))
    return cap, memory, latency


def _nodes(raw_nodes, defaults, path):
    """The compute nodes as dicts (name, switch, capacity_mbps, memory_mb), checked: a
    count gives n1..nN; names are unique."""
    cap, memory, _ = defaults
    if isinstance(raw_nodes, bool):
        raise InputFileError(path, "nodes", "must be a count or a list")
    if isinstance(raw_nodes, int):
        if raw_nodes < 1:
            raise InputFileError(path, "nodes", f"need at least one node, got {raw_nodes}")
        raw_nodes = [f"n{i}" for i in range(1, raw_nodes + 1)]
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise InputFileError(path, "nodes", "must be a positive count or a non-empty list")
    nodes, seen = [], set()
    for i, item in enumerate(raw_nodes):
        where = f"nodes[{i}]"
        item = {"name": item} if isinstance(item, str) else item
        if not isinstance(item, dict) or "name" not in item:
            raise InputFileError(path, where, "each node needs a 'name'")
        extra = set(item) - {"name", "switch", "capacity_mbps", "memory_mb"}
        if extra:
            raise InputFileError(path, where, f"unknown field(s) {sorted(extra)}")
        nodes.append(dict(name=_check_name(path, where, item["name"]),
                          switch=item.get("switch"),
                          capacity_mbps=float(_positive(path, where, item.get("capacity_mbps", cap),
                                                        "capacity_mbps")),
                          memory_mb=int(_positive(path, where, item.get("memory_mb", memory),
                                                  "memory_mb"))))
    for i, node in enumerate(nodes):
        if node["name"] in seen:
            raise InputFileError(path, f"nodes[{i}]", f"duplicate node name {node['name']!r}")
        seen.add(node["name"])
    return nodes


def _crossbar_from(data, nodes, defaults, path):
    cap, memory, latency = defaults
    for key in ("switches", "links"):
        if data.get(key):
            raise InputFileError(path, key, "a crossbar has one implicit switch; "
                                 f"'{key}' needs topology = \"tree\"")
    for i, node in enumerate(nodes):
        if node["switch"] is not None:
            raise InputFileError(path, f"nodes[{i}]", "'switch' needs topology = \"tree\"")
    graph = crossbar([n["name"] for n in nodes], capacity_mbps=cap, memory_mb=memory,
                     latency_ms=latency)
    for n in nodes:
        graph.nodes[n["name"]].update(capacity_mbps=n["capacity_mbps"],
                                      memory_mb=n["memory_mb"])
        graph[n["name"]][SWITCH]["capacity_mbps"] = n["capacity_mbps"]
    return graph


def _tree_from(data, nodes, defaults, path):
    import networkx as nx

    cap, _, latency = defaults
    graph = nx.Graph(topology="tree", latency_ms=latency)
    seen = {n["name"] for n in nodes}
    switches = data.get("switches") or []
    if not isinstance(switches, list) or not switches:
        raise InputFileError(path, "switches", "a tree needs a non-empty list of switches")
    for i, sw in enumerate(switches):
        sw = {"name": sw} if isinstance(sw, str) else sw
        if not isinstance(sw, dict) or "name" not in sw:
            raise InputFileError(path, f"switches[{i}]", "each switch needs a 'name'")
        name = _check_name(path, f"switches[{i}]", sw["name"])
        if name in seen:
            raise InputFileError(path, f"switches[{i}]", f"name {name!r} is already used")
        seen.add(name)
        kind = sw.get("kind", "switch")
        if kind not in ("switch", "router"):
            raise InputFileError(path, f"switches[{i}]",
                                 f"kind must be switch or router, got {kind!r}")
        graph.add_node(name, kind=kind, **_fabric(sw, path, f"switches[{i}]"))
    for i, node in enumerate(nodes):
        if node["switch"] not in graph:
            raise InputFileError(path, f"nodes[{i}]",
                                 f"switch {node['switch']!r} is not a listed switch")
        graph.add_node(node["name"], kind="compute", capacity_mbps=node["capacity_mbps"],
                       memory_mb=node["memory_mb"], slots=1)
        graph.add_edge(node["name"], node["switch"], capacity_mbps=node["capacity_mbps"],
                       latency_ms=latency)
    _tree_links(graph, data.get("links") or [], cap, latency, path)
    if not nx.is_tree(graph):
        problem = "has a cycle" if nx.is_connected(graph) else "is not connected"
        raise InputFileError(path, "links", "the switches and nodes must form a tree, but the "
                             f"graph {problem}")
    return graph


SWITCH_FIELDS = {"name", "kind", "fabric_mbps", "fabric_latency_ms", "fabric_sharing"}
LINK_FIELDS = {"a", "b", "capacity_mbps", "latency_ms", "sharing"}
SHARINGS = ("duplex", "shared", "fatpipe")  # SimGrid's SPLITDUPLEX, SHARED, FATPIPE


def _fabric(sw, path, where):
    """A switch's fabric (the capacity every route through it shares, as a SimGrid
    backbone), checked: ``fabric_mbps``, ``fabric_latency_ms``, ``fabric_sharing``."""
    extra = set(sw) - SWITCH_FIELDS
    if extra:
        raise InputFileError(path, where, f"unknown field(s) {sorted(extra)}; expected "
                             f"{sorted(SWITCH_FIELDS)}")
    if "fabric_mbps" not in sw:
        if set(sw) & {"fabric_latency_ms", "fabric_sharing"}:
            raise InputFileError(path, where, "fabric_latency_ms and fabric_sharing need "
                                 "fabric_mbps")
        return {}
    latency = _latency(path, where, sw.get("fabric_latency_ms", 0.0), "fabric_latency_ms")
    sharing = sw.get("fabric_sharing", "shared")
    if sharing not in ("shared", "fatpipe"):
        raise InputFileError(path, where, f"fabric_sharing must be shared or fatpipe, got "
                             f"{sharing!r}")
    return {"fabric_mbps": float(_positive(path, where, sw["fabric_mbps"], "fabric_mbps")),
            "fabric_latency_ms": float(latency), "fabric_sharing": sharing}


def _tree_links(graph, links, cap, latency, path):
    for i, link in enumerate(links):
        where = f"links[{i}]"
        if not isinstance(link, dict) or "a" not in link or "b" not in link:
            raise InputFileError(path, where, "each link needs 'a' and 'b'")
        extra = set(link) - LINK_FIELDS
        if extra:
            raise InputFileError(path, where, f"unknown field(s) {sorted(extra)}; expected "
                                 f"{sorted(LINK_FIELDS)}")
        sharing = link.get("sharing", "duplex")
        if sharing not in SHARINGS:
            raise InputFileError(path, where, f"sharing must be one of {', '.join(SHARINGS)}, "
                                 f"got {sharing!r}")
        a, b = link["a"], link["b"]
        for end in (a, b):
            if end not in graph or graph.nodes[end]["kind"] == "compute":
                raise InputFileError(path, where, f"{end!r} is not a listed switch")
        if graph.has_edge(a, b) or a == b:
            raise InputFileError(path, where, f"duplicate or self link {a}-{b}")
        graph.add_edge(a, b, capacity_mbps=float(_positive(
            path, where, link.get("capacity_mbps", cap), "capacity_mbps")),
            latency_ms=float(_latency(path, where, link.get("latency_ms", latency),
                                      "latency_ms")),
            **({} if sharing == "duplex" else {"sharing": sharing}))


def cluster_from_node_link(data, path="<cluster>"):
    """A cluster in networkx node-link JSON, as ``nodesel cluster show --json`` prints it,
    checked as a cluster: compute nodes with a positive port and memory, each on one link to a
    switch or router; links with a capacity; one switch for a crossbar, a tree otherwise."""
    import networkx as nx

    from .netgraph import graph_from_node_link

    for key in ("directed", "multigraph"):
        if data.get(key):
            raise InputFileError(path, key, "a cluster is an undirected graph of single links")
    graph = graph_from_node_link(data, path, require_bandwidth=False)
    topology = graph.graph.setdefault("topology", "crossbar")
    if topology not in ("crossbar", "tree"):
        raise InputFileError(path, "graph.topology",
                             f"must be 'crossbar' or 'tree', got {topology!r}")
    latency = _defaults(graph.graph, path)[2]
    for i, (name, d) in enumerate(graph.nodes(data=True)):
        _node_link_node(graph, path, f"nodes[{i}]", name, d)
    for i, (a, b, d) in enumerate(graph.edges(data=True)):
        where = f"links[{i}] ({a}-{b})"
        d["capacity_mbps"] = float(_positive(path, where, d.get("capacity_mbps"),
                                             "capacity_mbps"))
        d.setdefault("latency_ms", latency)
        if d.get("sharing", "duplex") not in SHARINGS:
            raise InputFileError(path, where, f"sharing must be one of {', '.join(SHARINGS)}, "
                                 f"got {d['sharing']!r}")
    switches = [n for n, kind in graph.nodes(data="kind") if kind != "compute"]
    if topology == "crossbar" and len(switches) != 1:
        raise InputFileError(path, "nodes", f"a crossbar has one switch, not {len(switches)}")
    if not nx.is_tree(graph):
        problem = "has a cycle" if nx.is_connected(graph) else "is not connected"
        raise InputFileError(path, "links", f"the switches and nodes must form a tree, but "
                             f"the graph {problem}")
    return graph


def _node_link_node(graph, path, where, name, d):
    """One node of :func:`cluster_from_node_link`, checked and given its defaults."""
    _check_name(path, where, name)
    if d["kind"] != "compute":
        return
    d["capacity_mbps"] = float(_positive(path, where, d.get("capacity_mbps",
                                                             DEFAULT_CAPACITY_MBPS),
                                         "capacity_mbps"))
    d["memory_mb"] = int(_positive(path, where, d.get("memory_mb", DEFAULT_MEMORY_MB),
                                   "memory_mb"))
    slots = d.setdefault("slots", 1)
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        raise InputFileError(path, where, f"slots must be a whole number >= 1, got {slots!r}")
    ends = [graph.nodes[other]["kind"] for other in graph[name]]
    if ends == ["compute"] or len(ends) != 1:
        raise InputFileError(path, where, f"compute node {name!r} needs one link, to a switch "
                             f"or router (it has {len(ends)})")


_OPENMPI = re.compile(r"^(?P<host>\S+)(?P<opts>(\s+\w+\s*=\s*\S+)*)\s*$")

_MPICH = re.compile(r"^(?P<host>[^\s:]+)(:(?P<slots>\S+))?\s*$")


def parse_hostfile(path):
    """Hosts and slots from a hostfile, MPICH (``host[:slots]``) or Open MPI
    (``host [slots=N] [max_slots=M]``) format. Blank lines and ``#`` comments are ignored."""
    hosts = {}
    lines = read_input_text(path, "hostfile").splitlines()
    for lineno, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"line {lineno}"
        mpich = _MPICH.match(line)
        if mpich:
            host, slots = mpich["host"], mpich["slots"]
            if slots is not None and not (digits_only(slots) and int(slots) > 0):
                raise InputFileError(path, where,
                                     f"slots must be a positive integer, got {slots!r}")
            slots = int(slots or 1)
        else:
            ompi = _OPENMPI.match(line)
            if not ompi:
                raise InputFileError(path, where, f"cannot parse {raw.strip()!r}; expected "
                                     "'host', 'host:slots' or 'host slots=N'")
            host, slots = ompi["host"], 1
            for key, value in re.findall(r"(\w+)\s*=\s*(\S+)", ompi["opts"]):
                if key not in ("slots", "max_slots", "max-slots"):
                    raise InputFileError(path, where, f"unknown option {key!r}")
                if not (digits_only(value) and int(value) > 0):
                    raise InputFileError(path, where,
                                         f"{key} must be a positive integer, got {value!r}")
                if key == "slots":
                    slots = int(value)
        _check_name(path, where, host)
        if host in hosts:
            raise InputFileError(path, where, f"host {host!r} is listed twice")
        hosts[host] = slots
    if not hosts:
        raise InputFileError(path, "", "no hosts listed")
    return hosts


def load_cluster(path=None):
    """The cluster in ``path`` (TOML, JSON, a SimGrid platform ``.xml`` or a hostfile), or the
    default 10-node crossbar."""
    if path is None:
        return crossbar()
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputFileError(path, "", "no such file")
    if path.endswith(".toml"):
        try:  # here, not at import: a node rank reads no file
            import tomllib
        except ModuleNotFoundError:  # Python < 3.11
            import tomli as tomllib
        text = read_input_text(path, "cluster file")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise InputFileError(path, "", f"malformed TOML: {e}") from None
        return cluster_from_dict(data, path)
    if path.endswith(".json"):
        from .netgraph import load_json

        data = load_json(path)
        if isinstance(data, dict) and {"directed", "multigraph", "graph"} & set(data):
            return cluster_from_node_link(data, path)
        return cluster_from_dict(data, path)
    if path.endswith(".xml"):
        from .simgrid import read_platform

        return read_platform(path)
    hosts = parse_hostfile(path)
    return crossbar(list(hosts), slots=hosts)


def describe(cluster):
    """Text lines describing nodes and links, for ``nodesel cluster show``."""
    lines = [f"topology: {cluster.graph.get('topology')}"]
    lines.append(f"{'node':<12}{'kind':<9}{'capacity [Mbit/s]':>18}{'memory [MB]':>13}")
    for n, d in cluster.nodes(data=True):
        cap = d.get("capacity_mbps")
        lines.append(f"{n!s:<12}{d['kind']:<9}{'' if cap is None else f'{cap:.0f}':>18}"
                     f"{d.get('memory_mb', ''):>13}")
    lines.append(f"{'link':<24}{'capacity [Mbit/s]':>18}{'latency [ms]':>14}")
    for a, b, d in cluster.edges(data=True):
        sharing = d.get("sharing", "duplex")
        lines.append(f"{f'{a}-{b}':<24}{d['capacity_mbps']:>18.0f}{d.get('latency_ms', 0):>14.3f}"
                     + ("" if sharing == "duplex" else f"  {sharing}"))
    for v, d in cluster.nodes(data=True):
        if d.get("fabric_mbps") is not None:
            lines.append(f"{f'fabric of {v}':<24}{d['fabric_mbps']:>18.0f}"
                         f"{d.get('fabric_latency_ms', 0):>14.3f}  "
                         f"{d.get('fabric_sharing', 'shared')}")
    return lines


def to_json(cluster):
    import networkx as nx

    return nx.node_link_data(cluster, edges="links")


def dumps(cluster):
    return json.dumps(to_json(cluster), indent=1)

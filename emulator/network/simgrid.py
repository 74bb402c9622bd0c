"""SimGrid platforms (``platform.xml``, version 4.1) as clusters, and clusters as platforms.

Read (``--cluster platform.xml``), the subset that is a tree:

- ``<cluster id prefix radical suffix bw lat [bb_bw bb_lat] [sharing_policy]
  [bb_sharing_policy]>``: a rack switch named by ``id``, its nodes ``prefix + i + suffix`` for
  ``i`` in ``radical`` (``0-99``, ``0-3,8``) on private links of ``bw`` and ``lat``. A
  backbone is the rack switch's fabric (``fabric_mbps``, ``fabric_latency_ms``), as SimGrid
  routes it: every flow between two of the cluster's nodes, and every flow into or out of
  the cluster, crosses it once.
- ``<zone routing="Cluster">`` of ``<cabinet>``s (``prefix radical suffix bw lat``: hosts on
  links of their own each way), ``<host>``s with ``<host_link id up down>`` and one
  ``<backbone id bandwidth latency>``: the same, one rack.
- ``<zone routing="Full">`` joining clusters by ``<zoneRoute>``s over ``<link>``s: a core
  switch named by the zone; each link of a zoneRoute must belong to one end's cluster (on
  every route of that cluster and on no other), and is in series on that cluster's uplink.
  A cluster whose routes cross no link of its own (or of two clusters, the second) joins
  the core by a link that never binds: its backbone's capacity, else its ports' together.
- ``<zone routing="Floyd|Dijkstra|Full">`` of ``<host>``s, ``<router>``s, ``<link>``s and
  ``<route>``s between neighbours whose graph is a tree (what ``cluster export --simgrid``
  writes): switches are the routers, each route one link of the tree.

Units are SimGrid's: bandwidths in ``Bps``, ``kBps``, ``MBps``, ``GBps``, ``TBps``, ``KiBps``,
``MiBps``, ``GiBps``, ``bps``, ``kbps``, ``Mbps``, ``Gbps``, ``Tbps`` (a bare number is bytes per
second); latencies in ``s``, ``ms``, ``us``, ``ns``, ``ps``, ``m``, ``h`` (bare: seconds).
``sharing_policy``: ``SPLITDUPLEX`` (each direction its own capacity, nodesel's links),
``SHARED`` (both directions share one; SimGrid's default for ``<link>`` and backbones),
``FATPIPE`` (each flow held to the capacity alone, shared with none; a backbone is SHARED or
FATPIPE, as SimGrid's DTD has it). A ``<cluster>``'s FATPIPE private links are read SHARED,
as SimGrid 4.1 builds them. In a Cluster zone a host_link over two links (``X_UP`` and
``X_DOWN`` of a SPLITDUPLEX link ``X``, or two of their own) is full duplex, over one link
that link's policy. A general graph of routes, and what is not network
(``<disk>``, ``<actor>``, ``<trace>``, DVFS ``pstate``...) are refused in one line naming the
element and its line.
"""

import re
import xml.parsers.expat
from typing import Optional

import networkx as nx

from ..errors import InputFileError
from ..files import read_input_text

BANDWIDTH_UNITS = {"bps": 1 / 8, "kbps": 1e3 / 8, "Mbps": 1e6 / 8, "Gbps": 1e9 / 8,
                   "Tbps": 1e12 / 8, "Bps": 1, "kBps": 1e3, "KBps": 1e3, "MBps": 1e6,
                   "GBps": 1e9, "TBps": 1e12, "KiBps": 2 ** 10, "MiBps": 2 ** 20,
                   "GiBps": 2 ** 30, "TiBps": 2 ** 40, "Kibps": 2 ** 10 / 8,
                   "Mibps": 2 ** 20 / 8, "Gibps": 2 ** 30 / 8}
LATENCY_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "ps": 1e-12, "m": 60.0,
                 "h": 3600.0}
IGNORED = {"platform", "prop", "config", "include"}  # read past: no network in them
ZONE_CHILDREN = {"link", "zoneRoute", "ASroute", "route", "host", "router", "prop", "zone",
                 "AS"}
NOT_MODELLED = {"disk", "storage", "storage_type", "mount", "actor", "process", "argument",
                "trace", "trace_connect", "bypassRoute", "bypassZoneRoute", "peer",
                "random", "model_prop"}


class Element:
    """An XML element with the line it starts on."""

    def __init__(self, tag: str, attrs: dict, line: int) -> None:
        self.tag, self.attrs, self.line = tag, attrs, line
        self.children: list = []


def parse_xml(path: str) -> Element:
    """The element tree of ``path``, each element with its line; malformed XML refused."""
    text = read_input_text(path, "SimGrid platform")
    parser = xml.parsers.expat.ParserCreate()
    stack = [Element("document", {}, 0)]

    def start(tag: str, attrs: dict) -> None:
        element = Element(tag, attrs, parser.CurrentLineNumber)
        stack[-1].children.append(element)
        stack.append(element)

    def end(tag: str) -> None:
        stack.pop()

    parser.StartElementHandler, parser.EndElementHandler = start, end
    try:
        parser.Parse(text, True)
    except xml.parsers.expat.ExpatError as e:
        raise InputFileError(path, f"line {e.lineno}", f"malformed XML: "
                             f"{xml.parsers.expat.ErrorString(e.code)}") from None
    if not stack[0].children or stack[0].children[0].tag != "platform":
        raise InputFileError(path, "line 1", "not a SimGrid platform (no <platform>)")
    return stack[0].children[0]


def quantity(path: str, element: Element, key: str, units: dict, *,
             default: Optional[float] = None) -> float:
    """``element``'s ``key`` in base units (bytes per second, seconds)."""
    text = element.attrs.get(key)
    if text is None:
        if default is not None:
            return default
        raise InputFileError(path, f"line {element.line}, <{element.tag}> {key}", "missing")
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([A-Za-z]*)\s*", text)
    unit = m.group(2) if m else None
    if not m or (unit and unit not in units):
        raise InputFileError(path, f"line {element.line}, <{element.tag}> {key}",
                             f"{text!r} is not a number with one of SimGrid's units "
                             f"({', '.join(units)})")
    try:
        value = float(m.group(1)) * (units[unit] if unit else 1.0)
    except ValueError:
        raise InputFileError(path, f"line {element.line}, <{element.tag}> {key}",
                             f"{text!r} is not a number") from None
    if value < 0:
        raise InputFileError(path, f"line {element.line}, <{element.tag}> {key}",
                             "must not be negative")
    return value


def _policy(path: str, element: Element, key: str = "sharing_policy",
            default: str = "SHARED", allowed: tuple = ("SHARED", "SPLITDUPLEX", "FATPIPE")) -> str:
    policy = element.attrs.get(key, default).upper()
    if policy not in allowed:
        raise InputFileError(path, f"line {element.line}, <{element.tag}> {key}",
                             f"{policy!r} is not one of {', '.join(allowed)}")
    return policy


SHARING = {"SHARED": "shared", "SPLITDUPLEX": "duplex", "FATPIPE": "fatpipe"}


def radical(path: str, element: Element) -> list:
    """The numbers of a cluster's ``radical``: ``0-3,8`` is 0, 1, 2, 3, 8."""
    out: list = []
    for part in element.attrs.get("radical", "").split(","):
        try:
            if "-" in part:
                a, b = part.split("-")
                out.extend(range(int(a), int(b) + 1))
            else:
                out.append(int(part))
        except ValueError:
            raise InputFileError(path, f"line {element.line}, <cluster> radical",
                                 f"{element.attrs.get('radical')!r} is not like 0-99 or "
                                 "0-3,8") from None
    return out


def _mbps(bytes_per_second: float) -> float:
    return bytes_per_second * 8 / 1e6


def _edge(graph: nx.Graph, a: str, b: str, bytes_per_second: float, seconds: float,
          policy: str) -> None:
    graph.add_edge(a, b, capacity_mbps=_mbps(bytes_per_second), latency_ms=seconds * 1e3,
                   sharing=SHARING[policy])


def read_platform(path: str) -> nx.Graph:
    """The cluster (a tree, see :mod:`.cluster`) of a SimGrid platform file."""
    platform = parse_xml(path)
    _refuse_what_is_not_network(path, platform)
    top = [c for c in platform.children if c.tag not in IGNORED]
    if len(top) != 1 or top[0].tag not in ("cluster", "zone", "AS"):
        where = top[1] if len(top) > 1 else platform
        raise InputFileError(path, f"line {where.line}, <{where.tag}>", "a platform of one "
                             "<cluster> or one <zone> is read; put the rest in that zone")
    graph = nx.Graph(topology="tree", latency_ms=0.0)
    if _is_cluster(top[0]):
        _fabric(graph, *_any_cluster(path, graph, top[0]))
    else:
        _zone(path, graph, top[0])
    if not any(k == "compute" for _, k in graph.nodes(data="kind")):
        raise InputFileError(path, f"line {top[0].line}", "no hosts")
    if not nx.is_tree(graph):
        problem = "has a cycle" if nx.is_connected(graph) else "is not connected"
        raise InputFileError(path, f"line {top[0].line}, <{top[0].tag}>", "its routes must "
                             f"form a tree, but the graph of hosts and routers {problem}")
    return graph


def _refuse_what_is_not_network(path: str, element: Element) -> None:
    for child in element.children:
        if child.tag in NOT_MODELLED:
            raise InputFileError(path, f"line {child.line}, <{child.tag}>", "not modelled "
                                 "(this reader takes clusters, zones, hosts, routers, links "
                                 "and routes)")
        if child.tag == "host" and ("pstate" in child.attrs or "," in child.attrs.get(
                "speed", "")):
            raise InputFileError(path, f"line {child.line}, <host> speed", "DVFS (several "
                                 "speeds, pstate) is not modelled")
        _refuse_what_is_not_network(path, child)


def _cluster(path: str, graph: nx.Graph, element: Element) -> tuple:
    """A rack of the cluster's nodes; returns (rack switch, backbone or None)."""
    a = element.attrs
    for key in ("id", "prefix", "radical"):
        if key not in a:
            raise InputFileError(path, f"line {element.line}, <cluster> {key}", "missing")
    if a.get("topology", "FLAT").upper() != "FLAT":
        raise InputFileError(path, f"line {element.line}, <cluster> topology",
                             f"{a['topology']} is not modelled (FLAT clusters are)")
    rack = a["id"]
    if rack in graph:
        raise InputFileError(path, f"line {element.line}, <cluster> id", f"{rack!r} is used "
                             "twice")
    graph.add_node(rack, kind="switch")
    bw = quantity(path, element, "bw", BANDWIDTH_UNITS)
    lat = quantity(path, element, "lat", LATENCY_UNITS, default=0.0)
    policy = _policy(path, element, default="SPLITDUPLEX")
    if policy == "FATPIPE":  # SimGrid 4.1 builds a cluster's private links SHARED then
        policy = "SHARED"
    for i in radical(path, element):
        name = f"{a['prefix']}{i}{a.get('suffix', '')}"
        graph.add_node(name, kind="compute", capacity_mbps=_mbps(bw), memory_mb=512, slots=1)
        _edge(graph, name, rack, bw, lat, policy)
    if "bb_bw" not in a:
        return rack, None
    return rack, (quantity(path, element, "bb_bw", BANDWIDTH_UNITS),
                  quantity(path, element, "bb_lat", LATENCY_UNITS, default=0.0),
                  _policy(path, element, "bb_sharing_policy", allowed=("SHARED", "FATPIPE")))


def _is_cluster(element: Element) -> bool:
    return element.tag == "cluster" or (element.tag in ("zone", "AS") and
                                        element.attrs.get("routing") == "Cluster")


def _any_cluster(path: str, graph: nx.Graph, element: Element) -> tuple:
    """A ``<cluster>`` or a ``<zone routing="Cluster">``: (rack switch, backbone or None)."""
    if element.tag == "cluster":
        return _cluster(path, graph, element)
    return _cluster_zone(path, graph, element)


def _cluster_zone(path: str, graph: nx.Graph, zone: Element) -> tuple:
    """A zone routed as a cluster: its cabinets' and linked hosts' nodes on one rack switch
    (the zone), each on its own link up and link down; its backbone (or None)."""
    rack = zone.attrs.get("id")
    if not rack or rack in graph:
        raise InputFileError(path, f"line {zone.line}, <{zone.tag}> id",
                             "missing" if not rack else f"{rack!r} is used twice")
    graph.add_node(rack, kind="switch")
    links, backbone = {}, None
    for c in zone.children:
        if c.tag == "link":  # a SPLITDUPLEX link X is two: X_UP and X_DOWN
            link = (quantity(path, c, "bandwidth", BANDWIDTH_UNITS),
                    quantity(path, c, "latency", LATENCY_UNITS, default=0.0), _policy(path, c))
            names = [c.attrs.get("id")] if link[2] != "SPLITDUPLEX" else \
                [f"{c.attrs.get('id')}_UP", f"{c.attrs.get('id')}_DOWN"]
            links.update({name: link for name in names})
        elif c.tag == "backbone":
            if backbone is not None:
                raise InputFileError(path, f"line {c.line}, <backbone>", "a second backbone")
            backbone = (quantity(path, c, "bandwidth", BANDWIDTH_UNITS),
                        quantity(path, c, "latency", LATENCY_UNITS, default=0.0),
                        _policy(path, c, allowed=("SHARED", "FATPIPE")))
        elif c.tag == "cabinet":
            bw = quantity(path, c, "bw", BANDWIDTH_UNITS)
            lat = quantity(path, c, "lat", LATENCY_UNITS, default=0.0)
            for i in radical(path, c):  # a link up and a link down of its own
                _node_on(graph, f"{c.attrs.get('prefix', '')}{i}{c.attrs.get('suffix', '')}",
                         rack, (bw, lat, "SHARED"), (bw, lat, "SHARED"), False, path, c)
        elif c.tag not in ("host", "host_link", "router", "prop"):
            raise InputFileError(path, f"line {c.line}, <{c.tag}>", "not read in a zone "
                                 "routed as a Cluster (cabinets, hosts with host_links, links "
                                 "and a backbone are)")
    hosts = {c.attrs.get("id"): c for c in zone.children if c.tag == "host"}
    for c in (c for c in zone.children if c.tag == "host_link"):
        if c.attrs.get("id") not in hosts:
            raise InputFileError(path, f"line {c.line}, <host_link> id", f"no host "
                                 f"{c.attrs.get('id')!r} in this zone")
        ends = []
        for key in ("up", "down"):
            if c.attrs.get(key) not in links:
                raise InputFileError(path, f"line {c.line}, <host_link> {key}",
                                     f"no link {c.attrs.get(key)!r} in this zone")
            ends.append(links[c.attrs[key]])
        _node_on(graph, c.attrs["id"], rack, ends[0], ends[1], c.attrs["up"] == c.attrs["down"],
                 path, c)
        del hosts[c.attrs["id"]]
    if hosts:
        host = next(iter(hosts.values()))
        raise InputFileError(path, f"line {host.line}, <host>", f"{host.attrs.get('id')!r} "
                             "has no host_link")
    return rack, backbone


def _node_on(graph: nx.Graph, name: str, rack: str, up: tuple, down: tuple, same: bool,
             path: str, element: Element) -> None:
    """A node on the rack by its link up and link down, each (bandwidth, latency, policy):
    two links of one capacity are a full-duplex link (FATPIPE both: a FATPIPE one); the
    ``same`` link both ways is that link (SHARED or FATPIPE)."""
    if name in graph:
        raise InputFileError(path, f"line {element.line}, <{element.tag}>", f"host {name!r} "
                             "is named twice")
    if up[:2] != down[:2]:
        raise InputFileError(path, f"line {element.line}, <{element.tag}>", "a host's link "
                             "up and link down differ: not modelled (one capacity both ways)")
    policy = "FATPIPE" if up[2] == down[2] == "FATPIPE" else \
        "SHARED" if same else "SPLITDUPLEX"
    graph.add_node(name, kind="compute", capacity_mbps=_mbps(up[0]), memory_mb=512, slots=1)
    _edge(graph, name, rack, up[0], up[1], policy)


def _fabric(graph: nx.Graph, rack: str, backbone: Optional[tuple]) -> None:
    """The cluster's backbone as its rack switch's fabric."""
    if backbone is not None:
        bw, lat, policy = backbone
        graph.nodes[rack].update(fabric_mbps=_mbps(bw), fabric_latency_ms=lat * 1e3,
                                 fabric_sharing=SHARING[policy])


def _zone(path: str, graph: nx.Graph, zone: Element) -> None:
    routing = zone.attrs.get("routing", "")
    clusters = [c for c in zone.children if _is_cluster(c)]
    inner = [c for c in zone.children if c.tag in ("zone", "AS") and not _is_cluster(c)]
    if inner:
        raise InputFileError(path, f"line {inner[0].line}, <{inner[0].tag}>", "zones inside "
                             "zones are read only as clusters (<cluster>, or routing=Cluster)")
    if routing not in ("Full", "Floyd", "Dijkstra", "DijkstraCache"):
        raise InputFileError(path, f"line {zone.line}, <{zone.tag}> routing",
                             f"{routing!r} is not modelled (Cluster, Full, Floyd, Dijkstra "
                             "are)")
    for c in zone.children:
        if c.tag not in ZONE_CHILDREN and not _is_cluster(c):
            raise InputFileError(path, f"line {c.line}, <{c.tag}>", f"not read in a zone "
                                 f"routed {routing} (clusters, hosts, routers, links and "
                                 "routes are)")
    links = {}
    for link in (c for c in zone.children if c.tag == "link"):
        if link.attrs.get("id") in links:
            raise InputFileError(path, f"line {link.line}, <link> id", "used twice")
        links[link.attrs.get("id")] = (quantity(path, link, "bandwidth", BANDWIDTH_UNITS),
                                       quantity(path, link, "latency", LATENCY_UNITS,
                                                default=0.0),
                                       _policy(path, link), link)
    if clusters:
        _clusters_joined(path, graph, zone, clusters, links)
    else:
        _hosts_and_routes(path, graph, zone, links)


def _route_links(path: str, route: Element, links: dict) -> list:
    out = []
    for ctn in (c for c in route.children if c.tag == "link_ctn"):
        name = ctn.attrs.get("id")
        if name not in links:
            raise InputFileError(path, f"line {ctn.line}, <link_ctn> id", f"no link {name!r}")
        out.append(name)
    return out


def _clusters_joined(path: str, graph: nx.Graph, zone: Element, clusters: list,
                     links: dict) -> None:
    """Clusters behind one core switch (the zone), each uplink its backbone then its links."""
    core = zone.attrs.get("id", "core")
    racks = {}
    for c in clusters:
        rack, backbone = _any_cluster(path, graph, c)
        racks[rack] = backbone
        _fabric(graph, rack, backbone)
    if len(racks) == 1 and not links:
        return
    routes = [r for r in zone.children if r.tag in ("zoneRoute", "ASroute")]
    on: dict = {rack: [] for rack in racks}  # rack -> link lists of its routes
    for r in routes:
        ends = (r.attrs.get("src"), r.attrs.get("dst"))
        for end in ends:
            if end not in racks:
                raise InputFileError(path, f"line {r.line}, <{r.tag}>", f"{end!r} is not a "
                                     "cluster of this zone")
        used = _route_links(path, r, links)
        for end in ends:
            on[end].append((set(used), r))
    own: dict = {}
    for rack, lists in on.items():
        if not lists:
            raise InputFileError(path, f"line {zone.line}, <{zone.tag}>", f"no zoneRoute "
                                 f"reaches cluster {rack!r}")
        shared = set.intersection(*(s for s, _ in lists))
        others = set().union(*(s for other, ls in on.items() if other != rack
                               for s, r in ls if rack not in (r.attrs.get("src"),
                                                               r.attrs.get("dst"))))
        claimed = set().union(*own.values()) if own else set()
        own[rack] = shared - others - claimed  # two clusters: their links are the first's
    for r in routes:
        ends = (r.attrs.get("src"), r.attrs.get("dst"))
        for name in _route_links(path, r, links):
            if name not in own[ends[0]] | own[ends[1]]:
                raise InputFileError(path, f"line {r.line}, <{r.tag}>", f"link {name!r} "
                                     "belongs to neither end's cluster alone: a general graph "
                                     "of routes is not modelled (each cluster's links must "
                                     "lie on all its routes and on no other)")
    graph.add_node(core, kind="switch")
    for rack, backbone in racks.items():
        chain = [links[name][:3] for name in sorted(own[rack])] or \
            [_unbinding_uplink(graph, rack, backbone)]
        at = rack
        for k, (bw, lat, policy) in enumerate(chain):
            nxt = core if k == len(chain) - 1 else f"{rack}-uplink{k + 1}"
            if nxt != core:
                graph.add_node(nxt, kind="router")
            _edge(graph, at, nxt, bw, lat, policy)
            at = nxt


def _unbinding_uplink(graph: nx.Graph, rack: str, backbone: Optional[tuple]) -> tuple:
    """(bandwidth, latency, policy) of a link out of a cluster whose routes cross no link of
    its own, that never binds: its backbone's capacity (which every such flow crosses too),
    else all its ports' (or, FATPIPE ports, the fastest's, as a FATPIPE)."""
    if backbone is not None:
        return backbone[0], 0.0, backbone[2]
    ports = [d for _, _, d in graph.edges(rack, data=True)]
    bytes_per_second = [d["capacity_mbps"] * 1e6 / 8 for d in ports]
    if all(d.get("sharing") == "fatpipe" for d in ports):
        return max(bytes_per_second), 0.0, "FATPIPE"
    return sum(bytes_per_second), 0.0, "SPLITDUPLEX"


def _hosts_and_routes(path: str, graph: nx.Graph, zone: Element, links: dict) -> None:
    """A graph of hosts and routers whose routes join neighbours over one link each; a
    one-way route into a router may add that router's fabric (as the export writes)."""
    firsts: set = set()
    fabrics: dict = {}  # router -> its fabric's link
    for c in zone.children:
        if c.tag == "host":
            graph.add_node(c.attrs["id"], kind="compute", memory_mb=512, slots=1)
        elif c.tag == "router":
            graph.add_node(c.attrs["id"], kind="switch")
    for r in (c for c in zone.children if c.tag == "route"):
        src, dst = r.attrs.get("src"), r.attrs.get("dst")
        for end in (src, dst):
            if end not in graph:
                raise InputFileError(path, f"line {r.line}, <route>", f"{end!r} is not a "
                                     "host or router of this zone")
        used = _route_links(path, r, links)
        one_way = r.attrs.get("symmetrical", "YES").upper() == "NO"
        if len(used) != 1 and not (one_way and len(used) == 2):
            raise InputFileError(path, f"line {r.line}, <route>", f"a route over {len(used)} "
                                 "links: routes between neighbours, one link each (and, one "
                                 "way, the fabric of the router entered), are read (a general "
                                 "graph of routes is not modelled)")
        bw, lat, policy, _ = links[used[0]]
        if not graph.has_edge(src, dst):
            _edge(graph, src, dst, bw, lat, policy)
        firsts.add(used[0])
        if len(used) == 2:
            _fabric_of_router(path, graph, r, dst, used[1], links, fabrics)
    if firsts & set(fabrics.values()):
        raise InputFileError(path, f"line {zone.line}, <{zone.tag}>", f"link "
                             f"{sorted(firsts & set(fabrics.values()))[0]!r} is both a hop "
                             "and a router's fabric (a general graph of routes)")
    for n, kind in list(graph.nodes(data="kind")):
        if kind != "compute":
            continue
        edges = list(graph.edges(n, data=True))
        if len(edges) != 1 or graph.nodes[edges[0][1]]["kind"] == "compute":
            raise InputFileError(path, f"line {zone.line}, <{zone.tag}>", f"host {n!r} must "
                                 "have one route, to a router")
        graph.nodes[n]["capacity_mbps"] = edges[0][2]["capacity_mbps"]


def _fabric_of_router(path: str, graph: nx.Graph, route: Element, router: str, name: str,
                      links: dict, fabrics: dict) -> None:
    """``name``, the second link of a route into ``router``: that router's fabric, the same
    on every route into it."""
    if graph.nodes[router]["kind"] == "compute" or fabrics.get(router, name) != name:
        raise InputFileError(path, f"line {route.line}, <route>", f"link {name!r}: a second "
                             "link must be the fabric of the router entered, the same on "
                             "every route into it")
    bw, lat, policy, element = links[name]
    if policy == "SPLITDUPLEX":
        raise InputFileError(path, f"line {element.line}, <link> sharing_policy", "a "
                             "router's fabric is SHARED or FATPIPE")
    fabrics[router] = name
    graph.nodes[router].update(fabric_mbps=_mbps(bw), fabric_latency_ms=lat * 1e3,
                               fabric_sharing=SHARING[policy])


def to_platform(cluster: nx.Graph) -> str:
    """A SimGrid platform (version 4.1) of ``cluster``: hosts, a router per switch, a link
    per edge (SPLITDUPLEX, SHARED or FATPIPE, as its ``sharing``), in a Floyd zone whose
    routes join neighbours. A switch's fabric is one more link, which every route entering
    the switch adds (routes are then written one way each). SimGrid finds on it the same
    bottleneck for every pair."""
    lines = ["<?xml version='1.0'?>",
             '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">',
             '<platform version="4.1">', '  <zone id="nodesel" routing="Floyd">']
    policy = {v: k for k, v in SHARING.items()}
    fabric = {}
    for n, d in cluster.nodes(data=True):
        lines.append(f'    <host id="{n}" speed="1Gf"/>' if d.get("kind") == "compute"
                     else f'    <router id="{n}"/>')
        if d.get("kind") != "compute" and d.get("fabric_mbps") is not None:
            fabric[n] = f"fabric-{n}"
            lines.append(f'    <link id="fabric-{n}" bandwidth="{d["fabric_mbps"]!r}Mbps" '
                         f'latency="{d.get("fabric_latency_ms", 0.0)!r}ms" sharing_policy='
                         f'"{policy[d.get("fabric_sharing", "shared")]}"/>')
    edges = []
    for k, (a, b, d) in enumerate(cluster.edges(data=True)):
        name = f"l{k}-{a}-{b}"
        sharing = d.get("sharing", "duplex")
        lines.append(f'    <link id="{name}" bandwidth="{d["capacity_mbps"]!r}Mbps" '
                     f'latency="{d.get("latency_ms", 0.0)!r}ms" sharing_policy='
                     f'"{policy[sharing]}"/>')
        edges.append((a, b, name, sharing == "duplex"))
    for a, b, name, duplex in edges:
        if not fabric:
            direction = ' direction="UP"' if duplex else ""
            lines.append(f'    <route src="{a}" dst="{b}"><link_ctn id="{name}"{direction}/>'
                         "</route>")
            continue
        for x, y, way in ((a, b, "UP"), (b, a, "DOWN")):
            direction = f' direction="{way}"' if duplex else ""
            into = f'<link_ctn id="{fabric[y]}"/>' if y in fabric else ""
            lines.append(f'    <route src="{x}" dst="{y}" symmetrical="NO"><link_ctn '
                         f'id="{name}"{direction}/>{into}</route>')
    lines += ["  </zone>", "</platform>"]
    return "\n".join(lines) + "\n"

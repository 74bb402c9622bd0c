"""How the flows of a cluster share its network: one fluid model for every user of it.

Resources
    Every directed link is a resource with a capacity: on a tree, each physical link in each
    direction (a node's port up and down, each switch-to-switch link both ways); on a
    crossbar, each node's port up and down and, for every ordered pair of nodes, the pair's
    path through the switch (at the smaller port's capacity, or the scenario's bandwidth).
    Links are full duplex: the two directions are two resources, unless the link's
    ``sharing`` is ``"shared"`` (SimGrid's SHARED policy): then both directions share one
    capacity, or ``"fatpipe"`` (SimGrid's FATPIPE): then each flow crossing it is held to
    its capacity alone, sharing it with none. A switch with a ``fabric_mbps`` (SimGrid's
    backbone of a cluster) is one more resource, both ways, for every flow passing through
    it or turning there (``fabric_sharing`` ``"fatpipe"``: a bound on each). Each node's CPU
    is one more resource (one CPU-second per second), for compute phases.
Flows
    A flow from node u to node v crosses u's port up, the links of its path in the direction
    travelled and v's port down (on a crossbar: up, the pair's path, down). A flow from a
    node to itself crosses nothing (no network).
Sharing
    Rates are max-min fair, by progressive filling, as SimGrid's flow model computes them:
    all rates grow together; a flow stops growing when a resource on its path is full or it
    reaches its bound. They are solved again whenever a flow starts or ends or the scenario
    changes (:mod:`emulator.network._fluid`, in C).
Scenarios
    A stream-model timeline puts its S competing streams on a link as S background flows
    there (crossing nothing else, never bounded), so a link of capacity C carrying S streams
    leaves a new flow C/(S+1), and two flows of one job on it share what max-min gives them.
    A static matrix or a trace sets the link's capacity to its bandwidth (on a crossbar, each
    direction of a pair is then one more link of that bandwidth, shared by the flows on it).

Everything that predicts or emulates communication uses this model: the emulator's message
path (all ranks of a machine share one model in MPI shared memory), ``nodesel flows``,
selection's flow-model ranking, the experiment's oracle and the batch estimators.

>>> from emulator.network.cluster import crossbar
>>> [round(s, 3) for s in simulate(crossbar(3), [(0, "n1", "n2", 1_250_000),
...                                              (0, "n1", "n3", 1_250_000)],
...                                latency_seconds=0.0, bucket=False)]
[0.2, 0.2]
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass

from . import _fluid
from . import cluster as clusters

# Sends are released when this much of their message is left (the sender's socket buffer,
# as the message path's SEND_BUFFER_BYTES)
BUFFER_BITS = 512 * 1024 * 8.0
DEFAULT_MAX_FLOWS = 16384
# What a message path adds to a message behind its latency, in wall seconds
# (scripts/calibrate_messages): the skeletons' and a real program's under the interposition
# library. Predictions charge it divided by the dilation.
SKELETON_MESSAGE_SECONDS = 1.7e-6
PROGRAM_MESSAGE_SECONDS = 0.13e-6
maxmin = _fluid.maxmin  # maxmin(capacities, backgrounds, paths, bounds=None) -> rates


@dataclass
class Resources:
    """The resources of a cluster: names (``("up", n)``, ``("down", n)``, ``("pair", u, v)``,
    ``("link", a, b)``, ``("cpu", n)``), capacities in units per second (bit/s; CPU-s/s),
    and ``routes``, how the flows of an ordered pair of compute nodes cross them (see
    :class:`PairPaths`; ``paths[(i, j)]`` gives them as a list). O(n) for a tree: no table
    of every pair is made."""

    nodes: list
    names: list
    capacity: list
    routes: tuple
    index: dict  # name -> resource index

    def cpu(self, node):
        return self.index[("cpu", self.nodes[node] if isinstance(node, int) else node)]

    @property
    def paths(self):
        return PairPaths(self.routes, len(self.nodes))


class PairPaths(Mapping):
    """The resources a flow from node i to node j shares, ``paths[(i, j)]`` (i != j), made
    from the routes as the fluid model makes them: ``("tree", parent, depth, up, down,
    vertex[, fabric, fatpipe])`` (up from the source to the common ancestor, then down; then
    the fabric of each switch between; FATPIPE resources left out, as they bound the flow
    instead) or ``("crossbar", up, down, pair_base)`` (the source's port up, the pair's
    path, the destination's port down)."""

    def __init__(self, routes, n_nodes):
        self.routes, self.n = routes, n_nodes

    def __getitem__(self, key):
        i, j = key
        if not (0 <= i < self.n and 0 <= j < self.n) or i == j:
            raise KeyError(key)
        if self.routes[0] == "crossbar":
            _, up, down, base = self.routes
            return [up[i], base + i * (self.n - 1) + j - (j > i), down[j]]
        _, parent, depth, up_res, down_res, vertex, *extra = self.routes
        a, b, ups, downs, between = vertex[i], vertex[j], [], [], []
        while a != b:
            if depth[a] >= depth[b]:
                ups.append(up_res[a])
                a = parent[a]
                between.append(a)
            else:
                downs.append(down_res[b])
                b = parent[b]
                between.append(b)
        path = ups + downs[::-1]
        if extra:  # switch fabrics between the ends, once each; FATPIPEs bound, not shared
            fabric, fat = extra
            path += [fabric[v] for v in dict.fromkeys(between) if fabric[v] >= 0]
            path = [r for r in path if not fat[r]]
        return path

    def __iter__(self):
        return ((i, j) for i in range(self.n) for j in range(self.n) if i != j)

    def __len__(self):
        return self.n * (self.n - 1)


def resources(cluster):
    """The resources of ``cluster`` (a graph from :mod:`emulator.network.cluster`)."""
    nodes = clusters.node_names(cluster)
    if cluster.graph.get("topology") == "crossbar":
        return _crossbar_resources(nodes, [cluster.nodes[n]["capacity_mbps"] * 1e6
                                           for n in nodes])
    names, capacity = [], []

    def add(name, bps):
        names.append(name)
        capacity.append(float(bps))
        return len(names) - 1

    edge, aliases, fat = {}, {}, set()
    for a, b, d in cluster.edges(data=True):
        for x, y in ((a, b), (b, a)):
            kind = "up" if cluster.nodes[x].get("kind") == "compute" else \
                "down" if cluster.nodes[y].get("kind") == "compute" else "link"
            name = (kind, x) if kind == "up" else (kind, y) if kind == "down" \
                else (kind, x, y)
            if d.get("sharing") in ("shared", "fatpipe") and (y, x) in edge:
                edge[(x, y)] = aliases[name] = edge[(y, x)]  # both ways: one resource
            else:
                edge[(x, y)] = add(name, d["capacity_mbps"] * 1e6)
            if d.get("sharing") == "fatpipe":
                fat.add(edge[(x, y)])
    fabric = {}
    for v, d in cluster.nodes(data=True):
        if d.get("kind") != "compute" and d.get("fabric_mbps") is not None:
            fabric[v] = add(("fabric", v), d["fabric_mbps"] * 1e6)
            if d.get("fabric_sharing") == "fatpipe":
                fat.add(fabric[v])
    routes = _tree_routes(cluster, nodes, edge, fabric, fat, len(names))
    for n in nodes:
        add(("cpu", n), 1.0)
    index = {n: i for i, n in enumerate(names)}
    index.update(aliases)
    return Resources(nodes, names, capacity, routes, index)


def _crossbar_resources(nodes, port_bps):
    """The resources of a crossbar of ``nodes`` whose ports have ``port_bps``."""
    names, capacity = [], []

    def add(name, bps):
        names.append(name)
        capacity.append(float(bps))
        return len(names) - 1

    port = dict(zip(nodes, port_bps))
    up = [add(("up", n), port[n]) for n in nodes]
    down = [add(("down", n), port[n]) for n in nodes]
    pair_base = len(names)
    for u in nodes:  # source-major, as PairPaths and the model number them
        for v in nodes:
            if u != v:
                add(("pair", u, v), min(port[u], port[v]))
    for n in nodes:
        add(("cpu", n), 1.0)
    return Resources(list(nodes), names, capacity, ("crossbar", up, down, pair_base),
                     {n: i for i, n in enumerate(names)})


def _tree_routes(cluster, nodes, edge, fabric=None, fat=(), n_links=0):
    """("tree", parent, depth, up, down, vertex[, fabric, fatpipe]): the tree hung from a
    switch, each vertex's parent, depth and the resources of its link up to the parent and
    down from it; where switches have fabrics or links are FATPIPE, each vertex's fabric
    (-1: none) and a 0/1 flag per resource (the CPUs after the ``n_links`` links: 0)."""
    import networkx as nx  # here: ranks that attach to a model never build one

    root = next((v for v, k in cluster.nodes(data="kind") if k != "compute"), nodes[0])
    order = {root: 0}
    parent, depth, up, down = [-1], [0], [-1], [-1]
    for p, v in nx.bfs_edges(cluster, root):
        order[v] = len(parent)
        parent.append(order[p])
        depth.append(depth[order[p]] + 1)
        up.append(edge[(v, p)])
        down.append(edge[(p, v)])
    vertex = [order[n] for n in nodes]
    if not fabric and not fat:
        return ("tree", parent, depth, up, down, vertex)
    by_order = [-1] * len(parent)
    for v, r in (fabric or {}).items():
        by_order[order[v]] = r
    flags = [1 if r in fat else 0 for r in range(n_links + len(nodes))]
    return ("tree", parent, depth, up, down, vertex, by_order, flags)


def link_resources(res, cluster, a, b):
    """The two directed resources of a scenario link a-b."""
    if cluster.graph.get("topology") == "crossbar":
        return [res.index[("pair", a, b)], res.index[("pair", b, a)]]
    out = []
    for x, y in ((a, b), (b, a)):
        kind_x, kind_y = cluster.nodes[x].get("kind"), cluster.nodes[y].get("kind")
        name = ("up", x) if kind_x == "compute" else ("down", y) if kind_y == "compute" \
            else ("link", x, y)
        out.append(res.index[name])
    return out


def timeline_arrays(res, cluster, timeline):
    """A timeline as the model reads it: (event times, resources, capacities in bit/s,
    background flows, initial capacities, initial backgrounds, duration). Without a
    timeline, every resource at its capacity for ever (the dedicated network)."""
    init_cap, init_bg = list(res.capacity), [0] * len(res.capacity)
    times, which, caps, bgs = [], [], [], []
    if timeline is None:
        return times, which, caps, bgs, init_cap, init_bg, math.inf
    streams = timeline.streams
    link_res = [link_resources(res, cluster, a, b) for a, b, _ in timeline.links]

    def state(link, mbps, count):
        if count is None:  # a bandwidth: the link's capacity, nobody else on it
            return mbps * 1e6, 0
        return timeline.links[link][2] * 1e6, int(count)  # capacity, S background streams

    for link, mbps in enumerate(timeline.initial_mbps):
        cap, bg = state(link, mbps, None if streams is None else streams[0][link])
        for r in link_res[link]:
            init_cap[r], init_bg[r] = cap, bg
    for k, (t, link, mbps) in enumerate(timeline.events):
        cap, bg = state(link, mbps, None if streams is None else streams[1][k])
        for r in link_res[link]:
            times.append(float(t))
            which.append(r)
            caps.append(cap)
            bgs.append(bg)
    duration = float(timeline.duration_seconds()) if timeline.events or \
        "duration_seconds" in timeline.meta else math.inf
    if timeline.meta.get("kind") in ("static", "dedicated"):
        duration = math.inf  # the same for ever
    return times, which, caps, bgs, init_cap, init_bg, duration


def state_bytes(cluster, max_flows=DEFAULT_MAX_FLOWS):
    """The bytes of a model's state for ``cluster`` (the size of its shared window): a
    graph, or the :class:`ModelPlan` made of one."""
    res = cluster.resources if isinstance(cluster, ModelPlan) else resources(cluster)
    return _fluid.state_bytes(len(res.nodes), len(res.names), max_flows)


@dataclass(frozen=True)
class ModelPlan:
    """What a model is made from, as plain data: the resources and the two timelines (the
    scenario's and the dedicated one) as the fluid model reads them. Made once from the
    cluster's graph, it is all a rank attaching to a shared model needs."""

    resources: Resources
    scenario: tuple
    dedicated: tuple


def model_plan(cluster, timeline=None):
    """The :class:`ModelPlan` of ``cluster`` under ``timeline``."""
    res = resources(cluster)
    return ModelPlan(res, tuple(timeline_arrays(res, cluster, timeline)),
                     tuple(timeline_arrays(res, cluster, None)))


def node_plan(node):
    """The :class:`ModelPlan` of one node alone on a switch of its own (its CPU, its port at
    the default capacity): a node's own model where the cluster's is not in its process."""
    res = _crossbar_resources([node], [clusters.DEFAULT_CAPACITY_MBPS * 1e6])
    unvaried = tuple(timeline_arrays(res, None, None))
    return ModelPlan(res, unvaried, unvaried)


class ClusterModel:
    """The fluid model of one cluster's network under one scenario, in this process
    (``window=None``) or in a shared-memory window that every process of a machine maps
    (made there with ``create``, else attached to). ``plan``: the :class:`ModelPlan` made
    elsewhere (then ``cluster`` may be a :class:`~emulator.network.view.ClusterView` or
    None): a rank attaching to a window need not build it again.

    Wall times are the clock of the model (``base=0.0``: a clock of its own, starting at
    0): from :meth:`set_clock` on, scenario time t is at wall time ``epoch + t * dilation /
    time_scale``, and capacities are divided by the dilation (one emulated second lasts
    ``dilation`` wall seconds).
    """

    def __init__(self, cluster, timeline=None, *, window=None, create=True,
                 max_flows=DEFAULT_MAX_FLOWS, base=None, plan=None):
        self.cluster = cluster
        self.timeline = timeline
        if plan is None:
            plan = model_plan(cluster, timeline)
        self.resources = res = plan.resources  # the timelines live on in the fluid model
        self.nodes = res.nodes
        self.index = {n: i for i, n in enumerate(res.nodes)}
        self.fluid = _fluid.Fluid(len(res.nodes), len(res.names), None, None, plan.scenario,
                                  plan.dedicated, max_flows, BUFFER_BITS, window=window,
                                  create=create, base=base, routes=res.routes)

    def set_clock(self, *, epoch, time_scale=1.0, dilation=1.0, dedicated=False, wall=None):
        """Scenario time 0 at wall time ``epoch``; the scenario (or, ``dedicated``, every link
        at its capacity) from now on. True if anything changed."""
        import time

        return self.fluid.set_clock(time.time() if wall is None else wall, epoch, time_scale,
                                    dilation, 1 if dedicated else 0)

    def clock(self):
        """``{"epoch", "time_scale", "dilation", "dedicated", "scenario_seconds_played",
        "scenario_seconds"}`` (the latest scenario time the model reached, and how long the
        scenario lasts)."""
        epoch, scale, dilation, timeline, played, duration = self.fluid.clock()
        return {"epoch": epoch, "time_scale": scale, "dilation": dilation,
                "dedicated": bool(timeline), "scenario_seconds_played": played,
                "scenario_seconds": duration}


def steady_flow(model, node, resource, rate, *, dilation=1.0, wall=None):
    """A flow that never ends on one resource of ``node`` (a name of :class:`Resources`:
    ``("cpu", node)``, ``("up", node)``), taking at most ``rate`` units per emulated second
    (CPU-seconds, bit/s) of what max-min gives it: a local user's CPU share or its LAN
    traffic. Returns ``(slot, gen)``; ``model.fluid.drop(slot, gen)`` ends it."""
    import time

    slot, gen, _ = model.fluid.add(time.time() if wall is None else wall, model.index[node],
                                   model.index[node], 0.0, bound=rate / dilation,
                                   resource=model.resources.index[resource], persistent=True)
    return slot, gen


@dataclass
class Flow:
    """A flow of a model run: ``size_bytes`` from ``src`` to ``dst`` at ``start_seconds``."""

    start_seconds: float
    src: str
    dst: str
    size_bytes: float


def simulate(cluster, flows, *, timeline=None, latency_seconds=None, time_scale=1.0,
             bucket=True):
    """When each flow is delivered (its last byte plus the latency: ``latency_seconds``, or
    by default its path's), in seconds from time 0, by the fluid model in this process.
    ``flows``: ``(start_seconds, src, dst, size_bytes)`` with node names; the scenario's
    time 0 is time 0 (``time_scale`` scenario seconds per second). ``bucket``: each pair's
    token bucket lets its first bytes through at once, as the message path's (and the
    kernel's HTB) do.

    >>> from emulator.network.cluster import crossbar
    >>> simulate(crossbar(2), [(0, "n1", "n2", 12_500_000)], latency_seconds=0.001,
    ...          bucket=False)
    [1.001]
    """
    flows = [Flow(*f) if not isinstance(f, Flow) else f for f in flows]
    model = ClusterModel(cluster, timeline, max_flows=max(1, len(flows)), base=0.0)
    index = model.index
    for f in flows:
        for node in (f.src, f.dst):
            if node not in index:
                raise ValueError(f"{node!r} is not a node of the cluster")
        if not (f.start_seconds >= 0 and f.size_bytes >= 0):
            raise ValueError("flows need start_seconds >= 0 and size_bytes >= 0")
    base = 0.0  # the model's own clock: time 0 is scenario time 0
    model.set_clock(epoch=base, time_scale=time_scale, wall=base)
    order = sorted(range(len(flows)), key=lambda k: (flows[k].start_seconds, k))
    slots = {}
    for k in order:
        f = flows[k]
        slots[k] = model.fluid.add(base + f.start_seconds, index[f.src], index[f.dst],
                                   f.size_bytes * 8.0, bucket=bucket)
    model.fluid.advance(math.inf)
    if latency_seconds is None:
        from .cluster import latencies_from

        rows = {a: dict(zip(index, latencies_from(cluster, a, list(index))))
                for a in {f.src for f in flows}}
    ends = []
    for k in range(len(flows)):
        slot, gen, _ = slots[k]
        view = model.fluid.view(slot, gen, wall=math.inf)
        latency = latency_seconds if latency_seconds is not None else \
            rows[flows[k].src][flows[k].dst]
        ends.append(view["end"] - base + latency)
    return ends


def pattern_seconds(pattern, mapping, pair_mbps, *, port_mbps=None, latency_seconds=None,
                    message_seconds=0.0):
    """Seconds of one iteration of ``pattern`` placed by ``mapping``: the longer of its
    flows and its rounds' waits, which overlap (bytes flow while messages wait).

    Flows: every edge's ``bytes`` go half each way, as two flows starting together, over a
    crossbar whose pairs have ``pair_mbps(u, v)`` and whose ports ``port_mbps(u)`` (default
    unlimited), shared max-min, until the last ends. Waits: the pattern's rounds
    (:func:`pattern_rounds`), messages that wait one after another, each wait a latency,
    ``latency_seconds(u, v)`` one way (default none) averaged over the pattern's edges as
    placed, plus ``message_seconds``, what the message path adds to each message. In the
    model running the skeletons' own messages (``skeletons.simulate``) the NPB patterns'
    class-S times at 0.1 ms fall within 10% of this (BT and SP +25-37%: their flows come
    out long), class A within 1%; the sum of the two would be 20-125% over.

    >>> import networkx as nx
    >>> p = nx.Graph(rounds=4); p.add_edge(0, 1, bytes=2_500_000)
    >>> pattern_seconds(p, {0: "a", 1: "b"}, lambda u, v: 10.0)
    1.0
    >>> pattern_seconds(p, {0: "a", 1: "b"}, lambda u, v: 10.0,
    ...                 latency_seconds=lambda u, v: 0.1, message_seconds=0.001)
    1.0
    >>> round(pattern_seconds(p, {0: "a", 1: "b"}, lambda u, v: 10.0,
    ...                       latency_seconds=lambda u, v: 0.5, message_seconds=0.001), 6)
    2.004
    """
    return max(_bandwidth_seconds(pattern, mapping, pair_mbps, port_mbps),
               _latency_seconds(pattern, mapping, latency_seconds, message_seconds))


def message_costs(cluster, dilation=1.0, path_seconds=SKELETON_MESSAGE_SECONDS):
    """What predictions charge each message on the critical path of a job on ``cluster``
    emulated at ``dilation``: its path's latency and the message path's cost
    (``path_seconds``, wall), in emulated seconds (keyword arguments of
    :func:`pattern_seconds`)."""
    return {"latency_seconds": clusters.latency_function(cluster),
            "message_seconds": path_seconds / dilation}


def pattern_rounds(pattern):
    """Messages per iteration that wait their latency one after another (the graph's
    ``rounds``). A pattern that does not say (a file, a matrix) is taken to send one message
    to each partner per iteration, one after another: its largest degree."""
    rounds = pattern.graph.get("rounds")
    if rounds is not None:
        return float(rounds)
    return float(max((d for _, d in pattern.degree()), default=0))


def _bandwidth_seconds(pattern, mapping, pair_mbps, port_mbps):
    flows = []
    for a, b, nbytes in pattern.edges(data="bytes", default=0):
        u, v = mapping[a], mapping[b]
        for src, dst in ((u, v), (v, u)):
            if nbytes > 0 and src != dst:
                flows.append((src, dst, nbytes * 4.0))  # half the bytes, in bits
    if not flows:
        return 0.0
    index, capacity, paths = {}, [], []

    def resource(name, bps):
        if name not in index:
            index[name] = len(capacity)
            capacity.append(float(bps))
        return index[name]

    for src, dst, _ in flows:
        path = [resource(("pair", src, dst), pair_mbps(src, dst) * 1e6)]
        if port_mbps is not None:
            path += [resource(("up", src), port_mbps(src) * 1e6),
                     resource(("down", dst), port_mbps(dst) * 1e6)]
        paths.append(path)
    if any(not c > 0 for c in capacity):
        return math.inf
    return fluid_seconds(capacity, paths, [bits for _, _, bits in flows])


def _latency_seconds(pattern, mapping, latency_seconds, message_seconds):
    """The rounds' waits: a round a mean placed edge's latency plus the message cost (a
    pattern without edges, whose rounds are collectives: the mean over its ranks' pairs)."""
    rounds = pattern_rounds(pattern)
    if rounds <= 0 or (latency_seconds is None and message_seconds <= 0):
        return 0.0
    pairs = pattern.edges if pattern.number_of_edges() else \
        [(a, b) for a in pattern.nodes for b in pattern.nodes if a < b]
    apart = [(mapping[a], mapping[b]) for a, b in pairs if mapping[a] != mapping[b]]
    if not apart:  # every rank on one node: no network
        return 0.0
    mean = 0.0 if latency_seconds is None else \
        sum(latency_seconds(u, v) for u, v in apart) / len(apart)
    return rounds * (mean + message_seconds)


def fluid_seconds(capacity, paths, sizes):
    """When the last of flows that all start at 0 ends: ``sizes`` over ``paths`` (resource
    indices) of resources of ``capacity``, rates max-min fair and solved again at each end.

    >>> fluid_seconds([100.0], [[0], [0]], [100.0, 200.0])
    3.0
    """
    if not sizes:
        return 0.0
    return max(_fluid.finish_times(capacity, [0] * len(capacity), paths, sizes))


def burst_bytes(rate_mbps, *, mtu_bytes=1514, seconds=0.0002):
    """HTB burst for a rate: what the rate sends in ``seconds`` (0.2 ms), and never less than
    two full frames. Small, so that a short message after an idle spell is paced like on a
    real link of that rate rather than let through at once. The model's token buckets compute
    the same in C; the kernel's HTB classes get it plus an allowance for late timers
    (:func:`emulator.kernel.iproute.htb_burst_bytes`)."""
    return max(2 * mtu_bytes, int(rate_mbps * 1e6 / 8 * seconds))

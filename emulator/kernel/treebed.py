"""The namespace testbed of a tree: racks, uplinks and node ports, each shaped by the kernel.

One namespace per switch holds a bridge (``br0``); one namespace per node holds ``eth0``. A
veth pair joins a node to its switch (``p<i>`` on the switch's bridge) and each pair of
linked switches (``t<k>`` in switch j's namespace faces switch k). Every direction of every
link is one HTB class at the link's capacity on the egress of the end that sends into it: a
node's ``eth0`` (its port up), the switch's ``p<i>`` (its port down), and each trunk end (the
uplink in the direction travelled). How a link direction serves the traffic crossing it is
the ``queue``: ``fair`` (default), round robin among the node pairs that cross it (one HTB
leaf per pair, as a fair-queuing switch port does, so that TCP's congestion control sees a
max-min share); ``fifo``, one drop-tail queue, the short-flow unfairness of TCP included.

The coordinator namespace and the host sit on the host's bridge (the address every proxy
calls back to), joined unshaped to the tree's central switch. All nodes share one IPv4
subnet: the tree is one switched LAN, as a cluster's racks usually are.

The kernel cannot add per-hop latency here: ``netem`` is not in this kernel, so a link's
``latency_ms`` is not emulated (the veths add microseconds). A scenario's change to a link
becomes a ``tc class change`` of that link's two classes to the available bandwidth.
"""

import json

import networkx as nx

from ..errors import UserError
from ..network import cluster as clusters
from . import command, iproute, streams
from .testbed import NS_DEV, STATE_DIR, WIRE_PER_PAYLOAD, Layout, Testbed, state_path

BRIDGE = "br0"
QUEUES = ("fair", "fifo")  # how a link direction serves the pairs crossing it
BACKGROUNDS = ("rates", "real")  # a scenario's streams as class rates, or as TCP streams
HOST_END = "h0"  # the root switch's end of the host's link


def check_tree(cluster, path="<cluster>"):
    """Refuse, in one line, a cluster the tree testbed cannot build: not a tree of switches
    with every node on one switch."""
    if cluster.graph.get("topology") != "tree":
        raise UserError(f"{path}: topology is {cluster.graph.get('topology')!r}, not 'tree' "
                        "(a crossbar testbed takes --nodes and --capacity-mbps)")
    if not nx.is_connected(cluster):
        parts = sorted(sorted(map(str, c))[0] for c in nx.connected_components(cluster))
        raise UserError(f"{path}: the links do not form a tree: not connected "
                        f"({len(parts)} parts, e.g. {parts[0]} and {parts[1]})")
    if not nx.is_tree(cluster):
        cycle = [a for a, _ in nx.find_cycle(cluster)]
        raise UserError(f"{path}: the links do not form a tree: cycle "
                        f"{' - '.join(map(str, cycle + cycle[:1]))}")
    for v, mbps in cluster.nodes(data="fabric_mbps"):
        if mbps is not None:
            raise UserError(f"{path}: switch {v} has a fabric of {mbps:g} Mbit/s (a SimGrid "
                            "backbone): the kernel testbed shapes links, not switch fabrics")
    for a, b, sharing in cluster.edges(data="sharing"):
        if sharing in ("shared", "fatpipe"):
            raise UserError(f"{path}: link {a}-{b} is {sharing.upper()}: the kernel "
                            "testbed's links are full duplex (SPLITDUPLEX)")
    for node in clusters.node_names(cluster):
        others = list(cluster.neighbors(node))
        if len(others) != 1 or cluster.nodes[others[0]].get("kind") == "compute":
            raise UserError(f"{path}: node {node} is not on exactly one switch "
                            f"(linked to {', '.join(map(str, others))})")


class TreeTestbed(Testbed):
    """A :class:`Testbed` whose nodes hang off a tree of switches (see the module)."""

    def __init__(self, layout, cluster, *, queue="fair", background="rates",
                 state_dir=STATE_DIR, run=command.run):
        super().__init__(layout, state_dir=state_dir, run=run)
        if queue not in QUEUES:
            raise UserError(f"queue {queue!r}: use one of {', '.join(QUEUES)}")
        if background not in BACKGROUNDS:
            raise UserError(f"background {background!r}: use one of {', '.join(BACKGROUNDS)}")
        self.cluster, self.queue, self.background = cluster, queue, background
        self.link_index = {frozenset((a, b)): i
                           for i, (a, b, _) in enumerate(clusters.links(cluster))}
        self.pool = None  # the stream agents, once a scenario opens streams
        self.names = clusters.node_names(cluster)
        switches = [n for n in cluster.nodes if n not in set(self.names)]
        self.switch_index = {sw: k for k, sw in enumerate(switches, 1)}
        self.node_index = {n: i for i, n in enumerate(self.names, 1)}
        core = cluster.subgraph(switches)
        self.root = min(nx.center(core), key=self.switch_index.get)
        if len(self.names) + len(switches) + 2 > layout.addresses():
            raise UserError(f"subnet {layout.subnet} has no room for {len(self.names)} nodes, "
                            f"{len(switches)} switch hosts, a coordinator and the bridge")

    @classmethod
    def for_cluster(cls, name, cluster, *, path="<cluster>", subnet=None, queue="fair",
                    background="rates", state_dir=STATE_DIR, run=command.run):
        check_tree(cluster, path)
        n = len(clusters.node_names(cluster))
        layout = Layout(name, n) if subnet is None else Layout(name, n, subnet)
        return cls(layout, cluster, queue=queue, background=background, state_dir=state_dir,
                   run=run)

    def switch_namespace(self, switch):
        return f"{self.layout.name}-s{self.switch_index[switch]}"

    def background_namespace(self, switch):
        """The namespace of ``switch``'s background host (``--background real``)."""
        return f"{self.layout.name}-b{self.switch_index[switch]}"

    def address_of(self, x):
        """A node's address, or a switch's background host's (host N + k of the subnet)."""
        if x in self.node_index:
            return self.layout.ip(self.host(x))
        return self.layout.host_ip(len(self.names) + self.switch_index[x])

    def namespace_of(self, x):
        """Where traffic from ``x`` starts: a node's namespace, a switch's background host."""
        if x in self.node_index:
            return self.layout.namespace(self.host(x))
        return self.background_namespace(x)

    def host(self, node):
        """The testbed host (``n<i>``) that emulates cluster node ``node``."""
        return f"n{self.node_index[node]}"

    def end(self, x, y):
        """``(namespace, device)`` whose egress carries link x -> y."""
        if x in self.node_index:
            return self.layout.namespace(self.host(x)), NS_DEV
        if y in self.node_index:
            return self.switch_namespace(x), f"p{self.node_index[y]}"
        return self.switch_namespace(x), f"t{self.switch_index[y]}"

    def crossing(self):
        """``{(x, y): [(u, v), ...]}``: the ordered node pairs whose path crosses x -> y."""
        out = {}
        for u in self.names:
            paths = nx.single_source_shortest_path(self.cluster, u)
            for v in self.names:
                if v != u:
                    for x, y in zip(paths[v], paths[v][1:]):
                        out.setdefault((x, y), []).append((u, v))
        return out

    # -- up --------------------------------------------------------------------------------

    def up(self, *, out_dir=None, rate_scale=1.0):
        """Create switches, trunks, nodes and their shaping, every link at its capacity times
        ``rate_scale`` (1/K under dilation K). Returns the paths of the hostfile and launcher
        (as :meth:`Testbed.up`)."""
        L, G = self.layout, self.cluster
        fastest = max(d["capacity_mbps"] for _, _, d in G.edges(data=True)) * rate_scale
        self._begin(fastest, out_dir, rate_scale=rate_scale, topology="tree", queue=self.queue,
                    background=self.background, cluster=clusters.to_json(G))
        self._crossing = self.crossing()
        try:
            self._make_hosts(["c"], fastest)  # the bridge and the coordinator's namespace
            for switch in self.switch_index:
                ns = self.switch_namespace(switch)
                self._make("netns", ns, iproute.add_namespace(ns))
                self._steps(iproute.add_switch(ns, BRIDGE))
            for a, b, d in G.edges(data=True):
                if a in self.node_index or b in self.node_index:
                    continue
                (ns_a, end_a), (ns_b, end_b) = self.end(a, b), self.end(b, a)
                self._steps(iproute.add_trunk(ns_a, end_a, ns_b, end_b, d["capacity_mbps"]))
                self._link_up(a, b, d["capacity_mbps"])
            if self.background == "real":
                for switch in self.switch_index:
                    ns, sw_ns = self.background_namespace(switch), self.switch_namespace(switch)
                    self._make("netns", ns, iproute.add_namespace(ns))
                    self._steps(iproute.add_trunk(sw_ns, "b0", ns, NS_DEV, fastest))
                    self._steps(iproute.attach(sw_ns, "b0", BRIDGE))
                    self._steps(iproute.configure_namespace(
                        ns, NS_DEV, f"{self.address_of(switch)}/{L.prefixlen()}", L.gateway,
                        fastest))
            host_end = f"{L.name}-h"
            self._make("link", host_end, iproute.add_trunk(
                None, host_end, self.switch_namespace(self.root), HOST_END, fastest))
            self._steps(iproute.attach(None, host_end, L.bridge))
            self._steps(iproute.attach(self.switch_namespace(self.root), HOST_END, BRIDGE))
            for node in self.names:
                host, (switch,) = self.host(node), G.neighbors(node)
                ns, capacity = L.namespace(host), G.edges[node, switch]["capacity_mbps"]
                sw_ns, port = self.end(switch, node)
                self._make("netns", ns, iproute.add_namespace(ns))
                self._steps(iproute.add_trunk(sw_ns, port, ns, NS_DEV, capacity))
                self._steps(iproute.configure_namespace(ns, NS_DEV, L.address(host), L.gateway,
                                                        capacity))
                self._link_up(switch, node, capacity)
            files = self._write_files(out_dir) if out_dir else {}
        except BaseException:
            self.down()
            raise
        return files

    def _link_up(self, a, b, capacity_mbps):
        """Both ends of link a-b on their switches' bridges (a node's end is its own ``eth0``,
        on no bridge), each shaped at the link's capacity for what it sends."""
        for x, y in ((a, b), (b, a)):
            ns, end = self.end(x, y)
            if x not in self.node_index:
                self._steps(iproute.attach(ns, end, BRIDGE))
            rate = capacity_mbps * self.rate_scale * WIRE_PER_PAYLOAD
            if self.queue == "fifo":
                self._steps(iproute.add_port_limit(ns, end, rate))
                continue
            pairs = [(u, v) for u, v in self._crossing.get((x, y), [])]
            leaves = [(self.address_of(u), self.address_of(v)) for u, v in pairs]
            if self.background == "real":  # a leaf per stream the link may carry
                link, direction = self.link_direction(x, y)
                leaves += [(self.address_of(x), self.address_of(y),
                            streams.stream_port(link, direction, slot))
                           for slot in range(streams.SLOTS_PER_DIRECTION)]
            self._steps(iproute.add_fair_link(ns, end, rate, [(2 + k, *leaf) for k, leaf
                                                                in enumerate(leaves)]))

    # -- changes ---------------------------------------------------------------------------

    def set_link(self, a, b, rate_mbps):
        """Both directions of link a-b at ``rate_mbps`` (capped at the link's capacity)."""
        if not self.cluster.has_edge(a, b):
            raise UserError(f"{a}-{b} is not a link of the testbed's tree")
        rate = min(float(rate_mbps), self.cluster.edges[a, b]["capacity_mbps"])
        if self.rate_scale is None:
            with open(self.path) as f:
                self.rate_scale = json.load(f).get("rate_scale", 1.0)
        for x, y in ((a, b), (b, a)):
            ns, dev = self.end(x, y)
            self._steps(iproute.change_port_rate(ns, dev,
                                                 rate * self.rate_scale * WIRE_PER_PAYLOAD))

    def link_direction(self, x, y):
        """The link x-y's number (in :func:`clusters.links`) and direction (0: as listed)."""
        link = self.link_index[frozenset((x, y))]
        return link, 0 if clusters.links(self.cluster)[link][0] == x else 1

    def set_streams(self, a, b, count):
        """``count`` real TCP streams each way on link a-b (``--background real``)."""
        if not self.cluster.has_edge(a, b):
            raise UserError(f"{a}-{b} is not a link of the testbed's tree")
        if count > streams.SLOTS_PER_DIRECTION:
            raise UserError(f"{count} streams on {a}-{b}: the testbed carries at most "
                            f"{streams.SLOTS_PER_DIRECTION} per link direction")
        if self.pool is None:
            self.pool = streams.StreamPool()
        for x, y in ((a, b), (b, a)):
            link, direction = self.link_direction(x, y)
            self.pool.set_count(link, direction, int(count), self.namespace_of(x),
                                self.namespace_of(y), self.address_of(y))

    def start_streams(self):
        """Start a stream agent in every node and background host (``--background real``)."""
        if self.pool is None:
            self.pool = streams.StreamPool()
        self.pool.start([self.namespace_of(x) for x in self.cluster.nodes])

    def stop_streams(self):
        if self.pool is not None:
            self.pool.close()

    def down(self):
        self.stop_streams()
        return super().down()

    def set_pair(self, a, b, rate_mbps):
        raise UserError("a tree testbed shapes links, not pairs: change a link "
                        "(set_link) or play a scenario of the tree")


def open_testbed(name, state_dir=STATE_DIR, *, run=command.run):
    """The testbed ``name`` that is up (a :class:`Testbed` or a :class:`TreeTestbed`), and
    its state."""
    try:
        with open(state_path(name, state_dir)) as f:
            state = json.load(f)
    except FileNotFoundError:
        raise UserError(f"no testbed named {name!r} is up (no {state_path(name, state_dir)})") \
            from None
    except ValueError:
        raise UserError(f"testbed state {state_path(name, state_dir)} is unreadable") from None
    layout = Layout(name, state["nodes"], state["subnet"])
    if state.get("machines"):
        raise UserError(f"testbed {name!r} is fake machines, not shaped by tc: nothing to "
                        "play or shape there")
    if state.get("cluster"):
        cluster = nx.node_link_graph(state["cluster"], edges="links")
        return TreeTestbed(layout, cluster, queue=state.get("queue", "fair"),
                           background=state.get("background", "rates"), state_dir=state_dir,
                           run=run), state
    return Testbed(layout, state_dir=state_dir, run=run), state


def open_testbed_of(info):
    """The testbed of :func:`emulator.kernel.testbed.shaping_info`'s ``info``."""
    return open_testbed(info["name"], info["state_dir"])[0]

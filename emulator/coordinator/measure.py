"""Network measurement, the Network Weather Service role.

Every pair of nodes is probed once per measurement, and no node is in two probes at once:
the pairs are taken in the order of the circle method's rounds of disjoint pairs, but
without rounds: a pair starts as soon as both its nodes are free (:class:`ProbeQueue`), so
fast links' probes do not wait for the slowest of a round. Probes are timed at the
receiver. Each measurement feeds the pair's forecasters
(:mod:`emulator.coordinator.forecast`), and the status graph carries the winning forecast as
``bandwidth_mbps`` with its error, the last measurement and, in emulation, the scenario's
true bandwidth at probe time.
"""

import time

import networkx as nx

from .forecast import PairForecasts

DEFAULT_PROBE_BYTES = 1 << 20  # 84 ms at 100 Mbit/s: start-up costs stay small
DEFAULT_REPETITIONS = 1


def round_robin_pairs(nodes):
    """Rounds of disjoint pairs covering every pair once (the circle method): N-1 rounds for
    even N, N rounds for odd N.

    >>> round_robin_pairs(["a", "b", "c", "d"])
    [[('a', 'd'), ('b', 'c')], [('a', 'c'), ('d', 'b')], [('a', 'b'), ('c', 'd')]]
    """
    items = list(nodes) + ([None] if len(nodes) % 2 else [])
    n = len(items)
    rounds = []
    for _ in range(n - 1):
        pairs = [(items[i], items[n - 1 - i]) for i in range(n // 2)]
        rounds.append([p for p in pairs if None not in p])
        items = [items[0], items[-1]] + items[1:-1]
    return rounds


class ProbeQueue:
    """The pairs still to probe, handed out as their nodes come free.

    Pairs are taken in the circle method's order, and whenever nodes come free, each waiting
    pair of theirs (first first) starts if its other node is free too. With links of mixed
    speeds this ends sooner than rounds (rounds wait for their slowest probe: about 30%
    sooner on 64 nodes of 20-100 Mbit/s); with equal probes, about as soon. :meth:`ready`
    returns the pairs that can start now; :meth:`done` frees a finished pair's nodes.

    >>> q = ProbeQueue(["a", "b", "c", "d"])
    >>> q.ready()
    [('a', 'd'), ('b', 'c')]
    >>> q.done(('b', 'c')); q.ready()  # b and c have probed each other; a and d are busy
    []
    >>> q.done(('a', 'd')); q.ready()
    [('a', 'c'), ('d', 'b')]
    """

    def __init__(self, nodes):
        self.order = [p for pairs in round_robin_pairs(list(nodes)) for p in pairs]
        self.waiting = {n: [] for n in nodes}  # node -> indices of its waiting pairs, in order
        for i, (a, b) in enumerate(self.order):
            self.waiting[a].append(i)
            self.waiting[b].append(i)
        self.left = set(range(len(self.order)))
        self.busy = set()
        self.free = set(nodes)  # nodes that came free: their waiting pairs are looked at

    def ready(self):
        started = []
        for i in sorted({i for n in self.free for i in self.waiting[n]}):
            a, b = self.order[i]
            if i in self.left and a not in self.busy and b not in self.busy:
                self.left.discard(i)
                self.busy.update((a, b))
                started.append((a, b))
        for n in self.free:
            self.waiting[n] = [i for i in self.waiting[n] if i in self.left]
        self.free = set()
        return started

    def done(self, pair):
        self.busy.difference_update(pair)
        self.free.update(pair)

    def __len__(self):
        """Pairs not yet started."""
        return len(self.left)


class Monitor:
    """Measures a cluster through a coordinator and keeps per-pair forecasts."""

    def __init__(self, coordinator, *, size_bytes=DEFAULT_PROBE_BYTES,
                 repetitions=DEFAULT_REPETITIONS, nodes=None):
        if size_bytes < 1024 or repetitions < 1:
            raise ValueError("probes need at least 1 KiB and one repetition")
        self.coordinator = coordinator
        self.size_bytes, self.repetitions = size_bytes, repetitions
        self.nodes = list(nodes or coordinator.names)
        self.forecasts = PairForecasts()
        self.last = {}  # pair -> (measured, true at probe time)
        self.probes = []  # (a, b, measured, true) of the last measurement, in finishing order
        self.graph = None
        self.seconds = 0.0
        self.epoch = None

    def measure(self, progress=None, *, epoch=None):
        """Probe every pair once more; returns the new status graph. ``progress(done,
        total)`` is called as pairs finish.

        ``epoch`` runs the probes on that scenario clock (see ``Coordinator.clock``).
        """
        start = time.time()
        self.epoch, self.probes = epoch, []
        queue = ProbeQueue(self.nodes)
        total, finished = len(queue), 0
        running = {}  # job -> (pair, scenario time at its start)
        emulated = self.coordinator.settings.shaping != "external"
        while len(queue) or running:
            for pair in queue.ready():
                t = self.coordinator.scenario_time(epoch)
                handle = self.coordinator.submit(list(pair), "probe", size_bytes=self.size_bytes,
                                                 repetitions=self.repetitions, epoch=epoch)
                running[handle["job"]] = (pair, t, handle)
            for handle, results in self.coordinator.wait_any([h for _, _, h in running.values()]):
                pair, t, _ = running.pop(handle["job"])
                rates = results[pair[1]]["result"]
                measured = sum(rates) / len(rates)
                self._record(*pair, measured,
                             self.coordinator.true_pair_mbps(*pair, t) if emulated else None)
                queue.done(pair)
                finished += 1
                if progress:
                    progress(finished, total)
        self.seconds = self.coordinator.emulated_seconds(time.time() - start)
        self.graph = self.status_graph()
        return self.graph

    def _record(self, a, b, measured, true):
        self.forecasts.update(a, b, measured)
        self.last[frozenset((a, b))] = (measured, true)
        self.probes.append((a, b, measured, true))

    def replay(self, probes, seconds, *, epoch=None):
        """Take an earlier measurement's ``probes`` (its :attr:`probes`) as if measured now:
        the forecasts and the status graph become what they were after it."""
        self.epoch, self.probes = epoch, []
        for a, b, measured, true in probes:
            self._record(a, b, float(measured), None if true is None else float(true))
        self.seconds = float(seconds)
        self.graph = self.status_graph()
        return self.graph

    def status_graph(self):
        cluster = self.coordinator.settings.cluster
        graph = nx.Graph(timestamp=time.time(),
                         scenario_seconds=self.coordinator.scenario_time(self.epoch),
                         measurement_seconds=self.seconds)
        for n in self.nodes:
            graph.add_node(n, kind="compute", capacity_mbps=cluster.nodes[n]["capacity_mbps"])
        for pair, (measured, true) in self.last.items():
            if not pair <= set(self.nodes):
                continue  # a node no longer measured (down)
            a, b = sorted(pair, key=self.nodes.index)
            value, error, predictor = self.forecasts.forecast(a, b)
            graph.add_edge(a, b, bandwidth_mbps=round(value, 3), measured_mbps=round(measured, 3),
                           forecast_error_mbps=None if error is None else round(error, 3),
                           predictor=predictor)
            if true is not None:  # in emulation: the scenario's value at probe time
                graph[a][b]["true_bandwidth_mbps"] = true
        return graph


def error_table(graph):
    """Per-pair error of the status graph against the true bandwidths, in percent."""
    return {(a, b): abs(d["bandwidth_mbps"] / d["true_bandwidth_mbps"] - 1) * 100
            for a, b, d in graph.edges(data=True) if "true_bandwidth_mbps" in d}


def matrix_lines(graph, nodes, key="bandwidth_mbps"):
    """The bandwidth matrix as text lines (Mbit/s)."""
    lines = ["[Mbit/s] " + "".join(f"{n:>8}" for n in nodes)]
    for a in nodes:
        cells = []
        for b in nodes:
            cells.append(f"{'-':>8}" if a == b or not graph.has_edge(a, b)
                         else f"{graph[a][b][key]:>8.1f}")
        lines.append(f"{a:<9}" + "".join(cells))
    return lines

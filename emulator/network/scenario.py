"""Bandwidth scenarios: how the available bandwidth of each link changes over time.

Every scenario becomes a :class:`Timeline`: the links, each link's bandwidth at time 0, and
a time-ordered list of changes. Three kinds of input give a timeline:

``streams`` (the default; Goteti and Subhlok §3.3)
    Every link is shared by S other streams and gets ``capacity / (S + 1)``. Every
    ``interval_seconds`` one stream enters or leaves a random link. Bandwidth stays within
    ``[floor_mbps, capacity]``: a link has at most ``floor(capacity/floor) - 1`` streams (a
    stream cannot enter a full link; it leaves instead), and an idle link gains one. The
    initial S of every link is uniform in ``0..initial_max_streams``. The model is seeded.
    The timeline keeps each link's S beside its bandwidth (``streams``): the shared network
    model (:mod:`emulator.network.sharing`) makes them background flows on the link.
``static``
    A node-link JSON graph whose edges carry ``bandwidth_mbps`` (the network status graph
    format): one bandwidth per pair, for ever.
``trace``
    A CSV file with the header ``time_seconds,a,b,bandwidth_mbps``: from that time on, link
    a-b has that bandwidth.

Times are scenario seconds. A run with ``time_scale = k`` plays the scenario k times faster
than the wall clock, so a 30 s interval passes in 30/k s.
"""

import bisect
import math
import os
import random
from dataclasses import dataclass, field

from ..errors import InputFileError
from ..files import read_input_csv, write_json_atomic
from . import cluster as clusters

DEFAULT_INTERVAL_SECONDS = 30.0
DEFAULT_FLOOR_MBPS = 10.0
DEFAULT_INITIAL_MAX_STREAMS = 4
FORMAT_VERSION = 1


@dataclass
class Timeline:
    """Links ``(a, b, capacity_mbps)``, their bandwidth at time 0, and the changes after.

    ``streams``, for a stream-model timeline: the competing streams of each link at time 0
    and after each event (``(initial, per event)``); None where only bandwidths are known."""

    links: list
    initial_mbps: list
    events: list = field(default_factory=list)  # (time_seconds, link index, bandwidth_mbps)
    meta: dict = field(default_factory=dict)
    streams: tuple = None

    def __post_init__(self):
        self._index = {frozenset((a, b)): i for i, (a, b, _) in enumerate(self.links)}
        self._times = [[0.0] for _ in self.links]
        self._values = [[bw] for bw in self.initial_mbps]
        for t, i, bw in self.events:
            self._times[i].append(t)
            self._values[i].append(bw)

    def link_index(self, a, b):
        return self._index[frozenset((a, b))]

    def bandwidth_mbps(self, link, t):
        """Bandwidth of link ``link`` (index) at scenario time ``t``."""
        k = bisect.bisect_right(self._times[link], t) - 1
        return self._values[link][max(k, 0)]

    def next_change(self, link, t):
        """Scenario time of the first change of ``link`` after ``t`` (``inf`` if none)."""
        times = self._times[link]
        k = bisect.bisect_right(times, t)
        return times[k] if k < len(times) else math.inf

    def duration_seconds(self):
        return self.meta.get("duration_seconds", self.events[-1][0] if self.events else 0.0)

    def to_json(self):
        events = [{"t": t, "link": i, "bandwidth_mbps": bw} for t, i, bw in self.events]
        out = {"format": "nodesel-timeline", "version": FORMAT_VERSION, **self.meta,
               "links": [{"a": a, "b": b, "capacity_mbps": c} for a, b, c in self.links],
               "initial_mbps": self.initial_mbps, "events": events}
        if self.streams is not None:
            out["initial_streams"] = list(self.streams[0])
            for e, s in zip(events, self.streams[1]):
                e["streams"] = s
        return out

    def write(self, path):
        write_json_atomic(path, self.to_json())

    def check_against(self, cluster, path="<scenario>"):
        """Every link must exist in the cluster (by its two end names)."""
        known = {frozenset((a, b)) for a, b, _ in clusters.links(cluster)}
        for a, b, _ in self.links:
            if frozenset((a, b)) not in known:
                raise InputFileError(path, f"link {a}-{b}", "not a link of the cluster")


def _stream_bandwidth(capacity, streams):
    return capacity / (streams + 1)


def generate_streams(cluster, *, seed, duration_seconds,
                     interval_seconds=DEFAULT_INTERVAL_SECONDS, floor_mbps=DEFAULT_FLOOR_MBPS,
                     initial_max_streams=DEFAULT_INITIAL_MAX_STREAMS):
    """Goteti and Subhlok's stream model on the links of ``cluster``, as a timeline.

    Examples
    --------
    >>> from emulator.network.cluster import crossbar
    >>> t = generate_streams(crossbar(4), seed=1, duration_seconds=300)
    >>> len(t.events), all(10 <= e[2] <= 100 for e in t.events)
    (10, True)
    """
    if duration_seconds < 0 or interval_seconds <= 0 or floor_mbps <= 0 or initial_max_streams < 0:
        raise ValueError("duration must be >= 0, interval and floor positive, initial streams >= 0")
    rng = random.Random(seed)
    link_list = clusters.links(cluster)
    # S streams leave capacity / (S + 1), never below the floor
    max_streams = [max(0, math.floor(cap / floor_mbps + 1e-9) - 1) for _, _, cap in link_list]
    streams = [min(rng.randint(0, initial_max_streams), mx) for mx in max_streams]
    initial = [_stream_bandwidth(cap, s) for (_, _, cap), s in zip(link_list, streams)]
    initial_streams, event_streams = list(streams), []
    events = []
    steps = int(duration_seconds // interval_seconds)
    for step in range(1, steps + 1):
        i = rng.randrange(len(link_list))
        enter = rng.random() < 0.5
        if streams[i] == 0:
            enter = True
        elif streams[i] >= max_streams[i]:
            enter = False
        if max_streams[i] == 0:
            continue
        streams[i] += 1 if enter else -1
        events.append((step * interval_seconds, i, _stream_bandwidth(link_list[i][2], streams[i])))
        event_streams.append(streams[i])
    meta = {"kind": "streams", "seed": seed, "duration_seconds": float(duration_seconds),
            "interval_seconds": float(interval_seconds), "floor_mbps": float(floor_mbps),
            "initial_max_streams": initial_max_streams}
    return Timeline([tuple(l) for l in link_list], initial, events, meta,
                    (initial_streams, event_streams))


def static_timeline(network, cluster=None, path="<static>"):
    """A constant timeline from a node-link graph with ``bandwidth_mbps`` on its edges."""
    link_list, initial = [], []
    for a, b, d in network.edges(data=True):
        cap = d.get("capacity_mbps", d["bandwidth_mbps"])
        link_list.append((a, b, float(cap)))
        initial.append(float(d["bandwidth_mbps"]))
    timeline = Timeline(link_list, initial, [], {"kind": "static"})
    if cluster is not None:
        _complete(timeline, cluster, path)
    return timeline


def _complete(timeline, cluster, path):
    """Check a static or trace timeline against the cluster; add missing links at capacity."""
    timeline.check_against(cluster, path)
    have = {frozenset((a, b)) for a, b, _ in timeline.links}
    for a, b, cap in clusters.links(cluster):
        if frozenset((a, b)) not in have:
            timeline.links.append((a, b, cap))
            timeline.initial_mbps.append(cap)
    timeline.__post_init__()


def read_trace(path, cluster):
    """A timeline from a CSV trace ``time_seconds,a,b,bandwidth_mbps``; links start at their
    capacity until their first row."""
    link_list = clusters.links(cluster)
    index = {frozenset((a, b)): i for i, (a, b, _) in enumerate(link_list)}
    initial = [cap for _, _, cap in link_list]
    events = []
    rows = read_input_csv(path, "scenario trace")
    header = rows[0][1] if rows else None
    want = ["time_seconds", "a", "b", "bandwidth_mbps"]
    if header is None or [h.strip() for h in header] != want:
        raise InputFileError(path, "line 1", f"header must be {','.join(want)}, got {header}")
    last_t = -math.inf
    for lineno, row in rows[1:]:
        if not row:
            continue
        where = f"line {lineno}"
        if len(row) != 4:
            raise InputFileError(path, where, f"expected 4 fields, got {len(row)}")
        try:
            t, bw = float(row[0]), float(row[3])
        except ValueError:
            raise InputFileError(path, where,
                                 "time_seconds and bandwidth_mbps must be numbers") from None
        a, b = row[1].strip(), row[2].strip()
        key = frozenset((a, b))
        if key not in index:
            raise InputFileError(path, where, f"{a}-{b} is not a link of the cluster")
        if not (math.isfinite(t) and t >= 0):
            raise InputFileError(path, where, f"time_seconds must be >= 0, got {row[0]}")
        if t < last_t:
            raise InputFileError(path, where, "times must not decrease")
        if not (math.isfinite(bw) and bw > 0):
            raise InputFileError(path, where, f"bandwidth_mbps must be positive, got {row[3]}")
        cap = link_list[index[key]][2]
        if bw > cap:
            raise InputFileError(path, where, f"bandwidth {bw} exceeds the link capacity {cap}")
        last_t = t
        if t == 0:
            initial[index[key]] = bw
        else:
            events.append((t, index[key], bw))
    return Timeline([tuple(l) for l in link_list], initial, events,
                    {"kind": "trace", "source": os.path.basename(path)})


def timeline_from_json(data, path="<timeline>"):
    if data.get("format") != "nodesel-timeline":
        raise InputFileError(path, "format", "not a nodesel timeline")
    try:
        link_list = [(l["a"], l["b"], float(l["capacity_mbps"])) for l in data["links"]]
        initial = [float(x) for x in data["initial_mbps"]]
        events = [(float(e["t"]), int(e["link"]), float(e["bandwidth_mbps"]))
                  for e in data["events"]]
    except (KeyError, TypeError, ValueError, OverflowError) as e:  # OverflowError: int(1e999)
        raise InputFileError(path, "links/events", f"malformed timeline: {e!r}") from None
    if len(initial) != len(link_list):
        raise InputFileError(path, "initial_mbps", "needs one value per link")
    for k, (t, i, bw) in enumerate(events):
        if not 0 <= i < len(link_list):
            raise InputFileError(path, f"events[{k}]", f"link index {i} out of range")
        if not (math.isfinite(t) and t >= 0):
            raise InputFileError(path, f"events[{k}]", f"t must be a number >= 0, got {t}")
        if not (math.isfinite(bw) and bw > 0):
            raise InputFileError(path, f"events[{k}]", f"bandwidth must be positive, got {bw}")
        if k and t < events[k - 1][0]:
            raise InputFileError(path, f"events[{k}]", "times must not decrease")
    for i, bw in enumerate(initial):
        if not (math.isfinite(bw) and bw > 0):
            raise InputFileError(path, f"initial_mbps[{i}]",
                                 f"bandwidth must be positive, got {bw}")
    meta = {k: v for k, v in data.items()
            if k not in ("format", "version", "links", "initial_mbps", "events",
                         "initial_streams")}
    streams = None
    if "initial_streams" in data:
        try:
            streams = ([int(s) for s in data["initial_streams"]],
                       [int(e["streams"]) for e in data["events"]])
        except (KeyError, TypeError, ValueError, OverflowError) as e:
            raise InputFileError(path, "initial_streams/events", f"malformed streams: {e!r}") \
                from None
        if len(streams[0]) != len(link_list) or min(streams[0] + streams[1], default=0) < 0:
            raise InputFileError(path, "initial_streams", "needs one count >= 0 per link")
    return Timeline(link_list, initial, events, meta, streams)


def load_scenario(path, cluster):
    """Read any scenario file (timeline JSON, static node-link JSON or CSV trace)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputFileError(path, "", "no such file")
    if path.endswith(".csv"):
        timeline = read_trace(path, cluster)
    else:
        from .netgraph import graph_from_node_link, load_json

        data = load_json(path)
        if isinstance(data, dict) and data.get("format") == "nodesel-timeline":
            timeline = timeline_from_json(data, path)
            timeline.check_against(cluster, path)
        elif isinstance(data, dict) and "nodes" in data:
            network = graph_from_node_link(data, path)
            for a, b, d in network.edges(data=True):
                if d["bandwidth_mbps"] <= 0:
                    raise InputFileError(path, f"edge {a}-{b}", "bandwidth_mbps must be positive")
            timeline = static_timeline(network, cluster, path)
        else:
            raise InputFileError(path, "top level",
                                 "expected a nodesel timeline or a node-link graph")
    return timeline


def full_capacity_timeline(cluster):
    """Every link at its full capacity, for ever: the dedicated network."""
    link_list = [tuple(l) for l in clusters.links(cluster)]
    return Timeline(link_list, [cap for _, _, cap in link_list], [], {"kind": "dedicated"})


def default_timeline(cluster, *, seed=1, duration_seconds=3600.0):
    return generate_streams(cluster, seed=seed, duration_seconds=duration_seconds)


def pair_bandwidth_function(cluster, timeline):
    """``f(a, b, t)``: available bandwidth between nodes a and b at scenario time t, the
    minimum over the links on their path (and the switch fabrics and FATPIPE links there,
    which no scenario varies)."""
    paths = clusters.pair_path_links(cluster)
    index = {frozenset((a, b)): i for i, (a, b, _) in enumerate(timeline.links)}
    cluster_links = clusters.links(cluster)
    pair_links = {pair: [index[frozenset(cluster_links[i][:2])] for i in link_ids]
                  for pair, link_ids in paths.items()}
    fixed = clusters.pair_fixed_mbps(cluster)

    def bandwidth(a, b, t):
        return min([timeline.bandwidth_mbps(i, t) for i in pair_links[(a, b)]] +
                   [fixed.get((a, b), math.inf)])

    def next_change(a, b, t):
        return min([timeline.next_change(i, t) for i in pair_links[(a, b)]] + [math.inf])

    bandwidth.next_change = next_change
    bandwidth.timeline = timeline
    return bandwidth

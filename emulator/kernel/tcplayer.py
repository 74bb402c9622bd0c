"""Play a bandwidth scenario into the kernel: ``tc class change`` as scenario time passes.

On a crossbar, :class:`ScenarioPlayer` knows, for every ordered pair of nodes, the available
bandwidth at any scenario time (:func:`emulator.network.scenario.pair_bandwidth_function`) and
drives one HTB class per pair. On a tree, :class:`LinkPlayer` drives the link a change belongs
to (a node's port or a switch-to-switch trunk, both directions). ``apply(t)`` sets everything
to its bandwidth at time t; ``play`` then applies each change when its time comes, only where
something changes. ``plan_scripts`` writes the crossbar's plan as one script per host of a
real cluster, for an administrator to run.
"""

import bisect
import shlex
import time

from ..errors import UserError
from ..network.scenario import pair_bandwidth_function
from . import iproute


class _Player:
    """What both players share: a setter ``set(a, b, rate_mbps)`` driven from a timeline;
    subclasses say what exists (``rates_at``) and what the dedicated network is."""

    def __init__(self, timeline, setter):
        self.timeline = timeline
        self.setter = setter
        self.times = sorted({t for t, _, _ in timeline.events})  # when anything changes
        self.current = {}

    def apply(self, t):
        """Bring everything to its bandwidth at scenario time ``t``; returns the number of
        ``tc class change`` commands run."""
        return self.apply_rates(self.rates_at(t))

    def apply_rates(self, rates):
        """Bring the keys of ``rates`` ({(a, b): Mbit/s}) there, changing only what differs."""
        count = 0
        for (a, b), rate in rates.items():
            if self.current.get((a, b)) != rate:
                self.setter(a, b, rate)
                self.current[(a, b)] = rate
                count += 1
        return count

    def event_times(self, start, end):
        """Change times in (start, end]."""
        return self.times[bisect.bisect_right(self.times, start):
                          bisect.bisect_right(self.times, end)]

    def next_event(self, t):
        """The first change time after ``t``, or None."""
        k = bisect.bisect_right(self.times, t)
        return self.times[k] if k < len(self.times) else None

    def play(self, *, start=0.0, end=None, time_scale=1.0, epoch=None, sleep=time.sleep,
             clock=time.time, progress=None):
        """Apply the state at ``start``, then every change up to ``end`` at its wall time
        (``epoch`` + scenario seconds / ``time_scale``)."""
        end = self.timeline.duration_seconds() if end is None else end
        epoch = clock() - start / time_scale if epoch is None else epoch
        self.apply(start)
        for t in self.event_times(start, end):
            delay = epoch + t / time_scale - clock()
            if delay > 0:
                sleep(delay)
            n = self.apply(t)
            if progress:
                progress(t, n)


class ScenarioPlayer(_Player):
    """Drives ``set_pair(a, b, rate_mbps)`` (e.g. :meth:`Testbed.set_pair`) for every ordered
    pair of ``nodes`` (a crossbar)."""

    def __init__(self, cluster, timeline, set_pair, nodes):
        super().__init__(timeline, set_pair)
        self.pair = pair_bandwidth_function(cluster, timeline)
        self.nodes = list(nodes)
        self.capacity_mbps = {n: cluster.nodes[n]["capacity_mbps"] for n in self.nodes}

    def rates_at(self, t):
        return {(a, b): self.pair(a, b, t) for a in self.nodes for b in self.nodes if a != b}

    def dedicated_rates(self):
        return {(a, b): min(self.capacity_mbps[a], self.capacity_mbps[b])
                for a in self.nodes for b in self.nodes if a != b}


class LinkPlayer(_Player):
    """Drives ``set_link(a, b, rate_mbps)`` (e.g. :meth:`TreeTestbed.set_link`, both
    directions of link a-b) for every link of a tree's timeline."""

    def rates_at(self, t):
        return {(a, b): self.timeline.bandwidth_mbps(i, t)
                for i, (a, b, _) in enumerate(self.timeline.links)}

    def dedicated_rates(self):
        return {(a, b): float(cap) for a, b, cap in self.timeline.links}


class StreamPlayer(_Player):
    """Drives ``set_streams(a, b, count)`` (:meth:`TreeTestbed.set_streams`): the stream
    model's streams of every link, as real TCP streams."""

    def __init__(self, timeline, set_streams):
        if timeline.streams is None:
            raise UserError("real background streams need a stream-model scenario (one that "
                            "counts each link's streams, as 'nodesel scenario generate' writes)")
        super().__init__(timeline, set_streams)
        initial, per_event = timeline.streams
        self.counts = [([0.0], [int(c)]) for c in initial]
        for (t, link, _), count in zip(timeline.events, per_event):
            self.counts[link][0].append(t)
            self.counts[link][1].append(int(count))

    def rates_at(self, t):
        """The number of streams on each link at ``t`` (the player's values)."""
        out = {}
        for (a, b, _), (times, counts) in zip(self.timeline.links, self.counts):
            out[(a, b)] = counts[max(bisect.bisect_right(times, t) - 1, 0)]
        return out

    def dedicated_rates(self):
        return {(a, b): 0 for a, b, _ in self.timeline.links}


def player_for(cluster, timeline, testbed):
    """The player of ``timeline`` on ``testbed``: per link on a tree (class rates, or real
    streams with ``--background real``), per pair otherwise."""
    from ..network import cluster as clusters

    if getattr(testbed, "background", "rates") == "real":
        return StreamPlayer(timeline, testbed.set_streams)
    if cluster.graph.get("topology") == "tree":
        return LinkPlayer(timeline, testbed.set_link)
    return ScenarioPlayer(cluster, timeline, testbed.set_pair, clusters.node_names(cluster))


def plan_scripts(cluster, timeline, addresses, *, interface="eth0", time_scale=1.0,
                 end=None):
    """One POSIX shell script per host: ``up`` installs HTB shaping toward every other host,
    ``play`` applies the scenario's changes at their times, ``down`` removes the qdisc.

    ``addresses`` maps node name -> IPv4 address (validated); every argument is quoted.
    """
    nodes = list(addresses)
    for n, a in addresses.items():
        iproute.check_address(a)
    iproute.check_name(interface, "interface")
    pair = pair_bandwidth_function(cluster, timeline)
    end = timeline.duration_seconds() if end is None else end
    times = sorted({t for t, _, _ in timeline.events if 0 < t <= end})
    minor = {n: 2 + i for i, n in enumerate(nodes)}
    scripts = {}
    for me in nodes:
        cap = float(cluster.nodes[me]["capacity_mbps"])
        dests = [(minor[o], addresses[o], pair(me, o, 0.0)) for o in nodes if o != me]
        up = iproute.add_shaping(None, interface, cap, dests)
        play, previous, clock = [], {o: pair(me, o, 0.0) for o in nodes if o != me}, 0.0
        for t in times:
            cmds = []
            for o in previous:
                rate = pair(me, o, t)
                if rate != previous[o]:
                    cmds += iproute.change_rate(None, interface, minor[o], rate, cap)
                    previous[o] = rate
            if cmds:
                play.append(f"sleep {(t - clock) / time_scale:.3f}")
                play += [shlex.join(c) for c in cmds]
                clock = t
        down = iproute.delete_shaping(None, interface)
        scripts[me] = _script(me, interface, [shlex.join(c) for c in up], play,
                              [shlex.join(c) for c in down])
    return scripts


def _script(host, interface, up, play, down):
    def block(lines):
        return "".join(f"    {line}\n" for line in lines) or "    :\n"

    return ("#!/bin/sh\n"
            f"# Bandwidth plan for {host} on {interface}; run as root: sh THIS up|play|down\n"
            "set -e\n"
            'case "$1" in\n'
            f"  up)\n{block(up)}    ;;\n"
            f"  play)\n{block(play)}    ;;\n"
            f"  down)\n{block(down)}    ;;\n"
            '  *) echo "usage: $0 up|play|down" >&2; exit 2 ;;\n'
            "esac\n")

"""``nodesel demo``: a short run that shows the emulated cluster at work.

The coordinator starts local load on a fraction of the nodes, measures every pair of nodes
in rounds of disjoint probes (no node in two probes at once), compares the measurements
with the scenario's true bandwidths, selects a group for CG on 4 nodes from the measured
graph (pattern-based and random), runs a CG-like exchange on both groups (at once when they
are disjoint) and reports what the local load used.
"""

import random
from .measure import Monitor, error_table
from .netgraph import to_node_link, write_json_atomic
from .patterns import builtin_pattern
from .selection import max_min_select, random_select


def run_demo(coordinator, *, seed=1, loaded_fraction=0.25, probe_bytes=1 << 20, out=None,
             echo=print):
    names = coordinator.names
    rng = random.Random(seed)
    loaded = sorted(rng.sample(names, round(loaded_fraction * len(names))), key=names.index)
    echo(f"cluster: {len(names)} nodes, {coordinator.settings.cluster.graph['topology']}; "
         f"scenario: {coordinator.settings.timeline.meta.get('kind')}, time scale "
         f"{coordinator.settings.time_scale:g}; local load on {', '.join(loaded) or 'no node'}")
    for node in loaded:
        coordinator.broadcast({"op": "load", "spec": {}}, [coordinator.rank_of(node)])
        coordinator.broadcast({"op": "report"}, [coordinator.rank_of(node)])  # start the window

    echo(f"measuring {len(names) * (len(names) - 1) // 2} pairs with {probe_bytes} B probes ...")
    monitor = Monitor(coordinator, size_bytes=probe_bytes)
    graph = monitor.measure(
        progress=lambda i, n: echo(f"  round {i}/{n}", end="\r" if i < n else "\n"))
    seconds = monitor.seconds
    errors = list(error_table(graph).values())
    echo(f"measured in {seconds:.1f} s; error against the scenario: mean {sum(errors) / len(errors):.1f}%, "
         f"max {max(errors):.1f}%")
    echo(f"{'pair':<10}{'measured [Mbit/s]':>19}{'true [Mbit/s]':>15}")
    shown = list(graph.edges(data=True))
    for a, b, d in shown[:12]:
        echo(f"{a + '-' + b:<10}{d['measured_mbps']:>19.1f}{d['true_bandwidth_mbps']:>15.1f}")
    if len(shown) > 12:
        echo(f"... {len(shown) - 12} more pairs in the results file")

    runs = {}
    m = min(4, len(names))
    if m >= 2:
        pattern = builtin_pattern("cg", m)
        chosen = {"pattern": max_min_select(graph, pattern, candidates=1),
                  "random": random_select(graph, pattern, seed=seed)}
        edges = list(pattern.edges)
        groups = {k: [s.candidates[0].mapping[r] for r in range(m)] for k, s in chosen.items()}
        disjoint = not set(groups["pattern"]) & set(groups["random"])
        echo(f"CG on {m} nodes: pattern-selected {groups['pattern']} "
             f"(bottleneck {chosen['pattern'].bottleneck_mbps} Mbit/s), random {groups['random']}"
             f"; running {'both at once' if disjoint else 'one after the other'}")
        kwargs = dict(pattern_edges=edges, bytes_per_edge=2 << 20, iterations=3)
        if disjoint:
            handles = {k: coordinator.submit(g, "exchange", **kwargs) for k, g in groups.items()}
            results = {k: coordinator.wait(h) for k, h in handles.items()}
        else:
            results = {k: coordinator.run(g, "exchange", **kwargs) for k, g in groups.items()}
        for k, replies in results.items():
            runs[k] = {"nodes": groups[k], "seconds": max(r["result"] for r in replies.values())}
            echo(f"  {k:<8} {runs[k]['seconds']:.2f} s")

    reports = coordinator.broadcast({"op": "report"})
    load = {n: r["load"] for n, r in reports.items() if r.get("load")}
    if load:
        echo(f"{'node':<6}{'CPU [%]':>9}{'RSS [MB]':>10}{'LAN [B/s]':>11}")
        for n, l in load.items():
            echo(f"{n:<6}{l['cpu_percent']:>9.1f}{l['rss_mb']:>10.0f}{l['lan_bytes_per_second']:>11.0f}")
    result = {"measurement_seconds": seconds, "mean_error_pct": sum(errors) / len(errors),
              "max_error_pct": max(errors), "status_graph": to_node_link(graph),
              "exchange": runs, "load": load}
    if out:
        write_json_atomic(out, result)
        echo(f"wrote {out}")
    return result

"""Network commands: ``cluster`` (describe a cluster), ``scenario`` (bandwidth over time),
``measure`` (measure every pair on the emulated cluster) and ``flows`` (send flows through
the emulated network and set them beside the fluid model)."""

import json
import os
import sys
import time

from ..errors import UserError
from .common import (
    actions,
    cluster_options,
    command,
    echo,
    allocation_cluster,
    load_cluster,
    nonnegative_float,
    on_cluster,
    positive_float,
    positive_int,
)

# Before the flows begin every rank takes the work and posts its receives: this long a node
# (at 10 ms, 256 nodes over 4 machines of 2 cores were not all ready, and flows of the first
# 0.13 s ended up to 53 emulated ms late at dilation 32)
HEAD_START_SECONDS_PER_NODE = 0.03


def register(sub):
    _register_measure(sub)
    _register_flows(sub)
    _register_cluster(sub)
    _register_scenario(sub)


def _register_measure(sub):
    meas = command(sub, "measure", help="measure every pair, NWS-style (launches mpiexec)",
                   examples=["nodesel measure --rounds 3",
                             "nodesel measure --scenario s.json --rounds 3 --json"],
                   handler=cmd_measure)
    cluster_options(meas)
    meas.add_argument("--rounds", type=int, default=1,
                      help="measurements of every pair (default 1)")
    meas.add_argument("--repetitions", type=positive_int, default=1,
                      help="probes per pair per round (default 1)")
    meas.add_argument("--json", action="store_true",
                      help="print the status graph as node-link JSON")


def _register_flows(sub):
    flows = command(sub, "flows",
                    help="send a flows file through the emulated cluster and beside each flow "
                         "the fluid model's end (launches mpiexec; --model-only does not)",
                    examples=["nodesel flows --cluster hostfiles/racks12.toml --flows "
                              "hostfiles/flows-racks12.csv --model-only",
                              "nodesel flows --cluster hostfiles/racks12.toml --flows "
                              "hostfiles/flows-racks12.csv --json --plot flows.png",
                              "nodesel flows --flows f.csv --scenario matrix.json --dilation 4"],
                    handler=cmd_flows)
    cluster_options(flows)
    flows.set_defaults(time_scale=1.0)
    flows.add_argument("--flows", required=True,
                       help="CSV with the header start_seconds,src,dst,size_bytes; a flow's id "
                            "is its row's index from 0")
    flows.add_argument("--model-only", action="store_true",
                       help="the fluid model's ends alone, in this process (no MPI)")
    flows.add_argument("--json", action="store_true",
                       help='print {"flows": [{"id", "src", "dst", "size_bytes", '
                            '"start_seconds", "end_seconds", "model_end_seconds"}]}')
    flows.add_argument("--plot", help="write a PNG: each flow's span, emulated and modelled")


def _register_cluster(sub):
    csub = actions(sub, "cluster", help="cluster descriptions",
                   examples="nodesel cluster show hostfiles/tree16.toml --json")
    show = command(csub, "show", help="print nodes and links",
                   examples=["nodesel cluster show",
                             "nodesel cluster show hostfiles/tree16.toml --json"],
                   handler=cmd_cluster)
    show.add_argument("file", nargs="?",
                      help="cluster TOML/JSON, SimGrid platform .xml or hostfile (default: the "
                           "Slurm or PBS "
                           "allocation's nodes inside one, else a 10-node crossbar)")
    show.add_argument("--json", action="store_true", help="networkx node-link JSON")
    export = command(csub, "export", help="write a cluster in another tool's words: a SimGrid "
                     "platform (version 4.1) on stdout", handler=cmd_cluster_export,
                     examples=["nodesel cluster export hostfiles/racks12.toml --simgrid > "
                               "racks12.xml"])
    export.add_argument("file", help="cluster TOML/JSON, SimGrid platform or hostfile")
    export.add_argument("--simgrid", action="store_true", required=True,
                        help="a SimGrid platform: hosts, a router per switch, a link per "
                             "edge, in a Floyd zone")
    gen = command(csub, "generate", help="write a tree cluster file: racks behind a core "
                  "switch, or a k-ary fat tree", handler=cmd_cluster_generate,
                  examples=["nodesel cluster generate racks --racks 32 --nodes-per-rack 32 "
                            "--port-mbps 1000 --oversubscription 4 --out racks1024.toml",
                            "nodesel cluster generate fat-tree --k 16 --link-mbps 1000 "
                            "--out fattree1024.toml"])
    gen.add_argument("kind", choices=("racks", "fat-tree"), help="the cluster's shape")
    gen.add_argument("--racks", type=int, help="racks: how many")
    gen.add_argument("--nodes-per-rack", type=int, help="racks: nodes in each")
    gen.add_argument("--port-mbps", type=float, default=1000.0,
                     help="racks: a node port's capacity (default 1000)")
    gen.add_argument("--uplink-mbps", type=float,
                     help="racks: a rack uplink's capacity (default: every port at once)")
    gen.add_argument("--oversubscription", type=float,
                     help="racks: a rack's port capacity over its uplink's (4 means 4:1)")
    gen.add_argument("--k", type=int, help="fat-tree: the switches' port count (even; k^3/4 "
                                           "nodes)")
    gen.add_argument("--link-mbps", type=float, default=1000.0,
                     help="fat-tree: every link's capacity (default 1000)")
    gen.add_argument("--latency-ms", type=nonnegative_float, default=0.1,
                     help="each link's latency (default 0.1)")
    gen.add_argument("--out", required=True, help="the cluster file to write (TOML)")


def _register_scenario(sub):
    ssub = actions(sub, "scenario", help="bandwidth scenarios",
                   examples="nodesel scenario generate --seed 1 --duration-seconds 600 "
                            "--out s.json")
    gen = command(ssub, "generate", help="write a stream-model timeline",
                  examples="nodesel scenario generate --seed 1 --duration-seconds 600 --out s.json",
                  handler=cmd_scenario)
    gen.add_argument("--seed", type=int, required=True, help="random seed (the same seed gives "
                                                             "the same file, byte for byte)")
    gen.add_argument("--duration-seconds", type=nonnegative_float, required=True,
                     help="scenario seconds to generate")
    gen.add_argument("--out", required=True, help="the timeline's JSON file")
    gen.add_argument("--cluster", help="cluster file (default: 10-node crossbar)")
    gen.add_argument("--interval-seconds", type=positive_float, default=30.0,
                     help="seconds between stream arrivals or departures (default 30)")
    gen.add_argument("--floor-mbps", type=positive_float, default=10.0,
                     help="no link's available bandwidth falls below this (default 10)")
    gen.add_argument("--initial-max-streams", type=int, default=4,
                     help="each link starts with 0 to this many competing streams (default 4)")
    sshow = command(ssub, "show", help="print a scenario as a table, or plot it",
                    examples=["nodesel scenario show s.json",
                              "nodesel scenario show s.json --plot s.png"],
                    handler=cmd_scenario)
    sshow.add_argument("file", help="scenario: timeline JSON, static matrix (node-link JSON) or "
                                    "CSV trace")
    sshow.add_argument("--cluster", help="cluster file (default: 10-node crossbar)")
    sshow.add_argument("--plot", help="write a PNG of bandwidth over time")


def cmd_measure(args):
    if args.rounds < 1:
        raise UserError(f"--rounds must be >= 1, got {args.rounds}")

    def program(coordinator):
        from ..coordinator.measure import Monitor, error_table, matrix_lines
        from ..network.netgraph import to_node_link

        monitor = Monitor(coordinator, size_bytes=args.probe_bytes, repetitions=args.repetitions)
        for i in range(args.rounds):
            if not args.json:
                echo(f"measuring every pair ({i + 1}/{args.rounds}) ...", file=sys.stderr)
            graph = monitor.measure()
        if args.json:
            echo(json.dumps(to_node_link(graph), indent=1))
            return
        echo("\n".join(matrix_lines(graph, monitor.nodes)))
        errors = error_table(graph)
        if not errors:
            echo(f"{monitor.seconds:.1f} s per measurement")
            return
        echo(f"forecast error against the scenario's true bandwidth: mean "
             f"{sum(errors.values()) / len(errors):.1f}%, max {max(errors.values()):.1f}% "
             f"({len(errors)} pairs, {monitor.seconds:.1f} s per measurement)")

    return on_cluster(args, program, allocation=True)


def cmd_flows(args):
    """Each flow of the file sent as one message at its start (emulated seconds from the
    run's start), its delivery (last byte plus latency) beside the model's."""
    from ..network import cluster as clusters
    from ..network.flowfile import read_flows
    from ..network.scenario import full_capacity_timeline, load_scenario
    from ..network.sharing import simulate

    cluster = load_cluster(args.cluster, args.nodes)
    names = clusters.node_names(cluster)
    flows = read_flows(args.flows, names)
    timeline = load_scenario(args.scenario, cluster) if args.scenario \
        else full_capacity_timeline(cluster)
    model_ends = simulate(cluster, flows, timeline=timeline, time_scale=args.time_scale)
    rows = [{"id": i, "src": f.src, "dst": f.dst, "size_bytes": int(f.size_bytes),
             "start_seconds": f.start_seconds, "end_seconds": None,
             "model_end_seconds": end} for i, (f, end) in enumerate(zip(flows, model_ends))]
    if args.model_only:
        return _report_flows(args, rows)

    def program(coordinator):
        from ..coordinator.tasks import late_flows

        index = {n: i for i, n in enumerate(coordinator.names)}
        work = [(i, f.start_seconds, index[f.src], index[f.dst], int(f.size_bytes))
                for i, f in enumerate(flows)]
        dilation = coordinator.settings.dilation
        last = max(model_ends) * dilation
        epoch = time.time() + 0.5 + HEAD_START_SECONDS_PER_NODE * len(names)
        handle = coordinator.submit(coordinator.names, "flows", epoch=epoch, flows=work,
                                    start_wall=epoch,
                                    timeout_seconds=2 * last + coordinator.timeout_seconds)
        results = coordinator.wait(handle, timeout=3 * last + 2 * coordinator.timeout_seconds)
        ready = {}
        for node, reply in results.items():
            for fid, wall in reply["result"]["ends"].items():
                rows[int(fid)]["end_seconds"] = (wall - epoch) / dilation
            ready[index[node]] = (reply["result"]["ready_wall"] - epoch) / dilation
        late = late_flows(work, ready, model_ends)
        for row in rows:
            row["not_ready_seconds"] = late.get(row["id"], 0.0)
        if late:
            worst = max(late, key=late.get)
            print(f"nodesel: warning: {len(late)} flow(s) may be late, their sender not ready "
                  f"at their start or their receiver at their end (flow {worst} by "
                  f"{1e3 * late[worst]:.1f} emulated ms): the nodes took longer than the run's "
                  f"head start of {1e3 * HEAD_START_SECONDS_PER_NODE:g} ms a node to set up",
                  file=sys.stderr, flush=True)
        _report_flows(args, rows, hosts=getattr(coordinator.model, "hosts", 1))

    return on_cluster(args, program, cluster=cluster, streams=False)


def _report_flows(args, rows, hosts=None):
    """The flows as JSON or a table; ``hosts``: the machines the ranks ran on (None for
    the model alone)."""
    if args.plot:
        _plot_flows(rows, args.plot)
    if args.json:
        echo(json.dumps({"flows": rows} if hosts is None else {"hosts": hosts, "flows": rows},
                        indent=1))
        return 0
    echo(f"{'id':>4} {'src':>8} {'dst':>8} {'size [B]':>12} {'start [s]':>10} {'end [s]':>10} "
         f"{'model end [s]':>14} {'off [%]':>8}")
    for r in rows:
        end, model = r["end_seconds"], r["model_end_seconds"]
        span = model - r["start_seconds"]
        off = "" if end is None or span <= 0 else f"{100 * (end - model) / span:+.1f}"
        echo(f"{r['id']:>4} {r['src']:>8} {r['dst']:>8} {r['size_bytes']:>12} "
             f"{r['start_seconds']:>10.4f} {'-' if end is None else f'{end:.4f}':>10} "
             f"{model:>14.4f} {off:>8}")
    if hosts is not None and hosts > 1:
        echo(f"ranks on {hosts} machines: the model served by rank 0")
    if args.plot:
        echo(f"wrote {args.plot}")
    return 0


def _plot_flows(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..files import save_figure

    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.28 * len(rows)))
    for k, r in enumerate(rows):
        ax.plot([r["start_seconds"], r["model_end_seconds"]], [k + 0.15] * 2, color="#6a9fd4",
                linewidth=4, solid_capstyle="butt", label="model" if k == 0 else None)
        if r["end_seconds"] is not None:
            ax.plot([r["start_seconds"], r["end_seconds"]], [k - 0.15] * 2, color="#d4793a",
                    linewidth=4, solid_capstyle="butt", label="emulated" if k == 0 else None)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r['id']}: {r['src']}→{r['dst']}" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("emulated time [s]")
    ax.set_title("each flow from its start to its delivery", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    try:
        save_figure(fig, path)
    finally:
        plt.close(fig)


def cmd_cluster(args):
    from ..network import cluster as clusters

    graph = (allocation_cluster() if args.file is None else None) or \
        clusters.load_cluster(args.file)
    if args.json:
        print(clusters.dumps(graph))
    else:
        print("\n".join(clusters.describe(graph)))
    return 0


def cmd_cluster_export(args):
    from ..network import cluster as clusters
    from ..network.simgrid import to_platform

    sys.stdout.write(to_platform(clusters.load_cluster(args.file)))
    return 0


def cmd_cluster_generate(args):
    from ..files import write_text_atomic
    from ..network import cluster as clusters
    from ..network import generate

    if args.kind == "racks":
        if args.racks is None or args.nodes_per_rack is None:
            raise UserError("cluster generate racks needs --racks and --nodes-per-rack")
        make = lambda: generate.racks(  # noqa: E731
            args.racks, args.nodes_per_rack, port_mbps=args.port_mbps,
            uplink_mbps=args.uplink_mbps, oversubscription=args.oversubscription,
            latency_ms=args.latency_ms)
    else:
        if args.k is None:
            raise UserError("cluster generate fat-tree needs --k")
        make = lambda: generate.fat_tree(args.k, link_mbps=args.link_mbps,  # noqa: E731
                                         latency_ms=args.latency_ms)
    try:
        data = make()
    except ValueError as e:
        raise UserError(f"cluster generate {args.kind}: {e}") from None
    graph = clusters.cluster_from_dict(data, args.out)  # what users will load, checked
    flags = ("racks", "nodes_per_rack", "port_mbps", "uplink_mbps", "oversubscription") \
        if args.kind == "racks" else ("k", "link_mbps")
    argv = " ".join(f"--{f.replace('_', '-')} {getattr(args, f):g}" for f in flags
                    if getattr(args, f) is not None)
    write_text_atomic(args.out, generate.cluster_toml(data, comment=(
        f"{generate.summary(data)}\nWritten by: nodesel cluster generate {args.kind} {argv} "
        f"--latency-ms {args.latency_ms:g}")))
    print(f"{args.out}: {len(clusters.node_names(graph))} nodes, "
          f"{graph.number_of_nodes() - len(clusters.node_names(graph))} switches")
    return 0


def cmd_scenario(args):
    from ..network.scenario import generate_streams, load_scenario

    cluster = load_cluster(args.cluster)
    if args.action == "generate":
        if args.initial_max_streams < 0:
            raise UserError("--initial-max-streams must be >= 0")
        parent = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(parent):
            raise UserError(f"output folder {parent} does not exist")
        timeline = generate_streams(cluster, seed=args.seed, duration_seconds=args.duration_seconds,
                                    interval_seconds=args.interval_seconds,
                                    floor_mbps=args.floor_mbps,
                                    initial_max_streams=args.initial_max_streams)
        timeline.write(args.out)
        print(f"wrote {args.out}: {len(timeline.links)} links, {len(timeline.events)} changes "
              f"over {args.duration_seconds:g} s")
        return 0
    timeline = load_scenario(args.file, cluster)
    if args.plot:
        _plot_timeline(timeline, args.plot)
        print(f"wrote {args.plot}")
        return 0
    print(f"kind: {timeline.meta.get('kind')}; {len(timeline.links)} links; "
          f"{len(timeline.events)} changes")
    print(f"{'time [s]':>10}  {'link':<12}{'bandwidth [Mbit/s]':>20}")
    for i, (a, b, _) in enumerate(timeline.links):
        print(f"{0.0:>10.1f}  {a + '-' + b:<12}{timeline.initial_mbps[i]:>20.2f}")
    for t, i, bw in timeline.events:
        a, b, _ = timeline.links[i]
        print(f"{t:>10.1f}  {a + '-' + b:<12}{bw:>20.2f}")
    return 0


def _plot_timeline(timeline, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..files import save_figure

    end = max(timeline.duration_seconds(), 1.0)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    changed = sorted({i for _, i, _ in timeline.events})
    for i in changed or range(min(len(timeline.links), 10)):
        times = [0.0] + [t for t, j, _ in timeline.events if j == i] + [end]
        values = [timeline.bandwidth_mbps(i, t) for t in times]
        a, b, _ = timeline.links[i]
        ax.step(times, values, where="post", label=f"{a}-{b}")
    ax.set_xlabel("scenario time [s]")
    ax.set_ylabel("available bandwidth [Mbit/s]")
    ax.set_title(f"{timeline.meta.get('kind')} scenario: links that change")
    if len(changed) <= 15:
        ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)

"""The ``nodesel`` command line (also ``python -m emulator``)."""

import argparse
import json
import os
import shutil
import subprocess
import sys

from .errors import UserError

EXAMPLES = """\
examples:
  nodesel demo                                  run the emulated 10-node cluster briefly
  nodesel measure --rounds 3                    measure every pair, with forecasts
  nodesel cluster show hostfiles/cluster10.toml --json
  nodesel scenario generate --seed 1 --duration-seconds 600 --out s.json
  nodesel scenario show s.json --plot s.png
  nodesel select --network G.json --pattern cg --nprocs 4 --candidates 3 --method pattern --seed 1
  nodesel patterns list
  nodesel patterns show cg --nprocs 4
  nodesel trace cg --nprocs 4 --class S --out cg4.json --plot cg4.png
"""


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _positive_float(text):
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def build_parser():
    parser = argparse.ArgumentParser(
        prog="nodesel", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Cluster emulator for communication-aware node selection.", epilog=EXAMPLES)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def cluster_options(p):
        p.add_argument("--cluster", help="cluster file (TOML/JSON) or hostfile; default 10-node crossbar")
        p.add_argument("--nodes", type=_positive_int, help="use only the first N nodes")
        p.add_argument("--scenario", help="scenario file; default: the stream model, --seed")
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--time-scale", type=_positive_float, default=10.0,
                       help="scenario seconds per wall second (default 10)")
        p.add_argument("--timeout-seconds", type=_positive_float, default=30.0,
                       help="how long the coordinator waits for a node (default 30)")
        p.add_argument("--probe-bytes", type=_positive_int, default=1 << 20)

    demo = sub.add_parser("demo", help="run the emulated cluster briefly (launches mpiexec)",
                          epilog="example: nodesel demo --nodes 10 --time-scale 10")
    cluster_options(demo)
    demo.add_argument("--loaded-fraction", type=float, default=0.25,
                      help="fraction of nodes with local load (default 0.25)")
    demo.add_argument("--out", default="results/demo.json", help="results JSON (default %(default)s)")

    meas = sub.add_parser("measure", help="measure every pair, NWS-style (launches mpiexec)",
                          epilog="example: nodesel measure --scenario s.json --rounds 3 --json")
    cluster_options(meas)
    meas.add_argument("--rounds", type=int, default=1, help="measurements of every pair (default 1)")
    meas.add_argument("--repetitions", type=_positive_int, default=1, help="probes per pair per round")
    meas.add_argument("--json", action="store_true", help="the status graph as node-link JSON")

    cluster = sub.add_parser("cluster", help="cluster descriptions")
    csub = cluster.add_subparsers(dest="action", metavar="ACTION")
    csub.required = True
    show = csub.add_parser("show", help="print nodes and links",
                           epilog="example: nodesel cluster show hostfiles/tree16.toml --json")
    show.add_argument("file", nargs="?", help="cluster TOML/JSON or hostfile (default: 10-node crossbar)")
    show.add_argument("--json", action="store_true", help="networkx node-link JSON")

    scen = sub.add_parser("scenario", help="bandwidth scenarios")
    ssub = scen.add_subparsers(dest="action", metavar="ACTION")
    ssub.required = True
    gen = ssub.add_parser("generate", help="write a stream-model timeline",
                          epilog="example: nodesel scenario generate --seed 1 --duration-seconds 600 --out s.json")
    gen.add_argument("--seed", type=int, required=True)
    gen.add_argument("--duration-seconds", type=float, required=True)
    gen.add_argument("--out", required=True)
    gen.add_argument("--cluster", help="cluster file (default: 10-node crossbar)")
    gen.add_argument("--interval-seconds", type=_positive_float, default=30.0)
    gen.add_argument("--floor-mbps", type=_positive_float, default=10.0)
    gen.add_argument("--initial-max-streams", type=int, default=4)
    sshow = ssub.add_parser("show", help="print a scenario as a table, or plot it",
                            epilog="example: nodesel scenario show s.json --plot s.png")
    sshow.add_argument("file")
    sshow.add_argument("--cluster", help="cluster file (default: 10-node crossbar)")
    sshow.add_argument("--plot", help="write a PNG of bandwidth over time")

    sel = sub.add_parser("select", help="select node groups for a job",
                         epilog="example: nodesel select --network G.json --pattern cg --nprocs 4")
    sel.add_argument("--network", required=True, help="network status graph (node-link JSON)")
    sel.add_argument("--pattern", required=True, help="built-in pattern name or pattern file")
    sel.add_argument("--nprocs", type=int, help="number of ranks (needed for built-in patterns)")
    sel.add_argument("--candidates", type=_positive_int, default=3)
    sel.add_argument("--method", choices=("pattern", "all-all", "random"), default="pattern")
    sel.add_argument("--seed", type=int, default=None)
    sel.add_argument("--class", dest="npb_class", default="A", choices=("S", "W", "A", "B"))
    sel.add_argument("--threshold", type=float, default=0.1,
                     help="dominance threshold for matrix pattern files (default 0.1)")
    sel.add_argument("--time-budget-seconds", type=_positive_float, default=5.0)

    tr = sub.add_parser("trace", help="trace a skeleton's traffic into a pattern (launches mpiexec)",
                        epilog="example: nodesel trace cg --nprocs 4 --class S --out cg4.json --plot cg4.png")
    tr.add_argument("benchmark")
    tr.add_argument("--nprocs", type=int, required=True)
    tr.add_argument("--class", dest="npb_class", default="S")
    tr.add_argument("--out", required=True, help="matrix JSON; CSV and .pattern.json beside it")
    tr.add_argument("--plot", help="Figure-2-style PNG")
    tr.add_argument("--iterations", type=_positive_int)

    pat = sub.add_parser("patterns", help="communication pattern library")
    psub = pat.add_subparsers(dest="action", metavar="ACTION")
    psub.required = True
    psub.add_parser("list", help="list built-in patterns", epilog="example: nodesel patterns list")
    pshow = psub.add_parser("show", help="print a pattern as node-link JSON",
                            epilog="example: nodesel patterns show cg --nprocs 4")
    pshow.add_argument("name")
    pshow.add_argument("--nprocs", type=int, required=True)
    pshow.add_argument("--class", dest="npb_class", default="A", choices=("S", "W", "A", "B"))
    return parser


# -- commands ----------------------------------------------------------------------------


def _under_mpiexec():
    return any(k in os.environ for k in ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE"))


def mpiexec_path():
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return local if os.path.exists(local) else shutil.which("mpiexec")


def _load_cluster(path, nodes=None):
    from . import cluster as clusters

    graph = clusters.load_cluster(path)
    names = clusters.node_names(graph)
    if nodes is not None:
        if nodes > len(names):
            raise UserError(f"--nodes {nodes} is more than the {len(names)} nodes of the cluster")
        if graph.graph.get("topology") != "crossbar":
            raise UserError("--nodes only trims crossbar clusters")
        graph.remove_nodes_from(names[nodes:])
    return graph


def _on_cluster(args, program):
    """Run ``program(coordinator)`` on the emulated cluster of ``args``.

    Outside mpiexec this launches ``mpiexec -n N+1`` on the same command line; under
    mpiexec every rank checks the rank count, then rank 0 coordinates and the rest serve.
    """
    from . import cluster as clusters
    from .scenario import default_timeline, load_scenario

    cluster = _load_cluster(args.cluster, args.nodes)
    timeline = (load_scenario(args.scenario, cluster) if args.scenario
                else default_timeline(cluster, seed=args.seed))
    n = len(clusters.node_names(cluster))
    if not _under_mpiexec():
        mpiexec = mpiexec_path()
        if mpiexec is None:
            raise UserError("mpiexec not found; install the 'mpich' wheel (pip install mpich)")
        # -disable-auto-cleanup: a dead node must not take the coordinator with it, so the
        # coordinator can name the node before it aborts the job.
        argv = [mpiexec, "-disable-auto-cleanup", "-n", str(n + 1), sys.executable, "-m",
                "emulator"] + args.argv
        return subprocess.call(argv)

    from mpi4py import MPI

    from .runtime import Settings, launch

    world = MPI.COMM_WORLD
    if world.Get_size() - 1 != n:
        if world.Get_rank() == 0:
            print(f"nodesel: error: the cluster has {n} nodes, so run {n + 1} ranks "
                  f"(mpiexec -n {n + 1}), not {world.Get_size()}", file=sys.stderr)
        return 2
    settings = Settings(cluster, timeline, time_scale=args.time_scale,
                        timeout_seconds=args.timeout_seconds)
    if world.Get_rank() == 0:
        import time

        settings.epoch = time.time()
    launch(program, settings)
    return 0


def _echo(*args, **kwargs):
    print(*args, **kwargs, flush=True)


def cmd_demo(args):
    if not 0 <= args.loaded_fraction <= 1:
        raise UserError(f"--loaded-fraction must lie in [0, 1], got {args.loaded_fraction}")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)

    def program(coordinator):
        from .demo import run_demo

        return run_demo(coordinator, seed=args.seed, loaded_fraction=args.loaded_fraction,
                        probe_bytes=args.probe_bytes, out=args.out, echo=_echo)

    return _on_cluster(args, program)


def cmd_measure(args):
    if args.rounds < 1:
        raise UserError(f"--rounds must be >= 1, got {args.rounds}")

    def program(coordinator):
        from .measure import Monitor, error_table, matrix_lines
        from .netgraph import to_node_link

        monitor = Monitor(coordinator, size_bytes=args.probe_bytes, repetitions=args.repetitions)
        for i in range(args.rounds):
            if not args.json:
                _echo(f"measuring every pair ({i + 1}/{args.rounds}) ...", file=sys.stderr)
            graph = monitor.measure()
        if args.json:
            _echo(json.dumps(to_node_link(graph), indent=1))
            return
        _echo("\n".join(matrix_lines(graph, monitor.nodes)))
        errors = error_table(graph)
        _echo(f"forecast error against the scenario's true bandwidth: mean "
              f"{sum(errors.values()) / len(errors):.1f}%, max {max(errors.values()):.1f}% "
              f"({len(errors)} pairs, {monitor.seconds:.1f} s per measurement)")

    return _on_cluster(args, program)


def cmd_cluster(args):
    from . import cluster as clusters

    graph = clusters.load_cluster(args.file)
    if args.json:
        print(clusters.dumps(graph))
    else:
        print("\n".join(clusters.describe(graph)))
    return 0


def cmd_scenario(args):
    from .scenario import generate_streams, load_scenario

    cluster = _load_cluster(args.cluster)
    if args.action == "generate":
        if args.duration_seconds < 0:
            raise UserError(f"--duration-seconds must be >= 0, got {args.duration_seconds}")
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
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("plotting needs matplotlib: pip install 'nodesel[plot]'") from None
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
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=120)
    os.replace(tmp, path)


def cmd_select(args):
    from .netgraph import read_graph
    from .patterns import resolve_pattern
    from .selection import all_all_select, max_min_select, random_select

    network = read_graph(args.network)
    pattern = resolve_pattern(args.pattern, args.nprocs, npb_class=args.npb_class,
                              threshold=args.threshold)
    if args.method == "pattern":
        result = max_min_select(network, pattern, candidates=args.candidates,
                                time_budget_seconds=args.time_budget_seconds)
    elif args.method == "all-all":
        result = all_all_select(network, pattern.number_of_nodes(), candidates=args.candidates,
                                time_budget_seconds=args.time_budget_seconds)
    else:
        result = random_select(network, pattern, seed=args.seed, candidates=args.candidates)
    print(json.dumps(result.to_json(), indent=1))
    return 0


def cmd_patterns(args):
    from .netgraph import to_node_link
    from .patterns import builtin_pattern, describe_patterns

    if args.action == "list":
        print(f"{'name':<12}{'process counts':<36}description")
        for p in describe_patterns():
            print(f"{p.name:<12}{p.nprocs_rule:<36}{p.description}")
        return 0
    graph = builtin_pattern(args.name, args.nprocs, npb_class=args.npb_class)
    print(json.dumps(to_node_link(graph), indent=1))
    return 0


def cmd_trace(args):
    from skeletons import check, describe

    describe()
    try:
        check(args.benchmark.lower(), args.npb_class, args.nprocs)
    except ValueError as e:
        raise UserError(str(e)) from None
    for path in filter(None, (args.out, args.plot)):
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise UserError(f"output folder {parent} does not exist")
    mpiexec = mpiexec_path()
    if mpiexec is None:
        raise UserError("mpiexec not found; install the 'mpich' wheel (pip install mpich)")
    argv = [mpiexec, "-n", str(args.nprocs), sys.executable, "-m", "skeletons",
            args.benchmark.lower(), "--class", args.npb_class, "--trace", args.out]
    if args.plot:
        argv += ["--plot", args.plot]
    if args.iterations:
        argv += ["--iterations", str(args.iterations)]
    return subprocess.call(argv)


COMMANDS = {"demo": cmd_demo, "measure": cmd_measure, "cluster": cmd_cluster, "scenario": cmd_scenario,
            "select": cmd_select, "patterns": cmd_patterns, "trace": cmd_trace}


def main(argv=None):
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    args.argv = argv
    try:
        return COMMANDS[args.command](args) or 0
    except UserError as e:
        print(f"nodesel: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("nodesel: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

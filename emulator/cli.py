"""The ``nodesel`` command line (also ``python -m emulator``)."""

import argparse
import json
import os
import shutil
import subprocess
import sys

from .errors import UserError
from .pipeline import METHODS

EXAMPLES = """\
examples:
  nodesel demo                                  a short node-selection experiment (about 2 min)
  nodesel experiment --benchmarks bt,cg,is,lu,mg --methods pattern,all-all,random \
      --repeats 6 --seed 1 --out results/experiment   the Figure 3 experiment of Goteti and Subhlok
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


def _actions(sub, name, help):
    """A command with sub-actions (``nodesel NAME ACTION``); returns its subparsers."""
    actions = sub.add_parser(name, help=help).add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    return actions


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
        p.add_argument("--probe-bytes", type=_positive_int, default=256 * 1024,
                       help="bytes per bandwidth probe (default 256 KiB)")
        p.add_argument("--shaping", choices=("inproc", "tc", "external"), default="inproc",
                       help="inproc: the emulator paces messages (default, no root); tc: the "
                            "kernel shapes real traffic (needs --testbed netns and root); "
                            "external: real traffic, shaped by someone else (a real cluster, "
                            "under your own mpiexec)")
        p.add_argument("--testbed", choices=("netns",),
                       help="with --shaping tc: run node ranks in network namespaces of this "
                            "machine")
        p.add_argument("--testbed-name", default="nselx",
                       help="name of the testbed a tc run brings up (default nselx)")

    def testbed_options(p):
        p.add_argument("--name", default="nsel",
                       help="testbed name, prefix of every object it makes (default nsel)")
        p.add_argument("--state-dir", default="/run/nodesel",
                       help="where the testbed records what it made (default /run/nodesel)")

    def experiment_options(p, *, benchmarks, repeats, out):
        p.add_argument("--benchmarks", default=benchmarks,
                       help="comma-separated NAS benchmarks (default %(default)s)")
        p.add_argument("--methods", default=",".join(METHODS),
                       help="comma-separated selection methods (default %(default)s)")
        p.add_argument("--repeats", type=int, default=repeats,
                       help="jobs per benchmark and method (default %(default)s)")
        p.add_argument("--nprocs", type=int, default=4, help="nodes per job (default 4)")
        p.add_argument("--candidates", type=_positive_int, default=3,
                       help="candidate groups tried with the skeleton (default 3)")
        p.add_argument("--app-iterations", type=_positive_int, default=3,
                       help="iterations of the class-A application actually run; its full "
                            "time is extrapolated from them (default 3)")
        p.add_argument("--full-app", action="store_true",
                       help="run the class-A applications to their full iteration count")
        p.add_argument("--trial-iterations", type=_positive_int,
                       help="cut the class-S skeleton trials to this many iterations")
        p.add_argument("--spacing-seconds", type=_positive_float, default=600.0,
                       help="scenario seconds between job slots (default 600)")
        p.add_argument("--measure-interval-seconds", type=_positive_float, default=600.0,
                       help="scenario seconds between measurements of every pair (default 600)")
        p.add_argument("--no-oracle", action="store_true", help="skip the oracle reference runs")
        p.add_argument("--out", help=f"output folder; its parent must exist (default {out}, "
                                     "created as needed)")
        p.set_defaults(default_out=out)

    demo = sub.add_parser(
        "demo", help="a short node-selection experiment on the emulated cluster (launches mpiexec)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: nodesel demo\n         nodesel demo --repeats 2 --out results/demo2")
    cluster_options(demo)
    experiment_options(demo, benchmarks="cg,is,mg", repeats=2, out="results/demo")

    exp = sub.add_parser(
        "experiment", help="the Figure 3 experiment: selection methods compared (launches mpiexec)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  nodesel experiment --benchmarks bt,cg,is,lu,mg --methods pattern,all-all,random \\\n"
               "      --repeats 6 --seed 1 --out results/experiment\n"
               "  nodesel experiment --time-scale 1 --spacing-seconds 600   # the paper's real timing\n"
               "  nodesel experiment --benchmarks cg,is --repeats 1 --app-iterations 1 --out /tmp/tiny")
    cluster_options(exp)
    experiment_options(exp, benchmarks="bt,cg,is,lu,mg", repeats=6, out="results/experiment")

    meas = sub.add_parser("measure", help="measure every pair, NWS-style (launches mpiexec)",
                          epilog="example: nodesel measure --scenario s.json --rounds 3 --json")
    cluster_options(meas)
    meas.add_argument("--rounds", type=int, default=1, help="measurements of every pair (default 1)")
    meas.add_argument("--repetitions", type=_positive_int, default=1, help="probes per pair per round")
    meas.add_argument("--json", action="store_true", help="the status graph as node-link JSON")

    csub = _actions(sub, "cluster", "cluster descriptions")
    show = csub.add_parser("show", help="print nodes and links",
                           epilog="example: nodesel cluster show hostfiles/tree16.toml --json")
    show.add_argument("file", nargs="?", help="cluster TOML/JSON or hostfile (default: 10-node crossbar)")
    show.add_argument("--json", action="store_true", help="networkx node-link JSON")

    ssub = _actions(sub, "scenario", "bandwidth scenarios")
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

    tsub = _actions(sub, "testbed", "a network-namespace testbed shaped by tc (needs root)")
    tup = tsub.add_parser(
        "up", help="create namespaces, veths, a bridge and HTB shaping",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  sudo nodesel testbed up --nodes 10 --capacity-mbps 100\n"
               "  sudo nodesel testbed up --nodes 4 --scenario s.json --out /tmp\n"
               "then: mpiexec -launcher ssh -launcher-exec hostfiles/nsel-launcher "
               "-f hostfiles/nsel.hosts -n 5 python prog.py")
    tup.add_argument("--nodes", type=_positive_int, default=10)
    tup.add_argument("--capacity-mbps", type=_positive_float, default=100.0,
                     help="port capacity of every node (default 100)")
    tup.add_argument("--scenario", help="shape pairs at the scenario's bandwidths at time 0 "
                                        "(default: every pair at port capacity)")
    tup.add_argument("--bandwidth-mbps", type=_positive_float,
                     help="shape every pair at this bandwidth instead")
    tup.add_argument("--subnet", default="10.77.0.0/24")
    tup.add_argument("--out", default="hostfiles", help="where the hostfile and launcher go "
                                                        "(default hostfiles)")
    testbed_options(tup)
    tdown = tsub.add_parser("down", help="remove everything 'up' made (idempotent)",
                            epilog="example: sudo nodesel testbed down --name nsel")
    testbed_options(tdown)
    tplay = tsub.add_parser("play", help="play a scenario into the testbed's tc classes",
                            epilog="example: sudo nodesel testbed play --scenario s.json --time-scale 10")
    tplay.add_argument("--scenario", required=True)
    tplay.add_argument("--time-scale", type=_positive_float, default=1.0)
    testbed_options(tplay)

    run = sub.add_parser(
        "run", help="select nodes for your own MPI programs: skeleton trials, then the app",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples (on the testbed of 'nodesel testbed up'):\n"
               "  nodesel run --pattern cg --nprocs 4 \\\n"
               "    --skeleton-cmd 'mpiexec -launcher ssh -launcher-exec hostfiles/nsel-launcher "
               "-f {machinefile} -n {nprocs} ./cg.S.4' \\\n"
               "    --app-cmd 'mpiexec -launcher ssh -launcher-exec hostfiles/nsel-launcher "
               "-f {machinefile} -n {nprocs} ./cg.A.4'\n"
               "on a real cluster: nodesel run --hostfile hosts --pattern cg --nprocs 4 "
               "--skeleton-cmd 'mpiexec -f {machinefile} -n {nprocs} ./cg.S.4' --app-cmd '...'")
    run.add_argument("--pattern", required=True, help="built-in pattern or pattern file")
    run.add_argument("--nprocs", type=_positive_int, required=True)
    run.add_argument("--skeleton-cmd", required=True,
                     help="command run on each candidate; {machinefile} and {nprocs} are filled in")
    run.add_argument("--app-cmd", required=True, help="command run on the chosen group")
    run.add_argument("--candidates", type=_positive_int, default=3)
    run.add_argument("--hostfile", help="a real cluster's hostfile (default: the namespace testbed)")
    run.add_argument("--testbed-name", default="nsel")
    run.add_argument("--state-dir", default="/run/nodesel")
    run.add_argument("--threshold", type=float, default=0.1,
                     help="dominance threshold for matrix pattern files (default 0.1)")
    run.add_argument("--out", help="output folder; its parent must exist (default results/run, "
                                   "created as needed)")
    run.add_argument("--timeout-seconds", type=_positive_float, default=600.0,
                     help="limit for the measurement (default 600)")

    tcsub = _actions(sub, "tc", "traffic-control plans for a real cluster")
    plan = tcsub.add_parser(
        "plan", help="write one shaping script per host (run them with sudo)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: nodesel tc plan --hostfile hosts --scenario s.json --out plan/\n"
               "on each host: sudo sh plan/HOST.sh up; sudo sh plan/HOST.sh play; "
               "sudo sh plan/HOST.sh down")
    plan.add_argument("--hostfile", required=True, help="MPICH or Open MPI hostfile; hosts "
                                                         "are IPv4 addresses or resolvable names")
    plan.add_argument("--scenario", required=True)
    plan.add_argument("--out", required=True, help="folder for the scripts")
    plan.add_argument("--interface", default="eth0", help="each host's cluster interface")
    plan.add_argument("--capacity-mbps", type=_positive_float, default=100.0)
    plan.add_argument("--time-scale", type=_positive_float, default=1.0)
    plan.add_argument("--apply", action="store_true",
                      help="instead, play the scenario into the local testbed (--name)")
    testbed_options(plan)

    psub = _actions(sub, "patterns", "communication pattern library")
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


def run_mpiexec(argv, *, grace_seconds=10.0):
    """Run an mpiexec command line and return its status. On Ctrl-C, mpiexec gets SIGINT
    (it passes it on to every rank) and a grace period to end the job, then SIGKILL; the
    ranks of the job are not left behind either way."""
    import signal

    proc = subprocess.Popen(argv)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=grace_seconds)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.kill()
            proc.wait()
        raise


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


def _on_cluster(args, program, *, scenario_seconds=3600.0):
    """Run ``program(coordinator)`` on the emulated cluster of ``args``.

    Outside mpiexec this launches ``mpiexec -n N+1`` on the same command line; under
    mpiexec every rank checks the rank count, then rank 0 coordinates and the rest serve.
    """
    from . import cluster as clusters
    from .scenario import default_timeline, load_scenario

    cluster = _load_cluster(args.cluster, args.nodes)
    timeline = (load_scenario(args.scenario, cluster) if args.scenario
                else default_timeline(cluster, seed=args.seed, duration_seconds=scenario_seconds))
    n = len(clusters.node_names(cluster))
    if args.shaping == "tc" and args.testbed != "netns":
        raise UserError("--shaping tc needs --testbed netns (node ranks in network namespaces)")
    if args.testbed and args.shaping != "tc":
        raise UserError("--testbed netns goes with --shaping tc")
    if not _under_mpiexec():
        mpiexec = mpiexec_path()
        if mpiexec is None:
            raise UserError("mpiexec not found; install the 'mpich' wheel (pip install mpich)")
        if args.shaping == "tc":
            return _on_testbed(args, cluster, mpiexec)
        # -disable-auto-cleanup and the supervisor: a dead node must not take the others with
        # it, so the coordinator can name it and go on without it.
        from .supervise import rank_command

        return run_mpiexec([mpiexec, "-disable-auto-cleanup", "-n", str(n + 1)]
                           + rank_command(args.argv))

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
    if args.shaping == "external":
        settings.shaping = "external"
    if args.shaping == "tc":
        from .testbed import shaping_info

        settings.shaping = "tc"
        settings.extra["testbed"] = shaping_info(args.testbed_name)
    if world.Get_rank() == 0:
        import time

        settings.epoch = time.time()
    launch(program, settings)
    return 0


def _on_testbed(args, cluster, mpiexec):
    """Bring up a namespace testbed for ``cluster``, run the command's ranks in it (rank 0 in
    the coordinator namespace, rank i in node i's), and take the testbed down again."""
    import tempfile

    from . import cluster as clusters
    from .supervise import rank_command
    from .testbed import Layout, Testbed, require_root

    names = clusters.node_names(cluster)
    capacities = {cluster.nodes[n]["capacity_mbps"] for n in names}
    if cluster.graph.get("topology") != "crossbar" or len(capacities) != 1 \
            or names != [f"n{i}" for i in range(1, len(names) + 1)]:
        raise UserError("the namespace testbed emulates a crossbar of nodes n1..nN with one "
                        "port capacity; use the default cluster or --nodes")
    layout = Layout(args.testbed_name, len(names))
    require_root()
    testbed = Testbed(layout)
    capacity = capacities.pop()
    with tempfile.TemporaryDirectory(prefix="nodesel-testbed-") as tmp:
        files = testbed.up(capacity, lambda a, b: capacity, out_dir=tmp)
        try:
            return run_mpiexec([mpiexec, "-disable-auto-cleanup", "-launcher", "ssh",
                                "-launcher-exec", files["launcher"], "-f", files["hostfile"],
                                "-n", str(len(names) + 1)] + rank_command(args.argv))
        finally:
            testbed.down()


def _echo(*args, **kwargs):
    print(*args, **kwargs, flush=True)


def _experiment_config(args):
    from . import cluster as clusters
    from .experiment import ExperimentConfig

    def names(text):
        return tuple(x.strip().lower() for x in text.split(",") if x.strip())

    config = ExperimentConfig(
        benchmarks=names(args.benchmarks), methods=names(args.methods), repeats=args.repeats,
        seed=args.seed, nprocs=args.nprocs, candidates=args.candidates,
        app_iterations=None if args.full_app else args.app_iterations,
        trial_iterations=args.trial_iterations, spacing_seconds=args.spacing_seconds,
        measure_interval_seconds=args.measure_interval_seconds, probe_bytes=args.probe_bytes,
        oracle=not args.no_oracle, time_scale=args.time_scale)
    cluster = _load_cluster(args.cluster, args.nodes)
    config.validate(len(clusters.node_names(cluster)))
    if args.out is None:  # the default place: made with its parents
        os.makedirs(args.default_out, exist_ok=True)
    out = os.path.abspath(args.out or args.default_out)
    parent = os.path.dirname(out)
    if not os.path.isdir(parent):
        raise UserError(f"the parent of the output folder, {parent}, does not exist")
    if os.path.exists(out) and not os.path.isdir(out):
        raise UserError(f"{out} exists and is not a folder")
    os.makedirs(out, exist_ok=True)
    return config, out


def cmd_experiment(args):
    config, out = _experiment_config(args)
    started = __import__("time").time()

    def program(coordinator):
        from .experiment import Experiment
        from .report import markdown_table

        names = coordinator.names
        _echo(f"cluster: {len(names)} nodes ({coordinator.settings.cluster.graph['topology']}); "
              f"scenario: {coordinator.settings.timeline.meta.get('kind')}, time scale "
              f"{config.time_scale:g}; {len(config.slots())} slots x "
              f"{len(config.methods)} methods of {config.nprocs}-node jobs", file=sys.stderr)
        summary = Experiment(coordinator, config, out, echo=_echo).run()
        _echo(markdown_table(summary))
        for event in summary["failures"]:
            _echo(f"failure: slot {event['slot']} {event['method']}: {event['error']}")
        _echo(f"results in {out}: jobs.csv, summary.json, table.md, figure3.png "
              f"({summary['wall_seconds']:.0f} s)")
        return summary

    status = _on_cluster(args, program, scenario_seconds=config.scenario_seconds())
    if status and not _under_mpiexec():
        # a run that lost nodes but finished still has complete results
        summary = os.path.join(out, "summary.json")
        try:
            with open(summary) as f:
                done = json.load(f).get("complete") and os.path.getmtime(summary) >= started
        except (OSError, ValueError):
            done = False
        if done:
            print("nodesel: the experiment finished despite node failures (see summary.json)",
                  file=sys.stderr)
            return 0
    return status


cmd_demo = cmd_experiment


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
        if not errors:
            _echo(f"{monitor.seconds:.1f} s per measurement")
            return
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    from .files import save_figure

    save_figure(fig, path)
    plt.close(fig)


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


def _testbed(name, state_dir):
    """The testbed ``name`` that is up, and its state."""
    from .testbed import Layout, Testbed, state_path

    try:
        with open(state_path(name, state_dir)) as f:
            state = json.load(f)
    except FileNotFoundError:
        raise UserError(f"no testbed named {name!r} is up (no {state_path(name, state_dir)})") \
            from None
    return Testbed(Layout(name, state["nodes"], state["subnet"]), state_dir=state_dir), state


def _play(testbed, state, scenario, time_scale):
    from . import cluster as clusters
    from .scenario import load_scenario
    from .tcplayer import ScenarioPlayer

    cluster = clusters.crossbar(state["nodes"], capacity_mbps=state["capacity_mbps"])
    timeline = load_scenario(scenario, cluster)
    player = ScenarioPlayer(cluster, timeline, testbed.set_pair, clusters.node_names(cluster))
    print(f"playing {len(timeline.events)} changes over {timeline.duration_seconds():g} "
          f"scenario seconds at time scale {time_scale:g}; Ctrl-C stops", flush=True)
    player.play(time_scale=time_scale,
                progress=lambda t, n: print(f"  t={t:g} s: {n} class change(s)", flush=True))
    return 0


def cmd_testbed(args):
    from .testbed import Layout, require_root

    if args.action == "up":
        from .testbed import Testbed

        testbed = Testbed(Layout(args.name, args.nodes, args.subnet), state_dir=args.state_dir)
        require_root()  # after the names and addresses are checked
        if args.scenario and args.bandwidth_mbps:
            raise UserError("give --scenario or --bandwidth-mbps, not both")
        if args.scenario:
            from . import cluster as clusters
            from .scenario import load_scenario, pair_bandwidth_function

            cluster = clusters.crossbar(args.nodes, capacity_mbps=args.capacity_mbps)
            pair_at = pair_bandwidth_function(cluster, load_scenario(args.scenario, cluster))

            def pair(a, b):
                return pair_at(a, b, 0.0)
        else:
            rate = args.bandwidth_mbps or args.capacity_mbps

            def pair(a, b):
                return rate
        files = testbed.up(args.capacity_mbps, pair, out_dir=args.out)
        print(f"testbed {args.name}: {args.nodes} node namespaces ({testbed.layout.namespace('n1')} "
              f"...) and a coordinator namespace on bridge {testbed.layout.bridge} "
              f"({testbed.layout.bridge_address}); state in {testbed.path}")
        print(f"hostfile {files['hostfile']}, launcher {files['launcher']}")
        print(f"run: mpiexec -launcher ssh -launcher-exec {files['launcher']} -f "
              f"{files['hostfile']} -n {args.nodes + 1} python prog.py")
        return 0
    require_root()
    if args.action == "down":
        from .testbed import Testbed

        # down removes what the state file lists, whatever the layout
        removed = Testbed(Layout(args.name, 1), state_dir=args.state_dir).down()
        print(f"removed {len(removed)} objects of testbed {args.name}" if removed
              else f"nothing to remove: no testbed named {args.name!r} is up")
        return 0
    testbed, state = _testbed(args.name, args.state_dir)
    return _play(testbed, state, args.scenario, args.time_scale)


def cmd_tc(args):
    from . import cluster as clusters
    from .files import write_text_atomic
    from .scenario import load_scenario
    from .tcplayer import plan_scripts

    if args.apply:
        from .testbed import require_root

        require_root()
        testbed, state = _testbed(args.name, args.state_dir)
        return _play(testbed, state, args.scenario, args.time_scale)
    import socket

    names = list(clusters.parse_hostfile(args.hostfile))
    addresses = {}
    for host in names:
        try:
            addresses[host] = socket.gethostbyname(host)
        except OSError:
            raise UserError(f"{args.hostfile}: host {host!r} has no address; give IPv4 "
                            "addresses or resolvable names") from None
    cluster = clusters.crossbar(names, capacity_mbps=args.capacity_mbps)
    timeline = load_scenario(args.scenario, cluster)
    if not os.path.isdir(args.out):
        parent = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(parent):
            raise UserError(f"the parent of the output folder, {parent}, does not exist")
        os.makedirs(args.out)
    scripts = plan_scripts(cluster, timeline, addresses, interface=args.interface,
                           time_scale=args.time_scale)
    for host, text in scripts.items():
        write_text_atomic(os.path.join(args.out, f"{host}.sh"), text)
    print(f"wrote {len(scripts)} scripts to {args.out}: "
          f"{', '.join(sorted(f'{h}.sh' for h in scripts))}")
    return 0


def cmd_run(args):
    from . import cluster as clusters
    from .files import write_json_atomic, write_text_atomic
    from .netgraph import to_node_link
    from .patterns import resolve_pattern
    from .userjob import command_argv, measure, run_job

    pattern = resolve_pattern(args.pattern, args.nprocs, threshold=args.threshold)
    for template in (args.skeleton_cmd, args.app_cmd):
        command_argv(template, machinefile="m", nprocs=args.nprocs)  # splits cleanly
    if args.out is None:
        os.makedirs("results/run", exist_ok=True)
    out = os.path.abspath(args.out or "results/run")
    if not os.path.isdir(os.path.dirname(out)):
        raise UserError(f"the parent of the output folder, {os.path.dirname(out)}, does not exist")
    os.makedirs(out, exist_ok=True)
    mpiexec = mpiexec_path()
    if mpiexec is None:
        raise UserError("mpiexec not found; install the 'mpich' wheel (pip install mpich)")
    if args.hostfile:
        hosts = list(clusters.parse_hostfile(args.hostfile))
        machinefile = os.path.join(out, "measure.machinefile")
        # rank 0 (the coordinator) shares the first host with node 1
        write_text_atomic(machinefile, f"{hosts[0]}:2\n" + "".join(f"{h}:1\n" for h in hosts[1:]))
        launch = [mpiexec, "-disable-auto-cleanup", "-f", machinefile, "-n", str(len(hosts) + 1)]
        extra = ["--cluster", os.path.abspath(args.hostfile)]

        def host_of(node):
            return node
    else:
        testbed, state = _testbed(args.testbed_name, args.state_dir)
        files = {os.path.basename(f): f for f in state.get("files", [])}
        launcher = files.get(f"{args.testbed_name}-launcher")
        hostfile = files.get(f"{args.testbed_name}.hosts")
        if not launcher or not hostfile:
            raise UserError(f"testbed {args.testbed_name!r} has no launcher and hostfile; bring "
                            "it up with 'nodesel testbed up --out DIR'")
        launch = [mpiexec, "-disable-auto-cleanup", "-launcher", "ssh", "-launcher-exec",
                  launcher, "-f", hostfile, "-n", str(state["nodes"] + 1)]
        extra = ["--nodes", str(state["nodes"])]
        host_of = testbed.layout.namespace
    print("measuring every pair of nodes ...", flush=True)
    graph = measure(launch, extra, timeout_seconds=args.timeout_seconds)
    write_json_atomic(os.path.join(out, "status.json"), to_node_link(graph))
    result = run_job(graph, pattern, skeleton_cmd=args.skeleton_cmd, app_cmd=args.app_cmd,
                     host_of=host_of, out_dir=out, candidates=args.candidates)
    print(f"chosen: candidate {result['chosen'] + 1}; application {result['app_seconds']:.2f} s; "
          f"results in {out}/run.json, machinefile {result['machinefile']}")
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


COMMANDS = {"demo": cmd_demo, "experiment": cmd_experiment, "testbed": cmd_testbed,
            "tc": cmd_tc, "run": cmd_run, "measure": cmd_measure, "cluster": cmd_cluster, "scenario": cmd_scenario,
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

"""Experiment commands: ``demo`` and ``experiment`` (the Figure 3 experiment of Goteti and
Subhlok on the emulated cluster) and ``run`` (the same selection for your own MPI programs)."""

import json
import os
import sys

from ..coordinator.launch import under_mpiexec
from ..errors import UserError
from ..selection import METHODS
from .common import (
    cluster_options,
    command,
    echo,
    fraction,
    load_cluster,
    on_cluster,
    output_folder,
    positive_float,
    positive_int,
    require_mpiexec,
)
from .kernel import testbed_that_is_up


def experiment_options(p, *, benchmarks, repeats, out):
    p.add_argument("--benchmarks", default=benchmarks,
                   help="comma-separated NAS benchmarks (default %(default)s)")
    p.add_argument("--methods", default=",".join(METHODS),
                   help="comma-separated selection methods (default %(default)s)")
    p.add_argument("--repeats", type=int, default=repeats,
                   help="jobs per benchmark and method (default %(default)s)")
    p.add_argument("--nprocs", type=int, default=4, help="nodes per job (default 4)")
    p.add_argument("--candidates", type=positive_int, default=3,
                   help="candidate groups tried with the skeleton (default 3)")
    p.add_argument("--app-class", choices=("S", "W", "A", "B"), default="A",
                   help="NPB class of the applications (default A, as Goteti and Subhlok; "
                        "S for a quick check)")
    p.add_argument("--app-iterations", type=positive_int, default=3,
                   help="iterations of the application actually run; its full time is "
                        "extrapolated from them (default 3)")
    p.add_argument("--full-app", action="store_true",
                   help="run the applications to their full iteration count")
    p.add_argument("--trial-iterations", type=positive_int,
                   help="cut the class-S skeleton trials to this many iterations")
    p.add_argument("--spacing-seconds", type=positive_float, default=600.0,
                   help="scenario seconds between job slots (default 600)")
    p.add_argument("--measure-interval-seconds", type=positive_float, default=600.0,
                   help="scenario seconds between measurements of every pair (default 600)")
    p.add_argument("--program", action="append", default=[], metavar="BENCH=COMMAND",
                   help="run a real MPI program (built with the mpich wheel's mpicc) as "
                        "BENCH's application, unmodified, every message paced, as in "
                        "is=./is.A.4 ({nprocs} is filled in); its trials stay BENCH's "
                        "class-S skeleton. Repeat for more benchmarks")
    p.add_argument("--no-oracle", action="store_true", help="skip the oracle reference runs")
    p.add_argument("--out", help=f"output folder; its parent must exist (default {out}, "
                                 "created as needed)")
    p.add_argument("--resume", action="store_true",
                   help="continue a stopped run in --out: keep the slots it finished and its "
                        "measurements, run the rest (the settings must be the same)")
    p.set_defaults(default_out=out)


def register(sub):
    demo = command(sub, "demo",
                   help="a short node-selection experiment on the emulated cluster "
                        "(launches mpiexec)",
                   examples=["nodesel demo", "nodesel demo --repeats 2 --out results/demo2"],
                   handler=cmd_experiment)
    cluster_options(demo, probe_kib=128)
    experiment_options(demo, benchmarks="cg,is,mg", repeats=2, out="results/demo")

    exp = command(sub, "experiment",
                  help="the Figure 3 experiment: selection methods compared (launches mpiexec)",
                  examples=["nodesel experiment --benchmarks bt,cg,is,lu,mg --methods "
                            "pattern,all-all,random \\\n      --repeats 6 --seed 1 --out "
                            "results/experiment",
                            "nodesel experiment --time-scale 1 --spacing-seconds 600   "
                            "# the paper's real timing",
                            "nodesel experiment --benchmarks cg,is --repeats 1 --app-iterations 1 "
                            "--out /tmp/tiny",
                            "nodesel experiment --out results/experiment --resume   "
                            "# after a stop"],
                  handler=cmd_experiment)
    cluster_options(exp, probe_kib=128)
    experiment_options(exp, benchmarks="bt,cg,is,lu,mg", repeats=6, out="results/experiment")
    _register_run(sub)


def _register_run(sub):
    launcher = "hostfiles/nsel-launcher"
    run = command(sub, "run",
                  help="select nodes for your own MPI programs: skeleton trials, then the app",
                  examples=["nodesel run --pattern is --nprocs 4 --skeleton-cmd './is.S.4' "
                            "--app-cmd './is.A.4'   # on the emulated cluster, no root",
                            "nodesel run --cluster hostfiles/racks12.toml --scenario s.json "
                            "--dilation 4 --pattern ring --nprocs 4 \\\n"
                            "    --skeleton-cmd './ring 5' --app-cmd './ring 200'",
                            "nodesel run --shaping tc --pattern cg --nprocs 4 \\\n"
                            f"    --skeleton-cmd 'mpiexec -launcher ssh -launcher-exec {launcher} "
                            "-f {machinefile} -n {nprocs} ./cg.S.4' \\\n"
                            f"    --app-cmd 'mpiexec -launcher ssh -launcher-exec {launcher} "
                            "-f {machinefile} -n {nprocs} ./cg.A.4'   "
                            "# on the testbed of 'nodesel testbed up'",
                            "nodesel run --hostfile hosts --pattern cg --nprocs 4 "
                            "--skeleton-cmd 'mpiexec -f {machinefile} -n {nprocs} ./cg.S.4' "
                            "--app-cmd '...'   # on a real cluster"],
                  handler=cmd_run)
    _run_options(run)


def _run_options(run):
    run.add_argument("--pattern", required=True, help="built-in pattern or pattern file")
    run.add_argument("--nprocs", type=positive_int, required=True, help="ranks of the job")
    run.add_argument("--skeleton-cmd", required=True,
                     help="command run on each candidate; {machinefile} and {nprocs} are "
                          "filled in. On the emulated cluster the program and its arguments "
                          "alone (built with the mpich wheel's mpicc): nodesel starts its "
                          "ranks on the group's nodes, every message paced")
    run.add_argument("--app-cmd", required=True, help="command run on the chosen group")
    run.add_argument("--shaping", choices=("inproc", "tc", "external"),
                     help="inproc: the emulated cluster, no root (default); tc: the namespace "
                          "testbed that is up (root); external: a real cluster, --hostfile or "
                          "the Slurm or PBS allocation this runs in (the default inside one)")
    run.add_argument("--cluster", help="with inproc: cluster file (TOML/JSON, SimGrid XML) or "
                                       "hostfile; default the 10-node crossbar")
    run.add_argument("--nodes", type=positive_int, help="with inproc: the first N nodes")
    run.add_argument("--scenario", help="with inproc: scenario file; default the stream model "
                                        "of --seed")
    run.add_argument("--seed", type=int, default=1,
                     help="seed of the default stream-model scenario (default 1)")
    run.add_argument("--time-scale", type=positive_float, default=10.0,
                     help="with inproc: scenario seconds per emulated second (default 10)")
    run.add_argument("--dilation", type=positive_float, default=1.0,
                     help="with inproc: one emulated second lasts K wall seconds (default 1)")
    run.add_argument("--candidates", type=positive_int, default=3,
                     help="candidate groups tried with the skeleton command (default 3)")
    run.add_argument("--hostfile", help="a real cluster's hostfile, for --shaping external "
                                        "(default there: the nodes of the Slurm or PBS "
                                        "allocation this runs in)")
    run.add_argument("--testbed-name", default="nsel",
                     help="with --shaping tc: the testbed that is up (default nsel)")
    run.add_argument("--state-dir", default="/run/nodesel",
                     help="where that testbed's state is (default /run/nodesel)")
    run.add_argument("--threshold", type=fraction, default=0.1,
                     help="dominance threshold for matrix pattern files (default 0.1)")
    run.add_argument("--out", help="output folder; its parent must exist (default results/run, "
                                   "created as needed)")
    run.add_argument("--timeout-seconds", type=positive_float, default=600.0,
                     help="limit for each step: the measurement, each skeleton trial, the "
                          "application; a step that outlives it is killed and named (default "
                          "600)")


def experiment_config(args):
    from ..experiments.figure3 import ExperimentConfig
    from ..network import cluster as clusters

    def names(text):
        return tuple(x.strip().lower() for x in text.split(",") if x.strip())

    config = ExperimentConfig(
        benchmarks=names(args.benchmarks), methods=names(args.methods), repeats=args.repeats,
        seed=args.seed, nprocs=args.nprocs, candidates=args.candidates,
        app_class=args.app_class, app_iterations=None if args.full_app else args.app_iterations,
        trial_iterations=args.trial_iterations, spacing_seconds=args.spacing_seconds,
        measure_interval_seconds=args.measure_interval_seconds, probe_bytes=args.probe_bytes,
        oracle=not args.no_oracle, time_scale=args.time_scale,
        programs=_programs(args.program, args.nprocs))
    cluster = load_cluster(args.cluster, args.nodes)
    config.validate(len(clusters.node_names(cluster)))
    return config, output_folder(args.out, args.default_out)


def _programs(given, nprocs):
    """``{benchmark: argv}`` of the ``--program BENCH=COMMAND`` options."""
    from ..experiments.userjob import program_argv

    programs = {}
    for text in given:
        name, sep, template = text.partition("=")
        if not sep or not name.strip() or not template.strip():
            raise UserError(f"--program {text!r}: give BENCH=COMMAND, as in is=./is.A.4")
        programs[name.strip().lower()] = tuple(program_argv(template, nprocs=nprocs))
    return programs


def cmd_experiment(args):
    config, out = experiment_config(args)
    started = __import__("time").time()

    def program(coordinator):
        from ..experiments.figure3 import Experiment
        from ..experiments.report import markdown_table

        names = coordinator.names
        echo(f"cluster: {len(names)} nodes ({coordinator.settings.cluster.graph['topology']}); "
             f"scenario: {coordinator.settings.timeline.meta.get('kind')}, time scale "
             f"{config.time_scale:g}; {len(config.slots())} slots x "
             f"{len(config.methods)} methods of {config.nprocs}-node jobs", file=sys.stderr)
        summary = Experiment(coordinator, config, out, echo=echo).run(resume=args.resume)
        echo(markdown_table(summary))
        for event in summary["failures"]:
            echo(f"failure: slot {event['slot']} {event['method']}: {event['error']}")
        echo(f"results in {out}: jobs.csv, summary.json, table.md, figure3.png "
             f"({summary['wall_seconds']:.0f} s)")
        return summary

    status = on_cluster(args, program, scenario_seconds=config.scenario_seconds())
    if status and not under_mpiexec():
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


def cmd_run(args):
    from ..experiments.userjob import (UserJob, command_argv, measure, program_argv,
                                      run_job)
    from ..files import write_json_atomic
    from ..network.allocation import allocation_hosts
    from ..network.netgraph import to_node_link
    from ..selection.patternfile import resolve_pattern

    pattern = resolve_pattern(args.pattern, args.nprocs, threshold=args.threshold)
    for template in (args.skeleton_cmd, args.app_cmd):
        command_argv(template, machinefile="m", nprocs=args.nprocs)  # splits cleanly
    if args.out is None:
        os.makedirs("results/run", exist_ok=True)
    out = os.path.abspath(args.out or "results/run")
    if not os.path.isdir(os.path.dirname(out)):
        raise UserError(f"the parent of the output folder, {os.path.dirname(out)}, does not exist")
    os.makedirs(out, exist_ok=True)
    found = None if args.hostfile or args.shaping in ("inproc", "tc") else allocation_hosts()
    shaping = args.shaping or ("external" if args.hostfile or found else "inproc")
    if shaping == "external" and not (args.hostfile or found):
        raise UserError("--shaping external needs --hostfile (or to run inside a Slurm or PBS "
                        "allocation)")
    if args.hostfile and shaping != "external":
        raise UserError("--hostfile names a real cluster's hosts (--shaping external); give "
                        "the emulated cluster as --cluster")
    given = [o for o, v in (("--cluster", args.cluster), ("--nodes", args.nodes),
                            ("--scenario", args.scenario)) if v is not None]
    if given and shaping != "inproc":
        network = "the testbed's" if shaping == "tc" else "the real one"
        raise UserError(f"{given[0]} describes the emulated cluster (--shaping inproc); with "
                        f"--shaping {shaping} the network is {network}")
    emulated = None
    if shaping == "inproc":
        for template in (args.skeleton_cmd, args.app_cmd):
            program_argv(template, nprocs=args.nprocs)  # a program, not a launch
        launch, extra, host_of, emulated = _emulated_run(args, out)
    elif shaping == "external":
        launch, extra, host_of = _real_cluster_run(args, out, found)
    else:
        launch, extra, host_of = _testbed_run(args)
    print("measuring every pair of nodes ...", flush=True)
    graph = measure(launch, extra, timeout_seconds=args.timeout_seconds,
                    shaping="inproc" if emulated else "external")
    write_json_atomic(os.path.join(out, "status.json"), to_node_link(graph))
    job = UserJob(args.skeleton_cmd, args.app_cmd, candidates=args.candidates,
                  timeout_seconds=args.timeout_seconds)
    result = run_job(graph, pattern, job, host_of=host_of, out_dir=out, emulated=emulated)
    unit = "s emulated" if emulated else "s"
    print(f"chosen: candidate {result['chosen'] + 1}; application {result['app_seconds']:.2f} "
          f"{unit}; results in {out}/run.json; the placement as {result['machinefile']} (MPICH), "
          f"{result['rankfile']} (Open MPI) and {result['nodelist']} (srun --nodelist)")
    return 0


def _emulated_run(args, out):
    """The measurement's launch on the emulated cluster, and where the programs run: the
    same cluster and scenario (written to ``out/scenario.json``), going on from the
    measurement's launch."""
    import time

    from ..coordinator.launch import cleanup_flags
    from ..experiments.userjob import EmulatedCluster
    from ..network import cluster as clusters
    from ..network.scenario import default_timeline, load_scenario
    from .common import DEFAULT_SCENARIO_SECONDS

    cluster = load_cluster(args.cluster, args.nodes)
    timeline = load_scenario(args.scenario, cluster) if args.scenario else \
        default_timeline(cluster, seed=args.seed, duration_seconds=DEFAULT_SCENARIO_SECONDS)
    scenario = os.path.join(out, "scenario.json")
    timeline.write(scenario)
    n = len(clusters.node_names(cluster))
    launch = [require_mpiexec(), *cleanup_flags(one_host=True), "-n", str(n + 1)]
    extra = (["--cluster", os.path.abspath(args.cluster)] if args.cluster else []) + \
        (["--nodes", str(args.nodes)] if args.nodes else []) + \
        ["--scenario", scenario, "--time-scale", repr(args.time_scale),
         "--dilation", repr(args.dilation)]
    emulated = EmulatedCluster(cluster, timeline, time.time(), time_scale=args.time_scale,
                               dilation=args.dilation)
    return launch, extra, (lambda node: node), emulated


def _real_cluster_run(args, out, found):
    """The measurement's launch over a real cluster's hosts (``--hostfile``, or the batch
    allocation ``found``)."""
    from ..coordinator.launch import cleanup_flags
    from ..files import write_text_atomic
    from ..network import cluster as clusters

    hosts = list(clusters.parse_hostfile(args.hostfile) if args.hostfile else found[1])
    if found:
        print(f"the allocation's {len(hosts)} nodes ({found[0]})", flush=True)
    machinefile = os.path.join(out, "measure.machinefile")
    # rank 0 (the coordinator) shares the first host with node 1
    write_text_atomic(machinefile, f"{hosts[0]}:2\n" + "".join(f"{h}:1\n" for h in hosts[1:]))
    launch = [require_mpiexec(), *cleanup_flags(one_host=len(set(hosts)) == 1), "-f",
              machinefile, "-n", str(len(hosts) + 1)]
    if args.hostfile:
        extra = ["--cluster", os.path.abspath(args.hostfile)]
    else:
        allocated = os.path.join(out, "allocation.hosts")
        write_text_atomic(allocated, "".join(f"{h}:{n}\n" for h, n in found[1].items()))
        extra = ["--cluster", allocated]
    return launch, extra, (lambda node: node)


def _testbed_run(args):
    """The measurement's launch on the namespace testbed that is up."""
    from ..coordinator.launch import cleanup_flags

    testbed, state = testbed_that_is_up(args.testbed_name, args.state_dir)
    files = {os.path.basename(f): f for f in state.get("files", [])}
    launcher = files.get(f"{args.testbed_name}-launcher")
    hostfile = files.get(f"{args.testbed_name}.hosts")
    if not launcher or not hostfile:
        raise UserError(f"testbed {args.testbed_name!r} has no launcher and hostfile; bring "
                        "it up with 'nodesel testbed up --out DIR'")
    launch = [require_mpiexec(), *cleanup_flags(one_host=False), "-launcher", "ssh",
              "-launcher-exec", launcher, "-f", hostfile, "-n", str(state["nodes"] + 1)]
    # addresses: mpiexec resolves no name
    return launch, ["--nodes", str(state["nodes"])], testbed.layout.ip

"""The ``batch`` and ``batch-experiment`` commands: the coordinator as the batch scheduler of
a non-dedicated emulated cluster, with CISNE turnaround estimation (Hanzich et al.)."""

import os

from ..errors import UserError
from .common import cluster_options, command, echo, fraction, on_cluster, output_folder, \
    positive_float, positive_int

DEFAULT_NODES = 16  # Hanzich et al.'s cluster: 16 nodes, 512 MB, a 100 Mbit/s switch
# Iteration caps that keep every class-A job within about 3 to 12 s on the emulator's
# shared network (the others run their full class count: MG 4, FT 6, EP 1).
DEFAULT_ITERATIONS = {"bt": 6, "cg": 6, "is": 4, "lu": 20, "sp": 30}
DEFAULT_GAP_SECONDS = 1.0


def _common(p):
    p.add_argument("--jobs", help="jobs file (CSV, TOML or SWF; a job's 'command' runs a "
                                  "real MPI program in place of a skeleton); default: Hanzich "
                                  "et al.'s workload, generated")
    p.add_argument("--job-count", type=positive_int, default=30,
                   help="generated jobs per run (default 30)")
    p.add_argument("--mean-gap-seconds", type=positive_float, default=DEFAULT_GAP_SECONDS,
                   help="mean Poisson inter-arrival time of generated jobs (default "
                        f"{DEFAULT_GAP_SECONDS:g}; Hanzich et al. used 15 s with jobs of minutes)")
    p.add_argument("--class", dest="npb_class", default="A", choices=("S", "W", "A", "B"),
                   help="NPB class the jobs run (default A)")
    p.add_argument("--iterations", default=",".join(f"{k}={v}" for k, v in
                                                    DEFAULT_ITERATIONS.items()),
                   help="iteration caps per benchmark, e.g. bt=12,lu=20 ('none': every "
                        "class's full count; default %(default)s)")
    p.add_argument("--order", default=None,
                   help="the queue order under the JSP: fcfs (default), sjf, lwf, fairshare, "
                        "or FILE.py:NAME (see nodesel schedule --help)")
    p.add_argument("--mpl", type=positive_int, default=4,
                   help="parallel jobs a node runs at once (default 4, Hanzich et al.'s)")
    p.add_argument("--fail-jobs", action="store_true",
                   help="a job whose node dies is marked failed (default: requeued)")
    p.add_argument("--cache", help="characterization cache (JSON; default "
                                   "OUT/characterization.json)")
    p.add_argument("--out", help="output folder; its parent must exist")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--list-jobs", action="store_true",
                   help="print the jobs a run would play (CSV, first repeat) and stop, "
                        "without starting the cluster")
    cluster_options(p, default_nodes=DEFAULT_NODES)


def register(sub):
    b = command(sub, "batch",
                help="run the emulated cluster as a batch scheduler: jobs arrive, queue, "
                     "time-share nodes with local users; every arrival's turnaround estimated "
                     "by CISNE's on-the-fly simulation (Hanzich et al.)",
                examples=["nodesel batch --nodes 16 --jsp fcfs --nsp uniform "
                          "--loaded-fraction 0.25 --mpl 4 --out results/batch",
                          "nodesel batch --jobs jobs.csv --jsp easy --nsp normal",
                          "nodesel batch --nodes 4 --jobs programs.toml   # command = "
                          "[\"./is.S.4\"]",
                          "nodesel batch --nodes 6 --job-count 4 --loaded-fraction 0.17 "
                          "--class S   # a tiny run"],
                handler=cmd_batch)
    b.add_argument("--jsp", choices=("fcfs", "easy"), default="fcfs",
                   help="job selection: FCFS or EASY backfilling (default fcfs)")
    b.add_argument("--nsp", choices=("normal", "uniform", "basic", "random", "pattern",
                                     "predicted"),
                   default="normal", help="node selection (default normal; basic is "
                                          "Normal+FCFS with an MPL of 1; predicted: Normal's or "
                                          "Uniform's nodes, whichever Algorithm 1 predicts the "
                                          "shorter turnaround on, with net-net or the first "
                                          "--estimators)")
    b.add_argument("--loaded-fraction", type=fraction, default=0.25,
                   help="share of nodes with a local user (default 0.25)")
    b.add_argument("--estimators", default="all",
                   help="Algorithm 1 estimators run at each arrival, comma-separated: "
                        "prop-mpl, prop-cpu, mpl-mpl, mpl-cpu, cpu-mpl, cpu-cpu, net-net, or "
                        "all (default all, to compare them; a scheduler needs one)")
    _common(b)
    e = command(sub, "batch-experiment",
                help="Hanzich et al.'s Fig. 3 and Table 1: turnaround deviation of every estimator "
                     "for every policy and local load",
                examples=["nodesel batch-experiment --loaded-fractions 0.25,0.5,1 --policies "
                          "normal+fcfs,uniform+fcfs,normal+easy,uniform+easy,basic --repeats 1 "
                          "--out results/batch-experiment",
                          "nodesel batch-experiment --repeats 3 --resume --out "
                          "results/batch-experiment",
                          "nodesel batch-experiment --quick"],
                handler=cmd_experiment)
    e.add_argument("--loaded-fractions", default="0.25,0.5,1",
                   help="shares of nodes with a local user (default 0.25,0.5,1)")
    e.add_argument("--policies", default="normal+fcfs,uniform+fcfs,normal+easy,uniform+easy,"
                                         "basic",
                   help="NSP+JSP pairs (default: Hanzich et al.'s five)")
    e.add_argument("--repeats", type=positive_int, default=1,
                   help="runs of each cell, each with its own generated jobs (default 1)")
    e.add_argument("--quick", action="store_true",
                   help="a short experiment: 8 nodes, 12 jobs of class W, 25%% and 100%% "
                        "loaded, normal+fcfs, uniform+fcfs and normal+easy")
    e.add_argument("--resume", action="store_true",
                   help="keep the runs already complete in --out (same settings, --cpu and "
                        "--dilation; an interrupted experiment goes on, or more repeats, "
                        "policies or loads are added) and play only the others")
    _common(e)


def _iterations(text):
    if text.strip().lower() in ("none", ""):
        return {}
    out = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        name = name.strip().lower()
        try:
            n = int(value)
        except ValueError:
            n = 0
        if not name or n < 1:
            raise UserError(f"--iterations takes BENCHMARK=N pairs such as bt=12, got {part!r}")
        out[name] = n
    return out


def _estimators(text):
    from ..batch.cisne import ESTIMATORS

    if text.strip().lower() == "all":
        return ESTIMATORS
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in ESTIMATORS]
    if not names or unknown or len(set(names)) != len(names):
        raise UserError(f"--estimators takes names from {', '.join(ESTIMATORS)} (each once) "
                        f"or all, got {text!r}")
    return tuple(names)


def _fractions(text):
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(not 0 <= v <= 1 for v in values):
        raise UserError(f"--loaded-fractions takes shares in 0..1 such as 0.25,0.5,1, got "
                        f"{text!r}")
    return values


def _cluster(args):
    from ..network.cluster import crossbar
    from .common import load_cluster

    if args.cluster:
        return load_cluster(args.cluster, args.nodes)
    return crossbar(args.nodes or DEFAULT_NODES)


def _prepare(args, *, quick=False):
    from ..batch.jobs import check_fits, read_jobs
    from ..batch.programs import check_shaping
    from ..network import cluster as clusters

    if quick:
        args.nodes = args.nodes or 8
        args.job_count = 12
        args.npb_class = "W"
    cluster = _cluster(args)
    n = len(clusters.node_names(cluster))
    jobs = None
    if args.jobs:
        jobs = read_jobs(args.jobs, npb_class=args.npb_class)
        check_shaping(jobs, args.shaping)
        names = clusters.node_names(cluster)
        check_fits(jobs, n, path=args.jobs, names=names,
                   memory_mb=[cluster.nodes[v]["memory_mb"] for v in names])
    return cluster, jobs


def _list_jobs(args, jobs, cluster):
    from ..batch.jobs import generate_jobs, write_jobs_csv
    from ..network import cluster as clusters

    if jobs is None:
        jobs = generate_jobs(args.job_count, seed=args.seed,
                             mean_gap_seconds=args.mean_gap_seconds, npb_class=args.npb_class,
                             max_tasks=len(clusters.node_names(cluster)))
    echo(write_jobs_csv(jobs), end="")
    return 0


def _run(args, *, policies, fractions, repeats, default_out, quick=False, resume=False):
    from ..batch.experiment import ExperimentPlan, run_experiment
    from ..batch.live import BatchSettings

    cluster, jobs = _prepare(args, quick=quick)
    if args.list_jobs:
        return _list_jobs(args, jobs, cluster)
    iterations = _iterations(args.iterations)
    estimators = _estimators(getattr(args, "estimators", "all"))
    out = output_folder(args.out, default_out)
    cache = args.cache or os.path.join(out, "characterization.json")
    if args.order is not None:
        from ..scheduling.orders import make_order

        make_order(args.order)  # a bad order fails before any work
    base = BatchSettings(mpl=args.mpl, npb_class=args.npb_class, iterations=iterations,
                         order=args.order,
                         requeue=not args.fail_jobs, seed=args.seed,
                         estimators=estimators)
    # characterizations hold for one network: the same cluster file, scenario and clock
    network_id = (f"{os.path.abspath(args.cluster) if args.cluster else 'crossbar'}:"
                  f"{args.nodes}:{os.path.abspath(args.scenario) if args.scenario else args.seed}"
                  f":{args.time_scale:g}:{args.shaping}:{args.cpu}")

    def program(coordinator):
        plan = ExperimentPlan(policies, fractions, repeats, jobs=jobs,
                              job_count=args.job_count, mean_gap_seconds=args.mean_gap_seconds,
                              base=base, cache_path=cache, network_id=network_id,
                              probe_bytes=args.probe_bytes)
        summary = run_experiment(coordinator, plan, out, progress=not args.no_progress,
                                 echo=echo, resume=resume)
        from ..batch.report import table_md

        echo(table_md(summary), end="")
        count = len(base.estimators)
        echo(f"estimation: {summary['estimation_ms']:.3f} ms per Algorithm 1 run (median "
             f"{summary['estimation_ms_median']:.3f}, CPU {summary['estimation_cpu_ms']:.3f}), "
             f"{summary['estimation_ms_per_arrival']:.3f} ms per arrival ({count} "
             f"estimator{'s' if count > 1 else ''})" if summary["estimation_ms"] else
             "no estimates made (no run played)")
        each = summary["estimation_ms_per_estimator"]
        if each:
            echo(f"every run: {each['mean']:.3f} ms per estimator per arrival (median "
                 f"{each['median']:.3f}; {100 * each['within_1ms_share']:.0f}% within 1 ms)")
        echo(f"results in {out}")
        return summary

    # a batch run waits on jobs for as long as they run; a node is silent only if dead
    args.timeout_seconds = max(args.timeout_seconds, 60.0)
    return on_cluster(args, program, cluster=cluster, scenario_seconds=7200.0)


def cmd_batch(args):
    from ..batch.experiment import policy_label

    return _run(args, policies=[policy_label(args.nsp, args.jsp)],
                fractions=[args.loaded_fraction], repeats=1, default_out="results/batch")


def cmd_experiment(args):
    from ..batch.experiment import parse_policy

    if args.quick:
        policies = ["normal+fcfs", "uniform+fcfs", "normal+easy"]
        fractions = [0.25, 1.0]
    else:
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        fractions = _fractions(args.loaded_fractions)
    for p in policies:
        parse_policy(p)
    return _run(args, policies=policies, fractions=fractions, repeats=args.repeats,
                default_out="results/batch-experiment", quick=args.quick, resume=args.resume)

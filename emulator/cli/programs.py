"""``nodesel mpiexec``: an unmodified MPI program on the emulated cluster, without root."""

import argparse
import sys

from ..errors import UserError
from .common import command, echo, load_cluster, positive_float, positive_int

EXAMPLES = [
    "nodesel mpiexec -n 4 -- ./is.S.4          NPB IS on the first 4 nodes of the 10-node "
    "crossbar",
    "nodesel mpiexec -n 4 --cluster hostfiles/racks12.toml --hosts r1n1,r1n2,r2n1,r2n2 "
    "--dilation 8 -- ./a.out 100",
    "nodesel mpiexec -n 2 --hosts 'n[1-2]' --report run.json -- ./pingpong",
    "nodesel mpiexec -n 4 -- ./is.A.4 : -n 4 -- ./is.A.4     two programs sharing 4 nodes",
]


def register(sub):
    p = command(sub, "mpiexec", handler=cmd_mpiexec, examples=EXAMPLES,
                help="run an unmodified MPI program (built with the mpich wheel's mpicc) as "
                     "one job on the emulated cluster, every message paced by its model, "
                     "without root")
    p.add_argument("-n", dest="n", type=positive_int, required=True, metavar="N",
                   help="ranks of the program")
    p.add_argument("--hosts",
                   help="the node of each rank, a Slurm hostlist (n[1-4],n7; a node may "
                        "repeat); default the cluster's first N nodes")
    p.add_argument("--cluster", help="cluster file (TOML/JSON) or hostfile; default the "
                                     "10-node crossbar")
    p.add_argument("--scenario", help="scenario file (competing traffic over time); default "
                                      "the network alone")
    p.add_argument("--time-scale", type=positive_float, default=1.0,
                   help="scenario seconds per emulated second (default 1)")
    p.add_argument("--dilation", type=positive_float, default=1.0,
                   help="one emulated second lasts K wall seconds: bandwidths divided by K, "
                        "latencies multiplied by K; MPI_Wtime reads emulated seconds. The "
                        "program's own computing is not slowed: it counts K times less "
                        "(default 1)")
    p.add_argument("--timeout-seconds", type=positive_float, default=3600.0,
                   help="a rank that waits this long for a message ends the job (default 3600)")
    p.add_argument("--report", help="write how the job ran (JSON): its status, wall and "
                                    "emulated seconds, each rank's paced messages")
    p.add_argument("program", nargs=argparse.REMAINDER,
                   help="-- then the program and its arguments; ' : -n N [--hosts H] -- "
                        "PROGRAM ...' runs one more program at once, sharing the network")


def _hosts(text):
    import hostlist

    try:
        return hostlist.expand_hostlist(text, allow_duplicates=True)
    except hostlist.BadHostlist as e:
        raise UserError(f"--hosts {text!r} is not a hostlist: {e}") from None


class _Quiet(argparse.ArgumentParser):
    """The options of a program after ':', whose mistakes are the command's one line."""

    def error(self, message):
        raise UserError(f"after ':' give -n N [--hosts H] -- PROGRAM ({message})")


def _jobs(args, names):
    """``[(rank_nodes, argv)]`` of the command line: its program, then one per ``:``."""
    from ..interpose.job import rank_nodes_for

    parts, current = [], []
    for word in args.program:
        if word == ":":
            parts.append(current)
            current = []
        else:
            current.append(word)
    parts.append(current)
    jobs = []
    for i, part in enumerate(parts):
        n, hosts = args.n, args.hosts
        if i:  # -n N [--hosts H] -- PROGRAM ARGS
            extra = _Quiet(prog="nodesel mpiexec ... :", add_help=False)
            extra.add_argument("-n", dest="n", type=positive_int, required=True)
            extra.add_argument("--hosts")
            cut = part.index("--") if "--" in part else len(part)
            found = extra.parse_args(part[:cut])
            n, hosts, part = found.n, found.hosts, part[cut:]
        program = part[1:] if part[:1] == ["--"] else part
        if not program:
            raise UserError("no program: give it after --, as in nodesel mpiexec -n 4 -- ./a.out")
        jobs.append((rank_nodes_for(names, n, _hosts(hosts) if hosts else None), program))
    return jobs


def cmd_mpiexec(args):
    from ..files import write_json_atomic
    from ..interpose.job import ProgramOptions, run_programs
    from ..network import cluster as clusters
    from ..network.scenario import full_capacity_timeline, load_scenario

    cluster = load_cluster(args.cluster)
    jobs = _jobs(args, clusters.node_names(cluster))
    timeline = load_scenario(args.scenario, cluster) if args.scenario \
        else full_capacity_timeline(cluster)
    runs = run_programs(cluster, timeline, jobs, ProgramOptions(
        dilation=args.dilation, time_scale=args.time_scale,
        timeout_seconds=args.timeout_seconds))
    for run in runs:
        for error in run.errors:  # why the library ended a job
            echo(f"nodesel: {error}", file=sys.stderr)
    status = next((run.status for run in runs if run.status), 0)
    if args.report:
        reports = [dict(run.to_json(), nodes=nodes, program=program)
                   for run, (nodes, program) in zip(runs, jobs)]
        report = dict(reports[0], dilation=args.dilation) if len(runs) == 1 else \
            {"status": status, "dilation": args.dilation, "jobs": reports}
        write_json_atomic(args.report, report)
        echo(f"nodesel: wrote {args.report}", file=sys.stderr)
    return status

"""Selection commands: ``select`` (candidate node groups for a job), ``patterns`` (the pattern
library) and ``trace`` (record a skeleton's traffic as a pattern)."""

import json
import os
import subprocess
import sys

from ..errors import UserError
from .common import (actions, command, fraction, positive_float, positive_int,
                     require_mpiexec)

CLASSES = ("S", "W", "A", "B")


def register(sub):
    sel = command(sub, "select", help="select node groups for a job",
                  examples=["nodesel select --network G.json --pattern cg --nprocs 4",
                            "nodesel select --network G.json --pattern cg --nprocs 4 "
                            "--candidates 3 --method pattern --seed 1",
                            "nodesel select --network G.json --pattern cg --nprocs 4 --out place/"
                            "   # inside a Slurm or PBS job: only its nodes"],
                  handler=cmd_select)
    sel.add_argument("--network", required=True, help="network status graph (node-link JSON)")
    sel.add_argument("--pattern", required=True, help="built-in pattern name or pattern file")
    sel.add_argument("--nprocs", type=int, help="number of ranks (needed for built-in patterns)")
    sel.add_argument("--candidates", type=positive_int, default=3,
                     help="how many distinct groups to return, best first (default 3)")
    sel.add_argument("--method", choices=("pattern", "all-all", "random"), default="pattern",
                     help="pattern: max-min over the pattern's edges (default); all-all: over "
                          "every pair of the group; random: any group")
    sel.add_argument("--seed", type=int, default=None, help="seed of --method random")
    sel.add_argument("--class", dest="npb_class", default="A", choices=CLASSES,
                     help="NAS problem class of a built-in pattern: sets its bytes (default A)")
    sel.add_argument("--threshold", type=fraction, default=0.1,
                     help="dominance threshold for matrix pattern files (default 0.1)")
    sel.add_argument("--time-budget-seconds", type=positive_float, default=5.0,
                     help="past this, return the best found, marked \"exact\": false (default 5)")
    sel.add_argument("--out", help="write the best group as machinefile (MPICH), rankfile "
                                   "(Open MPI) and nodelist (srun --nodelist) in this folder")

    tr = command(sub, "trace", help="trace a skeleton's traffic into a pattern (launches mpiexec)",
                 examples="nodesel trace cg --nprocs 4 --class S --out cg4.json --plot cg4.png",
                 handler=cmd_trace)
    tr.add_argument("benchmark", help="NAS benchmark: bt, cg, ep, ft, is, lu, mg or sp")
    tr.add_argument("--nprocs", type=int, required=True, help="number of ranks")
    tr.add_argument("--class", dest="npb_class", default="S", help="NAS problem class (default S)")
    tr.add_argument("--out", required=True, help="matrix JSON; CSV and .pattern.json beside it")
    tr.add_argument("--plot", help="Figure-2-style PNG")
    tr.add_argument("--iterations", type=positive_int, help="cut the run to this many iterations")

    psub = actions(sub, "patterns", help="communication pattern library",
                   examples=["nodesel patterns list", "nodesel patterns show cg --nprocs 4"])
    command(psub, "list", help="list built-in patterns", examples="nodesel patterns list",
            handler=cmd_patterns)
    pshow = command(psub, "show", help="print a pattern as node-link JSON",
                    examples=["nodesel patterns show cg --nprocs 4",
                              "nodesel patterns show bt --nprocs 9 --class S"],
                    handler=cmd_patterns)
    pshow.add_argument("name", help="built-in pattern name (see 'nodesel patterns list')")
    pshow.add_argument("--nprocs", type=int, required=True, help="number of ranks")
    pshow.add_argument("--class", dest="npb_class", default="A", choices=CLASSES,
                       help="NAS problem class: sets the edges' bytes (default A)")


def cmd_select(args):
    from ..network.allocation import allocation_hosts, write_placement
    from ..network.netgraph import read_graph
    from ..selection.maxmin import all_all_select, max_min_select, random_select
    from ..selection.patternfile import resolve_pattern

    network = read_graph(args.network)
    found = allocation_hosts()
    if found:  # inside a batch job: only the nodes it was given
        source, hosts = found
        outside = [n for n, k in network.nodes(data="kind") if k == "compute" and n not in hosts]
        network.remove_nodes_from(outside)
        if not any(k == "compute" for _, k in network.nodes(data="kind")):
            raise UserError(f"{args.network}: none of the allocation's nodes ({source}) is in "
                            "the network")
        print(f"nodesel: the allocation's nodes only ({source}; {len(outside)} others left "
              "out)", file=sys.stderr)
    if args.out and not os.path.isdir(args.out):
        raise UserError(f"output folder {args.out} does not exist")
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
    if args.out and result.candidates:
        best = result.candidates[0].mapping
        paths = write_placement(args.out, [best[r] for r in sorted(best)])
        print(f"nodesel: wrote {', '.join(paths.values())}", file=sys.stderr)
    return 0


def cmd_patterns(args):
    from ..network.netgraph import to_node_link
    from ..selection.patterns import builtin_pattern, describe_patterns

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
    argv = [require_mpiexec(), "-n", str(args.nprocs), sys.executable, "-m", "skeletons",
            args.benchmark.lower(), "--class", args.npb_class, "--trace", args.out]
    if args.plot:
        argv += ["--plot", args.plot]
    if args.iterations:
        argv += ["--iterations", str(args.iterations)]
    return subprocess.call(argv)

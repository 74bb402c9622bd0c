"""``python -m skeletons``: run one skeleton under mpiexec, or list them.

    mpiexec -n 4 python -m skeletons cg --class S [--json]
    python -m skeletons list
"""

import argparse
import json
import sys

from mpi4py import MPI

from emulator.errors import ProcessCountError

from . import check, describe, run


def parser():
    p = argparse.ArgumentParser(
        prog="python -m skeletons", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="NAS-like communication skeletons (class S) and application stand-ins (A).",
        epilog="examples:\n  mpiexec -n 4 python -m skeletons cg --class S --json\n"
               "  python -m skeletons list")
    p.add_argument("benchmark", help="bt, cg, ep, ft, is, lu, mg, sp, or 'list'")
    p.add_argument("--class", dest="npb_class", default="S")
    p.add_argument("--compute", choices=("modeled", "real"), default="modeled")
    p.add_argument("--iterations", type=int, help="run at most this many iterations")
    p.add_argument("--json", action="store_true", help="one JSON object on rank 0")
    p.add_argument("--trace", metavar="OUT.json",
                   help="record traffic: matrix JSON and CSV, and the pattern (OUT.pattern.json)")
    p.add_argument("--plot", metavar="OUT.png", help="with --trace: a Figure-2-style picture")
    return p


def main(argv=None):
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    args = parser().parse_args(argv)
    if args.benchmark == "list":
        if rank == 0:
            print(f"{'name':<6}{'classes':<10}process counts")
            for name, classes, counts in describe():
                print(f"{name:<6}{classes:<10}{counts}")
        return 0
    name = args.benchmark.lower()
    try:  # every rank checks the same thing, so every rank leaves together
        describe()
        check(name, args.npb_class, comm.Get_size())
        if args.iterations is not None and args.iterations < 1:
            raise ValueError("--iterations must be >= 1")
    except (ValueError, ProcessCountError) as e:
        if rank == 0:
            print(f"skeletons: error: {e}", file=sys.stderr)
        return 2
    if args.trace:
        from .recorder import RecordingComm

        recorder = RecordingComm(comm)
        result = run(name, recorder, args.npb_class, compute=args.compute,
                     iterations=args.iterations)
        gathered = recorder.gather()
        if rank == 0:
            from .recorder import plot_pattern, write_trace

            files, pattern = write_trace(args.trace, *gathered, benchmark=name,
                                         npb_class=args.npb_class, iterations=result.iterations)
            if args.plot:
                plot_pattern(pattern, args.plot, f"{name.upper()} class {args.npb_class}, "
                             f"{comm.Get_size()} ranks (traced)")
            print(f"wrote {', '.join(files.values())}" + (f", {args.plot}" if args.plot else ""),
                  file=sys.stderr)
    else:
        result = run(name, comm, args.npb_class, compute=args.compute, iterations=args.iterations)
    results = comm.gather(result.to_json(), root=0)
    if rank == 0:
        summary = {"benchmark": name, "class": args.npb_class, "nprocs": comm.Get_size(),
                   "seconds": max(r["seconds"] for r in results), "ranks": results}
        if args.json:
            print(json.dumps(summary))
        else:
            print(f"{name.upper()} class {args.npb_class} on {comm.Get_size()} ranks: "
                  f"{summary['seconds']:.3f} s, {results[0]['iterations']} iterations")
            print(f"{'rank':>4}{'bytes sent':>14}{'messages':>10}  phases [s]")
            for r in results:
                phases = ", ".join(f"{k} {v:.3f}" for k, v in sorted(r["phases"].items()))
                print(f"{r['rank']:>4}{r['bytes_sent']:>14}{r['messages_sent']:>10}  {phases}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

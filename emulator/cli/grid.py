"""The ``grid`` command: load sharing across the sites of a grid file (England and
Weissman), replicated, with paired-t intervals; replications spread over the ranks of
``mpiexec -n K``."""

import os
import sys

from ..errors import UserError
from .common import command, output_folder, positive_float, positive_int


def register(sub):
    g = command(sub, "grid",
                help="simulate load sharing between the sites of a grid: every site's own "
                     "scheduler, migratable jobs moved at arrival, slowdown of local and "
                     "remote jobs over replications (England and Weissman)",
                examples=["nodesel grid --grid hostfiles/grid-homogeneous.toml --sharing "
                          "0,25,50,75,100 --replications 20 --out results/grid-homogeneous",
                          "nodesel grid --grid hostfiles/grid-heterogeneous.toml --targets "
                          "shortest-queue,weighted-queue,predicted-start --replications 10",
                          "nodesel grid --grid hostfiles/grid-sdsc-ctc.toml --targets "
                          "shortest-queue --replications 20 --out results/grid-sdsc-ctc",
                          "mpiexec -n 2 nodesel grid --grid G.toml --replications 20   "
                          "# replications spread over 2 ranks"],
                handler=cmd_grid)
    g.add_argument("--grid", required=True, help="the grid file (TOML)")
    g.add_argument("--sharing", default="0,25,50,75,100",
                   help="load-sharing levels: the percent of jobs flagged migratable "
                        "(default 0,25,50,75,100)")
    g.add_argument("--targets", default="shortest-queue,weighted-queue",
                   help="how a moving job picks its site: shortest-queue, weighted-queue, "
                        "predicted-start (its forecast with the requested times; "
                        "predicted-start:last2 with the users' last two run times); "
                        "comma-separated (default shortest-queue,weighted-queue)")
    g.add_argument("--replications", type=positive_int, default=20,
                   help="independent replications, each with its own workloads (default 20)")
    g.add_argument("--jobs-per-site", type=positive_int,
                   help="jobs sampled per site and replication (default: the grid file's)")
    g.add_argument("--span-days", type=positive_float,
                   help="instead, every model site samples the jobs of this many days of its "
                        "arrivals (default: the grid file's)")
    g.add_argument("--seed", type=int, default=1, help="base seed (default 1)")
    g.add_argument("--out", help="output folder; its parent must exist (default results/grid,"
                                 " created as needed)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")


def _levels(text):
    try:
        levels = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise UserError(f"--sharing takes whole percents such as 0,25,50, got {text!r}") \
            from None
    if not levels or any(not 0 <= v <= 100 for v in levels):
        raise UserError(f"--sharing levels must lie in 0..100, got {text!r}")
    return levels


def _targets(text):
    from ..grid.migration import TARGETS, parse_target

    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise UserError(f"--targets names none of {', '.join(TARGETS)}")
    for name in names:
        try:
            parse_target(name)
        except ValueError as e:
            raise UserError(f"--targets: {e}") from None
    return list(dict.fromkeys(names))


def cmd_grid(args):
    from ..coordinator.launch import under_mpiexec
    from ..grid.experiment import replication
    from ..grid.gridfile import read_grid
    from ..grid.spread import spread

    grid = read_grid(args.grid)
    if args.jobs_per_site:
        grid.jobs_per_site, grid.span_days = args.jobs_per_site, None
    if args.span_days:
        grid.span_days = args.span_days
    sharing, targets = _levels(args.sharing), _targets(args.targets)
    rank, size, comm = 0, 1, None
    if under_mpiexec():
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        rank, size = comm.Get_rank(), comm.Get_size()
    out = output_folder(args.out, "results/grid") if rank == 0 else None
    bar = None
    if rank == 0 and not args.no_progress and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=args.replications, desc=f"replications ({size} ranks)", leave=False)

    def keep(results):  # a stop keeps every replication that finished, on any rank
        if bar is not None:
            bar.update(len(results) - bar.n)
        _write_results(grid, [results[k] for k in sorted(results)], sharing, targets, out,
                       args, complete=False)

    try:
        results, failure = spread(comm, args.replications,
                                  lambda r: replication(grid, r, sharing, targets, args.seed),
                                  keep)
    finally:
        if bar is not None:
            bar.close()
    if rank != 0:
        return 2 if failure else 0
    if failure:
        raise UserError(failure)
    return _write(grid, [results[r] for r in range(args.replications)], sharing, targets,
                  out, args)


def _write_results(grid, results, sharing, targets, out, args, *, complete):
    """summary.json, replications.csv and tables.md of the replications in ``results``."""
    from ..files import write_json_atomic, write_text_atomic
    from ..grid.experiment import summarize
    from ..grid.report import replications_csv, tables

    summary = summarize(grid, results, sharing, targets)
    summary.update(complete=complete, replications_done=len(results),
                   jobs_per_site=None if grid.span_days else grid.jobs_per_site,
                   span_days=grid.span_days, seed=args.seed,
                   simulation_seconds=sum(m["simulation_seconds"] for res in results
                                          for m in res.values()))
    write_json_atomic(os.path.join(out, "summary.json"), summary)
    write_text_atomic(os.path.join(out, "replications.csv"), replications_csv(grid, results))
    text = tables(summary)
    write_text_atomic(os.path.join(out, "tables.md"), text)
    return summary, text


def _write(grid, results, sharing, targets, out, args):
    from ..grid.report import plot_slowdown, plot_types

    summary, text = _write_results(grid, results, sharing, targets, out, args, complete=True)
    plot_slowdown(summary, os.path.join(out, "slowdown.png"))
    plot_types(summary, out)
    print(text, end="")
    print(f"results in {out}")
    return 0

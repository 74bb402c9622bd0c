"""The ``nodesel`` command line (also ``python -m emulator``).

Each command group owns its parsers and handlers in a module of its own (network,
selection, experiments, kernel, workload, scheduling); this module assembles them and turns a
:class:`~emulator.errors.UserError` into one line on stderr and exit status 2.
"""

import argparse
import gc
import importlib
import os
import signal
import sys

from ..errors import UserError

GROUPS = ("experiments", "network", "programs", "selection", "kernel", "workload",
          "scheduling", "prediction", "grid", "batch")
# command -> its group: a run imports and builds its own group's parsers alone
COMMANDS = {"demo": "experiments", "experiment": "experiments", "run": "experiments",
            "measure": "network", "flows": "network", "cluster": "network",
            "scenario": "network", "mpiexec": "programs", "select": "selection",
            "trace": "selection", "patterns": "selection", "testbed": "kernel", "tc": "kernel",
            "workload": "workload", "schedule": "scheduling", "predict": "prediction",
            "grid": "grid", "batch": "batch", "batch-experiment": "batch"}

EXAMPLES = """\
examples:
  nodesel demo                                  a short node-selection experiment (about 2 min)
  nodesel experiment --benchmarks bt,cg,is,lu,mg --methods pattern,all-all,random \\
      --repeats 6 --seed 1 --out results/experiment   the Figure 3 experiment of Goteti and Subhlok
  nodesel measure --rounds 3                    measure every pair, with forecasts
  nodesel cluster show hostfiles/cluster10.toml --json
  nodesel scenario generate --seed 1 --duration-seconds 600 --out s.json
  nodesel scenario show s.json --plot s.png
  nodesel mpiexec -n 4 -- ./is.S.4              a real MPI program on the emulated cluster
  nodesel select --network G.json --pattern cg --nprocs 4 --candidates 3 --method pattern --seed 1
  nodesel patterns list
  nodesel patterns show cg --nprocs 4
  nodesel trace cg --nprocs 4 --class S --out cg4.json --plot cg4.png
  nodesel workload show nasa --plot nasa.png    the built-in NASA iPSC/860 trace (1993)
  nodesel workload fit nasa --out model.json    the workload model of England and Weissman
  nodesel schedule nasa --policy all --compress-arrivals 1.93 --out results/nasa90
  nodesel predict runtime nasa --predictor all --out results/runtime
  nodesel predict wait nasa --compress-arrivals 1.93 --runtimes actual,smith --out results/wait
  nodesel predict starts nasa --at 864000 --policy-file site.toml
  nodesel grid --grid hostfiles/grid-homogeneous.toml --replications 20
                                                load sharing (England and Weissman)
  nodesel batch --nsp uniform --jsp fcfs --loaded-fraction 0.25   a batch run (Hanzich et al.)
  nodesel batch-experiment --quick              turnaround estimators against each other
"""


def build_parser(command=None):
    """The parser of every command, or of ``command``'s group alone where it names one."""
    parser = argparse.ArgumentParser(
        prog="nodesel", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Cluster emulator for communication-aware node selection.", epilog=EXAMPLES)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for group in (COMMANDS[command],) if command in COMMANDS else GROUPS:
        importlib.import_module(f".{group}", __name__).register(sub)
    return parser



def _run(args, ranks):
    """The command. Under mpiexec (``ranks``) a command that runs the cluster is rank 0's
    alone: the node ranks serve what rank 0 sends them, and are sent its exit status if it
    ends before the run begins."""
    if not (ranks and getattr(args, "runs_cluster", False)):
        return args.handler(args) or 0
    from mpi4py import MPI

    from ..coordinator import runtime, stop

    if MPI.COMM_WORLD.Get_rank() != 0:
        return runtime.serve()
    status = 1
    try:
        status = args.handler(args) or 0
        return status
    except UserError:
        status = 2
        raise
    except KeyboardInterrupt as e:
        status = stop.exit_status(stop.signum_of(e))
        raise
    finally:
        runtime.call_off(status)


def one_line(message: str) -> str:
    """``message`` with whatever would break it over lines (a newline, or U+0085 and the
    other separators a file's own text may carry) written as an escape."""
    parts = message.splitlines()
    if len(parts) <= 1 and not message.endswith(("\n", "\r")):
        return message
    return "".join(ch if ch.isprintable() or ch in " \t" else repr(ch)[1:-1] for ch in message)


def entry() -> None:
    """The ``nodesel`` command as a process: :func:`main`, then exit with its status.

    numpy's OpenBLAS keeps to one thread (:func:`emulator._one_blas_thread`).
    At the end what is alive dies with the process, so it is frozen out of the cyclic
    collector's sight: Python's exit would otherwise walk it all once more (6-8 ms with
    numpy loaded). Callers of :func:`main` in a process that goes on (tests, a notebook) are
    unaffected."""
    from .. import _one_blas_thread

    _one_blas_thread()
    status = main()
    gc.freeze()
    sys.exit(status)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    args.argv = argv
    from ..coordinator import stop
    from ..coordinator.launch import under_mpiexec

    # SIGINT, SIGTERM (kill, a batch system's time limit) and SIGHUP end a command the same
    # way, so every finally runs: a testbed it brought up is taken down, results stay whole
    stop.install()
    try:
        return _run(args, under_mpiexec())
    except UserError as e:
        print(f"nodesel: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        signum = stop.signum_of(e)
        if under_mpiexec():  # a rank: the command that started the job says it, once
            if stop.says_it_here():  # rank 0 under the user's own mpiexec
                print(stop.line(signum, getattr(args, "out", None)), file=sys.stderr)
            stop.unlink_own_segments()
            sys.stdout.flush()
            sys.stderr.flush()
            stop.rank_0_has_said_it()
            stop.let_rank_0_say_it()
            os._exit(stop.exit_status(signum))  # no MPI finalize to wait in: peers stop too
        print(stop.line(signum, getattr(args, "out", None)), file=sys.stderr)
        return stop.exit_status(signum)
    except BrokenPipeError:
        # the reader went away (``nodesel ... | head``): end quietly, as shell tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except OSError as e:
        # a path the user gave that cannot be used (missing, a folder, unreadable, full)
        where = f"{e.filename}: " if e.filename else ""
        print(f"nodesel: error: {one_line(where + str(e.strerror or e))}", file=sys.stderr)
        return 2

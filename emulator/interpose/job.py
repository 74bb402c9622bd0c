"""Unmodified MPI programs run as jobs on the emulated cluster (no root).

:func:`run_program` starts ``mpiexec -n N PROGRAM ARGS`` with the interposition library
preloaded into every rank (``-genv``, so the launcher itself runs without it), rank r on
node ``rank_nodes[r]``, every message paced by the model that :class:`~.relay.ServedProgram`
serves. The program's output and exit status are its own. :func:`run_programs` runs several
at once, each its own ``mpiexec``, all sharing the one model (jobs that share nodes).
"""

import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ..coordinator.launch import mpiexec_path, run_mpiexec
from ..errors import UserError
from .relay import ServedProgram, library_path

DEFAULT_TIMEOUT_SECONDS = 3600.0


@dataclass(frozen=True)
class ProgramRun:
    """How a program ran: its exit status; ``seconds``, emulated, from its first rank's
    MPI_Init to its last rank's MPI_Finalize (None if no rank got there); the launch's wall
    seconds, start-up and clean-up included; each rank's counters (its MPI_Init and
    MPI_Finalize on the emulated clock, the messages and bytes it sent paced, collectives,
    what it called that is not paced); and why the library ended it, if it did
    (``"rank R: ..."`` lines)."""

    status: int
    seconds: Optional[float]
    wall_seconds: float
    ranks: tuple
    errors: tuple = ()

    def to_json(self) -> dict:
        return {"status": self.status, "seconds": self.seconds,
                "wall_seconds": self.wall_seconds, "ranks": list(self.ranks),
                "errors": list(self.errors)}


def rank_nodes_for(names: Sequence[str], n: int, hosts: Optional[Sequence[str]] = None) -> list:
    """The node of each of ``n`` ranks: ``hosts`` (names of the cluster, one per rank; a name
    may repeat), or by default the cluster's first ``n`` nodes."""
    if hosts is None:
        if n > len(names):
            raise UserError(f"-n {n} is more than the {len(names)} nodes of the cluster; "
                            f"name a node per rank with --hosts")
        return list(names[:n])
    unknown = sorted(set(hosts) - set(names))
    if unknown:
        raise UserError(f"--hosts names nodes the cluster does not have: {', '.join(unknown)}")
    if len(hosts) != n:
        raise UserError(f"--hosts names {len(hosts)} nodes for -n {n} ranks")
    return list(hosts)


def mpiexec_command(mpiexec: str, n: int, environment: dict, argv: Sequence[str]) -> list:
    """``mpiexec -n N -genv NAME VALUE ... PROGRAM ARGS`` with the library preloaded."""
    preload = " ".join(p for p in (library_path(), os.environ.get("LD_PRELOAD", "")) if p)
    command = [mpiexec, "-n", str(n)]
    for name, value in {"LD_PRELOAD": preload, **environment}.items():
        command += ["-genv", name, value]
    return command + list(argv)


def _read_ranks(path: str) -> tuple:
    """(each rank's counters, the library's reasons for ending the job) from its file."""
    if not os.path.exists(path):
        return (), ()
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    errors = tuple(f"rank {row['rank']}: {row['error']}" for row in rows if "error" in row)
    ranks = [row for row in rows if "error" not in row]
    for row in ranks:
        row["unpaced"] = row["unpaced"].split()
    return tuple(sorted(ranks, key=lambda row: row["rank"])), errors


@dataclass(frozen=True)
class ProgramOptions:
    """How programs run on the emulated cluster: ``dilation`` (their compute counted that
    many times as long), ``time_scale`` (emulated seconds per wall second), each job
    within ``timeout_seconds``, launched by ``mpiexec`` (default the wheel's), the
    scenario's time 0 at wall time ``epoch`` (default: now), their output to ``stdout``
    (``subprocess.DEVNULL``, a file; default ours) and their errors (the launcher's too)
    to ``stderr`` likewise; setting ``cancel`` (a :class:`threading.Event`) ends them."""

    dilation: float = 1.0
    time_scale: float = 1.0
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    mpiexec: Optional[str] = None
    epoch: Optional[float] = None
    stdout: Any = None
    stderr: Any = None
    cancel: Any = None


def run_program(cluster: Any, timeline: Any, rank_nodes: Sequence[str], argv: Sequence[str],
                options: ProgramOptions = ProgramOptions(), *, model: Any = None) -> ProgramRun:
    """Run ``argv`` (an MPI program and its arguments) as one job of ``len(rank_nodes)``
    ranks on the cluster."""
    return run_programs(cluster, timeline, [(rank_nodes, argv)], options, model=model)[0]


def run_programs(cluster: Any, timeline: Any, jobs: Sequence[tuple],
                 options: ProgramOptions = ProgramOptions(), *, model: Any = None) -> list:
    """Run programs at once on the cluster, sharing its one model: ``jobs`` is a list of
    ``(rank_nodes, argv)``, each its own ``mpiexec``. Their :class:`ProgramRun` in order.
    Given ``model`` (one that others share, such as a batch run's), their flows go into it
    and its clock is theirs (``options``' dilation, time scale and epoch do not apply)."""
    mpiexec = options.mpiexec or mpiexec_path()
    if mpiexec is None:
        raise UserError("mpiexec not found; install the 'mpich' wheel (pip install mpich)")
    if any(not argv for _, argv in jobs):
        raise UserError("no program to run")
    began = time.time()
    with tempfile.TemporaryDirectory(prefix="nodesel-program-") as tmp, \
            ServedProgram(cluster, timeline, [nodes for nodes, _ in jobs],
                          dilation=options.dilation, time_scale=options.time_scale,
                          epoch=options.epoch, model=model) as served:
        stats = [os.path.join(tmp, f"ranks-{j}.jsonl") for j in range(len(jobs))]
        commands = [mpiexec_command(mpiexec, len(nodes), dict(
            served.environment(j), NODESEL_PMPI_STATS=stats[j],
            NODESEL_PMPI_TIMEOUT_SECONDS=repr(float(options.timeout_seconds))), argv)
            for j, (nodes, argv) in enumerate(jobs)]
        statuses = _run_all(commands, options)
        runs = []
        for status, path in zip(statuses, stats):
            ranks, errors = _read_ranks(path)
            seconds = (max(r["finalize_seconds"] for r in ranks) -
                       min(r["init_seconds"] for r in ranks)) if ranks else None
            runs.append(ProgramRun(status, seconds, time.time() - began, ranks, errors))
        return runs


def _run_all(commands: list, options: ProgramOptions) -> list:
    """Each command's status, the first in this thread (which takes Ctrl-C), the rest in
    threads of their own."""
    statuses: list = [None] * len(commands)

    def one(j: int) -> None:
        statuses[j] = run_mpiexec(commands[j], stdout=options.stdout, stderr=options.stderr,
                                  cancel=options.cancel)

    others = [threading.Thread(target=one, args=(j,)) for j in range(1, len(commands))]
    for thread in others:
        thread.start()
    try:
        one(0)
    finally:
        for thread in others:
            thread.join()
    return statuses

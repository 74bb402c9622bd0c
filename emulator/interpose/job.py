"""One unmodified MPI program run as one job on the emulated cluster (no root).

:func:`run_program` starts ``mpiexec -n N PROGRAM ARGS`` with the interposition library
preloaded into every rank (``-genv``, so the launcher itself runs without it), rank r on
node ``rank_nodes[r]``, every message paced by the model that :class:`~.relay.ServedProgram`
serves. The program's output and exit status are its own.
"""

import json
import os
import tempfile
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
    seconds, start-up and clean-up included; and each rank's counters (its MPI_Init and
    MPI_Finalize on the emulated clock, the messages and bytes it sent paced, collectives,
    what it called that is not paced)."""

    status: int
    seconds: Optional[float]
    wall_seconds: float
    ranks: tuple

    def to_json(self) -> dict:
        return {"status": self.status, "seconds": self.seconds,
                "wall_seconds": self.wall_seconds, "ranks": list(self.ranks)}


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
    if not os.path.exists(path):
        return ()
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for row in rows:
        row["unpaced"] = row["unpaced"].split()
    return tuple(sorted(rows, key=lambda row: row["rank"]))


def run_program(cluster: Any, timeline: Any, rank_nodes: Sequence[str], argv: Sequence[str], *,
                dilation: float = 1.0, time_scale: float = 1.0,
                timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
                mpiexec: Optional[str] = None) -> ProgramRun:
    """Run ``argv`` (an MPI program and its arguments) as one job of ``len(rank_nodes)``
    ranks on the cluster."""
    mpiexec = mpiexec or mpiexec_path()
    if mpiexec is None:
        raise UserError("mpiexec not found; install the 'mpich' wheel (pip install mpich)")
    if not argv:
        raise UserError("no program to run")
    with tempfile.TemporaryDirectory(prefix="nodesel-program-") as tmp, \
            ServedProgram(cluster, timeline, rank_nodes, dilation=dilation,
                          time_scale=time_scale) as served:
        stats = os.path.join(tmp, "ranks.jsonl")
        environment = dict(served.environment(), NODESEL_PMPI_STATS=stats,
                           NODESEL_PMPI_TIMEOUT_SECONDS=repr(float(timeout_seconds)))
        command = mpiexec_command(mpiexec, len(rank_nodes), environment, argv)
        status = run_mpiexec(command)
        ranks = _read_ranks(stats)
        seconds = (max(r["finalize_seconds"] for r in ranks) -
                   min(r["init_seconds"] for r in ranks)) if ranks else None
        return ProgramRun(status, seconds, time.time() - served.epoch, ranks)

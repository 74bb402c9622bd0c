"""Real MPI programs as batch jobs: a jobs file's ``command`` runs, unmodified, on the job's
nodes under the interposition library (:mod:`emulator.interpose`), its flows in the same
model as the skeletons' (the node ranks' shared window): they slow each other down as the
model says.

A program's ranks are processes of this machine: its compute is not slowed by the local
users' load or by the skeletons' compute on its nodes, which share the emulated nodes' CPU
(:mod:`emulator.coordinator.cpushare`) among themselves only. Its network is the cluster's.
"""

import os
import resource
import subprocess
import threading
import time
from typing import Any, Optional, Sequence

from ..errors import UserError
from ..network.sharing import ClusterModel

STOP_WAIT_SECONDS = 15.0  # a stopped program's mpiexec has a 10 s grace, then SIGKILL


def check_shaping(jobs: Sequence[Any], shaping: str) -> None:
    """Refuse, before any launch, jobs with a command under a shaping that has no model
    for them to share."""
    if shaping != "inproc" and any(job.command for job in jobs):
        raise UserError(f"a job with a command (a real program) needs --shaping inproc, "
                        f"not {shaping}")


def check_model(coordinator: Any) -> ClusterModel:
    """The model programs share with the run's skeletons, or why there is none."""
    model = coordinator.model
    if not isinstance(model, ClusterModel):
        raise UserError("a job with a command (a real program) needs --shaping inproc with "
                        "every rank on one machine")
    return model


def run_on_nodes(coordinator: Any, nodes: Sequence[str], command: Sequence[str],
                 *, output: Optional[str] = None, cancel: Any = None) -> Any:
    """Run ``command`` on ``nodes`` (rank i on nodes[i]) now, in the run's model; its
    :class:`~emulator.interpose.job.ProgramRun`. Its standard output and error go to
    ``output`` (a file, appended) or nowhere: not to the batch run's terminal. Setting
    ``cancel`` (a :class:`threading.Event`) ends it."""
    from ..interpose.job import ProgramOptions, run_program

    settings, model = coordinator.settings, check_model(coordinator)
    with open(output or os.devnull, "a") as out:
        return run_program(settings.cluster, settings.timeline, list(nodes), list(command),
                           ProgramOptions(timeout_seconds=coordinator.timeout_seconds,
                                          stdout=out, stderr=out, cancel=cancel),
                           model=model)


def measure_program(coordinator: Any, nodes: Sequence[str], command: Sequence[str],
                    tasks: int) -> dict:
    """A program's characterization, as a skeleton's (:mod:`.characterize`): run alone on
    the first ``tasks`` nodes, ExeTime_tot from its launch to its end (emulated seconds),
    CPUtime_tot the CPU time of its processes over its ranks (this process's children's,
    under the dilation)."""
    group = list(nodes[:tasks])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    run = run_on_nodes(coordinator, group, command)
    wall = coordinator.emulated_seconds(time.time() - start)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.status != 0:
        raise UserError(f"{' '.join(command)} failed alone on {', '.join(group)} "
                        f"(status {run.status}{'; ' if run.errors else ''}"
                        f"{'; '.join(run.errors)})")
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) \
        / coordinator.settings.dilation / tasks
    return {"exe_seconds": wall, "cpu_seconds": max(cpu, 1e-6),
            "cpu_fraction": min(cpu / wall, 1.0), "program_seconds": run.seconds,
            "nodes": group, "comm_model_seconds": None}


class ProgramJob(threading.Thread):
    """A batch job's program running on its nodes (a thread of the coordinator that waits
    on its ``mpiexec``): :attr:`run_result` is its
    :class:`~emulator.interpose.job.ProgramRun` once it is over, :attr:`error` what kept it
    from running; :meth:`stop` ends it."""

    def __init__(self, coordinator: Any, nodes: Sequence[str], command: Sequence[str],
                 output: Optional[str] = None) -> None:
        super().__init__(name="nodesel-batch-program", daemon=True)
        self.args = (coordinator, list(nodes), list(command))
        self.output = output
        self.run_result: Any = None
        self.error: Optional[Exception] = None
        self._cancel = threading.Event()

    def run(self) -> None:
        try:
            self.run_result = run_on_nodes(*self.args, output=self.output,
                                           cancel=self._cancel)
        except (UserError, OSError, subprocess.SubprocessError) as e:
            self.error = e

    def stop(self, wait_seconds: float = STOP_WAIT_SECONDS) -> None:
        """End the program (its ranks, its files) and wait for it, at most ``wait_seconds``."""
        self._cancel.set()
        self.join(wait_seconds)

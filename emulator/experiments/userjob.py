"""Node selection for a user's own MPI programs (``nodesel run``).

1. Measure every pair of nodes with the emulator's probes: on the emulated cluster
   (in-process shaping), or as real MPI traffic on the nodes (the namespace testbed, or a
   real cluster given its hostfile).
2. Select candidate groups for the job's pattern (max-min pruning).
3. Run the user's skeleton command on every candidate, disjoint candidates at once,
   intersecting ones in turn: on the emulated cluster the program itself, unmodified, under
   the interposition library with rank i on the group's i-th node (:class:`EmulatedCluster`,
   the scenario going on from the measurement); elsewhere the command with a machinefile
   listing the group in rank order.
4. Run the user's application command on the fastest candidate, the same way.

Commands are templates: ``{machinefile}`` and ``{nprocs}`` are substituted in each word after
splitting with shlex; nothing runs through a shell.
"""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from ..coordinator.launch import user_environment
from ..coordinator.pipeline import trial_rounds
from ..coordinator.supervise import rank_command
from ..errors import UserError
from ..files import write_json_atomic, write_text_atomic
from ..network.allocation import write_placement
from ..network.netgraph import graph_from_node_link
from ..network.sharing import PROGRAM_MESSAGE_SECONDS, message_costs
from ..selection.maxmin import max_min_select

PLACEHOLDERS = ("{machinefile}", "{nprocs}")
LAUNCHERS = ("mpiexec", "mpirun", "mpiexec.hydra", "srun")


@dataclass(frozen=True)
class EmulatedCluster:
    """Where in-process shaping runs the commands: unmodified MPI programs under the
    interposition library on ``cluster``, every message paced by its model, the scenario's
    time 0 at wall time ``epoch`` (the measurement's launch), so trials and application meet
    the scenario where the run has got to."""

    cluster: Any
    timeline: Any
    epoch: float
    time_scale: float = 1.0
    dilation: float = 1.0

    def run(self, jobs, *, timeout_seconds, stdout=None):
        """``jobs``: ``[(rank_nodes, argv)]``, run at once sharing the model; their
        :class:`~emulator.interpose.job.ProgramRun`."""
        from ..interpose.job import ProgramOptions, run_programs

        return run_programs(self.cluster, self.timeline, jobs, ProgramOptions(
            dilation=self.dilation, time_scale=self.time_scale,
            timeout_seconds=timeout_seconds, epoch=self.epoch, stdout=stdout))


def program_argv(template, *, nprocs):
    """A command template for the emulated cluster: the program and its arguments, which
    nodesel starts itself, rank i on the group's i-th node.

    >>> program_argv("./cg.S.{nprocs} 3", nprocs=4)
    ['./cg.S.4', '3']
    """
    argv = command_argv(template, machinefile="{machinefile}", nprocs=nprocs)
    if "{machinefile}" in template or os.path.basename(argv[0]) in LAUNCHERS:
        raise UserError(f"on the emulated cluster give the program and its arguments, as in "
                        f"'./cg.S.4 3', not {template!r}: nodesel starts its ranks on each "
                        "group's nodes itself")
    return argv


def command_argv(template, *, machinefile, nprocs):
    """The argv of a command template with its placeholders filled in.

    >>> command_argv("mpiexec -f {machinefile} -n {nprocs} ./cg.S", machinefile="m", nprocs=4)
    ['mpiexec', '-f', 'm', '-n', '4', './cg.S']
    """
    try:
        words = shlex.split(template)
    except ValueError as e:
        raise UserError(f"cannot split the command {template!r}: {e}") from None
    if not words:
        raise UserError("empty command")
    return [w.replace("{machinefile}", machinefile).replace("{nprocs}", str(nprocs))
            for w in words]


def write_machinefile(path, hosts):
    """An MPICH machinefile: one slot per host, in rank order."""
    write_text_atomic(path, "".join(f"{h}:1\n" for h in hosts))


def _status_text(status):
    if status < 0:
        return f"killed by {signal.Signals(-status).name}"
    return f"exit status {status}" + (" (128 + SIGPIPE: a write to a closed pipe)"
                                      if status == 128 + signal.SIGPIPE else "")


def _last_lines(text, n=3):
    return " | ".join((text or "").strip().splitlines()[-n:]) or "nothing on stderr"


class Step:
    """One command of the run (the measurement, a skeleton trial, the application), in its
    own session so that the whole launch (mpiexec and what it started) can be ended at once;
    standard error is kept for the message if it fails."""

    def __init__(self, what, argv, *, stdout=None, echo_stderr=False):
        self.what, self.argv, self.echo_stderr = what, argv, echo_stderr
        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=stdout, env=user_environment(),
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)

    def finish(self, deadline):
        """Wait until ``deadline`` (monotonic seconds); returns stdout. A step that fails or
        outlives its deadline (it is then killed) raises :class:`UserError` naming it."""
        try:
            out, err = self.proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            out, err = self.proc.communicate()
            limit = deadline - self.started
            raise UserError(
                f"{self.what} did not end within {limit:.0f} s and was killed: "
                f"{shlex.join(self.argv)}; stderr: {_last_lines(err)}. A program that printed "
                "its results but did not exit is usually an MPI library and launcher that do "
                "not match (see 'Your own MPI programs' in the README); a longer run needs "
                "--timeout-seconds") from None
        except BaseException:
            self.kill()
            raise
        self.seconds = time.monotonic() - self.started
        if self.echo_stderr and err:
            sys.stderr.write(err)
        if self.proc.returncode != 0:
            raise UserError(f"{self.what} failed, {_status_text(self.proc.returncode)}: "
                            f"{shlex.join(self.argv)}: {_last_lines(err)}")
        return out

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def measure(launch_argv, extra_args, *, timeout_seconds, shaping="external"):
    """Run ``nodesel measure --json --shaping SHAPING`` with ``extra_args`` under
    ``launch_argv`` (an mpiexec prefix); returns the status graph."""
    argv = launch_argv + rank_command(["measure", "--json", "--shaping", shaping]
                                      + extra_args)
    step = Step("the measurement", argv, stdout=subprocess.PIPE)
    out = step.finish(time.monotonic() + timeout_seconds)
    try:
        return graph_from_node_link(json.loads(out[out.index("{"):]))
    except ValueError as e:
        raise UserError(f"the measurement printed no status graph ({e}): "
                        f"{_last_lines(out)}") from None


def run_candidates(candidates, template, host_of, workdir, *, timeout_seconds=600.0,
                   progress=print):
    """Run the skeleton command on every candidate, in conflict-free rounds, each within
    ``timeout_seconds``; returns the wall seconds of each. A failing or hanging command
    raises :class:`UserError` naming the candidate, with its stderr."""
    seconds = [None] * len(candidates)
    for rnd in trial_rounds([c.nodes for c in candidates]):
        running = {}
        try:
            for i in rnd:
                cand = candidates[i]
                machinefile = os.path.join(workdir, f"candidate{i + 1}.machinefile")
                write_machinefile(machinefile,
                                  [host_of(cand.mapping[r]) for r in sorted(cand.mapping)])
                argv = command_argv(template, machinefile=machinefile,
                                    nprocs=len(cand.mapping))
                running[i] = Step(f"the skeleton command on candidate {i + 1} "
                                  f"({' '.join(cand.nodes)})", argv,
                                  stdout=subprocess.DEVNULL)
            deadline = time.monotonic() + timeout_seconds
            for i, step in running.items():
                step.finish(deadline)
                seconds[i] = step.seconds
                progress(f"  candidate {i + 1} ({' '.join(candidates[i].nodes)}): "
                         f"{seconds[i]:.2f} s")
        finally:
            for step in running.values():
                if step.proc.poll() is None:
                    step.kill()
                    step.proc.wait()
    return seconds


def _ranks(candidate):
    return [candidate.mapping[r] for r in sorted(candidate.mapping)]


def _failed(what, run):
    reasons = "; ".join(run.errors) or "see its standard error above"
    return UserError(f"{what} failed, {_status_text(run.status)}: {reasons}")


def emulated_trials(candidates, template, emulated, *, timeout_seconds=600.0, progress=print):
    """The skeleton program on every candidate of the emulated cluster, in conflict-free
    rounds (a round's programs share the model); the emulated seconds of each."""
    seconds = [None] * len(candidates)
    for rnd in trial_rounds([c.nodes for c in candidates]):
        jobs = [(_ranks(candidates[i]), program_argv(template, nprocs=len(candidates[i].mapping)))
                for i in rnd]
        runs = emulated.run(jobs, timeout_seconds=timeout_seconds, stdout=subprocess.DEVNULL)
        for i, run in zip(rnd, runs):
            what = f"the skeleton command on candidate {i + 1} ({' '.join(candidates[i].nodes)})"
            if run.status != 0 or run.seconds is None:
                raise _failed(what, run)
            seconds[i] = run.seconds
            progress(f"  candidate {i + 1} ({' '.join(candidates[i].nodes)}): "
                     f"{seconds[i]:.3f} s emulated")
    return seconds


def _emulated_app(chosen, template, emulated, timeout_seconds, progress):
    """The application on the chosen group of the emulated cluster: (argv, emulated seconds,
    status, the :class:`UserError` of a failure or None)."""
    argv = program_argv(template, nprocs=len(chosen.mapping))
    progress(f"running the application on {' '.join(_ranks(chosen))}: {shlex.join(argv)}")
    run, = emulated.run([(_ranks(chosen), argv)], timeout_seconds=timeout_seconds)
    if run.status != 0 or run.seconds is None:
        return argv, run.seconds, run.status or 1, _failed("the application command", run)
    return argv, run.seconds, 0, None


@dataclass(frozen=True)
class UserJob:
    """What a user's job runs: the skeleton command timed on each of ``candidates`` node
    groups, then the application command on the fastest, each within ``timeout_seconds``
    (templates as :func:`command_argv` reads them)."""

    skeleton_cmd: str
    app_cmd: str
    candidates: int = 3
    timeout_seconds: float = 600.0


def run_job(graph, pattern, job: UserJob, *, host_of, out_dir, progress=print, emulated=None):
    """Steps 2-4 of ``job``; writes ``run.json`` and the chosen ``machinefile`` into
    ``out_dir``. With ``emulated`` (an :class:`EmulatedCluster`) the commands are programs
    run on it, and their times emulated seconds."""
    skeleton_cmd, app_cmd, timeout_seconds = job.skeleton_cmd, job.app_cmd, job.timeout_seconds
    costs = None if emulated is None else message_costs(
        emulated.cluster, emulated.dilation, PROGRAM_MESSAGE_SECONDS)
    selection = max_min_select(graph, pattern, candidates=job.candidates, costs=costs)
    progress(f"{len(selection.candidates)} candidate group(s); bottleneck "
             f"{selection.bottleneck_mbps} Mbit/s")
    if emulated is not None:
        trials = emulated_trials(selection.candidates, skeleton_cmd, emulated,
                                 timeout_seconds=timeout_seconds, progress=progress)
    else:
        trials = run_candidates(selection.candidates, skeleton_cmd, host_of, out_dir,
                                timeout_seconds=timeout_seconds, progress=progress)
    best = min(range(len(trials)), key=trials.__getitem__)
    chosen = selection.candidates[best]
    placement = write_placement(out_dir, [host_of(chosen.mapping[r])
                                          for r in sorted(chosen.mapping)])
    if emulated is not None:
        argv, seconds, status, error = _emulated_app(chosen, app_cmd, emulated, timeout_seconds,
                                                     progress)
    else:
        argv, seconds, status, error = _command_app(chosen, best, app_cmd, placement,
                                                    timeout_seconds, progress)
    result = {"selection": selection.to_json(), "trial_seconds": trials, "chosen": best,
              **placement, "app_command": argv, "app_seconds": seconds,
              "app_exit_status": status, "emulated": emulated is not None}
    write_json_atomic(os.path.join(out_dir, "run.json"), result)
    if error is not None:
        raise error
    return result


def _command_app(chosen, best, template, placement, timeout_seconds, progress):
    """The application command on the chosen group's machinefile: (argv, wall seconds,
    status, the :class:`UserError` of a failure or None)."""
    argv = command_argv(template, machinefile=placement["machinefile"],
                        nprocs=len(chosen.mapping))
    progress(f"running the application on candidate {best + 1}: {shlex.join(argv)}")
    app = Step("the application command", argv, echo_stderr=True)
    try:
        app.finish(time.monotonic() + timeout_seconds)
    except UserError as e:
        return argv, time.monotonic() - app.started, app.proc.returncode, e
    return argv, time.monotonic() - app.started, 0, None

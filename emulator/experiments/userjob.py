"""Node selection for a user's own MPI programs (``nodesel run``).

1. Measure every pair of nodes with the emulator's probes, as real MPI traffic on the nodes
   (the namespace testbed, or a real cluster given its hostfile).
2. Select candidate groups for the job's pattern (max-min pruning).
3. Run the user's skeleton command on every candidate, disjoint candidates at once,
   intersecting ones in turn, each with a machinefile listing the group in rank order.
4. Run the user's application command on the fastest candidate.

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

from ..coordinator.pipeline import trial_rounds
from ..coordinator.supervise import rank_command
from ..errors import UserError
from ..files import write_json_atomic, write_text_atomic
from ..network.allocation import write_placement
from ..network.netgraph import graph_from_node_link
from ..selection.maxmin import max_min_select

PLACEHOLDERS = ("{machinefile}", "{nprocs}")


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
        self.proc = subprocess.Popen(argv, stdout=stdout,
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


def measure(launch_argv, extra_args, *, timeout_seconds):
    """Run ``nodesel measure --json`` with ``extra_args`` under ``launch_argv`` (an mpiexec
    prefix); returns the status graph."""
    argv = launch_argv + rank_command(["measure", "--json", "--shaping", "external"]
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


def run_job(graph, pattern, *, skeleton_cmd, app_cmd, host_of, out_dir, candidates=3,
            timeout_seconds=600.0, progress=print):
    """Steps 2-4, each command within ``timeout_seconds``; writes ``run.json`` and the
    chosen ``machinefile`` into ``out_dir``."""
    selection = max_min_select(graph, pattern, candidates=candidates)
    progress(f"{len(selection.candidates)} candidate group(s); bottleneck "
             f"{selection.bottleneck_mbps} Mbit/s")
    trials = run_candidates(selection.candidates, skeleton_cmd, host_of, out_dir,
                            timeout_seconds=timeout_seconds, progress=progress)
    best = min(range(len(trials)), key=trials.__getitem__)
    chosen = selection.candidates[best]
    placement = write_placement(out_dir, [host_of(chosen.mapping[r])
                                          for r in sorted(chosen.mapping)])
    machinefile = placement["machinefile"]
    argv = command_argv(app_cmd, machinefile=machinefile, nprocs=len(chosen.mapping))
    progress(f"running the application on candidate {best + 1}: {shlex.join(argv)}")
    app = Step("the application command", argv, echo_stderr=True)
    status = 0
    try:
        app.finish(time.monotonic() + timeout_seconds)
    except UserError:
        status = app.proc.returncode
        raise
    finally:
        result = {"selection": selection.to_json(), "trial_seconds": trials, "chosen": best,
                  **placement, "app_command": argv,
                  "app_seconds": time.monotonic() - app.started, "app_exit_status": status}
        write_json_atomic(os.path.join(out_dir, "run.json"), result)
    return result

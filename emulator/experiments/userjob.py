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


def measure(launch_argv, extra_args, *, timeout_seconds):
    """Run ``nodesel measure --json`` with ``extra_args`` under ``launch_argv`` (an mpiexec
    prefix); returns the status graph."""
    argv = launch_argv + rank_command(["measure", "--json", "--shaping", "external"]
                                      + extra_args)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_seconds)
    if proc.returncode == 128 + signal.SIGPIPE:
        # the job's teardown wrote to a closed pipe after the graph was printed: a complete
        # graph is a complete measurement, so it is used, and the user is told
        try:
            graph = graph_from_node_link(json.loads(proc.stdout[proc.stdout.index("{"):]))
        except ValueError:
            graph = None
        if graph is not None:
            print("nodesel: warning: the measurement job printed a complete status graph, "
                  "then ended with SIGPIPE at teardown; using the graph", file=sys.stderr,
                  flush=True)
            return graph
    if proc.returncode != 0:
        status = proc.returncode
        how = (f"killed by {signal.Signals(-status).name}" if status < 0 else
               f"exit status {status}" + (" (128 + SIGPIPE: a write to a closed pipe)"
                                          if status == 128 + signal.SIGPIPE else ""))
        last = " | ".join(proc.stderr.strip().splitlines()[-3:]) or "nothing on stderr"
        raise UserError(f"measurement failed, {how}: {last}")
    start = proc.stdout.index("{")
    return graph_from_node_link(json.loads(proc.stdout[start:]))


def run_candidates(candidates, template, host_of, workdir, *, progress=print):
    """Run the skeleton command on every candidate, in conflict-free rounds; returns the wall
    seconds of each. A failing command raises :class:`UserError` with its stderr."""
    seconds = [None] * len(candidates)
    for rnd in trial_rounds([c.nodes for c in candidates]):
        running = {}
        for i in rnd:
            cand = candidates[i]
            machinefile = os.path.join(workdir, f"candidate{i + 1}.machinefile")
            write_machinefile(machinefile, [host_of(cand.mapping[r]) for r in sorted(cand.mapping)])
            argv = command_argv(template, machinefile=machinefile, nprocs=len(cand.mapping))
            running[i] = (time.monotonic(), argv, subprocess.Popen(
                argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        for i, (start, argv, proc) in running.items():
            _, err = proc.communicate()
            seconds[i] = time.monotonic() - start
            if proc.returncode != 0:
                raise UserError(f"the skeleton command failed on candidate {i + 1} "
                                f"({' '.join(candidates[i].nodes)}), exit {proc.returncode}: "
                                f"{shlex.join(argv)}: {err.strip()[-500:]}")
            progress(f"  candidate {i + 1} ({' '.join(candidates[i].nodes)}): "
                     f"{seconds[i]:.2f} s")
    return seconds


def run_job(graph, pattern, *, skeleton_cmd, app_cmd, host_of, out_dir, candidates=3,
            progress=print):
    """Steps 2-4; writes ``run.json`` and the chosen ``machinefile`` into ``out_dir``."""
    selection = max_min_select(graph, pattern, candidates=candidates)
    progress(f"{len(selection.candidates)} candidate group(s); bottleneck "
             f"{selection.bottleneck_mbps} Mbit/s")
    trials = run_candidates(selection.candidates, skeleton_cmd, host_of, out_dir,
                            progress=progress)
    best = min(range(len(trials)), key=trials.__getitem__)
    chosen = selection.candidates[best]
    machinefile = os.path.join(out_dir, "machinefile")
    write_machinefile(machinefile, [host_of(chosen.mapping[r]) for r in sorted(chosen.mapping)])
    argv = command_argv(app_cmd, machinefile=machinefile, nprocs=len(chosen.mapping))
    progress(f"running the application on candidate {best + 1}: {shlex.join(argv)}")
    start = time.monotonic()
    status = subprocess.call(argv)
    app_seconds = time.monotonic() - start
    result = {"selection": selection.to_json(), "trial_seconds": trials, "chosen": best,
              "machinefile": machinefile, "app_command": argv, "app_seconds": app_seconds,
              "app_exit_status": status}
    write_json_atomic(os.path.join(out_dir, "run.json"), result)
    if status != 0:
        raise UserError(f"the application command exited with status {status}")
    return result

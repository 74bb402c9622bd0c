"""Application characterization (Hanzich et al. §2): each benchmark, class and task count run once
in isolation, for ExeTime_tot, CPUtime_tot and CPU(J).

A run is the skeleton on the first ``tasks`` nodes with nothing else running (no other
job, no local user) on the cluster's network as it is (the scenario: a site characterizes
its applications on its own, shared, network). ExeTime_tot is its wall time from the
coordinator's submission to the last reply (as a batch job's turnaround is measured),
CPUtime_tot the CPU time of its tasks (their mean, in CPU-seconds). With it comes the flow
model's communication time of the job's pattern on those nodes under the status graph
measured before (``comm_model``), the reference of the ``net-net`` estimator. Results are
cached in a JSON file keyed by benchmark, class, tasks, iterations and the network (cluster,
scenario, clock, shaping and CPU), so later runs only measure what is new. A real program
(a jobs file's ``command``) is characterized the same way (:mod:`.programs`), keyed by its
command line and the time its file was built.
"""

import json
import os
import shlex
import time

from ..errors import InputFileError
from ..files import write_json_atomic
from .programs import measure_program

CACHE_VERSION = 6  # 6: comm_model_seconds charges latency


def key(benchmark, npb_class, tasks, iterations, network):
    it = "full" if iterations is None else str(iterations)
    return f"{benchmark}/{npb_class}/{tasks}/{it}/{network}"


def read_cache(path):
    if not path or not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise InputFileError(path, None, f"not a characterization cache: {e}") from None
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return {}
    entries = data.get("entries", {})
    for k, v in entries.items():
        if not (isinstance(v, dict) and v.get("exe_seconds", 0) > 0
                and v.get("cpu_seconds", 0) > 0):
            raise InputFileError(path, k, "needs positive exe_seconds and cpu_seconds")
    return entries


def write_cache(path, entries):
    if path:
        write_json_atomic(path, {"version": CACHE_VERSION, "entries": entries})


def measure_one(coordinator, nodes, benchmark, npb_class, tasks, iterations, comm_model=None):
    """Run the skeleton once alone on ``nodes[:tasks]``; its characterization."""
    group = nodes[:tasks]
    start = time.time()
    replies = coordinator.run(group, "skeleton", name=benchmark, npb_class=npb_class,
                              iterations=iterations, threaded=True)
    wall = coordinator.emulated_seconds(time.time() - start)
    results = [r["result"] for r in replies.values()]
    cpu = sum(r["cpu_seconds"] for r in replies.values()) / len(replies)  # emulated CPU-s
    return {"exe_seconds": wall, "cpu_seconds": max(cpu, 1e-6), "cpu_fraction": cpu / wall,
            "skeleton_seconds": max(r["seconds"] for r in results),
            "iterations": results[0]["iterations"], "nodes": group,
            "comm_model_seconds": None if comm_model is None else
            comm_model(benchmark, npb_class, group)}


def characterize(coordinator, nodes, wanted, *, iterations, network, cache_path=None,
                 comm_model=None):
    """Characterizations of ``wanted`` (benchmark, class, tasks) triples (a real program's:
    its command line, "", tasks), measuring only those not in the cache; ``iterations``
    caps a benchmark's iterations (benchmark -> N). Returns {(benchmark, class, tasks): entry}."""
    entries = read_cache(cache_path)
    out = {}
    for benchmark, npb_class, tasks in sorted(set(wanted)):
        if not npb_class:  # a real program: its command line, and when it was built
            command = shlex.split(benchmark)
            k = key(benchmark, os.stat(command[0]).st_mtime_ns, tasks, None, network)
            if k not in entries:
                entries[k] = measure_program(coordinator, nodes, command, tasks)
                write_cache(cache_path, entries)
            out[(benchmark, npb_class, tasks)] = entries[k]
            continue
        its = iterations.get(benchmark)
        k = key(benchmark, npb_class, tasks, its, network)
        if k not in entries:
            entries[k] = measure_one(coordinator, nodes, benchmark, npb_class, tasks, its,
                                     comm_model)
            write_cache(cache_path, entries)
        out[(benchmark, npb_class, tasks)] = entries[k]
    return out

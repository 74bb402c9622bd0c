"""Measuring the kernel's shaping and CPU groups on a machine that others share.

Contention slows a shaped link or a capped group down and never speeds it up: a bound that it
cannot break (a ceiling on a rate, a floor on a time) must hold on every attempt, and a bound it
can break on the best of a few attempts, as timeit keeps the best of its repeats.
"""

import os
import subprocess
import time

ATTEMPTS = 3


def best_of(measure, within, attempts=ATTEMPTS):
    """The results of ``measure()``, called until one is ``within`` bounds or ``attempts`` are
    spent; the last is the one to judge."""
    results = []
    for _ in range(attempts):
        results.append(measure())
        if within(results[-1]):
            break
    return results


def host_state():
    """For a failed measurement's message: how late this host wakes a 0.2 ms sleep (median and
    99th percentile of 2,000; HTB's and the shaper's timers wait the same way) and its load."""
    late = []
    for _ in range(2000):
        start = time.perf_counter()
        time.sleep(0.0002)
        late.append(time.perf_counter() - start - 0.0002)
    late.sort()
    return (f"host: a 0.2 ms sleep wakes {late[1000] * 1e3:.2f} ms late (median), "
            f"{late[1980] * 1e3:.2f} ms (99th percentile); load average "
            + " ".join(f"{x:.2f}" for x in os.getloadavg()))


def traces_of(name):
    """Every namespace and link whose name starts with testbed ``name``'s prefix: what a
    testbed left behind."""
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    found = [line.split()[0] for line in namespaces.splitlines() if line.startswith(name + "-")]
    found += [line.split(":")[1].strip().split("@")[0] for line in links.splitlines()
              if line.split(":")[1].strip().startswith(name + "-")]
    return found


def flows_off_the_model(report, share=0.05, floor_seconds=0.02, min_bytes=1_000_000):
    """The flows of a ``nodesel flows --json`` report of ``min_bytes`` or more whose end
    misses the model's by more than ``share`` of their span (``floor_seconds`` at least)."""
    off = []
    for flow in report["flows"]:
        span = flow["model_end_seconds"] - flow["start_seconds"]
        late = flow["end_seconds"] - flow["model_end_seconds"]
        if flow["size_bytes"] >= min_bytes and abs(late) > max(share * span, floor_seconds):
            off.append(flow)
    return off

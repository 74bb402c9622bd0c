"""Published start times per group and user (Li et al. §4.1): the trace is scheduled up to
a moment, and one forward simulation with a probe job per group and user answers for all.

The probes are the groups and users the site policy names, and ``default`` (a job that
matches no named credential); without a policy file, every group of the trace.
"""

import collections
import datetime
from dataclasses import dataclass
from typing import Any

from ..scheduling.scheduler import Scheduler
from ..scheduling.simulate import simulate
from .forward import probe_starts
from .waits import Learning


def probes_for(jobs, site, procs):
    """(label, user, group, procs) per probe."""
    probes = []
    if site is not None and (site.groups or site.users):
        groups_of = collections.defaultdict(collections.Counter)
        for job in jobs:
            groups_of[str(job.user)][job.group] += 1
        for name in site.groups:
            if name != "default":
                probes.append((f"group {name}", "(probe)", name, procs))
        for name in site.users:
            if name != "default":
                group = groups_of[name].most_common(1)[0][0] if groups_of[name] else "(probe)"
                probes.append((f"user {name}", name, group, procs))
    else:
        for group in sorted({j.group for j in jobs}, key=str):
            probes.append((f"group {group}", "(probe)", group, procs))
    probes.append(("default", "(probe)", "(probe)", procs))
    return probes


@dataclass(frozen=True)
class Machine:
    """The machine whose starts are published: its processors, its scheduler's policy and
    site policy, and whether jobs end at their requested time."""

    processors: int
    policy: str = "easy"
    site: Any = None
    kill_at_requested: bool = False


def published_starts(jobs, machine: Machine, estimator, source, at, *, probe_procs=1,
                     unix_start=None):
    """Schedule ``jobs`` up to ``at`` (seconds) on ``machine``, then publish a start time
    per probe of ``probe_procs`` processors (``unix_start``: the trace's time 0, for
    calendar times). Returns a JSON-able dict."""
    processors, policy, site = machine.processors, machine.policy, machine.site
    scheduler = Scheduler(processors, policy, site=site)
    known = [j for j in jobs if j.submit <= at]
    simulate(known, scheduler, estimator=Learning(estimator, [source]), until=at,
             kill_at_requested=machine.kill_at_requested)
    knows = estimator.name != "actual"
    probes = probes_for(jobs, site, probe_procs)
    starts = probe_starts(scheduler, at, probes, source.run_of, knows_estimates=knows)
    rows = []
    for label, *_ in probes:
        start = starts[label]
        row = {"entity": label, "wait_seconds": None if start is None else start - at,
               "start_seconds": start}
        if unix_start is not None and start is not None:
            row["start_utc"] = datetime.datetime.fromtimestamp(
                unix_start + start, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        rows.append(row)
    return {"at_seconds": at, "policy": policy, "runtimes": source.name,
            "running_jobs": len(scheduler.running), "queued_jobs": len(scheduler.waiting()),
            "free_processors": scheduler.free, "processors": processors, "starts": rows}


def starts_table(result):
    lines = [f"at {result['at_seconds']:.0f} s: {result['running_jobs']} running, "
             f"{result['queued_jobs']} queued, {result['free_processors']} of "
             f"{result['processors']} processors free ({result['policy']}, "
             f"{result['runtimes']} run times)", "",
             "| group / user | wait [s] | start |", "|---|---|---|"]
    for row in result["starts"]:
        wait = "never" if row["wait_seconds"] is None else f"{row['wait_seconds']:.0f}"
        when = row.get("start_utc") or ("" if row["start_seconds"] is None
                                        else f"{row['start_seconds']:.0f} s")
        lines.append(f"| {row['entity']} | {wait} | {when} |")
    return "\n".join(lines) + "\n"


def starts_csv(result):
    lines = ["entity,wait_seconds,start_seconds"]
    for row in result["starts"]:
        lines.append(f"{row['entity']},{row['wait_seconds']},{row['start_seconds']}")
    return "\n".join(lines) + "\n"


def plot_starts(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..files import save_figure

    rows = result["starts"]
    fig, ax = plt.subplots(figsize=(7, 0.4 * len(rows) + 1.5))
    ax.barh([r["entity"] for r in rows], [(r["wait_seconds"] or 0) / 3600 for r in rows])
    ax.set_xlabel("predicted wait [h]")
    ax.set_title(f"published start times at {result['at_seconds']:.0f} s ({result['policy']})")
    ax.invert_yaxis()
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)

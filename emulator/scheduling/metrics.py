"""What a schedule achieved: utilisation, waits, slowdowns (England and Weissman's slowdown, bounded
slowdown with a 10 s threshold), advance reservation offsets; and the files a schedule is
written as (per-job CSV, the input SWF with waits filled in)."""

import numpy as np

from ..files import write_text_atomic
from ..workload._columns import format_rows
from ..workload.swf import COLUMN, Trace, write_swf
from .job import attribute_array

BOUNDED_SLOWDOWN_SECONDS = 10.0
CSV_FIELDS = ("job", "submit_seconds", "start_seconds", "end_seconds", "wait_seconds",
              "run_seconds", "procs", "estimate_seconds", "requested_seconds", "reserved_seconds",
              "slowdown", "bounded_slowdown", "killed", "restarts", "user", "group")


def slowdowns(wait, run):
    """(slowdown, bounded slowdown) arrays: (wait + run) / run, and the same with run at
    least 10 s and the result at least 1 (slowdown is NaN for jobs of no length)."""
    wait, run = np.asarray(wait, dtype=float), np.asarray(run, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        slowdown = np.where(run > 0, (wait + run) / run, np.nan)
    bounded = np.maximum(1.0, (wait + run) / np.maximum(run, BOUNDED_SLOWDOWN_SECONDS))
    return slowdown, bounded


def median(values: np.ndarray) -> float:
    """``np.median`` of a non-empty array without NaN, by the same partition, without the
    import of ``numpy.ma`` that ``np.median`` makes (6 ms of a run's start).

    >>> median(np.array([3.0, 1.0, 2.0])), median(np.array([4.0, 1.0, 2.0, 3.0]))
    (2.0, 2.5)
    """
    half = len(values) // 2
    if len(values) % 2:
        return float(np.partition(values, half)[half])
    low, high = np.partition(values, [half - 1, half])[half - 1:half + 1]
    return float((low + high) / 2)


def summarize(sim, *, policy=None, dropped_jobs=0, estimates=None):
    """A JSON-able summary of a :class:`~.simulate.Simulation`."""
    done = [j for j in sim.jobs if j.start is not None]
    submit = np.array([j.submit for j in done])
    start = np.array([j.start for j in done])
    end = np.array([j.end for j in done])
    procs = np.array([j.procs for j in done])
    wait = start - submit if done else np.zeros(0)
    ran = end - start if done else np.zeros(0)
    slowdown, bounded = slowdowns(wait, ran)
    span = (end.max() - submit.min()) if done else 0.0
    reservations = [r for r in sim.reservations if r.granted_seconds is not None]
    offsets = np.array([r.offset_seconds for r in reservations])
    out = {
        "policy": policy or sim.policy,
        "estimates": estimates,
        "processors": sim.processors,
        "jobs": len(done),
        "unstarted_jobs": len(sim.jobs) - len(done),
        "dropped_jobs": dropped_jobs,
        "utilization": float((procs * ran).sum() / (sim.processors * span)) if span > 0 else 0.0,
        "makespan_seconds": float(span),
        "mean_wait_seconds": float(wait.mean()) if done else 0.0,
        "median_wait_seconds": median(wait) if done else 0.0,
        "max_wait_seconds": float(wait.max()) if done else 0.0,
        "mean_slowdown": float(np.nanmean(slowdown)) if np.isfinite(slowdown).any() else None,
        "mean_bounded_slowdown": float(bounded.mean()) if done else 0.0,
        "killed_jobs": sum(1 for j in done if j.killed),
        "restarted_jobs": sum(1 for j in sim.jobs if j.restarts),
        "simulation_seconds": sim.seconds,
        "simulated_jobs_per_second": sim.jobs_per_second,
    }
    if sim.reservations:
        started = [r for r in reservations if r.started_seconds is not None]
        out["reservations"] = {
            "requested": len(sim.reservations),
            "granted": len(reservations),
            "mean_offset_seconds": float(np.abs(offsets).mean()) if len(offsets) else None,
            "late_starts": sum(1 for r in started if r.started_seconds > r.granted_seconds),
        }
    return out


def jobs_csv(jobs):
    """The per-job CSV text, jobs in the given order: whole numbers as integers, others to 6
    significant digits, a blank where there is no value (a job that never started has no
    wait, run time or slowdown)."""
    procs, estimate, requested, reserved, restarts, submit, start, end = (
        attribute_array(jobs, name) for name in ("procs", "estimate", "requested", "reserved",
                                                 "restarts", "submit", "start", "end"))
    wait, ran = start - submit, end - start  # NaN for the jobs that never started
    slow, bounded = slowdowns(wait, ran)  # NaN there too
    columns = [[str(j.id) for j in jobs], submit, start, end, wait, ran, procs, estimate,
               requested, reserved, slow, bounded,
               np.array([j.killed for j in jobs], dtype=float), restarts,
               [str(j.user) for j in jobs], [str(j.group) for j in jobs]]
    rows = format_rows(columns, "s" + "g" * 13 + "ss", [0] * len(CSV_FIELDS), ",")
    return ",".join(CSV_FIELDS) + "\n" + rows


def write_jobs_csv(path, jobs):
    write_text_atomic(path, jobs_csv(jobs))


def scheduled_trace(trace, jobs):
    """``trace`` with field 3 (wait) from the schedule, and field 2 the submit time the
    schedule saw (a compressed trace's); a job killed at its requested time gets the time it
    ran (field 4) and status 0 (failed). Jobs in the trace's order."""
    data = trace.data.copy()
    submit, start, end = (attribute_array(jobs, name) for name in ("submit", "start", "end"))
    ran = ~np.isnan(start)
    killed = ran & np.array([job.killed for job in jobs], dtype=bool)
    data[:, COLUMN["submit"]] = submit
    data[:, COLUMN["wait"]] = np.where(ran, start - submit, -1)
    data[killed, COLUMN["run"]] = end[killed] - start[killed]
    data[killed, COLUMN["status"]] = 0
    header = list(trace.header) + [" Note: field 3 (wait) from a simulated schedule (nodesel)"]
    return Trace(data, header, trace.path, trace.lines)


def write_scheduled_swf(path, trace, jobs):
    write_swf(path, scheduled_trace(trace, jobs))


def summary_table(summaries):
    """Markdown: one row per policy."""
    lines = ["| policy | estimates | jobs | utilization [%] | mean wait [s] | mean slowdown | "
             "mean bounded slowdown | jobs/s simulated |",
             "|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        slow = "" if s["mean_slowdown"] is None else f"{s['mean_slowdown']:.2f}"
        lines.append(f"| {s['policy']} | {s.get('estimates') or ''} | {s['jobs']} | "
                     f"{100 * s['utilization']:.1f} | {s['mean_wait_seconds']:.0f} | {slow} | "
                     f"{s['mean_bounded_slowdown']:.2f} | {s['simulated_jobs_per_second']:.0f} |")
    return "\n".join(lines) + "\n"

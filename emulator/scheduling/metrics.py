"""What a schedule achieved: utilisation, waits, slowdowns (England and Weissman's slowdown, bounded
slowdown with a 10 s threshold), advance reservation offsets; and the files a schedule is
written as (per-job CSV, the input SWF with waits filled in). No numpy: a schedule run
never imports it."""

import math
import operator
from typing import Any, NamedTuple, Optional, Sequence

from ..files import write_streamed_atomic
from ..workload import _columns  # type: ignore[attr-defined]  # compiled
from ..workload._columns import column_bounds, format_rows
from ..workload.swf import write_swf
from .job import attribute_values

BOUNDED_SLOWDOWN_SECONDS = 10.0
CSV_FIELDS = ("job", "submit_seconds", "start_seconds", "end_seconds", "wait_seconds",
              "run_seconds", "procs", "estimate_seconds", "requested_seconds", "reserved_seconds",
              "slowdown", "bounded_slowdown", "killed", "restarts", "user", "group")


class JobTimes(NamedTuple):
    """Each job's times, as float64 memoryviews in the jobs' order (NaN where a job never
    started): wait = start - submit, run = end - start, slowdown = (wait + run) / run (NaN
    for a run of no length), bounded slowdown = the same with run at least 10 s and the
    result at least 1, turnaround = end - submit, stretch = turnaround / run."""

    submit: memoryview
    start: memoryview
    end: memoryview
    wait: memoryview
    run: memoryview
    slowdown: memoryview
    bounded: memoryview
    turnaround: memoryview
    stretch: memoryview


def job_times(jobs: Sequence[Any]) -> JobTimes:
    """The :class:`JobTimes` of ``jobs``, computed in C (no float object per job).

    >>> from emulator.scheduling.job import Job
    >>> a, b, c = Job(1, 0, 4, 10.0), Job(2, 0, 4, 5.0), Job(3, 5, 2, 0.0)
    >>> a.start, a.end, b.start, b.end, c.start, c.end = 0, 10, 30, 35, 5, 5
    >>> t = job_times([a, b, c])
    >>> t.wait.tolist(), t.slowdown.tolist(), t.bounded.tolist()
    ([0.0, 30.0, 0.0], [1.0, 7.0, nan], [1.0, 3.5, 1.0])
    """
    submit, start, end = (attribute_values(jobs, name) for name in ("submit", "start", "end"))
    derived = (memoryview(b).cast("d") for b in
               _columns.schedule_times(submit, start, end, BOUNDED_SLOWDOWN_SECONDS))
    return JobTimes(submit, start, end, *derived)


class JobColumns(NamedTuple):
    """What the summary and the per-job files read of each job, read once (a column a
    field, in the jobs' order): the ids, users and groups as lists, the rest as float64
    memoryviews (NaN for None), and the :class:`JobTimes`."""

    ids: list
    users: list
    groups: list
    procs: memoryview
    estimate: memoryview
    requested: memoryview
    reserved: memoryview
    restarts: memoryview
    killed: memoryview
    times: JobTimes


def job_columns(jobs: Sequence[Any]) -> JobColumns:
    """The :class:`JobColumns` of ``jobs``: pass them to :func:`summarize`,
    :func:`write_jobs_csv`, :func:`write_scheduled_swf` and
    :func:`~.batsim_out.write_batsim_jobs_csv` to read each job once for all of them."""
    numbers = (attribute_values(jobs, name) for name in ("procs", "estimate", "requested",
                                                         "reserved", "restarts", "killed"))
    return JobColumns([j.id for j in jobs], [j.user for j in jobs], [j.group for j in jobs],
                      *numbers, job_times(jobs))


def started_columns(jobs: Sequence[Any], columns: Optional[JobColumns]) -> tuple:
    """(the jobs that started, their :class:`JobColumns`): ``columns`` (those of ``jobs``)
    where every job started, else read afresh."""
    if columns is not None and column_bounds(columns.times.start)[2] == 0:
        return jobs, columns
    done = [j for j in jobs if j.start is not None]
    return done, job_columns(done)


def median(values: Sequence[float]) -> float:
    """The median of a non-empty sequence without NaN.

    >>> median([3.0, 1.0, 2.0]), median([4.0, 1.0, 2.0, 3.0])
    (2.0, 2.5)
    """
    ordered, half = sorted(values), len(values) // 2
    return float(ordered[half] if len(values) % 2 else (ordered[half - 1] + ordered[half]) / 2)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def summarize(sim: Any, *, policy: Optional[str] = None, dropped_jobs: int = 0,
              estimates: Optional[str] = None, columns: Optional[JobColumns] = None) -> dict:
    """A JSON-able summary of a :class:`~.simulate.Simulation` (``columns``: those of its
    jobs, if read already)."""
    done, columns = started_columns(sim.jobs, columns)
    times, procs = columns.times, columns.procs
    wait, bounded = times.wait, times.bounded
    span = (column_bounds(times.end)[1] - column_bounds(times.submit)[0]) if done else 0.0
    reservations = [r for r in sim.reservations if r.granted_seconds is not None]
    work = math.fsum(map(operator.mul, procs, times.run))
    some_slowdown = [v for v in times.slowdown if v == v]  # jobs of some length
    out = {
        "policy": policy or sim.policy,
        "estimates": estimates,
        "processors": sim.processors,
        "jobs": len(done),
        "unstarted_jobs": len(sim.jobs) - len(done),
        "dropped_jobs": dropped_jobs,
        "utilization": float(work / (sim.processors * span)) if span > 0 else 0.0,
        "makespan_seconds": float(span),
        "mean_wait_seconds": _mean(wait) if done else 0.0,
        "median_wait_seconds": median(wait) if done else 0.0,
        "max_wait_seconds": column_bounds(wait)[1] if done else 0.0,
        "mean_slowdown": _mean(some_slowdown) if some_slowdown else None,
        "mean_bounded_slowdown": _mean(bounded) if done else 0.0,
        "killed_jobs": int(sum(columns.killed)),
        "restarted_jobs": sum(1 for r in columns.restarts if r),
        "simulation_seconds": sim.seconds,
        "simulated_jobs_per_second": sim.jobs_per_second,
    }
    if sim.reservations:
        started = [r for r in reservations if r.started_seconds is not None]
        out["reservations"] = {
            "requested": len(sim.reservations),
            "granted": len(reservations),
            "mean_offset_seconds": (_mean([abs(r.offset_seconds) for r in reservations])
                                    if reservations else None),
            "late_starts": sum(1 for r in started if r.started_seconds > r.granted_seconds),
        }
    return out


def jobs_csv(jobs: Sequence[Any]) -> str:
    """The per-job CSV text, jobs in the given order: whole numbers as integers, others to 6
    significant digits, a blank where there is no value (a job that never started has no
    wait, run time or slowdown)."""
    return (_CSV_HEADER + format_rows(_jobs_csv_columns(job_columns(jobs)), *_CSV_FORMAT,
                                      True)).decode()


_CSV_HEADER = (",".join(CSV_FIELDS) + "\n").encode()
# format_rows's styles, widths and separator
_CSV_FORMAT = ("o" + "g" * 13 + "oo", [0] * len(CSV_FIELDS), ",")


def _jobs_csv_columns(c: JobColumns) -> list:
    """The columns of :func:`jobs_csv`, as format_rows takes them."""
    t = c.times  # NaN for the jobs that never started: blank
    return [c.ids, t.submit, t.start, t.end, t.wait, t.run, c.procs, c.estimate, c.requested,
            c.reserved, t.slowdown, t.bounded, c.killed, c.restarts, c.users, c.groups]


def write_jobs_csv(path, jobs, *, columns: Optional[JobColumns] = None):
    """:func:`jobs_csv` written to ``path`` (``columns``: those of ``jobs``, if read)."""
    rows = _jobs_csv_columns(columns if columns is not None else job_columns(jobs))
    write_streamed_atomic(path, _CSV_HEADER,
                          lambda write: format_rows(rows, *_CSV_FORMAT, True, write))


def scheduled_trace(trace: Any, jobs: Sequence[Any]) -> Any:
    """``trace`` with field 3 (wait) from the schedule, and field 2 the submit time the
    schedule saw (a compressed trace's); a job killed at its requested time gets the time it
    ran (field 4) and status 0 (failed). Jobs in the trace's order."""
    header, fields = _scheduled_fields(trace, jobs)
    out = trace.copy(header)
    out.dropped, out.drop_reasons, out.filled = 0, [], 0
    for name, values in fields.items():
        out.set_values(name, values)
    return out


def _scheduled_fields(trace: Any, jobs: Sequence[Any],
                      columns: Optional[JobColumns] = None) -> tuple:
    """(the header, {field: every job's value}) that :func:`scheduled_trace` changes."""
    header = list(trace.header) + [" Note: field 3 (wait) from a simulated schedule (nodesel)"]
    times = columns.times if columns is not None else job_times(jobs)
    wait: Sequence[float] = times.wait
    if column_bounds(wait)[2]:  # a job that never started: -1, SWF's missing value
        wait = [w if w == w else -1.0 for w in wait]
    fields = {"submit": times.submit, "wait": wait}
    start, end = times.start, times.end
    flags = columns.killed if columns is not None else attribute_values(jobs, "killed")
    killed = [] if not column_bounds(flags)[1] > 0 else \
        [k for k, flag in enumerate(flags) if flag and start[k] == start[k]]
    if killed:
        run, status = trace.values("run"), trace.values("status")
        for k in killed:
            run[k], status[k] = end[k] - start[k], 0.0
        fields.update(run=run, status=status)
    return header, fields


def write_scheduled_swf(path, trace, jobs, *, columns: Optional[JobColumns] = None):
    """:func:`scheduled_trace` written as SWF, without the copy of the trace (``columns``:
    those of ``jobs``, if read)."""
    header, fields = _scheduled_fields(trace, jobs, columns)
    write_swf(path, trace, header=header, fields=fields)


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

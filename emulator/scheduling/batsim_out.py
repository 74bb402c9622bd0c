"""A schedule in Batsim's words: ``batsim_jobs.csv``, the columns of Batsim's ``_jobs.csv``,
which evalys (the Batsim community's analysis and plotting tool) loads with
``JobSet.from_csv``, so a schedule can be set beside a Batsim run's.

Each job is given the processors it ran on (``allocated_resources``, Batsim's interval syntax:
``0-3 8``) by a sweep over the schedule in time order: a job that ends frees its processors
before one that starts at the same instant takes any, and a starting job takes the lowest
free ones. The scheduler never has more processors busy than the machine has, so every job
gets its own, and no processor serves two jobs at once. A job of no length (it ends as it
starts) holds nothing: it is shown on the lowest free processors where there are enough
(else on the first ones).

>>> from emulator.scheduling.job import Job
>>> a, b, c = Job(1, 0, 2, 10.0), Job(2, 0, 1, 5.0), Job(3, 5, 2, 5.0)
>>> a.start, a.end, b.start, b.end, c.start, c.end = 0, 10, 0, 5, 5, 10
>>> [interval_text(p) for p in allocate_processors([a, b, c], 4)]
['0-1', '2', '2-3']
"""

import bisect
from typing import Any, Sequence

import numpy as np

from ..files import write_text_atomic
from ..workload._columns import format_rows

__all__ = ["allocate_processors", "allocate_runs", "interval_text", "batsim_jobs_csv",
           "write_batsim_jobs_csv"]

COLUMNS = ("job_id", "workload_name", "profile", "submission_time",
           "requested_number_of_resources", "requested_time", "success", "final_state",
           "starting_time", "execution_time", "finish_time", "waiting_time", "turnaround_time",
           "stretch", "allocated_resources", "consumed_energy", "metadata")


def allocate_processors(jobs: Sequence[Any], processors: int) -> list:
    """The processor ids (sorted) each job of ``jobs`` ran on, in the order given; an empty
    list for a job that never started. Raises ValueError if the schedule has more
    processors busy than ``processors`` at some instant."""
    return [[p for first, count in runs for p in range(first, first + count)]
            for runs in allocate_runs(jobs, processors)]


def allocate_runs(jobs: Sequence[Any], processors: int) -> list:
    """As :func:`allocate_processors`, each job's processors as runs ``(first, count)`` of
    consecutive ids: the free processors are kept as such runs, so a job costs the runs it
    touches, not its processors."""
    events = []
    for k, j in enumerate(jobs):
        if j.start is not None:
            events.append((j.end, 0, k))  # ends first at one instant, jobs of no length last
            events.append((j.start, 2 if j.end <= j.start else 1, k))
    events.sort()
    free = [[0, processors]]  # runs of free ids, in order, never touching
    left = processors
    held: list = [[] for _ in jobs]
    for t, kind, k in events:
        if kind == 0:
            for run in held[k]:  # (a job of no length ends before it starts: nothing yet)
                _give(free, run)
                left += run[1]
            continue
        need = jobs[k].procs
        if kind == 2:  # no length: the lowest free ones where there are enough, else any
            held[k] = _lowest(free, need) if need <= left else [(0, need)]
            continue
        if need > left:
            raise ValueError(f"job {jobs[k].id} starts at {t:g} s on {need} processors, and "
                             f"only {left} of {processors} are free")
        held[k] = _take(free, need)
        left -= need
    return held


def _lowest(free: list, need: int) -> list:
    """The runs of the ``need`` lowest free ids, left free."""
    out = []
    for first, count in free:
        if need <= 0:
            break
        out.append((first, min(count, need)))
        need -= count
    return out


def _take(free: list, need: int) -> list:
    """Take the ``need`` lowest free ids."""
    out = _lowest(free, need)
    for first, count in out:
        if free[0][1] == count:
            free.pop(0)
        else:
            free[0][0] += count
            free[0][1] -= count
    return out


def _give(free: list, run: tuple) -> None:
    """Free the ids of ``run``, joining the runs it touches."""
    first, count = run
    k = bisect.bisect_left(free, [first, 0])
    if k > 0 and free[k - 1][0] + free[k - 1][1] == first:
        k -= 1
        free[k][1] += count
    else:
        free.insert(k, [first, count])
    if k + 1 < len(free) and free[k][0] + free[k][1] == free[k + 1][0]:
        free[k][1] += free.pop(k + 1)[1]


def interval_text(ids: Sequence[int]) -> str:
    """Sorted processor ids as Batsim writes them: ``0-3 8``."""
    parts, k = [], 0
    while k < len(ids):
        first = k
        while k + 1 < len(ids) and ids[k + 1] == ids[k] + 1:
            k += 1
        parts.append(str(ids[first]) if first == k else f"{ids[first]}-{ids[k]}")
        k += 1
    return " ".join(parts)


def batsim_jobs_csv(jobs: Sequence[Any], processors: int, *, workload: str = "w0") -> str:
    """The text of ``batsim_jobs.csv`` for the jobs that started (see the module): whole
    numbers without a point, others as Python's repr."""
    allocation = allocate_runs(jobs, processors)
    started = [k for k, j in enumerate(jobs) if j.start is not None]
    done = [jobs[k] for k in started]
    submit = np.array([j.submit for j in done], dtype=float)
    start = np.array([j.start for j in done], dtype=float)
    end = np.array([j.end for j in done], dtype=float)
    run, turnaround = end - start, end - submit
    with np.errstate(divide="ignore", invalid="ignore"):
        stretch = np.where(run > 0, turnaround / run, np.nan)
    killed = [j.killed for j in done]
    empty = [""] * len(done)
    columns = [[str(j.id) for j in done], [workload] * len(done), empty, submit,
               np.array([j.procs for j in done], dtype=float),
               np.array([-1 if j.requested is None else j.requested for j in done], dtype=float),
               np.array([not k for k in killed], dtype=float),
               [_KILLED if k else _SUCCEEDED for k in killed], start, run, end, start - submit,
               turnaround, stretch, [_runs_text(allocation[k]) for k in started], empty, empty]
    return ",".join(COLUMNS) + "\n" + format_rows(columns, "sssririsrrrrrrsss",
                                                   [0] * len(COLUMNS), ",")


_KILLED, _SUCCEEDED = "COMPLETED_WALLTIME_REACHED", "COMPLETED_SUCCESSFULLY"


def _runs_text(runs: Sequence[tuple]) -> str:
    """Runs ``(first, count)`` in Batsim's interval syntax, touching runs joined."""
    joined: list = []
    for first, count in runs:
        if joined and joined[-1][1] + 1 == first:
            joined[-1][1] = first + count - 1
        else:
            joined.append([first, first + count - 1])
    return " ".join(str(a) if a == b else f"{a}-{b}" for a, b in joined)


def write_batsim_jobs_csv(path: str, jobs: Sequence[Any], processors: int) -> None:
    write_text_atomic(path, batsim_jobs_csv(jobs, processors))

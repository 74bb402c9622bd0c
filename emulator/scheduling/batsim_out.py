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

import array
from typing import Any, Optional, Sequence

from ..files import write_streamed_atomic
from ..workload._columns import column_bounds, format_rows
from ._allocate import allocate_runs as _sweep
from .job import attribute_values
from .metrics import JobColumns, job_columns, started_columns

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
    touches, not its processors (the sweep is in C)."""
    return _runs(jobs, attribute_values(jobs, "start"), attribute_values(jobs, "end"),
                 attribute_values(jobs, "procs"), processors)


def _runs(jobs: Sequence[Any], start: Sequence[float], end: Sequence[float],
          procs: Sequence[float], processors: int, *, as_text: bool = False) -> list:
    """:func:`allocate_runs` with the jobs' times and sizes as arrays (NaN: never started);
    with ``as_text``, each job's runs in Batsim's interval syntax (:func:`interval_text`)."""
    held, overfull = _sweep(start, end, procs, processors, as_text)
    if overfull is not None:
        k, left = overfull
        raise ValueError(f"job {jobs[k].id} starts at {start[k]:g} s on {jobs[k].procs} "
                         f"processors, and only {left} of {processors} are free")
    return held


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
    return (_HEADER + format_rows(_columns_of(jobs, processors, workload), *_FORMAT,
                                  True)).decode()


_HEADER = (",".join(COLUMNS) + "\n").encode()


def _columns_of(jobs: Sequence[Any], processors: int, workload: str,
                columns: Optional[JobColumns] = None) -> list:
    """The columns of :func:`batsim_jobs_csv`, as format_rows takes them (``columns``: those
    of ``jobs``, if read)."""
    every = columns if columns is not None else job_columns(jobs)
    allocation = _runs(jobs, every.times.start, every.times.end, every.procs, processors,
                       as_text=True)
    done, c = started_columns(jobs, every)
    if len(done) < len(jobs):
        allocation = [text for text, job in zip(allocation, jobs) if job.start is not None]
    t, requested, killed = c.times, c.requested, c.killed
    if column_bounds(requested)[2]:  # no requested time: -1
        requested = array.array("d", [-1.0 if r != r else r for r in requested])
    empty = [""] * len(done)
    return [c.ids, [workload] * len(done), empty, t.submit, c.procs, requested,
            array.array("d", [1.0 - k for k in killed]),
            [_KILLED if k else _SUCCEEDED for k in killed], t.start, t.run, t.end, t.wait,
            t.turnaround, t.stretch, allocation, empty, empty]


# format_rows's styles, widths and separator
_FORMAT = ("ossririsrrrrrrsss", [0] * len(COLUMNS), ",")


_KILLED, _SUCCEEDED = "COMPLETED_WALLTIME_REACHED", "COMPLETED_SUCCESSFULLY"


def write_batsim_jobs_csv(path: str, jobs: Sequence[Any], processors: int, *,
                          columns: Optional[JobColumns] = None) -> None:
    """:func:`batsim_jobs_csv` written to ``path`` (``columns``: those of ``jobs``, if
    read)."""
    rows = _columns_of(jobs, processors, "w0", columns)
    write_streamed_atomic(path, _HEADER, lambda write: format_rows(rows, *_FORMAT, True, write))

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

import heapq
from typing import Any, Sequence

from ..files import write_text_atomic

__all__ = ["allocate_processors", "interval_text", "batsim_jobs_csv", "write_batsim_jobs_csv"]

COLUMNS = ("job_id", "workload_name", "profile", "submission_time",
           "requested_number_of_resources", "requested_time", "success", "final_state",
           "starting_time", "execution_time", "finish_time", "waiting_time", "turnaround_time",
           "stretch", "allocated_resources", "consumed_energy", "metadata")


def allocate_processors(jobs: Sequence[Any], processors: int) -> list:
    """The processor ids (sorted) each job of ``jobs`` ran on, in the order given; an empty
    list for a job that never started. Raises ValueError if the schedule has more
    processors busy than ``processors`` at some instant."""
    events = []
    for k, j in enumerate(jobs):
        if j.start is not None:
            events.append((j.end, 0, k))  # ends first at one instant, jobs of no length last
            events.append((j.start, 2 if j.end <= j.start else 1, k))
    events.sort()
    free = list(range(processors))
    heapq.heapify(free)
    held: list = [[] for _ in jobs]
    for t, kind, k in events:
        if kind == 0:
            for p in held[k]:
                heapq.heappush(free, p)
            continue
        need = jobs[k].procs
        if kind == 2:  # no length: the lowest free ones where there are enough, else any
            held[k] = sorted(heapq.nsmallest(need, free)) if need <= len(free) \
                else list(range(need))
            continue
        if need > len(free):
            raise ValueError(f"job {jobs[k].id} starts at {t:g} s on {need} processors, and "
                             f"only {len(free)} of {processors} are free")
        held[k] = sorted(heapq.heappop(free) for _ in range(need))
    return [sorted(h) for h in held]


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
    """The text of ``batsim_jobs.csv`` for the jobs that started (see the module)."""
    allocation = allocate_processors(jobs, processors)
    rows = [",".join(COLUMNS)]
    for j, procs in zip(jobs, allocation):
        if j.start is None:
            continue
        run = j.end - j.start
        turnaround = j.end - j.submit
        state = "COMPLETED_WALLTIME_REACHED" if j.killed else "COMPLETED_SUCCESSFULLY"
        requested = j.requested if j.requested is not None else -1
        stretch = turnaround / run if run > 0 else ""
        rows.append(",".join(str(v) for v in (
            j.id, workload, "", _num(j.submit), j.procs, _num(requested),
            0 if j.killed else 1, state, _num(j.start), _num(run), _num(j.end),
            _num(j.start - j.submit), _num(turnaround),
            _num(stretch) if stretch != "" else "", interval_text(procs), "", "")))
    return "\n".join(rows) + "\n"


def _num(v: Any) -> str:
    v = float(v)
    return str(int(v)) if v.is_integer() else repr(v)


def write_batsim_jobs_csv(path: str, jobs: Sequence[Any], processors: int) -> None:
    write_text_atomic(path, batsim_jobs_csv(jobs, processors))

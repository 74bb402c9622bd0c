"""Trace simulation: drive a :class:`~.scheduler.Scheduler` through a list of jobs on a
simulated clock that jumps from event to event (Li et al. §3.2).

Events are arrivals, completions and the scheduler's own wake-ups (advance reservations). At
each instant, completions are handled first, then advance reservations, then arrivals, and
then the policy runs once, so jobs that arrive together are scheduled together.
"""

import heapq
import time
from typing import Any, Callable, Optional, Sequence

from .estimates import Actual


class Simulation:
    """The outcome of a simulation: the jobs as they ran (copies of the jobs given, in the
    same order, with start and end filled in), the advance reservations, and how long the
    simulation took."""

    def __init__(self, jobs: list, reservations: list, processors: int, policy: str,
                 seconds: float) -> None:
        self.jobs = jobs
        self.reservations = reservations
        self.processors = processors
        self.policy = policy
        self.seconds = seconds

    @property
    def jobs_per_second(self) -> float:
        return len(self.jobs) / self.seconds if self.seconds > 0 else float("inf")


def simulate(jobs: Sequence[Any], scheduler: Any, *, estimator: Any = None,
             kill_at_requested: bool = False, reservations: Sequence[Any] = (),
             stop: Optional[Callable[[float], bool]] = None, until: Optional[float] = None,
             progress: Optional[Callable[[int], None]] = None,
             on_instant: Optional[Callable[..., None]] = None) -> Simulation:
    """Simulate ``jobs`` (:class:`~.job.Job`, any order) on ``scheduler``.

    Parameters
    ----------
    jobs : list of Job
        Each with ``submit``, ``procs`` and ``run``. They are read, never changed: the
        simulation schedules copies as submitted (:meth:`~.job.Job.fresh`), whose
        ``estimate`` is set by ``estimator`` (default: the actual run time) when the job
        arrives, and returns them in ``Simulation.jobs``. The same list simulated under two
        policies gives each policy's own schedule.
    estimator : object, optional
        ``estimate(job, now)`` and ``observe(job, now)``; see :mod:`.estimates`.
    kill_at_requested : bool
        End a job at its requested time if it would run longer (``job.killed``).
    reservations : list of ReservationRequest
        Advance reservation requests, each handled at its ``submit_seconds``.
    stop : callable, optional
        ``stop(now) -> bool``, checked after each instant; the simulation ends when it is
        true (jobs not started keep ``start=None``).
    until : float, optional
        Stop before the first instant later than this (the state as it is at ``until``).
    progress : callable, optional
        ``progress(jobs_done)``, called now and then.
    on_instant : callable, optional
        ``on_instant(now, scheduler, arrived, started)`` after the policy has run at each
        instant (``arrived``, ``started``: lists of jobs), e.g. to predict from a snapshot.

    Returns
    -------
    Simulation
        Its ``jobs`` are the scheduled copies, in the order of ``jobs``.
    """
    estimator = estimator or Actual()
    started_at = time.perf_counter()
    runs = [job.fresh() for job in jobs]
    arrivals = sorted(runs, key=lambda j: (j.submit, j.index))
    requests = sorted(reservations, key=lambda r: (r.submit_seconds, r.id))
    ends: list = []  # (end, index, start, job); stale if the job was killed and requeued
    n, m = len(arrivals), len(requests)
    a = r = 0
    done = 0
    inf = float("inf")
    while True:
        t = ends[0][0] if ends else inf
        if a < n and arrivals[a].submit < t:
            t = arrivals[a].submit
        if r < m and requests[r].submit_seconds < t:
            t = requests[r].submit_seconds
        wake = scheduler.next_wakeup()
        if wake is not None and wake < t:
            t = wake
        if t == inf or (until is not None and t > until):
            break
        while ends and ends[0][0] <= t:
            _, _, start, job = heapq.heappop(ends)
            if job.start != start:
                continue  # killed and requeued since
            scheduler.finish(job, t)
            if job.index < 0:
                continue  # an advance reservation's application
            estimator.observe(job, t)
            done += 1
            if progress is not None and done % 2048 == 0:
                progress(done)
        while r < m and requests[r].submit_seconds <= t:
            scheduler.request_reservation(requests[r], t)
            r += 1
        if scheduler.granted:
            started, killed = scheduler.start_reservations(t)
            for job in started:
                job.end = t + job.run
                heapq.heappush(ends, (job.end, job.index, t, job))
        first = a
        while a < n and arrivals[a].submit <= t:
            job = arrivals[a]
            job.estimate = estimator.estimate(job, t)
            scheduler.submit(job, t)
            a += 1
        started = scheduler.schedule(t)
        for job in started:
            run = job.run
            if kill_at_requested and job.requested is not None and run > job.requested:
                run = job.requested
                job.killed = True
            job.end = t + run
            heapq.heappush(ends, (job.end, job.index, t, job))
        if on_instant is not None:
            on_instant(t, scheduler, arrivals[first:a], started)
        if stop is not None and stop(t):
            break
    seconds = time.perf_counter() - started_at
    if progress is not None:
        progress(done)
    return Simulation(runs, list(reservations), scheduler.total, scheduler.policy, seconds)

"""Trace simulation: drive a :class:`~.scheduler.Scheduler` through a list of jobs on a
simulated clock that jumps from event to event (Li et al. §3.2).

Events are arrivals, completions and the scheduler's own wake-ups (advance reservations). At
each instant, completions are handled first, then advance reservations, then arrivals, and
then the policy runs once, so jobs that arrive together are scheduled together.
"""

import heapq
import time
from math import inf
from typing import Any, Callable, NamedTuple, Optional, Sequence

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


class Watch(NamedTuple):
    """What a caller watches during a simulation, and where it ends early.

    stop : callable, optional
        ``stop(now) -> bool``, checked after each instant; the simulation ends when it is
        true (jobs not started keep ``start=None``).
    progress : callable, optional
        ``progress(jobs_done)``, called now and then.
    on_instant : callable, optional
        ``on_instant(now, scheduler, arrived, started)`` after the policy has run at each
        instant (``arrived``, ``started``: lists of jobs), e.g. to predict from a snapshot.
    """

    stop: Optional[Callable[[float], bool]] = None
    progress: Optional[Callable[[int], None]] = None
    on_instant: Optional[Callable[..., None]] = None


NOTHING = Watch()


def simulate(jobs: Sequence[Any], scheduler: Any, *, estimator: Any = None,
             kill_at_requested: bool = False, reservations: Sequence[Any] = (),
             until: Optional[float] = None, watch: Watch = NOTHING) -> Simulation:
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
    until : float, optional
        Stop before the first instant later than this (the state as it is at ``until``).
    watch : Watch, optional
        Progress, a call at each instant, and a condition to stop on.

    Returns
    -------
    Simulation
        Its ``jobs`` are the scheduled copies, in the order of ``jobs``.
    """
    started_at = time.perf_counter()
    runs = [job.fresh() for job in jobs]
    copying_seconds = time.perf_counter() - started_at
    sim = simulate_owned(runs, scheduler, estimator=estimator,
                         kill_at_requested=kill_at_requested, reservations=reservations,
                         until=until, watch=watch)
    sim.seconds += copying_seconds  # the copies are part of this simulation's work
    return sim


def simulate_owned(jobs: list, scheduler: Any, *, estimator: Any = None,
                   kill_at_requested: bool = False, reservations: Sequence[Any] = (),
                   until: Optional[float] = None, watch: Watch = NOTHING) -> Simulation:
    """As :func:`simulate`, scheduling ``jobs`` themselves, not copies: jobs as submitted
    (``Job.fresh()``, or just read from a trace) that nothing else holds. The
    simulation's ``jobs`` is that list."""
    started_at = time.perf_counter()
    clock = _Clock(jobs, reservations, scheduler, estimator or Actual(), watch.progress)
    arrivals, requests, ends = clock.arrivals, clock.requests, clock.ends
    n, m = len(arrivals), len(requests)
    stop, on_instant = watch.stop, watch.on_instant
    while True:  # the next instant anything happens, read inline: this loop is hot
        t = ends[0][0] if ends else inf
        if clock.a < n and arrivals[clock.a].submit < t:
            t = arrivals[clock.a].submit
        if clock.r < m and requests[clock.r].submit_seconds < t:
            t = requests[clock.r].submit_seconds
        wake = scheduler.next_wakeup()
        if wake is not None and wake < t:
            t = wake
        if t == inf or (until is not None and t > until):
            break
        if ends and ends[0][0] <= t:
            clock.finish(t)
        if clock.r < m:
            clock.request(t)
        if scheduler.granted:
            clock.ends_of(scheduler.start_reservations(t)[0], t, False)
        first = clock.a
        if first < n and arrivals[first].submit <= t:
            clock.arrive(t)
        started = scheduler.schedule(t)
        if started:
            clock.ends_of(started, t, kill_at_requested)
        if on_instant is not None:
            on_instant(t, scheduler, arrivals[first:clock.a], started)
        if stop is not None and stop(t):
            break
    seconds = time.perf_counter() - started_at
    if watch.progress is not None:
        watch.progress(clock.done)
    return Simulation(clock.runs, list(reservations), scheduler.total, scheduler.policy,
                      seconds)


class _Clock:
    """A simulation's events: arrivals and reservation requests in time order, and the ends
    of running jobs, a heap of (end, index, start, job); an entry is stale if its job was
    killed and requeued since."""

    def __init__(self, jobs: list, reservations: Sequence[Any], scheduler: Any,
                 estimator: Any, progress: Optional[Callable[[int], None]]) -> None:
        self.runs = jobs
        self.arrivals = sorted(self.runs, key=lambda j: (j.submit, j.index))
        self.requests = sorted(reservations, key=lambda r: (r.submit_seconds, r.id))
        self.ends: list = []
        self.a = self.r = self.done = 0
        self.scheduler, self.estimator, self.progress = scheduler, estimator, progress

    def finish(self, t: float) -> None:
        """End the jobs due at ``t``."""
        ends, scheduler, progress = self.ends, self.scheduler, self.progress
        while ends and ends[0][0] <= t:
            _, _, start, job = heapq.heappop(ends)
            if job.start != start:
                continue  # killed and requeued since
            scheduler.finish(job, t)
            if job.index < 0:
                continue  # an advance reservation's application
            self.estimator.observe(job, t)
            self.done += 1
            if progress is not None and self.done % 2048 == 0:
                progress(self.done)

    def request(self, t: float) -> None:
        """Hand the scheduler the reservation requests made by ``t``."""
        requests = self.requests
        while self.r < len(requests) and requests[self.r].submit_seconds <= t:
            self.scheduler.request_reservation(requests[self.r], t)
            self.r += 1

    def arrive(self, t: float) -> None:
        """Submit the jobs arriving by ``t``, each with its estimate then."""
        arrivals, estimate, submit = self.arrivals, self.estimator.estimate, \
            self.scheduler.submit
        a, n = self.a, len(arrivals)
        while a < n and arrivals[a].submit <= t:
            job = arrivals[a]
            job.estimate = estimate(job, t)
            submit(job, t)
            a += 1
        self.a = a

    def ends_of(self, started: list, t: float, kill_at_requested: bool) -> None:
        """Each job started at ``t`` ends after its run (its requested time at most, if
        ``kill_at_requested``)."""
        for job in started:
            run = job.run
            if kill_at_requested and job.requested is not None and run > job.requested:
                run = job.requested
                job.killed = True
            job.end = t + run
            heapq.heappush(self.ends, (job.end, job.index, t, job))

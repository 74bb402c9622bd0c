"""Slurm's backfill (``SchedulerType=sched/backfill``) as a scheduling pass.

Each pass plans from scratch, as ``sched/backfill`` does every cycle: the running jobs free
their processors at their estimated ends, and the queued jobs are taken in priority order,
at most ``max_job_test`` of them. A job that fits now starts; one that does not gets the
earliest start the plan allows, and keeps it (later jobs may not delay it) only if that
start is within ``window_seconds``; beyond the window it holds nothing. Times in the plan are
on a grid of ``resolution_seconds`` from now: ends are rounded up to it.

With an unbounded window and test limit, and a resolution of 1 s on whole-second traces,
the plan is conservative backfilling's. A pass stops early once fewer processors are free
now than the smallest queued job needs: nothing more could start, and the plan is made
again at the next pass. The pass runs in C (``Profile.plan``).
The first planned start a job is given is kept as its ``reserved`` time.

Passes come every ``interval_seconds`` (``bf_interval``, Slurm's 30 s), on a grid from time
0, as Slurm's backfill thread wakes; a pass with nothing changed since the last (no job
submitted or ended) would find the plan it found, so only the first grid time after a
change runs one. Between passes Slurm's main scheduler runs at every event: jobs in
priority order start while they fit, and the first that does not stops it (its partition
is blocked); a job held by a limit is passed over. An interval of 0 runs a pass at every
event instead (the plan at every event, as conservative backfilling keeps it).
"""

import math
from typing import Any, NamedTuple

from .profile import Profile
from .resolution import round_up


class BackfillParams(NamedTuple):
    """``bf_window``, ``bf_resolution``, ``bf_max_job_test`` and ``bf_interval`` (Slurm's
    defaults; ``interval_seconds`` 0: a pass at every event)."""

    window_seconds: float = 86400.0
    resolution_seconds: float = 60.0
    max_job_test: int = 500
    interval_seconds: float = 30.0

    @classmethod
    def from_config(cls, config: Any) -> "BackfillParams":
        return cls(config.bf_window_seconds, config.bf_resolution_seconds,
                   config.bf_max_job_test, config.bf_interval_seconds)


def slurm_schedule(sched: Any, now: float, params: BackfillParams) -> list:
    """Slurm's two schedulers at ``now`` (see the module): the main one, then the backfill
    pass if one is due; returns the jobs started."""
    interval = params.interval_seconds
    if not interval > 0:
        return slurm_pass(sched, now, params)
    # the main scheduler: priority order until one waits (advance reservations granted:
    # only the pass, which holds them, starts jobs)
    started = [] if sched.granted else sched._in_order(now)
    if sched._bf_due is None:  # something changed: a pass at the next grid time
        sched._bf_due = math.ceil(now / interval) * interval
    if now >= sched._bf_due:
        sched._bf_due = None
        started += slurm_pass(sched, now, params)
    return started


def slurm_pass(sched: Any, now: float, params: BackfillParams) -> list:
    """Start what Slurm's backfill starts at ``now``; returns the jobs started."""
    smallest = min(sched._sizes, default=math.inf)
    if sched.free < smallest:
        return []  # nothing can start; the plan is made again at the next pass
    res = params.resolution_seconds
    profile = Profile.from_running(now, sched.free, sched.releases, res)
    sched._reserve_granted(profile, now)
    if sched._limits or sched.nodes is not None:  # holds and placements: job by job
        return _pass_in_python(sched, now, params, profile, smallest)
    # the plan gives the jobs that start now, and later ones their first reserved time
    started = profile.plan(sched.queue, now, sched.free, smallest, params.window_seconds, res,
                           params.max_job_test)
    for job in started:
        sched._start(job, now)
    return started


def _pass_in_python(sched: Any, now: float, params: BackfillParams, profile: Any,
                    smallest: float) -> list:
    """The same pass where site limits hold jobs or a node policy places them."""
    res, sizes = params.resolution_seconds, sched._sizes
    started, tested = [], 0
    for _, job in sched.queue:
        if sched.free < smallest or tested >= params.max_job_test:
            break
        if job.start is not None or sched._held(job):
            continue
        tested += 1
        duration = round_up(job.estimate, res)
        if job.procs <= sched.free and profile.fits(job.procs, duration, now) \
                and sched._placeable(job):
            profile.reserve(now, duration, job.procs)
            sched._start(job, now)
            started.append(job)
            if job.procs == smallest and job.procs not in sizes:
                smallest = min(sizes, default=math.inf)
            continue
        t = profile.earliest(job.procs, duration, now)
        if t is not None and t - now < params.window_seconds:
            profile.reserve(t, duration, job.procs)
            if job.reserved is None:
                job.reserved = t
    return started

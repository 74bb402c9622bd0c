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
"""

import math
from dataclasses import dataclass
from typing import Any

from .profile import Profile, round_up


@dataclass(frozen=True)
class BackfillParams:
    window_seconds: float = 86400.0
    resolution_seconds: float = 60.0
    max_job_test: int = 500

    @classmethod
    def from_config(cls, config: Any) -> "BackfillParams":
        return cls(config.bf_window_seconds, config.bf_resolution_seconds,
                   config.bf_max_job_test)


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
    started = []
    for job, t in profile.plan(sched.queue, now, sched.free, smallest, params.window_seconds,
                               res, params.max_job_test):
        if t == now:
            sched._start(job, now)
            started.append(job)
        elif job.reserved is None:
            job.reserved = t
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

"""Start-time prediction by simulating the scheduler forward (Smith §3.2, Li et al. §3).

At a job's submission the scheduler is copied (running jobs with their start times, the
queue in order, priorities, limits and granted reservations) and the copy is run forward,
event to event, with predicted run times and no later arrivals, until the job starts. The
copy's policy code is the scheduler's own.

A run time source ``run_of(job, elapsed)`` gives the total run time a job is believed to
have; a running job that has outlived it is believed to run on as EASY++ extends it. Probe
jobs (Li et al. §4.1) answer for every group and user at once: one probe each is added at
the end of the queue, and the time a probe starts is that group's or user's start time.

Later arrivals matter to a job that is not at the head of an EASY queue: a job that arrives
after it may backfill into processors it would have had. With ``arrivals`` the copy also
takes in jobs at their own submit times; :func:`replayed_arrivals` makes them from the
site's recent past (the jobs of the last ``horizon`` seconds, again ``horizon`` later), the
simplest forecast of the workload to come.
"""

import heapq

from ..scheduling.estimates import extended_estimate
from ..scheduling.job import Job, Owner
from ..scheduling.scheduler import RESOLUTION_SECONDS


def _believed(job, run, now):
    """The run time a job is believed to have at ``now``: ``run``, or extended if a running
    job has already outlived it."""
    if job.start is not None and job.start + run <= now:
        return extended_estimate(job, now)
    return max(run, RESOLUTION_SECONDS)


def forward_snapshot(scheduler, now, run_of, *, knows_estimates=True):
    """A copy of ``scheduler`` at ``now`` whose jobs run for their believed run times.

    ``knows_estimates``: the scheduler's own estimates (requested times, predictions made
    at submission) are known and kept; otherwise (a scheduler given actual run times, which
    no one knows in advance) the copy schedules with the believed run times too.
    Returns (copy, map from original job to copy).
    """

    def copy(job):
        c = job.fresh()
        elapsed = now - job.start if job.start is not None else 0.0
        c.run = _believed(job, run_of(job, elapsed), now)
        if not knows_estimates:
            c.estimate = c.run
        return c

    return scheduler.snapshot(now, job_copy=copy)


def replayed_arrivals(recent, now, horizon_seconds, run_of, *, knows_estimates=True,
                      exclude=None):
    """Copies of the jobs of ``recent`` submitted in (now - horizon, now], each submitted
    again ``horizon_seconds`` later (so in (now, now + horizon]) with the run time
    ``run_of(job, 0)`` believed for it at its submission; ``exclude``: a job left out (the
    one whose start is forecast). Index -1, -2, ... (no real job's)."""
    out = []
    for job in recent:
        if job is exclude or not now - horizon_seconds < job.submit <= now:
            continue
        c = job.fresh()
        c.submit = job.submit + horizon_seconds
        c.run = max(run_of(job, 0.0), RESOLUTION_SECONDS)
        if not knows_estimates or c.estimate is None:
            c.estimate = c.run
        c.index = -1 - len(out)
        out.append(c)
    out.sort(key=lambda c: (c.submit, -c.index))
    return out


def _runs_for(job, kill_at_requested):
    """How long a started copy runs: its believed run time, cut at its request if asked."""
    if kill_at_requested and job.requested is not None and job.run > job.requested:
        return job.requested
    return job.run


def run_forward(sim, now, targets, *, kill_at_requested=False, arrivals=()):
    """Run the copy ``sim`` from ``now`` until every job of ``targets`` has started (or
    nothing is left to happen), taking in ``arrivals`` (jobs in submit order, after
    ``now``) at their submit times. Returns {target: start time or None}."""
    ends = [(c.start + c.run, c.index, c) for c in sim.running]
    heapq.heapify(ends)
    left = set(targets)
    arrivals = list(arrivals)
    a = 0

    def started(jobs, t):
        for c in jobs:
            left.discard(c)
            heapq.heappush(ends, (t + _runs_for(c, kill_at_requested), c.index, c))

    if sim.granted:
        started(sim.start_reservations(now)[0], now)
    started(sim.schedule(now), now)
    inf = float("inf")
    while left:
        t = ends[0][0] if ends else inf
        if a < len(arrivals) and arrivals[a].submit < t:
            t = arrivals[a].submit
        wake = sim.next_wakeup()
        if wake is not None and wake < t:
            t = wake
        if t == inf:
            break
        while ends and ends[0][0] <= t:
            _, _, c = heapq.heappop(ends)
            if c in sim.running:
                sim.finish(c, t)
        while a < len(arrivals) and arrivals[a].submit <= t:
            sim.submit(arrivals[a], t)
            a += 1
        if sim.granted:
            jobs, _ = sim.start_reservations(t)
            started(jobs, t)
        started(sim.schedule(t), t)
    return {c: c.start for c in targets}


def run_stepped(sim, now, targets, step_seconds, *, kill_at_requested=False):
    """The time-stepped form of :func:`run_forward` (Maui's simulation mode, before Li et
    al. drove it from event to event): the clock advances ``step_seconds`` at a time,
    whether or not anything happens; jobs that ended within a step are seen at its end, and
    the scheduler runs at every step. Returns {target: start time or None}."""
    ends = {c: c.start + c.run for c in sim.running}
    left = set(targets)

    def started(jobs, t):
        for c in jobs:
            left.discard(c)
            ends[c] = t + _runs_for(c, kill_at_requested)

    if sim.granted:
        started(sim.start_reservations(now)[0], now)
    started(sim.schedule(now), now)
    t = now
    while left and ends:
        t += step_seconds
        for c in [c for c, end in ends.items() if end <= t]:
            del ends[c]
            if c in sim.running:
                sim.finish(c, t)
        if sim.granted:
            started(sim.start_reservations(t)[0], t)
        started(sim.schedule(t), t)
    return {c: c.start for c in targets}


def predict_start(scheduler, now, job, run_of, *, knows_estimates=True,
                  kill_at_requested=False, arrivals=(), step_seconds=None):
    """Technique 1 for one queued ``job``: its predicted start time (``arrivals``: later
    jobs the copy takes in, as :func:`run_forward`; ``step_seconds``: simulate
    time-stepped instead, as :func:`run_stepped`, without arrivals)."""
    sim, mapping = forward_snapshot(scheduler, now, run_of, knows_estimates=knows_estimates)
    target = mapping[job]
    if step_seconds is not None:
        return run_stepped(sim, now, [target], step_seconds,
                           kill_at_requested=kill_at_requested)[target]
    return run_forward(sim, now, [target], kill_at_requested=kill_at_requested,
                       arrivals=arrivals)[target]


def probe_starts(scheduler, now, probes, run_of, *, knows_estimates=True,
                 probe_seconds=1.0):
    """Li et al.'s policy-based publishing: ``probes`` is a list of (label, user, group,
    procs); one probe job each joins the end of the queue (with the priority the site
    policy gives its user and group) and the copy runs until all have started. Returns
    {label: start time or None}."""
    sim, _ = forward_snapshot(scheduler, now, run_of, knows_estimates=knows_estimates)
    jobs = {}
    for k, (label, user, group, procs) in enumerate(probes):
        probe = Job(f"probe-{label}", now, procs, probe_seconds, estimate=probe_seconds,
                    owner=Owner(user, group), index=10**12 + k)
        sim.submit(probe, now)
        jobs[label] = probe
    starts = run_forward(sim, now, list(jobs.values()))
    return {label: starts[probe] for label, probe in jobs.items()}

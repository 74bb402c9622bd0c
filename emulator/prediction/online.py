"""Running predictors online over a trace, and using one inside the scheduler.

A job's run time is predicted at its submission, from a copy of the job that carries no run
time; the job becomes history (``observe``) only at its completion, the start plus run time
of the schedule that actually happens. At one instant, completions come before submissions.

Where a predictor has nothing to go on, the prediction falls back to the requested time,
else the mean run time of every job completed so far, else :data:`DEFAULT_SECONDS`; each
fallback is counted.
"""

import numpy as np

from ..scheduling.estimates import Actual
from ..scheduling.job import Job
from ..scheduling.scheduler import Scheduler
from ..scheduling.simulate import simulate
from .runtime import MIN_SECONDS

DEFAULT_SECONDS = 3600.0  # before any job has completed
SOURCES = ("predictor", "requested", "history mean", "default")


def blind(job):
    """A copy of ``job`` as submitted, without its run time."""
    copy = Job(job.id, job.submit, job.procs, None, requested=job.requested, owner=job.owner,
               index=job.index)
    return copy


def completion_times(jobs, processors, *, waits=None, policy="easy"):
    """When each job completes in the schedule that actually happens: submit + wait + run
    where the trace records waits (``waits``, -1 missing), else by simulating ``policy``
    with actual run times. Returns an array in the jobs' order."""
    if waits is not None and len(waits) and (np.asarray(waits) >= 0).all():
        return np.array([j.submit + w + j.run for j, w in zip(jobs, waits)])
    sim = simulate(jobs, Scheduler(processors, policy), estimator=Actual())
    return np.array([c.end for c in sim.jobs])


def events(jobs, ends, *, until=None):
    """(time, kind, position) in time order, completions (kind 0) before submissions (kind
    1) at one instant; only events at or before ``until`` if given."""
    out = [(j.submit, 1, i) for i, j in enumerate(jobs)]
    out += [(float(e), 0, i) for i, e in enumerate(ends)]
    out.sort()
    if until is not None:
        out = [e for e in out if e[0] <= until]
    return out


class Fallback:
    """The fallback chain for predictions, with the running mean of completed jobs."""

    def __init__(self):
        self.total, self.count = 0.0, 0

    def observe(self, job):
        self.total += job.run
        self.count += 1

    def value(self, job):
        """(seconds, source index) for a job no predictor could predict."""
        if job.requested is not None:
            return job.requested, 1
        if self.count:
            return max(self.total / self.count, MIN_SECONDS), 2
        return DEFAULT_SECONDS, 3


def run_online(jobs, ends, predictors, *, until=None, on_submit=None, progress=None):
    """Run ``predictors`` over the jobs online. Returns (predictions, sources): arrays of
    shape (predictors, jobs); jobs not submitted by ``until`` keep NaN and source -1.
    ``on_submit(position, blind_job, fallback)`` is called at each submission before the
    predictors (for searches that record more than the final prediction)."""
    n = len(jobs)
    predictions = np.full((len(predictors), n), np.nan)
    sources = np.full((len(predictors), n), -1, dtype=np.int8)
    fallback = Fallback()
    done = 0
    for _, kind, i in events(jobs, ends, until=until):
        job = jobs[i]
        if kind == 0:
            for p in predictors:
                p.observe(job)
            fallback.observe(job)
            continue
        seen = blind(job)
        if on_submit is not None:
            on_submit(i, seen, fallback)
        for k, p in enumerate(predictors):
            value = p.predict(seen)
            if value is None:
                value, source = fallback.value(seen)
            else:
                source = 0
            predictions[k, i] = value
            sources[k, i] = source
        done += 1
        if progress is not None and done % 512 == 0:
            progress(512)
    return predictions, sources


class Online:
    """A predictor as the scheduler's estimator (:mod:`~emulator.scheduling.estimates`):
    it predicts at submission and learns at completion, inside the simulated schedule."""

    def __init__(self, predictor):
        self.predictor = predictor
        self.name = predictor.name
        self.fallback = Fallback()
        self.predicted = {}  # job index -> the prediction made at submission

    def estimate(self, job, now):
        seen = blind(job)
        value = self.predictor.predict(seen)
        if value is None:
            value = self.fallback.value(seen)[0]
        self.predicted[job.index] = value
        return value

    def observe(self, job, now):
        self.predictor.observe(job)
        self.fallback.observe(job)

"""Run-time estimates the policies schedule with: the user's requested time, the actual run
time (the perfect-knowledge bound), or a predictor's output.

An estimator has ``name``, ``estimate(job, now) -> seconds`` (called once, at submission) and
``observe(job, now)`` (called when a job completes, so online predictors learn; never earlier).
A job that outlives its estimate has it extended (:func:`extended_estimate`), as EASY++ does.
"""

from ..errors import UserError


class Requested:
    """The user's requested time (SWF field 9)."""

    name = "requested"

    def estimate(self, job, now):
        if job.requested is None:
            raise UserError(f"job {job.id} has no requested time (SWF field 9 is -1); "
                            "schedule with --estimates actual or a predictor")
        return job.requested

    def observe(self, job, now):
        pass


class Actual:
    """The job's actual run time: the perfect-knowledge bound."""

    name = "actual"

    def estimate(self, job, now):
        if job.run is None:
            raise UserError(f"job {job.id} has no run time to schedule with")
        return job.run

    def observe(self, job, now):
        pass


class Function:
    """A plain function ``f(job, now) -> seconds`` as an estimator that learns nothing."""

    def __init__(self, fn, name="function"):
        self.fn, self.name = fn, name

    def estimate(self, job, now):
        return self.fn(job, now)

    def observe(self, job, now):
        pass


ESTIMATES = {"requested": Requested, "actual": Actual}


def estimator(name):
    try:
        return ESTIMATES[name]()
    except KeyError:
        raise UserError(f"unknown estimates {name!r}; choose from {', '.join(ESTIMATES)}") \
            from None


def extended_estimate(job, now):
    """A new estimate for a job still running at ``now``, past ``start + estimate``: its
    requested time if that is still ahead, else twice the time it has run so far."""
    elapsed = now - job.start
    if job.requested is not None and job.requested > elapsed:
        return job.requested
    return max(2.0 * elapsed, elapsed + 1.0)

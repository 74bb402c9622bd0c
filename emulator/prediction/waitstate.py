"""Wait prediction from similar scheduler states (Smith §3.3, technique 2).

The state a job meets is described by the jobs queued ahead of it, their requested work,
the running jobs and the work they have left, the job's own size and estimate, and the hour
of the day. Each is continuous, so each is binned (powers of two; hours in blocks of four).
Templates are sets of these characteristics; each category keeps its recent waits, and the
mean of the category with the narrowest 90% confidence interval is the prediction, as for
run times. A job's wait becomes history when it starts.
"""

import collections
import math

from .estimators import interval_from_sums

FEATURES = ("queued_jobs", "queued_work", "running_jobs", "running_work", "procs",
            "estimate", "hour")
TEMPLATES = (("queued_jobs",), ("queued_work",), ("queued_jobs", "procs"),
             ("queued_work", "procs"), ("queued_work", "running_work"),
             ("queued_jobs", "queued_work", "procs"), ("queued_work", "estimate"),
             ("queued_work", "running_work", "procs"), ("hour", "queued_jobs"))
HISTORY = 64


def scheduler_state(scheduler, job, now):
    """The characteristics of the state ``job`` meets in ``scheduler`` at ``now``."""
    ahead_jobs, ahead_work = 0, 0.0
    for _, other in scheduler.queue:
        if other is job:
            break
        if other.start is None:
            ahead_jobs += 1
            ahead_work += other.procs * other.estimate
    running_work = sum(j.procs * max(j.est_end - now, 0.0) for j in scheduler.running)
    return {"queued_jobs": ahead_jobs, "queued_work": ahead_work,
            "running_jobs": len(scheduler.running), "running_work": running_work,
            "procs": job.procs, "estimate": job.estimate, "hour": int(now // 3600) % 24}


def _bin(name, value):
    if name == "hour":
        return value // 4
    return int(math.log2(value + 1.0))


class StatePredictor:
    """Technique 2 over ``templates`` (tuples of :data:`FEATURES`)."""

    def __init__(self, templates=TEMPLATES, history=HISTORY):
        self.templates = [tuple(t) for t in templates]
        self.history = history
        self.stores = [{} for _ in self.templates]

    def _keys(self, state):
        return [tuple(_bin(f, state[f]) for f in t) for t in self.templates]

    def predict(self, state):
        """The predicted wait in seconds; None with no history at all."""
        best = None
        for key, store in zip(self._keys(state), self.stores):
            cat = store.get(key)
            if cat is None:
                continue
            est = interval_from_sums(len(cat[0]), cat[1], cat[2])
            if best is None or est[1] < best[1]:
                best = est
        return None if best is None else max(best[0], 0.0)

    def observe(self, state, wait):
        for key, store in zip(self._keys(state), self.stores):
            cat = store.get(key)
            if cat is None:
                cat = store[key] = [collections.deque(maxlen=self.history), 0.0, 0.0]
            values = cat[0]
            if len(values) == values.maxlen:
                old = values[0]
                cat[1] -= old
                cat[2] -= old * old
            values.append(wait)
            cat[1] += wait
            cat[2] += wait * wait

"""Where an arriving migratable job goes (England and Weissman §IV.A, §IV.C.5).

A job moves only if its home queue is non-empty (before it joins) and some remote site's
queue is more favourable than home's:

``shortest-queue``   fewest queued jobs;
``weighted-queue``   queued processors requested over the site's processors;
``predicted-start``  the earliest start the site's own scheduler, simulated forward
                     (technique 1 of the predictions), would give the job, migration
                     time included. The jobs' believed run times come from a source named
                     after a colon: ``requested`` (the default) or ``last2`` (the mean of
                     the user's last two completed jobs, Tsafrir et al., else the
                     requested time). The simulated schedulers keep the requested times
                     as their estimates, as the real ones do.

Ties go to the first site in grid order. The functions read queue status only; the
co-simulation (:mod:`.simulate`) moves the job.
"""

from dataclasses import dataclass

from ..prediction.forward import forward_snapshot, run_forward

TARGETS = ("shortest-queue", "weighted-queue", "predicted-start")
FORECASTS = ("requested", "last2")  # run-time sources of predicted-start


def parse_target(name):
    """(policy, run-time source or None) of a target name such as ``predicted-start:last2``
    (``predicted-start`` alone: ``requested``);
    ValueError for an unknown one."""
    policy, _, source = name.partition(":")
    if policy not in TARGETS:
        raise ValueError(f"unknown target {name!r}; choose from {', '.join(TARGETS)}")
    if policy != "predicted-start":
        if source:
            raise ValueError(f"{policy} takes no run-time source (got {name!r})")
        return policy, None
    source = source or FORECASTS[0]
    if source not in FORECASTS:
        raise ValueError(f"unknown run-time source {source!r} in {name!r}; choose from "
                         f"{', '.join(FORECASTS)}")
    return policy, source


@dataclass(frozen=True)
class QueueStatus:
    """What a site tells a polling site: queued jobs and the processors they ask for."""

    queued_jobs: int
    queued_procs: int
    processors: int

    @property
    def weighted(self):
        return self.queued_procs / self.processors


def queue_status(scheduler):
    waiting = scheduler.waiting()
    return QueueStatus(len(waiting), sum(j.procs for j in waiting), scheduler.total)


def choose_by_queue(home, statuses, policy, fits=None):
    """The site index a job arriving at ``home`` moves to, or None (stay). ``statuses``: a
    :class:`QueueStatus` per site; ``fits``: per site, whether the job fits its machine."""
    if statuses[home].queued_jobs == 0:
        return None
    key = (lambda s: s.queued_jobs) if policy == "shortest-queue" else (lambda s: s.weighted)
    best = None
    for i, status in enumerate(statuses):
        if i == home or (fits is not None and not fits[i]):
            continue
        if best is None or key(status) < key(statuses[best]):
            best = i
    if best is not None and key(statuses[best]) < key(statuses[home]):
        return best
    return None


def forecast_start(scheduler, now, job, arrive, run_of=None):
    """The start ``job`` would get at ``scheduler`` if it arrived at ``arrive`` (>= now),
    by simulating a copy forward with no other arrival, every job running for
    ``run_of(job, elapsed)`` (default: its estimate). The copy takes the job in now, so a
    later arrival is only bounded below."""
    sim, _ = forward_snapshot(scheduler, now, run_of or (lambda j, elapsed: j.estimate))
    probe = job.fresh()
    probe.run = probe.estimate = job.estimate
    probe.index = -(10**12)  # never an index of a real job
    sim.submit(probe, now)
    start = run_forward(sim, now, [probe])[probe]
    return None if start is None else max(start, arrive)


def choose_by_forecast(home, schedulers, now, job, migration_seconds, fits, run_of=None):
    """``predicted-start``: the site with the earliest forecast start (``migration_seconds``
    per site, 0 at home; ``run_of`` as :func:`forecast_start`), if earlier than home's;
    None while home's queue is empty."""
    if not schedulers[home].waiting():
        return None
    starts = [forecast_start(s, now, job, now + migration_seconds[i], run_of) if fits[i]
              else None
              for i, s in enumerate(schedulers)]
    best = None
    for i, start in enumerate(starts):
        if i != home and start is not None and (best is None or start < starts[best]):
            best = i
    if best is not None and (starts[home] is None or starts[best] < starts[home]):
        return best
    return None

"""The co-simulation of a grid: every site's scheduler on one simulated clock, with
migratable jobs moved at arrival (England and Weissman §IV.A).

Each job carries ``info``: ``home`` (site index), ``migratable`` and ``data_bytes``. At
each instant, completions come first, then jobs whose transfer ends, then arrivals (each
decides in turn, so a job sees the queues as the jobs before it left them), then every site
that changed schedules once. A moved job reaches its target after its data size over the
bandwidth between the two sites at the moment it leaves.
"""

import heapq
import time

from ..prediction.runtime import LastTwo
from .migration import choose_by_forecast, choose_by_queue, parse_target, queue_status


def migration_seconds(data_bytes, bandwidth_mbps):
    return data_bytes * 8 / (bandwidth_mbps * 1e6)


def run_time_source(source, sites):
    """(run_of(job, elapsed), observe(job)) of a ``predicted-start`` run-time source. With
    ``last2`` a user's history is their home site's (a job is known by its user wherever it
    runs) and a job joins it when it completes; a job is never believed to outrun its
    estimate (the requested time: the scheduler kills it there)."""
    if source == "requested":
        return (lambda job, elapsed: job.estimate), (lambda job: None)
    history = [LastTwo() for _ in range(sites)]

    def run_of(job, elapsed):
        predicted = history[job.info["home"]].predict(job)
        return job.estimate if predicted is None else min(predicted, job.estimate)

    return run_of, lambda job: history[job.info["home"]].observe(job)


def simulate_grid(jobs, schedulers, target, bandwidth):
    """Run ``jobs`` (any order, ``info`` set, ``estimate`` set) on ``schedulers`` (one per
    site, fresh). ``target``: a name of :data:`~.migration.TARGETS`, with its run-time
    source (``predicted-start:last2``); ``bandwidth(a, b, t)``: Mbit/s between sites ``a``
    and ``b`` (indices) at time ``t``.

    The jobs given are left as they are. Returns (the jobs as they ran, the wall seconds it
    took): copies in the order given, with ``start``, ``end`` and ``info``'s ``site`` (where
    the job ran) and ``migration_seconds`` (0 for a job that stayed).
    """
    started_at = time.perf_counter()
    policy, source = parse_target(target)
    run_of, observe = run_time_source(source, len(schedulers)) if source else (None, None)
    runs = []
    for job in jobs:
        run = job.fresh()
        run.info = dict(job.info)
        runs.append(run)
    arrivals = sorted(runs, key=lambda j: (j.submit, j.index))
    sizes = [s.total for s in schedulers]
    transfers = []  # (arrival at the target, index, job, target)
    ends = []  # (end, index, site, job)
    n, a = len(arrivals), 0
    inf = float("inf")
    while True:
        t = ends[0][0] if ends else inf
        if transfers and transfers[0][0] < t:
            t = transfers[0][0]
        if a < n and arrivals[a].submit < t:
            t = arrivals[a].submit
        for s in schedulers:
            wake = s.next_wakeup()
            if wake is not None and wake < t:
                t = wake
        if t == inf:
            break
        changed = set()
        while ends and ends[0][0] <= t:
            _, _, site, job = heapq.heappop(ends)
            schedulers[site].finish(job, t)
            if observe is not None:
                observe(job)
            changed.add(site)
        while transfers and transfers[0][0] <= t:
            _, _, job, site = heapq.heappop(transfers)
            schedulers[site].submit(job, t)
            changed.add(site)
        while a < n and arrivals[a].submit <= t:
            job = arrivals[a]
            a += 1
            home = job.info["home"]
            site = home
            if job.info["migratable"]:
                fits = [job.procs <= p for p in sizes]
                if policy == "predicted-start":
                    moves = [0.0 if i == home else
                             migration_seconds(job.info["data_bytes"], bandwidth(home, i, t))
                             for i in range(len(schedulers))]
                    choice = choose_by_forecast(home, schedulers, t, job, moves, fits,
                                                run_of)
                else:
                    statuses = [queue_status(s) for s in schedulers]
                    choice = choose_by_queue(home, statuses, policy, fits)
                if choice is not None:
                    site = choice
            job.info["site"] = site
            if site == home:
                job.info["migration_seconds"] = 0.0
                schedulers[site].submit(job, t)
                changed.add(site)
            else:
                seconds = migration_seconds(job.info["data_bytes"], bandwidth(home, site, t))
                job.info["migration_seconds"] = seconds
                heapq.heappush(transfers, (t + seconds, job.index, job, site))
        for site in sorted(changed) if changed else range(len(schedulers)):
            for job in schedulers[site].schedule(t):
                job.end = t + job.run
                heapq.heappush(ends, (job.end, job.index, site, job))
    return runs, time.perf_counter() - started_at

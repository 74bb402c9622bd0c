"""Replicated load-sharing experiments (England and Weissman §IV.B-C).

One replication draws, per site, a workload (a model sampled with the replication's seed,
or the site's trace), then per job a uniform number that flags it migratable below the
sharing level (so the migratable jobs at 25% are among those at 50%: the levels are
compared on common random numbers, as England and Weissman compared them on the same
workloads) and a data size from the triangular distribution. Every (sharing level, target
policy) pair is simulated on that draw; level 0 once, as no job moves.

Slowdown is (migration + queue + run) / run, with run times under one second counted as one
second; jobs are "local" at the site they arrived at and "remote" at the site they moved to.
"""

import functools
import math

import numpy as np

from ..errors import InputFileError, UserError
from ..network.cluster import crossbar
from ..network.scenario import generate_streams, pair_bandwidth_function
from ..scheduling.job import jobs_from_trace
from ..scheduling.scheduler import Scheduler
from .simulate import simulate_grid

MIN_RUN_SECONDS = 1.0


@functools.lru_cache(maxsize=None)
def _model(path):
    from ..workload.model import fit_model, read_model
    from ..workload.swf import read_swf
    from ..workload.traces import resolve_trace

    if path == "nasa":
        return "model", fit_model(read_swf(resolve_trace("nasa")))
    if path.endswith((".json", ".json.gz")):
        return "model", read_model(path)
    return "trace", read_swf(path)


def site_jobs(grid, site_index, seed):
    """The jobs of one site in one replication, arrivals scaled to the site's ``load``."""
    from ..workload.model import sample
    from ..workload.summary import offered_utilization

    site = grid.sites[site_index]
    path = grid.workload_path(site)
    try:
        kind, source = _model(path)
    except (ValueError, OSError) as e:
        if isinstance(e, InputFileError):
            raise UserError(f"{grid.path}: sites[{site_index}].workload: {e}") from None
        raise UserError(f"{grid.path}: sites[{site_index}].workload: cannot read {path}: "
                        f"{e}") from None
    if kind == "trace":
        trace = source
    elif grid.span_days is None:
        trace = sample(source, grid.jobs_per_site, seed=seed, modal_requests=True)
    else:
        # as many jobs as the site's arrivals bring in span_days (after the load scaling)
        factor = 1.0
        if site.load is not None:
            probe = sample(source, 20000, seed=seed, modal_requests=True)
            offered = offered_utilization(probe, site.processors)
            factor = offered / site.load if offered > 0 else 1.0
        per_day = 24 * float(np.mean(source.rates_per_hour)) / factor
        count = int(math.ceil(1.1 * per_day * grid.span_days)) + 100
        trace = sample(source, count, seed=seed, modal_requests=True)
    too_big = int(np.sum(trace.procs > site.processors))
    if too_big:
        raise UserError(f"{grid.path}: sites[{site_index}].processors: {site.processors} "
                        f"processors, but {too_big} jobs of its workload ask for more")
    jobs = jobs_from_trace(trace)
    if site.load is not None:
        offered = offered_utilization(trace, site.processors)
        if offered > 0:
            factor = offered / site.load
            for j in jobs:
                j.submit = math.floor(j.submit * factor)
    if kind == "model" and grid.span_days is not None:
        first = min(j.submit for j in jobs)
        jobs = [j for j in jobs if j.submit - first < grid.span_days * 86400]
    return jobs


def draw(grid, seed):
    """(jobs per site, migratable draw per job, data bytes per job) of one replication."""
    per_site = [site_jobs(grid, i, seed * 100 + i) for i in range(len(grid.sites))]
    rng = np.random.default_rng(seed)
    counts = [len(j) for j in per_site]
    uniform = [rng.random(c) for c in counts]
    least, mode, most = (v * 1e6 for v in grid.data_mb)
    data = [rng.triangular(least, mode, most, c) if most > least else np.full(c, least)
            for c in counts]
    return per_site, uniform, data


def bandwidth_function(grid, seed, duration_seconds):
    if grid.wan == "constant":
        rate = grid.bandwidth_mbps
        return lambda a, b, t: rate
    names = [s.name for s in grid.sites]
    cluster = crossbar(names, capacity_mbps=grid.bandwidth_mbps)
    timeline = generate_streams(cluster, seed=seed, duration_seconds=duration_seconds,
                                interval_seconds=grid.wan_interval_seconds,
                                floor_mbps=grid.wan_floor_mbps)
    f = pair_bandwidth_function(cluster, timeline)
    return lambda a, b, t: f(names[a], names[b], t)


def run_one(grid, drawn, sharing_pct, target, bandwidth):
    """One simulation: returns per-site metrics and the grid-wide ones."""
    per_site, uniform, data = drawn
    jobs, index = [], 0
    for s, site_list in enumerate(per_site):
        for k, j in enumerate(site_list):
            c = j.fresh()
            c.index = index
            index += 1
            c.estimate = c.requested if c.requested is not None else c.run
            c.info = {"home": s, "migratable": bool(uniform[s][k] < sharing_pct / 100),
                      "data_bytes": float(data[s][k])}
            jobs.append(c)
    schedulers = [Scheduler(s.processors, s.policy) for s in grid.sites]
    ran, seconds = simulate_grid(jobs, schedulers, target, bandwidth)
    return metrics(grid, ran, seconds)


def site_type(site):
    return site.type or site.name


def metrics(grid, jobs, seconds):
    n = len(grid.sites)
    slow = {"local": [[] for _ in range(n)], "remote": [[] for _ in range(n)]}
    waits = [[] for _ in range(n)]
    moved = 0
    for j in jobs:
        site = j.info["site"]
        slowdown = (j.start - j.submit + j.run) / max(j.run, MIN_RUN_SECONDS)
        kind = "local" if site == j.info["home"] else "remote"
        moved += kind == "remote"
        slow[kind][site].append(slowdown)
        waits[site].append(j.start - j.submit)

    def mean(values):
        return float(np.mean(values)) if values else None

    sites = {s.name: {"local": mean(slow["local"][i]), "remote": mean(slow["remote"][i]),
                      "local_jobs": len(slow["local"][i]),
                      "remote_jobs": len(slow["remote"][i]),
                      "mean_wait_seconds": mean(waits[i])}
             for i, s in enumerate(grid.sites)}
    types = {}
    for kind in dict.fromkeys(site_type(s) for s in grid.sites):
        members = [i for i, s in enumerate(grid.sites) if site_type(s) == kind]
        local = [v for i in members for v in slow["local"][i]]
        remote = [v for i in members for v in slow["remote"][i]]
        types[kind] = {"local": mean(local), "remote": mean(remote), "local_jobs": len(local),
                       "remote_jobs": len(remote), "sites": len(members),
                       "mean_wait_seconds": mean([v for i in members for v in waits[i]])}
    every_local = [v for values in slow["local"] for v in values]
    every_remote = [v for values in slow["remote"] for v in values]
    every_wait = [v for values in waits for v in values]
    return {"local": mean(every_local), "remote": mean(every_remote),
            "all": mean(every_local + every_remote), "mean_wait_seconds": mean(every_wait),
            "moved_jobs": moved, "jobs": len(jobs), "sites": sites, "types": types,
            "simulation_seconds": seconds}


def paired_t(x, y, confidence=0.90):
    """England and Weissman §IV.C.2: the mean of Z_j = x_j - y_j with its ``confidence`` interval,
    mean ± t(n-1, (1+confidence)/2) sqrt(var(Z) / n). Returns (mean, low, high)."""
    from scipy import stats

    z = np.asarray(x, float) - np.asarray(y, float)
    n = len(z)
    if n < 2:
        raise ValueError("a paired-t interval needs two or more replications")
    mean = float(z.mean())
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1) * math.sqrt(z.var(ddof=1) / n))
    return mean, mean - half, mean + half


def replication(grid, r, sharing, targets, base_seed):
    """Every (target, sharing) result of replication ``r``: {(target, pct): metrics}."""
    seed = base_seed * 1000 + r
    drawn = draw(grid, seed)
    submits = [j.submit for site_list in drawn[0] for j in site_list]
    bandwidth = bandwidth_function(grid, seed, 2 * (max(submits) - min(submits)) + 86400)
    out = {}
    if 0 in sharing:
        none = run_one(grid, drawn, 0, targets[0], bandwidth)
        for t in targets:
            out[(t, 0)] = none
    for t in targets:
        for pct in sharing:
            if pct:
                out[(t, pct)] = run_one(grid, drawn, pct, t, bandwidth)
    return out


def summarize(grid, results, sharing, targets, confidence=0.90):
    """``results``: per replication, {(target, pct): metrics}. The means over replications
    and paired-t intervals: every level against 0% (local jobs' slowdown, 0% minus level:
    positive is an improvement), and every two targets at every level (all jobs' slowdown,
    the earlier-listed minus the later: positive favours the later)."""
    reps = len(results)

    def series(t, pct, key):
        return [res[(t, pct)][key] for res in results]

    def mean_of(values):
        values = [v for v in values if v is not None]
        return float(np.mean(values)) if values else None

    summary = {"grid": grid.path, "replications": reps, "sharing_pct": list(sharing),
               "targets": list(targets), "confidence": confidence, "slowdown": {},
               "mean_wait_seconds": {}, "moved_jobs": {}, "sites": {}, "intervals": {}}
    for t in targets:
        summary["slowdown"][t] = {str(p): {"local": mean_of(series(t, p, "local")),
                                           "remote": mean_of(series(t, p, "remote")),
                                           "all": mean_of(series(t, p, "all"))}
                                  for p in sharing}
        summary["mean_wait_seconds"][t] = {str(p): mean_of(series(t, p, "mean_wait_seconds"))
                                           for p in sharing}
        summary["moved_jobs"][t] = {str(p): mean_of(series(t, p, "moved_jobs"))
                                    for p in sharing}
        summary["sites"][t] = {
            str(p): {s.name: {k: mean_of([res[(t, p)]["sites"][s.name][k] for res in results])
                              for k in ("local", "remote", "mean_wait_seconds")}
                     for s in grid.sites} for p in sharing}
    kinds = list(dict.fromkeys(site_type(s) for s in grid.sites))
    summary["types"] = {
        t: {str(p): {k: {key: mean_of([res[(t, p)]["types"][k][key] for res in results])
                         for key in ("local", "remote", "mean_wait_seconds", "local_jobs",
                                     "remote_jobs")}
                     for k in kinds} for p in sharing} for t in targets}
    summary["type_sites"] = {k: [s.name for s in grid.sites if site_type(s) == k]
                             for k in kinds}
    if reps >= 2 and len(kinds) < len(grid.sites) and 0 in sharing:
        for t in targets:
            for k in kinds:
                for p in sharing:
                    if not p:
                        continue
                    pairs = [(res[(t, 0)]["types"][k]["local"], res[(t, p)]["types"][k]["local"])
                             for res in results]
                    if any(a is None or b is None for a, b in pairs):
                        continue
                    m, lo, hi = paired_t([a for a, _ in pairs], [b for _, b in pairs],
                                         confidence)
                    summary["intervals"][f"{t}: {k} machines' local slowdown, 0% minus {p}%"] \
                        = {"mean": m, "low": lo, "high": hi, "excludes_0": lo > 0 or hi < 0}
    if reps >= 2:
        for t in targets:
            if 0 in sharing:
                for p in sharing:
                    if p:
                        m, lo, hi = paired_t(series(t, 0, "local"), series(t, p, "local"),
                                             confidence)
                        summary["intervals"][f"{t}: local slowdown, 0% minus {p}%"] = {
                            "mean": m, "low": lo, "high": hi, "excludes_0": lo > 0 or hi < 0}
            for other in targets[targets.index(t) + 1:]:
                for p in sharing:
                    if p:
                        m, lo, hi = paired_t(series(t, p, "all"), series(other, p, "all"),
                                             confidence)
                        summary["intervals"][f"all jobs' slowdown at {p}%: {t} minus {other}"] \
                            = {"mean": m, "low": lo, "high": hi, "excludes_0": lo > 0 or hi < 0}
    return summary

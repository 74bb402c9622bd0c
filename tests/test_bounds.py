"""Wait bounds (ours and the QBETS-style peer), the EDG baseline and the time-stepped
forward simulation."""

import json
import math

import numpy as np
import pytest
from scipy.stats import binom

from emulator.cli import main
from emulator.prediction.bounds import (ForecastBound, QBETSBound, bound_summary, min_history,
                                        order_index, replay_bounds)
from emulator.prediction.forward import predict_start
from emulator.prediction.waits import edg_wait
from emulator.scheduling.estimates import Actual, Requested
from emulator.scheduling.job import Job, compress_arrivals, jobs_from_trace
from emulator.scheduling.scheduler import Scheduler
from emulator.scheduling.simulate import simulate
from emulator.workload.swf import read_swf
from test_prediction import _schedule_until, _trace


def test_order_index_by_the_binomial_definition():
    # the (k+1)-th smallest of n bounds the q quantile with probability P(Bin(n, q) <= k)
    for n in (59, 100, 1000):
        k = order_index(n, 0.95, 0.95)
        assert binom.cdf(k, n, 0.95) >= 0.95 > binom.cdf(k - 1, n, 0.95)
    assert min_history(0.95, 0.95) == 59
    assert order_index(58, 0.95, 0.95) is None  # 0.95^58 > 0.05: even the largest may fall short
    assert order_index(59, 0.95, 0.95) == 58  # the largest of 59


def test_the_binomial_bound_holds_for_the_share_asked_on_a_stationary_series():
    rng = np.random.default_rng(3)
    b = QBETSBound(0.9)
    held = []
    for i, wait in enumerate(rng.exponential(1000, 3000)):
        job = Job(i, float(i), 1, 1.0)
        bound = b.bound(job, float(i))
        if math.isfinite(bound):
            held.append(wait <= bound)
        b.started(job, wait)
    assert len(held) > 2900
    assert 0.9 <= np.mean(held) <= 0.95  # at least the quantile, not far more


def test_qbets_cuts_its_history_at_a_change_point():
    b = QBETSBound(0.95)
    for i in range(500):
        b.started(Job(i, 0.0, 1, 1.0), 100.0)
    assert b.bound(Job(500, 0.0, 1, 1.0), 0.0) == 100.0
    for i in range(501, 505):  # the queue slows down tenfold
        b.started(Job(i, 0.0, 1, 1.0), 1000.0)
    q = b.queues[-1]
    # two misses in a row are unlikely at 5% each: the history was cut to the most recent
    # observations (and two more came after), so the bound is now 1000 s; without the cut,
    # 500 waits of 100 s would keep it at 100 s for another 25 observations
    assert len(q["waits"]) == min_history(0.95) + 2
    assert b.bound(Job(505, 0.0, 1, 1.0), 0.0) == 1000.0


def test_ours_scales_the_forecast_by_the_recent_ratios():
    b = ForecastBound(0.9, tau_seconds=0.0, step=0.0)
    for i in range(200):  # every job waited twice its forecast
        job = Job(i, 0.0, 4, 1.0)
        b.bound(job, 0.0, 50.0 + i)
        b.started(job, 2 * (50.0 + i))
    assert b.bound(Job(999, 0.0, 4, 1.0), 0.0, 300.0) == pytest.approx(600.0)


def test_ours_takes_the_ratios_of_the_nearest_forecasts():
    b = ForecastBound(0.9, tau_seconds=0.0, step=0.0, neighbours=100)
    for i in range(400):  # forecasts of a minute wait ten times as long, of a day 1.5 times
        forecast = 60.0 if i % 2 else 86400.0
        job = Job(i, 0.0, 1, 1.0)
        b.bound(job, 0.0, forecast)
        b.started(job, forecast * (10.0 if i % 2 else 1.5))
    assert b.bound(Job(1000, 0.0, 1, 1.0), 0.0, 50.0) == pytest.approx(500.0)
    assert b.bound(Job(1001, 0.0, 1, 1.0), 0.0, 80000.0) == pytest.approx(120000.0)
    # queued one-minute jobs already 21 minutes in count as misses only for short forecasts
    for i in range(30):
        b.bound(Job(2000 + i, 0.0, 1, 1.0), 0.0, 60.0)
    assert b.bound(Job(1002, 1260.0, 1, 1.0), 1260.0, 50.0) == pytest.approx(50.0 * 21)
    assert b.bound(Job(1003, 1260.0, 1, 1.0), 1260.0, 80000.0) == pytest.approx(120000.0)


def test_ours_counts_long_waits_before_they_end():
    b = ForecastBound(0.9, tau_seconds=0.0, step=0.0)
    for i in range(100):
        job = Job(i, 0.0, 1, 1.0)
        b.bound(job, 0.0, 100.0)
        b.started(job, 100.0)
    calm = b.bound(Job(1000, 5000.0, 1, 1.0), 5000.0, 100.0)
    b.started(Job(1000, 5000.0, 1, 1.0), 100.0)
    # 30 jobs submitted at 10,000 s with forecasts of 100 s are still queued at 20,000 s
    for i in range(30):
        b.bound(Job(2000 + i, 10000.0, 1, 1.0), 10000.0, 100.0)
    stormy = b.bound(Job(3000, 20000.0, 1, 1.0), 20000.0, 100.0)
    assert calm == pytest.approx(100.0)
    assert stormy == pytest.approx(10000.0)  # their wait so far, 100 x the forecast


def test_ours_grows_bolder_never_than_nominal_and_warier_after_misses():
    b = ForecastBound(0.9, tau_seconds=0.0, step=0.01)
    for i in range(300):
        job = Job(i, 0.0, 1, 1.0)
        b.bound(job, 0.0, 100.0)
        b.started(job, 50.0)  # never a miss
    assert b.miss == pytest.approx(0.1)  # capped at 1 - quantile
    bounds = []
    for i in range(300, 330):
        job = Job(i, 0.0, 1, 1.0)
        bounds.append(b.bound(job, 0.0, 100.0))
        b.started(job, 1e6)  # the workload changes: every wait is 10,000 x its forecast
    # each miss lowers the miss rate aimed at until the rare large ratios are above it
    assert bounds[0] == 50.0 and bounds[-1] == pytest.approx(1e6)
    first = bounds.index(bounds[-1])
    assert 3 <= first <= 10
    assert b.miss < 0.1


@pytest.mark.parametrize("quantile, misses, limit", [
    # no autocorrelation (too few, or negative: clamped to 0), p = 1 - q: at q = 0.9 one
    # miss (0.1) is not rare enough at 95% confidence, two (0.01) are
    (0.9, [], 2),
    (0.9, [1, 1], 2),
    # q = 0.95: 0.05 is not below 0.05 (the bound is strict), 0.05 x 0.05 is
    (0.95, [1, 0, 1, 0, 1, 0], 2),
    # all misses alike: no variance, no autocorrelation
    (0.8, [1, 1, 1, 1], 2),
    # runs of four: a = 1111000, b = 1110000 (lag 1), means 4/7 and 3/7, covariance 9/7,
    # variances 12/7 each, rho = 3/4; p = 0.2 + 0.75 x 0.8 = 0.8; 0.2 x 0.8^6 = 0.052 is
    # not below 0.05, 0.2 x 0.8^7 = 0.042 is: 8 misses in a row
    (0.8, [1, 1, 1, 1, 0, 0, 0, 0], 8),
    # runs of two: covariance 2/7, variances 12/7, rho = 1/6; p = 0.1 + 0.9 / 6 = 0.25:
    # 0.1 x 0.25 = 0.025 < 0.05
    (0.9, [1, 1, 0, 0, 1, 1, 0, 0], 2),
    # one long run: ten misses then ten hits; covariance 1539/361, variances 1710/361, rho
    # = 0.9; p = 0.5 + 0.5 x 0.9 = 0.95; 0.95^(m-1) < 0.1 first at m - 1 = 45
    (0.5, [1] * 10 + [0] * 10, 46),
])
def test_qbets_run_limit_by_hand(quantile, misses, limit):
    assert QBETSBound(quantile).run_limit(misses) == limit


def test_bound_summary_edges():
    """A wait equal to its bound is within it; half a second counts as having waited; no
    jobs, no figures."""
    s = bound_summary(0.9, [0.5, 10.0, 0.0], [0.5, 10.0, 0.0])
    assert s["coverage"] == 1.0 and s["coverage_of_jobs_that_waited"] == 1.0
    assert s["median_bound_over_wait"] == 1.0 and s["unbounded_jobs"] == 0
    s = bound_summary(0.9, [0.5, 0.0], [0.25, 1.0])
    assert s["coverage"] == 0.5 and s["coverage_of_jobs_that_waited"] == 0.0
    assert s["median_bound_over_wait"] == 0.5
    assert bound_summary(0.9, [], []) == {"coverage": None, "coverage_of_jobs_that_waited":
                                          None, "median_bound_over_wait": None,
                                          "unbounded_jobs": 0}
    assert bound_summary(0.9, [0.0], [1.0])["median_bound_over_wait"] is None


@pytest.mark.parametrize("confidence, need", [(0.95, 29), (0.99, 44)])
def test_qbets_bounds_after_its_binomial_history(confidence, need):
    """0.9^n <= 1 - confidence first at n = 29 (95%) and 44 (99%): no bound before, the
    largest wait at exactly that many; its misses kept over 4 x that many jobs; a run of
    misses counted, and reset by a hit."""
    b = QBETSBound(0.9, confidence=confidence)
    assert b.need == need == min_history(0.9, confidence)
    job = Job(0, 0.0, 1, 1.0)
    for i in range(need - 1):
        b.started(job, float(i))
    assert b.bound(job, 0.0) == math.inf
    b.started(job, float(need - 1))
    assert b.bound(job, 0.0) == float(need - 1)  # the largest of exactly `need`
    q = b.queues[-1]
    for i in range(8 * need):  # waits at the bound: never a miss, the window stays 4 x need
        b.started(job, float(need - 1))
    assert q["misses"] == [0] * (4 * need) and q["run"] == 0
    b.started(job, 1e9)
    assert q["run"] == 1 and q["misses"][-1] == 1
    b.started(job, 0.0)
    assert q["run"] == 0


def test_ours_offsets_waits_and_forecasts_by_tau():
    """tau = 300 s: every job of forecast 100 s waited 200 s, so every ratio is (200 +
    300) / (100 + 300) = 1.25, and a forecast of 200 s is bounded by 500 x 1.25 - 300 =
    325 s; a forecast of 0 by max(0, 300 x 1.25 - 300) = 75 s."""
    b = ForecastBound(0.9, tau_seconds=300.0, step=0.0)
    for i in range(b.need):
        job = Job(i, 0.0, 1, 1.0)
        b.bound(job, 0.0, 100.0)
        b.started(job, 200.0)
    assert b.count == b.need
    assert b.bound(Job(999, 0.0, 1, 1.0), 0.0, 200.0) == pytest.approx(325.0)
    assert b.bound(Job(998, 0.0, 1, 1.0), 0.0, 0.0) == pytest.approx(75.0)


def test_bound_summary_by_hand():
    s = bound_summary(0.95, [0, 10, 20, 40], [5, 30, 10, math.inf])
    assert s["coverage"] == 0.75
    assert s["coverage_of_jobs_that_waited"] == pytest.approx(2 / 3)
    assert s["median_bound_over_wait"] == pytest.approx(3.0)  # of 3, 0.5 and inf
    assert s["unbounded_jobs"] == 1


def test_replayed_qbets_matches_the_one_inside_the_wait_evaluation(tmp_path):
    out = tmp_path / "w"
    assert main(["predict", "wait", str(_trace(tmp_path, n=400)), "--compress-arrivals", "6",
                 "--runtimes", "requested", "--quantile", "0.9", "--no-technique2",
                 "--train-fraction", "0.3", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    b = summary["bounds"]
    assert b["quantile"] == 0.9 and b["runtimes"] == "requested"
    assert 0 <= b["coverage"] <= 1 and b["peer"]["name"] == "qbets"
    assert {"coverage", "median_bound_over_wait", "coverage_of_jobs_that_waited"} <= set(b)
    assert "edg" in summary and summary["edg"]["mae_seconds"] > 0
    lines = (out / "jobs.csv").read_text().splitlines()
    header = lines[0].split(",")
    assert {"bound_seconds", "qbets_bound_seconds", "edg_seconds"} <= set(header)
    rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
    waits = [float(r["wait_seconds"]) for r in rows]
    ours = [float(r["bound_seconds"]) for r in rows]
    assert bound_summary(0.9, waits, ours)["coverage"] == pytest.approx(b["coverage"])
    assert "Wait bounds at quantile 0.9" in (out / "table.md").read_text()
    # the same schedule, its submissions and starts replayed into a fresh QBETS bound
    trace = read_swf(str(_trace(tmp_path, n=400)))
    ran = simulate(compress_arrivals(jobs_from_trace(trace), 6), Scheduler(16, "easy"),
                   estimator=Requested()).jobs
    replayed = replay_bounds(ran, QBETSBound(0.9))
    inside = {int(r["index"]): float(r["qbets_bound_seconds"]) for r in rows}
    assert len(inside) > 200 and len(set(inside.values())) > 1
    assert {i: replayed[i] for i in inside} == pytest.approx(inside, abs=0.5)


@pytest.mark.parametrize("argv, message", [
    (["--quantile", "1"], "--quantile 1: must be between 0 and 1"),
    (["--bound-runtimes", "actual"], "--bound-runtimes needs --quantile"),
    (["--quantile", "0.9", "--bound-runtimes", "last2"], "--bound-runtimes last2: not one of"),
])
def test_bad_bound_requests_get_one_line(tmp_path, capsys, argv, message):
    assert main(["predict", "wait", str(_trace(tmp_path)), "--runtimes", "actual"]
                + argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_edg_is_the_requested_work_queued_over_the_machine():
    sched = Scheduler(10, "fcfs")
    jobs = [Job(0, 0.0, 10, 500.0, requested=1000.0), Job(1, 1.0, 4, 100.0, requested=300.0),
            Job(2, 2.0, 5, 100.0, requested=200.0)]
    simulate(jobs[:1], sched, estimator=Actual())
    for j in jobs[1:]:
        j.estimate = j.requested
        sched.submit(j, j.submit)
    assert edg_wait(sched, 10) == pytest.approx((4 * 300 + 5 * 200) / 10)
    sched.submit(Job(3, 3.0, 1, 10.0, estimate=10.0), 3.0)
    assert edg_wait(sched, 10) is None  # a job without a request: no linear forecast


def test_time_stepped_starts_are_the_event_driven_ones_rounded_up_to_a_step():
    rng = np.random.default_rng(4)
    jobs = [Job(i, float(i), int(rng.integers(1, 9)), float(rng.integers(1, 30)) * 60)
            for i in range(30)]
    now = 29.0
    sched = _schedule_until([j.fresh() for j in jobs], 8, "fcfs", now)
    waiting = sched.waiting()
    assert len(waiting) > 5
    run = lambda j, e: j.run  # noqa: E731
    first = waiting[0]
    exact = predict_start(sched, now, first, run, knows_estimates=False)
    stepped = predict_start(sched, now, first, run, knows_estimates=False, step_seconds=60.0)
    assert exact < stepped <= exact + 60  # the head waits only for running jobs
    assert (stepped - now) % 60 == 0
    for q in waiting:  # later jobs wait a step at each start before them, at most
        exact = predict_start(sched, now, q, run, knows_estimates=False)
        stepped = predict_start(sched, now, q, run, knows_estimates=False, step_seconds=60.0)
        assert exact <= stepped <= exact + 60 * (waiting.index(q) + 1)
        # a step as small as the trace's time unit is the event-driven simulation
        assert predict_start(sched, now, q, run, knows_estimates=False,
                             step_seconds=1.0) == exact


def test_predict_runtime_writes_li_grid(tmp_path):
    out = tmp_path / "rt"
    assert main(["predict", "runtime", str(_trace(tmp_path)), "--predictor", "li-aver",
                 "--out", str(out)]) == 0
    lines = (out / "li-grid.csv").read_text().splitlines()
    assert lines[0].startswith("template,estimator,history_jobs,training_mae_seconds")
    rows = [line.rsplit(",", 4) for line in lines[1:]]
    summary = json.loads((out / "summary.json").read_text())
    grid = summary["predictors"]["li-aver"]["grid_training_mae_seconds"]
    assert len(rows) == len(grid) > 8
    assert {r[1] for r in rows} == {"WM", "LR"}
    # the selected pairs' error is the least of the grid's for them
    assert min(float(r[3]) for r in rows) <= summary["predictors"]["li-aver"][
        "training_mae_seconds"] + 0.05
    assert (out / "li-grid.png").stat().st_size > 0

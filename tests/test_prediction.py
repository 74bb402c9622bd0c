"""Run-time, wait and start-time predictions: estimators worked by hand, the predictors'
online discipline, technique 1 against the real schedule, probe jobs, and the commands."""

import json
import math

import numpy as np
import pytest

from emulator.cli import main
from emulator.prediction.attributes import available, category_key, node_bucket
from emulator.prediction.estimators import (interval_from_sums, linear_regression,
                                            mean_interval, windowed_mean)
from emulator.prediction.evaluate import evaluate_runtimes, predictor_names
from emulator.prediction.forward import (predict_start, probe_starts, replayed_arrivals,
                                         run_forward)
from emulator.prediction.online import blind, completion_times, events, run_online
from emulator.prediction.runtime import (Categories, InstanceBased, LastTwo, Li, LiBank, Mean,
                                         Requested, Template, li_templates)
from emulator.prediction.search import TemplateSearch, Training, search_templates
from emulator.prediction.waits import Source, WaitStudy, evaluate_waits, work_error
from emulator.scheduling.estimates import Actual
from emulator.scheduling.estimates import Requested as RequestedTimes
from emulator.scheduling.job import Job, Owner
from emulator.scheduling.multifactor import Multifactor
from emulator.scheduling.policyfile import Credential, SitePolicy, policy_from_dict
from emulator.scheduling.reservations import ReservationRequest
from emulator.scheduling.scheduler import Scheduler
from emulator.scheduling.slurmbackfill import BackfillParams
from emulator.scheduling.simulate import simulate
from emulator.scheduling.slurmconf import SlurmConfig


def job(i, submit, procs, run, **kw):
    """A job; ``user``, ``group``, ``executable``, ``queue`` given as keywords too."""
    owner = {k: kw.pop(k) for k in Owner._fields if k in kw}
    return Job(i, submit, procs, run, owner=Owner(**owner), **kw)


# -- estimators, by hand -------------------------------------------------------------------

def test_windowed_mean_by_hand():
    assert windowed_mean([], 2) is None
    assert windowed_mean([10], 2) == 10
    assert windowed_mean([10, 20, 40], 2) == 30  # (20 + 40) / 2
    assert windowed_mean([10, 20, 40], 1) == 40


def test_linear_regression_by_hand():
    assert linear_regression([10, 20, 30], 3) == pytest.approx(40)
    # last three of 5, 7, 4, 10: points (1,7) (2,4) (3,10): slope 1.5, mean 7 at i=2 -> 10
    assert linear_regression([5, 7, 4, 10], 3) == pytest.approx(10.0)
    assert linear_regression([8], 3) == 8
    assert linear_regression([], 3) is None


def test_mean_interval_by_hand():
    mean, half = mean_interval([10, 20, 30])
    # s = 10, t(0.95, 2) = 2.919986: half = 2.919986 * 10 / sqrt(3)
    assert mean == 20
    assert half == pytest.approx(2.919986 * 10 / math.sqrt(3), rel=1e-5)
    assert mean_interval([5]) == (5, math.inf)
    assert interval_from_sums(3, 60.0, 1400.0) == pytest.approx((mean, half))


# -- Smith's categorisation ----------------------------------------------------------------

def test_categories_pick_the_narrowest_interval_and_condition_on_elapsed():
    user = Template("U", None, 8)
    everyone = Template("", None, 8)
    p = Categories([user, everyone])
    for i, run in enumerate([100, 110, 120]):
        p.observe(job(i, 0, 1, run, user=1))
    for i, run in enumerate([10, 5000, 30, 9000]):
        p.observe(job(10 + i, 0, 1, run, user=2))
    # user 1's runs are tight; everyone's are wide: user 1's mean wins
    assert p.predict(blind(job(20, 0, 1, 1, user=1))) == pytest.approx(110)
    # a job of user 1 that has already run 105 s: only 110 and 120 count
    assert p.predict(blind(job(21, 0, 1, 1, user=1)), elapsed=105) == pytest.approx(115)
    # an unseen user: only the catch-all template has data
    assert p.predict(blind(job(22, 0, 1, 1, user=3))) == pytest.approx(np.mean(
        [100, 110, 120, 10, 5000, 30, 9000]))


def test_categories_relative_data_and_node_ranges():
    t = Template("", 4, 8, "relative")
    p = Categories([t])
    p.observe(job(1, 0, 3, 50, requested=100))   # 1-4 processors: ratio 0.5
    p.observe(job(2, 0, 8, 90, requested=100))   # 5-8 processors: ratio 0.9
    assert p.predict(blind(job(3, 0, 2, 1, requested=400))) == pytest.approx(200)
    assert p.predict(blind(job(4, 0, 6, 1, requested=1000))) == pytest.approx(900)
    assert p.predict(blind(job(5, 0, 6, 1))) is None  # no requested time: cannot predict
    assert node_bucket(4, 4) == 0 and node_bucket(5, 4) == 1
    assert category_key(job(6, 0, 5, 1, user=7, group=2), "GU", 4) == (2, 7, 1)


def test_bounded_history_drops_the_oldest():
    p = Categories([Template("", None, 2)])
    for i, run in enumerate([1000, 10, 20]):
        p.observe(job(i, 0, 1, run))
    assert p.predict(blind(job(9, 0, 1, 1))) == pytest.approx(15)


def test_template_search_finds_the_attribute_that_matters():
    rng = np.random.default_rng(3)
    jobs = []
    for i in range(600):  # run time set by the executable; users are noise
        exe = int(rng.integers(0, 4))
        jobs.append(job(i, i * 100.0, 1, 200.0 * (exe + 1) + rng.normal(0, 5),
                        user=int(rng.integers(0, 30)), group=1, executable=exe))
    ends = np.array([j.submit + j.run for j in jobs])
    training = Training(jobs, ends, 400)
    for method in ("ga", "greedy"):
        templates, mae = search_templates(training, available(jobs), False, TemplateSearch(
            method=method, generations=15))
        assert mae < 50, method  # against a spread of 200-800 s (early jobs have no history)
        assert any("E" in t.attrs for t in templates), method


def test_the_template_code_decodes_every_field_and_skips_unused_slots():
    from emulator.prediction.runtime import smith_templates
    from emulator.prediction.search import MAX_TEMPLATES, TemplateCode

    candidates = smith_templates("GUE", True)
    code = TemplateCode(candidates, "GUE", True)
    assert code.slot == 1 + 3 + 3 + 2 + 1 and code.bits == MAX_TEMPLATES * code.slot
    bits = [False] * code.bits
    # slot 0 in use: users and executables, node range index 2 (2 nodes), history index
    # 3 (256), relative data
    bits[0:10] = [True, False, True, True, False, True, False, True, True, True]
    (chosen,) = code.decode(bits)
    t = candidates[chosen]
    assert (t.attrs, t.node_range, t.history, t.data) == ("UE", 2, 256, "relative")
    assert code.decode([False] * code.bits) == []


def test_the_wait_tuned_search_lowers_the_prefix_wait():
    """Run times set by the executable, requested times far above them: scheduled under
    EASY with the predictions of the set the wait-tuned search finds, the prefix waits less
    than with requested times."""
    from emulator.prediction.search import prefix_wait
    from emulator.scheduling.scheduler import Scheduler

    rng = np.random.default_rng(5)
    jobs = []
    for i in range(800):
        exe = int(rng.integers(0, 3))
        run = 300.0 * (exe + 1)
        jobs.append(job(i, i * 60.0, int(rng.choice([4, 8, 16])), run, requested=20000.0,
                        user=int(rng.integers(0, 10)), group=1, executable=exe))
    ends = np.array([j.submit + j.run for j in jobs])
    training = Training(jobs, ends, 500)
    easy = (lambda: Scheduler(32, "easy"))
    templates, wait = search_templates(training, available(jobs), True, TemplateSearch(
        fit="wait", generations=4), scheduler_of=easy)
    requested = prefix_wait(training, np.full(500, 20000.0), easy)
    assert templates and wait < requested


def test_squared_error_fits_predict_means_where_absolute_error_fits_predict_medians():
    """Run times drawn alike for every job, 80% of 100 s and 20% of 2000 s: their median is
    100 s and their mean 480 s. Smith's categories predict a history's mean, but the fit
    to the least absolute error picks templates whose short histories are often all short
    (the narrowest interval wins), so its predictions sit near the median; the fit to the
    least squared error keeps long histories and predicts near the mean, as sums of run
    times (start-time forecasts) need."""
    from emulator.prediction.evaluate import build

    rng = np.random.default_rng(11)
    jobs = [job(i, i * 100.0, 1, float(rng.choice([100.0, 2000.0], p=[0.8, 0.2])),
                user=int(rng.integers(0, 3)), group=1, executable=int(rng.integers(0, 2)))
            for i in range(1500)]
    ends = np.array([j.submit + j.run for j in jobs])
    (mae_fit, sq_fit), config = build(["smith", "smith-sq"], Training(jobs, ends, 500))
    assert sq_fit.name == "smith-sq" and "training_rmse_seconds" in config["smith-sq"]
    assert "training_mae_seconds" in config["smith"]
    predictions, _ = run_online(jobs, ends, [mae_fit, sq_fit])
    runs = np.array([j.run for j in jobs])
    test = slice(500, None)
    mae_bias = predictions[0][test].mean() - runs[test].mean()
    sq_bias = predictions[1][test].mean() - runs[test].mean()
    assert abs(sq_bias) < 0.25 * abs(mae_bias)
    assert np.abs(predictions[0][test] - runs[test]).mean() \
        <= np.abs(predictions[1][test] - runs[test]).mean()
    assert np.sqrt(((predictions[1][test] - runs[test]) ** 2).mean()) \
        <= np.sqrt(((predictions[0][test] - runs[test]) ** 2).mean())


# -- instance-based learning ---------------------------------------------------------------

def test_heom_distance_on_mixed_features():
    p = InstanceBased("UE", weights=[1.0, 0.5, 1.0], k=2, width=1.0)
    p.observe(job(1, 0, 1, 100, user=1, executable=7))    # log2 procs 0
    p.observe(job(2, 0, 16, 300, user=2, executable=7))   # log2 procs 4: range 0..4
    d2 = p.distances(blind(job(3, 0, 4, 1, user=1, executable=9)))  # log2 procs 2
    # to 1: user same (0), executable differs (0.5^2), procs |2-0|/4 = 0.5 -> 0.25
    # to 2: user differs (1), executable differs (0.25), procs 0.5 -> 0.25
    assert d2 == pytest.approx([0.5, 1.5])
    w = np.exp(-d2)
    assert p.predict(blind(job(3, 0, 4, 1, user=1, executable=9))) == pytest.approx(
        (w @ [100, 300]) / w.sum())


def test_ibl_k_nearest_only():
    p = InstanceBased("U", k=1, width=1.0)
    p.observe(job(1, 0, 1, 100, user=1))
    p.observe(job(2, 0, 1, 900, user=2))
    assert p.predict(blind(job(3, 0, 1, 1, user=2))) == pytest.approx(900)


# -- Li et al. -----------------------------------------------------------------------------

def test_li_template_falls_back_to_a_coarser_one():
    bank = LiBank(["GUE"], ["WM(2)"])
    bank.observe(job(1, 0, 1, 100, group=1, user=5, executable=3))
    bank.observe(job(2, 0, 1, 300, group=1, user=6, executable=4))
    # [G,U,E] and [G,U] are empty for user 5 with executable 9: [G,U] -> no; [G,U] of user
    # 5 holds 100: the chain stops at [G,U]
    assert bank.predict_all(blind(job(3, 0, 1, 1, group=1, user=5, executable=9))) == [100]
    # an unknown user: down to [G], the mean of its last two
    assert bank.predict_all(blind(job(4, 0, 1, 1, group=1, user=8, executable=9))) == [200]
    assert bank.fallbacks == 2
    assert bank.predict_all(blind(job(5, 0, 1, 1, group=2, user=8, executable=9))) == [None]


def test_li_templates_drop_missing_attributes():
    assert li_templates("GUEN") == ["G", "GU", "GUE", "GUEN"]
    assert li_templates("GUQEN") == ["G", "GU", "GUQ", "GUE", "GUEN", "GUQEN"]


def test_lsterr_switches_to_the_predictor_with_less_recent_error():
    # WM(1) follows the last value; WM(3) averages three. Runs jump from 100 to 1000.
    li = Li([("G", "WM(3)"), ("G", "WM(1)")], "lsterr")
    seq = [100, 100, 100, 1000, 1000, 1000]
    chosen = []
    for i, run in enumerate(seq):
        j = job(i, i, 1, run, group=1)
        chosen.append(li.predict(blind(j)))
        li.observe(j)
    # job 4 (after one 1000): WM(3) = 400, WM(1) = 1000; errors so far equal (both exact on
    # jobs 1-2; job 3 both predicted 100, error 900^2), so the first listed, WM(3), is used
    assert chosen[4] == pytest.approx(400)
    # job 5: on job 4 WM(3) erred by 600, WM(1) by 0: LSTERR switches to WM(1)
    assert chosen[5] == pytest.approx(1000)


def test_aver_is_the_mean_of_the_selected_predictions():
    li = Li([("G", "WM(1)"), ("G", "LR(3)")], "aver")
    for i, run in enumerate([10, 20, 30]):
        j = job(i, i, 1, run, group=1)
        li.predict(blind(j))
        li.observe(j)
    assert li.predict(blind(job(9, 9, 1, 1, group=1))) == pytest.approx((30 + 40) / 2)


def test_last_two_and_requested():
    p = LastTwo()
    assert p.predict(blind(job(1, 0, 1, 5, user=1))) is None
    for i, run in enumerate([100, 200, 400]):
        p.observe(job(i, 0, 1, run, user=1))
    assert p.predict(blind(job(9, 0, 1, 5, user=1))) == 300
    assert Requested().predict(blind(job(9, 0, 1, 5, requested=3600))) == 3600


def test_mean_of_predictors_leaves_out_those_without_a_prediction():
    p = Mean([LastTwo(), Requested()])
    assert p.name == "last2+requested" and not p.conditions  # Requested ignores elapsed
    assert p.predict(blind(job(1, 0, 1, 5, user=1, requested=600))) == 600  # last2: nothing
    for i, run in enumerate([100, 200, 400]):
        p.observe(job(i, 0, 1, run, user=1))
    assert p.predict(blind(job(9, 0, 1, 5, user=1, requested=600))) == (300 + 600) / 2
    assert p.predict(blind(job(9, 0, 1, 5, user=2))) is None
    assert Mean([Categories([Template("U")]), InstanceBased("U")]).conditions


def test_predictor_names_join_with_plus():
    jobs = [job(0, 0, 1, 10, requested=20)]
    assert predictor_names("smith+ibl,last2", jobs) == ["smith+ibl", "last2"]
    with pytest.raises(ValueError, match="names a predictor twice"):
        predictor_names("smith+smith", jobs)
    with pytest.raises(ValueError, match="unknown predictor 'oracle'"):
        predictor_names("smith+oracle", jobs)
    with pytest.raises(ValueError, match="'requested' cannot predict"):
        predictor_names("last2+requested", [job(0, 0, 1, 10)])


# -- online: no predictor ever sees the future -------------------------------------------

def test_completions_come_before_submissions_at_one_instant():
    jobs = [job(0, 0, 1, 10), job(1, 10, 1, 5)]
    order = events(jobs, [10.0, 15.0])
    assert order[:3] == [(0, 1, 0), (10.0, 0, 0), (10, 1, 1)]


def _adversarial(future_runs):
    """A trace whose last job is submitted before its predecessors finish: the run times of
    the unfinished ones are the 'future'."""
    jobs = [job(i, i * 10.0, 1, 100.0, user=1, group=1, executable=1) for i in range(6)]
    jobs += [job(6 + i, 60.0 + i, 1, r, user=1, group=1, executable=1)
             for i, r in enumerate(future_runs)]
    jobs.append(job(99, 70.0, 1, 50.0, user=1, group=1, executable=1, requested=500))
    ends = np.array([j.submit + j.run for j in jobs])
    return jobs, ends


@pytest.mark.parametrize("make", [
    lambda: Requested(), lambda: LastTwo(),
    lambda: Categories([Template("U", None, 8), Template("", None, 8)]),
    lambda: InstanceBased("UE", k=3, width=1.0),
    lambda: Li([("GU", "WM(2)"), ("G", "LR(3)")], "lsterr"),
    lambda: Li([("GU", "WM(2)"), ("G", "LR(3)")], "aver"),
])
def test_no_predictor_reads_a_run_time_before_the_job_completes(make):
    # jobs 6..8 are still running when job 99 is submitted; changing their run times (which
    # a cheating predictor would use) must not change any prediction made before they end
    a_jobs, a_ends = _adversarial([1000.0, 2000.0, 3000.0])
    b_jobs, b_ends = _adversarial([15.0, 25.0, 35.0])  # still running at 70 too
    a, _ = run_online(a_jobs, a_ends, [make()])
    b, _ = run_online(b_jobs, b_ends, [make()])
    assert np.array_equal(a[0], b[0])
    # and the job itself never leaks into its own prediction
    c_jobs, c_ends = _adversarial([1000.0, 2000.0, 3000.0])
    c_jobs[-1].run = 99999.0
    c, _ = run_online(c_jobs, c_ends, [make()])
    assert c[0, -1] == a[0, -1]


def test_predictors_see_a_blind_copy():
    seen = []

    class Spy:
        name = "spy"

        def predict(self, j, elapsed=0.0):
            seen.append(j.run)
            return 1.0

        def observe(self, j):
            pass

    jobs = [job(0, 0, 1, 10), job(1, 5, 1, 5)]
    run_online(jobs, completion_times(jobs, 4), [Spy()])
    assert seen == [None, None]


def test_fallback_is_counted():
    jobs = [job(i, i * 100.0, 1, 10.0 * (i + 1), user=i) for i in range(4)]
    preds, sources = run_online(jobs, [j.submit + j.run for j in jobs], [LastTwo()])
    # every user is new: the first falls back to the default, the rest to the history mean
    assert list(sources[0]) == [3, 2, 2, 2]
    assert preds[0, 1] == 10.0 and preds[0, 2] == 15.0


# -- technique 1 -------------------------------------------------------------------------

def _schedule_until(jobs, processors, policy, until, site=None):
    sched = Scheduler(processors, policy, site=site)
    simulate(jobs, sched, estimator=Actual(), until=until)
    return sched


def _snapshot_with_truth(seed, n, policy, now):
    """n random jobs on 8 processors: (jobs, their real schedule, the scheduler at now)."""
    rng = np.random.default_rng(seed)
    jobs = [job(i, float(i * 5), int(rng.integers(1, 9)), float(rng.integers(10, 300)))
            for i in range(n)]
    truth = simulate(jobs, Scheduler(8, policy), estimator=Actual()).jobs
    return jobs, truth, _schedule_until([j.fresh() for j in jobs], 8, policy, now)


@pytest.mark.parametrize("policy", ["fcfs", "lwf", "easy", "conservative"])
def test_technique1_is_exact_with_exact_run_times_and_no_later_arrivals(policy):
    # at the last arrival, predict every queued job's start from a snapshot
    now = 39 * 5.0
    jobs, truth, sched = _snapshot_with_truth(7, 40, policy, now)
    waiting = sched.waiting()
    assert len(waiting) > 5
    for q in waiting:
        start = predict_start(sched, now, q, lambda j, e: j.run, knows_estimates=False)
        assert start == truth[q.index].start


@pytest.mark.parametrize("policy", ["fcfs", "lwf", "easy"])
def test_technique1_is_exact_with_exact_run_times_and_the_real_later_arrivals(policy):
    now = 40 * 5.0
    jobs, truth, sched = _snapshot_with_truth(11, 80, policy, now)
    waiting = sched.waiting()
    assert len(waiting) > 5
    later = [j for j in jobs if j.submit > now]
    missed = 0
    for q in waiting:
        arrivals = [j.fresh() for j in later]
        for a in arrivals:
            a.estimate = a.run
        start = predict_start(sched, now, q, lambda j, e: j.run, knows_estimates=False,
                              arrivals=arrivals)
        assert start == truth[q.index].start
        missed += predict_start(sched, now, q, lambda j, e: j.run,
                                knows_estimates=False) != truth[q.index].start
    if policy != "fcfs":  # later jobs backfill (easy) or jump the queue (lwf)
        assert missed > 0


def _multifactor():
    weights = {"age": 1000, "fairshare": 10000, "job_size": 1000, "partition": 0, "qos": 0}
    return Multifactor(SlurmConfig(weights=weights, max_age_seconds=600.0,
                                   decay_half_life_seconds=900.0), 8)


SNAPSHOT_CASES = {  # name -> the scheduler's keywords, made anew for each scheduler
    "fcfs": lambda: dict(policy="fcfs"), "lwf": lambda: dict(policy="lwf"),
    "easy": lambda: dict(policy="easy"), "conservative": lambda: dict(policy="conservative"),
    "fairshare+easy": lambda: dict(order="fairshare", backfill="easy"),
    "fairshare+easy, sorted every 300 s": lambda: dict(
        order="fairshare", backfill="easy",
        site=policy_from_dict({"fairshare": {"RMPOLLINTERVAL": 300, "FSINTERVAL": 600}})),
    "fairshare+conservative": lambda: dict(order="fairshare", backfill="conservative"),
    "multifactor+easy": lambda: dict(order=_multifactor(), backfill="easy"),
    "multifactor+conservative": lambda: dict(order=_multifactor(), backfill="conservative"),
    "sjf+slurm": lambda: dict(order="sjf", backfill="slurm",
                              slurm=BackfillParams(3600.0, 60.0, 500, 300.0)),
    "easy, limits and priorities": lambda: dict(policy="easy", site=SitePolicy(
        users={"1": Credential(maxproc=4)}, groups={"2": Credential(priority=5)})),
    "conservative, limits": lambda: dict(policy="conservative", site=SitePolicy(
        groups={"1": Credential(maxproc=5)})),
    "easy, a reservation": lambda: dict(policy="easy", site=SitePolicy()),
}


@pytest.mark.parametrize("case", sorted(SNAPSHOT_CASES))
def test_a_snapshot_goes_on_as_the_scheduler_it_copies(case):
    """Mid-trace, a copy of the scheduler (its queue, running jobs, limits, order state,
    backfill pass and granted reservations) given the real later arrivals starts every job
    when the real run does; jobs end before their requested times, so ended-early
    estimates are copied too; the scheduler copied is left as it was."""
    rng = np.random.default_rng(23)
    jobs = []
    for i in range(70):
        run = float(rng.integers(20, 400))
        jobs.append(job(i, float(i * 9), int(rng.integers(1, 8)), run,
                        requested=run * float(rng.choice([1.0, 1.5, 3.0])),
                        user=int(rng.integers(0, 3)), group=int(rng.integers(0, 3))))
    reservations = [ReservationRequest(100.0, 900.0, 4, 150.0, id=1)] \
        if case.endswith("reservation") else []
    now = jobs[45].submit

    def run_until(until):
        sched = Scheduler(8, **SNAPSHOT_CASES[case]())
        done = simulate(jobs, sched, estimator=RequestedTimes(), until=until,
                        reservations=[r.copy() for r in reservations])
        return sched, done.jobs

    truth = run_until(None)[1]
    sched, _ = run_until(now)
    waiting = sched.waiting()
    assert len(waiting) > 3 and len(sched.running) > 1
    before = ([j.id for j in waiting], sched.free, sorted(j.id for j in sched.running))
    sim, mapping = sched.snapshot(now)
    assert sim.policy == sched.policy and sim.free == sched.free
    assert [(c.id, c.reserved) for c in sim.waiting()] == [(j.id, j.reserved) for j in waiting]
    later = []
    for j in jobs[46:]:
        c = j.fresh()
        c.estimate = c.requested
        later.append(c)
    starts = run_forward(sim, now, [mapping[j] for j in waiting] + later, arrivals=later)
    assert {c.id: t for c, t in starts.items()} == \
        {j.id: truth[j.index].start for j in waiting + jobs[46:]}
    assert before == ([j.id for j in sched.waiting()], sched.free,
                      sorted(j.id for j in sched.running))
    assert all(j.start is None for j in waiting)
    # new arrivals of every owner queue in a copy where they queue in the scheduler copied
    other, _ = sched.snapshot(now)
    for k in range(9):
        for s in (sched, other):
            s.submit(job(100 + k, now, 8, 50.0, estimate=50.0, user=k % 3, group=k // 3), now)
    assert [j.id for j in other.waiting()] == [j.id for j in sched.waiting()]


def test_a_copys_running_jobs_end_by_their_own_estimates():
    """A (estimated 10 s, running on) was extended to 50 by the passes at 10 and 25; B is
    estimated to 300. A plain copy at 50 keeps what the scheduler believes (50); a copy
    whose jobs carry their own estimates ends A at 0 + 80 for 80, and for 50, 30 or the
    same 10 s (reached by 50) extends it from 50: 100. B is left at 300."""
    sched = Scheduler(8, "easy")
    a, b = Job(1, 0, 2, 500, estimate=10), Job(2, 0, 2, 500, estimate=300)
    for job in (a, b, Job(3, 0, 8, 10, estimate=10)):
        sched.submit(job, 0)
    for now in (0, 10, 25):
        sched.schedule(now)
    assert (a.est_end, b.est_end) == (50, 300)

    def ends(estimate):
        def copy(job):
            c = job.fresh()
            if job is a and estimate is not None:
                c.estimate = estimate
            return c
        _, mapping = sched.snapshot(50, job_copy=copy)
        return mapping[a].est_end, mapping[b].est_end

    _, plain = sched.snapshot(50)
    assert (plain[a].est_end, plain[b].est_end) == (50, 300)
    assert [ends(e) for e in (80, 50, 30, None)] == [(80, 300)] + [(100, 300)] * 3


def test_replayed_arrivals_are_the_last_horizons_jobs_one_horizon_later():
    jobs = [job(i, float(t), 2, 100.0 * (i + 1), estimate=500.0)
            for i, t in enumerate((0, 400, 950, 1000, 1000))]
    believed = {0: 11.0, 1: 22.0, 2: 33.0, 3: 44.0, 4: 55.0}
    out = replayed_arrivals(jobs, 1000, 600, lambda j, e: believed[j.index],
                            exclude=jobs[4])
    # (400, 1000]: jobs 2 and 3 (job 1 at 400 is out, job 4 is the one forecast)
    assert [(c.submit, c.run, c.estimate) for c in out] == [(1550, 33.0, 500.0),
                                                            (1600, 44.0, 500.0)]
    assert all(c.index < 0 for c in out) and jobs[2].submit == 950  # copies
    blind_est = replayed_arrivals(jobs, 1000, 600, lambda j, e: believed[j.index],
                                  knows_estimates=False)
    assert [c.estimate for c in blind_est] == [33.0, 44.0, 55.0]


def test_replayed_arrivals_make_forecasts_exact_on_a_periodic_workload():
    # the same ten jobs every 2,000 s (88% load): the last period's arrivals are the next's
    period = 2000.0
    rng = np.random.default_rng(39)
    pattern = [(float(rng.integers(0, 1500)), int(rng.integers(1, 9)),
                float(rng.integers(50, 600))) for _ in range(10)]
    jobs = []
    for k in range(6):
        for offset, procs, run in sorted(pattern):
            jobs.append(job(len(jobs), k * period + offset, procs, run))
    evaluate = [j.index for j in jobs if j.submit >= period]
    plain, _ = evaluate_waits([j.fresh() for j in jobs], 8, "easy", [Source("actual")],
                              Actual(), WaitStudy(evaluate=evaluate, technique2=False))
    replay, rows = evaluate_waits([j.fresh() for j in jobs], 8, "easy", [Source("actual")],
                                  Actual(), WaitStudy(evaluate=evaluate, technique2=False,
                                                      future_seconds=period))
    assert replay["future_arrivals_seconds"] == period
    assert plain["mean_wait_seconds"] > 0 and plain["runtimes"]["actual"]["mae_seconds"] > 0
    short = rows["wait"] < period  # starts before any job the replay does not hold arrives
    assert short.sum() == len(evaluate)
    assert np.array_equal(rows["actual"], rows["wait"])
    assert replay["runtimes"]["actual"]["mae_seconds"] == 0


def test_technique1_respects_limits_and_running_jobs_overrunning_predictions():
    site = SitePolicy(users={"1": Credential(maxproc=2)})
    jobs = [job(0, 0, 2, 1000, user=1), job(1, 1, 2, 50, user=1), job(2, 2, 2, 50, user=2)]
    sched = _schedule_until(jobs, 8, "fcfs", 2, site=site)
    (queued,) = sched.waiting()
    assert queued.id == 1 and [j.id for j in sched.running] == [0, 2]
    # believed 100 s for job 0, which has run 2 s: job 1 starts when it ends, at 100
    assert predict_start(sched, 2, queued, lambda j, e: 100.0, knows_estimates=False) == 100
    # at t=500 job 0 has outlived a 100 s belief: it is believed to run to 2 x 500 = 1000
    sched2 = _schedule_until(jobs, 8, "fcfs", 500, site=site)
    q = sched2.waiting()[0]
    assert predict_start(sched2, 500, q, lambda j, e: 100.0, knows_estimates=False) == 1000


def test_probe_jobs_publish_start_times_per_policy():
    # Li et al.'s example: user svens may use 2 processors and already does; others not
    site = SitePolicy(groups={"atlas": Credential(priority=300, maxproc=4)},
                      users={"svens": Credential(priority=100, maxproc=2)})
    jobs = [job(0, 0, 1, 5000, user="svens", group="dteam"),
            job(1, 0, 1, 8000, user="svens", group="dteam"),
            job(2, 0, 1, 9000, user="atlas001", group="atlas"),
            job(3, 1, 1, 3000, user="svens", group="dteam")]
    sched = _schedule_until(jobs, 20, "easy", 1, site=site)
    probes = [("group atlas", "(probe)", "atlas", 1), ("user svens", "svens", "dteam", 1),
              ("default", "(probe)", "(probe)", 1)]
    starts = probe_starts(sched, 1, probes, lambda j, e: j.run, knows_estimates=False)
    assert starts["group atlas"] == 1 and starts["default"] == 1
    # svens: after his queued job 3, which waits for job 0 to end at 5000, and ends at 8000
    assert starts["user svens"] == 8000


def test_wait_evaluation_is_exact_for_fcfs_with_actual_run_times():
    rng = np.random.default_rng(2)
    jobs = [job(i, float(i * 20), int(rng.integers(1, 9)), float(rng.integers(50, 400)))
            for i in range(150)]
    summary, rows = evaluate_waits(jobs, 8, "fcfs", [Source("actual")], Actual())
    assert summary["mean_wait_seconds"] > 0
    assert summary["runtimes"]["actual"]["mae_seconds"] == 0  # Smith: no error for FCFS
    assert "technique2" in summary and summary["technique2"]["mae_seconds"] >= 0
    assert len(rows["index"]) == 150


def test_a_mean_of_forecasts_is_the_mean_of_each_jobs_two_forecasts():
    rng = np.random.default_rng(3)
    jobs = [job(i, float(i * 15), int(rng.integers(1, 9)), float(rng.integers(50, 400)),
                requested=float(rng.integers(400, 1200))) for i in range(150)]
    sources = [Source("actual"), Source("requested")]
    summary, rows = evaluate_waits(jobs, 8, "easy", sources, Actual(),
                                   WaitStudy(technique2=False, means=[["actual", "requested"]]))
    label = "mean(actual;requested)"
    assert np.allclose(rows[label], (rows["actual"] + rows["requested"]) / 2)
    error = np.abs(rows[label] - rows["wait"]).mean()
    assert summary["runtimes"][label]["mae_seconds"] == pytest.approx(error)
    assert summary["runtimes"]["actual"]["mae_seconds"] > 0  # later arrivals backfill
    with pytest.raises(ValueError, match="two or more of the run-time sources"):
        evaluate_waits([j.fresh() for j in jobs], 8, "easy", sources, Actual(),
                       WaitStudy(means=[["actual", "last2"]]))


def test_work_error_by_hand():
    jobs = [job(0, 0.0, 2, 10.0), job(1, 1.0, 1, 20.0), job(2, 2.0, 4, 5.0)]
    predicted = {0: 15.0, 1: 10.0, 2: 5.0}  # errors in processor-seconds: +10, -10, 0
    assert work_error(predicted, jobs, window=1) == pytest.approx(20 / 3)
    assert work_error(predicted, jobs, window=2) == pytest.approx(5.0)  # |0| and |-10|
    assert work_error(predicted, jobs, window=9) == 0.0  # one window of all three
    assert work_error(predicted, [], window=2) == math.inf


class _Known:
    """A test predictor whose prediction for each job is given up front by job index."""

    def __init__(self, name, values):
        self.name, self.values = name, values

    def predict(self, job, elapsed=0.0):
        return self.values[job.index]

    def observe(self, job):
        pass


def test_the_work_rule_trusts_errors_that_cancel_over_a_burst():
    # 'alternating' errs by half of each run time, up and down in turn: each job's error is
    # large but two neighbours' work is exact; 'short' predicts 80% of each run time, a
    # smaller error per job that adds up over a burst
    rng = np.random.default_rng(4)
    jobs = [job(i, float(i * 90), int(rng.integers(1, 5)), float(rng.integers(100, 300)))
            for i in range(200)]
    alternating = {j.index: j.run * (1.5 if j.index % 2 == 0 else 0.5) for j in jobs}
    # pairs whose two processor counts differ cancel only in part: make them equal
    for j in jobs[1::2]:
        j.procs = jobs[j.index - 1].procs
    short = {j.index: 0.8 * j.run for j in jobs}
    sources = [Source("actual"), Source("alternating", _Known("alternating", alternating)),
               Source("short", _Known("short", short))]
    summary, _ = evaluate_waits(jobs, 8, "easy", sources, Actual(),
                                WaitStudy(technique2=False, evaluate=range(100, 200),
                                          train=range(100), select=("work", "wait")))
    work = summary["selected"]["work"]
    ran = simulate(jobs, Scheduler(8, "easy"), estimator=Actual()).jobs  # the same schedule
    known = [j for j in ran[:100] if j.end <= jobs[100].submit]
    assert work["train_jobs"] == len(known) > 50
    for name, values in (("alternating", alternating), ("short", short)):
        assert work["train_work_error_cpu_hours"][name] * 3600 == pytest.approx(
            work_error(values, known))
    assert work["name"] == "alternating"
    per_job = {n: np.mean([abs(v[j.index] - j.run) for j in known])
               for n, v in (("alternating", alternating), ("short", short))}
    assert per_job["alternating"] > per_job["short"]  # each job's error says the opposite
    assert summary["selected"]["wait"]["name"] in ("alternating", "short")
    with pytest.raises(ValueError, match="unknown selection rule 'best'"):
        evaluate_waits([j.fresh() for j in jobs], 8, "easy", sources, Actual(),
                       WaitStudy(train=range(100), select=("best",)))


# -- evaluation and commands -------------------------------------------------------------

def _trace(tmp_path, n=300, requested=True):
    rng = np.random.default_rng(5)
    lines = ["; MaxProcs: 16", "; UnixStartTime: 0"]
    t = 0
    for i in range(n):
        t += int(rng.exponential(120))
        user = int(rng.integers(1, 8))
        run = int(100 * user + rng.integers(0, 50))
        req = 4 * run if requested else -1
        procs = int(2 ** rng.integers(0, 4))
        lines.append(f"{i + 1} {t} -1 {run} {procs} -1 -1 {procs} {req} -1 1 {user} {user % 2}"
                     f" {user % 3} -1 -1 -1 -1")
    path = tmp_path / "t.swf"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_runtime_evaluation_beats_the_baselines_on_a_learnable_trace(tmp_path):
    from emulator.scheduling.job import jobs_from_trace
    from emulator.workload.swf import read_swf

    trace = read_swf(_trace(tmp_path))
    jobs = sorted(jobs_from_trace(trace), key=lambda j: (j.submit, j.index))
    ends = completion_times(jobs, 16)
    names = predictor_names("all", jobs)
    assert "requested" in names
    result = evaluate_runtimes(jobs, ends, ["requested", "last2", "smith", "li-temp-est"])
    p = result["summary"]["predictors"]
    assert p["smith"]["mae_seconds"] < p["last2"]["mae_seconds"]
    assert p["smith"]["mae_seconds"] < p["requested"]["mae_seconds"] / 2
    assert p["li-temp-est"]["jobs"] == result["summary"]["test_jobs"]


def test_predict_runtime_command_writes_its_files(tmp_path, capsys):
    out = tmp_path / "rt"
    assert main(["predict", "runtime", str(_trace(tmp_path)), "--predictor",
                 "requested,last2,li-aver", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mean_runtime_seconds"] > 0
    assert set(summary["predictors"]) == {"requested", "last2", "li-aver"}
    for s in summary["predictors"].values():
        assert {"mae_seconds", "mae_pct_of_mean", "jobs"} <= set(s)
    assert (out / "jobs.csv").read_text().count("\n") == 301
    assert (out / "errors-cdf.png").stat().st_size > 0
    assert "| predictor |" in (out / "table.md").read_text()


def test_predict_wait_command(tmp_path):
    out = tmp_path / "w"
    assert main(["predict", "wait", str(_trace(tmp_path)), "--policy", "easy",
                 "--compress-arrivals", "4", "--runtimes", "actual,requested,last2",
                 "--mean-of", "requested,last2", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mean_wait_seconds"] > 0
    assert set(summary["runtimes"]) == {"actual", "requested", "last2",
                                        "mean(requested;last2)"}
    assert "mean(requested;last2)_seconds" in (out / "jobs.csv").read_text().split("\n")[0]
    for s in summary["runtimes"].values():
        assert {"mae_seconds", "mae_pct_of_mean_wait"} <= set(s)
    assert summary["future_arrivals_seconds"] == 0
    out2 = tmp_path / "w2"
    assert main(["predict", "wait", str(_trace(tmp_path)), "--compress-arrivals", "4",
                 "--runtimes", "actual", "--future-arrivals", "0.5", "--no-technique2",
                 "--out", str(out2)]) == 0
    replay = json.loads((out2 / "summary.json").read_text())
    assert replay["future_arrivals_seconds"] == 1800
    assert replay["mean_wait_seconds"] == summary["mean_wait_seconds"]  # the same schedule
    assert "arrivals of the last 0.5 h" in (out2 / "table.md").read_text()


def test_predict_starts_command(tmp_path, capsys):
    policy = tmp_path / "site.cfg"
    policy.write_text("GROUPCFG[1] PRIORITY=300 MAXPROC=4\nUSERCFG[3] MAXPROC=2\n")
    assert main(["predict", "starts", str(_trace(tmp_path)), "--compress-arrivals", "4",
                 "--at", "3000", "--policy-file", str(policy), "--out",
                 str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "| group 1 |" in out and "| user 3 |" in out and "| default |" in out
    result = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert all(r["wait_seconds"] is not None and r["wait_seconds"] >= 0
               for r in result["starts"])


@pytest.mark.parametrize("argv, message", [
    (["predict", "runtime", "T", "--predictor", "oracle"], "unknown predictor 'oracle'"),
    (["predict", "wait", "T", "--runtimes", "psychic"], "unknown --runtimes 'psychic'"),
    (["predict", "wait", "T", "--policy", "sjf"], "unknown policy 'sjf'"),
    (["predict", "wait", "T", "--runtimes", "actual,last2", "--mean-of", "actual,ibl"],
     "--mean-of actual,ibl: name two or more different sources"),
    (["predict", "wait", "T", "--runtimes", "last2+last2"], "names a predictor twice"),
    (["predict", "wait", "T", "--runtimes", "last2", "--select", "best"],
     "--select best: name one or both of the rules work, wait"),
])
def test_bad_requests_get_one_line_and_exit_2(tmp_path, capsys, argv, message):
    argv = [str(_trace(tmp_path, requested=False)) if a == "T" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_requested_is_refused_where_the_trace_has_none(tmp_path, capsys):
    path = str(_trace(tmp_path, requested=False))
    assert main(["predict", "runtime", path, "--predictor", "requested"]) == 2
    assert "no job has a requested time" in capsys.readouterr().err


def test_wait_forecast_selected_on_the_training_prefix(tmp_path):
    out = tmp_path / "w"
    assert main(["predict", "wait", str(_trace(tmp_path)), "--compress-arrivals", "4",
                 "--runtimes", "actual,last2,li-aver,last2+li-aver", "--mean-of",
                 "last2,li-aver", "--select", "work,wait", "--no-technique2", "--out",
                 str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    work = summary["selected"]["work"]
    errors = work["train_work_error_cpu_hours"]
    # the work rule: among the run-time sources, not the mean of two forecasts
    assert set(errors) == {"last2", "li-aver", "last2+li-aver"}
    assert work["name"] == min(errors, key=errors.get)
    selected = summary["selected"]["wait"]
    train = selected["train_mae_pct_of_mean_wait"]
    # chosen among the learning sources and the mean, never 'actual', by training error alone
    assert set(train) == {"last2", "li-aver", "last2+li-aver", "mean(last2;li-aver)"}
    assert selected["name"] == min(train, key=train.get)
    assert selected["mae_seconds"] == summary["runtimes"][selected["name"]]["mae_seconds"]
    assert selected["train_jobs"] > 0
    table = (out / "table.md").read_text()
    assert "chosen on the training prefix by work error" in table
    assert "chosen on the training prefix by wait error" in table


@pytest.mark.parametrize("kill, waits, state", [
    (False, [40, 41, 42], (1, 1, 0)),  # J1 runs to 100: J2, then the probes one by one
    (True, [0, 1, 2], (1, 0, 1)),  # J1 ended at its 50 s request: J2 runs, one processor free
])
def test_published_starts_worked_by_hand(kill, waits, state):
    """4 processors under EASY, published at 60 s: J1 (4 processors, runs 100 s, asked 50)
    from 0, J2 (3 processors, 40 s) from 10; a probe of one processor and one second per
    group, and the default one, join the queue in that order."""
    from emulator.prediction.starts import Machine, published_starts
    from emulator.scheduling.estimates import estimator

    jobs = [Job(1, 0, 4, 100.0, requested=50, owner=Owner(user=1, group=1), index=0),
            Job(2, 10, 3, 40.0, requested=40, owner=Owner(user=2, group=2), index=1)]
    result = published_starts(jobs, Machine(4, "easy", kill_at_requested=kill),
                              estimator("actual"), Source("actual"), 60)
    assert [(r["entity"], r["wait_seconds"]) for r in result["starts"]] == list(zip(
        ["group 1", "group 2", "default"], waits))
    assert (result["running_jobs"], result["queued_jobs"], result["free_processors"]) == state

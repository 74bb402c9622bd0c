"""Slurm's words and formulas: slurm.conf and sacctmgr files, the multifactor priority worked
by hand, usage decay, Fair Tree and classic fair share, and sched/backfill's window, test
limit and resolution."""

import math
import re

import numpy as np
import pytest

from emulator.cli import main
from emulator.errors import InputFileError
from emulator.scheduling.estimates import estimator
from emulator.scheduling.job import Job, Owner
from emulator.scheduling.multifactor import Multifactor
from emulator.scheduling.scheduler import Scheduler
from emulator.scheduling.simulate import simulate
from emulator.scheduling.slurmbackfill import BackfillParams
from emulator.scheduling.slurmconf import SlurmConfig, read_associations, read_slurm_conf
from emulator.workload.slurmtime import slurm_duration_seconds

CONF = """\
# the scheduling lines of a site's slurm.conf
ClusterName=tiny            # not modelled: listed once
PriorityType=priority/multifactor
PriorityWeightAge=1000
PriorityWeightFairshare=10000
PriorityWeightJobSize=1000
PriorityWeightPartition=1000
PriorityWeightQOS=500
PriorityMaxAge=00:16:40
PriorityDecayHalfLife=0
PriorityCalcPeriod=5
PriorityFlags=SMALL_RELATIVE_TO_TIME,MAX_TRES
SchedulerType=sched/backfill
SchedulerParameters=bf_window=60,bf_resolution=30,bf_max_job_test=50,bf_interval=45,bf_continue,bf_yield_interval=2
NodeName=n[1-8] CPUs=1 State=UNKNOWN
PartitionName=1 Nodes=ALL PriorityJobFactor=10
PartitionName=2 Nodes=ALL PriorityJobFactor=20 Default=YES
"""

ASSOC = """\
Cluster|Account|User|Partition|Share|Priority|GrpJobs|Par Name
tiny|root||||1|||
tiny|root|root||1||||
tiny|10|||60|||root
tiny|10|1||1||||
tiny|10|2||3||||
tiny|20|||40|||root
tiny|20|3||1||||
"""


def test_slurm_conf_is_read_in_slurms_words(tmp_path):
    path = tmp_path / "slurm.conf"
    path.write_text(CONF)
    c = read_slurm_conf(str(path))
    assert c.weights == {"age": 1000, "fairshare": 10000, "job_size": 1000, "partition": 1000,
                         "qos": 500}
    assert (c.max_age_seconds, c.decay_half_life_seconds, c.calc_period_seconds) == \
        (1000.0, 0.0, 300.0)
    assert c.flags == {"SMALL_RELATIVE_TO_TIME"} and c.fair_tree
    assert (c.bf_window_seconds, c.bf_resolution_seconds, c.bf_max_job_test, c.bf_continue) \
        == (3600.0, 30.0, 50, True)
    assert c.bf_interval_seconds == 45.0 and SlurmConfig().bf_interval_seconds == 30.0
    assert BackfillParams.from_config(c).interval_seconds == 45.0
    assert [(p.name, p.priority_job_factor, p.default) for p in c.partitions] == \
        [("1", 10, False), ("2", 20, True)]
    assert c.unused == ("ClusterName", "PriorityFlags=MAX_TRES",
                        "SchedulerParameters=bf_yield_interval")
    assert c.backfill == "slurm" and SlurmConfig().bf_window_seconds == 86400.0


@pytest.mark.parametrize("text, seconds", [("5", 300), ("7-0", 604800), ("1-2:03", 93780),
                                           ("1-02:03:04", 93784), ("10:30", 630),
                                           ("01:00:00", 3600), ("INFINITE", math.inf),
                                           ("1-2", 93600)])
def test_slurm_durations(text, seconds):
    assert slurm_duration_seconds(text) == seconds


@pytest.mark.parametrize("line, says", [
    ("PriorityWeightAge=lots", "line 1, PriorityWeightAge: 'lots' is not a whole number"),
    ("PriorityMaxAge=soon", "line 1, PriorityMaxAge: 'soon' is not a Slurm duration"),
    ("PriorityType=priority/fancy", "line 1, PriorityType: this reader models"),
    ("SchedulerParameters=bf_window=0", "line 1, bf_window: must be at least 1"),
    ("PriorityFavorSmall=maybe", "line 1, PriorityFavorSmall: must be YES or NO"),
    ("just words", "line 1: expected Parameter=value"),
    # found by fuzzing: a period of 0 reached the C state as a ValueError, a NaN passed
    ("PriorityCalcPeriod=0", "line 1, PriorityCalcPeriod: must be above zero"),
    ("PriorityCalcPeriod=00:00:00", "line 1, PriorityCalcPeriod: must be above zero"),
    ("PriorityMaxAge=nan", "line 1, PriorityMaxAge: 'nan' is not a Slurm duration"),
    ("PriorityDecayHalfLife=1e999", "line 1, PriorityDecayHalfLife: '1e999' is not a Slurm"),
    ("PriorityDecayHalfLife=1-inf", "line 1, PriorityDecayHalfLife: '1-inf' is not a Slurm"),
    # a weight of 1e20 reached the C state, whose refusal named no file
    ("PriorityWeightAge=99999999999999999999", "line 1, PriorityWeightAge: must be at most "
                                               "4294967295"),
    # Slurm's own bounds: past them a test limit of 1e20 overflowed a C size
    ("SchedulerParameters=bf_max_job_test=99999999999999999999",
     "line 1, bf_max_job_test: must be at most 1000000"),
    ("SchedulerParameters=bf_resolution=3601", "line 1, bf_resolution: must be at most 3600"),
    ("SchedulerParameters=bf_window=43201", "line 1, bf_window: must be at most 43200"),
    ("SchedulerParameters=bf_interval=10801", "line 1, bf_interval: must be at most 10800"),
])
def test_a_bad_slurm_conf_line_is_named(tmp_path, line, says):
    path = tmp_path / "slurm.conf"
    path.write_text(line + "\n")
    with pytest.raises(InputFileError, match=re.escape(says)):
        read_slurm_conf(str(path))


def test_associations_come_from_sacctmgr_parsable2(tmp_path):
    path = tmp_path / "assoc.txt"
    path.write_text(ASSOC)
    a = read_associations(str(path))
    assert a.accounts == {"10": ("root", 60), "20": ("root", 40)}
    assert a.users == {("root", "root"): 1, ("10", "1"): 1, ("10", "2"): 3, ("20", "3"): 1}
    path.write_text("Account|User|Share\nphys||parent\n")
    with pytest.raises(InputFileError, match="line 2, Share: Share=parent is not modelled"):
        read_associations(str(path))
    path.write_text("Account|User\nphys|\n")
    with pytest.raises(InputFileError, match="no Share column"):
        read_associations(str(path))
    path.write_text("Account|User|Share|Par Name\nphys|||physics\n")
    with pytest.raises(InputFileError, match="its parent 'physics' is not in the file"):
        read_associations(str(path))


# -- the multifactor priority, by hand ----------------------------------------------------

def order(tmp_path, **change):
    path = tmp_path / "assoc.txt"
    path.write_text(ASSOC)
    config = SlurmConfig(**{"weights": {"age": 1000, "fairshare": 10000, "job_size": 1000,
                                        "partition": 1000, "qos": 500},
                            "max_age_seconds": 1000.0, "decay_half_life_seconds": 0.0,
                            "partitions": read_slurm_conf_partitions(tmp_path), **change})
    return Multifactor(config, 8, read_associations(str(path)))


def read_slurm_conf_partitions(tmp_path):
    path = tmp_path / "slurm.conf"
    path.write_text(CONF)
    return read_slurm_conf(str(path)).partitions


def used(mf):
    """User 1 runs 4 processors over [0, 600), user 2 two over [0, 300); no decay."""
    a, b = Job(100, 0, 4, 600, owner=Owner(1, 10)), Job(101, 0, 2, 300, owner=Owner(2, 10))
    mf.started(a, 0.0)
    mf.started(b, 0.0)
    mf.finished(b, 300.0)
    mf.finished(a, 600.0)


def test_fair_tree_ranks_users_level_by_level(tmp_path):
    mf = order(tmp_path)
    used(mf)
    alice, bob, carol = (Job(i, 100, 2, 60, owner=Owner(user=u, group=g))
                         for i, (u, g) in enumerate([(1, 10), (2, 10), (3, 20)]))
    # usage at the tick of 600: user 1 2,400, user 2 600; account 10 3,000, account 20 0.
    # Root level (accounts 10 and 20, and sacctmgr's root user, 60 + 40 + 1 shares):
    # account 20 and the root user have no usage (first, in that order), account 10
    # (60/101) / 1.0 last. In account 10: user 2 (0.75 / 0.2 = 3.75) before user 1 (0.25 /
    # 0.8). Four users: ranks 4 (carol), 3 (root), 2, 1.
    assert [mf.factors(j, 600.0)["fairshare"] for j in (carol, bob, alice)] == \
        pytest.approx([1.0, 2 / 4, 1 / 4])


def test_classic_fair_share_is_two_to_the_minus_effective_usage_over_shares(tmp_path):
    mf = order(tmp_path, flags=frozenset({"NO_FAIR_TREE"}))
    used(mf)
    alice, bob, carol = (Job(i, 100, 2, 60, owner=Owner(user=u, group=g))
                         for i, (u, g) in enumerate([(1, 10), (2, 10), (3, 20)]))
    # alice: shares 60/101 x 1/4; effective 0.8 + (1.0 - 0.8) x 1/4 = 0.85
    # bob: 60/101 x 3/4; 0.2 + (1.0 - 0.2) x 3/4 = 0.8; carol: no usage
    assert mf.factors(alice, 600.0)["fairshare"] == pytest.approx(2 ** (-0.85 / (60 / 404)))
    assert mf.factors(bob, 600.0)["fairshare"] == pytest.approx(2 ** (-0.8 / (180 / 404)))
    assert mf.factors(carol, 600.0)["fairshare"] == 1.0


def test_every_factor_and_the_whole_number_priority(tmp_path):
    mf = order(tmp_path)
    used(mf)
    # bob's job: 2 processors, queue 1 (factor 10 of 20), submitted at 100, asked 1,800 s
    job = Job(7, 100, 2, 60, requested=1800, owner=Owner(user=2, group=10, queue=1))
    f = mf.factors(job, 600.0)
    assert f["age"] == pytest.approx(0.5)  # 500 s of PriorityMaxAge 1,000 s
    assert f["job_size"] == pytest.approx((2 / 8 + 2 / 8) / 2)
    assert f["partition"] == pytest.approx(0.5)
    assert f["qos"] == 0.0
    # 500 + 10,000 x 1/2 (Fair Tree, above) + 250 + 500 = 6,250; with a third of the job
    # size weight more (1,333): 6,250 + 333.33, kept whole
    assert mf.priority(job, 600.0) == 6250
    assert mf.key(job, 600.0) == -6250
    heavier = order(tmp_path, weights={"age": 1000, "fairshare": 10000, "job_size": 1333 + 1000,
                                       "partition": 1000, "qos": 500})
    used(heavier)
    assert heavier.priority(job, 600.0) == 6250 + 333
    elsewhere = Job(8, 100, 2, 60, owner=Owner(user=2, group=10, queue=7))  # no such partition
    assert mf.factors(elsewhere, 600.0)["partition"] == 1.0
    row = mf.sprio(job, 600.0)
    assert (row["user"], row["account"], row["priority"], row["age"]) == ("2", "10", 6250,
                                                                          500.0)


def test_job_size_favouring_small_and_relative_to_time(tmp_path):
    job = Job(7, 100, 2, 60, requested=1800, owner=Owner(user=2, group=10))
    assert order(tmp_path, favor_small=True).factors(job, 100.0)["job_size"] == \
        pytest.approx(((8 - 2) / 8 + (8 - 2) / 8) / 2)
    relative = order(tmp_path, flags=frozenset({"SMALL_RELATIVE_TO_TIME"}))
    # max(2 nodes x 8 / 8, 2 cpus) / 30 minutes / 8 cpus
    assert relative.factors(job, 100.0)["job_size"] == pytest.approx(2 / 30 / 8)
    both = order(tmp_path, favor_small=True, flags=frozenset({"SMALL_RELATIVE_TO_TIME"}))
    assert both.factors(job, 100.0)["job_size"] == pytest.approx(1 - 2 / 30 / 8)


def test_jobs_of_one_size_and_partition_differ_by_time_limit_relative_to_time(tmp_path):
    """The static part of a priority is kept per size and partition, and per time limit
    where the job size factor is relative to time: two jobs alike but for their limits get
    that factor each from its own limit."""
    weights = {"age": 0, "fairshare": 0, "job_size": 100000, "partition": 0, "qos": 0}
    relative = order(tmp_path, weights=weights, flags=frozenset({"SMALL_RELATIVE_TO_TIME"}))
    short, long = (Job(k, 100, 2, 60, requested=r, owner=Owner(user=2, group=10))
                   for k, r in ((1, 1800), (2, 3600)))
    for job in (short, long):  # 100,000 x 2 / (limit in minutes) / 8, kept whole
        assert relative.priority(job, 100.0) == int(100000 * 2 / (job.requested / 60) / 8)
    plain = order(tmp_path, weights=weights)
    assert plain.priority(short, 100.0) == plain.priority(long, 100.0) == 25000


def test_usage_decays_by_its_half_life_on_each_calc_period(tmp_path):
    """One processor from 0 to 900 s, half-life 600 s, a tick every 300 s: 300 s are added at
    each tick and what was there is multiplied by 2 ** -0.5."""
    d = 2 ** -0.5
    for steps in ([300.0, 600.0, 900.0], [900.0]):  # tick by tick, or all at once
        mf = order(tmp_path, decay_half_life_seconds=600.0)
        job = Job(1, 0, 1, 900, owner=Owner(user=3, group=20))
        mf.started(job, 0.0)
        for t in steps:
            mf.usage.advance(t)
        node = mf.owner(job)
        assert mf.usage.usage(node) == pytest.approx(300 * (d * d + d + 1))
        mf.finished(job, 900.0)
        mf.usage.advance(1200.0)  # nothing ran since: only decay
        assert mf.usage.usage(node) == pytest.approx(300 * (d ** 3 + d * d + d))


@pytest.mark.parametrize("seed", range(4))
def test_usage_kept_as_a_rate_equals_each_jobs_periods_decayed(seed):
    """Jobs of 20 users in 3 accounts start and end at random seconds; at random times every
    association's usage equals the sum, over the periods before the last tick, of the
    processor-seconds its jobs ran in each, decayed by the ticks since."""
    from emulator.scheduling.slurmshare import DecayedUsage, ShareTree

    rng = np.random.default_rng(seed)
    period, half_life = 300.0, 700.0
    d = 2 ** (-period / half_life)
    tree = ShareTree()
    usage = DecayedUsage(tree, period_seconds=period, half_life_seconds=half_life)
    jobs = []
    for k in range(60):
        start = float(rng.integers(0, 4000))
        jobs.append((Job(k, start, int(rng.integers(1, 9)), 1,
                         owner=Owner(user=int(rng.integers(20)), group=int(rng.integers(3)))),
                     start, start + float(rng.integers(1, 1500))))
    nodes = {job: tree.user_of(job.user, job.group) for job, _, _ in jobs}
    events = sorted([(s, 1, j) for j, s, _ in jobs] + [(e, 0, j) for j, _, e in jobs]
                    + [(float(t), 2, None) for t in rng.integers(0, 6000, 40)],
                    key=lambda e: (e[0], e[1], -1 if e[2] is None else e[2].id))

    def expected(node, tick):
        total = 0.0
        for job, s, e in jobs:
            if node in tree.ancestors(nodes[job]):
                for k in range(1, tick + 1):
                    ran = min(e, k * period) - max(s, (k - 1) * period)
                    total += job.procs * max(ran, 0.0) * d ** (tick - k)
        return total

    for t, kind, job in events:
        if kind == 1:
            usage.started(job, nodes[job], t)
        elif kind == 0:
            usage.finished(job, t)
        else:
            usage.advance(t)
            for node in tree.index:
                assert usage.usage(node) == pytest.approx(expected(node, usage.tick),
                                                          rel=1e-9, abs=1e-6)
    assert len(tree.index) > 16  # the arrays grew past their first size


def test_priorities_are_recomputed_on_the_calc_period(tmp_path):
    """User 3 runs the whole machine from 0; its queued job and user 1's start equal (no
    usage yet, submit order). Usage and priorities change at the tick of 300, not before."""
    mf = order(tmp_path, flags=frozenset({"NO_FAIR_TREE"}),
               weights={"age": 0, "fairshare": 10000, "job_size": 0, "partition": 0, "qos": 0})
    sched = Scheduler(8, order=mf, backfill="none")
    blocker = Job(0, 0, 8, 1000, estimate=1000, owner=Owner(user=3, group=20), index=0)
    sched.submit(blocker, 0.0)
    sched.schedule(0.0)
    sched.submit(Job(1, 0, 8, 10, estimate=10, owner=Owner(user=3, group=20), index=1), 0.0)
    sched.submit(Job(2, 10, 8, 10, estimate=10, owner=Owner(user=1, group=10), index=2), 10.0)
    sched.schedule(10.0)
    sched.schedule(299.0)
    assert [j.id for j in sched.waiting()] == [1, 2]
    sched.schedule(300.0)  # user 3 has used 2,400 processor-seconds: its job goes second
    assert [j.id for j in sched.waiting()] == [2, 1]


@pytest.mark.parametrize("kind", ["c", "python"])
def test_a_start_predicted_on_a_copy_of_a_multifactor_scheduler(tmp_path, kind):
    """Forward predictions copy the scheduler and its order, its priorities' state too (C's
    or the Python reference's). User 3's J0 holds all 8 processors until 1,000; its J1 and
    user 1's J2 wait, J2 first from the tick of 300 (user 3's usage): J1 is predicted at
    1,010, after J2's 10 s, and the original scheduler is left as it was."""
    from emulator.prediction.forward import predict_start

    state = priorities_of(kind)
    path = tmp_path / "assoc.txt"
    path.write_text(ASSOC.replace("tiny|root|root||1||||\n", ""))
    config = SlurmConfig(weights={"age": 1000, "fairshare": 10000, "job_size": 0,
                                  "partition": 0, "qos": 0}, max_age_seconds=1000.0)
    sched = Scheduler(8, order=Multifactor(config, 8, read_associations(str(path)),
                                           priorities=state), backfill="easy")
    sched.submit(Job(0, 0, 8, 1000, estimate=1000, owner=Owner(user=3, group=20), index=0), 0.0)
    sched.schedule(0.0)
    j1 = Job(1, 0, 8, 10, estimate=10, owner=Owner(user=3, group=20), index=1)
    sched.submit(j1, 0.0)
    sched.submit(Job(2, 10, 8, 10, estimate=10, owner=Owner(user=1, group=10), index=2), 10.0)
    sched.schedule(300.0)
    keys = sched.order.keys(sched.waiting(), 400.0)
    assert isinstance(sched.order.state, state)
    assert predict_start(sched, 400.0, j1, lambda job, elapsed: job.run) == 1010.0
    assert [j.id for j in sched.waiting()] == [2, 1]
    assert sched.order.keys(sched.waiting(), 400.0) == keys and j1.start is None
    assert sched.order.usage.usage(sched.order.owner(j1)) == 2400.0  # the copy's is apart


def priorities_of(kind):
    from emulator.scheduling import priorities

    if kind == "c" and priorities.Priorities is None:
        pytest.skip("emulator.scheduling._priority is not built")
    return priorities.CPriorities if kind == "c" else priorities.PythonPriorities


# -- sched/backfill ------------------------------------------------------------------------

def backfill_case(params, second):
    """3 of 4 processors busy until 100; at 1 a 4-processor job queues, then ``second``
    (``params`` with a pass at every event: the pass's own rules)."""
    sched = Scheduler(4, order="fcfs", backfill="slurm", slurm=params)
    running = Job(0, 0, 3, 100, estimate=100, index=0)
    sched.submit(running, 0.0)
    sched.schedule(0.0)
    sched.submit(Job(1, 1, 4, 100, estimate=100, index=1), 1.0)
    sched.submit(second, 1.0)
    return [j.id for j in sched.schedule(1.0)]


def test_a_job_beyond_the_window_holds_nothing():
    long_one = Job(2, 1, 1, 200, estimate=200, index=2)  # would delay the 4-processor job
    assert backfill_case(BackfillParams(3600.0, 1.0, 500, 0.0), long_one) == []
    # its start (100) is 99 s away: a 60-s window does not keep it
    assert backfill_case(BackfillParams(60.0, 1.0, 500, 0.0), long_one.fresh()) == [2]


def test_only_max_job_test_jobs_are_tried():
    short = Job(2, 1, 1, 10, estimate=10, index=2)  # ends before 100: fits
    assert backfill_case(BackfillParams(3600.0, 1.0, 2, 0.0), short) == [2]
    assert backfill_case(BackfillParams(3600.0, 1.0, 1, 0.0), short.fresh()) == []


def test_times_are_planned_at_the_resolution():
    # 110 s from 1 ends at 111, after the running job's end (100): not at 1-s resolution;
    # at 60 s the running job ends at 121 in the plan and the job takes 120 s: it fits
    job = Job(2, 1, 1, 110, estimate=110, index=2)
    assert backfill_case(BackfillParams(3600.0, 1.0, 500, 0.0), job) == []
    assert backfill_case(BackfillParams(3600.0, 60.0, 500, 0.0), job.fresh()) == [2]


def test_between_backfill_passes_only_the_main_scheduler_starts_jobs():
    """bf_interval 30: 3 of 4 processors busy until 100; at 1 a 4-processor job queues, then
    a 1-processor job of 10 s that fits beside it. The main scheduler stops at the blocked
    head; the short job waits for the pass at 30. At 100 the head starts at once (the main
    scheduler, at the end's event). A 1-processor job arriving at 31 waits for the pass at
    60. With a pass at every event both short ones start on arrival."""
    def run(interval):
        jobs = [Job(0, 0, 3, 100), Job(1, 1, 4, 100), Job(2, 1, 1, 10), Job(3, 31, 1, 5)]
        sched = Scheduler(4, order="fcfs", backfill="slurm",
                          slurm=BackfillParams(86400.0, 1.0, 500, interval))
        return [j.start for j in simulate(jobs, sched).jobs]

    assert run(30.0) == [0, 100, 30, 60]
    assert run(0.0) == [0, 100, 1, 31]
    assert run(7.0) == [0, 100, 7, 35]


@pytest.mark.parametrize("seed", range(4))
def test_off_the_backfill_grid_only_jobs_in_priority_order_start(seed):
    """FCFS with bf_interval 60 on random jobs: a job that starts off the 60-s grid of
    passes was started by the main scheduler, so every job ahead of it had started by then;
    jobs do start both ways."""
    jobs = whole_second_jobs(seed)
    for j in jobs:
        j.submit += 7  # off the grid
    done = simulate(jobs, Scheduler(32, order="fcfs", backfill="slurm",
                                    slurm=BackfillParams(86400.0, 60.0, 500, 60.0))).jobs
    off = [j for j in done if j.start % 60]
    assert off and len(off) < len(done)
    for j in off:
        assert all(i.start <= j.start for i in done if (i.submit, i.index) < (j.submit, j.index))


def whole_second_jobs(seed, n=300):
    rng = np.random.default_rng(seed)
    submit = np.cumsum(rng.exponential(30.0, n)).round()
    return [Job(i, float(submit[i]), int(rng.choice([1, 2, 4, 8, 16, 32])),
                float(rng.integers(1, 3000)), owner=Owner(user=int(rng.integers(5)), group=0),
                index=i)
            for i in range(n)]


@pytest.mark.parametrize("order_name", ["fcfs", "fairshare"])
@pytest.mark.parametrize("seed", range(5))
def test_unbounded_slurm_backfill_starts_jobs_as_conservative_backfilling(order_name, seed):
    """With no window, no test limit, a 1-s resolution and exact estimates, the plan made
    again at every pass is the one conservative backfilling keeps."""
    jobs = whole_second_jobs(seed)
    unbounded = BackfillParams(math.inf, 1.0, 10 ** 9, 0.0)  # a pass at every event
    slurm = simulate(jobs, Scheduler(32, order=order_name, backfill="slurm",
                                     slurm=unbounded)).jobs
    conservative = simulate(jobs, Scheduler(32, order=order_name,
                                            backfill="conservative")).jobs
    assert [j.start for j in slurm] == [j.start for j in conservative]
    easy = simulate(jobs, Scheduler(32, order=order_name, backfill="easy")).jobs
    assert [j.start for j in slurm] != [j.start for j in easy]  # the case is not trivial


def test_with_early_ends_slurm_plans_again_where_conservative_compresses():
    """Jobs ending before their estimate: conservative backfilling never moves a job after
    its first reservation; Slurm's plan, made from scratch, may."""
    jobs = whole_second_jobs(0)
    for j in jobs:
        j.requested = j.run * 3
    unbounded = BackfillParams(math.inf, 1.0, 10 ** 9, 0.0)  # a pass at every event
    run = {rule: simulate(jobs, Scheduler(32, order="fcfs", backfill=rule, slurm=unbounded),
                          estimator=estimator("requested")).jobs
           for rule in ("slurm", "conservative")}
    assert [j.start for j in run["slurm"]] != [j.start for j in run["conservative"]]
    assert all(j.start <= j.reserved for j in run["conservative"] if j.reserved is not None)


def test_schedule_reads_a_sites_slurm_conf_and_writes_sprio(tmp_path, capsys):
    conf, assoc = tmp_path / "slurm.conf", tmp_path / "assoc.txt"
    conf.write_text(CONF)
    assoc.write_text(ASSOC)
    out = tmp_path / "out"
    assert main(["schedule", "nasa", "--slurm-conf", str(conf), "--associations", str(assoc),
                 "--compress-arrivals", "1.93", "--out", str(out), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "multifactor+slurm:" in captured.out
    assert captured.err.count("not modelled") == 1 and "ClusterName" in captured.err
    lines = (out / "sprio.csv").read_text().splitlines()
    assert lines[0].startswith("job,user,account,priority,age,fairshare,job_size")
    assert len(lines) == 18239 + 1
    assert main(["schedule", "nasa", "--backfill", "slurm", "--out", str(tmp_path / "o")]) == 2
    assert "needs --slurm-conf" in capsys.readouterr().err


@pytest.mark.parametrize("resolution", [0.0, 1.0, 60.0])
def test_a_profile_from_running_jobs_in_c_is_the_numpy_reference(resolution):
    """Ends rounded up to the resolution from now (some overdue, some equal after rounding),
    as Slurm's pass builds its plan; a list out of end order is refused."""
    from emulator.scheduling.profile import Profile
    from emulator.scheduling.pyprofile import PyProfile

    if Profile is PyProfile:
        pytest.skip("the C profile is not built")
    rng = np.random.default_rng(int(resolution))
    ends = sorted(float(e) for e in rng.integers(0, 900, 40)) + [1000.5]
    running = [(end, i, Job(i, 0, int(rng.integers(1, 9)), 1)) for i, end in enumerate(ends)]
    now = 100.25
    c, py = (kind.from_running(now, 3, running, resolution) for kind in (Profile, PyProfile))
    assert list(c.times) == list(py.times) and list(c.free) == list(py.free)
    assert c.times[0] == now and c.free[-1] == 3 + sum(job.procs for _, _, job in running)
    if resolution:
        assert all((t - now) % resolution == 0 for t in c.times)
        assert len(c.times) < len(ends)  # ends met on the grid
    with pytest.raises(ValueError, match="end order"):
        Profile.from_running(now, 3, running[::-1], resolution)


@pytest.mark.parametrize("seed", range(10))
def test_the_plan_in_c_is_the_numpy_reference(seed):
    from emulator.scheduling.profile import Profile
    from emulator.scheduling.pyprofile import PyProfile

    if Profile is PyProfile:
        pytest.skip("the C profile is not built")
    rng = np.random.default_rng(seed)
    releases = [(float(rng.integers(1, 500)), int(rng.integers(1, 6))) for _ in range(8)]
    queue = []
    for i in range(60):
        job = Job(i, 0, int(rng.integers(1, 17)), 10.0, estimate=float(rng.integers(1, 900)))
        if rng.random() < 0.2:
            job.start = 0.0  # started, still in the queue: skipped
        if rng.random() < 0.2:
            job.reserved = 7.0  # reserved at an earlier pass: kept
        queue.append(((i,), job))
    window, resolution, limit = [(math.inf, 1.0, 10 ** 6), (300.0, 60.0, 25),
                                 (120.0, 30.0, 5)][seed % 3]
    copies = [[(key, _copy_of(job)) for key, job in queue] for _ in range(2)]
    got = [Profile(0.0, 6, releases).plan(copies[0], 0.0, 6, 1, window, resolution, limit),
           PyProfile(0.0, 6, releases).plan(copies[1], 0.0, 6, 1, window, resolution, limit)]
    assert [j.id for j in got[0]] == [j.id for j in got[1]]
    reserved = [[j.reserved for _, j in copy] for copy in copies]
    assert reserved[0] == reserved[1]
    assert got[0] or any(r not in (None, 7.0) for r in reserved[0])  # the plan did something


def _copy_of(job):
    copy = job.fresh()
    copy.start, copy.reserved = job.start, job.reserved
    return copy


@pytest.mark.parametrize("seed", range(12))
def test_fair_tree_in_numpy_ranks_as_the_walk_does(seed):
    from emulator.scheduling.slurmconf import Associations
    from emulator.scheduling.slurmshare import (DecayedUsage, ShareTree,
                                                fair_tree_two_levels, fair_tree_walk)

    rng = np.random.default_rng(seed)
    accounts = {f"a{k}": ("root", int(rng.integers(1, 5))) for k in range(int(rng.integers(1, 6)))}
    users = {(a, f"u{k}"): int(rng.integers(0, 4)) for k in range(30)
             for a in [list(accounts)[int(rng.integers(len(accounts)))]]}
    users[("root", "root")] = 1
    tree = ShareTree(Associations(accounts, users))
    usage = DecayedUsage(tree)
    for node in tree.users:
        if rng.random() < 0.7:  # some users never ran: Level Fairshare infinite, ties
            usage._credit(node, float(rng.choice([100.0, 250.0, 1000.0])), 0)
    fast = fair_tree_two_levels(tree, usage)
    assert fast == fair_tree_walk(tree, usage)
    assert len(set(fast.values())) > 3
    deeper = ShareTree(Associations({**accounts, "sub": ("a0", 1)}, {("sub", "x"): 1}))
    assert fair_tree_two_levels(deeper, DecayedUsage(deeper)) is None


def random_associations(rng):
    """Accounts under root and 30 users under them (none right under root)."""
    from emulator.scheduling.slurmconf import Associations

    accounts = {f"a{k}": ("root", int(rng.integers(1, 5))) for k in range(int(rng.integers(1, 6)))}
    users = {(a, f"u{k}"): int(rng.integers(0, 4)) for k in range(30)
             for a in [list(accounts)[int(rng.integers(len(accounts)))]]}
    return Associations(accounts, users)


SHAPES = ("two levels", "a user under root", "deeper", "classic")


def random_site(rng, shape):
    """A random association tree of ``shape`` and a config to go with it."""
    from emulator.scheduling.slurmconf import Associations

    accounts = {f"a{k}": ("root", int(rng.integers(1, 5))) for k in range(int(rng.integers(1, 6)))}
    if shape == "deeper":
        accounts["sub"] = ("a0", 2)
        accounts["subsub"] = ("sub", 1)
    users = {(a, f"u{k}"): int(rng.integers(0, 4)) for k in range(20)
             for a in [list(accounts)[int(rng.integers(len(accounts)))]]}
    if shape == "a user under root":
        users[("root", "root")] = 1
    weights = {"age": int(rng.choice([0, 1000])), "fairshare": int(rng.choice([0, 1, 10000])),
               "job_size": int(rng.choice([0, 1000])), "partition": 0, "qos": 0}
    config = SlurmConfig(weights=weights, max_age_seconds=float(rng.choice([0.0, 900.0])),
                         calc_period_seconds=float(rng.choice([60.0, 300.0])),
                         decay_half_life_seconds=float(rng.choice([0.0, 700.0, 86400.0])),
                         flags=frozenset({"NO_FAIR_TREE"}) if shape == "classic" else frozenset())
    return config, Associations(accounts, users)


def random_jobs(rng, count, associations):
    """Jobs of the file's users and of users it does not know (the tree grows)."""
    known = list(associations.users)
    jobs = []
    for i in range(count):
        if rng.random() < 0.8:
            account, user = known[int(rng.integers(len(known)))]
        else:
            account, user = f"g{int(rng.integers(3))}", f"new{int(rng.integers(8))}"
        jobs.append(Job(i, float(rng.integers(0, 20_000)), int(rng.integers(1, 33)),
                        float(rng.integers(1, 3000)), requested=float(rng.integers(1, 4000)),
                        owner=Owner(user=user, group=account), index=i))
    return jobs


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", range(6))
def test_priorities_in_c_are_the_python_references_number_for_number(shape, seed):
    """The same random stream of submissions, starts, ends and questions at rising times to
    both: every key, factor, start's factor and association's usage equal to the bit."""
    from emulator.scheduling import priorities

    c_kind, py_kind = priorities_of("c"), priorities.PythonPriorities
    rng = np.random.default_rng(seed)
    config, associations = random_site(rng, shape)
    orders = [Multifactor(config, 64, associations, priorities=k) for k in (c_kind, py_kind)]
    jobs = sorted(random_jobs(rng, 120, associations), key=lambda j: j.submit)
    waiting, running, asked = [], [], 0
    for job in jobs:
        now = job.submit
        if rng.random() < 0.3:  # a period sorted with nothing waiting, ticks before now
            earlier = now - float(rng.integers(0, 2000))
            for o in orders:
                o.keys([], earlier)
        got = [(o.key(job, now), o.keys(waiting, now)) for o in orders]
        assert got[0] == got[1]
        waiting.append(job)
        if rng.random() < 0.5 and waiting:  # one starts
            j = waiting.pop(int(rng.integers(len(waiting))))
            for o in orders:
                o.started(j, now)
            running.append(j)
        if rng.random() < 0.4 and running:  # one ends
            j = running.pop(int(rng.integers(len(running))))
            for o in orders:
                o.finished(j, now)
        nodes = [o.tree.index for o in orders]
        assert list(nodes[0]) == list(nodes[1])
        for node in nodes[0]:
            usages = [o.usage.usage(node) for o in orders]
            assert usages[0] == usages[1], (node, usages)
            if node[0] == "user":
                factors = [o.fairshare(node, now) for o in orders]
                assert factors[0] == factors[1], (node, factors)
                asked += 1
    assert [o.at_start for o in orders][0] == [o.at_start for o in orders][1]
    assert orders[0].usage.tick > 2 and asked > 500
    assert len(orders[0].tree.index) > len(associations.users) + len(associations.accounts)


@pytest.mark.parametrize("now, period", [(0.3, 0.1), (0.7, 0.1), (1e16 + 2, 3.0), (-5.0, 300.0),
                                         (299.99999999999994, 300.0), (9e5, 300.0)])
def test_the_tick_in_c_is_pythons_floor_division(now, period):
    from emulator.scheduling import priorities

    priorities_of("c")
    state = priorities.Priorities(period, 0.0, True, 1.0, 1.0, 1.0)
    state.advance(now)
    assert state.tick == max(0, int(now // period))


@pytest.mark.parametrize("backfill", ["easy", "conservative", "slurm"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", range(3))
def test_schedules_with_priorities_in_c_are_the_python_references(backfill, shape, seed):
    """A random trace on 64 processors under each backfill: the C state (the queue sorted in
    C at each period) and the Python reference (sorted by its keys) start every job at the
    same instant, with the same factors at its start."""
    from emulator.scheduling import priorities

    rng = np.random.default_rng(100 + seed)
    config, associations = random_site(rng, shape)
    jobs = random_jobs(rng, 400, associations)
    runs = []
    for kind in (priorities_of("c"), priorities.PythonPriorities):
        order = Multifactor(config, 64, associations, priorities=kind)
        sim = simulate(jobs, Scheduler(64, order=order, backfill=backfill),
                       estimator=estimator("requested"), kill_at_requested=True)
        runs.append(([(j.start, j.end) for j in sim.jobs], order.at_start))
    assert runs[0] == runs[1]
    waits = [start - job.submit for job, (start, _) in zip(jobs, runs[0][0])]
    assert sum(w > 0 for w in waits) > 50  # a queue to sort


def test_a_priority_too_large_to_keep_whole_is_named_with_its_value():
    """PyErr_Format has no %g: the message said 'a priority of %g'."""
    from emulator.scheduling import priorities

    priorities_of("c")
    state = priorities.Priorities(300.0, 0.0, True, 1.0, 0.0, 1.0)
    state.add_node(-1, 1.0, False)
    state.add_node(0, 1.0, True)
    slot = state.enter(0.0, 1e20, 1)
    with pytest.raises(ValueError, match=r"^a priority of 1e\+20 cannot be kept whole$"):
        state.key(slot, 10.0)


def test_a_resolution_far_above_the_run_times_still_keeps_jobs_within_the_machine():
    """Found by fuzzing slurm.conf (bf_resolution=1e20): a run time far below the resolution
    rounded down to 0 (ceil of 1e-10 less the tolerance), so a job 'fitted' where no
    processors were free. A positive time now rounds up to at least one step."""
    from emulator.scheduling.resolution import round_up

    assert round_up(100.0, 1e12) == 1e12 and round_up(0.0, 1e12) == 0.0
    jobs = whole_second_jobs(3)
    params = BackfillParams(math.inf, 1e12, 10 ** 9, 0.0)
    sim = simulate(jobs, Scheduler(32, order="fcfs", backfill="slurm", slurm=params))
    events = sorted([(j.start, j.procs) for j in sim.jobs] +
                    [(j.start + j.run, -j.procs) for j in sim.jobs])
    busy = 0
    for _, procs in events:  # at a tie, ends (negative) first
        busy += procs
        assert busy <= 32

"""Queue orders as plug-ins (built-in, a user's function or class, fair share) under each
backfilling rule, and archive traces loaded as they are."""

import copy
import gzip

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.cli import main
from emulator.errors import InputFileError, UserError
from emulator.scheduling.job import Job, Owner, compress_arrivals, jobs_from_trace
from emulator.scheduling.multifactor import Multifactor
from emulator.scheduling.orders import FairShare, FairShareSettings, Order, make_order
from emulator.scheduling.policyfile import (Credential, SitePolicy, policy_from_dict,
                                            policy_from_maui)
from emulator.scheduling.scheduler import Scheduler
from emulator.scheduling.simulate import simulate
from emulator.scheduling.slurmconf import SlurmConfig
from emulator.workload.swf import prepare, read_swf
from emulator.workload.traces import resolve_trace

# 4 processors; (submit, procs, run), ids 1.. in row order. Hand-checked under SJF:
# t=0 job 1 (3 procs, 10 s) starts; job 2 (4 procs, 2 s) at 1 cannot; job 3 (1 proc, 5 s)
# at 2 and job 4 (4 procs, 1 s) at 3 queue behind it (SJF: 4, 2, 3).
# Without backfilling nothing passes the blocked head: 4 at 10, 2 at 11, 3 at 13.
# With EASY, job 3 ends (7) before the head's reservation (10): it starts at 2.
SMALL = [(0, 3, 10), (1, 4, 2), (2, 1, 5), (3, 4, 1)]
SJF_NONE = [0, 11, 13, 10]
SJF_EASY = [0, 11, 2, 10]


def jobs_of(rows):
    return [Job(i, s, p, r, index=i - 1) for i, (s, p, r) in enumerate(rows, start=1)]


def starts(jobs, scheduler):
    return [j.start for j in simulate(jobs, scheduler).jobs]


@pytest.fixture
def sjf_file(tmp_path):
    path = tmp_path / "my_order.py"
    path.write_text("def shortest(job, now):\n    return job.estimate\n")
    return str(path)


@pytest.mark.parametrize("backfill, expected", [("none", SJF_NONE), ("easy", SJF_EASY)])
def test_a_users_shortest_job_first_gives_the_hand_checked_starts(sjf_file, backfill, expected):
    got = starts(jobs_of(SMALL), Scheduler(4, order=f"{sjf_file}:shortest", backfill=backfill))
    assert got == expected
    assert starts(jobs_of(SMALL), Scheduler(4, order="sjf", backfill=backfill)) == expected


def test_a_class_order_keeps_state_through_its_hooks(tmp_path):
    path = tmp_path / "rotating.py"
    path.write_text(
        "class Fewest:\n"
        "    '''users that started fewer jobs go first'''\n"
        "    def __init__(self):\n"
        "        self.count = {}\n"
        "        self.ended = 0\n"
        "    def key(self, job, now):\n"
        "        return self.count.get(job.user, 0)\n"
        "    def started(self, job, now):\n"
        "        self.count[job.user] = self.count.get(job.user, 0) + 1\n"
        "    def finished(self, job, now):\n"
        "        self.ended += 1\n")
    # one processor: user 1 submits three jobs at 0, user 2 one at 1
    jobs = [Job(1, 0, 1, 10, owner=Owner(1), index=0), Job(2, 0, 1, 10, owner=Owner(1), index=1),
            Job(3, 0, 1, 10, owner=Owner(1), index=2), Job(4, 1, 1, 10, owner=Owner(2), index=3)]
    scheduler = Scheduler(1, order=f"{path}:Fewest", backfill="none")
    assert starts(jobs, scheduler) == [0, 20, 30, 10]  # user 2 passes user 1's second job
    assert scheduler.order.obj.ended == 4
    assert scheduler.policy == "Fewest+none"


def test_fcfs_with_easy_is_the_easy_shorthand_job_for_job():
    nasa = read_swf(resolve_trace("nasa"))
    a = b = compress_arrivals(jobs_from_trace(nasa), 1.93)  # 90% offered load: queues form
    a = simulate(a, Scheduler(128, "easy")).jobs
    b = simulate(b, Scheduler(128, order="fcfs", backfill="easy")).jobs
    assert [j.start for j in a] == [j.start for j in b]
    assert sum(j.start > j.submit for j in a) > 1000


@pytest.mark.parametrize("spec, message", [
    ("nope", "unknown order 'nope'"),
    ("missing.py:f", "no such file"),
])
def test_unknown_orders_are_refused(spec, message):
    with pytest.raises(UserError, match=message):
        make_order(spec)


def test_a_broken_order_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("def key(job, now):\n    return job.nothing\n")
    trace = tmp_path / "t.swf"
    trace.write_text("; MaxProcs: 4\n" + "\n".join(
        f"{i} {i} -1 5 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1" for i in range(1, 4)) + "\n")
    assert main(["schedule", str(trace), "--order", f"{bad}:key", "--out",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "AttributeError" in err and "job 1" in err
    assert main(["schedule", str(trace), "--order", f"{bad}:other", "--out",
                 str(tmp_path / "o")]) == 2
    assert "no function or class named 'other'" in capsys.readouterr().err


def test_fair_share_puts_the_lighter_user_first_and_decays():
    fs = FairShare(FairShareSettings(interval=100.0, depth=2, decay=0.5))
    heavy, light = Job(1, 0, 4, 100, owner=Owner(user=1)), Job(2, 0, 1, 100, owner=Owner(user=2))
    for job in (heavy, light):
        fs.started(job, 0.0)
    for job in (heavy, light):
        fs.finished(job, 100.0)
    # window 0: user 1 used 400, user 2 100 processor-seconds: 80% and 20%
    assert fs.usage(100.0)[("user", 1)] == pytest.approx(80.0)
    waiting1, waiting2 = Job(3, 100, 1, 10, owner=Owner(1)), Job(4, 100, 1, 10, owner=Owner(2))
    assert fs.key(waiting2, 100.0) < fs.key(waiting1, 100.0)
    assert fs.key(waiting2, 100.0) == pytest.approx(20.0)  # -(0 target - 20% used)
    # a running job counts up to now: user 2 runs 4 processors for 150 s in windows 1 and 2
    later = Job(5, 100, 4, 300, owner=Owner(user=2))
    fs.started(later, 100.0)
    shares = fs.usage(250.0)  # windows 2 (weight 1: 200 of user 2) and 1 (weight 0.5: 400)
    assert shares[("user", 2)] == pytest.approx(100.0)
    # user 1's usage was in window 0, which a depth of 2 forgets by window 2: it goes first
    assert fs.key(waiting1, 250.0) < fs.key(waiting2, 250.0)
    # targets: user 1 aims at 90% of the machine (it uses none now), user 2 at none
    fs.user_targets = {"1": 90.0}
    assert fs.key(waiting1, 260.0) == pytest.approx(-90.0)
    assert fs.key(waiting2, 260.0) == pytest.approx(100.0)
    # the usage ended in window 1 still counts, at half weight, in window 2
    fs.finished(later, 260.0)
    assert fs.usage(299.0)[("user", 2)] == pytest.approx(100.0)
    assert fs.usage(299.0).get(("user", 1), 0.0) == pytest.approx(0.0)
    fs.started(Job(6, 300, 2, 50, owner=Owner(1)), 300.0)  # window 3: user 2's window 2 at half
    # user 2: 240 in window 2 -> 120; user 1: 2 x 50 = 100 in window 3 at 350
    assert fs.usage(350.0)[("user", 1)] == pytest.approx(100 * 100 / 220)


def test_fair_share_settings_come_from_the_policy_file_in_mauis_words():
    site = policy_from_maui("FSINTERVAL 12:00:00\nFSDEPTH 4\nFSDECAY 0.5\nFSUSERWEIGHT 2\n"
                            "FSPOLICY DEDICATEDPS\nUSERCFG[7] FSTARGET=30\n")
    fs = make_order("fairshare", site=site)
    assert (fs.interval, fs.depth, fs.decay, fs.user_weight) == (43200.0, 4, 0.5, 2.0)
    assert fs.user_targets == {"7": 30.0}
    toml = policy_from_dict({"fairshare": {"FSINTERVAL": 3600, "FSDECAY": 0.9},
                             "users": {"7": {"fstarget": 25}}})
    assert make_order("fairshare", site=toml).interval == 3600.0
    assert site.fairshare.get("RMPOLLINTERVAL") is None and fs.period_seconds == 0.0
    polled = policy_from_maui("RMPOLLINTERVAL 00:01:30\nFSDEPTH 2\n")
    assert make_order("fairshare", site=polled).period_seconds == 90.0
    assert make_order("fairshare", site=policy_from_dict(
        {"fairshare": {"RMPOLLINTERVAL": 300}})).period_seconds == 300.0
    with pytest.raises(InputFileError, match="RMPOLLINTERVAL.*>= 0"):
        policy_from_dict({"fairshare": {"RMPOLLINTERVAL": -1}})
    with pytest.raises(InputFileError, match="FSDECAY"):
        policy_from_maui("FSDECAY 1.5\n")
    with pytest.raises(InputFileError, match="unknown key"):
        policy_from_dict({"fairshare": {"FSWHATEVER": 1}})


def test_fair_share_runs_a_trace_under_each_backfilling_rule():
    nasa = read_swf(resolve_trace("nasa")).subset(np.arange(18239) < 3000)
    for backfill in ("none", "easy", "conservative"):
        jobs = compress_arrivals(jobs_from_trace(nasa), 3)
        jobs = simulate(jobs, Scheduler(128, order="fairshare", backfill=backfill)).jobs
        assert all(j.start is not None and j.start >= j.submit for j in jobs)
        # never more processors in use than the machine has
        events = sorted([(j.start, j.procs) for j in jobs] + [(j.end, -j.procs) for j in jobs],
                        key=lambda e: (e[0], e[1]))
        assert max(np.cumsum([p for _, p in events])) <= 128


# -- archive traces as they are ---------------------------------------------------------

def swf(tmp_path, rows, header="; MaxProcs: 8\n", name="t.swf"):
    """SWF text of (submit, run, alloc procs, req procs, req time) rows."""
    lines = [f"{i} {s} -1 {r} {a} -1 -1 {p} {t} -1 1 {i % 3} 1 -1 -1 -1 -1 -1"
             for i, (s, r, a, p, t) in enumerate(rows, start=1)]
    path = tmp_path / name
    path.write_text(header + "\n".join(lines) + "\n")
    return path


ROWS = [(0, 10, 2, 2, 100), (5, -1, 2, 2, 100), (6, 10, -1, -1, 100), (7, 10, 16, 16, 100),
        (8, 20, 4, 4, -1), (9, 30, 1, 1, 50)]


def test_unschedulable_jobs_are_dropped_and_missing_requests_filled(tmp_path):
    trace = read_swf(swf(tmp_path, ROWS), check=False)
    got, notes = prepare(trace)
    assert len(got) == 3 and got.dropped == 3
    assert "dropped 3 jobs" in notes[0] and "line 3" in notes[0]  # the first: no run time
    assert got.column("requested_time").tolist() == [100, 100, 50]  # the largest request
    assert got.filled == 1 and "line 6" in notes[1]
    assert prepare(trace, fill_requested="run")[0].column("requested_time").tolist() == \
        [100, 20, 50]
    assert prepare(trace, fill_requested="3600")[0].column("requested_time").tolist() == \
        [100, 3600, 50]
    with pytest.raises(ValueError, match="fill_requested"):
        prepare(trace, fill_requested="soon")


def test_strict_refuses_the_first_job_it_would_change(tmp_path):
    trace = read_swf(swf(tmp_path, ROWS), check=False)
    with pytest.raises(InputFileError, match=r"line 3, field 4 \(run\)"):
        prepare(trace, strict=True)
    ok = read_swf(swf(tmp_path, [ROWS[0], ROWS[4]], name="u.swf"), check=False)
    with pytest.raises(InputFileError, match="line 3, field 9"):
        prepare(ok, strict=True)


def test_the_size_field_is_an_option(tmp_path):
    trace = read_swf(swf(tmp_path, [(0, 10, 4, 2, 100), (1, 10, 6, -1, 100)]), check=False)
    assert prepare(trace)[0].procs.tolist() == [2, 6]  # requested, else allocated
    assert prepare(trace, size_field="allocated")[0].procs.tolist() == [4, 6]


def test_the_schedule_command_takes_an_archive_trace_as_it_is(tmp_path, capsys):
    path = tmp_path / "t.swf.gz"
    path.write_bytes(gzip.compress(swf(tmp_path, ROWS).read_bytes()))
    out = tmp_path / "o"
    assert main(["schedule", str(path), "--estimates", "requested", "--out", str(out),
                 "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "dropped 3 jobs that cannot be scheduled" in text and "filled the requested" in text
    assert main(["schedule", str(path), "--strict", "--out", str(out)]) == 2
    assert "line 3" in capsys.readouterr().err


def reference_usage(fs, spans, now):
    """Fair share usage from scratch: every job's processor-seconds up to ``now`` (running
    ones too) in windows, the last ``depth`` decayed, as % of everyone's."""
    current = int(now // fs.interval)
    weights = {current - k: fs.decay ** k for k in range(fs.depth)}
    used = {}
    for job, start, end in spans:
        end = now if end is None else min(end, now)
        t = start
        while t < end:
            window = int(t // fs.interval)
            stop = min(end, (window + 1) * fs.interval)
            for owner in (("user", job.user), ("group", job.group), ("total",)):
                used[owner] = used.get(owner, 0.0) + weights.get(window, 0.0) * \
                    job.procs * (stop - t)
            t = stop
    everyone = used.get(("total",), 0.0)
    return {o: 100.0 * u / everyone if everyone > 0 else 0.0 for o, u in used.items()
            if o != ("total",)}


@pytest.mark.parametrize("seed", range(20))
def test_fair_share_kept_up_to_date_equals_the_usage_counted_from_scratch(seed):
    rng = np.random.default_rng(seed)
    fs = FairShare(FairShareSettings(interval=float(rng.choice([50.0, 100.0, 1000.0])),
                                     depth=int(rng.integers(1, 4)),
                                     decay=float(rng.choice([0.5, 0.9, 1.0]))))
    spans, running, now = [], [], 0.0
    for step in range(120):  # time never goes back, as in a simulation
        now += float(rng.exponential(30.0))
        if running and rng.random() < 0.45:
            k = int(rng.integers(len(running)))
            job, index = running.pop(k)
            fs.finished(job, now)
            spans[index] = (job, spans[index][1], now)
        else:
            job = Job(step, now, int(rng.integers(1, 9)), 100.0,
                      owner=Owner(user=int(rng.integers(3)), group=int(rng.integers(2))))
            fs.started(job, now)
            running.append((job, len(spans)))
            spans.append((job, now, None))
        at = now = now + float(rng.uniform(0, 20))
        want = reference_usage(fs, spans, at)
        got = fs.usage(at)
        assert {o: got.get(o, 0.0) for o in want} == pytest.approx(want, abs=1e-9), step
        if step % 7 == 0:  # and the key of a waiting job follows the same usage
            waiting = Job(-1, at, 1, 10.0, owner=Owner(user=0, group=1))
            assert fs.key(waiting, at) == pytest.approx(-(0.0 - want.get(("user", 0), 0.0)))


class PlainFairShare(Order):
    """Fair share through the plain interface alone: every key asked for, every pass."""

    name = "plain-fairshare"
    static = False

    def __init__(self, **settings):
        self.inner = FairShare(FairShareSettings(**settings))

    def key(self, job, now):
        return self.inner.key(job, now)

    def started(self, job, now):
        self.inner.started(job, now)

    def finished(self, job, now):
        self.inner.finished(job, now)


@pytest.mark.parametrize("backfill", ["none", "easy", "conservative"])
@pytest.mark.parametrize("seed", range(4))
def test_sorting_only_when_the_groups_order_changes_starts_every_job_alike(backfill, seed):
    """The ranks of the groups stand for their keys: the schedule is the one every key
    asked for at every pass gives, start time for start time."""
    rng = np.random.default_rng(seed)
    n = 400
    submit = np.cumsum(rng.exponential(40.0, n)).round()
    jobs = [Job(i, float(submit[i]), int(rng.choice([1, 2, 4, 8, 16, 32])),
                float(rng.integers(1, 2000)),
                owner=Owner(user=int(rng.integers(6)), group=int(rng.integers(3))), index=i)
            for i in range(n)]
    settings = {"interval": 3600.0, "depth": 3, "decay": 0.7, "group_weight": 0.5,
                "user_targets": {"2": 30.0}}
    fast = simulate(jobs, Scheduler(32, order=FairShare(FairShareSettings(**settings)),
                                    backfill=backfill)).jobs
    plain = simulate(jobs, Scheduler(32, order=PlainFairShare(**settings),
                                     backfill=backfill)).jobs
    assert [j.start for j in fast] == [j.start for j in plain]
    assert len({j.start - j.submit for j in fast}) > 50  # jobs waited: the order mattered


@pytest.mark.parametrize("backfill", ["none", "easy", "conservative"])
@pytest.mark.parametrize("seed", range(4))
def test_passes_left_unsorted_while_no_usages_can_meet_start_every_job_alike(backfill, seed):
    """Users alone, no targets: the queue is not even checked while no two users' usages
    can meet (FairShare.order_holds_until), and the schedule is still the one every key
    asked for at every pass gives."""
    rng = np.random.default_rng(10 + seed)
    n = 600
    submit = np.cumsum(rng.exponential(30.0, n)).round()
    jobs = [Job(i, float(submit[i]), int(rng.choice([1, 2, 4, 8, 16])),
                float(rng.integers(1, 3000)),
                owner=Owner(user=int(rng.integers(8)), group=int(rng.integers(2))), index=i)
            for i in range(n)]
    settings = {"interval": 7200.0, "depth": 4, "decay": 0.8}
    sched = Scheduler(32, order=FairShare(FairShareSettings(**settings)), backfill=backfill)
    checks, passes = [], []
    rerank, schedule = sched.order.rerank, sched.schedule
    sched.order.rerank = lambda *args: checks.append(args) or rerank(*args)
    sched.schedule = lambda now: passes.append(now) or schedule(now)
    fast = simulate(jobs, sched).jobs
    plain = simulate(jobs, Scheduler(32, order=PlainFairShare(**settings),
                                     backfill=backfill)).jobs
    assert [j.start for j in fast] == [j.start for j in plain]
    assert len({j.start - j.submit for j in fast}) > 50  # jobs waited: the order mattered
    assert 0 < len(checks) < 0.9 * len(passes)  # passes left unchecked


@pytest.mark.parametrize("seed", range(6))
def test_no_two_keys_cross_before_the_order_is_said_to_end(seed):
    """Whatever starts and ends on the machine before order_holds_until, the groups' keys
    keep the order they had, window ends included."""
    rng = np.random.default_rng(seed)
    fs = FairShare(FairShareSettings(interval=500.0, depth=3, decay=0.6))
    machine, now, running, free = 16, 0.0, [], 16
    for step in range(400):
        now += float(rng.exponential(30.0))
        if running and (free == 0 or rng.random() < 0.5):
            job = running.pop(int(rng.integers(len(running))))
            fs.finished(job, now)
            free += job.procs
        else:
            job = Job(step, now, int(rng.integers(1, free + 1)), 1.0,
                      owner=Owner(user=int(rng.integers(5)), group=0))
            fs.started(job, now)
            running.append(job)
            free -= job.procs
        if step % 5:
            continue
        groups = [(u, 0) for u in range(5)]
        keys = fs.group_keys(groups, now)
        until = fs.order_holds_until(keys, now, machine)
        assert until >= now
        order = sorted(groups, key=keys.get)
        later = now + float(rng.uniform(0, 1)) * (until - now)
        ahead = copy.deepcopy(fs, {id(j): j for j in running})
        for job in running:  # then one user takes the whole machine
            ahead.finished(job, now)
        ahead.started(Job(-1, now, machine, 1.0, owner=Owner(user=int(rng.integers(5)))), now)
        moved = ahead.group_keys(groups, later)
        assert sorted(groups, key=moved.get) == order or until == now
        assert until <= (now // 500.0 + 1) * 500.0


def test_a_what_if_start_past_the_machine_ends_the_orders_interval():
    """start_now may overcommit the machine (a placement's what-if): the users' usages then
    grow faster than the machine's processors, and the queue follows them all the same."""
    fs = FairShare(FairShareSettings(interval=1e6, depth=1))
    sched = Scheduler(4, order=fs, backfill="none")
    sched.submit(Job(0, 0.0, 4, 1000.0, estimate=1000.0, owner=Owner(user=2), index=0), 0.0)
    sched.schedule(0.0)  # user 2 holds the machine for 1000 s
    jobs = [Job(i, 100.0, procs, 500.0, estimate=500.0, owner=Owner(user=user), index=i)
            for i, (procs, user) in enumerate([(1, 1), (1, 2), (4, 1), (4, 1), (4, 1)], 1)]
    for job in jobs:
        sched.submit(job, 100.0)
    sched.schedule(100.0)
    assert [j.id for j in sched.waiting()] == [1, 3, 4, 5, 2]  # user 1 has used nothing
    for job in jobs[2:]:
        sched.start_now(job, 100.0)  # user 1 runs 12 processors: past user 2 at 150 s
    sched.schedule(110.0)
    assert [j.id for j in sched.waiting()] == [1, 2]
    sched.schedule(180.0)
    assert [j.id for j in sched.waiting()] == [2, 1]


@pytest.mark.parametrize("seed", range(8))
def test_the_check_in_c_ranks_and_bounds_as_python_does(seed):
    """FairShare.rerank in C (users alone) leaves the ranks, the keys and the end of the
    order as GroupRanks.rerank and order_holds_until do in Python, in and out of order."""
    from emulator.scheduling import orders
    from emulator.scheduling.ranks import GroupRanks

    if orders.check_ranks is None:
        pytest.skip("the C extension is not built (pip install -e .)")
    rng = np.random.default_rng(seed)
    fs = FairShare(FairShareSettings(interval=900.0, depth=2, decay=0.5))
    ranks, now, running = GroupRanks(), 0.0, []
    for step in range(300):
        now += float(rng.exponential(20.0))
        if running and rng.random() < 0.5:
            fs.finished(running.pop(int(rng.integers(len(running)))), now)
        else:
            running.append(Job(step, now, int(rng.integers(1, 5)), 1.0,
                               owner=Owner(user=int(rng.integers(6)), group=0)))
            fs.started(running[-1], now)
        groups = {(int(u), int(g)): 1 for u, g in rng.integers(0, 6, (4, 2))}
        if rng.random() < 0.3:  # a newcomer, or a rank out of order
            ranks.rank[next(iter(groups))] = float(rng.integers(-2, 3))
        python = copy.deepcopy(ranks)
        keys = fs.group_keys(groups.keys(), now)
        moved = python.rerank(keys)
        holds = fs.order_holds_until(keys, now, 16)
        assert fs.rerank(ranks, groups, now, 16) == moved
        assert (ranks.rank, ranks.key, ranks.holds_until) == (python.rank, keys, holds)


windows_of_usage = st.dictionaries(st.integers(-3, 12), st.one_of(
    st.floats(0, 1e9, allow_nan=False), st.integers(0, 10**6)), max_size=9)


@given(used=st.dictionaries(st.one_of(st.none(), st.integers(0, 5), st.text(max_size=2)),
                            windows_of_usage, max_size=6),
       window=st.integers(0, 12), depth=st.integers(1, 9),
       decay=st.floats(0.05, 1.0, allow_nan=False))
@settings(max_examples=300, deadline=None)
def test_usage_decays_in_c_as_in_python_to_the_bit(used, window, depth, decay):
    """``_fairshare.decay`` gives each owner's decayed usage as ``decayed_usage`` does, to
    the bit, and forgets the same windows and owners in place (windows of the future, and
    owners with no window, too)."""
    from emulator.scheduling import orders

    if orders.decay_usage is None:
        pytest.skip("the C extension is not built (pip install -e .)")
    weights, oldest = [decay ** k for k in range(depth)], window - depth + 1
    python = copy.deepcopy(used)
    expected = orders.decayed_usage(python, window, weights, oldest)
    got = orders.decay_usage(used, window, weights, oldest)
    assert list(got.items()) == list(expected.items())
    assert [float(v).hex() for v in got.values()] == [float(v).hex() for v in expected.values()]
    assert used == python and list(used) == list(python)


def test_usage_decay_in_c_refuses_what_is_not_usage():
    from emulator.scheduling import orders

    if orders.decay_usage is None:
        pytest.skip("the C extension is not built (pip install -e .)")
    with pytest.raises(TypeError, match="owner's usage must be a dict"):
        orders.decay_usage({1: [5.0]}, 3, [1.0], 3)
    with pytest.raises(TypeError):
        orders.decay_usage({1: {"3": 5.0}}, 3, [1.0], 3)
    with pytest.raises(TypeError):
        orders.decay_usage({1: {3: "5"}}, 3, [1.0], 3)


class SetKeys(Order):
    """Keys set by hand, recomputed every 300 s."""

    static = False
    period_seconds = 300.0

    def __init__(self):
        self.keys_now = {}

    def key(self, job, now):
        return self.keys_now[job.id]


def test_with_a_period_the_queue_is_sorted_again_only_on_its_grid():
    order = SetKeys()
    sched = Scheduler(4, order=order, backfill="none")
    order.keys_now = {0: 0, 1: 1, 2: 2}
    for i in range(3):
        sched.submit(Job(i, 0, 4, 1000, estimate=1000, index=i), 0.0)
    sched.schedule(0.0)  # job 0 takes the machine
    order.keys_now.update({1: 5})  # job 1 should now go after job 2
    sched.schedule(100.0)
    assert [j.id for j in sched.waiting()] == [1, 2]  # the sort at 0 holds until 300
    sched.schedule(299.0)
    assert [j.id for j in sched.waiting()] == [1, 2]
    sched.schedule(300.0)
    assert [j.id for j in sched.waiting()] == [2, 1]
    order.keys_now.update({1: 0})
    sched.schedule(599.0)
    assert [j.id for j in sched.waiting()] == [2, 1]
    sched.schedule(650.0)  # the first pass past the tick at 600
    assert [j.id for j in sched.waiting()] == [1, 2]


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.tuples(st.booleans(), st.dictionaries(
    st.integers(0, 7), st.integers(0, 4), min_size=1, max_size=6)), min_size=1, max_size=10))
def test_group_ranks_order_groups_as_their_keys(steps):
    """However groups arrive (rank_of) and keys change (rerank), every ranked group's rank
    orders it as its key does (equal keys, equal ranks), and rerank says True exactly when
    the ranks held did not already order the new keys."""
    from emulator.scheduling.ranks import GroupRanks

    def ordered(rank, keys):
        return all(group in rank for group in keys) and all(
            (rank[a] < rank[b]) == (keys[a] < keys[b]) and
            (rank[a] == rank[b]) == (keys[a] == keys[b]) for a in keys for b in keys)

    ranks = GroupRanks()
    for rerank, keys in steps:
        if rerank:
            already = ordered(ranks.rank, keys)
            assert ranks.rerank(keys) is not already
            assert set(ranks.rank) == set(keys)
        else:
            for group, key in keys.items():
                held = ranks.rank.get(group)
                got = ranks.rank_of(group, key)
                assert got == held if held is not None else got == ranks.rank[group]
        assert ordered(ranks.rank, ranks.key)


@pytest.mark.parametrize("backfill", ["none", "conservative"])
def test_two_users_swap_places_as_their_usage_changes(backfill):
    """User 1 runs the whole machine from 0 and queues J1 at 1; user 2, who has used
    nothing, queues J2 at 1.5. The pass then sorts the queue again, with only two groups in
    it: J2 goes first; conservative backfilling makes its reservations again (J2 at 100,
    J1 after it), and J2 starts when the machine frees."""
    sched = Scheduler(4, order="fairshare", backfill=backfill)
    first = Job(0, 0, 4, 100, estimate=100, owner=Owner(user=1))
    j1 = Job(1, 1, 4, 10, estimate=10, owner=Owner(user=1))
    j2 = Job(2, 1.5, 4, 10, estimate=10, owner=Owner(user=2))
    sched.submit(first, 0)
    assert sched.schedule(0) == [first]
    sched.submit(j1, 1)
    sched.schedule(1)
    sched.submit(j2, 1.5)
    sched.schedule(1.5)
    assert sched.waiting() == [j2, j1]
    if backfill == "conservative":
        assert (j2.slot, j1.slot) == (100, 110)
    sched.finish(first, 100)
    assert sched.schedule(100) == [j2]


def test_a_site_priority_comes_before_fair_share():
    """User 9 has the site's priority 5 and runs the whole machine: its J2 still goes
    ahead of user 1's J1, who has used nothing, at submission and after the pass sorts,
    under Maui's fair share and under Slurm's multifactor (sorted again at 300)."""
    sched = Scheduler(4, order="fairshare", backfill="easy",
                      site=SitePolicy(users={"9": Credential(priority=5)}))
    sched.submit(Job(0, 0, 4, 100, estimate=100, owner=Owner(user=9)), 0)
    sched.schedule(0)
    j1 = Job(1, 1, 4, 10, estimate=10, owner=Owner(user=1))
    j2 = Job(2, 2, 4, 10, estimate=10, owner=Owner(user=9))
    sched.submit(j1, 1)
    sched.submit(j2, 2)
    assert sched.waiting() == [j2, j1]
    sched.schedule(2)
    assert sched.waiting() == [j2, j1]
    # the same under Slurm's multifactor, when the priorities are computed again at 300
    weights = {"age": 1000, "fairshare": 10000, "job_size": 0, "partition": 0, "qos": 0}
    sched = Scheduler(4, order=Multifactor(SlurmConfig(weights=weights), 4), backfill="none",
                      site=SitePolicy(users={"9": Credential(priority=5)}))
    sched.submit(Job(0, 0, 4, 1000, estimate=1000, owner=Owner(user=9)), 0)
    sched.schedule(0)
    j1, j2 = j1.fresh(), j2.fresh()
    sched.submit(j1, 1)
    sched.submit(j2, 2)
    sched.schedule(300)
    assert sched.waiting() == [j2, j1]


def test_fair_share_charges_a_job_until_it_ends_and_reads_the_sites_settings():
    """4 processors. User 1's J0 runs 0-100, user 2's J1 100-300; J3 (user 2) queues at 50,
    J2 (user 1) at 60. At 300 user 1 has used 400 processor-seconds and user 2 800: J2
    goes first. The site's RMPOLLINTERVAL reaches the scheduler's order."""
    jobs = [Job(0, 0, 4, 100, owner=Owner(user=1)), Job(1, 0, 4, 200, owner=Owner(user=2)),
            Job(3, 50, 4, 10, owner=Owner(user=2)), Job(2, 60, 4, 10, owner=Owner(user=1))]
    done = simulate(jobs, Scheduler(4, order="fairshare", backfill="easy")).jobs
    assert [(j.id, j.start) for j in done] == [(0, 0), (1, 100), (3, 310), (2, 300)]
    site = policy_from_dict({"fairshare": {"RMPOLLINTERVAL": 300}})
    assert Scheduler(4, order="fairshare", site=site).order.period_seconds == 300


def test_a_job_of_no_length_leaves_no_usage_behind():
    """A job that ends as it starts used nothing: its user and group get no window, and
    usage() does not list them."""
    fs = FairShare(FairShareSettings(interval=100, depth=2, decay=0.5))
    empty = Job(1, 0, 4, 0, owner=Owner(user=1, group=7))
    used = Job(2, 0, 4, 50, owner=Owner(user=2, group=8))
    fs.started(used, 10.0)
    fs.started(empty, 20.0)
    fs.finished(empty, 20.0)
    fs.finished(used, 60.0)
    assert fs.used_by_user == {2: {0: 200.0}} and fs.used_by_group == {8: {0: 200.0}}
    assert fs.usage(150.0) == {("user", 2): 100.0, ("group", 8): 100.0}

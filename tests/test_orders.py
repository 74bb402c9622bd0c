"""Queue orders as plug-ins (built-in, a user's function or class, fair share) under each
backfilling rule, and archive traces loaded as they are."""

import gzip

import numpy as np
import pytest

from emulator.cli import main
from emulator.errors import InputFileError, UserError
from emulator.scheduling.job import Job, compress_arrivals, jobs_from_trace
from emulator.scheduling.orders import FairShare, make_order
from emulator.scheduling.policyfile import policy_from_dict, policy_from_maui
from emulator.scheduling.scheduler import Scheduler
from emulator.scheduling.simulate import simulate
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
    jobs = [Job(1, 0, 1, 10, user=1, index=0), Job(2, 0, 1, 10, user=1, index=1),
            Job(3, 0, 1, 10, user=1, index=2), Job(4, 1, 1, 10, user=2, index=3)]
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
    fs = FairShare(interval=100.0, depth=2, decay=0.5)
    heavy, light = Job(1, 0, 4, 100, user=1), Job(2, 0, 1, 100, user=2)
    for job in (heavy, light):
        fs.started(job, 0.0)
        fs.finished(job, 100.0)
    # window 0: user 1 used 400, user 2 100 processor-seconds: 80% and 20%
    assert fs.usage(100.0)[("user", 1)] == pytest.approx(80.0)
    waiting1, waiting2 = Job(3, 100, 1, 10, user=1), Job(4, 100, 1, 10, user=2)
    assert fs.key(waiting2, 100.0) < fs.key(waiting1, 100.0)
    # a running job counts up to now: user 2 runs 4 processors for 150 s in windows 1 and 2
    later = Job(5, 100, 4, 300, user=2)
    fs.started(later, 100.0)
    shares = fs.usage(250.0)  # windows 2 (weight 1: 200 of user 2) and 1 (weight 0.5: 400)
    assert shares[("user", 2)] == pytest.approx(100.0)
    # user 1's usage was in window 0, which a depth of 2 forgets by window 2: it goes first
    assert fs.key(waiting1, 250.0) < fs.key(waiting2, 250.0)
    # targets: at 100, user 1 aims at 90% of the machine (it used 80), user 2 at none
    fs.user_targets = {"1": 90.0}
    assert fs.key(waiting1, 100.0) == pytest.approx(-10.0)
    assert fs.key(waiting2, 100.0) == pytest.approx(20.0)


def test_fair_share_settings_come_from_the_policy_file_in_mauis_words():
    site = policy_from_maui("FSINTERVAL 12:00:00\nFSDEPTH 4\nFSDECAY 0.5\nFSUSERWEIGHT 2\n"
                            "FSPOLICY DEDICATEDPS\nUSERCFG[7] FSTARGET=30\n")
    fs = make_order("fairshare", site=site)
    assert (fs.interval, fs.depth, fs.decay, fs.user_weight) == (43200.0, 4, 0.5, 2.0)
    assert fs.user_targets == {"7": 30.0}
    toml = policy_from_dict({"fairshare": {"FSINTERVAL": 3600, "FSDECAY": 0.9},
                             "users": {"7": {"fstarget": 25}}})
    assert make_order("fairshare", site=toml).interval == 3600.0
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

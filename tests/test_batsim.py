"""Batsim workloads in and out: round trips with SWF, the same schedules, bad files in one
line naming the file, the job and the field."""

import json
import os

import numpy as np
import pytest

from emulator.cli import main
from emulator.errors import InputFileError
from emulator.scheduling.job import jobs_from_trace
from emulator.scheduling.scheduler import Scheduler
from emulator.scheduling.simulate import simulate
from emulator.workload.batsim import from_batsim, holdable, read_batsim, to_batsim
from emulator.workload.swf import read_swf
from emulator.workload.traces import resolve_trace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "traces")
ARCHIVE = sorted(os.path.join(SHARED, f) for f in os.listdir(SHARED)
                 if f.endswith((".swf.gz", ".zip"))) if os.path.isdir(SHARED) else []

WORKLOAD = {"nb_res": 4, "jobs": [
    {"id": 1, "subtime": 0, "res": 4, "walltime": 100, "profile": "a"},
    {"id": "2", "subtime": 5, "res": 2, "walltime": 10, "profile": "b"},  # killed at 10
    {"id": "w0!3", "subtime": 6, "res": 1, "profile": "a"},  # no walltime; id not a number
], "profiles": {"a": {"type": "delay", "delay": 20}, "b": {"type": "delay", "delay": 30.5}}}


def test_a_workload_reads_as_its_jobs_with_batsims_meaning():
    trace = from_batsim(WORKLOAD, "w.json")
    assert trace.max_procs == 4
    assert list(trace.column("job")) == [1, 2, 3]  # the third by its position
    assert list(trace.column("submit")) == [0, 5, 6]
    assert list(trace.column("run")) == [20, 10, 20]  # job 2 ends at its walltime
    assert list(trace.column("requested_time")) == [100, 10, -1]
    assert list(trace.procs) == [4, 2, 1]


def test_an_id_of_other_digits_is_numbered_by_its_position():
    """Found by fuzzing: a superscript two is a digit to str.isdigit() and not to float()."""
    jobs = [dict(job, id=ident) for job, ident in zip(WORKLOAD["jobs"],
                                                       ["7", "\u00b2", "\u0663"])]
    trace = from_batsim(dict(WORKLOAD, jobs=jobs), "w.json")
    assert list(trace.column("job")) == [7, 2, 3]


@pytest.mark.parametrize("path", ARCHIVE or ["nasa"], ids=os.path.basename)
def test_swf_to_batsim_to_swf_keeps_every_field(path):
    trace = read_swf(resolve_trace(path), check=False)
    trace = trace.subset(holdable(trace))
    back = from_batsim(json.loads(json.dumps(to_batsim(trace))), "rt.json")
    assert len(back) == len(trace) > 10_000
    assert np.array_equal(back.data, trace.data)
    assert back.max_procs == trace.max_procs


def test_a_batsim_workload_schedules_as_its_swf_conversion(tmp_path):
    nasa = read_swf(resolve_trace("nasa")).subset(np.arange(18239) < 4000)
    path = tmp_path / "w.json"
    path.write_text(json.dumps(to_batsim(nasa)))
    for policy in ("fcfs", "easy"):
        ran = [simulate(jobs_from_trace(t), Scheduler(128, policy)).jobs
               for t in (nasa, read_batsim(str(path)))]
        assert [j.start for j in ran[0]] == [j.start for j in ran[1]]


def test_the_commands_take_batsim_workloads(tmp_path, capsys):
    swf, js = tmp_path / "n.swf", tmp_path / "n.json"
    assert main(["workload", "convert", "nasa", "--to", "batsim", "--out", str(js)]) == 0
    assert main(["workload", "convert", str(js), "--to", "swf", "--out", str(swf)]) == 0
    assert np.array_equal(read_swf(str(swf), check=False).data,
                          read_swf(resolve_trace("nasa"), check=False).data)
    assert main(["schedule", str(js), "--policy", "easy", "--compress-arrivals", "2",
                 "--out", str(tmp_path / "s")]) == 0
    assert "mean wait 75422 s" in capsys.readouterr().out


@pytest.mark.parametrize("change, where", [
    (lambda w: w.pop("nb_res"), "nb_res: missing"),
    (lambda w: w["jobs"][1].update(res=0), "jobs[1] (id '2').res: must be > 0"),
    (lambda w: w["jobs"][0].update(subtime="soon"), "jobs[0] (id 1).subtime: must be a number"),
    (lambda w: w["jobs"][0].update(swf={"wait": float("inf")}),
     "jobs[0] (id 1).swf.wait: must be a finite number, got inf"),
    (lambda w: w["jobs"][0].update(swf={"user": float("nan")}),
     "jobs[0] (id 1).swf.user: must be a finite number, got nan"),
    (lambda w: w["jobs"][2].pop("profile"), "jobs[2]: no 'profile'"),
    (lambda w: w["jobs"][2].update(profile="zz"), "profile 'zz': is not among the profiles"),
    (lambda w: w["profiles"].update(a={"type": "parallel_homogeneous", "cpu": 1e9, "com": 0}),
     "2 job(s) have a profile that gives no run time (only 'delay' profiles do): 2 job(s) of "
     "profile 'a'"),
])
def test_bad_workloads_name_the_field(tmp_path, capsys, change, where):
    doc = json.loads(json.dumps(WORKLOAD))
    change(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputFileError, match=None) as error:
        read_batsim(str(path))
    assert where in str(error.value) and str(error.value).startswith(str(path))
    assert main(["schedule", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and where in err


def test_a_truncated_workload_is_named_with_its_line(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(WORKLOAD, indent=1)[:200])
    with pytest.raises(InputFileError, match=r"cut.json: line \d+: not JSON"):
        read_batsim(str(path))


# -- batsim_jobs.csv -------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from emulator.scheduling.batsim_out import allocate_processors, batsim_jobs_csv  # noqa: E402
from emulator.scheduling.job import Job  # noqa: E402

rows = st.lists(st.tuples(st.integers(0, 40), st.integers(1, 8), st.integers(0, 30)),
                min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(rows=rows, processors=st.integers(1, 8),
       policy=st.sampled_from(["fcfs", "lwf", "easy", "conservative"]))
def test_no_processor_serves_two_jobs_at_once(rows, processors, policy):
    jobs = [Job(i + 1, s, min(p, processors), r, index=i) for i, (s, p, r) in enumerate(rows)]
    ran = simulate(jobs, Scheduler(processors, policy)).jobs
    allocation = allocate_processors(ran, processors)
    for j, procs in zip(ran, allocation):
        assert len(procs) == j.procs == len(set(procs))
        assert all(0 <= p < processors for p in procs)
    for a, (j, pa) in enumerate(zip(ran, allocation)):
        for k, pk in zip(ran[a + 1:], allocation[a + 1:]):
            overlap = j.start < k.end and k.start < j.end and \
                j.end > j.start and k.end > k.start  # both of some length
            assert not (overlap and set(pa) & set(pk)), (j, k)


def reference_runs(jobs, processors):
    """The sweep as first written in Python: the oracle of the C one."""
    import bisect

    events = []
    for k, j in enumerate(jobs):
        if j.start is not None:
            events.append((j.end, 0, k))
            events.append((j.start, 2 if j.end <= j.start else 1, k))
    events.sort()
    free, left, held = [[0, processors]], processors, [[] for _ in jobs]

    def lowest(need):
        out = []
        for first, count in free:
            if need <= 0:
                break
            out.append((first, min(count, need)))
            need -= count
        return out

    for t, kind, k in events:
        need = jobs[k].procs
        if kind == 0:
            for first, count in held[k]:
                i = bisect.bisect_left(free, [first, 0])
                if i > 0 and free[i - 1][0] + free[i - 1][1] == first:
                    i -= 1
                    free[i][1] += count
                else:
                    free.insert(i, [first, count])
                if i + 1 < len(free) and free[i][0] + free[i][1] == free[i + 1][0]:
                    free[i][1] += free.pop(i + 1)[1]
                left += count
        elif kind == 2:
            held[k] = lowest(need) if need <= left else [(0, need)]
        elif need > left:
            raise ValueError(f"job {jobs[k].id} starts at {t:g} s on {need} processors, and "
                             f"only {left} of {processors} are free")
        else:
            held[k] = lowest(need)
            for first, count in held[k]:
                if free[0][1] == count:
                    free.pop(0)
                else:
                    free[0][0] += count
                    free[0][1] -= count
            left -= need
    return held


def _outcome(allocate, jobs, processors):
    try:
        return allocate(jobs, processors)
    except ValueError as e:
        return str(e)


placed = st.lists(st.tuples(st.none() | st.integers(0, 30), st.integers(0, 12),
                            st.integers(1, 8)), min_size=1, max_size=30)


@settings(max_examples=400, deadline=None)
@given(placed=placed, processors=st.integers(1, 10))
def test_the_sweep_gives_the_runs_the_python_sweep_gave(placed, processors):
    from emulator.scheduling.batsim_out import allocate_runs

    jobs = []
    for i, (start, length, procs) in enumerate(placed):  # any schedule, overfull ones too
        job = Job(i + 1, 0, procs, float(length), index=i)
        if start is not None:
            job.start, job.end = float(start), float(start + length)
        jobs.append(job)
    expected = _outcome(reference_runs, jobs, processors)
    assert _outcome(allocate_runs, jobs, processors) == expected
    if not isinstance(expected, str):  # the same runs as Batsim's text, made in C
        from emulator.scheduling.batsim_out import _runs, interval_text
        from emulator.scheduling.job import attribute_values

        texts = _runs(jobs, *(attribute_values(jobs, name) for name in ("start", "end", "procs")),
                      processors, as_text=True)
        assert texts == [interval_text([p for first, count in runs
                                        for p in range(first, first + count)])
                         for runs in expected]


def test_evalys_loads_the_schedule_as_we_wrote_it(tmp_path):
    evalys = pytest.importorskip("evalys.jobset", reason="evalys comes with the test extra")
    assert main(["schedule", "nasa", "--policy", "easy", "--compress-arrivals", "2",
                 "--out", str(tmp_path)]) == 0
    jobset = evalys.JobSet.from_csv(str(tmp_path / "batsim_jobs.csv"))
    assert len(jobset.df) == 18239 and jobset.MaxProcs == 128
    assert jobset.df["waiting_time"].mean() == pytest.approx(75422.47, abs=0.01)
    assert (jobset.df["proc_alloc"] == jobset.df["requested_number_of_resources"]).all()


def test_the_evalys_plot_script_draws_one_day_and_refuses_an_empty_one(tmp_path):
    pytest.importorskip("evalys.jobset", reason="evalys comes with the test extra")
    import subprocess
    import sys

    assert main(["schedule", "nasa", "--policy", "easy", "--out", str(tmp_path)]) == 0
    script = [sys.executable, os.path.join(ROOT, "scripts", "plot_evalys"),
              str(tmp_path / "batsim_jobs.csv")]
    done = subprocess.run(script + ["--day", "2", "--out", str(tmp_path / "e.png")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    starts = [j for j in csv_rows(tmp_path / "batsim_jobs.csv")
              if 2 * 86400 <= float(j["starting_time"]) < 3 * 86400]
    assert done.stdout.startswith(f"{len(starts)} jobs started on day 2") and len(starts) > 10
    assert (tmp_path / "e.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    empty = subprocess.run(script + ["--day", "400", "--out", str(tmp_path / "x.png")],
                           capture_output=True, text=True, timeout=300)
    assert empty.returncode == 2 and "no job starts on day 400" in empty.stderr
    assert not (tmp_path / "x.png").exists()


def csv_rows(path):
    import csv

    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_batsim_rows_write_whole_numbers_without_a_point_and_the_rest_exactly():
    done, later, never = Job(7, 0.5, 2, 10.0), Job(8, 3, 1, 0.0), Job(9, 4, 1, 5.0)
    done.start, done.end, later.start, later.end = 1.0, 11.25, 11.0, 11.0
    lines = batsim_jobs_csv([done, later, never], 4).splitlines()
    assert lines[1:] == ["7,w0,,0.5,2,-1,1,COMPLETED_SUCCESSFULLY,1,10.25,11.25,0.5,10.75,"
                         "1.048780487804878,0-1,,",
                         "8,w0,,3,1,-1,1,COMPLETED_SUCCESSFULLY,11,0,11,8,8,,2,,"]


def test_a_killed_job_is_reported_as_batsim_reports_it():
    (job,) = simulate([Job(1, 0, 2, 50.0, requested=20.0)], Scheduler(4, "fcfs"),
                      kill_at_requested=True).jobs
    header, row = batsim_jobs_csv([job], 4).splitlines()
    cells = dict(zip(header.split(","), row.split(",")))
    assert cells["final_state"] == "COMPLETED_WALLTIME_REACHED" and cells["success"] == "0"
    assert cells["execution_time"] == "20" and cells["allocated_resources"] == "0-1"


def test_a_job_on_many_scattered_processors_is_written_run_by_run():
    """1,024 one-processor jobs from 0; the odd ones end at 1, and a job of 512 then takes
    the ids they held: 512 runs of one id, joined to none (2.4 KB of text)."""
    from emulator.scheduling.batsim_out import _runs
    from emulator.scheduling.job import attribute_values

    jobs = [Job(i + 1, 0, 1, 1.0 if i % 2 else 5.0, index=i) for i in range(1024)]
    jobs.append(Job(1025, 0, 512, 4.0, index=1024))
    for j in jobs[:1024]:
        j.start, j.end = 0.0, j.run
    jobs[1024].start, jobs[1024].end = 1.0, 5.0
    texts = _runs(jobs, *(attribute_values(jobs, name) for name in ("start", "end", "procs")),
                  1024, as_text=True)
    assert texts[1024] == " ".join(str(p) for p in range(1, 1024, 2))
    assert texts[:3] == ["0", "1", "2"]

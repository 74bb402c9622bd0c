"""Load sharing across grid sites (England and Weissman): migration rules on hand-made queues, the
migration time in a remote job's slowdown, paired-t intervals against scipy, the command,
bad grid files, and the same numbers from one process and from two MPI ranks."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from emulator.cli import main
from emulator.grid.experiment import metrics, paired_t
from emulator.grid.gridfile import Grid, Site
from emulator.grid.migration import (QueueStatus, choose_by_forecast, choose_by_queue,
                                     parse_target, queue_status)
from emulator.grid.simulate import run_time_source, simulate_grid
from emulator.scheduling.job import Job
from emulator.scheduling.scheduler import Scheduler

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def job(i, submit, procs, run, home=0, migratable=True, data_bytes=0.0):
    j = Job(i, submit, procs, run, estimate=run)
    j.info = {"home": home, "migratable": migratable, "data_bytes": data_bytes}
    return j


def test_no_migration_from_an_empty_queue():
    statuses = [QueueStatus(0, 0, 128), QueueStatus(0, 0, 128)]
    assert choose_by_queue(0, statuses, "shortest-queue") is None


def test_shortest_and_weighted_queue_pick_different_sites():
    # home: 3 jobs asking 96 of 128; A: 1 job asking 512 of 512 (weighted 1.0);
    # B: 2 jobs asking 64 of 512 (weighted 0.125)
    statuses = [QueueStatus(3, 96, 128), QueueStatus(1, 512, 512), QueueStatus(2, 64, 512)]
    assert choose_by_queue(0, statuses, "shortest-queue") == 1
    assert choose_by_queue(0, statuses, "weighted-queue") == 2
    # a remote site is chosen only if it is more favourable than home
    assert choose_by_queue(0, [QueueStatus(1, 8, 128), QueueStatus(1, 8, 128)],
                           "shortest-queue") is None
    # a site the job does not fit is never chosen
    assert choose_by_queue(0, statuses, "weighted-queue", fits=[True, True, False]) is None


def test_queue_status_counts_waiting_jobs_only():
    s = Scheduler(8, "fcfs")
    for j in (job(1, 0, 8, 100), job(2, 0, 4, 10), job(3, 0, 2, 10)):
        s.submit(j, 0)
    s.schedule(0)
    assert queue_status(s) == QueueStatus(2, 6, 8)


def test_migration_time_is_part_of_a_remote_jobs_slowdown():
    # site 0 is busy until 1000 and has a job queued; job 3 arrives there at 10 and moves to
    # the idle site 1: 5 MB at 40 Mbit/s take 1 s, so it starts at 11
    jobs = [job(1, 0, 8, 1000, migratable=False), job(2, 5, 8, 100, migratable=False),
            job(3, 10, 4, 50, data_bytes=5e6)]
    grid = Grid("g", [Site("a", 8, "nasa"), Site("b", 8, "nasa")])
    given = [(j.start, dict(j.info)) for j in jobs]
    ran, _ = simulate_grid(jobs, [Scheduler(8, "easy"), Scheduler(8, "easy")],
                           "shortest-queue", lambda a, b, t: 40.0)
    assert [(j.start, j.info) for j in jobs] == given  # the jobs given are left alone
    jobs, moved = ran, ran[2]
    assert moved.info["site"] == 1 and moved.info["migration_seconds"] == pytest.approx(1.0)
    assert moved.start == pytest.approx(11.0)
    m = metrics(grid, jobs, 0.0)
    assert m["sites"]["b"]["remote"] == pytest.approx((1.0 + 50) / 50)
    assert m["sites"]["a"]["local"] == pytest.approx(np.mean([1.0, (995 + 100) / 100]))
    assert m["moved_jobs"] == 1


def test_predicted_start_moves_only_where_the_job_would_start_earlier():
    home, remote = Scheduler(8, "easy"), Scheduler(8, "easy")
    for j in (job(1, 0, 8, 1000), job(2, 0, 8, 100)):
        home.submit(j, 0)
    home.schedule(0)
    busy = job(5, 0, 8, 400)
    remote.submit(busy, 0)
    remote.schedule(0)
    arriving = job(3, 10, 4, 50)
    # home: after job 2, at 1100; remote: at 400 (+ 30 s of migration still earlier)
    assert choose_by_forecast(0, [home, remote], 10, arriving, [0, 30], [True, True]) == 1
    # a migration that takes longer than waiting at home keeps it home
    assert choose_by_forecast(0, [home, remote], 10, arriving, [0, 2000], [True, True]) is None


def test_target_names_and_their_run_time_sources():
    assert parse_target("predicted-start") == ("predicted-start", "requested")
    assert parse_target("predicted-start:last2") == ("predicted-start", "last2")
    assert parse_target("weighted-queue") == ("weighted-queue", None)
    for bad in ("predicted-start:oracle", "weighted-queue:last2", "nearest"):
        with pytest.raises(ValueError, match="unknown|takes no"):
            parse_target(bad)


def test_last2_forecasts_from_the_users_completed_jobs_of_their_home_site():
    run_of, observe = run_time_source("last2", 2)
    j = job(1, 0, 4, 50)
    j.estimate, j.user = 1000, 7
    assert run_of(j, 0.0) == 1000  # no history yet: the requested time
    for run, home in ((100, 0), (300, 0), (10, 1)):
        done = job(9, 0, 4, run, home=home)
        done.user = 7
        observe(done)
    assert run_of(j, 0.0) == pytest.approx(200)  # site 1's user 7 is someone else
    j.estimate = 150
    assert run_of(j, 0.0) == 150  # never beyond the requested time
    requested, _ = run_time_source("requested", 2)
    assert requested(j, 0.0) == 150


def test_predicted_start_with_learned_run_times_sees_a_queue_drain_early():
    # home: user 1 runs one job of 8 processors and has one queued, each asking 1000 s,
    # but their last two jobs ran 20 s; remote: user 2 (no history) runs one asking 500 s.
    # By requested times home frees at 2000 and the job moves; by last2 at 40: it stays
    def sites():
        home, remote = Scheduler(8, "easy"), Scheduler(8, "easy")
        for i, site, requested, user in ((1, home, 1000, 1), (2, home, 1000, 1),
                                         (5, remote, 500, 2)):
            j = job(i, 0, 8, 20, home=0 if site is home else 1)
            j.estimate, j.user = requested, user
            site.submit(j, 0)
            site.schedule(0)
        return [home, remote]

    run_of, observe = run_time_source("last2", 2)
    for _ in range(2):
        done = job(99, 0, 8, 20)
        done.user = 1
        observe(done)
    arriving = job(3, 10, 4, 50)
    arriving.estimate = 100
    assert choose_by_forecast(0, sites(), 10, arriving, [0, 0], [True, True], run_of) is None
    assert choose_by_forecast(0, sites(), 10, arriving, [0, 0], [True, True]) == 1
    requested, _ = run_time_source("requested", 2)
    assert choose_by_forecast(0, sites(), 10, arriving, [0, 0], [True, True], requested) == 1


def test_paired_t_matches_scipy():
    rng = np.random.default_rng(4)
    x, y = rng.normal(50, 10, 20), rng.normal(40, 10, 20)
    mean, low, high = paired_t(x, y, 0.90)
    ci = stats.ttest_rel(x, y).confidence_interval(0.90)
    assert mean == pytest.approx(np.mean(x - y))
    assert (low, high) == pytest.approx((ci.low, ci.high))


GRID = """[grid]
jobs_per_site = 300
data_mb = [1, 100, 1000]
bandwidth_mbps = 40

[[sites]]
name = "a"
processors = 128
workload = "nasa"
load = 0.9

[[sites]]
name = "b"
processors = 128
workload = "nasa"
load = 0.7
"""


def test_grid_command_writes_the_documented_summary(tmp_path):
    path = tmp_path / "g.toml"
    path.write_text(GRID)
    out = tmp_path / "out"
    assert main(["grid", "--grid", str(path), "--sharing", "0,50", "--replications", "3",
                 "--targets", "shortest-queue,predicted-start", "--no-progress", "--out",
                 str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    for target in ("shortest-queue", "predicted-start"):
        assert set(summary["slowdown"][target]) == {"0", "50"}
        assert summary["slowdown"][target]["0"]["remote"] is None  # nothing moves at 0%
        assert summary["slowdown"][target]["50"]["local"] >= 1
    assert summary["moved_jobs"]["shortest-queue"]["50"] > 0
    assert "shortest-queue: local slowdown, 0% minus 50%" in summary["intervals"]
    rows = (out / "replications.csv").read_text().splitlines()
    assert len(rows) == 1 + 3 * 4 * 3  # replications x configurations x (grid + 2 sites)
    # the summary's means are the replications' means, as the CSV lists them
    import csv

    grid_rows = [r for r in csv.DictReader(rows) if r["site"] == "ALL"]
    for target in ("shortest-queue", "predicted-start"):
        for pct in ("0", "50"):
            local = [float(r["local_slowdown"]) for r in grid_rows
                     if r["target"] == target and r["sharing_pct"] == pct]
            assert len(local) == 3
            assert summary["slowdown"][target][pct]["local"] == pytest.approx(
                sum(local) / 3, rel=1e-5)  # (the CSV keeps 6 digits)
    assert (out / "slowdown.png").stat().st_size > 0


@pytest.mark.parametrize("text,fragment", [
    (GRID.replace("processors = 128\nworkload = \"nasa\"\nload = 0.7", "workload = \"nasa\""),
     "sites[1].processors: site 'b' has no processors"),
    (GRID.replace("bandwidth_mbps = 40", "bandwidth_mbps = 0"),
     "grid.bandwidth_mbps: must be a positive number"),
    # TOML has inf: a grid took it as a bandwidth or a load
    (GRID.replace("bandwidth_mbps = 40", "bandwidth_mbps = inf"),
     "grid.bandwidth_mbps: must be a positive number, got inf"),
    (GRID.replace("load = 0.7", "load = inf"), "sites[1].load: must be a positive number, got inf"),
    (GRID.replace("load = 0.7", "load = 0.7\nworkload = \"missing.swf\"").replace(
        "workload = \"nasa\"\nload = 0.7\n", "load = 0.7\n"),
     "sites[1].workload"),
    (GRID.replace('name = "b"', 'name = "a"'), "sites[1].name: site 'a' is listed twice"),
    (GRID.replace("policy", "x") + "colour = 1\n", "sites[1].colour: unknown field"),
    ("[grid\n", "malformed TOML"),
])
def test_bad_grid_files_get_one_line_naming_the_field(tmp_path, capsys, text, fragment):
    path = tmp_path / "g.toml"
    path.write_text(text)
    assert main(["grid", "--grid", str(path), "--replications", "2", "--sharing", "0,50",
                 "--no-progress", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and fragment in err[0], err


@pytest.mark.mpi
def test_one_process_and_two_mpi_ranks_give_the_same_numbers(tmp_path):
    from emulator.coordinator.launch import mpiexec_path

    if mpiexec_path() is None:
        pytest.skip("needs mpiexec (pip install mpich)")
    path = tmp_path / "g.toml"
    path.write_text(GRID)
    args = ["-m", "emulator", "grid", "--grid", str(path), "--sharing", "0,25",
            "--replications", "3", "--no-progress", "--seed", "7"]
    one = subprocess.run([sys.executable, *args, "--out", str(tmp_path / "one")],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert one.returncode == 0, one.stderr
    two = subprocess.run([mpiexec_path(), "-n", "2", sys.executable, *args, "--out",
                          str(tmp_path / "two")], capture_output=True, text=True, timeout=300,
                         cwd=ROOT)
    assert two.returncode == 0, two.stderr
    a, b = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("one", "two"))
    for s in (a, b):
        s.pop("simulation_seconds")
    assert a == b


TYPED = """[grid]
span_days = 10
data_mb = [1, 100, 1000]
bandwidth_mbps = 40

[[sites]]
name = "small1"
type = "S"
processors = 128
workload = "nasa"
load = 0.9

[[sites]]
name = "small2"
type = "S"
processors = 128
workload = "nasa"
load = 0.9

[[sites]]
name = "big"
type = "B"
processors = 256
workload = "nasa"
load = 0.45
"""


def test_span_days_and_machine_types(tmp_path):
    from emulator.grid.experiment import site_jobs
    from emulator.grid.gridfile import read_grid

    path = tmp_path / "g.toml"
    path.write_text(TYPED)
    grid = read_grid(str(path))
    assert [s.type for s in grid.sites] == ["S", "S", "B"] and grid.span_days == 10
    small, big = site_jobs(grid, 0, 7), site_jobs(grid, 2, 7)
    for jobs in (small, big):  # ten days of arrivals each, however many jobs that is
        span = max(j.submit for j in jobs) - min(j.submit for j in jobs)
        assert 9.5 * 86400 < span < 10 * 86400
    # one arrival process scaled to 90% of 128 processors and to 45% of 256: the same work
    # per day, so about as many jobs in ten days
    assert len(big) == pytest.approx(len(small), rel=0.25)
    out = tmp_path / "out"
    assert main(["grid", "--grid", str(path), "--sharing", "0,100", "--replications", "2",
                 "--targets", "shortest-queue", "--span-days", "3", "--no-progress",
                 "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["span_days"] == 3 and summary["type_sites"] == {"S": ["small1", "small2"],
                                                                   "B": ["big"]}
    types = summary["types"]["shortest-queue"]
    sites = summary["sites"]["shortest-queue"]
    for pct in ("0", "100"):
        assert types[pct]["B"]["local"] == pytest.approx(sites[pct]["big"]["local"])
    assert types["0"]["S"]["remote"] is None and types["100"]["S"]["remote_jobs"] > 0
    assert "shortest-queue: S machines' local slowdown, 0% minus 100%" in summary["intervals"]
    assert (out / "slowdown-S.png").stat().st_size > 0
    assert (out / "slowdown-B.png").stat().st_size > 0
    assert "by machine type" in (out / "tables.md").read_text()


def test_span_days_and_jobs_per_site_together_are_refused(tmp_path, capsys):
    path = tmp_path / "g.toml"
    path.write_text(TYPED.replace("span_days = 10", "span_days = 10\njobs_per_site = 5"))
    assert main(["grid", "--grid", str(path), "--no-progress", "--out",
                 str(tmp_path / "o")]) == 2
    assert "grid.span_days: give jobs_per_site or span_days, not both" in \
        capsys.readouterr().err


def test_the_sdsc_ctc_grid_file_reads_and_its_models_load():
    from emulator.grid.experiment import site_jobs
    from emulator.grid.gridfile import read_grid

    grid = read_grid("hostfiles/grid-sdsc-ctc.toml")
    assert [s.type for s in grid.sites] == ["SDSC", "SDSC", "CTC", "CTC"]
    sdsc, ctc = site_jobs(grid, 0, 1), site_jobs(grid, 2, 1)
    assert len(ctc) > 2 * len(sdsc)  # CTC's machines handle more than twice the jobs

"""The batch coordinator under mpiexec: a tiny run end to end, time sharing on one node, a
node killed mid-run, the live scheduler against the simulated one, bad jobs files."""

import csv
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from emulator.coordinator.launch import mpiexec_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIEXEC = mpiexec_path()

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(MPIEXEC is None, reason="needs mpiexec (pip install mpich)")]

TINY = ["batch", "--nodes", "6", "--job-count", "4", "--loaded-fraction", "0.17", "--class",
        "S", "--mean-gap-seconds", "0.3", "--no-progress"]


def nodesel(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "emulator", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def rows_of(out):
    with open(out / "jobs.csv") as f:
        return list(csv.DictReader(f))


def no_leftovers(patience_seconds=5.0):
    deadline = time.monotonic() + patience_seconds
    while True:
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        found = [line for line in ps.splitlines() if "-m emulator batch" in line
                 or "emulator.coordinator.load" in line or "hydra_pmi_proxy" in line]
        if not found or time.monotonic() > deadline:
            return not found
        time.sleep(0.25)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("batch") / "tiny"
    proc = nodesel(*TINY, "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc


def test_tiny_batch_run_end_to_end(tiny):
    out, proc = tiny
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True
    run = summary["runs"][0]
    assert run["jobs_done"] == 4 and run["jobs_failed"] == 0
    assert len(run["loaded_nodes"]) == 1  # 0.17 x 6, rounded
    rows = rows_of(out)
    assert len(rows) == 4
    for r in rows:
        assert r["status"] == "done"
        assert float(r["submit"]) <= float(r["start"]) < float(r["end"])
        assert len(r["nodes"].split()) == int(r["tasks"]) == len(set(r["nodes"].split()))
        for e in summary["estimators"]:  # every estimate made at submission
            assert float(r[f"predicted_turnaround_{e}"]) > 0
    cells = summary["deviation_pct"]["normal+fcfs"]["0.17"]
    assert set(cells) == set(summary["estimators"])
    for e, cell in cells.items():  # each cell is the mean |deviation| of the jobs' rows
        # (over at least a second of turnaround: these jobs take less)
        dev = [100 * (float(r[f"predicted_turnaround_{e}"]) - float(r["turnaround_seconds"]))
               / max(float(r["turnaround_seconds"]), 1.0) for r in rows]
        assert cell == pytest.approx(sum(map(abs, dev)) / len(dev), rel=1e-3, abs=1e-3)
    assert summary["estimation_ms"] > 0
    # CPU of the coordinator's thread never exceeds the wall time it took (the two clocks
    # tick apart by a few microseconds per reading on sub-millisecond runs)
    assert 0 < summary["estimation_cpu_ms"] <= summary["estimation_ms"] * 1.05 + 0.05
    assert 0 < summary["estimation_ms_median"] <= summary["estimation_ms_max"]
    for name in ("table.md", "deviation.png", "gantt-normal+fcfs-0.17-0.png",
                 "characterization.json"):
        assert (out / name).exists(), name
    assert "| 17% |" in proc.stdout
    each = summary["estimation_ms_per_estimator"]  # the run's 4 arrivals, per estimator
    assert each["mean"] == pytest.approx(
        sum(float(r["estimation_ms"]) for r in rows) / 4 / len(summary["estimators"][:-1]))
    assert f"every run: {each['mean']:.3f} ms per estimator per arrival" in proc.stdout
    assert no_leftovers()


def _engine_starts(out, *, mpl, backfill):
    """The run's arrivals and ends through the simulation engine, with the run's scheduler
    and node selection: (job, nodes) in start order."""
    from emulator.batch.placement import Placement
    from emulator.scheduling.job import Job
    from emulator.scheduling.scheduler import Scheduler

    summary = json.loads((out / "summary.json").read_text())
    rows = sorted(rows_of(out), key=lambda r: float(r["submit"]))
    names = summary["settings"]["nodes"]
    loaded = summary["runs"][0]["loaded_nodes"]
    chars = summary["characterization"]
    placement = Placement("normal", names, mpl=mpl, local_cpu={n: 0.15 for n in loaded})
    sched = Scheduler(len(names) * mpl, "fcfs", backfill=backfill, nodes=placement)
    jobs = {}
    events = sorted([(float(r["submit"]), 1, r["job"]) for r in rows]
                    + [(float(r["end"]), 0, r["job"]) for r in rows])
    started = []
    for k, (t, kind, jid) in enumerate(events):
        r = next(r for r in rows if r["job"] == jid)
        if kind == 0:
            sched.finish(jobs[jid], t)
        else:
            ch = chars[f"{r['benchmark']}/{r['class']}/{r['tasks']}"]
            job = Job(int(jid), t, int(r["tasks"]), estimate=ch["exe_seconds"])
            job.info = {"tasks": int(r["tasks"]), "kind": r["kind"],
                        "cpu_fraction": min(ch["cpu_fraction"], 1.0)}
            jobs[jid] = job
            sched.submit(job, t)
        if k + 1 < len(events) and events[k + 1][:2] == (t, kind):
            continue  # the live run saw these together: it schedules once after them
        started += [(str(j.id), " ".join(j.nodes)) for j in sched.schedule(t)]
    return started, rows


def test_live_scheduler_starts_jobs_as_the_simulated_engine_would(tiny):
    """The same arrivals and durations through the simulation engine, with the same
    scheduler and node selection, start the jobs in the same order on the same nodes."""
    started, rows = _engine_starts(tiny[0], mpl=4, backfill="none")
    live = [(r["job"], r["nodes"]) for r in sorted(rows, key=lambda r: float(r["start"]))]
    assert started == live


def test_live_easy_queues_and_backfills_as_the_engine_does(tmp_path):
    """MPL 1 on 4 nodes: a long 2-task job runs, a 4-task job waits at the head, and short
    2-task jobs backfill beside the long one; the engine, given the same arrivals and ends,
    makes the same decisions job for job."""
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_seconds,benchmark,class,tasks\n0,lu,W,2\n0.05,is,S,4\n"
                    "0.1,cg,S,2\n0.15,is,S,2\n0.2,cg,S,4\n0.25,is,S,2\n")
    out = tmp_path / "out"
    proc = nodesel("batch", "--nodes", "4", "--jobs", str(jobs), "--mpl", "1", "--jsp", "easy",
                   "--loaded-fraction", "0", "--estimators", "net-net", "--no-progress",
                   "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    started, rows = _engine_starts(out, mpl=1, backfill="easy")
    by_start = sorted(rows, key=lambda r: float(r["start"]))
    assert started == [(r["job"], r["nodes"]) for r in by_start]
    # jobs queued, and some started before a job submitted earlier (backfilling)
    assert any(float(r["start"]) - float(r["submit"]) > 1.0 for r in rows)
    order = [int(r["job"]) for r in by_start]
    assert order != sorted(order)


def test_two_jobs_sharing_a_node_both_run_longer_by_the_shared_cpu():
    """README: compute phases that overlap on a node split its CPU. EP (all compute) alone
    on two nodes, then two EPs on the same two nodes: each takes twice as long."""
    proc = subprocess.run([MPIEXEC, "-n", "3", sys.executable,
                           os.path.join(ROOT, "tests", "mpi_programs", "time_sharing.py")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    alone, shared = got["alone_seconds"], got["shared_seconds"]
    assert shared == pytest.approx([2 * alone] * 2, rel=0.1), got
    # each job's CPU time is its work, shared or not
    assert got["shared_cpu_seconds"] == pytest.approx([got["alone_cpu_seconds"]] * 2, rel=0.02)
    # with a local user at 15%, the job gets 85% of the CPU
    assert got["loaded_seconds"] == pytest.approx(alone / 0.85, rel=0.1), got


def test_two_communicating_jobs_on_the_same_nodes_share_the_network(tmp_path):
    """Two IS class-A jobs on a network with no competing streams (a static matrix at the
    ports' 100 Mbit/s): one on 4 nodes, then half a second later one on 2 of them. Each
    takes longer than alone by the model's amount: the fluid model runs both jobs'
    skeletons in one process from the times they began (skeletons.simulate: their messages
    share every pair and port, their compute phases every CPU), and each job's own span is
    within 10% of the model's, as is its slowdown over its run alone. (Two identical jobs
    would make a poor check: their periods match, so the model's answer hangs on their
    offset, which the emulator's noise moves as they run: from 2.0 times alone in lockstep
    to 1.74 a tenth of a second apart and 1.6 half a second apart. Here the model's answer
    moves by 2% at most for offsets from 0.4 to 0.6 s.)"""
    import networkx as nx

    from emulator.network.cluster import crossbar
    from skeletons.simulate import Simulator

    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_seconds,benchmark,class,tasks\n0,is,A,4\n0.5,is,A,2\n")
    matrix = nx.complete_graph(["n1", "n2", "n3", "n4"])
    nx.set_edge_attributes(matrix, 100.0, "bandwidth_mbps")
    scenario = tmp_path / "matrix.json"
    scenario.write_text(json.dumps(nx.node_link_data(matrix, edges="links")))
    out = tmp_path / "out"
    proc = nodesel("batch", "--nodes", "4", "--jobs", str(jobs), "--loaded-fraction", "0",
                   "--scenario", str(scenario), "--no-progress", "--out", str(out), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = rows_of(out)
    nodes = [r["nodes"].split() for r in rows]
    assert len(nodes[0]) == 4 and set(nodes[1]) < set(nodes[0])  # the same nodes
    chars = {len(v["nodes"]): v for v in
             json.loads((out / "characterization.json").read_text())["entries"].values()}
    sim = Simulator(crossbar(4))
    first = min(float(r["run_start"]) for r in rows)
    ids = [sim.add_job("is", "A", n, iterations=chars[len(n)]["iterations"],
                       start_seconds=float(r["run_start"]) - first) for r, n in zip(rows, nodes)]
    model = sim.run()
    for row, n, k in zip(rows, nodes, ids):
        char = chars[len(n)]
        alone = Simulator(crossbar(4))
        one = alone.add_job("is", "A", char["nodes"], iterations=char["iterations"])
        model_alone = alone.run()[one]["seconds"]
        assert abs(char["skeleton_seconds"] / model_alone - 1) <= 0.1, (char, model_alone)
        span, predicted = float(row["run_seconds"]), model[k]["seconds"]
        assert predicted > 1.3 * model_alone  # the model has them share
        assert abs(span / predicted - 1) <= 0.1, (span, predicted)
        slowdown, model_slowdown = span / char["skeleton_seconds"], predicted / model_alone
        assert abs(slowdown / model_slowdown - 1) <= 0.1, (slowdown, model_slowdown)


def test_a_real_program_shares_the_batchs_network_with_the_local_users(paced):
    """A jobs file's command: ``paced fanout 4000000`` (4 MB from n1 to n2) takes 0.32 s
    alone at 100 Mbit/s; played as a batch job beside local users whose LAN traffic (a
    flow the node ranks put into the shared model) takes 50 Mbit/s of n1's port, it gets
    the other half and takes twice as long, as the model says."""
    proc = subprocess.run([MPIEXEC, "-n", "3", sys.executable,
                           os.path.join(ROOT, "tests", "mpi_programs", "batch_program.py"),
                           paced], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["status"] == "done" and not got["events"], got
    assert got["alone_seconds"] == pytest.approx(0.32, rel=0.1), got
    assert got["loaded_seconds"] == pytest.approx(0.64, rel=0.1), got


def test_a_batch_stopped_with_a_program_playing_leaves_nothing(paced):
    """SIGTERM to the run while its program job plays: the program's ranks and its
    launcher go, and so do the files its ranks map in /dev/shm (the model's mirror, the
    latency table)."""
    def ranks():
        return [p for p in psutil.process_iter(["cmdline"])
                if (p.info["cmdline"] or [""])[0] == paced]

    from stopping import gone, stop_command

    before = set(os.listdir("/dev/shm"))
    _, err = stop_command([MPIEXEC, "-n", "3", sys.executable,
                           os.path.join(ROOT, "tests", "mpi_programs", "batch_program.py"),
                           paced, "long"], signal.SIGTERM, lambda: len(ranks()) == 2,
                          wait_seconds=60, reap_seconds=60)
    assert gone(ranks, 15)
    assert not [f for f in set(os.listdir("/dev/shm")) - before
                if f.startswith("nodesel-pmpi-")], err[-2000:]


def test_a_program_past_its_deadline_is_ended_and_marked_failed(paced):
    """A program job gets a skeleton's deadline (20 times its characterized time plus the
    run's time-out): one characterized at 10 ms that runs on is ended after about 2.2 s,
    failed, its ranks gone."""
    proc = subprocess.run([MPIEXEC, "-n", "3", sys.executable,
                           os.path.join(ROOT, "tests", "mpi_programs", "batch_program.py"),
                           paced, "late"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["status"] == "failed", got
    assert [e["error"] for e in got["events"]] == ["the job outlived its deadline"], got
    assert 2.0 < got["seconds"] < 15, got
    assert not [p for p in psutil.process_iter(["cmdline"])
                if (p.info["cmdline"] or [""])[0] == paced]


def test_killed_node_job_is_requeued_and_completes(tmp_path):
    out = tmp_path / "killed"
    # 6 class-W jobs on 5 nodes; rank 2 (node n2) is killed once a job runs on it
    proc = subprocess.Popen([sys.executable, "-m", "emulator", "batch", "--nodes", "5",
                             "--job-count", "6", "--loaded-fraction", "0", "--class", "W",
                             "--mean-gap-seconds", "0.5", "--no-progress", "--out", str(out),
                             "--timeout-seconds", "25"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        killed = False
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None and not killed:
            time.sleep(0.2)
            try:
                rows = rows_of(out)
            except (OSError, csv.Error):
                continue
            if any(r["status"] == "running" and "n2" in r["nodes"].split() for r in rows):
                for p in psutil.process_iter(["cmdline"]):
                    try:
                        cmd = " ".join(p.info["cmdline"] or [])
                        if "-m emulator batch" in cmd and "supervise" not in cmd \
                                and p.environ().get("PMI_RANK") == "2":
                            p.kill()
                            killed = True
                    except psutil.Error:
                        pass
        assert killed, "no job ever ran on n2"
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    run = summary["runs"][0]
    assert "n2" in run["down"] and run["events"], run
    rows = rows_of(out)
    assert all(r["status"] == "done" for r in rows), rows
    requeued = [r for r in rows if int(r["restarts"]) > 0]
    assert requeued and all("n2" not in r["nodes"].split() for r in requeued)
    assert no_leftovers()


@pytest.mark.parametrize("text, says", [
    ("arrival_seconds,benchmark,class,tasks\n0,cg,A,4\n1,xx,A,2\n", "line 3: benchmark"),
    ("arrival_seconds,benchmark,class,tasks\n0,bt,A,2\n", "line 2: tasks: BT does not run"),
    ("arrival_seconds,benchmark,class,tasks\n0,cg,A,8\n", "job 1: tasks: CG of 8 tasks"),
])
def test_a_bad_jobs_file_is_one_message_and_exit_2(tmp_path, text, says):
    p = tmp_path / "jobs.csv"
    p.write_text(text)
    proc = nodesel("batch", "--nodes", "6", "--jobs", str(p), "--out", str(tmp_path / "o"),
                   timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("nodesel: error:") == 1 and says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_run_with_chosen_estimators_records_only_those(tmp_path):
    out = tmp_path / "two"
    proc = nodesel(*TINY, "--estimators", "net-net,cpu-cpu", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["estimators"] == ["net-net", "cpu-cpu", "forward"]
    assert set(summary["deviation_pct"]["normal+fcfs"]["0.17"]) == set(summary["estimators"])
    head = (out / "jobs.csv").read_text().split("\n")[0].split(",")
    assert [h for h in head if h.startswith("predicted_turnaround_")] == [
        "predicted_turnaround_net-net", "predicted_turnaround_cpu-cpu",
        "predicted_turnaround_forward"]
    assert "(2 estimators)" in proc.stdout and "| prop-mpl |" not in proc.stdout


def test_an_unknown_estimator_is_one_message_and_exit_2(tmp_path):
    proc = nodesel("batch", "--nodes", "6", "--estimators", "net-net,fast", "--out",
                   str(tmp_path / "o"), timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("nodesel: error:") == 1 and "--estimators" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "o").exists()


def test_predicted_placement_runs_live_when_jobs_start_together(tmp_path):
    """--nsp predicted asks Algorithm 1 about every job in the system, the jobs the
    scheduler starts in the same pass included (they are not on their nodes yet)."""
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_seconds,benchmark,class,tasks\n0,cg,S,2\n0,is,S,2\n0,mg,S,2\n"
                    "0.2,cg,S,2\n")
    out = tmp_path / "out"
    proc = nodesel("batch", "--nodes", "4", "--jobs", str(jobs), "--nsp", "predicted",
                   "--estimators", "net-net", "--no-progress", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = rows_of(out)
    assert [r["status"] for r in rows] == ["done"] * 4
    assert rows[0]["start"] == rows[1]["start"]  # started in one pass


def test_a_resumed_experiment_plays_only_the_runs_it_lacks(tmp_path):
    out = tmp_path / "exp"
    base = ["batch-experiment", "--nodes", "6", "--job-count", "4", "--class", "S",
            "--mean-gap-seconds", "0.3", "--loaded-fractions", "0.17", "--no-progress",
            "--out", str(out)]
    first = nodesel(*base, "--policies", "normal+fcfs")
    assert first.returncode == 0, first.stderr[-3000:]
    before = rows_of(out)
    second = nodesel(*base, "--policies", "uniform+fcfs,normal+fcfs", "--resume")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resuming: 1 of 2 run(s) complete" in second.stdout
    after = rows_of(out)
    kept = [r for r in after if r["policy"] == "normal+fcfs"]
    assert len(kept) == len(before) == 4
    for got, want in zip(kept, before):  # values read back and written again: 10 digits
        assert got.keys() == want.keys()
        for key in want:
            try:
                assert float(got[key]) == pytest.approx(float(want[key]), rel=1e-8), key
            except ValueError:
                assert got[key] == want[key], key
    assert sum(r["policy"] == "uniform+fcfs" and r["status"] == "done" for r in after) == 4
    summary = json.loads((out / "summary.json").read_text())
    # in the order asked for, not the order played
    assert summary["complete"] and [r["policy"] for r in summary["runs"]] == \
        ["uniform+fcfs", "normal+fcfs"]
    assert [r["policy"] for r in after] == ["uniform+fcfs"] * 4 + ["normal+fcfs"] * 4
    assert summary["jobs_compared"]["normal+fcfs"]["0.17"] == 4
    refused = nodesel(*base, "--policies", "normal+fcfs", "--mpl", "2", "--resume")
    assert refused.returncode == 2 and "its mpl is 4 where this run's is 2" in refused.stderr
    assert "Traceback" not in refused.stderr and no_leftovers()

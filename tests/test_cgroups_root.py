"""The nodes' CPUs as cgroups (--cpu kernel) for real: a node's quota holds a burning
process to its share, the coordinator's group takes a core beside busy nodes, groups go away
after use and after a killed run, and a batch runs with the kernel's scheduler deciding.

Needs root and the cgroup cpu controller; skips with a reason elsewhere.
"""

import csv
import json
import os
import subprocess
import sys
import time

import pytest

from emulator.kernel import cgroups
from measuring import best_of, host_state

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (cgroups)"),
    pytest.mark.skipif(cgroups.hierarchy() is None, reason="needs the cgroup cpu controller"),
]

BURN = "import time\nwhile True:\n    pass\n"


def leftovers():
    root = cgroups.hierarchy()[1]
    return [d for d in os.listdir(root) if d.startswith(cgroups.PREFIX)]


def cpu_share(pid, seconds):
    """Cores' worth of CPU the process used over ``seconds``."""
    import psutil

    p = psutil.Process(pid)
    before = sum(p.cpu_times()[:2])
    time.sleep(seconds)
    return (sum(p.cpu_times()[:2]) - before) / seconds


def test_a_node_group_holds_a_burning_process_to_its_share_and_goes_away():
    groups = cgroups.CpuGroups(["n1", "n2"], 4.0, run=f"{cgroups.PREFIX}{os.getpid()}")
    proc = None
    try:
        run = groups.up()
        if groups.version == "v1":
            with open(os.path.join(groups.path("n1"), "cpu.cfs_quota_us")) as f:
                assert int(f.read()) * 4 == cgroups.period_us(4.0) == 8000
        proc = subprocess.Popen([sys.executable, "-c", BURN])
        cgroups.join(run, "n1", proc.pid)
        shares = best_of(lambda: cpu_share(proc.pid, 1.5),
                         lambda share: 0.25 * 0.85 <= share <= 0.25 * 1.1)
        assert all(share <= 0.25 * 1.1 for share in shares), shares  # a quarter of a core
        assert 0.25 * 0.85 <= shares[-1], (shares, host_state())
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        assert groups.down()
    assert not groups.down()  # again: nothing to do
    assert not os.path.exists(groups.base)


def test_the_coordinators_group_takes_a_core_beside_nodes_that_fill_the_machine():
    # every core's worth of node quota busy (dilation 1: a whole core each); a burner in the
    # coordinator's group still gets (nearly) a core, where a fair share would be 2/3 of one
    cores = os.cpu_count()
    names = [f"n{i}" for i in range(cores)]
    groups = cgroups.CpuGroups(names, 1.0, run=f"{cgroups.PREFIX}{os.getpid()}")
    procs = []
    try:
        run = groups.up()
        for n in names + [cgroups.COORDINATOR]:
            procs.append(subprocess.Popen([sys.executable, "-c", BURN]))
            cgroups.join(run, n, procs[-1].pid)
        shares = best_of(lambda: cpu_share(procs[-1].pid, 1.5), lambda share: share >= 0.9)
        assert shares[-1] >= 0.9, (shares, host_state())
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        assert groups.down()
    assert not leftovers()


def test_groups_of_a_run_whose_launcher_is_gone_are_removed():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    groups = cgroups.CpuGroups(["n1"], 2.0, run=f"{cgroups.PREFIX}{dead.pid}")
    groups.up()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        cgroups.join(groups.base, "n1", sleeper.pid)  # a rank left behind in it
        assert f"{cgroups.PREFIX}{dead.pid}" in cgroups.remove_stale(groups.root)
        assert not os.path.exists(groups.base) and sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()
        groups.down()


def nodesel(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "emulator", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout)


def test_a_batch_under_the_kernel_cpu_runs_and_leaves_no_group(tmp_path):
    """Two EPs (all compute) on the same two nodes, then one beside a local user on each:
    the kernel's scheduler splits each node's quota between the two, and gives the local
    user its 15% and the job the rest."""
    jobs = tmp_path / "jobs.csv"
    loaded = tmp_path / "loaded"
    attempts = []

    def shared():  # a fresh OUT each time: its characterization cache would skip the re-measure
        out = tmp_path / f"out{len(attempts)}"
        attempts.append(out)
        jobs.write_text("arrival_seconds,benchmark,class,tasks\n0,ep,S,2\n0,ep,S,2\n")
        proc = nodesel("batch", "--nodes", "2", "--jobs", str(jobs), "--loaded-fraction", "0",
                       "--cpu", "kernel", "--no-progress", "--out", str(out))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "--cpu kernel: dilation 1" in proc.stderr  # 2 nodes on 2 cores
        summary = json.loads((out / "summary.json").read_text())
        assert summary["runs"][0]["cpu"] == "kernel"
        assert not leftovers()
        char = next(iter(json.loads((out / "characterization.json").read_text())["entries"]
                         .values()))
        return char, list(csv.DictReader(open(out / "jobs.csv")))

    def halved(result):  # each job had half of its nodes' CPUs
        char, rows = result
        return char["cpu_seconds"] == pytest.approx(char["skeleton_seconds"], rel=0.1) and all(
            float(row["compute_seconds"]) == pytest.approx(2 * char["cpu_seconds"], rel=0.15)
            and float(row["cpu_seconds"]) == pytest.approx(char["cpu_seconds"], rel=0.1)
            for row in rows)

    def figures(results):  # what halved() reads, per attempt: (cpu, skeleton, jobs' rows)
        return [(round(c["cpu_seconds"], 3), round(c["skeleton_seconds"], 3),
                 [(row["compute_seconds"], row["cpu_seconds"]) for row in rows])
                for c, rows in results]

    results = best_of(shared, halved)
    assert halved(results[-1]), (figures(results), host_state())
    char, out = results[-1][0], attempts[-1]

    def beside_a_local_user():  # one EP on nodes that both carry a local user burning its 15%
        jobs.write_text("arrival_seconds,benchmark,class,tasks\n0,ep,S,2\n")
        proc = nodesel("batch", "--nodes", "2", "--jobs", str(jobs), "--loaded-fraction", "1",
                       "--cpu", "kernel", "--no-progress", "--out", str(loaded), "--cache",
                       str(out / "characterization.json"))
        assert proc.returncode == 0, proc.stderr[-3000:]
        (row,) = csv.DictReader(open(loaded / "jobs.csv"))
        summary = json.loads((loaded / "summary.json").read_text())
        return row, summary["runs"][0]["measured_local_load"]

    def shared_with_the_user(result):
        row, local = result
        return float(row["compute_seconds"]) == pytest.approx(char["cpu_seconds"] / 0.85,
                                                              rel=0.1) and \
            all(abs(v["cpu_percent"] - 15) <= 5 for v in local.values())

    def read(results):  # per attempt: (job's compute seconds, expected, users' CPU percent)
        return [(row["compute_seconds"], round(char["cpu_seconds"] / 0.85, 3),
                 {node: v["cpu_percent"] for node, v in local.items()})
                for row, local in results]

    results = best_of(beside_a_local_user, shared_with_the_user)
    assert shared_with_the_user(results[-1]), (read(results), host_state())
    assert not leftovers()


def test_a_kernel_cpu_batch_ended_by_sigterm_mid_run_leaves_nothing(tmp_path):
    """The launcher's SIGTERM reaches every rank and the local users at once; their groups
    are busy while they exit, and still go."""
    import signal

    import psutil

    jobs = tmp_path / "jobs.csv"
    # the second job's arrival keeps the run going while the local users burn in their groups
    jobs.write_text("arrival_seconds,benchmark,class,tasks\n0,ep,S,4\n30,ep,S,4\n")
    from stopping import stop_when

    def mid_run():  # the local users burn
        return any("emulator.coordinator.load" in " ".join(p.info["cmdline"] or [])
                   for p in psutil.process_iter(["cmdline"]))

    status, err = stop_when(["batch", "--nodes", "4", "--jobs", str(jobs), "--loaded-fraction",
                             "1", "--cpu", "kernel", "--no-progress", "--out",
                             str(tmp_path / "out")], signal.SIGTERM, mid_run,
                            wait_seconds=240, settle_seconds=1.0, poll_seconds=0.5,
                            reap_seconds=60)
    assert status == 143, err[-3000:]
    assert "Traceback" not in err and "error" not in err, err[-3000:]
    said = err.strip().splitlines()  # the dilation line, then the stop's
    assert said[-1] == f"nodesel: stopped by SIGTERM; results so far in {tmp_path / 'out'}"
    assert len(said) <= 3, err[-3000:]
    assert not leftovers()
    time.sleep(1.0)
    strays = [p.pid for p in psutil.process_iter(["cmdline"])
              if "-m emulator" in " ".join(p.info["cmdline"] or [])
              or "emulator.coordinator" in " ".join(p.info["cmdline"] or [])]
    assert not strays

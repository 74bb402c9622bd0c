"""`nodesel run`'s steps without MPI: trials pick the fastest group, and a step that fails or
hangs is named, killed with everything it started, and recorded."""

import json
import os
import subprocess
import sys
import time

import pytest

from emulator.errors import UserError
from emulator.experiments.userjob import Step, UserJob, run_job
from emulator.network.netgraph import graph_from_node_link
from emulator.selection.maxmin import max_min_select
from emulator.selection.patternfile import resolve_pattern

PY = sys.executable


def graph(n=5, slow="n5"):
    nodes = [f"n{i}" for i in range(1, n + 1)]
    links = [{"source": a, "target": b, "bandwidth_mbps": 10.0 if slow in (a, b) else 100.0}
             for i, a in enumerate(nodes) for b in nodes[i + 1:]]
    return graph_from_node_link({"directed": False, "multigraph": False, "graph": {},
                                 "nodes": [{"id": x} for x in nodes], "links": links})


def gone(pid):
    """True once ``pid`` no longer runs (it may linger a moment as a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_step_that_outlives_its_limit_is_killed_with_its_children_and_named():
    spawn = ("import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', "
             "'import time; time.sleep(60)']); print(c.pid, flush=True); time.sleep(60)")
    step = Step("the application command", [PY, "-c", spawn], stdout=subprocess.PIPE)
    start = time.monotonic()
    with pytest.raises(UserError, match=r"the application command did not end within 1 s "
                                        r"and was killed") as info:
        step.finish(time.monotonic() + 1.0)
    assert time.monotonic() - start < 10
    assert "--timeout-seconds" in str(info.value)
    assert step.proc.returncode is not None and step.proc.returncode < 0
    # the grandchild (a rank that mpiexec started, say) is ended too
    child = [p for p in os.listdir("/proc") if p.isdigit()
             and _cmdline(p).endswith("time.sleep(60)") and "Popen" not in _cmdline(p)]
    deadline = time.monotonic() + 5
    while child and not all(gone(p) for p in child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(gone(p) for p in child), child


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def test_a_failing_step_gives_its_status_and_last_stderr_lines():
    code = "import sys; print('first', file=sys.stderr); print('the cause', file=sys.stderr); " \
           "sys.exit(3)"
    step = Step("the skeleton command on candidate 2 (n1 n2)", [PY, "-c", code])
    with pytest.raises(UserError) as info:
        step.finish(time.monotonic() + 30)
    text = str(info.value)
    assert text.startswith("the skeleton command on candidate 2 (n1 n2) failed, exit status 3")
    assert text.endswith("first | the cause")


def test_a_step_killed_by_a_signal_says_which():
    step = Step("the measurement", [PY, "-c", "import os, signal; os.kill(os.getpid(), "
                                              "signal.SIGTERM)"])
    with pytest.raises(UserError, match="the measurement failed, killed by SIGTERM"):
        step.finish(time.monotonic() + 30)


TRIAL = """import json, sys, time
hosts = " ".join(sorted(h.split(":")[0] for h in open(sys.argv[1]).read().split()))
time.sleep(json.load(open(sys.argv[2])).get(hosts, 2.0))
"""


def test_run_job_times_each_candidate_and_runs_the_app_on_the_fastest(tmp_path):
    # equal links: the selection ranks three groups alike, and the trials decide; the
    # group it ranks second is the fastest in trial, the one it ranks first the slowest
    pattern = resolve_pattern("cg", 4)
    network = graph(7, slow="none")
    ranked = [" ".join(sorted(c.nodes))
              for c in max_min_select(network, pattern, candidates=3).candidates]
    assert len(set(ranked)) == 3
    seconds = tmp_path / "seconds.json"
    seconds.write_text(json.dumps(dict(zip(ranked, (0.6, 0.05, 0.3)))))
    trial = tmp_path / "trial.py"
    trial.write_text(TRIAL)
    lines = []
    job = UserJob(f"{PY} {trial} {{machinefile}} {seconds}", f"{PY} -c pass", candidates=3)
    result = run_job(network, pattern, job, host_of=lambda n: n, out_dir=str(tmp_path),
                     progress=lines.append)
    assert result["chosen"] == 1
    chosen = result["selection"]["candidates"][1]
    assert " ".join(sorted(chosen["nodes"])) == ranked[1]
    assert len(result["trial_seconds"]) == len(result["selection"]["candidates"])
    assert result["trial_seconds"][result["chosen"]] == min(result["trial_seconds"])
    assert result["app_exit_status"] == 0
    assert json.loads((tmp_path / "run.json").read_text()) == result
    assert (tmp_path / "machinefile").read_text().split() == \
        [f"{chosen['mapping'][str(r)]}:1" for r in range(4)]
    # the same placement for Open MPI and for srun
    assert (tmp_path / "rankfile").read_text().splitlines() == \
        [f"rank {r}={chosen['mapping'][str(r)]} slot=0" for r in range(4)]
    assert result["nodelist"] == str(tmp_path / "nodelist")


def test_a_hanging_application_is_named_and_recorded(tmp_path):
    with pytest.raises(UserError, match="the application command did not end within 1 s"):
        job = UserJob(f"{PY} -c pass", f"{PY} -c 'import time; time.sleep(60)'",
                      timeout_seconds=1.0)
        run_job(graph(), resolve_pattern("ring", 4), job, host_of=lambda n: n,
                out_dir=str(tmp_path), progress=lambda text: None)
    result = json.loads((tmp_path / "run.json").read_text())
    assert result["app_exit_status"] < 0  # killed
    assert 1.0 <= result["app_seconds"] < 10


MPICC = os.path.join(os.path.dirname(PY), "mpicc")
STATIC = {"directed": False, "multigraph": False, "graph": {},
          "nodes": [{"id": f"n{i}"} for i in range(1, 5)],
          "links": [{"source": a, "target": b, "bandwidth_mbps": mbps} for a, b, mbps in (
              ("n1", "n2", 100), ("n3", "n4", 50), ("n1", "n3", 10), ("n1", "n4", 10),
              ("n2", "n3", 10), ("n2", "n4", 10))]}


@pytest.mark.mpi
def test_run_on_the_emulated_cluster_tries_the_program_on_each_group(tmp_path):
    """``nodesel run`` without root: the measurement on the emulated cluster, then the
    unmodified program on each candidate pair under the library, the application on the
    faster pair; a 4 MB message takes what each pair's bandwidth gives it. At dilation 2,
    so that a busy machine's late wake-ups in a program's start stay inside the tolerance
    (1 MB at dilation 1 came out +17 to +26% with both cores busy)."""
    from emulator.coordinator.launch import mpiexec_path

    if mpiexec_path() is None or not os.path.exists(MPICC):
        pytest.skip("needs the mpich wheel's mpiexec and mpicc")
    paced = tmp_path / "paced"
    build = subprocess.run([MPICC, "-O2", "-o", str(paced), os.path.join(
        os.path.dirname(__file__), "mpi_programs", "paced.c")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    scenario = tmp_path / "static.json"
    scenario.write_text(json.dumps(STATIC))
    out = tmp_path / "run"
    common = [PY, "-m", "emulator", "run", "--nodes", "4", "--scenario", str(scenario),
              "--pattern", "ring", "--nprocs", "2", "--candidates", "2", "--dilation", "2",
              "--out", str(out)]
    proc = subprocess.run(common + ["--skeleton-cmd", f"{paced} fanout 4000000",
                                    "--app-cmd", f"{paced} pingpong 8 3"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert '"what": "one_way"' in proc.stdout  # the application's own output
    result = json.loads((out / "run.json").read_text())
    groups = [c["nodes"] for c in result["selection"]["candidates"]]
    assert groups == [["n1", "n2"], ["n3", "n4"]] and result["chosen"] == 0
    for seconds, mbps in zip(result["trial_seconds"], (100, 50)):
        model = 32e6 / (mbps * 1e6)  # 4 MB, from MPI_Init to MPI_Finalize
        assert abs(seconds / model - 1) < 0.15, result["trial_seconds"]
    assert result["emulated"] and result["app_exit_status"] == 0
    assert (out / "nodelist").read_text().split() == ["n[1-2]"]  # a Slurm hostlist
    bad = subprocess.run(common + ["--skeleton-cmd", f"mpiexec -n 2 {paced}", "--app-cmd",
                                   str(paced)], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].startswith(
        "nodesel: error: on the emulated cluster give the program and its arguments")
    elsewhere = subprocess.run(common + ["--shaping", "tc", "--skeleton-cmd", str(paced),
                                         "--app-cmd", str(paced)],
                               capture_output=True, text=True, timeout=300)
    assert elsewhere.returncode == 2 and elsewhere.stderr.strip().splitlines()[-1] == (
        "nodesel: error: --nodes describes the emulated cluster (--shaping inproc); with "
        "--shaping tc the network is the testbed's")

"""The experiment end to end under mpiexec: a tiny run, a node killed mid-run, Ctrl-C."""

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from emulator.cli import mpiexec_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(mpiexec_path() is None, reason="needs mpiexec (pip install mpich)")]

TINY = ["--benchmarks", "cg,is", "--repeats", "1", "--nodes", "6", "--app-iterations", "1",
        "--trial-iterations", "2", "--timeout-seconds", "6"]
METHODS = ("pattern", "all-all", "random")


def experiment(out, *extra, timeout=400):
    # SIGINT at its default even when the tests run in the background, where a shell starts
    # commands with it ignored (Python would then keep ignoring Ctrl-C)
    return subprocess.Popen([sys.executable, "-m", "emulator", "experiment", *TINY, "--out",
                             str(out), *extra], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def rows_of(out):
    with open(out / "jobs.csv") as f:
        return list(csv.DictReader(f))


def rank_processes():
    """The emulator's rank processes (not their supervisors), with their MPI rank."""
    found = {}
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            if "-m emulator experiment" in cmd and "supervise" not in cmd:
                rank = proc.environ().get("PMI_RANK")
                if rank is not None:
                    found[int(rank)] = proc
        except psutil.Error:
            pass
    return found


def leftovers(patience_seconds=5.0):
    """Processes of the job still around (a zombie gets a moment to be reaped)."""
    deadline = time.monotonic() + patience_seconds
    while True:
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        found = [line for line in ps.splitlines()
                 if "hydra_pmi_proxy" in line or "emulator.load" in line
                 or "-m emulator experiment" in line]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.25)


def test_tiny_experiment_end_to_end(tmp_path):
    out = tmp_path / "exp"
    proc = experiment(out)
    stdout, stderr = proc.communicate(timeout=400)
    assert proc.returncode == 0, stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True
    for benchmark in ("cg", "is"):
        for method in METHODS:  # every method produced a slowdown
            assert isinstance(summary["slowdown_pct"][benchmark][method], float)
        assert isinstance(summary["oracle_slowdown_pct"][benchmark], float)
        assert summary["overhead_pct"][benchmark] > 0
    rows = rows_of(out)
    # one dedicated run, the oracle and every method in each of the 2 slots
    assert sorted((r["benchmark"], r["method"]) for r in rows) == sorted(
        (b, m) for b in ("cg", "is") for m in METHODS + ("oracle", "dedicated"))
    for r in rows:
        assert float(r["app_seconds"]) > 0 and r["nodes"] and len(r["mapping"].split()) == 4
        if r["method"] != "dedicated":
            # the oracle's predicted time is <= every method's
            assert float(r["oracle_predicted_seconds"]) <= \
                float(r["predicted_seconds"]) * (1 + 1e-9), r
    pattern = [r for r in rows if r["method"] == "pattern"]
    assert all(len(r["trials"].split(";")) >= 1 and float(r["trial_seconds"]) > 0
               for r in pattern)
    assert (out / "figure3.png").read_bytes()[:4] == b"\x89PNG"
    table = (out / "table.md").read_text()
    assert table.count("\n| cg |") == 1 and "| **average** |" in table
    assert "| cg |" in stdout and "figure3.png" in stdout
    assert not leftovers()


def test_killed_node_is_marked_down_and_the_job_retried(tmp_path):
    out = tmp_path / "exp"
    proc = experiment(out)
    victim = {}

    def kill_when_trials_run():
        # wait for the first slot's measurement to end (its rows appear after the slot), then
        # kill node rank 2 as soon as the pipeline is busy
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            ranks = rank_processes()
            if 2 in ranks and len(ranks) >= 7:
                time.sleep(6.0)  # inside slot 0: measurement done, jobs running
                ranks[2].kill()
                victim["pid"] = ranks[2].pid
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_when_trials_run)
    killer.start()
    stdout, stderr = proc.communicate(timeout=400)
    killer.join()
    assert victim, "the node rank was never found"
    assert proc.returncode == 0, stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True
    assert summary["failures"], "the failure is reported"
    assert any("n2" in f["error"] and "n2" in f["down"] for f in summary["failures"])
    rows = rows_of(out)
    # every job still ran, none of them on n2 after the failure
    assert len(rows) == 2 * (len(METHODS) + 2)
    failed_slot = min(f["slot"] for f in summary["failures"] if f["slot"] is not None) \
        if any(f["slot"] is not None for f in summary["failures"]) else None
    later = [r for r in rows if failed_slot is not None and int(r["slot"]) > failed_slot]
    assert all("n2" not in r["nodes"].split() for r in later)
    if failed_slot is not None:
        retried = [r for r in rows if int(r["attempts"]) > 1]
        assert retried and all("n2" not in r["nodes"].split() for r in retried)
    assert "n2" in stdout + stderr
    assert not leftovers()


def test_ctrl_c_leaves_valid_results_and_no_processes(tmp_path):
    out = tmp_path / "exp"
    proc = experiment(out, "--repeats", "3")
    deadline = time.monotonic() + 200
    while time.monotonic() < deadline and not (out / "jobs.csv").exists():
        time.sleep(0.2)
    assert (out / "jobs.csv").exists(), "no slot finished"
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode != 0
    summary = json.loads((out / "summary.json").read_text())  # whole, valid JSON
    assert summary["complete"] is False
    rows = rows_of(out)
    assert rows and all(r["app_seconds"] for r in rows)
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp")]
    assert not leftovers()

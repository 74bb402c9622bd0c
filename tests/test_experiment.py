"""The experiment end to end under mpiexec: a tiny run, a node killed mid-run, Ctrl-C."""

import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from emulator.coordinator import stop
from emulator.coordinator.launch import mpiexec_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(mpiexec_path() is None, reason="needs mpiexec (pip install mpich)")]

TINY = ["--benchmarks", "cg,is", "--repeats", "1", "--nodes", "6", "--app-iterations", "1",
        "--trial-iterations", "2", "--timeout-seconds", "6"]
METHODS = ("pattern", "all-all", "random")
TWO_CG_SLOTS = ("--benchmarks", "cg", "--repeats", "2")  # two slots of the quicker benchmark


class Run:
    """The experiment as a subprocess; its stderr is read as it comes, so a test can act on
    progress. Killed with every descendant at teardown, so a hung run cannot outlive its test."""

    def __init__(self, out, *extra):
        # SIGINT at its default even when the tests run in the background, where a shell
        # starts commands with it ignored (Python would then keep ignoring Ctrl-C)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "emulator", "experiment", *TINY, "--out", str(out), *extra],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self._err, self._out = [], []
        self._readers = [threading.Thread(target=self._read, args=(f, into), daemon=True)
                         for f, into in ((self.proc.stderr, self._err),
                                         (self.proc.stdout, self._out))]
        for t in self._readers:
            t.start()

    @staticmethod
    def _read(f, into):
        for chunk in iter(lambda: os.read(f.fileno(), 4096), b""):
            into.append(chunk.decode(errors="replace"))

    @property
    def stderr(self):
        return "".join(self._err)

    def wait_for_jobs(self, n, timeout=200):
        """Until the progress shows ``n`` finished jobs (tqdm's ``n/total``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if re.search(rf"\b{n}/\d+ \[", self.stderr):
                return True
            time.sleep(0.1)
        return False

    def finish(self, timeout=400):
        """(stdout, stderr) once the run has ended."""
        self.proc.wait(timeout=timeout)
        for t in self._readers:
            t.join(timeout=10)
        return "".join(self._out), self.stderr

    def kill(self):
        try:
            family = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            family = []
        for p in family + [self.proc]:
            try:
                p.kill()
            except (psutil.Error, ProcessLookupError):
                pass
        self.proc.wait()


@pytest.fixture
def experiment():
    runs = []

    def start(out, *extra):
        runs.append(Run(out, *extra))
        return runs[-1]

    yield start
    for run in runs:
        if run.proc.poll() is None:
            run.kill()


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
                 if "hydra_pmi_proxy" in line or "emulator.coordinator.load" in line
                 or "-m emulator experiment" in line]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.25)


def test_tiny_experiment_end_to_end(tmp_path, experiment):
    """Every method, the oracle and the dedicated run in each slot, with class-S
    applications (a quick check; class A is what the tests that stop runs mid-way use)."""
    out = tmp_path / "exp"
    run = experiment(out, "--app-class", "S")
    stdout, stderr = run.finish()
    assert run.proc.returncode == 0, stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and summary["config"]["app_class"] == "S"
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


def test_a_real_program_as_the_application(tmp_path, experiment):
    """--program is=PROGRAM: IS's application is an unmodified C program under the library,
    on the slot's network (the dedicated run on every link at full capacity); its output is
    kept, and its time is the model's: 2 all-to-alls of 1 MB on 4 nodes, 3 x 1 MB out of
    each 100 Mbit/s port each time, 0.48 s. Long enough, at dilation 2, that a busy
    machine's late wake-ups in the program's start stay well inside the tolerance (with
    both cores busy: +4.5 to +8.7%; 250 KB at dilation 1 went to +25%)."""
    mpicc = os.path.join(os.path.dirname(sys.executable), "mpicc")
    if not os.path.exists(mpicc):
        pytest.skip("needs the mpich wheel's mpicc")
    paced = tmp_path / "paced"
    build = subprocess.run([mpicc, "-O2", "-o", str(paced), os.path.join(
        ROOT, "tests", "mpi_programs", "paced.c")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    out = tmp_path / "exp"
    run = experiment(out, "--benchmarks", "is", "--methods", "random", "--no-oracle",
                     "--dilation", "2", "--program", f"is={paced} alltoall 1000000 2")
    _, stderr = run.finish()
    assert run.proc.returncode == 0, stderr[-3000:]
    rows = {r["method"]: r for r in rows_of(out)}
    assert sorted(rows) == ["dedicated", "random"]
    dedicated = float(rows["dedicated"]["app_seconds"])
    assert abs(dedicated / 0.48 - 1) < 0.15, dedicated  # MPI_Init to MPI_Finalize
    assert float(rows["random"]["app_seconds"]) > 0.95 * dedicated
    for name in ("slot0-dedicated.out", "slot0-random.out"):
        said = [json.loads(line) for line in (out / "programs" / name).read_text().splitlines()]
        assert sorted(r["rank"] for r in said if r["what"] == "alltoall") == [0, 1, 2, 3]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["programs"] == {"is": [str(paced), "alltoall", "1000000", "2"]}


def test_killed_node_is_marked_down_and_the_job_retried(tmp_path, experiment):
    out = tmp_path / "exp"
    before = mpich_segments()
    run = experiment(out, *TWO_CG_SLOTS)
    # kill node rank 2 once the first job has finished: the pipeline is busy
    assert run.wait_for_jobs(1), run.stderr[-3000:]
    ranks = rank_processes()
    assert 2 in ranks, "the node rank was never found"
    ranks[2].kill()
    stdout, stderr = run.finish()
    assert run.proc.returncode == 0, stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True
    assert summary["failures"], "the failure is reported"
    assert any("n2" in f["error"] and "n2" in f["down"] for f in summary["failures"])
    rows = rows_of(out)
    # every job still ran, none of them on n2 once the failure was seen
    assert len(rows) == 2 * (len(METHODS) + 2)
    first = summary["failures"][0]
    slot = first["slot"]  # the slot whose job, or whose measurement, met the dead node
    assert slot in (0, 1), first
    if first["method"] == "measurement":  # that slot's jobs, and all after, went without it
        later = [r for r in rows if int(r["slot"]) >= slot]
    else:  # the job it met ran again without it, and so did every job after
        retried = [k for k, r in enumerate(rows) if int(r["attempts"]) > 1]
        assert [(rows[k]["slot"], rows[k]["method"]) for k in retried] == \
            [(str(slot), first["method"])]
        later = rows[retried[0]:]  # rows are written in the order the jobs ended
    assert later and all("n2" not in r["nodes"].split() for r in later)
    assert "n2" in stdout + stderr
    assert not leftovers()
    # the killed rank could not unlink MPICH's shared memory; the launcher did
    assert mpich_segments() <= before


def mpich_segments():
    return {n for n in os.listdir("/dev/shm") if n.startswith(stop.SEGMENT_PREFIXES)}


def test_ctrl_c_leaves_valid_results_and_no_processes(tmp_path, experiment):
    out = tmp_path / "exp"
    before = mpich_segments()
    run = experiment(out, "--repeats", "3")
    # within the first slot (5 jobs): what finished is kept, job by job
    assert run.wait_for_jobs(2), run.stderr[-3000:]
    run.proc.send_signal(signal.SIGINT)
    _, stderr = run.finish(timeout=60)
    assert run.proc.returncode == 130
    said = [ln for ln in stderr.splitlines() if ln.startswith("nodesel")]
    assert said == [f"nodesel: stopped by SIGINT; results so far in {out}"], stderr[-3000:]
    assert "Traceback" not in stderr and "Abort(" not in stderr
    summary = json.loads((out / "summary.json").read_text())  # whole, valid JSON
    assert summary["complete"] is False
    rows = rows_of(out)
    assert len(rows) >= 2 and all(r["app_seconds"] for r in rows)
    assert rows[0]["method"] == "dedicated" and rows[0]["slot"] == "0"
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp")]
    assert not leftovers()
    assert mpich_segments() <= before


def test_node_dead_in_start_up_ends_the_job_at_once(tmp_path, experiment):
    """The others wait for it in MPI's start-up collectives: the job must end, not hang."""
    out = tmp_path / "exp"
    run = experiment(out)
    deadline = time.monotonic() + 60
    while 2 not in (ranks := rank_processes()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert 2 in ranks, "the node rank was never found"
    ranks[2].kill()  # the rank has just started: it is still importing or in MPI_Init
    stdout, stderr = run.finish(timeout=60)
    assert run.proc.returncode != 0
    assert "rank 2 was killed by SIGKILL" in stderr and "start-up" in stderr, stderr[-3000:]
    assert not leftovers()


def test_coordinator_killed_mid_run_ends_the_job(tmp_path, experiment):
    """The nodes would wait for a dead coordinator for ever."""
    out = tmp_path / "exp"
    run = experiment(out)
    assert run.wait_for_jobs(1), run.stderr[-3000:]
    rank_processes()[0].kill()
    stdout, stderr = run.finish(timeout=60)
    assert run.proc.returncode != 0
    assert "rank 0 was killed by SIGKILL" in stderr, stderr[-3000:]
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp")]
    assert not leftovers()


def test_a_stopped_experiment_resumed_keeps_what_it_finished_and_completes(tmp_path,
                                                                          experiment):
    """Stopped within the second slot: the first is kept bit for bit, the second's
    measurement replayed, and the resumed run ends with every job an unbroken run has."""
    out = tmp_path / "exp"
    run = experiment(out, *TWO_CG_SLOTS)
    assert run.wait_for_jobs(6), run.stderr[-3000:]  # slot 0's five jobs and one of slot 1
    run.proc.send_signal(signal.SIGTERM)
    run.finish(timeout=60)
    assert run.proc.returncode == 128 + signal.SIGTERM, run.stderr[-3000:]
    stopped = json.loads((out / "summary.json").read_text())
    assert stopped["slots_done"] == [0] and stopped["complete"] is False
    kept = [r for r in rows_of(out) if r["slot"] == "0"]
    measured = json.loads((out / "measurements.json").read_text())
    assert [m["slot"] for m in measured] == [0, 1]

    again = experiment(out, *TWO_CG_SLOTS, "--resume")
    stdout, stderr = again.finish()
    assert again.proc.returncode == 0, stderr[-3000:]
    assert "resuming: 1 of 2 slot(s) complete" in stdout + stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and summary["slots_done"] == [0, 1]
    rows = rows_of(out)
    assert [r for r in rows if r["slot"] == "0"] == kept
    assert sorted((r["slot"], r["method"]) for r in rows) == sorted(
        (s, m) for s in ("0", "1") for m in METHODS + ("oracle", "dedicated"))
    assert json.loads((out / "measurements.json").read_text()) == measured  # none taken again
    assert summary["jobs"] == len(rows) == 10
    assert not leftovers()

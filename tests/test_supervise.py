"""The rank supervisor: which failures it hides from Hydra and which end the job."""

import os
import signal
import subprocess
import sys
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def supervised(code, rank):
    env = dict(os.environ, PMI_RANK=str(rank))
    return subprocess.run([sys.executable, "-m", "emulator.coordinator.supervise", sys.executable, "-c",
                           code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)


JOIN = "from emulator.coordinator import supervise; supervise.joined(); "


def test_a_joined_node_killed_is_an_ordinary_exit():
    proc = supervised(JOIN + "import os; os.kill(os.getpid(), 9)", rank=3)
    assert proc.returncode == 128 + signal.SIGKILL
    assert proc.stderr == ""


def test_a_joined_node_keeps_its_exit_status():
    proc = supervised(JOIN + "raise SystemExit(4)", rank=3)
    assert proc.returncode == 4


def test_a_node_failing_before_it_joined_ends_the_job():
    proc = supervised("import os; os.kill(os.getpid(), 9)", rank=2)
    assert proc.returncode == -signal.SIGKILL  # Hydra sees a signal and ends the job
    assert "rank 2 was killed by SIGKILL" in proc.stderr and "start-up" in proc.stderr
    proc = supervised("raise SystemExit(1)", rank=2)
    assert proc.returncode == -signal.SIGTERM
    assert "rank 2 exited with status 1" in proc.stderr


def test_the_coordinator_failing_ends_the_job_even_after_joining():
    proc = supervised(JOIN + "raise SystemExit(1)", rank=0)
    assert proc.returncode == -signal.SIGTERM
    assert "rank 0 exited with status 1" in proc.stderr and "coordinator" in proc.stderr


def test_a_failure_the_rank_reported_itself_gets_no_second_message():
    proc = supervised(JOIN + "supervise.ending_reported(); raise SystemExit(3)", rank=0)
    assert proc.returncode == 3 and proc.stderr == ""


def test_a_clean_exit_before_joining_is_left_alone():
    proc = supervised("pass", rank=1)
    assert proc.returncode == 0 and proc.stderr == ""


def test_the_rank_dies_with_its_supervisor():
    env = dict(os.environ, PMI_RANK="1")
    sup = subprocess.Popen([sys.executable, "-m", "emulator.coordinator.supervise", sys.executable, "-c",
                            "import time; time.sleep(60)"], cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 20
        children = []
        while not children and time.monotonic() < deadline:
            children = psutil.Process(sup.pid).children()
            time.sleep(0.05)
        assert children, "the rank never started"
        sup.kill()
        sup.wait()
        gone, alive = psutil.wait_procs(children, timeout=10)
        assert not alive
    finally:
        if sup.poll() is None:
            sup.kill()


def test_an_end_the_user_asked_for_gets_no_message():
    env = dict(os.environ, PMI_RANK="2")
    sup = subprocess.Popen([sys.executable, "-m", "emulator.coordinator.supervise", sys.executable, "-c",
                            "import time; print('up', flush=True); time.sleep(60)"],
                           cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        # the rank is up, so the supervisor (which sets its handlers as soon as the rank
        # exists) passes the signal on; the rank dies before it joined
        assert sup.stdout.readline().strip() == "up"
        sup.send_signal(signal.SIGINT)
        _, stderr = sup.communicate(timeout=20)
        assert sup.returncode == -signal.SIGINT  # the job still ends
        assert "nodesel:" not in stderr
    finally:
        if sup.poll() is None:
            sup.kill()


def test_a_job_whose_ranks_never_start_is_ended_with_a_message():
    from emulator.coordinator.launch import run_mpiexec
    from emulator.errors import UserError

    hung = [sys.executable, "-c", "import time; print('waiting', flush=True); time.sleep(60)"]
    start = time.monotonic()
    try:
        run_mpiexec(hung, start_timeout_seconds=1.0, grace_seconds=2.0)
        raise AssertionError("a job that never started was not ended")
    except UserError as e:
        assert "did not all start within 1 s" in str(e)
    assert time.monotonic() - start < 10
    assert not [p for p in psutil.process_iter(["cmdline"])
                if p.info["cmdline"] and p.info["cmdline"][-1:] == hung[-1:]]


def test_a_job_that_started_runs_to_its_end_and_one_that_failed_early_keeps_its_status():
    from emulator.coordinator.launch import run_mpiexec

    started = [sys.executable, "-c", "import os, time; from emulator.coordinator import launch; "
               "launch.report_started(); time.sleep(2); raise SystemExit(7)"]
    # runs past the start deadline because it reported its start
    assert run_mpiexec(started, start_timeout_seconds=1.0) == 7
    assert run_mpiexec([sys.executable, "-c", "raise SystemExit(5)"],
                       start_timeout_seconds=30.0) == 5


def test_a_program_job_stopped_ends_its_launcher_and_its_processes(monkeypatch):
    """ProgramJob.stop (a batch stopped with a program playing) ends the program's launcher
    through its cancel event, without waiting for the program."""
    from emulator.batch import programs
    from emulator.coordinator.launch import run_mpiexec

    marker = f"nodesel-stop-test-{os.getpid()}"
    sleeper = [sys.executable, "-c", f"import time; time.sleep(60)  # {marker}"]

    def launch(coordinator, nodes, command, *, output=None, cancel=None):
        return run_mpiexec(command, cancel=cancel, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)

    def running():
        return [p for p in psutil.process_iter(["cmdline"])
                if marker in " ".join(p.info["cmdline"] or [])]

    monkeypatch.setattr(programs, "run_on_nodes", launch)
    job = programs.ProgramJob(None, ["n1"], sleeper)
    job.start()
    try:
        deadline = time.monotonic() + 20
        while not running() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running(), "the program never started"
        start = time.monotonic()
        job.stop(wait_seconds=20)
        assert not job.is_alive() and time.monotonic() - start < 15
        assert job.error is None and job.run_result is not None
        assert not running()
    finally:
        for process in running():
            process.kill()

"""A run that is stopped ends cleanly: SIGINT, SIGTERM and SIGHUP give one line and exit
status 128 + the signal's number, leave no process and no MPICH segment in /dev/shm."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from emulator.coordinator import stop
from emulator.coordinator.launch import mpiexec_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- the pieces --------------------------------------------------------------------------

def test_the_line_names_the_signal_and_the_results_folder(tmp_path):
    assert stop.line(signal.SIGTERM) == "nodesel: stopped by SIGTERM"
    assert stop.line(signal.SIGHUP, str(tmp_path)) == \
        f"nodesel: stopped by SIGHUP; results so far in {tmp_path}"
    assert stop.line(signal.SIGINT, str(tmp_path / "never-made")) == "nodesel: stopped by SIGINT"
    assert stop.exit_status(signal.SIGTERM) == 143
    assert stop.signum_of(stop.Stopped(signal.SIGHUP)) == signal.SIGHUP
    assert stop.signum_of(KeyboardInterrupt()) == signal.SIGINT  # Ctrl-C


def test_orphans_are_unmapped_mpich_segments_made_since_the_run_began(tmp_path):
    began = time.time()
    for name in ("mpich_shm_gone_0", "mpich_shm_live_0", "ucx_shm_posix_1f2e", "other_segment"):
        (tmp_path / name).write_bytes(b"x")
    mapped = {str(tmp_path / "mpich_shm_live_0")}  # a live run's ranks map it
    assert sorted(stop.orphan_segments(began, directory=str(tmp_path), mapped=mapped)) == \
        [str(tmp_path / "mpich_shm_gone_0"), str(tmp_path / "ucx_shm_posix_1f2e")]
    # made before a run that began later: not that run's
    assert stop.orphan_segments(began + 60, directory=str(tmp_path), mapped=set()) == []


def test_a_live_processes_segment_is_never_an_orphan(tmp_path):
    import mmap

    path = tmp_path / "mpich_shm_mine_0"
    path.write_bytes(b"\0" * 4096)
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 4096):
        assert stop.orphan_segments(0, directory=str(tmp_path)) == []
    assert stop.orphan_segments(0, directory=str(tmp_path)) == [str(path)]


SECOND_SIGNAL = """
import os, signal, time
from emulator.coordinator import stop
stop.install()
both = [signal.SIGINT, signal.SIGTERM]
signal.pthread_sigmask(signal.SIG_BLOCK, both)
os.kill(os.getpid(), signal.SIGTERM)
os.kill(os.getpid(), signal.SIGINT)
try:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, both)
    time.sleep(1.0)
except stop.Stopped as e:
    print("stopped by", e.signum)
for _ in range(100):
    time.sleep(0.001)
"""


def test_a_second_signal_met_during_the_first_stop_is_ignored_quietly():
    """SIGTERM and SIGINT pending together (a launcher and Hydra both pass a stop on): the
    first raises Stopped, the second finds its handler set to ignore, and CPython's
    "ignored due to race condition" report (a traceback on stderr) is dropped."""
    proc = subprocess.run([sys.executable, "-c", SECOND_SIGNAL], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.startswith("stopped by"), proc.stderr
    assert proc.stderr == "", proc.stderr


def test_a_stop_is_on_record_before_the_handlers_are_set_to_ignore(monkeypatch):
    """A stop that comes while the first one's handler sets every handler to ignore is
    reported by CPython from inside signal.signal ("ignored due to race condition", with a
    traceback on stderr); the report is dropped only once this process is on record as
    stopped, so the record comes first."""
    on_record = []
    monkeypatch.setattr(stop, "_received", None)
    monkeypatch.setattr(stop.signal, "signal",
                        lambda s, handler: on_record.append((s, stop._received)))
    with pytest.raises(stop.Stopped):
        stop.on_signal(signal.SIGTERM, None)
    assert on_record == [(s, signal.SIGTERM) for s in stop.SIGNALS]


SAYING = """
import sys, time
from mpi4py import MPI
from emulator.coordinator import stop
say_after, wait = float(sys.argv[1]), float(sys.argv[2])
MPI.COMM_WORLD.Barrier()
began = time.monotonic()
if MPI.COMM_WORLD.Get_rank() == 0:
    if say_after >= 0:
        time.sleep(say_after)  # rank 0 writing its results
        stop.rank_0_has_said_it()
else:
    stop.let_rank_0_say_it(wait)
waited = time.monotonic() - began
if MPI.COMM_WORLD.Get_rank() and say_after >= 0:  # taken, for MPI's finalize
    MPI.COMM_WORLD.recv(source=0, tag=stop.SAID_TAG)
waited = MPI.COMM_WORLD.gather(waited, root=0)
if waited:
    print(*waited[1:], flush=True)
"""


def node_ranks_waited(say_after, wait):
    """Seconds each node rank of a 3-rank job waited for rank 0's word."""
    env = {k: v for k, v in os.environ.items() if k != stop.LAUNCHED_ENV}
    proc = subprocess.run([mpiexec_path(), "-n", "3", sys.executable, "-c", SAYING,
                           str(say_after), str(wait)], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [float(w) for w in proc.stdout.split()]


@pytest.mark.mpi
def test_node_ranks_go_when_rank_0_has_said_it_however_long_it_takes():
    if mpiexec_path() is None:
        pytest.skip("needs mpiexec (pip install mpich)")
    waited = node_ranks_waited(3.0, 20.0)  # longer than a fixed grace would give
    assert len(waited) == 2 and all(3.0 <= w < 8.0 for w in waited), waited
    waited = node_ranks_waited(-1, 1.5)  # rank 0 never says it: they go at the bound
    assert len(waited) == 2 and all(1.5 <= w < 6.0 for w in waited), waited


# -- whole commands ------------------------------------------------------------------------

def segments():
    return {n for n in os.listdir(stop.SHM_DIR) if n.startswith(stop.SEGMENT_PREFIXES)}


def emulator_processes():
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "-m emulator measure" in cmd or "hydra_pmi_proxy" in cmd:
            found.append(cmd)
    return found


def stopped(argv, sig, *, progress="measuring every pair (2/", stdout=subprocess.DEVNULL):
    """Start ``argv``, send ``sig`` once its stderr shows ``progress``; (status, stderr
    lines that are not progress, seconds from the signal to the last process gone)."""
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        deadline = time.monotonic() + 120
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if progress in line or time.monotonic() > deadline:
                break
        assert any(progress in line for line in lines), lines[-20:]
        sent = time.monotonic()
        proc.send_signal(sig)
        lines += proc.communicate(timeout=60)[1].splitlines()
        while emulator_processes() and time.monotonic() < sent + 30:
            time.sleep(0.1)
        return proc.returncode, [ln for ln in lines if not ln.startswith("measuring")], \
            time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.mpi
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=lambda s: signal.Signals(s).name)
def test_a_stopped_run_ends_in_one_line_and_leaves_nothing(sig, tmp_path):
    """One line on stderr, and nothing on stdout: Hydra's banner of the ranks' ends (5
    lines there before) is dropped as its complaints on stderr are."""
    if mpiexec_path() is None:
        pytest.skip("needs mpiexec (pip install mpich)")
    before = segments()
    with open(tmp_path / "stdout", "w") as out:
        status, said, seconds = stopped([sys.executable, "-m", "emulator", "measure",
                                         "--nodes", "6", "--rounds", "100"], sig, stdout=out)
    name = signal.Signals(sig).name
    assert status == 128 + sig, said
    assert said == [f"nodesel: stopped by {name}"]
    assert (tmp_path / "stdout").read_text() == ""
    assert seconds < 10 and not emulator_processes()
    assert segments() <= before


@pytest.mark.mpi
def test_under_the_users_own_mpiexec_rank_0_says_it_once():
    if mpiexec_path() is None:
        pytest.skip("needs mpiexec (pip install mpich)")
    before = segments()
    status, said, seconds = stopped([mpiexec_path(), "-n", "5", sys.executable, "-m", "emulator",
                                     "measure", "--rounds", "100", "--nodes", "4"],
                                    signal.SIGTERM)
    # the status is Hydra's: it ends the other ranks once one has exited (143, or 9)
    assert status != 0 and said == ["nodesel: stopped by SIGTERM"]
    assert seconds < 10 and not emulator_processes()
    assert segments() <= before  # each stopped rank unlinked its job's segments


@pytest.mark.mpi
@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGKILL],
                         ids=lambda s: signal.Signals(s).name)
def test_the_users_own_mpiexec_killed_leaves_no_segment(sig):
    """Hydra dies of a SIGHUP (and of a SIGKILL): its ranks go without a word or a chance to
    unlink anything, so the segment's name must be gone since the job began."""
    if mpiexec_path() is None:
        pytest.skip("needs mpiexec (pip install mpich)")
    before = segments()
    status, said, seconds = stopped([mpiexec_path(), "-n", "5", sys.executable, "-m", "emulator",
                                     "measure", "--rounds", "100", "--nodes", "4"], sig)
    assert status == -sig, said  # Hydra itself ended by the signal
    assert seconds < 10 and not emulator_processes()
    assert segments() <= before


def flows_ranks():
    return [p for p in psutil.process_iter(["cmdline"])
            if "python" in os.path.basename((p.info["cmdline"] or [""])[0])
            and "-m emulator flows" in " ".join(p.info["cmdline"])]


@pytest.mark.mpi
def test_a_rank_waiting_for_its_message_stops_under_the_users_own_mpiexec(tmp_path):
    """SIGINT to the user's mpiexec while a receiver waits in the compiled message path for
    a flow that has minutes to go: every rank ends within seconds, one line. Hydra's
    ``-disable-auto-cleanup`` (nodesel's own launcher uses it) does not end the others when
    one exits: the receiver used to wait out its flow, and the job with it."""
    if mpiexec_path() is None:
        pytest.skip("needs mpiexec (pip install mpich)")
    before = segments()
    flows = tmp_path / "flows.csv"
    flows.write_text("start_seconds,src,dst,size_bytes\n0,n1,n2,100000000\n")
    proc = subprocess.Popen([mpiexec_path(), "-disable-auto-cleanup", "-n", "4",
                             sys.executable, "-m", "emulator", "flows", "--nodes", "3",
                             "--flows", str(flows), "--dilation", "100"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(flows_ranks()) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(flows_ranks()) == 4, "the ranks never started"
        time.sleep(3.0)  # the flow is under way: 8 s of model time, 800 s of wall time
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    while flows_ranks() and time.monotonic() < sent + 15:
        time.sleep(0.1)
    assert time.monotonic() - sent < 15 and not flows_ranks(), err[-3000:]
    assert proc.returncode != 0
    assert [ln for ln in err.splitlines() if ln.startswith("nodesel")] == \
        ["nodesel: stopped by SIGINT"], err[-3000:]
    assert "Traceback" not in err
    assert segments() <= before


@pytest.mark.mpi
@pytest.mark.parametrize("argv, sig, progress, out", [
    (["flows", "--cluster", "hostfiles/racks12.toml", "--flows", "hostfiles/flows-racks12.csv",
      "--dilation", "200"], signal.SIGINT, "", None),
    (["batch", "--nodes", "4", "--no-progress"], signal.SIGHUP, "characteriz", "batch"),
    (["batch-experiment", "--quick", "--nodes", "4", "--no-progress"], signal.SIGTERM, "",
     "batch-experiment"),
], ids=["flows-SIGINT", "batch-SIGHUP", "batch-experiment-SIGTERM"])
def test_other_commands_that_run_the_cluster_stop_the_same_way(tmp_path, argv, sig, progress,
                                                                out):
    """Started from a command, stopped once its ranks run: one line, 128 + the signal."""
    if mpiexec_path() is None:
        pytest.skip("needs mpiexec (pip install mpich)")
    before = segments()
    argv = argv + (["--out", str(tmp_path / out)] if out else [])
    proc = subprocess.Popen([sys.executable, "-m", "emulator", *argv], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not ranks_running():
            time.sleep(0.1)
        assert ranks_running(), "the ranks never started"
        time.sleep(2.0)  # past start-up, mid-run
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    name = signal.Signals(sig).name
    said = [ln for ln in err.splitlines() if ln.startswith("nodesel")]
    assert proc.returncode == 128 + sig, err[-3000:]
    expected = f"nodesel: stopped by {name}" + (f"; results so far in {tmp_path / out}"
                                                  if out else "")
    assert said[-1] == expected and len(said) <= 2, err[-3000:]  # (batch's dilation line)
    assert "Traceback" not in err
    deadline = time.monotonic() + 10
    while ranks_running() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not ranks_running()
    assert segments() <= before


@pytest.mark.mpi
def test_a_batch_stopped_mid_play_under_the_users_own_mpiexec_says_it_at_once(tmp_path):
    """Every rank of the user's own mpiexec gets the signal. Rank 0, on its way out, would
    ask the stopped nodes to end their local users' load and wait for answers that never
    come, while Hydra, once a node rank gives up, kills it before its line: a wait for
    nodes ends at once once this process is stopped."""
    if mpiexec_path() is None:
        pytest.skip("needs mpiexec (pip install mpich)")
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_seconds,benchmark,class,tasks,memory_mb,nodes\n"
                    + "".join(f"{k},is,S,2,16,\n" for k in range(60)))
    out = tmp_path / "batch"
    before = segments()
    proc = subprocess.Popen([mpiexec_path(), "-n", "5", sys.executable, "-m", "emulator",
                             "batch", "--nodes", "4", "--jobs", str(jobs), "--no-progress",
                             "--out", str(out)], cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (out / "jobs.csv").exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # the jobs are playing once their table is first written
        assert (out / "jobs.csv").exists(), "the jobs never started"
        time.sleep(1.0)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        seconds = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    said = [ln for ln in err.splitlines() if ln.startswith("nodesel")]
    assert said and said[-1] == f"nodesel: stopped by SIGTERM; results so far in {out}", \
        err[-3000:]
    assert seconds < 5, seconds  # no rank waits for another (each would, 8 s)
    assert "Traceback" not in err
    deadline = time.monotonic() + 10
    while batch_ranks() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not batch_ranks() and segments() <= before


def batch_ranks():
    return [p for p in psutil.process_iter(["cmdline"])
            if "-m emulator batch" in " ".join(p.info["cmdline"] or [])]


def ranks_running():
    return [p.pid for p in psutil.process_iter(["cmdline"])
            if "emulator.coordinator.supervise" in " ".join(p.info["cmdline"] or [])]


def test_after_a_stop_hydras_complaints_are_dropped_and_the_rest_passes(capfd):
    import threading

    from emulator.coordinator import launch

    read, write = os.pipe()
    stopping = threading.Event()
    relay = threading.Thread(target=launch._relay, args=(os.fdopen(read, "rb"), stopping))
    relay.start()
    os.write(write, b"progress 1/9\r[proxy:0@vm] before a stop, kept\n")
    time.sleep(0.2)
    stopping.set()
    os.write(write, b"[proxy:0@vm] HYDU_sock_write (sock.c:250): write error\n"
                    b"kept after the stop\nAbort(1) on node 0 (rank 0 in comm 0): gone\n"
                    b"[mpiexec@vm] unable to forward")
    os.close(write)
    relay.join(timeout=5)
    assert capfd.readouterr().err == ("progress 1/9\r[proxy:0@vm] before a stop, kept\n"
                                      "kept after the stop\n")


def test_the_relay_writes_on_quietly_once_its_reader_has_gone():
    """A job's output passed on to a descriptor that is closed (the reader went away) is
    dropped without an error, so the relay thread lives to drain the job's pipe."""
    from emulator.coordinator import launch

    read, write = os.pipe()
    os.close(read)
    os.close(write)
    launch._write(write, b"a line nobody reads\n")  # EBADF: dropped


def test_after_a_stop_hydras_banner_on_stdout_is_dropped(capfd):
    import threading

    from emulator.coordinator import launch

    rule = "=" * 83
    banner = (f"{rule}\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
              f"=   PID 4242 RUNNING AT vm\n=   EXIT CODE: 9\n"
              f"=   CLEANING UP REMAINING PROCESSES\n"
              f"=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n{rule}\n"
              "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Terminated (signal 15)\n"
              "This typically refers to a problem with your application.\n"
              "Please see the FAQ page for debugging suggestions\n")
    read, write = os.pipe()
    stopping = threading.Event()
    relay = threading.Thread(target=launch._relay,
                             args=(os.fdopen(read, "rb"), stopping, 1))
    relay.start()
    os.write(write, b"n1 n2 12.5\n")
    time.sleep(0.2)
    stopping.set()
    os.write(write, (banner + "==== a program's own line ====\n").encode())
    os.close(write)
    relay.join(timeout=5)
    assert capfd.readouterr().out == "n1 n2 12.5\n==== a program's own line ====\n"


def test_grid_stopped_between_replications_keeps_the_finished_ones(tmp_path):
    """A simulation, not ranks: the same line and status, and what finished is on disk."""
    import json

    from stopping import stop_when

    out = tmp_path / "grid"
    status, err = stop_when(["grid", "--grid", "hostfiles/grid-homogeneous.toml",
                             "--replications", "200", "--jobs-per-site", "300", "--sharing",
                             "0,50", "--targets", "shortest-queue", "--no-progress", "--out",
                             str(out)], signal.SIGINT, (out / "summary.json").exists,
                            wait_seconds=60)
    assert status == 128 + signal.SIGINT, err[-3000:]
    assert err.splitlines() == [f"nodesel: stopped by SIGINT; results so far in {out}"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and 1 <= summary["replications_done"] < 200
    rows = (out / "replications.csv").read_text().splitlines()
    assert len(rows) > 1 and not [p for p in out.iterdir() if p.name.startswith(".tmp")]


@pytest.mark.mpi
def test_grid_over_ranks_stopped_keeps_what_every_rank_finished(tmp_path):
    """Under the user's own mpiexec each rank runs its share of the replications: rank 0
    keeps on disk every replication finished on any rank, as it arrives."""
    import csv
    import json

    from stopping import stop_when

    if mpiexec_path() is None:
        pytest.skip("needs mpiexec (pip install mpich)")
    out = tmp_path / "grid"

    def others_finished():  # replications of ranks 1 and 2 on disk
        try:
            rows = list(csv.DictReader((out / "replications.csv").open()))
        except (OSError, csv.Error):
            return False
        return {int(r["replication"]) % 3 for r in rows} == {0, 1, 2}

    status, err = stop_when(["grid", "--grid", "hostfiles/grid-homogeneous.toml",
                             "--replications", "300", "--jobs-per-site", "300", "--sharing",
                             "0,50", "--targets", "shortest-queue", "--no-progress", "--out",
                             str(out)], signal.SIGTERM, others_finished, wait_seconds=60,
                            launcher=(mpiexec_path(), "-n", "3"))
    said = [ln for ln in err.splitlines() if ln.startswith("nodesel")]
    assert said == [f"nodesel: stopped by SIGTERM; results so far in {out}"], err[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and 3 <= summary["replications_done"] < 300


def test_ranks_that_die_moments_apart_are_named_together(monkeypatch):
    """Ranks 2 and 4 of a machine die while the coordinator looks: it finds rank 2 dead
    first and, a moment later, names both, not the first alone."""
    from emulator.coordinator import runtime

    coordinator = runtime.Coordinator.__new__(runtime.Coordinator)
    looks = []

    def alive(rank):
        looks.append(rank)
        return rank not in ((2,) if len(looks) <= 4 else (2, 4))

    slept = []
    monkeypatch.setattr(coordinator, "_alive", alive)
    monkeypatch.setattr(runtime.time, "sleep", slept.append)
    assert coordinator._dead([1, 2, 3, 4]) == [2, 4]
    assert slept == [runtime.DEATH_SETTLE_SECONDS] and runtime.DEATH_SETTLE_SECONDS <= 1
    looks.clear()
    monkeypatch.setattr(coordinator, "_alive", lambda rank: True)
    assert coordinator._dead([1, 2]) == [] and slept == [runtime.DEATH_SETTLE_SECONDS]

"""Tests that run real MPI jobs with mpiexec from the mpich wheel."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from emulator.coordinator import stop
from emulator.coordinator.launch import cleanup_flags, machines_here, mpiexec_path
from emulator.shaping.comm import SEND_BUFFER_BYTES

from measuring import ATTEMPTS, flows_off_the_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(ROOT, "tests", "mpi_programs")
MPIEXEC = mpiexec_path()
# Shaping accuracy checked here, on a loaded CI machine; the 3% target is the benchmark's.
BW_TOLERANCE = 0.06

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(MPIEXEC is None, reason="needs mpiexec (pip install mpich)")]


def mpirun(n, *args, timeout=240):
    cmd = [MPIEXEC, "-disable-auto-cleanup", "-n", str(n), sys.executable, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def within(measured, expected, tolerance=BW_TOLERANCE, slack=0.0):
    """``measured`` within ``tolerance`` of ``expected``, give or take ``slack`` seconds."""
    low, high = expected * (1 - tolerance) - slack, expected * (1 + tolerance) + slack
    assert low <= measured <= high, (
        f"measured {measured:.4f} s, expected {expected:.4f} s, bounds [{low:.4f}, {high:.4f}]")


def shaped_run(engine, hosts):
    """The shaped checks' results (tests/mpi_programs/shaped_checks.py) with the ``engine``
    message path on ``hosts`` machines; ``slack``: what a relay adds to a wall time."""
    env = {**os.environ, "NODESEL_SHAPING_ENGINE": engine}
    proc = subprocess.run([MPIEXEC, *cleanup_flags(one_host=hosts == 1), *machines_here(hosts),
                           "-n", "5",
                           sys.executable, os.path.join(PROGRAMS, "shaped_checks.py")],
                          capture_output=True, text=True, timeout=240, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])["results"]
    if engine == "c" and results["engine"] != ["CompiledShapedComm"] * 4:
        pytest.skip("the compiled engine did not bind to this MPI")
    assert results["engine"] == [{"c": "CompiledShapedComm", "python": "ShapedComm"}[
        engine]] * 4
    assert results["model"] == ("ServedModel" if hosts > 1 else "ClusterModel")
    results["slack"] = RELAY_SECONDS if hosts > 1 else 0.0
    results["run"] = (engine, hosts)
    return results


@pytest.fixture(scope="module", params=[("c", 1), ("python", 1), ("c", 2), ("python", 2)],
                ids=["c", "python", "c-2hosts", "python-2hosts"])
def shaped(request):
    """The shaped checks' results with the compiled message path and with the Python one, on
    one machine (one shared model) and over two (the model served by rank 0)."""
    return shaped_run(*request.param)


def on_time(shaped, check):
    """``check(results)`` on the module's run, then on new runs while it fails, at most
    ATTEMPTS in all: a delivery's wall time has a floor a busy machine cannot break (the
    model's) and a ceiling it can, when a rank waits for a core (the 8-byte message to n3
    came 5.5 ms late, 27%, with two busy loops on this 2-core machine)."""
    results = shaped
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return check(results)
        except AssertionError:
            if attempt == ATTEMPTS:
                raise
            results = shaped_run(*shaped["run"])


MIB_BITS = 8 * (1 << 20)
# Over several machines a delivery reaches its receiver a relay after the model gave it
# (rank 0's owner thread wakes, one MPI message, the agent thread's poll; the sender's start
# reaches the owner the same way). Quiet, 0.4 ms; with two busy loops on this 2-core
# machine up to 29 ms was measured, and the wall-clock checks allow that much more.
RELAY_SECONDS = 0.04


def test_each_message_waits_its_paths_latency(shaped):
    def check(r):
        # 8 bytes from n1: to n2 behind the same switch (0.2 ms), to n3 behind another
        # (20.2 ms)
        got = dict(v for v in r["path_latency"] if v[1] is not None)
        assert got["n2"] < 0.005 + r["slack"], got
        within(got["n3"], 0.0202, tolerance=0.15, slack=r["slack"])
    on_time(shaped, check)


def test_one_flow_takes_size_over_bandwidth(shaped):
    def check(r):
        (seconds,) = r["one_flow_10"]
        within(seconds, MIB_BITS / 10e6, slack=r["slack"])
        (seconds,) = r["one_flow_10_polled"]  # waits that poll instead of doorbells
        within(seconds, MIB_BITS / 10e6, slack=r["slack"])
    on_time(shaped, check)


def _merged(reports):
    """The sender's {"sent": s} and the receiver's {"delivered": s} as one dict."""
    return {k: v for r in reports for k, v in r.items()}


def test_send_completes_once_its_remainder_fits_the_send_buffer(shaped):
    small, large = SEND_BUFFER_BYTES // 2, SEND_BUFFER_BYTES + 256 * 1024

    def check(r):
        fits = _merged(r[f"send_buffer_{small}"])
        assert fits["sent"] < 0.05 * small * 8 / 10e6, fits  # done at once, as into a socket
        within(fits["delivered"], small * 8 / 10e6, slack=r["slack"])
        over = _merged(r[f"send_buffer_{large}"])
        # held until the rest fits
        within(over["sent"], (large - SEND_BUFFER_BYTES) * 8 / 10e6, slack=r["slack"])
        within(over["delivered"], large * 8 / 10e6, slack=r["slack"])
    on_time(shaped, check)


def test_a_send_is_released_by_its_own_notice_not_an_earlier_finished_one(shaped):
    # Both share the pair until the 20 kB one is done (~32 ms); the long one's remainder
    # fits the buffer only after another 256 KiB less what it sent meanwhile, at 10 Mbit/s.
    shared = 2 * 20000 * 8 / 10e6
    expected = shared + (256 * 1024 - 20000) * 8 / 10e6

    def check(r):
        (got,) = r["same_tag"]
        assert got["short_sent"] < 0.5 * expected, got
        within(got["large_sent"], expected, tolerance=0.1, slack=r["slack"])
    on_time(shaped, check)


def test_token_bucket_lets_a_short_message_through_after_idle(shaped):
    paced = 3000 * 8 / 10e6  # 2.4 ms at the pair's 10 Mbit/s

    def check(r):
        (receiver,) = [x for x in r["bucket"] if x["idle"][0] == "delivered"]
        _, wall, model = receiver["idle"]
        assert model < 0.5 * paced, receiver  # the bucket lets it through at once
        assert wall < 0.5 * paced + r["slack"], receiver
        assert receiver["busy"][1] > paced, receiver  # no tokens left, the pair is shared
        assert receiver["busy"][2] > paced, receiver
    on_time(shaped, check)


def test_concurrent_flows_share_a_link(shaped):
    def check(r):
        (seconds,) = r["four_flows_100"]
        within(seconds, 4 * MIB_BITS / 100e6, slack=r["slack"])
    on_time(shaped, check)


def test_port_capacity_is_shared(shaped):
    def check(r):
        for seconds in r["port_shared"]:
            # two flows share n1's 100 Mbit/s port
            within(seconds, 2 * MIB_BITS / 100e6, slack=r["slack"])
    on_time(shaped, check)


def test_disjoint_groups_run_at_once(shaped):
    def check(r):
        got = dict(r["concurrent_groups"])
        within(got["n2"], (1 << 20) * 8 / 8 / 10e6, slack=r["slack"])
        within(got["n4"], (5 << 20) / 4 * 8 / 100e6, slack=r["slack"])
    on_time(shaped, check)


def test_bandwidth_change_mid_message(shaped):
    def check(r):
        ((seconds, change_after),) = r["changed"]
        assert 0.1 < change_after < 0.3  # the change falls inside the message
        first_bits = change_after * 100e6
        within(seconds, change_after + (4 * MIB_BITS - first_bits) / 25e6, slack=r["slack"])
    on_time(shaped, check)


def test_a_flow_that_ended_before_its_sender_heard_does_not_share_the_port(shaped):
    def check(r):
        (seconds,) = r["ended_before_heard"]
        # n1's port alone (the model's times: start to delivery at the receiver); counting
        # the flow that had ended would make it twice that (it did: 10.6 ms for CG's 4.5 ms
        # transposes on 4 ranks at 100 Mbit/s)
        within(seconds, 400 * 1024 * 8 / 100e6, tolerance=0.1)
    on_time(shaped, check)


def test_collectives_give_right_values(shaped):
    assert shaped["collectives_4"] == [True] * 4
    assert shaped["collectives_3"] == [True] * 3


@pytest.mark.parametrize("engine", ["c", "python"])
def test_twenty_rounds_of_mixed_traffic_in_threads_lose_no_byte(engine):
    """Heap checks on: two time-shared jobs per rank, every size class, receives before and
    after the sends, 20 rounds (tests/mpi_programs/engine_stress.py)."""
    env = {**os.environ, "NODESEL_SHAPING_ENGINE": engine, "MALLOC_CHECK_": "3",
           "MALLOC_PERTURB_": "165", "STRESS_ROUNDS": "20"}
    proc = subprocess.run([MPIEXEC, "-disable-auto-cleanup", "-n", "5", sys.executable,
                           os.path.join(PROGRAMS, "engine_stress.py")], capture_output=True,
                          text=True, timeout=240, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    per_round = 2 * 3 * sum((0, 100, 16384, 16385, 100_000, SEND_BUFFER_BYTES + 4096))
    assert out["rounds"] == 20
    assert [r["checked_bytes"] for r in out["ranks"]] == [20 * per_round] * 4
    assert [r["flows_left"] for r in out["ranks"]] == [0] * 4  # every flow ended in the model
    engines = {r["engine"] for r in out["ranks"]}
    if engine == "c" and engines != {"CompiledShapedComm"}:
        pytest.skip("the compiled engine did not bind to this MPI")
    assert engines == {"CompiledShapedComm" if engine == "c" else "ShapedComm"}


@pytest.mark.parametrize("mode", ["crash", "stall", "stall-any"])
def test_failed_node_is_named_within_the_timeout(mode):
    timeout = 4.0
    start = time.monotonic()
    proc = mpirun(4, os.path.join(PROGRAMS, "failures.py"), mode, str(timeout), timeout=60)
    elapsed = time.monotonic() - start
    assert proc.returncode != 0
    assert "probe ok" in proc.stdout
    assert "nodesel: error: node n2 failed:" in proc.stderr, proc.stderr  # n2 alone
    reason = "died" if mode == "crash" else f"within {timeout:g} s"
    assert reason in proc.stderr
    # start-up and the probe take about a second; the failure is found within the timeout
    # (plus the 2 s grace for the peers' reports)
    assert elapsed < timeout + 8, elapsed
    if mode == "crash":
        assert elapsed < timeout, "a dead local rank should be seen before the timeout"


def test_more_ranks_than_nodes_is_refused():
    proc = mpirun(7, "-m", "emulator", "demo", "--nodes", "5", timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("the cluster has 5 nodes, so run 6 ranks") == 1


@pytest.mark.parametrize("hosts", [1, 2], ids=["1host", "2hosts"])
def test_node_ranks_take_their_cluster_from_rank_0_without_networkx(tmp_path, hosts):
    """Rank 0 alone reads the files and holds the cluster's graph; the node ranks get a view
    and the model's description from it: networkx is imported once in the whole job (every
    rank imported it when each built the cluster, and the model, itself), and so are the
    TOML reader and psutil at most (node ranks with no local load need neither)."""
    flows = tmp_path / "flows.csv"
    flows.write_text("start_seconds,src,dst,size_bytes\n0,n1,n4,1000000\n0,n2,n4,1000000\n")
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.run([MPIEXEC, *cleanup_flags(one_host=hosts == 1), *machines_here(hosts),
                           "-n", "5", sys.executable, "-m", "emulator", "flows", "--nodes", "4",
                           "--flows", str(flows), "--dilation", "2", "--json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["hosts"] == hosts
    for flow in out["flows"]:  # two flows into n4's port: each half of it
        assert flow["end_seconds"] == pytest.approx(flow["model_end_seconds"], abs=0.05)
    imports = [line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
               if line.startswith("import time:")]
    assert imports.count("mpi4py.MPI") == 5  # the hook saw every rank
    assert imports.count("networkx") == 1
    # nor what only rank 0 or a local load uses: TOML files, a process's CPU and memory
    assert imports.count("tomllib") <= 1 and imports.count("psutil") <= 1, \
        (imports.count("tomllib"), imports.count("psutil"))


def test_control_messages_larger_than_an_irecv_buffer_go_through(tmp_path):
    """A work message of 2,000 flows (some 70 KB pickled) to each node rank, and each rank's
    reply on its 500 flows, are larger than the 32 KiB that a receive posted without a
    buffer takes: every rank must receive them whole (they failed as truncated, and the run
    hung on its unmatched sends)."""
    import random

    rng = random.Random(1)
    flows = tmp_path / "flows.csv"
    with open(flows, "w") as f:
        f.write("start_seconds,src,dst,size_bytes\n")
        for _ in range(2000):
            src, dst = rng.sample(["n1", "n2", "n3", "n4"], 2)
            f.write(f"{rng.uniform(0, 1):.6f},{src},{dst},1000\n")
    proc = subprocess.run([MPIEXEC, *cleanup_flags(one_host=True), "-n", "5", sys.executable,
                           "-m", "emulator", "flows", "--nodes", "4", "--flows", str(flows),
                           "--timeout-seconds", "30", "--json"],
                          capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert len(json.loads(proc.stdout)["flows"]) == 2000


def test_bad_input_on_rank_0_ends_every_rank_under_the_users_mpiexec(tmp_path):
    """The node ranks wait for rank 0's settings; rank 0 finding a bad file calls the run
    off: one line, status 2 from every rank, nothing left waiting."""
    flows = tmp_path / "flows.csv"
    flows.write_text("start_seconds,src,dst,size_bytes\n0,n1,n9,1000\n")
    start = time.monotonic()
    proc = mpirun(4, "-m", "emulator", "flows", "--nodes", "3", "--flows", str(flows),
                  timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("nodesel: error:") == 1
    assert "line 2, dst: 'n9' is not a node of the cluster" in proc.stderr
    assert time.monotonic() - start < 30


def _shm():
    return {n for n in os.listdir("/dev/shm") if n.startswith(stop.SEGMENT_PREFIXES)}


@pytest.mark.parametrize("hosts,skews", [(2, ""), (3, ""), (3, "0,0.05,-0.05")],
                         ids=["2hosts", "3hosts", "3hosts-clocks-50ms-off"])
def test_flows_over_several_machines_keep_to_the_one_model(hosts, skews):
    """Ranks on 2 and 3 Hydra proxies (MPICH takes each for a machine; racks split across
    them): rank 0 serves the model, every flow of 1 MB or more ends within 5% of it (20 ms
    floor), and nothing is left in /dev/shm. Also with the clocks of two machines 50 ms off
    either way (the test hook): each machine's offset to rank 0 is estimated and applied
    (without it 7 of the 10 flows were off, the worst by 34 ms)."""
    before = _shm()
    env = {**os.environ, "NODESEL_CLOCK_SKEW_SECONDS": skews}
    proc = subprocess.run([MPIEXEC, *machines_here(hosts), "-n", "13", sys.executable, "-m",
                           "emulator", "flows", "--cluster", "hostfiles/racks12.toml",
                           "--flows", "hostfiles/flows-racks12.csv", "--dilation", "2",
                           "--json"], capture_output=True, text=True, timeout=240, cwd=ROOT,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["hosts"] == hosts
    assert flows_off_the_model(out) == []
    assert _shm() <= before


def test_an_owner_whose_flow_table_fills_ends_the_run_in_one_line():
    """Over two machines the owner's model holds every flow of the cluster; when it can
    take no more (NODESEL_OWNER_MAX_FLOWS makes its table 4 flows), its thread ends, and the
    run must end at once, saying why, rather than wait on flows whose ends never come."""
    before = _shm()
    env = {**os.environ, "NODESEL_OWNER_MAX_FLOWS": "4"}
    began = time.monotonic()
    proc = subprocess.run([MPIEXEC, *machines_here(2), "-n", "13", sys.executable, "-m",
                           "emulator", "flows", "--cluster", "hostfiles/racks12.toml",
                           "--flows", "hostfiles/flows-racks12.csv", "--timeout-seconds", "60",
                           "--json"], capture_output=True, text=True, timeout=240, cwd=ROOT,
                          env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if line.startswith("nodesel")]
    assert said == ["nodesel: error: the served model's owner holds at most 4 flows at once, "
                    "and more were under way: set NODESEL_OWNER_MAX_FLOWS higher"], \
        proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - began < 40, "ended at once, not after the time-out"
    assert _shm() <= before


def test_a_bad_owner_table_size_is_refused_on_every_rank():
    before = _shm()
    env = {**os.environ, "NODESEL_OWNER_MAX_FLOWS": "lots"}
    proc = subprocess.run([MPIEXEC, *machines_here(2), "-n", "13", sys.executable, "-m",
                           "emulator", "flows", "--cluster", "hostfiles/racks12.toml",
                           "--flows", "hostfiles/flows-racks12.csv", "--json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines() == [
        "nodesel: error: NODESEL_OWNER_MAX_FLOWS='lots': not a positive whole number"]
    assert _shm() <= before


def _machine_dies(cleanup):
    """``emulator flows`` on two Hydra proxies (``cleanup``: mpiexec's flags), every rank of
    the second killed mid-run; (status, stderr, seconds from the kill to mpiexec's end)."""
    import psutil

    proc = subprocess.Popen([MPIEXEC, *cleanup, *machines_here(2), "-n", "13",
                             sys.executable, "-m", "emulator", "flows", "--cluster",
                             "hostfiles/racks12.toml", "--flows", "hostfiles/flows-racks12.csv",
                             "--dilation", "30"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        launcher = psutil.Process(proc.pid)
        deadline = time.time() + 60
        second = []
        while not second and time.time() < deadline:  # the second machine's proxy, its ranks
            time.sleep(0.5)
            second = [p for p in launcher.children(recursive=True)
                      if "--proxy-id 1" in " ".join(p.cmdline())]
        assert second, "the second proxy started"
        time.sleep(6)  # the flows are under way (each takes 30 times its second)
        ranks = second[0].children()
        assert len(ranks) == 6
        # the machine goes at once: its ranks are stopped together, then killed (on a busy
        # host the test may be descheduled between two kills)
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for rank in ranks:
                try:
                    rank.send_signal(sig)
                except psutil.NoSuchProcess:
                    pass  # gone already: the run saw it die
        killed = time.time()
        out, err = proc.communicate(timeout=120)
        return proc.returncode, err, time.time() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _no_rank_left():
    import psutil

    def ranks_left():
        return [p for p in psutil.process_iter(["cmdline"])
                if "emulator flows" in " ".join(p.info["cmdline"] or [])]

    gone_by = time.time() + 15  # the last ranks may still be on their way out
    while ranks_left() and time.time() < gone_by:
        time.sleep(0.2)
    return not ranks_left()


def test_a_machine_that_dies_is_named_and_nothing_is_left():
    """Every rank of one of two machines killed mid-run (mpiexec keeps the others): the run
    names the dead nodes in one line and ends with status 3 within seconds, no rank stays,
    and the MPICH segments of both machines go."""
    before = _shm()
    status, err, seconds = _machine_dies(["-disable-auto-cleanup"])
    assert seconds < 30, "the run ends soon after the machine is gone"
    assert status == 3, err[-2000:]
    said = [ln for ln in err.splitlines() if ln.startswith("nodesel")]
    assert len(said) == 1 and "n1, n3, n5, n7, n9, n11 failed" in said[0], err[-2000:]
    assert "Traceback" not in err
    assert _no_rank_left()
    assert _shm() <= before


def test_a_machine_that_dies_under_hydras_own_cleanup_leaves_nothing():
    """With mpiexec's default cleanup Hydra kills every rank as soon as one machine's die
    (its own words, status 255): no rank has a chance to unlink anything, so the segments'
    names must be gone since the job began."""
    before = _shm()
    status, err, seconds = _machine_dies([])
    assert status != 0 and seconds < 30, err[-2000:]
    assert _no_rank_left()
    assert _shm() <= before


def _machine_freezes(proxy_id):
    """``emulator flows`` on two Hydra proxies, the machine of proxy ``proxy_id`` frozen
    mid-run (its proxy and ranks stopped: its sockets stay open, as a machine's do when it
    hangs or its network is cut); (status, stderr, seconds from the freeze to mpiexec's end).
    The machine is thawed at the end, so that its processes can end."""
    import psutil

    env = {**os.environ, "NODESEL_HOST_SILENT_SECONDS": "3"}
    proc = subprocess.Popen([MPIEXEC, *machines_here(2), "-n", "13", sys.executable, "-m",
                             "emulator", "flows", "--cluster", "hostfiles/racks12.toml",
                             "--flows", "hostfiles/flows-racks12.csv", "--dilation", "50"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=env)
    frozen = []
    try:
        launcher = psutil.Process(proc.pid)
        deadline = time.time() + 60
        while not frozen and time.time() < deadline:
            time.sleep(0.5)
            frozen = [p for p in launcher.children()
                      if f"--proxy-id {proxy_id}" in " ".join(p.cmdline())]
        assert frozen, "the proxy started"
        time.sleep(6)  # the flows are under way (each takes 50 times its second)
        frozen += frozen[0].children()
        assert len(frozen) == (8 if proxy_id == 0 else 7)
        for p in frozen:
            p.send_signal(signal.SIGSTOP)
        stopped = time.time()
        out, err = proc.communicate(timeout=60)
        return proc.returncode, err, time.time() - stopped
    finally:
        for p in frozen:
            try:
                p.send_signal(signal.SIGCONT)
            except psutil.NoSuchProcess:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_a_machine_that_goes_silent_is_named_and_the_run_ends():
    """A machine frozen whole never closes a socket, so neither Hydra nor MPI sees it go:
    the owner, which hears from each machine's agent at least every second, names it once
    it has been silent for NODESEL_HOST_SILENT_SECONDS (3 here), and the run ends with
    status 3 instead of waiting for ever; once thawed, nothing of it is left."""
    before = _shm()
    status, err, seconds = _machine_freezes(1)
    assert status == 3, err[-2000:]
    assert seconds < 20, "the run ends soon after the machine goes silent"
    said = [ln for ln in err.splitlines() if ln.startswith("nodesel")]
    assert said == ["nodesel: error: machine 2 of 2 (" + os.uname().nodename + "; ranks 1, 3, "
                    "5, 7, 9, 11) sent nothing for 3 s (its agent, rank 1, pings every 1 s): "
                    "down or cut off; the run cannot go on without its nodes' flows"], err
    assert "Traceback" not in err and "Abort(" not in err  # MPICH's own line: not repeated
    assert _no_rank_left()
    assert _shm() <= before


def test_a_silent_owner_machine_ends_the_run_in_one_line():
    """The owner's machine frozen (rank 0 with it): the other machine's agent, whose clock
    pings go unanswered, says so and ends the job."""
    before = _shm()
    status, err, seconds = _machine_freezes(0)
    assert status == 3, err[-2000:]
    assert seconds < 20, "the run ends soon after the owner goes silent"
    said = [ln for ln in err.splitlines() if ln.startswith("nodesel")]
    assert len(said) == 1 and said[0].startswith(
        "nodesel: error: the served model's owner, rank 0 on machine 1 of 2 (") and \
        said[0].endswith("answered no clock ping for 3 s: down or cut off"), err
    assert "Traceback" not in err and "Abort(" not in err
    assert _no_rank_left()
    assert _shm() <= before


def test_a_measurement_over_two_machines_sees_the_true_bandwidths():
    """NWS probes between nodes on two Hydra proxies, through the served model."""
    proc = subprocess.run([MPIEXEC, *machines_here(2), "-n", "5", sys.executable, "-m",
                           "emulator", "measure", "--nodes", "4", "--rounds", "1",
                           "--probe-bytes", str(1 << 20), "--json"],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    graph = json.loads(proc.stdout)
    assert len(graph["links"]) == 6
    for edge in graph["links"]:
        true = edge["true_bandwidth_mbps"]
        assert abs(edge["measured_mbps"] - true) / true < 0.1, edge


def test_demo_is_a_short_experiment(tmp_path):
    from emulator.cli import build_parser

    defaults = build_parser().parse_args(["demo"])
    assert (defaults.benchmarks, defaults.repeats, defaults.default_out) == (
        "cg,is,mg", 2, "results/demo")
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "emulator", "demo", "--benchmarks", "cg",
                           "--repeats", "1", "--nodes", "5", "--app-iterations", "1",
                           "--trial-iterations", "2", "--out", str(out)],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| cg |" in proc.stdout and "pattern/random" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and set(summary["slowdown_pct"]["cg"]) == {
        "pattern", "all-all", "random"}
    assert (out / "figure3.png").exists()


def test_no_stray_processes_after_runs():
    """Every job above ended its ranks and load processes."""
    time.sleep(0.5)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    strays = [line for line in ps.splitlines()
              if ("hydra_pmi_proxy" in line or "emulator.coordinator.load" in line)]
    assert not strays, strays


def test_measure_gives_a_status_graph_with_forecasts():
    # 1 MiB probes (the library's default; 84 ms at 100 Mbit/s): a receiver that wakes a
    # few ms late on a busy 2-core host then costs a few percent, not the whole tolerance
    proc = subprocess.run([sys.executable, "-m", "emulator", "measure", "--nodes", "4",
                           "--rounds", "2", "--probe-bytes", str(1 << 20), "--json"],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    graph = json.loads(proc.stdout)
    assert "timestamp" in graph["graph"]
    assert len(graph["links"]) == 6  # every pair of 4 nodes
    for edge in graph["links"]:
        assert edge["forecast_error_mbps"] is not None  # scored after the second round
        assert edge["predictor"]
        true = edge["true_bandwidth_mbps"]
        assert abs(edge["measured_mbps"] - true) / true < 0.1, edge


def test_a_rank_sends_to_itself_over_a_link_beyond_any_tc_rate():
    # 1 MiB (larger than the send buffer) at 10^6 Mbit/s, which tc could not take
    code = """
import numpy as np
from mpi4py import MPI
from emulator.network.cluster import crossbar
from emulator.shaping.comm import Network, ShapedComm
net = Network.private(crossbar(["a"], capacity_mbps=1e6))
comm = ShapedComm(MPI.COMM_SELF.Dup(), [0], ["a"], net)
out, back = np.arange(1 << 17, dtype=np.float64), np.zeros(1 << 17)
reqs = [comm.Irecv(back, 0, 1), comm.Isend(out, 0, 1)]
reqs[0].Waitall(reqs)
print(bool((back == out).all()))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["True"]

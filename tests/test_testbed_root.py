"""The namespace testbed for real: namespaces, veths, a bridge, HTB, and MPI across them.

Needs root (and the ip, tc and unshare programs); skips with a reason elsewhere.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from emulator.coordinator.launch import mpiexec_path
from emulator.kernel import command
from emulator.kernel.testbed import Layout, Testbed
from measuring import best_of, host_state, traces_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "ntst"

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, tc)"),
    pytest.mark.skipif(not all(shutil.which(p) for p in ("ip", "tc", "unshare")),
                       reason="needs ip, tc and unshare (iproute2, util-linux)"),
]


def nodesel(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "emulator", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout)


@pytest.fixture
def testbed(tmp_path):
    up = nodesel("testbed", "up", "--nodes", "4", "--capacity-mbps", "100", "--bandwidth-mbps",
                 "20", "--name", NAME, "--out", str(tmp_path), "--state-dir", str(tmp_path))
    assert up.returncode == 0, up.stderr
    yield tmp_path
    down = nodesel("testbed", "down", "--name", NAME, "--state-dir", str(tmp_path))
    assert down.returncode == 0, down.stderr
    assert not traces_of(NAME)


def test_up_and_down_leave_nothing(testbed):
    assert sorted(t for t in traces_of(NAME) if "-v" not in t and not t.endswith("-br")) == \
        sorted(f"{NAME}-{h}" for h in ("c", "n1", "n2", "n3", "n4"))
    qdisc = command.run(["tc", "-n", f"{NAME}-n1", "qdisc", "show", "dev", "eth0"])
    assert "htb" in qdisc
    down = nodesel("testbed", "down", "--name", NAME, "--state-dir", str(testbed))
    assert down.returncode == 0 and not traces_of(NAME)
    again = nodesel("testbed", "down", "--name", NAME, "--state-dir", str(testbed))
    assert again.returncode == 0 and "nothing to remove" in again.stdout  # idempotent
    assert not list(testbed.glob(f"{NAME}*"))


RECEIVER = """
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5201)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); got = 0; start = None
while True:
    data = c.recv(1 << 16)
    if not data:
        break
    if start is None:
        start = time.monotonic()
    got += len(data)
print(got * 8 / (time.monotonic() - start) / 1e6)
"""
SENDER = """
import socket, sys
s = socket.create_connection((sys.argv[1], 5201)); s.sendall(b"x" * int(sys.argv[2])); s.close()
"""


def test_a_shaped_pair_measures_its_rate(testbed):
    def measure():
        receiver = subprocess.Popen(["ip", "netns", "exec", f"{NAME}-n2", sys.executable, "-c",
                                     RECEIVER], stdout=subprocess.PIPE, text=True)
        assert receiver.stdout.readline().strip() == "ready"
        subprocess.run(["ip", "netns", "exec", f"{NAME}-n1", sys.executable, "-c", SENDER,
                        Layout(NAME, 4).address("n2").split("/")[0], str(5 * 2**20)],
                       check=True, timeout=60)
        return float(receiver.communicate(timeout=60)[0].strip())

    rates = best_of(measure, lambda mbps: 20 * 0.95 <= mbps <= 20 * 1.05)
    assert all(mbps <= 20 * 1.05 for mbps in rates), rates  # never above the shaped rate
    assert 20 * 0.95 <= rates[-1], (rates, host_state())


MPI_PROGRAM = """
import socket, time
import numpy as np
from mpi4py import MPI
w = MPI.COMM_WORLD
buf = np.ones(1 << 20, dtype=np.uint8)
w.Barrier()
if w.rank == 1:
    w.Send(buf, 2)
elif w.rank == 2:
    start = time.monotonic(); w.Recv(buf, 1); took = time.monotonic() - start
names = w.gather(socket.gethostname())
took = w.bcast(took if w.rank == 2 else None, root=2)
if w.rank == 0:
    print(" ".join(names), took)
"""


# A DNS server that notes every name it is asked for and never answers (as some sites'
# resolvers do with names they do not know): a lookup waits out the resolver's timeout.
SILENT_DNS = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], 53))
print("ready", flush=True)
while True:
    query = s.recvfrom(512)[0][12:]
    labels, i = [], 0
    while i < len(query) and query[i]:
        labels.append(query[i + 1:i + 1 + query[i]].decode(errors="replace")); i += 1 + query[i]
    print(".".join(labels), flush=True)
"""
# Run a command in a private mount namespace whose /etc/resolv.conf names that server.
WITH_RESOLVER = """
import os, subprocess, sys
subprocess.run(["mount", "--bind", sys.argv[1], "/etc/resolv.conf"], check=True)
os.execvp(sys.argv[2], sys.argv[2:])
"""


@pytest.mark.skipif(mpiexec_path() is None, reason="needs mpiexec (pip install mpich)")
def test_mpi_job_across_namespaces_feels_the_shaping(testbed):
    program = testbed / "prog.py"
    program.write_text(MPI_PROGRAM)
    resolv = testbed / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.53\n")
    expected = (1 << 20) * 8 / 20e6  # 0.42 s at 20 Mbit/s

    def measure():
        dns = subprocess.Popen([sys.executable, "-c", SILENT_DNS, "127.0.0.53"],
                               stdout=subprocess.PIPE, text=True)
        try:
            assert dns.stdout.readline().strip() == "ready"
            proc = subprocess.run(["unshare", "--mount", "--", sys.executable, "-c",
                                   WITH_RESOLVER, str(resolv), mpiexec_path(), "-launcher", "ssh",
                                   "-launcher-exec", str(testbed / f"{NAME}-launcher"), "-f",
                                   str(testbed / f"{NAME}.hosts"), "-n", "4", sys.executable,
                                   str(program)], capture_output=True, text=True, timeout=120)
        finally:
            dns.kill()
        asked = dns.communicate()[0].split()
        assert not [name for name in asked if name.startswith(NAME)], asked  # no name looked up
        assert proc.returncode == 0, proc.stderr[-3000:]
        *names, took = proc.stdout.split()
        assert names == [f"{NAME}-c", f"{NAME}-n1", f"{NAME}-n2", f"{NAME}-n3"]
        return float(took)

    times = best_of(measure, lambda took: expected * 0.9 <= took <= expected * 1.3)
    assert all(expected * 0.9 <= took for took in times), times  # never faster than shaped
    assert times[-1] <= expected * 1.3, (times, host_state())


def test_a_failed_tc_command_rolls_everything_back(tmp_path):
    calls = []

    def failing(argv):
        calls.append(argv)
        if argv[:1] == ["tc"] and "filter" in argv and len(
                [a for a in calls if a[:1] == ["tc"] and "filter" in a]) == 5:
            raise command.CommandError(argv, 2, "injected failure")
        return command.run(argv)

    bed = Testbed(Layout(NAME, 4), state_dir=str(tmp_path), run=failing)
    with pytest.raises(command.CommandError, match="injected failure"):
        bed.up(100, lambda a, b: 50.0, out_dir=str(tmp_path))
    assert any(a[:3] == ["ip", "netns", "add"] for a in calls)  # things had been made
    assert not traces_of(NAME)
    assert not os.path.exists(bed.path) and not list(tmp_path.iterdir())


@pytest.fixture
def slow_n5(tmp_path):
    """A 5-node testbed where every pair with n5 has 10 Mbit/s and the others 100."""
    nodes = [f"n{i}" for i in range(1, 6)]
    links = [{"source": a, "target": b, "bandwidth_mbps": 10.0 if "n5" in (a, b) else 100.0}
             for i, a in enumerate(nodes) for b in nodes[i + 1:]]
    scenario = tmp_path / "static.json"
    scenario.write_text(json.dumps({"directed": False, "multigraph": False, "graph": {},
                                    "nodes": [{"id": n} for n in nodes], "links": links}))
    up = nodesel("testbed", "up", "--nodes", "5", "--scenario", str(scenario), "--name", NAME,
                 "--out", str(tmp_path), "--state-dir", str(tmp_path))
    assert up.returncode == 0, up.stderr
    try:
        yield tmp_path
    finally:
        down = nodesel("testbed", "down", "--name", NAME, "--state-dir", str(tmp_path))
        assert down.returncode == 0, down.stderr
    assert not traces_of(NAME)


@pytest.mark.skipif(mpiexec_path() is None, reason="needs mpiexec (pip install mpich)")
def test_run_tries_the_skeleton_command_and_runs_the_app_on_the_best_group(slow_n5):
    tmp_path = slow_n5
    launcher = tmp_path / f"{NAME}-launcher"
    mpi = f"{mpiexec_path()} -launcher ssh -launcher-exec {launcher} -f {{machinefile}} " \
          f"-n {{nprocs}} {sys.executable} -m skeletons cg --class S"
    out = tmp_path / "run"
    run = nodesel("run", "--pattern", "cg", "--nprocs", "4", "--skeleton-cmd",
                  mpi, "--app-cmd", mpi + " --iterations 2",
                  "--shaping", "tc", "--testbed-name", NAME, "--state-dir", str(tmp_path),
                  "--out", str(out),
                  timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads((out / "run.json").read_text())
    assert len(result["trial_seconds"]) == len(result["selection"]["candidates"]) >= 1
    chosen = result["selection"]["candidates"][result["chosen"]]
    assert "n5" not in chosen["nodes"]  # every pair with n5 is slow
    lines = (out / "machinefile").read_text().split()
    layout = Layout(NAME, 5)  # the machinefile names hosts by address, as the hostfile does
    assert lines == [f"{layout.ip(chosen['mapping'][str(r)])}:1" for r in range(4)]
    assert result["app_exit_status"] == 0 and result["app_seconds"] > 0
    status = json.loads((out / "status.json").read_text())
    slow = [e["measured_mbps"] for e in status["links"] if "n5" in (e["source"], e["target"])]
    assert max(slow) < 12  # measured through the kernel's shaping


MPICC = os.path.join(os.path.dirname(sys.executable), "mpicc")


@pytest.mark.skipif(mpiexec_path() is None or not os.path.exists(MPICC)
                    or shutil.which("gcc") is None and shutil.which("cc") is None,
                    reason="needs the mpich wheel's mpicc and a C compiler")
def test_run_with_a_c_program_built_by_the_wheels_mpicc(slow_n5):
    # a run launches the program at least twice (a trial per candidate group, then the
    # application): those launches once ended with SIGPIPE in 5 runs of 6
    tmp_path = slow_n5
    ring = tmp_path / "ring"
    build = subprocess.run([MPICC, "-O2", "-o", str(ring),
                            os.path.join(ROOT, "tests", "mpi_programs", "ring.c")],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    launcher = tmp_path / f"{NAME}-launcher"
    launch = f"{mpiexec_path()} -launcher ssh -launcher-exec {launcher}" \
             " -f {machinefile} -n {nprocs}"
    out = tmp_path / "run"
    run = nodesel("run", "--pattern", "ring", "--nprocs", "4", "--skeleton-cmd",
                  f"{launch} {ring} 3", "--app-cmd", f"{launch} {ring} 10",
                  "--shaping", "tc", "--testbed-name", NAME, "--state-dir", str(tmp_path), "--out",
                  str(out), "--timeout-seconds", "120", timeout=400)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "ring: 4 ranks, 10 iterations" in run.stdout
    result = json.loads((out / "run.json").read_text())
    assert len(result["trial_seconds"]) >= 1
    assert "n5" not in result["selection"]["candidates"][result["chosen"]]["nodes"]


@pytest.mark.skipif(mpiexec_path() is None, reason="needs mpiexec (pip install mpich)")
def test_experiment_runs_with_the_kernel_shaping(tmp_path):
    out = tmp_path / "exp"
    proc = nodesel("experiment", "--shaping", "tc", "--testbed", "netns", "--testbed-name",
                   "ntsx", "--nodes", "5", "--benchmarks", "cg", "--repeats", "1",
                   "--app-iterations", "1", "--trial-iterations", "2", "--probe-bytes",
                   str(2 << 20), "--out", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"]
    assert all(isinstance(v, float) for v in summary["slowdown_pct"]["cg"].values())
    assert not traces_of("ntsx")  # the run's own testbed is gone


@pytest.mark.skipif(mpiexec_path() is None, reason="needs mpiexec (pip install mpich)")
def test_run_stopped_in_its_trials_ends_the_step_and_says_so_once(testbed):
    """SIGTERM while a candidate's command runs: the step's processes go with the run."""
    import signal

    import psutil
    from stopping import gone, stop_when

    out = testbed / "run"
    marker = "3600.5"  # a sleep no other process runs

    def steps():
        return [p for p in psutil.process_iter(["cmdline"])
                if p.info["cmdline"] == ["sleep", marker]]
    status, err = stop_when(["run", "--pattern", "cg", "--nprocs", "4", "--skeleton-cmd",
                             f"sleep {marker}", "--app-cmd", "true", "--shaping", "tc",
                             "--testbed-name", NAME,
                             "--state-dir", str(testbed), "--out", str(out)],
                            signal.SIGTERM, steps)
    assert status == 128 + signal.SIGTERM, err[-3000:]
    assert err.splitlines() == [f"nodesel: stopped by SIGTERM; results so far in {out}"]
    assert (out / "status.json").exists()  # the measurement finished and was kept
    assert gone(steps)

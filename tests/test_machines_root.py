"""Fake machines for real (``nodesel testbed up --machines``): each a network, hostname,
IPC, PID and mount namespace of its own, and one emulated cluster spread over them.

Needs root (and the ip and unshare programs); skips with a reason elsewhere."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from emulator.coordinator.launch import mpiexec_path
from emulator.coordinator.node import machine
from measuring import flows_off_the_model, traces_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIEXEC = mpiexec_path()

def _can_make_machines():
    """Whether this root may make PID and mount namespaces with a /proc of their own (a
    container may not)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "--ipc", "--pid", "--fork", "--mount-proc", "true"],
                          capture_output=True).returncode == 0


pytestmark = [
    pytest.mark.root, pytest.mark.mpi,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)"),
    pytest.mark.skipif(not all(shutil.which(p) for p in ("ip", "unshare")),
                       reason="needs ip and unshare (iproute2, util-linux)"),
    pytest.mark.skipif(MPIEXEC is None, reason="needs mpiexec (pip install mpich)"),
    pytest.mark.skipif(not _can_make_machines(), reason="needs to make PID and mount "
                       "namespaces with their own /proc (unshare --pid --mount-proc)"),
]


def nodesel(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "emulator", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout)


@pytest.fixture(scope="module", params=[2, 3], ids=lambda h: f"{h}-machines")
def machines(request, tmp_path_factory):
    """(number of machines, the mpiexec options that run ranks over them)."""
    count, name = request.param, f"nmach{request.param}"
    folder = tmp_path_factory.mktemp(name)
    up = nodesel("testbed", "up", "--machines", str(count), "--name", name, "--subnet",
                 f"10.79.{count}.0/24", "--out", str(folder), "--state-dir", str(folder))
    assert up.returncode == 0, up.stderr
    yield count, ["-launcher", "ssh", "-launcher-exec", str(folder / f"{name}-launcher"),
                  "-f", str(folder / f"{name}.hosts")]
    down = nodesel("testbed", "down", "--name", name, "--state-dir", str(folder))
    assert down.returncode == 0, down.stderr
    assert not traces_of(name)
    again = nodesel("testbed", "down", "--name", name, "--state-dir", str(folder))
    assert again.returncode == 0 and "nothing to remove" in again.stdout  # idempotent


def run(options, n, *argv, timeout=240):
    proc = subprocess.run([MPIEXEC, *options, "-n", str(n), sys.executable, *argv],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_each_machine_has_its_own_name_memory_and_processes(machines):
    """Ranks dealt round the machines: those of one machine share its hostname, IPC and PID
    namespaces and /dev/shm (and MPI's COMM_TYPE_SHARED group); no two machines share any,
    and this machine's /dev/shm sees none of their files. The coordinator's liveness check
    takes ranks for its own machine's (whose PIDs it may look up) only within one."""
    count, options = machines
    rows = [json.loads(line) for line in run(options, 2 * count, os.path.join(
        ROOT, "tests", "mpi_programs", "machine_view.py")).splitlines()]
    by_host = {}
    for row in rows:
        by_host.setdefault(row["host"], []).append(row)
    assert len(by_host) == count
    for host, ranks in by_host.items():
        assert {r["rank"] % count for r in ranks} == {ranks[0]["rank"] % count}
        assert len({(r["ipc"], r["pidns"]) for r in ranks}) == 1
        assert all(r["local"] == 2 for r in ranks)
        assert all(r["shm"] == sorted(f"nodesel-view-{x['rank']}" for x in ranks)
                   for r in ranks)
        assert all(r["pid"] < 100 for r in ranks)  # numbered in the machine's own namespace
        assert len({r["machine"] for r in ranks}) == 1
    assert len({(r["ipc"], r["pidns"]) for r in rows}) == count
    assert len({r["machine"] for r in rows}) == count and machine() not in \
        {r["machine"] for r in rows}
    assert os.stat("/proc/self/ns/ipc").st_ino not in {r["ipc"] for r in rows}
    assert not [f for f in os.listdir("/dev/shm") if f.startswith("nodesel-view-")]


def test_flows_over_fake_machines_keep_to_the_one_model(machines):
    """Racks split over the machines (ranks dealt round them): every flow of 1 MB or more
    within 5% of the model (20 ms floor)."""
    count, options = machines
    out = json.loads(run(options, 13, "-m", "emulator", "flows", "--cluster",
                         "hostfiles/racks12.toml", "--flows", "hostfiles/flows-racks12.csv",
                         "--dilation", "2", "--json"))
    assert out["hosts"] == count
    assert flows_off_the_model(out) == []


def test_a_skeleton_over_fake_machines_takes_its_time_on_one(machines):
    """IS class S on 4 nodes at 10 Mbit/s a pair, dilation 4: over the machines within 10%
    of its time with every rank on this machine (each message's end is relayed through
    rank 0's owner across machines: 18% more at dilation 1, 4% at 4), the same bytes."""
    count, options = machines
    program = os.path.join(ROOT, "tests", "mpi_programs", "skeleton_on_emulator.py")

    def one(*options):
        result = json.loads(run(options, 5, program, "is", "10", "4").splitlines()[-1])
        return max(r["seconds"] for r in result.values()), \
            sorted(r["bytes_sent"] for r in result.values())

    here, spread = one("-disable-auto-cleanup"), one(*options)
    assert spread[1] == here[1]
    assert abs(spread[0] / here[0] - 1) <= 0.1, (spread[0], here[0])

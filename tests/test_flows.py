"""``nodesel flows``: flows files, the model's ends, and the emulated cluster against them."""

import json
import os
import subprocess
import sys

import pytest

from emulator.coordinator.launch import mpiexec_path
from measuring import best_of, host_state

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RACKS = os.path.join(ROOT, "hostfiles", "racks12.toml")
FLOWS = os.path.join(ROOT, "hostfiles", "flows-racks12.csv")
KEYS = ["id", "src", "dst", "size_bytes", "start_seconds", "end_seconds", "model_end_seconds"]
# a loaded 2-core CI machine runs 13 ranks here; the 5% target is the benchmark's
TOLERANCE, FLOOR_SECONDS = 0.10, 0.02


def nodesel(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "emulator", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def test_model_only_prints_the_documented_json():
    proc = nodesel("flows", "--cluster", RACKS, "--flows", FLOWS, "--model-only", "--json")
    assert proc.returncode == 0, proc.stderr
    flows = json.loads(proc.stdout)["flows"]
    assert [list(f) for f in flows] == [KEYS] * 10
    assert [f["id"] for f in flows] == list(range(10))
    assert all(f["end_seconds"] is None for f in flows)
    # flows 0-2 leave rack 1 together at 0 s: 150 Mbit/s of uplink shared three ways; each
    # waits its path's latency, four links of 0.1 ms (node, rack, core, rack, node)
    first = flows[2]
    assert first["model_end_seconds"] == pytest.approx(
        (2e6 * 8 - 3028 * 8) / 50e6 + 0.0004, rel=1e-6)


@pytest.mark.parametrize("text, where", [
    ("start,src,dst,size\n0,n1,n2,1\n", "line 1"),
    ("start_seconds,src,dst,size_bytes\nsoon,n1,n2,1000\n", "line 2, start_seconds"),
    ("start_seconds,src,dst,size_bytes\n0,n1,n99,1000\n", "line 2, dst"),
    ("start_seconds,src,dst,size_bytes\n0,n1,n1,1000\n", "line 2, dst"),
    ("start_seconds,src,dst,size_bytes\n0,n1,n2,1000\n1,n2,n3,-5\n", "line 3, size_bytes"),
    ("start_seconds,src,dst,size_bytes\n0,n1,n2\n", "line 2"),
    ("start_seconds,src,dst,size_bytes\n", "no flows listed"),
])
def test_a_bad_flows_file_gets_one_line_naming_the_place(tmp_path, text, where):
    path = tmp_path / "f.csv"
    path.write_text(text)
    proc = nodesel("flows", "--flows", str(path), "--model-only")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and where in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.mpi
@pytest.mark.skipif(mpiexec_path() is None, reason="needs mpiexec (pip install mpich)")
def test_the_emulated_racks_deliver_each_flow_when_the_model_says(tmp_path):
    plot = tmp_path / "flows.png"

    def measure():
        proc = nodesel("flows", "--cluster", RACKS, "--flows", FLOWS, "--json", "--plot",
                       str(plot), timeout=400)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        # each flow's lateness against the model, and what it is allowed
        return [(f["end_seconds"] - f["model_end_seconds"],
                 max(TOLERANCE * (f["model_end_seconds"] - f["start_seconds"]), FLOOR_SECONDS))
                for f in json.loads(proc.stdout)["flows"]]

    # a busy host delays an end and never brings one forward: late is judged on the best of
    # a few runs, early on every run
    runs = best_of(measure, lambda flows: all(abs(late) <= allowed for late, allowed in flows))
    assert all(-allowed <= late for flows in runs for late, allowed in flows), runs
    assert all(late <= allowed for late, allowed in runs[-1]), (runs, host_state())


@pytest.mark.mpi
@pytest.mark.skipif(mpiexec_path() is None, reason="needs mpiexec (pip install mpich)")
def test_a_scenario_change_mid_flow_is_seen_by_the_emulated_flow(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("time_seconds,a,b,bandwidth_mbps\n0.3,n1,n2,20\n")
    flows = tmp_path / "f.csv"
    flows.write_text("start_seconds,src,dst,size_bytes\n0,n1,n2,5000000\n0.1,n3,n4,1000000\n")
    proc = nodesel("flows", "--nodes", "4", "--flows", str(flows), "--scenario", str(trace),
                   "--json", "--dilation", "2", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = json.loads(proc.stdout)["flows"]
    # 100 Mbit/s for 0.3 s (30 Mbit, less the bucket's burst), then 20 Mbit/s for the rest
    assert first["model_end_seconds"] == pytest.approx(0.3 + (40e6 - 30e6 - 3028 * 8) / 20e6
                                                       + 0.0001, rel=1e-6)
    for f in (first, second):
        span = f["model_end_seconds"] - f["start_seconds"]
        assert abs(f["end_seconds"] - f["model_end_seconds"]) <= max(TOLERANCE * span,
                                                                     FLOOR_SECONDS), f

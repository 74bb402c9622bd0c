"""The synthetic local load really consumes what it is asked to, as psutil measures it."""

import os
import socket
import sys
import time

import psutil
import pytest

from emulator.coordinator.load import LoadSpec, LocalLoad

CPU_POINTS = 5.0


def test_load_is_measured_near_its_targets():
    spec = LoadSpec()  # Hanzich et al.: 15% CPU, 35% memory, 0.5 KB/s
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    sink.settimeout(0.1)
    try:
        with LocalLoad(spec, memory_mb=512, burn_cpu=True, lan_to=sink.getsockname()) as load:
            load.wait_ready()  # what it measures counts from here
            got_bytes, until = 0, time.monotonic() + 4.0
            while time.monotonic() < until:
                try:
                    got_bytes += len(sink.recv(4096))
                except socket.timeout:
                    pass
            got = load.measure()
            pid = load.pid
    finally:
        sink.close()
    assert got["alive"]
    assert abs(got["cpu_percent"] - 15.0) <= CPU_POINTS, got
    assert got["rss_mb"] >= 0.35 * 512, got
    assert got["rss_mb"] <= 0.35 * 512 + 64, got
    assert got["lan_bytes_per_second"] == pytest.approx(512, rel=0.25), got
    assert got_bytes / 4.0 == pytest.approx(512, rel=0.25)  # and they arrive where sent
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_modelled_load_holds_its_memory_and_burns_nothing():
    """Under --cpu model the local user's CPU share is a flow of the model, not the
    process's; it still holds its memory."""
    with LocalLoad(LoadSpec(), memory_mb=256) as load:
        load.wait_ready()
        held = load.measure()["rss_mb"]  # held already when ready: jobs never meet its start
        time.sleep(1.5)
        got = load.measure()
    assert held >= 0.35 * 256, held
    assert got["cpu_percent"] < 3.0, got
    assert got["rss_mb"] >= 0.35 * 256, got
    assert got["lan_bytes_per_second"] == 0, got


def test_a_load_that_cannot_hold_its_memory_says_so():
    with pytest.raises(RuntimeError, match="exited with code"):
        LocalLoad(LoadSpec(memory_fraction=0.9), memory_mb=2**40).wait_ready()


def test_a_load_whose_output_ends_before_it_exits_is_still_a_failure(monkeypatch):
    """On a busy machine a dying load's output can close well before its exit status is
    there: its end is still a failure, with its code (it passed as ready before)."""
    import subprocess

    from emulator.coordinator import load

    dying = [sys.executable, "-c", "import os, sys, time; os.close(1); time.sleep(0.5); "
             "sys.exit(3)"]
    real = subprocess.Popen
    monkeypatch.setattr(load.subprocess, "Popen", lambda argv, **kw: real(dying, **kw))
    with pytest.raises(RuntimeError, match="exited with code 3 before it held"):
        LocalLoad(LoadSpec(), memory_mb=512).wait_ready()


def test_a_load_whose_node_is_gone_before_it_is_ready_ends_quietly():
    """A run stopped while a node starts its local user closes the load's pipe before the
    load says it is ready: the load ends at once, status 0, with nothing on stderr."""
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "emulator.coordinator.load",
                             "--memory-bytes", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # long before its imports are done and it says "ready"
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0 and err == b"", err.decode()[-2000:]


@pytest.mark.parametrize("kwargs", [dict(cpu_fraction=1.5), dict(memory_fraction=-0.1),
                                    dict(lan_bytes_per_second=-1)])
def test_bad_load_specs(kwargs):
    with pytest.raises(ValueError):
        LoadSpec(**kwargs)


def test_the_kernel_cpu_says_in_one_line_why_it_cannot_run(monkeypatch):
    from emulator.kernel import cgroups

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "needs root" in cgroups.unavailable()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(cgroups, "hierarchy", lambda: None)
    assert "cgroup cpu controller" in cgroups.unavailable()

"""The synthetic local load really consumes what it is asked to, as psutil measures it."""

import time

import psutil
import pytest

from emulator.coordinator.load import LoadSpec, LocalLoad, modeled_compute_seconds

CPU_POINTS = 5.0


def test_load_is_measured_near_its_targets():
    spec = LoadSpec()  # Hanzich et al.: 15% CPU, 35% memory, 0.5 KB/s
    with LocalLoad(spec, memory_mb=512) as load:
        time.sleep(1.0)  # allocation and start-up
        load.measure()
        time.sleep(4.0)
        got = load.measure()
        pid = load.pid
    assert got["alive"]
    assert abs(got["cpu_percent"] - 15.0) <= CPU_POINTS, got
    assert got["rss_mb"] >= 0.35 * 512, got
    assert got["rss_mb"] <= 0.35 * 512 + 64, got
    assert got["lan_bytes_per_second"] == pytest.approx(512, rel=0.25), got
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("kwargs", [dict(cpu_fraction=1.5), dict(memory_fraction=-0.1),
                                    dict(lan_bytes_per_second=-1)])
def test_bad_load_specs(kwargs):
    with pytest.raises(ValueError):
        LoadSpec(**kwargs)


def test_modeled_compute_follows_seed_000():
    assert modeled_compute_seconds(10.0, 0.0) == 10.0
    assert modeled_compute_seconds(10.0, 0.15) == pytest.approx(11.5)

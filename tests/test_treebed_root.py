"""The tree testbed for real: switch namespaces, shaped trunks, TCP across them, a scenario
change on a trunk, and MPI flows through it.

Needs root (and the ip, tc and unshare programs); skips with a reason elsewhere.
"""

import contextlib
import json
import os
import subprocess
import sys
import time

import pytest

from emulator.coordinator.launch import mpiexec_path
from emulator.kernel import transfer
from emulator.kernel.treebed import open_testbed
from emulator.network import cluster as clusters
from emulator.network.scenario import Timeline
from measuring import best_of, host_state
from test_testbed_root import nodesel, pytestmark, traces_of  # noqa: F401 (pytestmark: root, skips)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

NAME = "ntree"
CLUSTER = """topology = "tree"
capacity_mbps = 100
switches = ["core", "r1", "r2"]
nodes = [{name = "n1", switch = "r1"}, {name = "n2", switch = "r1"},
         {name = "n3", switch = "r2"}, {name = "n4", switch = "r2"}]
links = [{a = "r1", b = "core", capacity_mbps = 150}, {a = "r2", b = "core", capacity_mbps = 150}]
"""


@pytest.fixture
def tree(tmp_path):
    path = tmp_path / "racks.toml"
    path.write_text(CLUSTER)
    up = nodesel("testbed", "up", "--cluster", str(path), "--name", NAME, "--out",
                 str(tmp_path), "--state-dir", str(tmp_path))
    assert up.returncode == 0, up.stderr
    bed, _ = open_testbed(NAME, str(tmp_path))
    yield bed, tmp_path
    down = nodesel("testbed", "down", "--name", NAME, "--state-dir", str(tmp_path))
    assert down.returncode == 0, down.stderr
    assert not traces_of(NAME)


def transfers(bed, flows, seconds):
    return transfer.run_transfers(lambda n: bed.layout.namespace(bed.host(n)),
                                  lambda n: bed.layout.ip(bed.host(n)), flows, seconds=seconds)


def test_two_racks_up_and_down_leave_nothing(tree):
    bed, tmp_path = tree
    names = {t for t in traces_of(NAME) if t.startswith(f"{NAME}-") and "-v" not in t}
    assert {f"{NAME}-s{k}" for k in (1, 2, 3)} <= names
    assert {f"{NAME}-n{i}" for i in (1, 2, 3, 4)} <= names
    bridges = subprocess.run(["ip", "-n", f"{NAME}-s2", "-o", "link", "show", "type", "bridge"],
                             capture_output=True, text=True, check=True).stdout
    assert "br0" in bridges
    down = nodesel("testbed", "down", "--name", NAME, "--state-dir", str(tmp_path))
    assert down.returncode == 0 and not traces_of(NAME)
    again = nodesel("testbed", "down", "--name", NAME, "--state-dir", str(tmp_path))
    assert again.returncode == 0 and "nothing to remove" in again.stdout


def test_two_transfers_share_the_uplink_they_cross(tree):
    bed, _ = tree

    def measure(flows, seconds, settle_seconds):
        reports = transfers(bed, flows, seconds=seconds)
        window = transfer.common_window(reports, settle_seconds=settle_seconds)
        return [transfer.rate_mbps(r, *window) for r in reports]

    # 150 Mbit/s between two flows whose ports would each carry 100
    shared = best_of(lambda: measure([("n1", "n3"), ("n2", "n4")], 3.5, 0.75),
                     lambda rates: all(75 * 0.95 <= r <= 75 * 1.05 for r in rates))
    assert all(r <= 75 * 1.05 for rates in shared for r in rates), shared
    assert all(75 * 0.95 <= r for r in shared[-1]), (shared, host_state())
    # within a rack: the port's 100
    alone = best_of(lambda: measure([("n1", "n2")], 2.0, 0.5),
                    lambda rates: 95 <= rates[0] <= 105)
    assert all(rates[0] <= 105 for rates in alone) and 95 <= alone[-1][0], (alone, host_state())


def test_a_scenario_change_on_a_trunk_reaches_a_running_transfer(tree):
    bed, tmp_path = tree
    cluster = bed.cluster
    links = clusters.links(cluster)
    uplink = [i for i, (a, b, _) in enumerate(links) if {a, b} == {"r1", "core"}][0]
    path = tmp_path / "uplink.json"
    Timeline(links, [c for _, _, c in links], [(1.5, uplink, 40.0)],
             {"duration_seconds": 1.5}).write(str(path))

    def measure():
        player = subprocess.Popen([sys.executable, "-m", "emulator", "testbed", "play",
                                   "--scenario", str(path), "--name", NAME, "--state-dir",
                                   str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        start = time.time()
        (report,) = transfers(bed, [("n1", "n3")], seconds=3.5)
        out, err = player.communicate(timeout=30)
        assert player.returncode == 0, err
        changed = start + 1.5
        return (transfer.rate_mbps(report, report["first"] + 0.3, changed - 0.3),
                transfer.rate_mbps(report, changed + 0.5, report["last"] - 0.2))

    # (a starved player changes the trunk late, and the rate after it is judged on the best)
    rates = best_of(measure, lambda r: 95 <= r[0] <= 105 and 38 <= r[1] <= 42)
    assert all(before <= 105 for before, _ in rates), rates
    assert 95 <= rates[-1][0] and 38 <= rates[-1][1] <= 42, (rates, host_state())


def with_mpi(test):
    return pytest.mark.mpi(pytest.mark.skipif(
        mpiexec_path() is None, reason="needs mpiexec (pip install mpich)")(test))


def cluster_and_flows(tmp_path, rows):
    cluster, flows = tmp_path / "racks.toml", tmp_path / "flows.csv"
    cluster.write_text(CLUSTER)
    flows.write_text("start_seconds,src,dst,size_bytes\n" + rows)
    return cluster, flows


@with_mpi
def test_flows_through_a_tree_testbed_end_as_the_model_says(tmp_path):
    # two flows out of rack 1 share its uplink; a third from n1 joins them on the uplink and
    # on n1's port, and max-min gives all three 50 Mbit/s until it ends
    cluster, flows = cluster_and_flows(tmp_path, "0,n1,n3,6000000\n0,n2,n4,6000000\n"
                                                 "0.1,n1,n4,4000000\n")

    def measure():
        proc = nodesel("flows", "--cluster", str(cluster), "--flows", str(flows), "--shaping",
                       "tc", "--testbed", "netns", "--testbed-name", "ntrf", "--json")
        assert proc.returncode == 0, proc.stderr
        assert not traces_of("ntrf")
        # each flow's lateness against the model, as a fraction of the time the model gives it
        return [(row["end_seconds"] - row["model_end_seconds"])
                / (row["model_end_seconds"] - row["start_seconds"])
                for row in json.loads(proc.stdout)["flows"]]

    # (a flow that starts late leaves the others more: early and late are judged on the best)
    lateness = best_of(measure, lambda late: len(late) == 3 and all(abs(x) <= 0.1 for x in late))
    assert len(lateness[-1]) == 3 and all(abs(x) <= 0.1 for x in lateness[-1]), \
        (lateness, host_state())


@with_mpi
def test_a_flow_keeps_moving_while_its_sender_waits_for_its_next(tmp_path):
    # n1 sends 6 MB at 0 and its next flow at 0.3 s: in between it only waits, and MPI
    # moves a message only when the rank drives it (stalled, the first ended 46-49% late)
    cluster, flows = cluster_and_flows(tmp_path, "0,n1,n3,6000000\n0.3,n1,n4,2000000\n")

    def measure():
        proc = nodesel("flows", "--cluster", str(cluster), "--flows", str(flows), "--shaping",
                       "tc", "--testbed", "netns", "--testbed-name", "ntrw", "--json")
        assert proc.returncode == 0, proc.stderr
        assert not traces_of("ntrw")
        first = json.loads(proc.stdout)["flows"][0]
        return (first["end_seconds"] - first["model_end_seconds"]) / first["model_end_seconds"]

    lateness = best_of(measure, lambda late: abs(late) <= 0.1)
    assert abs(lateness[-1]) <= 0.1, (lateness, host_state())


@contextlib.contextmanager
def streams_testbed(tmp_path, name):
    """The tree testbed with real background streams, brought down (and checked) after."""
    path = tmp_path / "racks.toml"
    path.write_text(CLUSTER)
    up = nodesel("testbed", "up", "--cluster", str(path), "--name", name, "--background",
                 "real", "--state-dir", str(tmp_path))
    assert up.returncode == 0, up.stderr
    try:
        yield open_testbed(name, str(tmp_path))[0]
    finally:
        down = nodesel("testbed", "down", "--name", name, "--state-dir", str(tmp_path))
        assert down.returncode == 0, down.stderr
        assert not traces_of(name)


def stream_agents():
    """The stream agents' processes still running."""
    return subprocess.run(["pgrep", "-f", "emulator.kernel.streams"], capture_output=True,
                          text=True).stdout.split()


def test_real_background_streams_take_their_max_min_share(tmp_path):
    with streams_testbed(tmp_path, "ntbg") as bed:
        links = clusters.links(bed.cluster)
        uplink = [i for i, (a, b, _) in enumerate(links) if {a, b} == {"r1", "core"}][0]
        initial = [0] * len(links)
        initial[uplink] = 2  # two competing streams each way from t=0, none after 2 s
        scenario = tmp_path / "streams.json"
        Timeline(links, [c / (s + 1) for (_, _, c), s in zip(links, initial)],
                 [(2.0, uplink, 150.0)], {"duration_seconds": 2.0},
                 (initial, [0])).write(str(scenario))

        def measure():
            player = subprocess.Popen([sys.executable, "-m", "emulator", "testbed", "play",
                                       "--scenario", str(scenario), "--name", "ntbg",
                                       "--state-dir", str(tmp_path)], cwd=ROOT,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(0.7)  # the agents start and their streams settle
            start = time.time()
            (report,) = transfers(bed, [("n1", "n3")], seconds=3.0)
            out, err = player.communicate(timeout=30)
            assert player.returncode == 0, err
            assert not stream_agents()  # the agents end with the play
            changed = start + 1.3  # the streams stop 2 s after play started
            return (transfer.rate_mbps(report, report["first"] + 0.3, changed - 0.2),
                    transfer.rate_mbps(report, changed + 0.5, report["last"] - 0.2))

        # beside two streams the flow gets a third of the 150 Mbit/s uplink; then its port (a
        # starved stream leaves the flow more, so both bounds are judged on the best attempt)
        rates = best_of(measure, lambda r: 50 * 0.9 <= r[0] <= 50 * 1.1 and 95 <= r[1] <= 105)
        assert all(alone <= 105 for _, alone in rates), rates
        beside, alone = rates[-1]
        assert 50 * 0.9 <= beside <= 50 * 1.1 and 95 <= alone, (rates, host_state())


@with_mpi
def test_a_killed_tc_run_leaves_nothing_behind(tmp_path):
    cluster, flows = cluster_and_flows(tmp_path, "0,n1,n3,3000000\n")
    run = subprocess.Popen([sys.executable, "-m", "emulator", "flows", "--cluster", str(cluster),
                            "--flows", str(flows), "--shaping", "tc", "--testbed", "netns",
                            "--testbed-name", "ntk", "--dilation", "50"], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not subprocess.run(  # until the ranks run
            ["pgrep", "-f", "supervise.*testbed-name ntk"], capture_output=True,
            text=True).stdout.split():
        time.sleep(0.2)
    time.sleep(1.0)
    assert traces_of("ntk")
    run.terminate()  # SIGTERM, as kill or a batch system's time limit sends
    out, err = run.communicate(timeout=60)
    assert run.returncode == 143 and err.strip().splitlines()[-1] == \
        "nodesel: stopped by SIGTERM", err[-3000:]
    assert not traces_of("ntk")
    left = subprocess.run(["pgrep", "-f", "testbed-name ntk|ntk-launcher"], capture_output=True,
                          text=True)
    assert not left.stdout.split()  # the ranks, and Hydra's proxies in the namespaces


def test_play_stopped_ends_its_stream_agents_and_says_so_once(tmp_path):
    import signal

    from stopping import gone, stop_when

    with streams_testbed(tmp_path, "ntst") as bed:
        links = clusters.links(bed.cluster)
        scenario = tmp_path / "long.json"
        Timeline(links, [c / 2 for _, _, c in links], [(600.0, 0, 150.0)],
                 {"duration_seconds": 600.0}, ([1] * len(links), [0])).write(str(scenario))
        status, err = stop_when(["testbed", "play", "--scenario", str(scenario), "--name",
                                 "ntst", "--state-dir", str(tmp_path)], signal.SIGINT,
                                stream_agents, wait_seconds=30)
        assert status == 128 + signal.SIGINT, err[-3000:]
        assert err.splitlines() == ["nodesel: stopped by SIGINT"]
        assert gone(stream_agents)

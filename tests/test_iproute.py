"""The iproute2 command builders, the testbed's bookkeeping and the scenario player, with a
fake runner that records argvs (no root needed)."""

import json
import os
import subprocess
import sys

import pytest

from emulator.errors import UserError
from emulator.kernel import command, iproute
from emulator.kernel.tcplayer import ScenarioPlayer, plan_scripts
from emulator.kernel.testbed import Layout, Testbed, launch_in_namespace
from emulator.network import cluster as clusters
from emulator.network import sharing
from emulator.network.scenario import Timeline

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class FakeRunner:
    """Records every argv; fails on the n-th command whose argv contains ``fail_on``."""

    def __init__(self, fail_on=None, fail_at=1):
        self.argvs, self.fail_on, self.fail_at, self.seen = [], fail_on, fail_at, 0
        self.links, self.namespaces = set(), set()
        self.addresses = []  # (interface, address/prefix) the host has
        self.inside = {}  # namespace: the processes (Popen) running in it

    def __call__(self, argv):
        assert isinstance(argv, list) and all(isinstance(a, str) for a in argv), argv
        if self.fail_on and self.fail_on in " ".join(argv):
            self.seen += 1
            if self.seen == self.fail_at:
                raise command.CommandError(argv, 2, "RTNETLINK answers: injected failure")
        self.argvs.append(argv)
        # enough of the kernel's state for the testbed's existence checks
        if argv[:3] == ["ip", "netns", "add"]:
            self.namespaces.add(argv[3])
        elif argv[:3] == ["ip", "netns", "delete"]:
            self.namespaces.discard(argv[3])
        elif argv[:3] == ["ip", "netns", "list"]:
            return "".join(f"{n}\n" for n in sorted(self.namespaces))
        elif argv[:3] == ["ip", "netns", "pids"]:
            return "".join(f"{p.pid}\n" for p in self.inside.get(argv[3], []) if p.poll() is None)
        elif argv[:4] == ["ip", "link", "add", "name"]:
            self.links.add(argv[4])
        elif argv[:3] == ["ip", "link", "delete"]:
            self.links.discard(argv[4])
        elif argv[:3] == ["ip", "-j", "-4"]:
            return json.dumps([{"ifname": i, "addr_info": [
                {"local": a.split("/")[0], "prefixlen": int(a.split("/")[1])}]}
                for i, a in self.addresses])
        elif argv[:4] == ["ip", "link", "show", "dev"]:
            if argv[4] not in self.links:
                raise command.CommandError(argv, 1, f'Device "{argv[4]}" does not exist.')
        return ""


def test_rates_and_bursts_follow_the_tc_vocabulary():
    assert iproute.rate_arg(100) == "100000kbit"
    assert iproute.rate_arg(33.333) == "33333kbit"
    assert sharing.burst_bytes(1000) == 25_000  # 0.2 ms at 1 Gbit/s
    assert sharing.burst_bytes(10) == 3028  # never below two frames
    # the kernel's classes hold 2 ms more, for HTB's late timers
    assert iproute.htb_burst_bytes(100) == 3028 + 25_000
    assert iproute.htb_burst_bytes(1000) == 25_000 + 250_000
    port = iproute.change_port_rate("nsel-n1", "eth0", 100)[0]
    assert port[port.index("burst") + 1] == port[port.index("cburst") + 1] == "28028"


def test_shaping_builds_a_port_class_and_one_class_and_filter_per_destination():
    cmds = iproute.add_shaping("nsel-n1", "eth0", 100, [(3, "10.77.0.2", 25.0),
                                                        (4, "10.77.0.3", 250.0)])
    assert cmds[0] == ["tc", "-n", "nsel-n1", "qdisc", "add", "dev", "eth0", "root", "handle",
                       "1:", "htb", "default", "fff"]
    port = cmds[1]
    assert port[port.index("classid") + 1] == "1:1" and "100000kbit" in port
    leaf = cmds[3]
    assert leaf[leaf.index("parent") + 1] == "1:1" and leaf[leaf.index("classid") + 1] == "1:3"
    assert leaf[leaf.index("rate") + 1] == leaf[leaf.index("ceil") + 1] == "25000kbit"
    assert cmds[4][-4:] == ["dst", "10.77.0.2/32", "flowid", "1:3"]
    capped = cmds[5]
    assert capped[capped.index("rate") + 1] == "100000kbit"  # a pair never exceeds the port
    change = iproute.change_rate("nsel-n1", "eth0", 3, 10, 100)[0]
    assert change[:6] == ["tc", "-n", "nsel-n1", "class", "change", "dev"]
    assert change[change.index("rate") + 1] == "10000kbit"
    assert iproute.add_shaping(None, "eth0", 100, [])[0][:2] == ["tc", "qdisc"]


@pytest.mark.parametrize("call", [
    lambda: iproute.add_namespace("bad name; rm -rf /"),
    lambda: iproute.add_namespace("x" * 16),
    lambda: iproute.add_bridge("br0", "10.0.0.1"),  # no prefix length
    lambda: iproute.add_bridge("br0", "10.0.0.300/24"),
    lambda: iproute.change_rate("ns", "eth0", 3, -5, 100),
    lambda: iproute.change_rate("ns", "eth0", 3, float("nan"), 100),
    lambda: iproute.add_shaping("ns", "eth0", 100, [(3, "10.0.0.2", 10), (3, "10.0.0.3", 10)]),
    lambda: iproute.add_shaping("ns", "eth0", 100, [(3, "$(reboot)", 10)]),
    lambda: Layout("Bad", 4),
    lambda: Layout("nsel", 300),
    lambda: Layout("nsel", 0),
])
def test_bad_values_never_reach_a_command(call):
    with pytest.raises(iproute.InvalidTestbedValue):
        call()


def test_runner_raises_with_argv_and_stderr():
    with pytest.raises(command.CommandError) as e:
        command.run([sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"])
    assert e.value.returncode == 3 and e.value.stderr == "boom" and sys.executable in str(e.value)
    with pytest.raises(command.CommandError, match="not found"):
        command.run(["/nonexistent/program"])
    assert command.run([sys.executable, "-c", "print('ok')"]) == "ok\n"
    with pytest.raises(TypeError):
        command.run("ls -l")  # a string is not an argv


def test_testbed_up_and_down_with_a_fake_runner(tmp_path):
    run = FakeRunner()
    bed = Testbed(Layout("tb", 3), state_dir=str(tmp_path), run=run)
    files = bed.up(100, lambda a, b: 50.0, out_dir=str(tmp_path))
    assert run.namespaces == {"tb-c", "tb-n1", "tb-n2", "tb-n3"}
    assert run.links == {"tb-br", "tb-vc", "tb-vn1", "tb-vn2", "tb-vn3"}
    hosts = [line for line in open(files["hostfile"]).read().splitlines()
             if not line.startswith("#")]
    # addresses, not names: mpiexec resolves every host, and no resolver knows the names
    assert hosts == ["10.77.0.253:1", "10.77.0.1:1", "10.77.0.2:1", "10.77.0.3:1"]
    assert os.access(files["launcher"], os.X_OK)
    sent = [a for a in run.argvs if a[3:5] == ["class", "add"]]
    assert len(sent) == 3 * (2 + 2)  # port, default and two destinations per node
    # what a node receives: its port, under it the data's leaf and the pure ACKs' (served
    # first, their filter the only one there)
    received = [a for a in run.argvs if a[:3] == ["tc", "class", "add"]]
    assert [a[a.index("dev") + 1] for a in received] == \
        [dev for dev in ("tb-vn1", "tb-vn2", "tb-vn3") for _ in range(3)]
    acks = [a for a in received if a[a.index("classid") + 1] == "1:ffe"]
    assert len(acks) == 3 and all(a[a.index("prio") + 1] == "0" for a in acks)
    filters = [a for a in run.argvs if a[:3] == ["tc", "filter", "add"]]
    assert [(a[a.index("dev") + 1], a[-1]) for a in filters] == \
        [("tb-vn1", "1:ffe"), ("tb-vn2", "1:ffe"), ("tb-vn3", "1:ffe")]
    state = json.load(open(bed.path))
    assert [c["kind"] for c in state["created"]][:3] == ["bridge", "netns", "link"]
    removed = bed.down()
    assert not run.namespaces and not run.links
    assert not os.path.exists(bed.path) and not os.path.exists(files["hostfile"])
    assert len(removed) == 2 + 4 + 5
    assert bed.down() == []  # idempotent


@pytest.mark.parametrize("fail_on,fail_at", [("netns add", 3), ("veth", 2), ("qdisc add", 2),
                                             ("filter add", 4), ("route add", 1)])
def test_failure_part_way_through_up_rolls_back(tmp_path, fail_on, fail_at):
    run = FakeRunner(fail_on=fail_on, fail_at=fail_at)
    bed = Testbed(Layout("tb", 3), state_dir=str(tmp_path), run=run)
    with pytest.raises(command.CommandError, match="injected failure"):
        bed.up(100, lambda a, b: 50.0, out_dir=str(tmp_path))
    assert not run.namespaces and not run.links
    assert not os.path.exists(bed.path)
    assert sorted(os.listdir(tmp_path)) == []


def test_down_touches_only_what_the_state_file_lists(tmp_path):
    run = FakeRunner()
    run.links.add("eth0")  # the machine's own interface
    run.namespaces.add("someone-else")
    bed = Testbed(Layout("tb", 2), state_dir=str(tmp_path), run=run)
    bed.up(100, lambda a, b: 100.0)
    bed.down()
    assert run.links == {"eth0"} and run.namespaces == {"someone-else"}
    deleted = [a for a in run.argvs if "delete" in a]
    assert all(any(x.startswith("tb-") for x in a) for a in deleted)


def test_down_ends_what_still_runs_in_its_namespaces_first(tmp_path):
    # a Hydra proxy whose mpiexec was killed waits for ever once its link is gone
    run = FakeRunner()
    bed = Testbed(Layout("tb", 2), state_dir=str(tmp_path), run=run)
    bed.up(100, lambda a, b: 100.0)
    polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time\n"
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                 "print('ready', flush=True); time.sleep(60)"],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert stubborn.stdout.readline().strip() == "ready"
        run.inside = {"tb-n1": [polite], "tb-n2": [stubborn]}
        bed.down()
        assert polite.wait(timeout=5) == -15 and stubborn.wait(timeout=5) == -9
    finally:
        for p in (polite, stubborn):
            p.kill()
            p.wait()
    order = [" ".join(a) for a in run.argvs]
    assert order.index("ip netns pids tb-n2") < order.index("ip netns delete tb-n2")
    assert not run.namespaces


def test_up_refuses_a_testbed_that_is_already_up(tmp_path):
    bed = Testbed(Layout("tb", 2), state_dir=str(tmp_path), run=FakeRunner())
    bed.up(100, lambda a, b: 100.0)
    with pytest.raises(Exception, match="already up"):
        Testbed(Layout("tb", 2), state_dir=str(tmp_path), run=FakeRunner()).up(
            100, lambda a, b: 100.0)


def test_up_refuses_a_subnet_another_testbed_or_the_host_uses(tmp_path):
    Testbed(Layout("tb", 2), state_dir=str(tmp_path), run=FakeRunner()).up(
        100, lambda a, b: 100.0)
    run = FakeRunner()
    with pytest.raises(UserError, match=r"overlaps 10\.77\.0\.0/24 of testbed 'tb'"):
        Testbed(Layout("tq", 2), state_dir=str(tmp_path), run=run).up(100, lambda a, b: 100.0)
    assert not run.namespaces and not run.links  # refused before anything was made
    Testbed(Layout("tq", 2, "10.78.0.0/24"), state_dir=str(tmp_path), run=FakeRunner()).up(
        100, lambda a, b: 100.0)
    run = FakeRunner()
    run.addresses = [("lo", "127.0.0.1/8"), ("eth0", "10.79.0.17/16")]
    with pytest.raises(UserError, match=r"overlaps 10\.79\.0\.17/16 on this host's eth0"):
        Testbed(Layout("tr", 2, "10.79.3.0/24"), state_dir=str(tmp_path / "other"),
                run=run).up(100, lambda a, b: 100.0)
    assert not run.namespaces and not run.links


def _timeline():
    cluster = clusters.crossbar(3)
    links = [tuple(l) for l in clusters.links(cluster)]
    events = [(30.0, 0, 50.0), (60.0, 1, 20.0), (90.0, 0, 100.0)]
    return cluster, Timeline(links, [100.0] * len(links), events, {"kind": "test"})


def test_player_changes_only_the_pairs_a_change_touches():
    cluster, timeline = _timeline()
    calls = []
    player = ScenarioPlayer(cluster, timeline, lambda a, b, r: calls.append((a, b, r)),
                            ["n1", "n2", "n3"])
    slept, now = [], [1000.0]

    def sleep(s):
        slept.append(s)
        now[0] += s

    player.play(time_scale=10.0, sleep=sleep, clock=lambda: now[0])
    assert len(calls) == 6 + 3 * 2  # every pair at the start, then both directions per change
    a, b, _ = timeline.links[0]
    assert calls[6:8] == [(a, b, 50.0), (b, a, 50.0)]
    assert slept == pytest.approx([3.0, 3.0, 3.0])  # 30 scenario seconds at time scale 10


def test_plan_scripts_quote_everything_and_follow_the_scenario():
    cluster, timeline = _timeline()
    addresses = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"}
    scripts = plan_scripts(cluster, timeline, addresses, interface="ens3")
    assert set(scripts) == set(addresses)
    text = scripts["n1"]
    assert "tc qdisc add dev ens3 root handle 1: htb default fff" in text
    assert "sleep 30.000" in text and "tc qdisc delete dev ens3 root" in text
    proc = subprocess.run(["sh", "-n"], input=text, text=True, capture_output=True)
    assert proc.returncode == 0, proc.stderr  # valid shell
    with pytest.raises(iproute.InvalidTestbedValue):
        plan_scripts(cluster, timeline, dict(addresses, n3="10.0.0.3; reboot"))


def test_launcher_rewrites_the_control_port_and_enters_the_namespace(monkeypatch):
    seen = {}
    monkeypatch.setattr(os, "execvpe", lambda f, argv, env: seen.update(argv=argv, env=env))
    launch_in_namespace(["-x", "tb-n1", "/venv/bin/hydra_pmi_proxy", "--control-port",
                         "myhost:4242", "--rmk", "user"], gateway="10.77.0.254")
    argv = seen["argv"]
    assert argv[:6] == ["ip", "netns", "exec", "tb-n1", "unshare", "--uts"]
    assert argv[argv.index("--control-port") + 1] == "10.77.0.254:4242"
    assert seen["env"]["UCX_TLS"] == "tcp,self" and seen["env"]["UCX_NET_DEVICES"] == "eth0"
    with pytest.raises(iproute.InvalidTestbedValue):
        launch_in_namespace(["-x", "tb-n1;reboot", "cmd"], gateway="10.77.0.254")


def test_launcher_maps_a_hostfile_address_to_its_namespace(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(os, "execvpe", lambda f, argv, env: seen.update(argv=argv))
    bed = Testbed(Layout("tb", 2), state_dir=str(tmp_path), run=FakeRunner())
    files = bed.up(100, lambda a, b: 50.0, out_dir=str(tmp_path))
    namespaces = {}
    exec(compile(open(files["launcher"]).read().split("sys.exit(")[0], "launcher", "exec"),
         namespaces)  # the launcher file's own table, as written
    launch_in_namespace(["-x", "10.77.0.2", "proxy"], gateway="10.77.0.254",
                        namespaces=namespaces["NAMESPACES"])
    assert seen["argv"][3] == "tb-n2" and seen["argv"][seen["argv"].index("as-host") + 1] == "tb-n2"
    launch_in_namespace(["-x", "10.77.0.253", "proxy"], gateway="10.77.0.254",
                        namespaces=namespaces["NAMESPACES"])
    assert seen["argv"][3] == "tb-c"
    with pytest.raises(iproute.InvalidTestbedValue):  # an address of no namespace
        launch_in_namespace(["-x", "10.77.0.9", "proxy"], gateway="10.77.0.254",
                            namespaces=namespaces["NAMESPACES"])
    bed.down()


def test_testbed_commands_explain_missing_root(tmp_path, monkeypatch, capsys):
    # what a user who is not root sees (as root too: the process is told it is uid 1000)
    from emulator.cli import main
    from emulator.kernel import command

    def refuse(argv, **kwargs):  # were the check to fail, nothing is made as root here
        raise command.CommandError(argv, 1, "the test runs no command")

    monkeypatch.setattr(command.subprocess, "run", refuse)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    for argv in (["up", "--nodes", "2"], ["down"]):
        assert main(["testbed", *argv, "--state-dir", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "the namespace testbed needs root" in err, argv
    assert os.listdir(tmp_path) == []  # nothing was recorded: nothing was made


def test_segment_size_follows_the_port_speed():
    assert iproute.segment_limit(100) == ["gso_max_size", "2500"]  # one 1448-byte segment
    assert iproute.segment_limit(1000) == ["gso_max_size", "25000"]
    assert iproute.segment_limit(100_000) == ["gso_max_size", "65536"]

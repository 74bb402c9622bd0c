"""The tree testbed's plan (switches, trunks, per-pair classes), its refusals and its scenario
player, with the fake runner of test_iproute (no root needed)."""

import json
import os
import subprocess
import sys

import pytest

from emulator.errors import UserError
from emulator.kernel import streams, treebed
from emulator.kernel.tcplayer import LinkPlayer, StreamPlayer, player_for
from emulator.kernel.treebed import TreeTestbed, check_tree
from emulator.network import cluster as clusters
from emulator.network.scenario import Timeline, generate_streams
from test_iproute import FakeRunner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TWO_RACKS = {"topology": "tree", "capacity_mbps": 100, "switches": ["core", "r1", "r2"],
             "nodes": [{"name": "a", "switch": "r1"}, {"name": "b", "switch": "r1"},
                       {"name": "c", "switch": "r2"}],
             "links": [{"a": "r1", "b": "core", "capacity_mbps": 150},
                       {"a": "r2", "b": "core", "capacity_mbps": 150}]}


def two_racks():
    return clusters.cluster_from_dict(json.loads(json.dumps(TWO_RACKS)))


def test_up_builds_switches_trunks_and_ports_and_down_removes_them(tmp_path):
    run = FakeRunner()
    bed = TreeTestbed.for_cluster("tt", two_racks(), state_dir=str(tmp_path), run=run)
    files = bed.up(out_dir=str(tmp_path))
    assert run.namespaces == {"tt-c", "tt-s1", "tt-s2", "tt-s3", "tt-n1", "tt-n2", "tt-n3"}
    assert bed.root == "core" and bed.switch_namespace("core") == "tt-s1"
    # every direction of every link is shaped once, at its capacity (payload rate plus frames)
    roots = [(a[2], a[a.index("dev") + 1]) for a in run.argvs
             if a[0] == "tc" and a[3:5] == ["qdisc", "add"]]
    assert sorted(roots) == sorted([("tt-n1", "eth0"), ("tt-n2", "eth0"), ("tt-n3", "eth0"),
                                    ("tt-s2", "p1"), ("tt-s2", "p2"), ("tt-s3", "p3"),
                                    ("tt-s2", "t1"), ("tt-s1", "t2"), ("tt-s3", "t1"),
                                    ("tt-s1", "t3")])
    link_classes = [a for a in run.argvs if a[0] == "tc" and "classid" in a
                    and a[a.index("classid") + 1] == "1:1"]
    rates = {(a[2], a[a.index("dev") + 1]): a[a.index("rate") + 1] for a in link_classes}
    assert rates[("tt-s2", "t1")] == "156837kbit"  # 150 Mbit/s of payload in 1514-byte frames
    assert rates[("tt-n1", "eth0")] == "104558kbit"
    # the rack-1 uplink carries a->c and b->c: one leaf and filter for each, after the
    # filter that sends pure ACKs to their own leaf, tried first and served first
    ack, *filters = [a for a in run.argvs if a[:3] == ["tc", "-n", "tt-s2"] and "filter" in a
                     and a[a.index("dev") + 1] == "t1"]
    assert [(f[f.index("src") + 1], f[f.index("dst") + 1]) for f in filters] == \
        [("10.77.0.1/32", "10.77.0.3/32"), ("10.77.0.2/32", "10.77.0.3/32")]
    assert "src" not in ack and ack[-1] == "1:ffe" and "protocol" in ack[ack.index("u32"):]
    assert int(ack[ack.index("prio") + 1]) < min(int(f[f.index("prio") + 1]) for f in filters)
    leaf_prio = {a[a.index("classid") + 1]: a[a.index("prio") + 1] for a in run.argvs
                 if a[:3] == ["tc", "-n", "tt-s2"] and "class" in a and "t1" in a
                 and a[a.index("classid") + 1] != "1:1"}
    assert leaf_prio.pop("1:ffe") == "0" and set(leaf_prio.values()) == {"1"}
    state = json.load(open(bed.path))
    assert state["topology"] == "tree" and state["queue"] == "fair"
    again, _ = treebed.open_testbed("tt", str(tmp_path), run=run)
    assert isinstance(again, TreeTestbed) and again.end("r1", "core") == ("tt-s2", "t1")
    assert bed.down() and not run.namespaces and not run.links
    assert not os.path.exists(files["hostfile"]) and bed.down() == []


def test_fifo_queues_give_one_class_per_link_direction(tmp_path):
    run = FakeRunner()
    TreeTestbed.for_cluster("tt", two_racks(), queue="fifo", state_dir=str(tmp_path),
                            run=run).up()
    assert not [a for a in run.argvs if "filter" in a]
    assert len([a for a in run.argvs if a[0] == "tc" and "class" in a]) == 10


def test_a_failure_part_way_leaves_nothing(tmp_path):
    run = FakeRunner(fail_on="dev t1", fail_at=3)
    bed = TreeTestbed.for_cluster("tt", two_racks(), state_dir=str(tmp_path), run=run)
    with pytest.raises(UserError, match="injected failure"):
        bed.up()
    assert not run.namespaces and not run.links and not os.path.exists(bed.path)


def test_set_link_changes_both_directions_and_refuses_what_is_no_link(tmp_path):
    run = FakeRunner()
    TreeTestbed.for_cluster("tt", two_racks(), state_dir=str(tmp_path), run=run).up(
        rate_scale=0.5)  # dilation 2: the kernel runs every link at half its rate
    run.argvs.clear()
    bed, _ = treebed.open_testbed("tt", str(tmp_path), run=run)
    bed.set_link("r1", "core", 120)
    bed.set_link("a", "r1", 500)  # capped at the port's 100 (50 in the kernel)
    changes = [(a[2], a[a.index("dev") + 1], a[a.index("rate") + 1]) for a in run.argvs]
    assert changes == [("tt-s2", "t1", "62735kbit"), ("tt-s1", "t2", "62735kbit"),
                       ("tt-n1", "eth0", "52279kbit"), ("tt-s2", "p1", "52279kbit")]
    with pytest.raises(UserError, match="not a link"):
        bed.set_link("a", "core", 10)
    with pytest.raises(UserError, match="shapes links, not pairs"):
        bed.set_pair("a", "c", 10)


def test_a_tree_scenario_is_played_per_link():
    cluster = two_racks()
    links = clusters.links(cluster)
    uplink = [i for i, (a, b, _) in enumerate(links) if {a, b} == {"r1", "core"}][0]
    timeline = Timeline(links, [c for _, _, c in links], [(10.0, uplink, 50.0)])
    calls = []
    player = LinkPlayer(timeline, lambda a, b, r: calls.append((a, b, r)))
    assert player.apply(0.0) == len(links)
    calls.clear()
    assert player.next_event(0.0) == 10.0
    assert player.apply(10.0) == 1 and calls == [(links[uplink][0], links[uplink][1], 50.0)]
    assert player.apply_rates(player.dedicated_rates()) == 1
    bed = TreeTestbed.for_cluster("tt", cluster, run=FakeRunner())
    assert isinstance(player_for(cluster, timeline, bed), LinkPlayer)


def test_a_graph_with_a_cycle_or_a_node_on_two_switches_is_no_tree():
    looped = two_racks()
    looped.add_edge("r1", "r2", capacity_mbps=10.0)
    with pytest.raises(UserError, match="f.toml: the links do not form a tree: cycle"):
        check_tree(looped, "f.toml")
    doubled = two_racks()
    doubled.remove_edge("r2", "core")
    doubled.add_edge("a", "r2", capacity_mbps=100.0)
    with pytest.raises(UserError, match="node a is not on exactly one switch"):
        check_tree(doubled, "f.toml")


def test_switch_fabrics_and_links_not_full_duplex_are_refused_by_name():
    fabric = two_racks()
    fabric.nodes["r1"]["fabric_mbps"] = 50.0
    with pytest.raises(UserError, match="f.toml: switch r1 has a fabric of 50 Mbit/s"):
        check_tree(fabric, "f.toml")
    for sharing in ("shared", "fatpipe"):
        other = two_racks()
        other["r2"]["core"]["sharing"] = sharing
        with pytest.raises(UserError, match=f"link (r2-core|core-r2) is {sharing.upper()}"):
            check_tree(other, "f.toml")


@pytest.mark.parametrize("extra,message", [
    ({"links": TWO_RACKS["links"] + [{"a": "r1", "b": "r2", "capacity_mbps": 10}]},
     "has a cycle"),
    ({"links": TWO_RACKS["links"][:1]}, "is not connected"),
    ({"topology": "crossbar", "nodes": 3, "switches": [], "links": []},
     "not 'tree' (a crossbar testbed takes --nodes"),
])
def test_a_file_whose_links_are_no_tree_is_refused_in_one_line(tmp_path, extra, message):
    data = dict(TWO_RACKS, **extra)
    path = tmp_path / "loop.json"
    path.write_text(json.dumps(data))
    proc = subprocess.run([sys.executable, "-m", "emulator", "testbed", "up", "--cluster",
                           str(path), "--name", "tl", "--state-dir", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr
    assert str(path) in proc.stderr and not (tmp_path / "tl.json").exists()


def test_real_background_gives_each_switch_a_host_and_each_stream_a_leaf(tmp_path):
    run = FakeRunner()
    bed = TreeTestbed.for_cluster("tt", two_racks(), background="real",
                                  state_dir=str(tmp_path), run=run)
    bed.up()
    assert {"tt-b1", "tt-b2", "tt-b3"} <= run.namespaces
    assert bed.address_of("r1") == "10.77.0.5"  # after the 3 nodes: switch 2's host
    link, direction = bed.link_direction("r1", "core")
    uplink = [a for a in run.argvs if a[:3] == ["tc", "-n", "tt-s2"] and "filter" in a
              and a[a.index("dev") + 1] == "t1"]
    stream_leaves = [f for f in uplink if "sport" in f]
    assert len(stream_leaves) == streams.SLOTS_PER_DIRECTION
    first = stream_leaves[0]
    assert first[first.index("src") + 1] == "10.77.0.5/32"  # r1's host to core's
    assert first[first.index("dst") + 1] == "10.77.0.4/32"
    assert first[first.index("sport") + 1] == str(streams.stream_port(link, direction, 0))
    bed.down()
    assert not run.namespaces


def test_stream_counts_are_played_per_link_and_need_a_stream_model():
    cluster = two_racks()
    timeline = generate_streams(cluster, seed=3, duration_seconds=300)
    calls = []
    player = StreamPlayer(timeline, lambda a, b, n: calls.append((a, b, n)))
    player.apply(0.0)
    assert [n for _, _, n in calls] == list(timeline.streams[0])
    t, link, _ = timeline.events[0]
    calls.clear()
    player.apply(t)
    assert calls == [(*timeline.links[link][:2], timeline.streams[1][0])]
    assert set(player.dedicated_rates().values()) == {0}
    links = clusters.links(cluster)
    with pytest.raises(UserError, match="need a stream-model scenario"):
        StreamPlayer(Timeline(links, [c for _, _, c in links]), lambda a, b, n: None)
    bed = TreeTestbed.for_cluster("tt", cluster, background="real", run=FakeRunner())
    assert isinstance(player_for(cluster, timeline, bed), StreamPlayer)

"""SimGrid platforms as clusters and clusters as platforms: units, sharing policies, the
clusters-behind-backbones tree, refusals by element and line, and the round trip (with
SimGrid itself where the bench extra is installed)."""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from emulator.errors import InputFileError
from emulator.network import cluster as clusters
from emulator.network.sharing import resources, simulate
from emulator.network.simgrid import (BANDWIDTH_UNITS, LATENCY_UNITS, read_platform,
                                      to_platform)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def platform(tmp_path, body, name="p.xml"):
    path = tmp_path / name
    path.write_text("<?xml version='1.0'?>\n"
                    '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
                    '<platform version="4.1">\n' + textwrap.dedent(body) + "</platform>\n")
    return str(path)


FOUR = """\
<zone id="world" routing="Full">
  <cluster id="c1" prefix="c1-" suffix=".site" radical="0-39" speed="1Gf" bw="125MBps"
           lat="50us" bb_bw="2.25GBps" bb_lat="500us"/>
  <cluster id="c2" prefix="c2-" radical="0-39" speed="1Gf" bw="125MBps" lat="50us"
           bb_bw="2.25GBps" bb_lat="500us"/>
  <cluster id="c3" prefix="c3-" radical="0-34" speed="1Gf" bw="10Gbps" lat="20us"/>
  <cluster id="c4" prefix="c4-" radical="0-29,40-44" speed="1Gf" bw="125MBps" lat="50us"
           bb_bw="1GBps" bb_lat="0.5ms"/>
  <link id="wan1" bandwidth="1Gbps" latency="5ms"/>
  <link id="wan2" bandwidth="1Gbps" latency="5ms" sharing_policy="SPLITDUPLEX"/>
  <link id="wan3" bandwidth="10Gbps" latency="1ms"/>
  <link id="wan4" bandwidth="500Mbps" latency="8ms"/>
  <zoneRoute src="c1" dst="c2" gw_src="r1" gw_dst="r2"><link_ctn id="wan1"/><link_ctn id="wan2"/></zoneRoute>
  <zoneRoute src="c1" dst="c3" gw_src="r1" gw_dst="r3"><link_ctn id="wan1"/><link_ctn id="wan3"/></zoneRoute>
  <zoneRoute src="c1" dst="c4" gw_src="r1" gw_dst="r4"><link_ctn id="wan1"/><link_ctn id="wan4"/></zoneRoute>
  <zoneRoute src="c2" dst="c3" gw_src="r2" gw_dst="r3"><link_ctn id="wan2"/><link_ctn id="wan3"/></zoneRoute>
  <zoneRoute src="c2" dst="c4" gw_src="r2" gw_dst="r4"><link_ctn id="wan2"/><link_ctn id="wan4"/></zoneRoute>
  <zoneRoute src="c3" dst="c4" gw_src="r3" gw_dst="r4"><link_ctn id="wan3"/><link_ctn id="wan4"/></zoneRoute>
</zone>
"""


def test_four_clusters_behind_backbones_are_four_racks_with_the_platforms_capacities(tmp_path):
    c = read_platform(platform(tmp_path, FOUR))
    nodes = clusters.node_names(c)
    assert len(nodes) == 150 and "c1-0.site" in nodes and "c4-44" in nodes
    assert "c4-35" not in nodes  # radical 0-29,40-44
    assert c["c1-0.site"]["c1"]["capacity_mbps"] == pytest.approx(1000.0)  # 125 MBps
    assert c["c1-0.site"]["c1"]["latency_ms"] == pytest.approx(0.05)
    assert c.nodes["c3-0"]["capacity_mbps"] == pytest.approx(10000.0)
    # c1's backbone (2.25 GBps, SHARED) is its switch's fabric; its own WAN link its uplink
    assert c.nodes["c1"]["fabric_mbps"] == pytest.approx(18000.0)
    assert c.nodes["c1"]["fabric_latency_ms"] == pytest.approx(0.5)
    assert c.nodes["c1"]["fabric_sharing"] == "shared"
    assert c.nodes["c4"]["fabric_mbps"] == pytest.approx(8000.0)
    assert "fabric_mbps" not in c.nodes["c3"]  # no backbone
    assert c["c1"]["world"]["capacity_mbps"] == pytest.approx(1000.0)
    assert c["c1"]["world"]["latency_ms"] == pytest.approx(5.0)
    assert c["c2"]["world"]["sharing"] == "duplex"
    assert c["c3"]["world"]["capacity_mbps"] == pytest.approx(10000.0)  # wan3
    # SimGrid's route from c1 to c4: private link, backbone, wan1, wan4, backbone, private
    (row,) = clusters.path_latency_seconds(c, ["c1-0.site", "c4-0"])[:1]
    assert row[1] == pytest.approx((0.05 + 0.5 + 5 + 8 + 0.5 + 0.05) / 1e3)
    # the slowest hop between racks decides: c1 to c4 crosses wan1 and wan4 (500 Mbit/s)
    (rate,) = simulate(c, [(0, "c1-0.site", "c4-0", 62_500_000)], latency_seconds=0.0,
                       bucket=False)
    assert rate == pytest.approx(1.0)  # 500 Mbit at 500 Mbit/s


@pytest.mark.parametrize("text, mbps", [("125MBps", 1000.0), ("1Gbps", 1000.0),
                                        ("1GiBps", 2 ** 30 * 8 / 1e6), ("8000bps", 0.008),
                                        ("2.5e6", 20.0), ("1TBps", 8e6), ("100kbps", 0.1)])
def test_bandwidth_units_as_simgrid_reads_them(tmp_path, text, mbps):
    c = read_platform(platform(tmp_path, f'<cluster id="c" prefix="n" radical="0-1" speed="1Gf" '
                                         f'bw="{text}" lat="1us"/>\n'))
    assert c["n0"]["c"]["capacity_mbps"] == pytest.approx(mbps)


@pytest.mark.parametrize("text, ms", [("50us", 0.05), ("1ms", 1.0), ("2s", 2000.0),
                                      ("300ns", 0.0003), ("0.001", 1.0), ("1m", 60000.0)])
def test_latency_units(tmp_path, text, ms):
    c = read_platform(platform(tmp_path, f'<cluster id="c" prefix="n" radical="0-1" speed="1Gf" '
                                         f'bw="1Gbps" lat="{text}"/>\n'))
    assert c["n0"]["c"]["latency_ms"] == pytest.approx(ms)
    assert {"Bps", "Gbps", "MiBps"} <= set(BANDWIDTH_UNITS) and "us" in LATENCY_UNITS


def two_hosts(tmp_path, policy):
    return read_platform(platform(tmp_path, f"""\
<zone id="z" routing="Floyd">
  <host id="a" speed="1Gf"/><host id="b" speed="1Gf"/><router id="r"/>
  <link id="la" bandwidth="100Mbps" latency="0ms" sharing_policy="{policy}"/>
  <link id="lb" bandwidth="1Gbps" latency="0ms" sharing_policy="SPLITDUPLEX"/>
  <route src="a" dst="r"><link_ctn id="la"/></route>
  <route src="r" dst="b"><link_ctn id="lb"/></route>
</zone>
"""))


def test_a_shared_link_is_one_capacity_for_both_directions(tmp_path):
    both_ways = [(0, "a", "b", 6_250_000), (0, "b", "a", 6_250_000)]  # 50 Mbit each way
    split = simulate(two_hosts(tmp_path, "SPLITDUPLEX"), both_ways, latency_seconds=0.0,
                     bucket=False)
    shared = simulate(two_hosts(tmp_path, "SHARED"), both_ways, latency_seconds=0.0,
                      bucket=False)
    assert split == pytest.approx([0.5, 0.5])  # 100 Mbit/s each way
    assert shared == pytest.approx([1.0, 1.0])  # 50 Mbit/s each, sharing one 100
    res = resources(two_hosts(tmp_path, "SHARED"))
    assert res.index[("up", "a")] == res.index[("down", "a")]


def one_cluster(tmp_path, extra="", name="p.xml"):
    return read_platform(platform(tmp_path, '<cluster id="c" prefix="n" radical="0-3" '
                                  f'speed="1Gf" bw="1Gbps" lat="10us" {extra}/>\n', name))


GIGABIT = 125_000_000  # bytes: one second at 1 Gbit/s


@pytest.mark.parametrize("backbone, seconds", [
    ('bb_bw="1Gbps" bb_lat="100us"', 2.0),  # both flows through one 1 Gbit/s backbone
    ('bb_bw="1Gbps" bb_lat="100us" bb_sharing_policy="FATPIPE"', 1.0),  # each held to 1
    ('bb_bw="4Gbps"', 1.0),  # room for both
    ("", 1.0),  # no backbone
])
def test_a_backbone_is_crossed_by_every_flow_inside_its_cluster(tmp_path, backbone, seconds):
    c = one_cluster(tmp_path, backbone)
    apart = simulate(c, [(0, "n0", "n1", GIGABIT), (0, "n2", "n3", GIGABIT)],
                     latency_seconds=0.0, bucket=False)
    assert apart == pytest.approx([seconds, seconds])
    (row,) = clusters.path_latency_seconds(c, ["n0", "n1"])[:1]
    assert row[1] == pytest.approx(20e-6 + (100e-6 if "bb_lat" in backbone else 0.0))


def test_a_flow_between_clusters_crosses_both_backbones(tmp_path):
    c = read_platform(platform(tmp_path, """\
<zone id="w" routing="Full">
  <cluster id="a" prefix="a" radical="0-2" speed="1Gf" bw="1Gbps" lat="10us" bb_bw="1Gbps"
           bb_lat="100us"/>
  <cluster id="b" prefix="b" radical="0-2" speed="1Gf" bw="1Gbps" lat="10us" bb_bw="1Gbps"
           bb_lat="200us"/>
  <link id="wan" bandwidth="10Gbps" latency="1ms"/>
  <zoneRoute src="a" dst="b" gw_src="ar" gw_dst="br"><link_ctn id="wan"/></zoneRoute>
</zone>
"""))
    # each backbone carries the flow between the clusters and one inside: half each
    ends = simulate(c, [(0, "a0", "b0", GIGABIT), (0, "a1", "a2", GIGABIT),
                        (0, "b1", "b2", GIGABIT)], latency_seconds=0.0, bucket=False)
    assert ends == pytest.approx([2.0, 2.0, 2.0])
    (row,) = clusters.path_latency_seconds(c, ["a0", "b0"])[:1]
    assert row[1] == pytest.approx(10e-6 + 100e-6 + 1e-3 + 200e-6 + 10e-6)


def test_a_shared_backbone_is_one_capacity_for_both_directions(tmp_path):
    c = one_cluster(tmp_path, 'bb_bw="1Gbps"')
    both_ways = simulate(c, [(0, "n0", "n1", GIGABIT), (0, "n1", "n0", GIGABIT)],
                         latency_seconds=0.0, bucket=False)
    assert both_ways == pytest.approx([2.0, 2.0])


def host_links(tmp_path, policy):
    """A Cluster zone of three hosts, each on a 1 Gbit/s link of its own of ``policy``."""
    ends = ("_UP", "_DOWN") if policy == "SPLITDUPLEX" else ("", "")
    hosts = "".join(f'  <host id="h{i}" speed="1Gf"/><link id="l{i}" bandwidth="1Gbps" '
                    f'sharing_policy="{policy}"/>\n  <host_link id="h{i}" up="l{i}{ends[0]}" '
                    f'down="l{i}{ends[1]}"/>\n' for i in range(3))
    return read_platform(platform(tmp_path, f'<zone id="z" routing="Cluster">\n{hosts}</zone>\n',
                                  f"{policy}.xml"))


@pytest.mark.parametrize("policy, seconds", [("SPLITDUPLEX", 2.0), ("SHARED", 2.0),
                                             ("FATPIPE", 1.0)])
def test_a_fatpipe_link_holds_each_flow_to_its_capacity_and_shares_with_none(tmp_path, policy,
                                                                            seconds):
    out_of_one = simulate(host_links(tmp_path, policy), [(0, "h0", "h1", GIGABIT),
                                                         (0, "h0", "h2", GIGABIT)],
                          latency_seconds=0.0, bucket=False)
    assert out_of_one == pytest.approx([seconds, seconds])
    both_ways = simulate(host_links(tmp_path, policy), [(0, "h0", "h1", GIGABIT),
                                                        (0, "h1", "h0", GIGABIT)],
                         latency_seconds=0.0, bucket=False)
    assert both_ways == pytest.approx([2.0 if policy == "SHARED" else 1.0] * 2)
    # SimGrid 4.1 builds a <cluster>'s FATPIPE private links SHARED: so are they read
    c = one_cluster(tmp_path, f'sharing_policy="{policy}"', "c.xml")
    assert c["n0"]["c"]["sharing"] == ("duplex" if policy == "SPLITDUPLEX" else "shared")
    # a 100 Mbit/s FATPIPE link in a zone still bounds the one flow that crosses it
    (alone,) = simulate(two_hosts(tmp_path, "FATPIPE"), [(0, "a", "b", 12_500_000)],
                        latency_seconds=0.0, bucket=False)
    assert alone == pytest.approx(1.0)


CABINETS = """\
<zone id="c" routing="Cluster">
  <cabinet id="k1" prefix="n" radical="0-1" speed="1Gf" bw="125MBps" lat="10us"/>
  <cabinet id="k2" prefix="n" radical="2" speed="1Gf" bw="1Gbps" lat="10us"/>
  <host id="n3" speed="1Gf"/>
  <link id="n3_UP" bandwidth="1Gbps" latency="10us"/>
  <link id="n3_DOWN" bandwidth="1Gbps" latency="10us"/>
  <host_link id="n3" up="n3_UP" down="n3_DOWN"/>
  <backbone id="bb" bandwidth="1Gbps" latency="100us"/>
</zone>
"""


def test_node_ranks_views_and_the_oracle_see_the_fabrics(tmp_path):
    from emulator.network.scenario import full_capacity_timeline, pair_bandwidth_function
    from emulator.network.view import ClusterView

    c = read_platform(platform(tmp_path, FATPIPES))
    nodes = ["c1-0.site", "c1-1.site", "c3-0", "c4-0"]
    for a in nodes:
        assert ClusterView.of(c).latencies_from(a, nodes) == \
            pytest.approx(clusters.latencies_from(c, a, nodes))
    bandwidth = pair_bandwidth_function(c, full_capacity_timeline(c))
    assert bandwidth("c1-0.site", "c1-1.site", 0.0) == pytest.approx(1000.0)  # ports
    assert bandwidth("c4-0", "c3-0", 0.0) == pytest.approx(500.0)  # wan4
    varied = {frozenset((a, b)) for a, b, _ in clusters.links(c)}
    assert frozenset(("c3", "world")) not in varied  # wan3 is FATPIPE: no scenario varies it
    assert frozenset(("c4", "world")) in varied
    slow = one_cluster(tmp_path, 'bb_bw="50MBps"', "slow.xml")
    bandwidth = pair_bandwidth_function(slow, full_capacity_timeline(slow))
    assert bandwidth("n0", "n1", 0.0) == pytest.approx(400.0)  # the backbone


def test_a_zone_routed_as_a_cluster_is_the_cluster_it_describes(tmp_path):
    zone = read_platform(platform(tmp_path, CABINETS, "zone.xml"))
    cluster = one_cluster(tmp_path, 'bb_bw="1Gbps" bb_lat="100us"')
    assert same(zone, cluster)
    inside = FOUR.replace('<cluster id="c3" prefix="c3-" radical="0-34" speed="1Gf" bw="10Gbps" '
                          'lat="20us"/>', CABINETS.replace('"c"', '"c3"'))
    four = read_platform(platform(tmp_path, inside, "four.xml"))
    assert four.nodes["c3"]["fabric_mbps"] == pytest.approx(1000.0)
    assert four["n3"]["c3"]["capacity_mbps"] == pytest.approx(1000.0)


@pytest.mark.parametrize("body, says", [
    ('<cluster id="c" prefix="n" radical="0-1" speed="1Gf" bw="1Gbps" lat="1us" bb_bw="1Gbps" '
     'bb_sharing_policy="SPLITDUPLEX"/>\n',
     "line 4, <cluster> bb_sharing_policy: 'SPLITDUPLEX' is not one of SHARED, FATPIPE"),
    ('<cluster id="c" prefix="n" radical="0-1" speed="1Gf" bw="1Gbps" lat="1us" '
     'sharing_policy="FULLDUPLEX"/>\n', "line 4, <cluster> sharing_policy: 'FULLDUPLEX' is not"),
    ('<zone id="z" routing="Floyd">\n  <cabinet id="k" prefix="n" radical="0-1" speed="1Gf" '
     'bw="1Gbps" lat="1us"/>\n</zone>\n', "line 5, <cabinet>: not read in a zone routed Floyd"),
    ('<zone id="z" routing="Cluster">\n  <host id="a" speed="1Gf"/>\n</zone>\n',
     "line 5, <host>: 'a' has no host_link"),
    ('<zone id="z" routing="Cluster">\n  <host id="a" speed="1Gf"/>\n  <link id="u" '
     'bandwidth="1Gbps"/><link id="d" bandwidth="2Gbps"/>\n  <host_link id="a" up="u" '
     'down="d"/>\n</zone>\n', "line 7, <host_link>: a host's link up and link down differ"),
    ('<zone id="z" routing="Cluster">\n  <backbone id="b" bandwidth="1Gbps"/>\n  <backbone '
     'id="b2" bandwidth="1Gbps"/>\n</zone>\n', "line 6, <backbone>: a second backbone"),
    ('<cluster id="c" prefix="n" radical="0-1" speed="1Gf" bw="1Gbps" lat="1us" '
     'topology="TORUS"/>\n', "line 4, <cluster> topology: TORUS is not modelled"),
    ('<cluster id="c" prefix="n" radical="0-1" speed="1Gf" bw="fast" lat="1us"/>\n',
     "line 4, <cluster> bw: 'fast' is not a number with one of SimGrid's units"),
    ('<cluster id="c" prefix="n" radical="0-1" speed="1Gf" bw="1Gbit" lat="1us"/>\n',
     "line 4, <cluster> bw: '1Gbit' is not a number"),
    ('<cluster id="c" prefix="n" radical="0-1" speed="1Gf" lat="1us"/>\n',
     "line 4, <cluster> bw: missing"),
    ('<zone id="z" routing="Full">\n  <host id="a" speed="1Gf"><disk id="d" read_bw="1GBps" '
     'write_bw="1GBps" size="1TiB"/></host>\n</zone>\n', "line 5, <disk>: not modelled"),
    ('<zone id="z" routing="Full">\n  <host id="a" speed="1Gf,2Gf" pstate="0"/>\n</zone>\n',
     "line 5, <host> speed: DVFS"),
    ('<zone id="z" routing="Floyd">\n  <host id="a" speed="1Gf"/><host id="b" speed="1Gf"/>\n'
     '  <link id="l1" bandwidth="1Gbps" latency="0"/><link id="l2" bandwidth="1Gbps" '
     'latency="0"/>\n  <route src="a" dst="b"><link_ctn id="l1"/><link_ctn id="l2"/></route>\n'
     '</zone>\n', "line 7, <route>: a route over 2 links"),
    ('<zone id="z" routing="Vivaldi">\n</zone>\n', "line 4, <zone> routing: 'Vivaldi'"),
    ('<cluster id="c" prefix="n" radical="0-1" speed="1Gf" bw="1Gbps" lat="1us">\n',
     "malformed XML"),
])
def test_what_the_subset_cannot_express_is_refused_by_element_and_line(tmp_path, body, says):
    with pytest.raises(InputFileError, match=re.escape(says)):
        read_platform(platform(tmp_path, body))


def test_a_general_graph_of_routes_is_refused(tmp_path):
    body = FOUR.replace('<zoneRoute src="c3" dst="c4" gw_src="r3" gw_dst="r4"><link_ctn '
                        'id="wan3"/><link_ctn id="wan4"/>',
                        '<zoneRoute src="c3" dst="c4" gw_src="r3" gw_dst="r4"><link_ctn '
                        'id="wan1"/>')
    with pytest.raises(InputFileError, match="a general graph of routes is not modelled"):
        read_platform(platform(tmp_path, body))


def same(a, b):
    def edges(g):
        return sorted((tuple(sorted((u, v))), round(d["capacity_mbps"], 9),
                       round(d.get("latency_ms", 0.0), 9), d.get("sharing", "duplex"))
                      for u, v, d in g.edges(data=True))
    def fabrics(g):
        return {n: (round(d["fabric_mbps"], 9), round(d["fabric_latency_ms"], 9),
                    d["fabric_sharing"]) for n, d in g.nodes(data=True) if "fabric_mbps" in d}
    kinds = {n: ("compute" if k == "compute" else "switch") for n, k in a.nodes(data="kind")}
    return kinds == {n: ("compute" if k == "compute" else "switch")
                     for n, k in b.nodes(data="kind")} and edges(a) == edges(b) and \
        fabrics(a) == fabrics(b)


FATPIPES = FOUR.replace('bb_lat="0.5ms"', 'bb_lat="0.5ms" bb_sharing_policy="FATPIPE"') \
    .replace('id="wan3" bandwidth="10Gbps" latency="1ms"',
             'id="wan3" bandwidth="10Gbps" latency="1ms" sharing_policy="FATPIPE"')


@pytest.mark.parametrize("source", ["hostfiles/racks12.toml", "hostfiles/tree16.toml", FOUR,
                                    FATPIPES])
def test_export_then_read_gives_the_same_cluster(tmp_path, source):
    original = read_platform(platform(tmp_path, source)) if source.startswith("<") \
        else clusters.load_cluster(os.path.join(ROOT, source))
    path = tmp_path / "exported.xml"
    path.write_text(to_platform(original))
    assert same(read_platform(str(path)), original)
    assert clusters.load_cluster(str(path)).graph["topology"] == "tree"


SIMGRID_PAIRS = """
import json, sys
import simgrid
engine = simgrid.Engine(["check", "--log=root.thres:critical"])
engine.load_platform(sys.argv[1])
engine.netzone_root.seal()
hosts = sorted(engine.all_hosts, key=lambda h: h.name)
out = {}
for a in hosts:
    for b in hosts:
        if a.name < b.name:
            links, latency = a.route_to(b)
            out[a.name + "|" + b.name] = [min(l.bandwidth for l in links) * 8 / 1e6, latency]
print(json.dumps(out))
"""


def simgrid_python():
    site = subprocess.run([sys.executable, "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True).stdout.strip()
    env = {**os.environ, "LD_LIBRARY_PATH": site}
    probe = subprocess.run([sys.executable, "-c", "import simgrid"], env=env,
                           capture_output=True)
    return env if probe.returncode == 0 else None


@pytest.mark.parametrize("source", ["hostfiles/racks12.toml", "hostfiles/tree16.toml",
                                    FATPIPES])
def test_simgrid_loads_the_export_and_finds_the_same_bottleneck_on_every_pair(tmp_path, source):
    env = simgrid_python()
    if env is None:
        pytest.skip("needs SimGrid's Python module (pip install -e '.[bench]')")
    import networkx as nx

    cluster = read_platform(platform(tmp_path, source)) if source.startswith("<") \
        else clusters.load_cluster(os.path.join(ROOT, source))
    path = tmp_path / "p.xml"
    path.write_text(to_platform(cluster))
    proc = subprocess.run([sys.executable, "-c", SIMGRID_PAIRS, str(path)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    pairs = json.loads(proc.stdout.splitlines()[-1])
    nodes = clusters.node_names(cluster)
    assert len(pairs) == len(nodes) * (len(nodes) - 1) // 2
    for key, (mbps, seconds) in pairs.items():
        a, b = key.split("|")
        route = nx.shortest_path(cluster, a, b)
        hops = list(zip(route, route[1:]))
        fabrics = [cluster.nodes[v] for v in route[1:-1] if "fabric_mbps" in cluster.nodes[v]]
        assert mbps == pytest.approx(min([cluster[u][v]["capacity_mbps"] for u, v in hops] +
                                         [f["fabric_mbps"] for f in fabrics]))
        assert seconds == pytest.approx((sum(cluster[u][v]["latency_ms"] for u, v in hops) +
                                         sum(f["fabric_latency_ms"] for f in fabrics)) / 1e3)


def test_cluster_show_and_export_on_the_command_line(tmp_path, capsys):
    from emulator.cli import main

    path = platform(tmp_path, FOUR)
    assert main(["cluster", "show", path, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert sum(1 for n in shown["nodes"] if n["kind"] == "compute") == 150
    assert main(["cluster", "export", "hostfiles/racks12.toml", "--simgrid"]) == 0
    assert capsys.readouterr().out.startswith("<?xml")
    bad = platform(tmp_path, '<cluster id="c" prefix="n" radical="x" speed="1Gf" bw="1Gbps"/>\n',
                   name="bad.xml")
    assert main(["cluster", "show", bad]) == 2
    assert "line 4, <cluster> radical" in capsys.readouterr().err

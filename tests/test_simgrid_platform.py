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
    # c1's uplink: its backbone (2.25 GBps, SHARED), then its own WAN link, to the core
    path = [c1 for c1 in __import__("networkx").shortest_path(c, "c1", "world")]
    assert path == ["c1", "c1-uplink1", "world"]
    assert c["c1"]["c1-uplink1"]["capacity_mbps"] == pytest.approx(18000.0)
    assert c["c1"]["c1-uplink1"]["sharing"] == "shared"
    assert c["c1-uplink1"]["world"]["capacity_mbps"] == pytest.approx(1000.0)
    assert c["c1-uplink1"]["world"]["latency_ms"] == pytest.approx(5.0)
    assert c["c2-uplink1"]["world"]["sharing"] == "duplex"
    assert c["c3"]["world"]["capacity_mbps"] == pytest.approx(10000.0)  # no backbone: wan3
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


@pytest.mark.parametrize("body, says", [
    ('<cluster id="c" prefix="n" radical="0-1" speed="1Gf" bw="1Gbps" lat="1us" '
     'sharing_policy="FATPIPE"/>\n', "line 4, <cluster> sharing_policy: FATPIPE is not modelled"),
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
    kinds = {n: ("compute" if k == "compute" else "switch") for n, k in a.nodes(data="kind")}
    return kinds == {n: ("compute" if k == "compute" else "switch")
                     for n, k in b.nodes(data="kind")} and edges(a) == edges(b)


@pytest.mark.parametrize("source", ["hostfiles/racks12.toml", "hostfiles/tree16.toml", FOUR])
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


@pytest.mark.parametrize("source", ["hostfiles/racks12.toml", "hostfiles/tree16.toml"])
def test_simgrid_loads_the_export_and_finds_the_same_bottleneck_on_every_pair(tmp_path, source):
    env = simgrid_python()
    if env is None:
        pytest.skip("needs SimGrid's Python module (pip install -e '.[bench]')")
    import networkx as nx

    cluster = clusters.load_cluster(os.path.join(ROOT, source))
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
        hops = list(zip(*(lambda p: (p[:-1], p[1:]))(nx.shortest_path(cluster, a, b))))
        assert mbps == pytest.approx(min(cluster[u][v]["capacity_mbps"] for u, v in hops))
        assert seconds == pytest.approx(sum(cluster[u][v]["latency_ms"] for u, v in hops) / 1e3)


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

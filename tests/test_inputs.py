"""Cluster files, hostfiles, scenarios and network graphs: good input and every bad-input class.

Bad input must give one clear line naming the file and the field or line, and exit status 2
from the command line, with no traceback.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from emulator.cli import main
from emulator.errors import InputFileError
from emulator.network import cluster as clusters
from emulator.network.netgraph import read_graph
from emulator.network.scenario import (
    generate_streams,
    load_scenario,
    pair_bandwidth_function,
    timeline_from_json,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOSTFILES = os.path.join(ROOT, "hostfiles")


def nodesel(*args, cwd=None, prefix=()):
    return subprocess.run([*prefix, sys.executable, "-m", "emulator", *args],
                          capture_output=True, text=True, cwd=cwd or ROOT, timeout=120)


def as_a_user():
    """A command prefix under which file modes bind: as root, the same process without the
    capabilities that override them (root reads any file otherwise)."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("root reads files whatever their mode, and setpriv (util-linux) is "
                    "missing to drop that")
    return ("setpriv", "--bounding-set=-dac_override,-dac_read_search")


def assert_clean_error(proc, *fragments):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nodesel: error:"), proc.stderr
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# -- numbers on the command line -----------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "inf", "1e999"])
@pytest.mark.parametrize("argv, option", [
    (["schedule", "nasa", "--policy", "easy", "--compress-arrivals"], "--compress-arrivals"),
    (["schedule", "nasa", "--policy", "easy", "--gantt-start-seconds"],
     "--gantt-start-seconds"),
    (["scenario", "generate", "--seed", "1", "--out", "s.json", "--duration-seconds"],
     "--duration-seconds"),
    (["cluster", "generate", "racks", "--racks", "2", "--nodes-per-rack", "2", "--out",
      "c.toml", "--latency-ms"], "--latency-ms"),
    (["predict", "starts", "nasa", "--out", "o", "--at"], "--at"),
    (["select", "--network", "n.json", "--pattern", "ring", "--nprocs", "3", "--threshold"],
     "--threshold"),
])
def test_a_number_that_is_not_finite_is_refused_on_the_command_line(tmp_path, capsys,
                                                                     argv, option, value):
    """float() reads nan, inf and 1e999: a scenario of inf seconds ended in a traceback, and
    arrivals compressed by inf, a Gantt chart or a snapshot at nan or a latency of nan ran
    on."""
    with pytest.raises(SystemExit) as stop:
        main([a if a not in ("s.json", "c.toml", "o", "n.json") else str(tmp_path / a)
              for a in argv] + [value])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    says = "must lie in [0, 1]" if option == "--threshold" else "must be a finite number"
    assert f"argument {option}: {says}" in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())


# -- clusters ----------------------------------------------------------------------------


def test_default_cluster_is_the_seed_testbed():
    graph = clusters.load_cluster()
    names = clusters.node_names(graph)
    assert names == [f"n{i}" for i in range(1, 11)]
    assert all(graph.nodes[n]["capacity_mbps"] == 100.0 for n in names)
    assert len(clusters.links(graph)) == 45


def test_shipped_cluster_files_load():
    tree = clusters.load_cluster(os.path.join(HOSTFILES, "tree16.toml"))
    assert tree.graph["topology"] == "tree"
    assert len(clusters.node_names(tree)) == 16
    paths = clusters.pair_path_links(tree)
    assert len(paths[("n1", "n16")]) == 4  # node-rack, rack-core, core-rack, rack-node
    assert clusters.load_cluster(os.path.join(HOSTFILES, "cluster10.toml")).graph["topology"] == "crossbar"


def test_hostfile_formats(tmp_path):
    mpich = tmp_path / "mpich"
    mpich.write_text("# MPICH\nnodeA:2\nnodeB\n\nnodeC:4  # comment\n")
    assert clusters.parse_hostfile(mpich) == {"nodeA": 2, "nodeB": 1, "nodeC": 4}
    ompi = tmp_path / "ompi"
    ompi.write_text("nodeA slots=2\nnodeB slots=1 max_slots=4\nnodeC\n")
    assert clusters.parse_hostfile(ompi) == {"nodeA": 2, "nodeB": 1, "nodeC": 1}
    graph = clusters.load_cluster(ompi)
    assert clusters.node_names(graph) == ["nodeA", "nodeB", "nodeC"]


@pytest.mark.parametrize("text,fragment", [
    ("nodeA:x\n", "line 1: slots must be a positive integer"),
    ("nodeA:0\n", "line 1: slots must be a positive integer"),
    ("nodeA slots=2 colour=red\n", "unknown option 'colour'"),
    ("nodeA\nnodeA\n", "line 2: host 'nodeA' is listed twice"),
    ("# nothing\n", "no hosts listed"),
    ("nodeA slots=-1\n", "slots must be a positive integer"),
    # found by fuzzing: '²' is a digit to str.isdigit() and not to int()
    ("nodeA slots=\u00b21\n", "slots must be a positive integer"),
    ("nodeA:\u00b2\n", "line 1: slots must be a positive integer"),
])
def test_bad_hostfiles(tmp_path, text, fragment):
    path = tmp_path / "hosts"
    path.write_text(text)
    with pytest.raises(InputFileError, match=fragment.replace("(", r"\(")):
        clusters.parse_hostfile(path)
    assert_clean_error(nodesel("cluster", "show", str(path)), str(path), fragment)


@pytest.mark.parametrize("text,fragment", [
    ('topology = "ring"\n', "topology: must be 'crossbar' or 'tree'"),
    ("capacity_mbps = -5\n", "capacity_mbps: capacity_mbps must be a positive number"),
    ("nodes = 0\n", "nodes: need at least one node"),
    ('nodes = ["a", "a"]\n', "nodes[1]: duplicate node name 'a'"),
    ('nodes = [{name = "a", switch = "s"}]\n', "'switch' needs topology"),
    ('colour = "red"\n', "colour: unknown field"),
    ('topology = "tree"\nswitches = ["s"]\nnodes = [{name = "a", switch = "t"}]\n',
     "switch 't' is not a listed switch"),
    ('topology = "tree"\nswitches = ["s", "t"]\nnodes = [{name = "a", switch = "s"}]\n',
     "is not connected"),
    ('topology = "tree"\nswitches = ["s", "t", "u"]\nnodes = [{name = "a", switch = "s"}]\n'
     'links = [{a = "s", b = "t"}, {a = "t", b = "u"}, {a = "u", b = "s"}]\n', "has a cycle"),
    ("nodes = [\n", "malformed TOML"),
    ('topology = "tree"\nswitches = [{name = "s", fabric_mbps = 0}]\n'
     'nodes = [{name = "a", switch = "s"}]\n', "switches[0]: fabric_mbps must be a positive"),
    ('topology = "tree"\nswitches = [{name = "s", fabric_mbps = 10, fabric_sharing = "duplex"}]'
     '\nnodes = [{name = "a", switch = "s"}]\n', "fabric_sharing must be shared or fatpipe"),
    ('topology = "tree"\nswitches = [{name = "s", fabric_latency_ms = 1}]\n'
     'nodes = [{name = "a", switch = "s"}]\n', "fabric_latency_ms and fabric_sharing need"),
    ('topology = "tree"\nswitches = [{name = "s", colour = "red"}]\n'
     'nodes = [{name = "a", switch = "s"}]\n', "switches[0]: unknown field(s) ['colour']"),
    ('topology = "tree"\nswitches = ["s", "t"]\nnodes = [{name = "a", switch = "s"}]\n'
     'links = [{a = "s", b = "t", sharing = "half"}]\n', "links[0]: sharing must be one of"),
    # TOML has nan and inf: a cluster took them as latencies and capacities
    ("latency_ms = nan\n", "latency_ms: must be a number >= 0, got nan"),
    ("capacity_mbps = inf\n", "capacity_mbps must be a positive number, got inf"),
    ('topology = "tree"\nswitches = ["s", "t"]\nnodes = [{name = "a", switch = "s"}]\n'
     'links = [{a = "s", b = "t", latency_ms = inf}]\n',
     "links[0]: latency_ms must be a number >= 0, got inf"),
    ('topology = "tree"\nswitches = [{name = "s", fabric_mbps = 10, fabric_latency_ms = nan}]'
     '\nnodes = [{name = "a", switch = "s"}]\n', "fabric_latency_ms must be a number >= 0"),
])
def test_bad_cluster_files(tmp_path, text, fragment):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(InputFileError):
        clusters.load_cluster(path)
    assert_clean_error(nodesel("cluster", "show", str(path)), str(path), fragment)


def test_cluster_show_json_is_node_link():
    proc = nodesel("cluster", "show", "--json")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    assert {"nodes", "links"} <= set(data)
    assert sum(1 for n in data["nodes"] if n["kind"] == "compute") == 10


@pytest.mark.parametrize("name", ["cluster10.toml", "tree16.toml", "racks12.toml",
                                  "mpich4.hosts", "simgrid-4clusters.xml"])
def test_what_cluster_show_json_prints_loads_as_the_same_cluster(tmp_path, name):
    """A crossbar, trees (one with FATPIPE fabrics), a hostfile's slots and a SimGrid
    platform's own latencies all come back as they were."""
    original = clusters.load_cluster(os.path.join(HOSTFILES, name))
    path = tmp_path / "c.json"
    path.write_text(clusters.dumps(original))
    again = clusters.load_cluster(path)
    assert clusters.to_json(again) == clusters.to_json(original)
    proc = nodesel("cluster", "show", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == clusters.to_json(original)


def node_link(**changes):
    data = clusters.to_json(clusters.crossbar(2))
    data = json.loads(json.dumps(data))
    for key, edit in changes.items():
        edit(data)
    return data


@pytest.mark.parametrize("edit,fragment", [
    (lambda d: d.update(directed=True), "directed: a cluster is an undirected graph"),
    (lambda d: d["graph"].update(topology="ring"), "graph.topology: must be 'crossbar' or"),
    (lambda d: d["nodes"][1].update(capacity_mbps=0), "nodes[1]: capacity_mbps must be a pos"),
    (lambda d: d["nodes"][2].update(memory_mb="lots"), "nodes[2]: memory_mb must be a pos"),
    (lambda d: d["nodes"][1].update(slots=0), "nodes[1]: slots must be a whole number"),
    (lambda d: d["nodes"][1].update(kind="toaster"), "nodes[1]: unknown kind 'toaster'"),
    (lambda d: [x.update({k: "n 1" for k in x if x[k] == "n1"})
                for x in d["nodes"] + d["links"]], "nodes[1]: invalid name 'n 1'"),
    (lambda d: d["links"].append({"source": "n1", "target": "n2", "capacity_mbps": 10}),
     "nodes[1]: compute node 'n1' needs one link"),
    (lambda d: d["links"][0].pop("capacity_mbps"), "capacity_mbps must be a positive number"),
    (lambda d: d["links"][1].update(sharing="half"), "sharing must be one of"),
    (lambda d: d["links"].append({"source": "n1", "target": "sw9"}), "unknown node 'sw9'"),
    (lambda d: (d["nodes"].append({"id": "sw1", "kind": "switch"}), d["links"].append(
        {"source": "sw0", "target": "sw1", "capacity_mbps": 10})),
     "nodes: a crossbar has one switch, not 2"),
    (lambda d: (d["graph"].update(topology="tree"), d["nodes"].append(
        {"id": "sw1", "kind": "switch"})), "the graph is not connected"),
])
def test_a_bad_node_link_cluster_gets_one_line_naming_the_field(tmp_path, edit, fragment):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(node_link(edit=edit)))
    with pytest.raises(InputFileError):
        clusters.load_cluster(path)
    assert_clean_error(nodesel("cluster", "show", str(path)), str(path), fragment)


# -- scenarios ---------------------------------------------------------------------------


def test_stream_model_bounds_and_determinism(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path in (a, b):
        proc = nodesel("scenario", "generate", "--seed", "1", "--duration-seconds", "600",
                       "--out", str(path))
        assert proc.returncode == 0, proc.stderr
    assert a.read_bytes() == b.read_bytes()
    data = json.loads(a.read_text())
    values = data["initial_mbps"] + [e["bandwidth_mbps"] for e in data["events"]]
    assert all(10 <= v <= 100 for v in values)
    assert len(data["events"]) == 20  # one change per 30 s interval
    c = tmp_path / "c.json"
    nodesel("scenario", "generate", "--seed", "2", "--duration-seconds", "600", "--out", str(c))
    assert c.read_bytes() != a.read_bytes()


def test_stream_model_follows_capacity_over_streams():
    cluster = clusters.crossbar(5)
    timeline = generate_streams(cluster, seed=3, duration_seconds=3000)
    allowed = {100.0 / (s + 1) for s in range(10)}
    values = timeline.initial_mbps + [bw for _, _, bw in timeline.events]
    assert set(values) <= allowed
    # each event moves one link by exactly one stream
    streams = {i: round(100 / bw) - 1 for i, bw in enumerate(timeline.initial_mbps)}
    for _, i, bw in timeline.events:
        new = round(100 / bw) - 1
        assert abs(new - streams[i]) == 1
        streams[i] = new


def test_timeline_replays_exactly(tmp_path):
    cluster = clusters.crossbar(6)
    timeline = generate_streams(cluster, seed=9, duration_seconds=900)
    path = tmp_path / "t.json"
    timeline.write(path)
    again = load_scenario(path, cluster)
    f, g = pair_bandwidth_function(cluster, timeline), pair_bandwidth_function(cluster, again)
    for t in [0, 29.9, 30, 31, 450, 899, 2000]:
        for a, b in [("n1", "n2"), ("n3", "n6"), ("n5", "n4")]:
            assert f(a, b, t) == g(a, b, t)


def test_tree_pair_bandwidth_is_path_minimum():
    tree = clusters.load_cluster(os.path.join(HOSTFILES, "tree16.toml"))
    timeline = generate_streams(tree, seed=1, duration_seconds=0, initial_max_streams=0)
    f = pair_bandwidth_function(tree, timeline)
    assert f("n1", "n2", 0) == 100.0  # same rack
    assert f("n1", "n16", 0) == 100.0  # across the core, 1000 Mbit/s uplinks


def test_static_and_trace_scenarios(tmp_path):
    cluster = clusters.crossbar(3)
    static = tmp_path / "static.json"
    static.write_text(json.dumps({"nodes": [{"id": "n1"}, {"id": "n2"}, {"id": "n3"}],
                                  "links": [{"source": "n1", "target": "n2", "bandwidth_mbps": 40}]}))
    f = pair_bandwidth_function(cluster, load_scenario(static, cluster))
    assert f("n1", "n2", 1e6) == 40 and f("n2", "n3", 0) == 100.0
    trace = tmp_path / "trace.csv"
    trace.write_text("time_seconds,a,b,bandwidth_mbps\n0,n1,n2,50\n10,n1,n2,20\n")
    f = pair_bandwidth_function(cluster, load_scenario(trace, cluster))
    assert [f("n1", "n2", t) for t in (0, 9.9, 10, 99)] == [50, 50, 20, 20]


@pytest.mark.parametrize("text,fragment", [
    ("time,a,b,bw\n", "line 1: header must be"),
    ("time_seconds,a,b,bandwidth_mbps\n0,n1,n99,50\n", "line 2: n1-n99 is not a link"),
    ("time_seconds,a,b,bandwidth_mbps\n0,n1,n2,-5\n", "line 2: bandwidth_mbps must be positive"),
    ("time_seconds,a,b,bandwidth_mbps\n0,n1,n2,500\n", "exceeds the link capacity"),
    ("time_seconds,a,b,bandwidth_mbps\n5,n1,n2,50\n1,n1,n2,50\n", "line 3: times must not decrease"),
    ("time_seconds,a,b,bandwidth_mbps\nx,n1,n2,50\n", "line 2: time_seconds and bandwidth_mbps must be numbers"),
])
def test_bad_traces(tmp_path, text, fragment):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(InputFileError):
        load_scenario(path, clusters.crossbar(3))
    assert_clean_error(nodesel("scenario", "show", str(path)), str(path), fragment)


def test_bad_timeline_json(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"format": "nodesel-timeline", "links": [{"a": "n1", "b": "n2", '
                    '"capacity_mbps": 100}], "initial_mbps": [0], "events": []}')
    assert_clean_error(nodesel("scenario", "show", str(path)), "initial_mbps[0]",
                       "bandwidth must be positive")
    with pytest.raises(InputFileError, match="not a nodesel timeline"):
        timeline_from_json({"format": "x"})
    path.write_text("{not json")
    assert_clean_error(nodesel("scenario", "show", str(path)), "line 1 column 2", "malformed JSON")


@pytest.mark.parametrize("event, where, fragment", [
    ('{"t": 9.0, "link": 1e999, "bandwidth_mbps": 70}', "links/events", "malformed timeline"),
    ('{"t": NaN, "link": 0, "bandwidth_mbps": 70}', "events[0]", "t must be a number"),
    ('{"t": 9.0, "link": 0, "bandwidth_mbps": Infinity}', "events[0]",
     "bandwidth must be positive")])
def test_a_timeline_event_beyond_every_number_is_refused(tmp_path, event, where, fragment):
    """JSON as Python reads it takes 1e999, NaN and Infinity: each is refused in one line
    (1e999 as a link index was an OverflowError's traceback)."""
    path = tmp_path / "t.json"
    path.write_text('{"format": "nodesel-timeline", "links": [{"a": "n1", "b": "n2", '
                    '"capacity_mbps": 100}], "initial_mbps": [80], "events": [' + event + ']}')
    assert_clean_error(nodesel("scenario", "show", str(path)), where, fragment)


BIG_FIELD = b"9" * 140_000  # over the csv module's field limit (131,072)


@pytest.mark.parametrize("name, data, argv, fragment", [
    ("jobs.csv", b"arrival_seconds,benchmark,class,tasks\n0,cg,A\r,4\n",
     ["batch", "--jobs", "FILE", "--list-jobs"], "3 fields, the header has 4"),
    ("jobs.csv", b"arrival_seconds,benchmark,class,tasks\n0,cg,A," + BIG_FIELD + b"\n",
     ["batch", "--jobs", "FILE", "--list-jobs"], "line 2: not CSV"),
    ("flows.csv", b"start_seconds,src,dst,size_bytes\n0,n1,n2," + BIG_FIELD + b"\n",
     ["flows", "--flows", "FILE", "--model-only"], "line 2: not CSV"),
    ("trace.csv", b"time_seconds,a,b,bandwidth_mbps\n0,n1,n2," + BIG_FIELD + b"\n",
     ["scenario", "show", "FILE"], "line 2: not CSV")], ids=["cr", "jobs", "flows", "trace"])
def test_a_csv_file_the_csv_module_cannot_read_is_refused_in_one_line(tmp_path, name, data,
                                                                       argv, fragment):
    """A lone carriage return inside a row (csv's "new-line character seen in unquoted
    field") and a field over csv's limit were tracebacks."""
    path = tmp_path / name
    path.write_bytes(data)
    assert_clean_error(nodesel(*[str(path) if a == "FILE" else a for a in argv]), str(path),
                       fragment)


# -- network graphs and selection from the command line ---------------------------------


def write_network(path, links):
    path.write_text(json.dumps({"nodes": [{"id": f"n{i}"} for i in range(1, 6)],
                                "links": links}))


def test_select_command_prints_the_documented_json(tmp_path):
    net = tmp_path / "g.json"
    links = [{"source": f"n{a}", "target": f"n{b}", "bandwidth_mbps": float(10 * (a + b))}
             for a in range(1, 6) for b in range(a + 1, 6)]
    write_network(net, links)
    proc = nodesel("select", "--network", str(net), "--pattern", "cg", "--nprocs", "4",
                   "--candidates", "3", "--method", "pattern", "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["method"] == "pattern" and out["exact"] is True
    assert out["bottleneck_mbps"] == out["candidates"][0]["bottleneck_mbps"]
    assert len(out["candidates"]) == 3
    for cand in out["candidates"]:
        assert sorted(cand["mapping"]) == ["0", "1", "2", "3"]
        assert set(cand["mapping"].values()) == set(cand["nodes"])
        assert all(n.startswith("n") for n in cand["nodes"])
    for method in ("all-all", "random"):
        proc = nodesel("select", "--network", str(net), "--pattern", "is", "--nprocs", "4",
                       "--method", method, "--seed", "3")
        assert proc.returncode == 0 and json.loads(proc.stdout)["method"] == method


@pytest.mark.parametrize("case,fragment", [
    ("negative", "bandwidth_mbps must be >= 0"),
    ("unknown", "edge names unknown node 'n9'"),
    ("malformed", "malformed JSON"),
])
def test_select_bad_network(tmp_path, case, fragment):
    net = tmp_path / "g.json"
    if case == "negative":
        write_network(net, [{"source": "n1", "target": "n2", "bandwidth_mbps": -1}])
    elif case == "unknown":
        write_network(net, [{"source": "n1", "target": "n9", "bandwidth_mbps": 1}])
    else:
        net.write_text('{"nodes": [')
    with pytest.raises(InputFileError):
        read_graph(net)
    assert_clean_error(nodesel("select", "--network", str(net), "--pattern", "cg",
                               "--nprocs", "4"), str(net), fragment)


@pytest.mark.parametrize("args,fragment", [
    (["--pattern", "cg", "--nprocs", "8"], "needs 8 nodes but the network has only 5"),
    (["--pattern", "cg", "--nprocs", "3"], "CG does not run on 3 processes"),
    (["--pattern", "nope", "--nprocs", "4"], "unknown pattern 'nope'"),
    (["--pattern", "ring", "--nprocs", "4"], "does not embed"),
])
def test_select_impossible_requests(tmp_path, args, fragment):
    net = tmp_path / "g.json"
    write_network(net, [{"source": "n1", "target": "n2", "bandwidth_mbps": 5}])
    assert_clean_error(nodesel("select", "--network", str(net), *args), fragment)


def test_patterns_commands():
    proc = nodesel("patterns", "list")
    assert proc.returncode == 0 and "cg" in proc.stdout and "a square" in proc.stdout
    proc = nodesel("patterns", "show", "cg", "--nprocs", "4")
    data = json.loads(proc.stdout)
    assert len(data["links"]) == 3
    assert_clean_error(nodesel("patterns", "show", "bt", "--nprocs", "8"), "BT does not run on 8")


def test_help_lists_subcommands_with_examples():
    proc = nodesel("--help")
    assert proc.returncode == 0
    for word in ("demo", "cluster", "scenario", "select", "patterns", "examples:"):
        assert word in proc.stdout


def test_ci_runs_the_readme_test_command():
    readme = open(os.path.join(ROOT, "README.md")).read()
    blocks = readme.split("```")
    commands = [blocks[1].strip(), blocks[3].strip()]
    assert commands[0].endswith("nodesel demo")
    ci = open(os.path.join(ROOT, ".ci", "run")).read()
    assert commands[1] in ci.splitlines()


@pytest.mark.parametrize("args,fragment", [
    (["--benchmarks", "cg,xx"], "unknown benchmark 'xx'"),
    (["--methods", "pattern,best"], "unknown method 'best'"),
    (["--repeats", "0"], "--repeats must be >= 1"),
    (["--out", "/nonexistent/parent/out"], "/nonexistent/parent"),
    (["--benchmarks", "bt", "--nprocs", "8"], "bt cannot run on 8 ranks"),
    (["--nprocs", "16"], "need a cluster of at least that many"),
    (["--shaping", "tc"], "--shaping tc needs --testbed netns"),
])
def test_experiment_bad_configuration(args, fragment):
    assert_clean_error(nodesel("experiment", *args), fragment)


def test_tc_plan_writes_a_script_per_host(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1\n127.0.0.2:2\n")
    cluster_hosts = tmp_path / "s.json"
    proc = nodesel("scenario", "generate", "--seed", "3", "--duration-seconds", "300",
                   "--cluster", str(hosts), "--out", str(cluster_hosts))
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "plan"
    proc = nodesel("tc", "plan", "--hostfile", str(hosts), "--scenario", str(cluster_hosts),
                   "--out", str(out), "--interface", "ens3")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["127.0.0.1.sh", "127.0.0.2.sh"]
    text = (out / "127.0.0.1.sh").read_text()
    assert "match ip dst 127.0.0.2/32" in text and "sleep" in text
    assert_clean_error(nodesel("tc", "plan", "--hostfile", str(hosts), "--scenario",
                               str(cluster_hosts), "--out", "/nonexistent/x/y"), "does not exist")


def test_default_output_folder_is_made_on_a_fresh_checkout(tmp_path, monkeypatch):
    from emulator.cli import build_parser
    from emulator.cli.experiments import experiment_config

    monkeypatch.chdir(tmp_path)  # no results/ here, as in a fresh clone
    _, out = experiment_config(build_parser().parse_args(["demo"]))
    assert out == str(tmp_path / "results" / "demo") and os.path.isdir(out)


# -- paths that cannot be read -----------------------------------------------------------


def test_a_pattern_name_wins_over_a_folder_of_that_name(tmp_path):
    (tmp_path / "cg").mkdir()  # e.g. left by 'nodesel run --out cg'
    net = tmp_path / "g.json"
    write_network(net, [{"source": f"n{a}", "target": f"n{b}", "bandwidth_mbps": 10.0}
                        for a in range(1, 6) for b in range(a + 1, 6)])
    proc = nodesel("select", "--network", "g.json", "--pattern", "cg", "--nprocs", "4",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["candidates"][0]["nodes"]) == 4
    # the folder itself, reached as a path, is refused in one line
    assert_clean_error(nodesel("select", "--network", "g.json", "--pattern", "./cg",
                               "--nprocs", "4", cwd=tmp_path), "./cg", "is a folder")


def _damaged(kind):
    """A gzip or zip trace whose compressed bytes are damaged as ``kind`` says."""
    import gzip
    import io
    import zipfile

    text = "".join(f"{i} {10 * i} -1 100 4 -1 -1 4 200 -1 1 1 1 1 1 -1 -1 -1\n"
                   for i in range(1, 2000)).encode()
    good = gzip.compress(text)
    if kind == "zip":  # a deflated member with its middle flipped
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("t.swf", text)
        raw = bytearray(buf.getvalue())
        raw[200:260] = bytes(b ^ 0x5A for b in raw[200:260])
        return bytes(raw)
    return {"plain": text, "truncated": good[:len(good) // 2],
            "flipped": good[:200] + bytes(b ^ 0x5A for b in good[200:260]) + good[260:],
            "crc": good[:-8] + b"\0\0\0\0" + good[-4:]}[kind]


@pytest.mark.parametrize("kind", ["plain", "truncated", "flipped", "crc", "zip"])
def test_a_damaged_compressed_trace_gets_one_line_naming_it(tmp_path, kind):
    """Not gzip at all, cut short, its deflate stream or its checksum damaged (zlib's own
    error, which is no OSError), a zip member damaged: one line, exit 2."""
    path = tmp_path / ("t.zip" if kind == "zip" else "t.swf.gz")
    path.write_bytes(_damaged(kind))
    assert_clean_error(nodesel("workload", "show", str(path)), str(path), "cannot be read")


def _bad_path(tmp_path, kind, suffix):
    path = tmp_path / f"input-{kind}{suffix}"
    if kind == "folder":
        path.mkdir()
    elif kind == "binary":
        path.write_bytes(bytes(range(128, 256)) * 8)
    elif kind == "empty":
        path.write_text("")
    elif kind == "unreadable":
        path.write_text("x")
        path.chmod(0)
    return str(path)


@pytest.mark.parametrize("kind", ["missing", "folder", "binary", "empty", "unreadable"])
@pytest.mark.parametrize("command,suffix", [
    (["cluster", "show"], ".toml"), (["cluster", "show"], ".json"), (["cluster", "show"], ""),
    (["scenario", "show"], ".json"), (["scenario", "show"], ".csv"),
    (["select", "--pattern", "cg", "--nprocs", "4", "--network"], ".json"),
    (["select", "--network", "NET", "--nprocs", "4", "--pattern"], ".json"),
    (["select", "--network", "NET", "--nprocs", "4", "--pattern"], ".csv"),
    (["workload", "show"], ".swf"),
])
def test_an_unusable_input_path_gets_one_line_naming_it(tmp_path, kind, command, suffix):
    prefix = as_a_user() if kind == "unreadable" else ()
    net = tmp_path / "g.json"
    write_network(net, [{"source": f"n{a}", "target": f"n{b}", "bandwidth_mbps": 10.0}
                        for a in range(1, 6) for b in range(a + 1, 6)])
    path = _bad_path(tmp_path, kind, suffix)
    argv = [str(net) if a == "NET" else a for a in command] + [path]
    proc = nodesel(*argv, prefix=prefix)
    if kind == "empty" and proc.returncode == 0:
        return  # an empty hostfile or scenario may mean "nothing": not an error, no traceback
    assert_clean_error(proc, path, *(["cannot be read"] if kind == "unreadable" else []))

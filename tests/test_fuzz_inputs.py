"""Every input format, fuzzed: malformed versions of a valid file, fed to the command that
reads it. Whatever the damage, the command either accepts the file (exit 0) or refuses it
with exit 2 and one line that starts ``nodesel: error:`` and names the file; nothing escapes
as a traceback.

The damage: a line dropped, duplicated or swapped, a token replaced by a hostile one (empty,
negative, huge, NaN, text where a number goes, a quote or bracket), the text cut short,
random printable or binary bytes inserted. ``FUZZ_EXAMPLES`` (default 25 per format) bounds
the run (19 formats, so 475 damaged files by default).
"""

import contextlib
import io
import json
import os
import re
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulator.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
TRIED = {}

NODES5 = [f"n{i}" for i in range(1, 6)]
STATUS_GRAPH = json.dumps({
    "directed": False, "multigraph": False, "graph": {},
    "nodes": [{"id": n} for n in NODES5],
    "links": [{"source": a, "target": b, "bandwidth_mbps": float(10 * (i + j + 2))}
              for i, a in enumerate(NODES5) for j, b in enumerate(NODES5) if i < j]},
    indent=1)
TIMELINE_JSON = json.dumps({
    "format": "nodesel-timeline",
    "links": [{"a": "n1", "b": "n2", "capacity_mbps": 100}, {"a": "n1", "b": "n3",
                                                            "capacity_mbps": 100}],
    "initial_mbps": [80, 60], "events": [{"t": 5.0, "link": 0, "bandwidth_mbps": 40.0},
                                         {"t": 9.0, "link": 1, "bandwidth_mbps": 70.0}]},
    indent=1)
SWF = """; Version: 2.2
; MaxProcs: 16
; UnixStartTime: 0
1 0 -1 100 4 -1 -1 4 400 -1 1 1 1 1 1 -1 -1 -1
2 10 -1 200 8 -1 -1 8 800 -1 1 2 1 2 1 -1 -1 -1
3 20 -1 50 16 -1 -1 16 100 -1 1 3 2 1 1 -1 -1 -1
4 30 -1 300 2 -1 -1 2 600 -1 1 1 1 1 1 -1 -1 -1
5 45 -1 80 4 -1 -1 4 300 -1 1 2 2 3 1 -1 -1 -1
""" + "".join(f"{i} {50 + 7 * i} -1 {30 + 11 * i} {1 + i % 8} -1 -1 {1 + i % 8} {60 + 40 * i} "
              f"-1 1 {i % 3 + 1} 1 1 1 -1 -1 -1\n" for i in range(6, 16))
SLURM_CONF = """PriorityType=priority/multifactor
PriorityWeightAge=1000
PriorityWeightFairshare=10000
PriorityWeightJobSize=1000
PriorityMaxAge=00:16:40
PriorityDecayHalfLife=01:00:00
PriorityCalcPeriod=5
PriorityFlags=SMALL_RELATIVE_TO_TIME
SchedulerType=sched/backfill
SchedulerParameters=bf_window=60,bf_resolution=30,bf_max_job_test=50,bf_continue
PartitionName=1 Nodes=ALL PriorityJobFactor=10 Default=YES
"""
ASSOCIATIONS = """Cluster|Account|User|Partition|Share|Priority|GrpJobs|Par Name
tiny|root||||1|||
tiny|1|||60|||root
tiny|1|1||1||||
tiny|1|2||3||||
tiny|2|||40|||root
tiny|2|3||1||||
"""
SACCT = ("JobIDRaw|JobID|Submit|Start|End|Timelimit|AllocCPUS|ReqCPUS|User|Group|Partition|"
         "State\n"
         "1001|1001|2026-11-20T08:00:00|2026-11-20T08:00:05|2026-11-20T09:00:05|02:00:00|16|16|"
         "ann|phys|batch|COMPLETED\n"
         "1001.batch|1001.batch|2026-11-20T08:00:05|2026-11-20T08:00:05|2026-11-20T09:00:05||16|"
         "||||COMPLETED\n"
         "1002|1002|2026-11-20T08:10:00|None|2026-11-20T08:20:00|1-00:00:00|0|4|bob|chem|short|"
         "CANCELLED by 1234\n"
         "1003|1003_2|2026-11-20T08:30:00|2026-11-20T09:00:05|2026-11-20T11:00:05|UNLIMITED|8|8|"
         "ann|phys|batch|TIMEOUT\n")
BATSIM = json.dumps({
    "nb_res": 16,
    "jobs": [{"id": str(i), "subtime": float(10 * i), "res": 1 + i % 8,
              "profile": f"delay_{30 + 11 * i}", "walltime": float(60 + 40 * i),
              "swf": {"status": 1, "user": i % 3 + 1, "group": 1, "executable": 1,
                      "queue": 1}} for i in range(1, 9)],
    "profiles": {f"delay_{30 + 11 * i}": {"type": "delay", "delay": float(30 + 11 * i)}
                 for i in range(1, 9)}}, indent=1)


def _read(*parts):
    with open(os.path.join(ROOT, *parts)) as f:
        return f.read()


# format -> (file name, valid text, argv with FILE for the file's path)
FORMATS = {
    "cluster-toml": ("c.toml", _read("hostfiles", "tree16.toml"), ["cluster", "show", "FILE"]),
    "mpich-hostfile": ("hosts", _read("hostfiles", "mpich4.hosts"),
                       ["cluster", "show", "FILE"]),
    "openmpi-hostfile": ("hosts", _read("hostfiles", "openmpi4.hosts"),
                         ["cluster", "show", "FILE"]),
    "scenario-csv": ("s.csv", "time_seconds,a,b,bandwidth_mbps\n0,n1,n2,50\n5,n1,n3,20\n"
                              "10,n1,n2,80\n12.5,n2,n3,30\n", ["scenario", "show", "FILE"]),
    "timeline-json": ("t.json", TIMELINE_JSON, ["scenario", "show", "FILE"]),
    "status-graph": ("g.json", STATUS_GRAPH,
                     ["select", "--network", "FILE", "--pattern", "ring", "--nprocs", "3"]),
    "pattern-csv": ("p.csv", "0,10,0,5\n10,0,10,0\n0,10,0,10\n5,0,10,0\n",
                    ["select", "--network", "NET", "--pattern", "FILE"]),
    "pattern-matrix-json": ("p.json", json.dumps({"bytes": [[0, 5, 0], [5, 0, 7], [0, 7, 0]]}),
                            ["select", "--network", "NET", "--pattern", "FILE"]),
    "swf": ("w.swf", SWF, ["workload", "show", "FILE", "--components", "1"]),
    "policy-maui": ("site.cfg", "GROUPCFG[1] PRIORITY=300 MAXPROC=8\nUSERCFG[2] MAXPROC=4\n"
                                "USERCFG[3] PRIORITY=10\n",
                    ["schedule", "SWF", "--policy", "easy", "--policy-file", "FILE", "--out",
                     "OUT"]),
    "policy-toml": ("site.toml", '[groups.1]\npriority = 300\nmaxproc = 8\n\n[users.2]\n'
                                 'maxproc = 4\n',
                    ["schedule", "SWF", "--policy", "conservative", "--policy-file", "FILE",
                     "--out", "OUT"]),
    "jobs-csv": ("jobs.csv", "arrival_seconds,benchmark,class,tasks\n0,cg,A,4\n2.5,bt,S,4\n"
                             "3,is,W,2\n7,mg,A,8\n", ["batch", "--jobs", "FILE", "--list-jobs"]),
    "jobs-toml": ("jobs.toml", '[[job]]\narrival_seconds = 0\nbenchmark = "cg"\ntasks = 4\n\n'
                               '[[job]]\narrival_seconds = 1.5\nbenchmark = "sp"\nclass = "S"\n'
                               'tasks = 9\n', ["batch", "--jobs", "FILE", "--list-jobs"]),
    "slurm-conf": ("slurm.conf", SLURM_CONF,
                   ["schedule", "SWF", "--slurm-conf", "FILE", "--out", "OUT", "--no-progress"]),
    "sacctmgr-associations": ("assoc.txt", ASSOCIATIONS,
                              ["schedule", "SWF", "--slurm-conf", "CONF", "--associations",
                               "FILE", "--out", "OUT", "--no-progress"]),
    "sacct": ("sacct.txt", SACCT, ["workload", "convert", "FILE", "--from", "sacct", "--to",
                                   "swf", "--out", "OUT_SWF"]),
    "batsim-json": ("w.json", BATSIM, ["workload", "convert", "FILE", "--to", "swf", "--out",
                                       "OUT_SWF"]),
    "simgrid-xml": ("p.xml", _read("hostfiles", "simgrid-4clusters.xml"),
                    ["cluster", "show", "FILE"]),
    "grid-toml": ("g.toml", _read("hostfiles", "grid-homogeneous.toml"),
                  ["grid", "--grid", "FILE", "--replications", "2", "--jobs-per-site", "60",
                   "--sharing", "0,50", "--no-progress", "--out", "OUT"]),
}

HOSTILE = ["", "-1", "0", "1e999", "nan", "inf", "x", "\"", "[", "{", "}", "=", ",", ":",
           "-0", "99999999999999999999", "n99", "\u00e9", "true", "null", "\t"]


@st.composite
def damaged(draw, text):
    """A malformed version of ``text``."""
    lines = text.splitlines(keepends=True)
    kind = draw(st.sampled_from(["drop", "duplicate", "swap", "token", "truncate", "insert",
                                 "bytes"]))
    if kind in ("drop", "duplicate", "swap") and lines:
        i = draw(st.integers(0, len(lines) - 1))
        j = draw(st.integers(0, len(lines) - 1))
        if kind == "drop":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(j, lines[i])
        else:
            lines[i], lines[j] = lines[j], lines[i]
        return "".join(lines).encode()
    if kind == "token":
        tokens = list(re.finditer(r"[^\s,:=\[\]{}\"]+", text))
        if tokens:
            m = tokens[draw(st.integers(0, len(tokens) - 1))]
            return (text[:m.start()] + draw(st.sampled_from(HOSTILE)) + text[m.end():]).encode()
    if kind == "truncate":
        return text[:draw(st.integers(0, max(0, len(text) - 1)))].encode()
    at = draw(st.integers(0, len(text)))
    if kind == "insert":
        junk = draw(st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), min_size=1,
                            max_size=12))
        return (text[:at] + junk + text[at:]).encode()
    data = text.encode()
    return data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]


def run_command(argv):
    """The command's status and standard error; a warning (numpy's on a bad cast, say)
    raises, since it would be a second line or a silent wrong value."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), \
            warnings.catch_warnings():
        warnings.simplefilter("error")
        status = main(argv)
    return status, err.getvalue()


@pytest.fixture(scope="module")
def helpers(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz-helpers")
    net = base / "net.json"
    net.write_text(STATUS_GRAPH)
    swf = base / "w.swf"
    swf.write_text(SWF)
    conf = base / "slurm.conf"
    conf.write_text(SLURM_CONF)
    return {"NET": str(net), "SWF": str(swf), "CONF": str(conf), "OUT": str(base / "out"),
            "OUT_SWF": str(base / "out.swf")}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_the_valid_seed_file_is_accepted(fmt, tmp_path, helpers):
    name, text, argv = FORMATS[fmt]
    path = tmp_path / name
    path.write_text(text)
    status, err = run_command([helpers.get(a, str(path) if a == "FILE" else a) for a in argv])
    assert status == 0, err


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_damaged_files_get_one_line_naming_the_file(fmt, tmp_path_factory, helpers):
    name, text, argv = FORMATS[fmt]
    folder = tmp_path_factory.mktemp(f"fuzz-{fmt}")
    path = folder / name
    command = [helpers.get(a, str(path) if a == "FILE" else a) for a in argv]

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(data=damaged(text))
    def check(data):
        TRIED[fmt] = TRIED.get(fmt, 0) + 1
        path.write_bytes(data)
        try:
            status, err = run_command(command)
        except SystemExit as e:  # argparse refuses before the file is read
            status, err = e.code, ""
        except Exception as e:  # noqa: BLE001 - the point: nothing may escape
            raise AssertionError(f"{fmt}: {type(e).__name__}: {e}\ninput: {data!r}") from e
        assert status in (0, 2), (status, err, data)
        if status == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("nodesel: error:"), (err, data)
            assert str(path) in lines[0] or name in lines[0], (err, data)

    check()
    assert TRIED[fmt] >= min(EXAMPLES, 10)  # hypothesis really generated the examples


def test_a_line_separator_inside_a_file_keeps_the_error_on_one_line(tmp_path):
    """Found by the fuzzing above: a node named with U+0085 (a line break to Python's
    splitlines) split the error in two. It is written as an escape."""
    path = tmp_path / "s.csv"
    path.write_bytes("time_seconds,a,b,bandwidth_mbps\n0,n\u00851,n2,50\n".encode())
    status, err = run_command(["scenario", "show", str(path)])
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith(f"nodesel: error: {path}: line 2: n\\x851-n2 is not a link")

"""Resuming a stopped Figure 3 experiment: what is kept, what is replayed, what is refused."""

import csv
import re
import json
from types import SimpleNamespace

import networkx as nx
import pytest

from emulator.coordinator.measure import Monitor
from emulator.errors import InputFileError, UserError
from emulator.experiments.figure3 import COLUMNS, _cell
from emulator.experiments.resume import earlier_run


def fake_coordinator(names):
    cluster = nx.Graph()
    for n in names:
        cluster.add_node(n, capacity_mbps=100.0)
    settings = SimpleNamespace(cluster=cluster, shaping="inproc")
    return SimpleNamespace(names=names, settings=settings, scenario_time=lambda epoch=None: 0.0)


def test_replayed_measurements_give_the_forecasts_of_the_unbroken_run():
    names = ["n1", "n2", "n3"]
    unbroken = Monitor(fake_coordinator(names))
    taken = []
    for k, values in enumerate(([90.0, 50.0, 70.0], [30.0, 55.0, 72.0], [88.0, 20.0, 71.0])):
        unbroken.probes = []
        for (a, b), v in zip((("n1", "n2"), ("n1", "n3"), ("n2", "n3")), values):
            unbroken._record(a, b, v, v + k)
        taken.append(list(unbroken.probes))
    resumed = Monitor(fake_coordinator(names))
    for probes in json.loads(json.dumps(taken)):  # as measurements.json keeps them
        graph = resumed.replay(probes, 1.5)
    want = unbroken.status_graph()
    assert sorted(graph.edges(data=True)) == sorted(want.edges(data=True))
    # the forecast is not simply the last value: the history mattered
    assert graph["n1"]["n2"]["bandwidth_mbps"] != graph["n1"]["n2"]["measured_mbps"]
    assert graph.graph["measurement_seconds"] == 1.5


def write_run(out, rows, *, slots_done, config, identity, failures=()):
    with open(out / "jobs.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(row.get(k)) for k in COLUMNS})
    (out / "summary.json").write_text(json.dumps({
        "config": config, "identity": identity, "slots_done": slots_done,
        "failures": list(failures)}))
    (out / "measurements.json").write_text(json.dumps([
        {"slot": 0, "at": 0.0, "end": 12.5, "seconds": 1.25, "probes": [["n1", "n2", 9.5, 10]]}]))


def row(slot, method, seconds):
    return {"slot": slot, "repeat": 0, "benchmark": "cg", "method": method,
            "app_seconds": seconds, "slowdown_pct": 100 * (seconds / 0.3 - 1),
            "bottleneck_mbps": None, "nodes": "n1 n2", "mapping": "n2 n1", "trials": "",
            "attempts": 1, "note": ""}


CONFIG = {"benchmarks": ["cg", "is"], "methods": ["pattern"], "repeats": 1, "seed": 1}
IDENTITY = {"nodes": ["n1", "n2"], "scenario": {"kind": "streams", "seed": 1}}


def test_the_finished_slots_come_back_exactly_and_a_slot_cut_short_is_dropped(tmp_path):
    rows = [row(0, "dedicated", 0.1 + 0.2), row(0, "pattern", 1 / 3), row(1, "dedicated", 0.7)]
    write_run(tmp_path, rows, slots_done=[0], config=CONFIG, identity=IDENTITY,
              failures=[{"slot": 0, "error": "kept"}, {"slot": 1, "error": "dropped"}])
    earlier = earlier_run(str(tmp_path), CONFIG, IDENTITY)
    assert earlier.slots_done == {0}
    got = [{k: r[k] for k in rows[0]} for r in earlier.rows]
    assert got == rows[:2]  # 0.30000000000000004 and 1/3 to the last bit
    assert [e["error"] for e in earlier.events] == ["kept"]
    assert earlier.measurements[0]["probes"] == [["n1", "n2", 9.5, 10]]


def test_nothing_there_is_nothing_to_resume(tmp_path):
    assert earlier_run(str(tmp_path), CONFIG, IDENTITY).slots_done == frozenset()


@pytest.mark.parametrize("config, identity, says", [
    ({**CONFIG, "seed": 2}, IDENTITY, "its seed is 1 where this run's is 2"),
    (CONFIG, {**IDENTITY, "nodes": ["n1", "n3"]}, "its nodes is ['n1', 'n2']"),
    (CONFIG, {**IDENTITY, "scenario": None}, "its scenario is"),
])
def test_resuming_with_other_settings_is_refused_naming_the_setting(tmp_path, config, identity,
                                                                   says):
    write_run(tmp_path, [row(0, "dedicated", 0.3)], slots_done=[0], config=CONFIG,
              identity=IDENTITY)
    with pytest.raises(UserError, match=re.escape(says)):
        earlier_run(str(tmp_path), config, identity)


def test_a_summary_of_something_else_is_refused_by_file(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"runs": []}))
    with pytest.raises(InputFileError, match="summary.json.*not a summary of this experiment"):
        earlier_run(str(tmp_path), CONFIG, IDENTITY)

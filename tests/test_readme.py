"""The manual cannot drift from the program: every ``nodesel ...`` command in the README
parses with the real argument parser, and the cheap ones run."""

import os
import re
import shlex
import subprocess
import sys

import pytest

from emulator.cli import build_parser

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
# Commands cheap enough to run here (no MPI, a second or two each), in README order.
CHEAP = (("patterns",), ("cluster", "show"), ("scenario", "generate"), ("scenario", "show"),
         ("select",), ("flows",))
SHELL = (">", "|", ">>", "2>", "&&", ";")


def _code_lines(text):
    """Lines of the fenced code blocks, continuation lines joined."""
    lines, block, pending = [], False, ""
    for raw in text.splitlines():
        if raw.startswith("```"):
            block = not block
            continue
        if not block:
            continue
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        lines.append(line)
    return lines


def readme_commands(text=None):
    """Each ``nodesel`` command of the README as an argv after ``nodesel``: from its code
    blocks (behind ``sudo`` or ``mpiexec -n K`` too, up to a shell redirection) and from the
    command table."""
    text = open(README).read() if text is None else text
    found = []
    for line in _code_lines(text):
        if "nodesel" not in line:
            continue
        words = shlex.split(line)
        if "nodesel" in words:
            argv = words[words.index("nodesel") + 1:]
            cut = [i for i, w in enumerate(argv) if w in SHELL]
            found.append(argv[:cut[0]] if cut else argv)
    for row in text.splitlines():
        if row.startswith("| `nodesel "):
            span = re.match(r"\| `(nodesel [^`]+)`", row).group(1)
            found.append(shlex.split(span.replace("\\|", "|"))[1:])
    return found


def test_the_readme_has_commands_of_every_group():
    groups = {argv[0] for argv in readme_commands()}
    for group in ("demo", "experiment", "measure", "cluster", "scenario", "select", "patterns",
                  "trace", "testbed", "run", "tc", "workload", "schedule", "predict", "grid",
                  "batch", "batch-experiment"):
        assert group in groups, f"the README shows no 'nodesel {group}' command"


@pytest.mark.parametrize("argv", readme_commands(), ids=lambda a: " ".join(a)[:60])
def test_every_readme_command_parses(argv, capsys):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        if e.code == 0 and ("-h" in argv or "--help" in argv):
            return
        pytest.fail(f"'nodesel {' '.join(argv)}' does not parse: {capsys.readouterr().err}")
    assert callable(args.handler)


def test_the_cheap_readme_commands_run(tmp_path):
    ran = []
    for name in ("hostfiles",):
        os.symlink(os.path.join(ROOT, name), tmp_path / name)
    # the status graph the README's select example reads, from a static matrix
    (tmp_path / "status.json").write_text(_status_graph())
    for argv in readme_commands():
        if not any(tuple(argv[:len(c)]) == c for c in CHEAP):
            continue
        proc = subprocess.run([sys.executable, "-m", "emulator", *argv], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"nodesel {' '.join(argv)}: {proc.stderr}"
        ran.append(argv[0])
    assert {"patterns", "cluster", "scenario", "select"} <= set(ran)


def _status_graph():
    import json

    import networkx as nx

    g = nx.complete_graph([f"n{i}" for i in range(1, 11)])
    for a, b in g.edges:
        g[a][b]["bandwidth_mbps"] = 10.0 + (int(a[1:]) * int(b[1:])) % 90
    return json.dumps(nx.node_link_data(g, edges="links"))


def test_the_parser_of_this_test_finds_continued_and_inline_commands():
    text = ("intro `nodesel run` in prose\n\n```\n"
            "sudo nodesel testbed up \\\n    --nodes 4\nmpiexec -n 2 nodesel grid --grid g.toml\n"
            "nodesel measure --json > status.json\necho nothing\n```\n\n"
            "| command | does |\n|---|---|\n| `nodesel patterns list` | the library |\n")
    assert readme_commands(text) == [["testbed", "up", "--nodes", "4"],
                                     ["grid", "--grid", "g.toml"], ["measure", "--json"],
                                     ["patterns", "list"]]


def _help_screens(parser, prefix=("nodesel",)):
    """(command words, help text) of the parser and of every subcommand below it."""
    import argparse

    yield prefix, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _help_screens(sub, prefix + (name,))


def test_no_help_screen_calls_a_paper_by_a_file_name():
    screens = list(_help_screens(build_parser()))
    assert len(screens) > 25
    for words, text in screens:
        assert not re.search(r"seeds? 00[0-4]", text, re.I), " ".join(words)


def readme_python():
    """The README's Python code blocks (```python), joined."""
    blocks, block = [], None
    for raw in open(README).read().splitlines():
        if block is None and raw.strip() == "```python":
            block = []
        elif block is not None and raw.startswith("```"):
            blocks.append("\n".join(block))
            block = None
        elif block is not None:
            block.append(raw)
    return blocks


def test_the_readme_python_api_section_runs_and_prints_what_it_says(tmp_path):
    (code,) = readme_python()
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    ends = eval(lines[0])  # two flows sharing one 100 Mbit/s port: 1.25 MB at 50 Mbit/s
    assert ends == [pytest.approx(0.2, abs=0.002)] * 2
    assert "bottleneck_mbps=100.0" in lines[1]  # the slow pairs are kept apart
    waits = {line.split()[0]: float(line.split()[1]) for line in lines[2:5]}
    assert list(waits) == ["fcfs", "easy", "conservative"]
    assert waits["fcfs"] > 2 * waits["easy"] > 0  # backfilling shortens the waits
    assert float(lines[5]) > 4 * 86400  # a queued job starts after now


def test_the_package_top_level_is_the_documented_api():
    import pydoc

    import emulator

    assert len(emulator.__all__) > 60
    text = pydoc.render_doc(emulator, renderer=pydoc.plaintext)
    for name in emulator.__all__:
        assert getattr(emulator, name) is not None
        assert name in text, f"help(emulator) does not list {name}"
    with pytest.raises(AttributeError, match="no attribute 'simulate'"):
        emulator.simulate  # names are unique at the top: simulate_flows, simulate_schedule


def test_a_scheduling_run_imports_no_plotting_graph_or_science_library():
    code = ("import sys, emulator as ns\n"
            "t = ns.read_swf(ns.resolve_trace('nasa'))\n"
            "ns.simulate_schedule(ns.jobs_from_trace(t), ns.Scheduler(t.max_procs, 'easy'))\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'scipy', 'matplotlib', 'networkx', 'numpy'}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_nodesel_schedule_on_an_swf_trace_imports_neither_numpy_nor_dataclasses(tmp_path):
    """numpy's import is a quarter of a whole ``nodesel schedule`` run on NASA, dataclasses'
    (inspect, ast, dis, tokenize with it) a few per cent: the run reads, schedules and writes
    its four files without them."""
    code = ("import sys\nfrom emulator.cli import main\n"
            f"main(['schedule', 'nasa', '--policy', 'easy', '--out', {str(tmp_path)!r}, "
            "'--no-progress'])\n"
            "print(sorted({'numpy', 'dataclasses', 'inspect'} & set(sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "[]"
    assert sorted(os.listdir(tmp_path)) == ["batsim_jobs.csv", "jobs.csv", "schedule.swf",
                                            "summary.json", "table.md"]


def readme_input_examples():
    """The code blocks of the README's Inputs section: (language, text)."""
    text = open(README).read()
    section = text[text.index("## Inputs\n"):text.index("## How it works\n")]
    return re.findall(r"```(\w*)\n(.*?)```", section, re.S)


def test_every_input_example_of_the_readme_reads_as_it_says(tmp_path):
    from emulator.network import cluster as clusters
    from emulator.network.simgrid import read_platform
    from emulator.scheduling.job import jobs_from_trace
    from emulator.workload.batsim import read_batsim
    from emulator.workload.sacct import parse_sacct

    examples = readme_input_examples()
    assert [lang for lang, _ in examples] == ["toml", "xml", "json", ""]
    (_, toml), (_, xml), (_, batsim), (_, sacct) = examples
    (tmp_path / "c.toml").write_text(toml)
    tree = clusters.load_cluster(tmp_path / "c.toml")
    assert tree.nodes["rack1"]["fabric_mbps"] == 4000 and tree["rack2"]["core"][
        "capacity_mbps"] == 1000
    (tmp_path / "p.xml").write_text(xml)
    platform = read_platform(str(tmp_path / "p.xml"))
    assert len(clusters.node_names(platform)) == 64
    assert platform.nodes["c"]["fabric_mbps"] == pytest.approx(18000.0)  # 2.25 GBps
    (tmp_path / "w.json").write_text(batsim)
    (job,) = jobs_from_trace(read_batsim(str(tmp_path / "w.json")))
    assert (job.procs, job.run, job.requested) == (2, 20, 100)
    trace, left_out = parse_sacct(sacct, "sacct.txt")
    (job,) = jobs_from_trace(trace)
    assert (job.procs, job.run, job.requested, left_out) == (8, 3480, 7200, 0)
    assert trace.data[0][2] == 120  # SWF's wait: submitted 10:00, started 10:02

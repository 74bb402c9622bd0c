"""The package layout: one domain per subpackage, imports that point down the flow of the
program, no import cycles, a docstring on every module, and a command line whose every option
has a help line and every command an example."""

import argparse
import ast
import os

import networkx as nx
import pytest

from emulator.cli import build_parser

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Which domains each domain may import (``errors`` and ``files`` serve everyone). The order
# is the flow: network -> shaping | kernel -> selection -> skeletons -> coordinator ->
# interpose -> experiments | batch -> cli; the scheduling domains (workload -> scheduling -> prediction -> grid)
# stand beside it and meet it in the coordinator.
ALLOWED = {
    "network": set(),
    "shaping": {"network"},
    "kernel": {"network"},
    "selection": {"network"},
    "skeletons": {"network", "shaping", "selection"},
    "workload": set(),
    "scheduling": {"workload"},
    "prediction": {"workload", "scheduling"},
    "grid": {"network", "workload", "scheduling", "prediction"},
    "coordinator": {"network", "shaping", "kernel", "selection", "skeletons", "workload",
                    "scheduling", "prediction"},
    "experiments": {"network", "shaping", "kernel", "selection", "skeletons", "workload",
                    "scheduling", "prediction", "coordinator", "interpose"},
    "batch": {"network", "shaping", "kernel", "selection", "skeletons", "workload",
              "scheduling", "prediction", "coordinator", "interpose"},
    "interpose": {"network", "coordinator"},
}
ROOT_MODULES = {"errors", "files"}


def _modules():
    """(dotted name, path) of every module of the project's packages."""
    for top in ("emulator", "skeletons"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if f.endswith(".py"):
                    path = os.path.join(dirpath, f)
                    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    yield rel.removesuffix(".__init__"), path


def _imports(name, path):
    """Project modules that ``name`` imports (deferred imports inside functions too)."""
    tree = ast.parse(open(path).read(), path)
    package = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)  # "from pkg import module"
    known = dict(_modules())
    return {m for m in found if m in known and m != name}


def _domain(module):
    parts = module.split(".")
    if parts[0] == "skeletons":
        return "skeletons"
    return parts[1] if len(parts) > 1 else None


def test_every_domain_imports_only_down_the_flow():
    wrong = []
    for name, path in _modules():
        own = _domain(name)
        if own not in ALLOWED:
            continue  # the package root and cli may import anything
        for target in _imports(name, path):
            other = _domain(target)
            if other in (own, None) or other in ROOT_MODULES or other in ALLOWED[own]:
                continue
            wrong.append(f"{name} imports {target}")
    assert not wrong, "imports against the flow:\n" + "\n".join(wrong)


def test_no_import_cycles():
    graph = nx.DiGraph()
    for name, path in _modules():
        graph.add_node(name)
        for target in _imports(name, path):
            if not name.startswith(target + "."):  # a module importing its own package
                graph.add_edge(name, target)
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"import cycles: {cycles[:5]}"


MAX_FUNCTION_LINES, MAX_PARAMETERS, MAX_MODULE_LINES = 80, 8, 600


def test_functions_fit_on_a_screen_and_take_few_parameters():
    """No function of ``emulator/`` over 80 lines or with more than 8 parameters (``self``
    and ``cls`` not counted), no module over 600 lines."""
    too_long, too_many, big = [], [], []
    for name, path in _modules():
        if not name.startswith("emulator"):
            continue
        text = open(path).read()
        if text.count("\n") > MAX_MODULE_LINES:
            big.append(name)
        for node in ast.walk(ast.parse(text, path)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = node.args
            params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs
                      if p.arg not in ("self", "cls")] + [v for v in (a.vararg, a.kwarg) if v]
            if len(params) > MAX_PARAMETERS:
                too_many.append(f"{name}.{node.name} ({len(params)})")
            if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                too_long.append(f"{name}.{node.name} ({node.end_lineno - node.lineno + 1})")
    assert (too_long, too_many, big) == ([], [], [])


MAX_LINE_CHARACTERS = 100


def test_lines_fit_on_a_screen():
    """No line of the packages' Python over 100 characters."""
    long = [f"{os.path.relpath(path, ROOT)}:{number}"
            for _, path in _modules()
            for number, line in enumerate(open(path).read().splitlines(), start=1)
            if len(line) > MAX_LINE_CHARACTERS]
    assert long == []


def test_every_module_says_what_it_does():
    missing = [name for name, path in _modules()
               if not ast.get_docstring(ast.parse(open(path).read()))]
    assert not missing, f"modules without a docstring: {missing}"


def test_every_subpackage_names_the_module_to_open_first():
    for domain in ("network", "shaping", "kernel", "selection", "coordinator", "experiments"):
        path = os.path.join(ROOT, "emulator", domain, "__init__.py")
        doc = ast.get_docstring(ast.parse(open(path).read()))
        assert doc and "Open ``" in doc, f"{path}: the docstring names no module to open first"


def _parsers(parser, prefix=("nodesel",)):
    """Every (command path, parser) under ``parser``, itself included."""
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, prefix + (name,))


def test_every_option_has_a_help_line_and_every_command_an_example():
    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 15
    for path, parser in parsers:
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            assert action.help and action.help != argparse.SUPPRESS, \
                f"{' '.join(path)}: {action.option_strings or action.dest} has no help line"
        assert "example" in (parser.epilog or ""), f"{' '.join(path)} shows no example"


def test_each_command_is_built_from_the_group_the_table_names():
    """A run builds its own group's parsers alone (``COMMANDS``): every command of every group
    must be in the table under that group, or it would not parse."""
    import importlib

    from emulator.cli import COMMANDS, GROUPS

    registered = {}
    for group in GROUPS:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"emulator.cli.{group}").register(sub)
        registered.update({name: group for name in sub.choices})
    assert registered == COMMANDS
    for name, group in COMMANDS.items():
        assert set(build_parser(name)._subparsers._group_actions[0].choices) == \
            {n for n, g in COMMANDS.items() if g == group}


@pytest.mark.parametrize("argv", [["--help"], ["testbed", "up", "--help"], ["select", "--help"]])
def test_help_prints_options_and_examples(argv, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "example" in out
    if argv[0] == "testbed":
        assert "--subnet SUBNET" in out and "IPv4 subnet" in out


def test_papers_are_named_by_their_authors():
    """A paper is cited by its authors, never by the number of its file in the folder of
    design papers."""
    import re
    import subprocess

    pattern = re.compile(r"seeds?[ _-]?00[0-4]", re.IGNORECASE)
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout: " + tracked.stderr.strip())
    found = []
    for rel in tracked.stdout.split():
        path = os.path.join(ROOT, rel)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        if b"\0" in data[:4096]:
            continue  # binary (pictures, compressed traces)
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_scripts_import_the_installed_package():
    """No script reaches into the source folder: ``pip install -e .`` is what they use, as a
    study of a library user would."""
    folder = os.path.join(ROOT, "scripts")
    found = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        with open(path, errors="replace") as f:
            for number, line in enumerate(f, 1):
                if "sys.path.insert" in line or "sys.path.append" in line:
                    found.append(f"scripts/{name}:{number}: {line.strip()}")
    assert not found, "\n".join(found)

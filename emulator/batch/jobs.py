"""The parallel jobs of a batch run: read from a jobs file or generated as in Hanzich et al. §4.

A jobs file is CSV, TOML or SWF. CSV has a header and one job per line::

    arrival_seconds,benchmark,class,tasks
    0,cg,A,4
    12.5,bt,A,4

TOML lists ``[[job]]`` tables with the same fields (``class`` may be left out: A). An
optional ``memory_mb`` gives each task's memory; without it the class's problem size does
(:mod:`emulator.batch.memory`). An optional ``nodes`` (names separated by spaces, one per
task; a list in TOML) pins the job to those nodes, whatever the placement policy. An
optional ``command`` makes the job a real MPI program (built with the mpich wheel's
``mpicc``) in place of a skeleton: the program and its arguments (split as a shell would,
nothing run through one; a list in TOML), its ranks started by nodesel on the job's nodes
under the interposition library (:mod:`emulator.interpose`); ``benchmark`` is then only
its name (default: the program's file name), ``class`` is not used and ``memory_mb``
defaults to 0. An SWF
trace gives arrival (field 2) and tasks (requested processors, field 8, else allocated,
field 5); its executable number (field 14) picks the benchmark, 1..8 standing for bt, cg,
ep, ft, is, lu, mg, sp. Every problem names the file, the line (or table) and the field.

The generator follows Hanzich et al.: ``count`` jobs of 2, 4 or 8 tasks (a square, 4, for BT and
SP), Poisson arrivals with a mean gap of 15 s, half of them from computation-bound
benchmarks and half from communication-bound ones, shuffled, seeded.
"""

import io
import os
import shlex
import shutil
from dataclasses import asdict, dataclass

import numpy as np

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from ..errors import InputFileError, ProcessCountError
from ..files import read_input_csv, read_input_text
from ..selection.patterns import CLASS_PARAMS, NAS_BENCHMARKS, check_nprocs
from .memory import task_memory_mb

FIELDS = ("arrival_seconds", "benchmark", "class", "tasks", "memory_mb", "nodes", "command")
# Hanzich et al.'s jobs (CG, IS, MG, BT), split by what dominates their time on a 100 Mbit/s
# switch (class A, 4 tasks, the emulator's characterization): BT computes, the rest talk.
COMPUTE_BOUND = ("bt", "ep", "lu", "sp")
COMMUNICATION_BOUND = ("cg", "ft", "is", "mg")
HANZICH_BENCHMARKS = ("bt", "cg", "is", "mg")
HANZICH_TASKS = (2, 4, 8)
SWF_EXECUTABLES = NAS_BENCHMARKS  # executable number k (1-based) is NAS_BENCHMARKS[k - 1]


@dataclass(frozen=True)
class BatchJob:
    """One parallel job: a NAS skeleton of ``tasks`` tasks, arriving at ``arrival_seconds``
    after the run's start."""

    id: int
    arrival_seconds: float
    benchmark: str
    npb_class: str
    tasks: int
    memory_mb: float = None  # per task; None: estimated from the class
    nodes: tuple = None  # the nodes it must run on (rank i on nodes[i]); None: the policy's
    command: tuple = None  # a real program and its arguments in place of the skeleton

    @property
    def task_memory_mb(self):
        if self.memory_mb is not None:
            return self.memory_mb
        if self.command:
            return 0.0
        return task_memory_mb(self.benchmark, self.npb_class, self.tasks)

    @property
    def kind(self):
        if self.command:
            return "program"
        return "compute" if self.benchmark in COMPUTE_BOUND else "communication"

    @property
    def application(self):
        """What is characterized, once for all jobs alike: ``(benchmark, class, tasks)``;
        for a program ``(its command line, "", tasks)``."""
        if self.command:
            return (shlex.join(self.command), "", self.tasks)
        return (self.benchmark, self.npb_class, self.tasks)

    def to_json(self):
        return asdict(self)


def _nodes(path, where, nodes, ntasks):
    """A job's pinned nodes: names separated by spaces (or a list), one per task, distinct."""
    if nodes is None or (isinstance(nodes, str) and not nodes.strip()):
        return None
    names = nodes.split() if isinstance(nodes, str) else nodes
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InputFileError(path, f"{where}: nodes", "must be node names")
    if len(names) != ntasks or len(set(names)) != len(names):
        raise InputFileError(path, f"{where}: nodes",
                             f"must name {ntasks} distinct nodes, one per task, got {nodes!r}")
    return tuple(names)


def _command(path, where, command):
    """A job's program and arguments (a string split as a shell would, or a list in TOML),
    the program found; None if not given."""
    if command is None or (isinstance(command, str) and not command.strip()):
        return None
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as e:
            raise InputFileError(path, f"{where}: command", f"cannot split it: {e}") from None
    elif isinstance(command, list) and command and all(isinstance(w, str) for w in command):
        argv = command
    else:
        raise InputFileError(path, f"{where}: command",
                             "must be a program and its arguments (a string or a list)")
    program = argv[0]
    found = shutil.which(program) if os.sep not in program else \
        (program if os.path.isfile(program) and os.access(program, os.X_OK) else None)
    if found is None:
        raise InputFileError(path, f"{where}: command",
                             f"no executable program {program!r} (build it with the mpich "
                             "wheel's mpicc; give its path)")
    return (os.path.abspath(found),) + tuple(argv[1:])


def _program_job(path, where, k, arrival, fields, command):
    """Job ``k``, a real program: its name, task count and memory checked."""
    tasks, memory_mb = fields["tasks"], fields.get("memory_mb")
    try:
        ntasks = int(str(tasks).strip())
    except (TypeError, ValueError):
        raise InputFileError(path, f"{where}: tasks",
                             f"must be a whole number, got {tasks!r}") from None
    if ntasks < 1:
        raise InputFileError(path, f"{where}: tasks", f"must be at least 1, got {ntasks}")
    name = str(fields.get("benchmark") or "").strip() or os.path.basename(command[0])
    return BatchJob(k, arrival, name, "", ntasks, _memory(path, where, memory_mb),
                    _nodes(path, where, fields.get("nodes"), ntasks), command)


def _memory(path, where, memory_mb):
    """A job's ``memory_mb``: a positive number of MB per task, or None if not given."""
    if memory_mb is None or str(memory_mb).strip() == "":
        return None
    try:
        memory_mb = float(memory_mb)
    except (TypeError, ValueError):
        memory_mb = None
    if isinstance(memory_mb, bool) or memory_mb is None or not 0 < memory_mb < 1e9:
        raise InputFileError(path, f"{where}: memory_mb",
                             "must be a positive number of MB per task")
    return memory_mb


def _job(path, where, k, fields):
    """Job ``k`` from ``fields``, the file's values by name (:data:`FIELDS`; ``class`` A,
    ``memory_mb``, ``nodes`` and ``command`` none where missing), each checked."""
    arrival, benchmark, tasks = fields["arrival_seconds"], fields.get("benchmark"), \
        fields["tasks"]
    npb_class, memory_mb = fields.get("class", "A"), fields.get("memory_mb")
    try:
        arrival = float(arrival)
    except (TypeError, ValueError):
        raise InputFileError(path, f"{where}: arrival_seconds",
                             f"must be a number of seconds, got {arrival!r}") from None
    if not arrival >= 0 or arrival == float("inf"):
        raise InputFileError(path, f"{where}: arrival_seconds",
                             f"must be a finite number >= 0, got {arrival!r}")
    command = _command(path, where, fields.get("command"))
    if command:
        return _program_job(path, where, k, arrival, fields, command)
    if benchmark is None or not str(benchmark).strip():
        raise InputFileError(path, f"{where}: benchmark",
                             "missing (a NAS benchmark, or a command to run)")
    name = str(benchmark).strip().lower()
    if name not in NAS_BENCHMARKS:
        raise InputFileError(path, f"{where}: benchmark",
                             f"unknown benchmark {benchmark!r}; choose from "
                             f"{', '.join(NAS_BENCHMARKS)}")
    npb_class = str(npb_class).strip().upper()
    if npb_class not in CLASS_PARAMS[name]:
        raise InputFileError(path, f"{where}: class", f"unknown class {npb_class!r}; choose "
                                                      f"from {', '.join(CLASS_PARAMS[name])}")
    try:
        ntasks = int(str(tasks).strip())
    except (TypeError, ValueError):
        raise InputFileError(path, f"{where}: tasks",
                             f"must be a whole number, got {tasks!r}") from None
    try:
        check_nprocs(name, ntasks)
    except ProcessCountError as e:
        raise InputFileError(path, f"{where}: tasks", str(e)) from None
    return BatchJob(k, arrival, name, npb_class, ntasks, _memory(path, where, memory_mb),
                    _nodes(path, where, fields.get("nodes"), ntasks))


def _from_csv(path):
    lines = [(i, r) for i, r in read_input_csv(path, "jobs file")
             if r and not r[0].lstrip().startswith("#")]
    if not lines:
        raise InputFileError(path, None, "no jobs: the file is empty")
    header_line, header = lines[0]
    header = [h.strip().lower() for h in header]
    missing = [f for f in ("arrival_seconds", "tasks") if f not in header]
    if "benchmark" not in header and "command" not in header:
        missing.append("benchmark (or command)")
    if missing:
        raise InputFileError(path, f"line {header_line}",
                             f"the header needs arrival_seconds, benchmark (or command) and "
                             f"tasks; missing {', '.join(missing)}")
    col = {name: header.index(name) for name in header if name in FIELDS}
    jobs = []
    for line, row in lines[1:]:
        if len(row) != len(header):
            raise InputFileError(path, f"line {line}",
                                 f"{len(row)} fields, the header has {len(header)}")
        jobs.append(_job(path, f"line {line}", len(jobs) + 1,
                         {name: row[i] for name, i in col.items()}))
    return jobs


def _from_toml(path, text):
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputFileError(path, None, f"malformed TOML: {e}") from None
    unknown = set(data) - {"job"}
    if unknown:
        raise InputFileError(path, sorted(unknown)[0], "unknown table (list jobs as [[job]])")
    tables = data.get("job")
    if not isinstance(tables, list) or not tables:
        raise InputFileError(path, "job", "no [[job]] tables")
    jobs = []
    for k, t in enumerate(tables):
        where = f"job[{k}]"
        if not isinstance(t, dict):
            raise InputFileError(path, where, "must be a table")
        for key in t:
            if key not in FIELDS:
                raise InputFileError(path, f"{where}.{key}", "unknown field")
        for key in ("arrival_seconds", "tasks") + (() if "command" in t else ("benchmark",)):
            if key not in t:
                raise InputFileError(path, f"{where}.{key}", "missing")
        if isinstance(t["tasks"], bool) or not isinstance(t["tasks"], int):
            raise InputFileError(path, f"{where}.tasks",
                                 f"must be a whole number, got {t['tasks']!r}")
        if isinstance(t["arrival_seconds"], bool) \
                or not isinstance(t["arrival_seconds"], (int, float)):
            raise InputFileError(path, f"{where}.arrival_seconds",
                                 f"must be a number of seconds, got {t['arrival_seconds']!r}")
        memory = t.get("memory_mb")
        if isinstance(memory, bool) or (memory is not None
                                        and not isinstance(memory, (int, float))):
            raise InputFileError(path, f"{where}.memory_mb",
                                 f"must be a number of MB, got {memory!r}")
        jobs.append(_job(path, where, len(jobs) + 1, t))
    return jobs


def _from_swf(path, npb_class):
    from ..workload.swf import COLUMN, read_swf

    trace = read_swf(path, check=False)
    data = trace.data
    if not len(data):
        raise InputFileError(path, None, "no jobs in the trace")
    first = float(data[0, COLUMN["submit"]])
    jobs = []
    for i, row in enumerate(data):
        where = f"job {int(row[COLUMN['job']])}"
        exe = int(row[COLUMN["executable"]])
        if not 1 <= exe <= len(SWF_EXECUTABLES):
            raise InputFileError(path, f"{where}: executable",
                                 f"must be 1..{len(SWF_EXECUTABLES)} (standing for "
                                 f"{', '.join(SWF_EXECUTABLES)}), got {exe}")
        tasks = row[COLUMN["requested_procs"]]
        if tasks <= 0:
            tasks = row[COLUMN["allocated_procs"]]
        jobs.append(_job(path, where, i + 1, {
            "arrival_seconds": float(row[COLUMN["submit"]]) - first,
            "benchmark": SWF_EXECUTABLES[exe - 1], "class": npb_class, "tasks": int(tasks)}))
    return jobs


def read_jobs(path, *, npb_class="A"):
    """The jobs of a CSV, TOML or SWF jobs file, in arrival order (ids in file order).
    ``npb_class`` is the class of an SWF trace's jobs."""
    ext = os.path.splitext(str(path))[1].lower()
    if ext == ".swf":
        jobs = _from_swf(path, npb_class)
    else:
        if ext == ".toml":
            jobs = _from_toml(path, read_input_text(path, "jobs file"))
        elif ext in (".csv", ".txt", ""):
            jobs = _from_csv(path)
        else:
            raise InputFileError(path, None, f"unknown jobs file type {ext!r}; use .csv, "
                                             ".toml or .swf")
    if not jobs:
        raise InputFileError(path, None, "no jobs")
    return sorted(jobs, key=lambda j: (j.arrival_seconds, j.id))


def check_fits(jobs, nodes, *, path="jobs", memory_mb=None, names=None):
    """Raise InputFileError for a job that could never start: its tasks go on distinct
    nodes, so it needs at most ``nodes`` tasks, and (given ``memory_mb``, each node's
    memory) as many nodes that hold one of its tasks when nothing else runs there; nodes it
    names must be the cluster's (``names``, in the order of ``memory_mb``)."""
    for job in jobs:
        if job.nodes and names is not None:
            unknown = [n for n in job.nodes if n not in names]
            if unknown:
                raise InputFileError(path, f"job {job.id}: nodes",
                                     f"{', '.join(unknown)} not in the cluster")
            if memory_mb is not None and any(memory_mb[names.index(n)] < job.task_memory_mb
                                              for n in job.nodes):
                raise InputFileError(path, f"job {job.id}: nodes",
                                     f"{job.benchmark.upper()} needs {job.task_memory_mb:.0f} "
                                     "MB per task, more than one of its nodes has")
        if job.tasks > nodes:
            raise InputFileError(path, f"job {job.id}: tasks",
                                 f"{job.benchmark.upper()} of {job.tasks} tasks cannot run on "
                                 f"{nodes} nodes (a job's tasks go on distinct nodes)")
        if memory_mb is not None:
            room = sum(1 for mb in memory_mb if mb >= job.task_memory_mb)
            if room < job.tasks:
                raise InputFileError(path, f"job {job.id}: memory_mb",
                                     f"{job.benchmark.upper()} needs {job.task_memory_mb:.0f} "
                                     f"MB per task on {job.tasks} nodes; {room} node(s) have "
                                     "that much")


def generate_jobs(count=30, *, seed=1, mean_gap_seconds=15.0, benchmarks=HANZICH_BENCHMARKS,
                  tasks=HANZICH_TASKS, npb_class="A", max_tasks=None):
    """Hanzich et al.'s workload: ``count`` jobs, Poisson arrivals, sizes from ``tasks`` (squares
    only for BT and SP), computation and communication balanced. The first job arrives at
    0."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    rng = np.random.default_rng(seed)
    compute = [b for b in benchmarks if b in COMPUTE_BOUND]
    talk = [b for b in benchmarks if b not in COMPUTE_BOUND]
    pools = [p for p in (compute, talk) if p]
    names = [pools[k % len(pools)][rng.integers(len(pools[k % len(pools)]))]
             for k in range(count)]
    rng.shuffle(names)
    gaps = rng.exponential(mean_gap_seconds, count)
    gaps[0] = 0.0
    arrivals = np.cumsum(gaps)
    jobs = []
    for k, (name, arrival) in enumerate(zip(names, arrivals)):
        sizes = [n for n in tasks if (max_tasks is None or n <= max_tasks)
                 and _allowed(name, n)]
        if not sizes:  # BT/SP with no square among the sizes: the smallest square > 1
            sizes = [4]
        jobs.append(BatchJob(k + 1, round(float(arrival), 3), name, npb_class,
                             int(sizes[rng.integers(len(sizes))])))
    return jobs


def _allowed(name, n):
    try:
        check_nprocs(name, n)
    except ProcessCountError:
        return False
    return True


def _csv_field(text):
    """``text`` as one CSV field (quoted if it holds a comma or a quote)."""
    if not any(c in text for c in ',"\n'):
        return text
    return '"' + text.replace('"', '""') + '"'


def write_jobs_csv(jobs):
    """The jobs as the CSV this module reads."""
    out = io.StringIO()
    out.write(",".join(FIELDS) + "\n")
    for j in jobs:
        command = shlex.join(j.command) if j.command else ""
        memory = "" if j.command and j.memory_mb is None else f"{j.task_memory_mb:.1f}"
        out.write(f"{j.arrival_seconds:g},{_csv_field(j.benchmark)},{j.npb_class},{j.tasks},"
                  f"{memory},{' '.join(j.nodes or ())},{_csv_field(command)}\n")
    return out.getvalue()

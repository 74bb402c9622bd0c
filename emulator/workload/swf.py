"""The Standard Workload Format of the Parallel Workloads Archive: read and write job traces.

A trace is a header of ``;`` comment lines (``; MaxProcs: 128``) and one line of 18
whitespace-separated numbers per job; -1 means missing. ``.swf``, ``.swf.gz`` and a ``.zip``
holding one ``.swf`` are read. Reading is vectorised (numpy), so a 200,000-job file takes well
under two seconds.

Bad lines (the wrong number of fields, a field that is not a number, no run time or no
processor count, a job larger than the machine) raise :class:`~emulator.errors.InputFileError`
naming the file, the line and the field, unless ``skip_bad`` drops them and counts them.

Archive traces as they are: :func:`prepare` takes a trace read without those checks and
keeps the jobs a schedule can use. Jobs that cannot be scheduled (no processor count, no
run time, a negative submit time, more processors than the machine: jobs that never ran,
mostly) are dropped and counted; a job with no requested time (SWF field 9) in a trace that
has them gets one by a rule (``fill_requested``: ``max``, the largest requested time of the
trace, standing in for the site's default limit; ``run``, the job's own run time; or a
number of seconds), counted too. ``strict`` refuses both instead, naming the first.
Which field gives a job's size is ``size_field``: ``requested`` (SWF field 8, else the
allocated processors of field 5; the default) or ``allocated`` (field 5, else field 8).
"""

import gzip
import io
import math
import os
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputFileError
from ..files import write_atomic
from ._columns import format_rows, parse_rows

FIELDS = ("job", "submit", "wait", "run", "allocated_procs", "avg_cpu", "used_memory",
          "requested_procs", "requested_time", "requested_memory", "status", "user", "group",
          "executable", "queue", "partition", "preceding_job", "think_time")
COLUMN = {name: i for i, name in enumerate(FIELDS)}
MISSING = -1.0


@dataclass
class Trace:
    """A job trace: ``data`` holds one row of the 18 SWF fields per job, in file order."""

    data: np.ndarray
    header: list = field(default_factory=list)  # the comment lines, without the leading ';'
    path: str = "<trace>"
    lines: np.ndarray = None  # the file line of each row (1-based)
    dropped: int = 0  # bad jobs dropped by skip_bad
    drop_reasons: list = field(default_factory=list)  # the first few, as messages
    size_field: str = "requested"  # which field gives a job's size first (see prepare)
    filled: int = 0  # requested times filled in by prepare

    def __post_init__(self):
        self.data = np.asarray(self.data, dtype=np.float64).reshape(-1, len(FIELDS))
        if self.lines is None:
            self.lines = np.arange(1, len(self.data) + 1)

    def __len__(self):
        return len(self.data)

    def column(self, name):
        return self.data[:, COLUMN[name]]

    @property
    def procs(self):
        """Processors of each job: the requested count, else the allocated one (with
        ``size_field`` "allocated", the other way round)."""
        first, second = self.column("requested_procs"), self.column("allocated_procs")
        if self.size_field == "allocated":
            first, second = second, first
        return np.where(first > 0, first, second)

    @property
    def fields(self):
        """Header fields as a dict (``MaxProcs`` -> ``'128'``); a repeated key keeps the first."""
        out = {}
        for line in self.header:
            key, sep, value = line.partition(":")
            if sep and key.strip() and " " not in key.strip():
                out.setdefault(key.strip(), value.strip())
        return out

    def header_number(self, *keys):
        """The first of ``keys`` the header gives as a positive finite number, else None."""
        fields = self.fields
        for key in keys:
            try:
                value = float(fields[key].split()[0])
            except (KeyError, ValueError, IndexError):
                continue
            if 0 < value < float("inf"):
                return value
        return None

    @property
    def max_procs(self):
        """Processors of the machine: the header's MaxProcs (or MaxNodes), else the largest job."""
        value = self.header_number("MaxProcs", "MaxNodes")
        if value is not None:
            return int(value)
        return int(self.procs.max()) if len(self) else 0

    def has(self, name):
        """True if any job has the field (not -1)."""
        return bool(len(self)) and bool((self.column(name) != MISSING).any())

    def subset(self, mask):
        """A trace of the rows where ``mask`` is true (same header)."""
        return Trace(self.data[mask], list(self.header), self.path, self.lines[mask],
                     self.dropped, list(self.drop_reasons), self.size_field)

    def with_header(self, **values):
        """A copy whose header sets ``Key: value`` for each keyword (added if missing)."""
        header = list(self.header)
        for key, value in values.items():
            line = f" {key}: {value}"
            idx = next((i for i, h in enumerate(header) if h.split(":")[0].strip() == key), None)
            if idx is None:
                header.append(line)
            else:
                header[idx] = line
        return Trace(self.data.copy(), header, self.path, self.lines.copy(), self.dropped,
                     list(self.drop_reasons), self.size_field)


def _read_zip(name):
    """The one file of a zip trace (zipfile, 4 ms to import, is imported for these alone)."""
    import zipfile

    try:
        with zipfile.ZipFile(name) as z:
            members = [m for m in z.namelist() if not m.endswith("/")]
            if len(members) != 1:
                raise InputFileError(name, None, f"a zip trace must hold exactly one file, "
                                                 f"this one holds {len(members)}")
            return z.read(members[0])
    except zipfile.BadZipFile as e:
        raise InputFileError(name, None, f"cannot be read: {e}") from None


def _read_text(path):
    name = os.fspath(path)
    try:
        if name.endswith(".gz"):
            with gzip.open(name, "rb") as f:
                raw = f.read()
        elif name.endswith(".zip"):
            raw = _read_zip(name)
        else:
            with open(name, "rb") as f:
                raw = f.read()
    except FileNotFoundError:
        raise InputFileError(name, None, "no such file") from None
    except IsADirectoryError:
        raise InputFileError(name, None, "is a folder, not a trace file") from None
    except (OSError, EOFError) as e:
        raise InputFileError(name, None, f"cannot be read: {e}") from None
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError as e:
        raise InputFileError(name, f"byte {e.start}", "not a text SWF file "
                                                      "(a binary or non-ASCII byte)") from None


def _check_jobs(data, line_numbers, *, machine_procs, size_field="requested"):
    """(row, field name, problem) for every job a schedule cannot use."""
    problems = []
    run = data[:, COLUMN["run"]]
    submit = data[:, COLUMN["submit"]]
    procs = Trace(data, size_field=size_field).procs
    for rows, name, problem in (
            (np.flatnonzero(submit < 0), "submit", "negative submit time"),
            (np.flatnonzero(run < 0), "run", "no run time (-1 or negative)"),
            (np.flatnonzero(procs <= 0), "requested_procs",
             "no processor count (fields 5 and 8 are both missing)")):
        problems += [(r, name, problem) for r in rows]
    if machine_procs:
        big = np.flatnonzero(procs > machine_procs)
        problems += [(r, "requested_procs", f"asks for {procs[r]:g} processors, more than the "
                                            f"machine's {machine_procs}") for r in big]
    return problems


def read_swf(path, *, skip_bad=False, machine_procs=None, check=True):
    """Read an SWF trace.

    Parameters
    ----------
    path : str
        ``.swf``, ``.swf.gz``, or a ``.zip`` holding one trace.
    skip_bad : bool
        Drop bad jobs (counted in ``Trace.dropped``) instead of raising.
    machine_procs : int, optional
        Processors of the machine; default the header's ``MaxProcs`` (or ``MaxNodes``).
    check : bool
        Check each job can be scheduled (a run time, a processor count, fits the machine).

    Raises
    ------
    InputFileError
        A malformed line, naming the file, line and field.
    """
    name = os.fspath(path)
    header, data_lines, numbers = _split_lines(_read_text(name))
    data, rows, reasons, unread = _parse_jobs(name, data_lines, numbers, skip_bad)
    trace = Trace(data, header, name, numbers[rows])
    if check and len(trace):
        trace = _drop_unschedulable(trace, machine_procs, skip_bad, reasons)
    trace.dropped += unread
    trace.drop_reasons = reasons
    return trace


def _split_lines(text):
    """(header lines without their ';', job lines, the job lines' numbers in the file)."""
    header, data_lines, numbers = [], [], []
    for i, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(";"):
            header.append(stripped[1:])
        else:
            data_lines.append(stripped)
            numbers.append(i)
    return header, data_lines, np.asarray(numbers, dtype=np.int64)


def _parse_jobs(name, data_lines, numbers, skip_bad):
    """The job lines as rows of numbers: (data, the rows of ``data_lines`` kept, up to five
    reasons for the lines dropped, how many were). A bad line raises, naming its line and
    field, unless ``skip_bad``."""
    raw, bad_row = parse_rows(data_lines, len(FIELDS))  # plain numbers throughout: done
    if bad_row < 0:
        data = np.frombuffer(raw).reshape(len(data_lines), len(FIELDS))
        return data, np.arange(len(data_lines)), [], 0
    counts = np.fromiter((len(s.split()) for s in data_lines), dtype=np.int64,
                         count=len(data_lines))
    keep = np.ones(len(data_lines), dtype=bool)
    reasons = []

    def bad(row, where, problem):
        if not skip_bad:
            raise InputFileError(name, f"line {numbers[row]}" + (f", {where}" if where else ""),
                                 problem)
        if keep[row]:
            keep[row] = False
            if len(reasons) < 5:
                reasons.append(f"line {numbers[row]}" + (f", {where}" if where else "")
                               + f": {problem}")

    for row in np.flatnonzero(counts != len(FIELDS)):
        bad(row, None, f"{counts[row]} fields, expected {len(FIELDS)}")
    rows = np.flatnonzero(keep)
    data = np.empty((len(rows), len(FIELDS)))
    if len(rows):
        try:
            data = np.loadtxt([data_lines[r] for r in rows], dtype=np.float64, ndmin=2,
                              comments=None)
            if not np.isfinite(data).all():  # 'inf', 'nan' or 1e999: numbers to loadtxt
                raise ValueError
        except ValueError:
            data = np.full((len(rows), len(FIELDS)), np.nan)
            for j, r in enumerate(rows):  # the slow path, only to name the bad field
                for k, token in enumerate(data_lines[r].split()):
                    problem = _number_problem(token)
                    if problem:
                        bad(r, f"field {k + 1} ({FIELDS[k]})", f"{token[:20]!r} {problem}")
                        break
                    data[j, k] = float(token)
            if skip_bad:
                good = ~np.isnan(data).any(axis=1)
                data, rows = data[good], rows[good]
    return data, rows, reasons, int((~keep).sum())


def _number_problem(token):
    """What is wrong with ``token`` as an SWF field ('' if nothing)."""
    try:
        value = float(token)
    except ValueError:
        return "is not a number"
    return "" if math.isfinite(value) else "is not a finite number"


def _drop_unschedulable(trace, machine_procs, skip_bad, reasons):
    """``trace`` without the jobs that cannot be scheduled (no run time or processor count,
    or more processors than the machine's), counted in ``dropped``, the first reasons added
    to ``reasons``; the first such job raises unless ``skip_bad``."""
    machine = machine_procs or (trace.header_number("MaxProcs", "MaxNodes"))
    problems = _check_jobs(trace.data, trace.lines, machine_procs=machine)
    if not problems:
        return trace
    problems.sort()
    drop = np.zeros(len(trace), dtype=bool)
    for r, fname, problem in problems:
        where = f"field {COLUMN[fname] + 1} ({fname})"
        if not skip_bad:
            raise InputFileError(trace.path, f"line {trace.lines[r]}, {where}", problem)
        if not drop[r] and len(reasons) < 5:
            reasons.append(f"line {trace.lines[r]}, {where}: {problem}")
        drop[r] = True
    trace = trace.subset(~drop)
    trace.dropped = int(drop.sum())
    return trace


SIZE_FIELDS = ("requested", "allocated")


def prepare(trace, *, machine_procs=None, strict=False, fill_requested="max",
            size_field="requested"):
    """The jobs of ``trace`` a schedule can use, as the module docstring says. Returns
    ``(trace, notes)``: the new trace and one line for each kind of change made (dropped
    jobs, filled requested times), each naming the first job it touched.

    Raises
    ------
    InputFileError
        With ``strict``, for the first job that would be dropped or filled.
    ValueError
        For an unknown ``size_field`` or ``fill_requested`` rule.
    """
    if size_field not in SIZE_FIELDS:
        raise ValueError(f"size_field must be one of {', '.join(SIZE_FIELDS)}")
    trace = Trace(trace.data.copy(), list(trace.header), trace.path, trace.lines.copy(),
                  trace.dropped, list(trace.drop_reasons), size_field)
    notes = []
    machine = machine_procs or trace.header_number("MaxProcs", "MaxNodes")
    problems = sorted(_check_jobs(trace.data, trace.lines, machine_procs=machine,
                                  size_field=size_field)) if len(trace) else []
    if problems:
        r, fname, problem = problems[0]
        where = f"line {trace.lines[r]}, field {COLUMN[fname] + 1} ({fname})"
        if strict:
            raise InputFileError(trace.path, where, problem)
        drop = np.zeros(len(trace), dtype=bool)
        drop[[p[0] for p in problems]] = True
        notes.append(f"dropped {int(drop.sum())} jobs that cannot be scheduled (the first: "
                     f"{where}: {problem})")
        trace = trace.subset(~drop)
        trace.dropped += int(drop.sum())
        trace.drop_reasons.insert(0, f"{where}: {problem}")
    requested = trace.column("requested_time")
    missing = np.flatnonzero(requested < 0)
    if len(missing) and len(missing) < len(trace):  # a trace with requested times, but gaps
        where = f"line {trace.lines[missing[0]]}, field 9 (requested_time)"
        if strict:
            raise InputFileError(trace.path, where, "no requested time")
        if fill_requested == "max":
            value, rule = np.full(len(missing), requested.max()), "the trace's largest request"
        elif fill_requested == "run":
            value, rule = trace.column("run")[missing], "their run times"
        else:
            try:
                seconds = float(fill_requested)
            except (TypeError, ValueError):
                raise ValueError("fill_requested must be max, run or a number of "
                                 "seconds") from None
            if not seconds > 0:
                raise ValueError("fill_requested must be a positive number of seconds")
            value, rule = np.full(len(missing), seconds), f"{seconds:g} s"
        trace.data[missing, COLUMN["requested_time"]] = value
        trace.filled = len(missing)
        notes.append(f"filled the requested time of {len(missing)} jobs with {rule} (the "
                     f"first: {where})")
    return trace, notes


def format_swf(trace):
    """The trace as SWF text: the header, then one line per job (integers where integral)."""
    out = io.StringIO()
    for line in trace.header:
        out.write(f";{line}\n")
    data = trace.data
    widths = (6, 10, 8, 7, 5, 7, 6, 5, 7, 6, 3, 4, 3, 4, 3, 3, 6, 6)
    # whole numbers as integers, where every value of the column is one that int64 holds
    # exactly (a submit time of 1e20 read from a Batsim file would wrap)
    integral = (np.all((data == np.round(data)) & (np.abs(data) < 2.0 ** 53), axis=0)
                if len(data) else np.ones(18, bool))
    styles = "".join("i" if integral[k] else "f" for k in range(18))  # %{w}d or %{w}.6g
    columns = [np.ascontiguousarray(data[:, k], dtype=np.float64) for k in range(18)]
    out.write(format_rows(columns, styles, widths, " "))
    return out.getvalue()


def write_swf(path, trace):
    """Write ``trace`` to ``path`` atomically (gzip-compressed if it ends in ``.gz``)."""
    text = format_swf(trace)
    if os.fspath(path).endswith(".gz"):
        write_atomic(path, lambda f: f.write(gzip.compress(text.encode("ascii"), mtime=0)),
                     mode="wb")
    else:
        write_atomic(path, lambda f: f.write(text))

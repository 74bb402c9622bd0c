"""The Standard Workload Format of the Parallel Workloads Archive: read and write job traces.

A trace is a header of ``;`` comment lines (``; MaxProcs: 128``) and one line of 18
whitespace-separated numbers per job; -1 means missing. ``.swf``, ``.swf.gz`` and a ``.zip``
holding one ``.swf`` are read. A file is parsed in one pass in C (``_columns.parse_swf``): a
200,000-job file takes about 0.1 s.

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

import array
import copy
import math
import os
from typing import Any, Optional, Sequence

from ..errors import InputFileError
from ..files import write_bytes_atomic, write_streamed_atomic
from ._columns import column_bounds, format_rows, parse_rows, parse_swf

FIELDS = ("job", "submit", "wait", "run", "allocated_procs", "avg_cpu", "used_memory",
          "requested_procs", "requested_time", "requested_memory", "status", "user", "group",
          "executable", "queue", "partition", "preceding_job", "think_time")
COLUMN = {name: i for i, name in enumerate(FIELDS)}
MISSING = -1.0
ROW_BYTES = 8 * len(FIELDS)  # a job's numbers: 18 float64


class Trace:
    """A job trace: one row of the 18 SWF fields per job, in file order.

    ``data`` is the rows as a numpy array (jobs x 18, float64), made on first use and
    sharing the trace's numbers: a change made through it is the trace's. ``data`` given as
    a bytearray is taken as those numbers, row by row, as :func:`read_swf` reads them.
    :meth:`values`, :meth:`procs_values` and the methods a schedule calls read them without
    numpy, so a ``nodesel schedule`` run never imports it (a quarter of the whole run)."""

    def __init__(self, data: Any, header: Optional[list] = None, path: str = "<trace>",
                 lines: Any = None, dropped: int = 0, drop_reasons: Optional[list] = None,
                 size_field: str = "requested", filled: int = 0) -> None:
        self.data = data
        self.header = [] if header is None else header  # comment lines, without the ';'
        self.path = path
        self._lines = lines  # the file line of each row (1-based); None: 1, 2, ...
        self.dropped = dropped  # bad jobs dropped by skip_bad
        self.drop_reasons = [] if drop_reasons is None else drop_reasons  # the first few
        self.size_field = size_field  # which field gives a job's size first (see prepare)
        self.filled = filled  # requested times filled in by prepare

    @property
    def data(self) -> Any:
        if isinstance(self._rows, bytearray):
            import numpy as np

            self._rows = np.frombuffer(self._rows, dtype=np.float64).reshape(-1, len(FIELDS))
        return self._rows

    @data.setter
    def data(self, value: Any) -> None:
        if isinstance(value, bytearray):
            if len(value) % ROW_BYTES:
                raise ValueError(f"a trace's numbers are rows of {len(FIELDS)} float64")
            self._rows = value
            return
        import numpy as np

        self._rows = np.ascontiguousarray(
            np.asarray(value, dtype=np.float64).reshape(-1, len(FIELDS)))

    @property
    def lines(self) -> Any:
        """The file line of each row (1-based), a numpy array."""
        import numpy as np

        if not isinstance(self._lines, np.ndarray):
            self._lines = (np.arange(1, len(self) + 1) if self._lines is None
                           else np.asarray(self._lines, dtype=np.int64))
        return self._lines

    @lines.setter
    def lines(self, value: Any) -> None:
        self._lines = value

    def line(self, row: int) -> int:
        """The file line of a row."""
        return row + 1 if self._lines is None else int(self._lines[row])

    def __len__(self) -> int:
        return memoryview(self._rows).nbytes // ROW_BYTES

    def __repr__(self) -> str:
        return f"Trace({self.path!r}, {len(self)} jobs)"

    def numbers(self) -> memoryview:
        """The numbers, row by row, as one flat float64 memoryview (writable unless the
        trace was made from a read-only array)."""
        view = memoryview(self._rows)
        return view.cast("B").cast("d") if view.nbytes else memoryview(b"").cast("d")

    def column(self, name):
        return self.data[:, COLUMN[name]]

    def view(self, name: str) -> memoryview:
        """The field ``name`` of every job where it lies: a strided float64 memoryview."""
        return self.numbers()[COLUMN[name]::len(FIELDS)]

    def values(self, name: str) -> list:
        """The field ``name`` of every job, a list of floats (no numpy)."""
        return self.view(name).tolist()

    def set_values(self, name: str, values: Sequence[float]) -> None:
        """Set the field ``name`` of every job (no numpy): ``values`` a sequence of numbers,
        or a float64 memoryview."""
        self.view(name)[:] = _float64(values)

    @property
    def procs(self):
        """Processors of each job: the requested count, else the allocated one (with
        ``size_field`` "allocated", the other way round)."""
        first, second = self.column("requested_procs"), self.column("allocated_procs")
        if self.size_field == "allocated":
            first, second = second, first
        import numpy as np

        return np.where(first > 0, first, second)

    def procs_values(self) -> list:
        """:attr:`procs` as a list of floats (no numpy)."""
        return self.procs_column().tolist()

    def procs_column(self) -> memoryview:
        """:attr:`procs` as a float64 memoryview (no numpy): where every job gives the first
        field, or none does, the field to read where it lies."""
        names = ("requested_procs", "allocated_procs")
        first = self.view(names[self.size_field == "allocated"])
        least, greatest, nans = column_bounds(first)
        if least > 0 and not nans:  # every job gives it
            return first
        second = self.view(names[self.size_field != "allocated"])
        if not greatest > 0:  # no job gives it (NASA's requested counts): the second
            return second
        return memoryview(array.array("d", [a if a > 0 else b for a, b in zip(first, second)]))

    def copy(self, header: Optional[list] = None) -> "Trace":
        """A copy of its own numbers (``header``, if given, in place of this one's)."""
        lines = copy.copy(self._lines)  # None, a list, an array or a numpy array
        return Trace(bytearray(self.numbers()), list(self.header if header is None else header),
                     self.path, lines, self.dropped, list(self.drop_reasons), self.size_field,
                     self.filled)

    def _sharing(self) -> "Trace":
        """A new trace over the same numbers and line numbers (no copy)."""
        return Trace(self._rows, list(self.header), self.path, self._lines, self.dropped,
                     list(self.drop_reasons), self.size_field, self.filled)

    def rows(self, keep: Sequence[int]) -> "Trace":
        """A trace of the rows ``keep`` (increasing row numbers), same header (no numpy)."""
        numbers, width = self.numbers().cast("B"), ROW_BYTES
        data = bytearray(b"".join(numbers[r * width:(r + 1) * width] for r in keep))
        return Trace(data, list(self.header), self.path, [self.line(r) for r in keep],
                     self.dropped, list(self.drop_reasons), self.size_field)

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
        return int(max(self.procs_column())) if len(self) else 0

    def has(self, name):
        """True if any job has the field (not -1)."""
        return any(v != MISSING for v in self.values(name))

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
        trace = self.copy(header)
        trace.filled = 0
        return trace


def _float64(values: Sequence[float]) -> Any:
    """``values`` as a float64 buffer: a float64 memoryview as it is, else an array."""
    if isinstance(values, memoryview) and values.format == "d":
        return values
    return array.array("d", values)


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


def _read_bytes(path):
    """The file's bytes, all of them ASCII."""
    import zlib  # gzip and zipfile's: its error for damaged data is no OSError

    name = os.fspath(path)
    try:
        if name.endswith(".gz"):
            import gzip

            with open(name, "rb") as f:  # whole: one decompression, not a stream of chunks
                raw = gzip.decompress(f.read())
        elif name.endswith(".zip"):
            raw = _read_zip(name)
        else:
            with open(name, "rb") as f:
                raw = f.read()
    except FileNotFoundError:
        raise InputFileError(name, None, "no such file") from None
    except IsADirectoryError:
        raise InputFileError(name, None, "is a folder, not a trace file") from None
    except (OSError, EOFError, zlib.error) as e:
        raise InputFileError(name, None, f"cannot be read: {e}") from None
    if not raw.isascii():
        try:
            raw.decode("ascii")
        except UnicodeDecodeError as e:  # names the first such byte
            raise InputFileError(name, f"byte {e.start}", "not a text SWF file "
                                                          "(a binary or non-ASCII byte)") from None
    return raw


def _check_jobs(trace, *, machine_procs):
    """(row, field name, problem) for every job a schedule cannot use."""
    problems = []
    procs = trace.procs_column()  # read where they lie: no list of each field
    submit, run = trace.view("submit"), trace.view("run")
    least_procs, most_procs, _ = column_bounds(procs)
    if (column_bounds(submit)[0] >= 0 and column_bounds(run)[0] >= 0 and least_procs > 0
            and not (machine_procs and most_procs > machine_procs)):
        return problems  # all good: no value the rows below would find (NaN is none)
    procs, submit, run = procs.tolist(), submit.tolist(), run.tolist()
    for values, name, problem in (
            (submit, "submit", "negative submit time"),
            (run, "run", "no run time (-1 or negative)"),
            ([-1.0 if p <= 0 else 0.0 for p in procs], "requested_procs",
             "no processor count (fields 5 and 8 are both missing)")):
        problems += [(r, name, problem) for r, v in enumerate(values) if v < 0]
    if machine_procs:
        problems += [(r, "requested_procs", f"asks for {p:g} processors, more than the "
                                            f"machine's {machine_procs}")
                     for r, p in enumerate(procs) if p > machine_procs]
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
    raw = _read_bytes(name)
    header, data, line_numbers, bad = parse_swf(raw, len(FIELDS))  # in C, in one pass
    if bad < 0:
        lines = array.array("q")
        lines.frombytes(line_numbers)
        trace, reasons, unread = Trace(data, header, name, lines), [], 0
    else:  # a bad line: read again, line by line, to name it (or drop it)
        header, data_lines, numbers = _split_lines(raw)
        data, rows, reasons, unread = _parse_jobs(name, data_lines, numbers, skip_bad)
        trace = Trace(data, header, name,
                      numbers if rows is None else [numbers[r] for r in rows])
    if check and len(trace):
        trace = _drop_unschedulable(trace, machine_procs, skip_bad, reasons)
    trace.dropped += unread
    trace.drop_reasons = reasons
    return trace


def _split_lines(raw):
    """(header lines without their ';', as str; job lines, as bytes, spaces around them kept;
    the job lines' numbers in the file). Lines end at \\n, \\r\\n or \\r."""
    header, data_lines, numbers = [], [], []
    for i, line in enumerate(raw.splitlines(), start=1):
        if not line or line.isspace():
            continue
        if b";" in line and line.lstrip().startswith(b";"):
            header.append(line.strip()[1:].decode())
        else:
            data_lines.append(line)
            numbers.append(i)
    return header, data_lines, numbers


def _parse_jobs(name, data_lines, numbers, skip_bad):
    """The job lines as rows of numbers: (data, the rows of ``data_lines`` kept, up to five
    reasons for the lines dropped, how many were; None for the rows kept: all, as a
    bytearray of float64). A bad line raises, naming its line and field, unless
    ``skip_bad``."""
    raw, bad_row = parse_rows(data_lines, len(FIELDS))  # plain numbers throughout: done
    if bad_row < 0:
        return raw, None, [], 0
    import numpy as np  # the slow path, for a file with a bad line

    data_lines = [line.decode().strip() for line in data_lines]

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
    problems = _check_jobs(trace, machine_procs=machine)
    if not problems:
        return trace
    problems.sort()
    drop = set()
    for r, fname, problem in problems:
        where = f"field {COLUMN[fname] + 1} ({fname})"
        if not skip_bad:
            raise InputFileError(trace.path, f"line {trace.line(r)}, {where}", problem)
        if r not in drop and len(reasons) < 5:
            reasons.append(f"line {trace.line(r)}, {where}: {problem}")
        drop.add(r)
    trace = trace.rows([r for r in range(len(trace)) if r not in drop])
    trace.dropped = len(drop)
    return trace


SIZE_FIELDS = ("requested", "allocated")


def prepare(trace, *, machine_procs=None, strict=False, fill_requested="max",
            size_field="requested"):
    """The jobs of ``trace`` a schedule can use, as the module docstring says. Returns
    ``(trace, notes)``: the new trace and one line for each kind of change made (dropped
    jobs, filled requested times), each naming the first job it touched. Where it changes
    no job, the new trace holds the same numbers as ``trace`` (not a copy: 2.6 MB for NASA).

    Raises
    ------
    InputFileError
        With ``strict``, for the first job that would be dropped or filled.
    ValueError
        For an unknown ``size_field`` or ``fill_requested`` rule.
    """
    if size_field not in SIZE_FIELDS:
        raise ValueError(f"size_field must be one of {', '.join(SIZE_FIELDS)}")
    trace = trace._sharing()
    trace.size_field, trace.filled = size_field, 0
    notes = []
    machine = machine_procs or trace.header_number("MaxProcs", "MaxNodes")
    problems = sorted(_check_jobs(trace, machine_procs=machine)) if len(trace) else []
    if problems:
        r, fname, problem = problems[0]
        where = f"line {trace.line(r)}, field {COLUMN[fname] + 1} ({fname})"
        if strict:
            raise InputFileError(trace.path, where, problem)
        drop = {p[0] for p in problems}
        notes.append(f"dropped {len(drop)} jobs that cannot be scheduled (the first: "
                     f"{where}: {problem})")
        trace = trace.rows([r for r in range(len(trace)) if r not in drop])
        trace.dropped += len(drop)
        trace.drop_reasons.insert(0, f"{where}: {problem}")
    requested = [] if column_bounds(trace.view("requested_time"))[0] >= 0 else \
        trace.values("requested_time")
    missing = [r for r, v in enumerate(requested) if v < 0]
    if missing and len(missing) < len(trace):  # a trace with requested times, but gaps
        where = f"line {trace.line(missing[0])}, field 9 (requested_time)"
        if strict:
            raise InputFileError(trace.path, where, "no requested time")
        if fill_requested == "max":
            value, rule = [max(requested)] * len(missing), "the trace's largest request"
        elif fill_requested == "run":
            run = trace.values("run")
            value, rule = [run[r] for r in missing], "their run times"
        else:
            try:
                seconds = float(fill_requested)
            except (TypeError, ValueError):
                raise ValueError("fill_requested must be max, run or a number of "
                                 "seconds") from None
            if not seconds > 0:
                raise ValueError("fill_requested must be a positive number of seconds")
            value, rule = [seconds] * len(missing), f"{seconds:g} s"
        for r, v in zip(missing, value):
            requested[r] = v
        if not problems:  # no job dropped: still the numbers given, which stay as they were
            trace = trace.copy()
        trace.set_values("requested_time", requested)
        trace.filled = len(missing)
        notes.append(f"filled the requested time of {len(missing)} jobs with {rule} (the "
                     f"first: {where})")
    return trace, notes


def format_swf(trace):
    """The trace as SWF text: the header, then one line per job (integers where integral)."""
    header, columns = _swf_parts(trace)
    return (header + format_rows(columns, *_SWF_FORMAT, True)).decode()


# format_rows's styles, widths and separator. Style 'a' writes whole numbers as integers
# (%{w}d) where every value of the column is one that int64 holds exactly (a submit time of
# 1e20 read from a Batsim file would wrap), else %{w}.6g
_SWF_FORMAT = ("a" * len(FIELDS), (6, 10, 8, 7, 5, 7, 6, 5, 7, 6, 3, 4, 3, 4, 3, 3, 6, 6), " ")


def _swf_parts(trace, header_lines=None, fields=None):
    """(header, columns) of :func:`format_swf`: the header UTF-8, the columns as
    format_rows takes them; ``header_lines`` in place of the trace's header and ``fields``
    (name -> a float64 buffer or a list of numbers) in place of its fields, where given."""
    lines = trace.header if header_lines is None else header_lines
    header = "".join(f";{line}\n" for line in lines).encode()
    fields = fields or {}
    return header, [_float64(fields[name]) if name in fields else trace.view(name)
                    for name in FIELDS]


def write_swf(path, trace, *, header=None, fields=None):
    """Write ``trace`` to ``path`` atomically (gzip-compressed if it ends in ``.gz``);
    ``header`` (comment lines) and ``fields`` (name -> every job's value) in place of the
    trace's own, where given, as if a copy of the trace held them (none is made)."""
    header, columns = _swf_parts(trace, header, fields)
    if os.fspath(path).endswith(".gz"):
        import gzip

        rows = format_rows(columns, *_SWF_FORMAT, True)
        write_bytes_atomic(path, gzip.compress(header + rows, mtime=0))
    else:
        write_streamed_atomic(path, header,
                              lambda write: format_rows(columns, *_SWF_FORMAT, True, write))

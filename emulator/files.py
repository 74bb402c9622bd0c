"""Files in and out: results written atomically (to a temporary file beside the target, then
renamed, so a reader or an interrupted run never sees half a file), and input files read with
one clear message for whatever the operating system refuses."""

import json
import math
import os
import tempfile
from typing import Any, Callable


def digits_only(text: str) -> bool:
    """True if ``text`` is digits 0-9 and nothing else: ``str.isdigit()`` also takes '²',
    which ``int()`` refuses."""
    return text.isascii() and text.isdigit()


def finite_number(value: object) -> bool:
    """True if ``value`` is a finite int or float as a parsed file gives it: TOML and JSON
    have nan and inf (Python's json reads NaN and Infinity), and a bool is no number.

    >>> [finite_number(v) for v in (3, 2.5, float("nan"), float("inf"), True, "4", None)]
    [True, True, False, False, False, False, False]
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)


def write_atomic(path, write, *, mode="w"):
    """Call ``write(file)`` on a temporary file, then rename it to ``path``."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    suffix = os.path.splitext(path)[1]  # keeps tools that look at extensions happy
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=directory)
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json_atomic(path, data):
    """Write ``data`` as JSON to ``path`` atomically."""
    def write(f):
        json.dump(data, f, indent=1)
        f.write("\n")
    write_atomic(path, write)


def write_text_atomic(path, text):
    write_atomic(path, lambda f: f.write(text))


def write_bytes_atomic(path, *chunks: bytes) -> None:
    """Write the chunks, one after the other, to ``path`` atomically (no copy joins them)."""
    def write(f):
        for chunk in chunks:
            f.write(chunk)
    write_atomic(path, write, mode="wb")


def write_streamed_atomic(path, header: bytes, rest: Callable[[Callable[[bytes], Any]], Any]
                          ) -> None:
    """Write ``header``, then what ``rest(write)`` hands to ``write`` a chunk at a time, to
    ``path`` atomically: a large file never lies whole in memory (each new page of a buffer
    costs a page fault, as much as the formatting of a row)."""
    def write(f):
        f.write(header)
        rest(f.write)
    write_atomic(path, write, mode="wb")


def save_figure(fig, path, *, dpi=120):
    """Save a matplotlib figure atomically, as PNG."""
    write_atomic(path, lambda f: fig.savefig(f, format="png", dpi=dpi), mode="wb")


def read_input_text(path, what="file"):
    """The text of an input file, or :class:`~emulator.errors.InputFileError` naming the
    path and the problem: missing, a folder, unreadable, or not UTF-8 text."""
    from .errors import InputFileError

    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise InputFileError(path, None, "no such file") from None
    except IsADirectoryError:
        raise InputFileError(path, None, f"is a folder, not a {what}") from None
    except OSError as e:
        raise InputFileError(path, None, f"cannot be read: {e.strerror or e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputFileError(path, f"byte {e.start}",
                             f"not a text {what} (binary or not UTF-8)") from None


def read_input_csv(path, what="file"):
    """The rows of a CSV input file as (the line each ends on, its fields); what the csv
    module cannot read (a field over its size limit) is an
    :class:`~emulator.errors.InputFileError` naming the line, as any problem of
    :func:`read_input_text`. A lone carriage return ends a row, as a newline does."""
    import csv
    import io

    from .errors import InputFileError

    reader = csv.reader(io.StringIO(read_input_text(path, what), newline=""))
    rows = []
    try:
        for row in reader:
            rows.append((reader.line_num, row))
    except csv.Error as e:
        raise InputFileError(path, f"line {reader.line_num}", f"not CSV: {e}") from None
    return rows

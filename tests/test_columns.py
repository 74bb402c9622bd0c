"""The per-job files' rows formatted in C: the text Python's own formatting gives."""

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from emulator.workload._columns import format_rows


def _integer(v):
    return str(int(v))


def _python(style, v):
    """What the Python writers wrote for ``v`` in each style."""
    if style == "i":
        return _integer(v)
    if style == "f":
        return "%.6g" % v
    if math.isnan(v):
        return ""
    if v.is_integer():
        return _integer(v)
    return f"{v:.6g}" if style == "g" else repr(v)


numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-2 ** 70, 2 ** 70).map(float),  # whole numbers past int64 and 2^53 too
    st.integers(-10 ** 6, 10 ** 6).map(lambda n: n / 8),  # halves, quarters, eighths
    st.sampled_from([0.0, -0.0, 0.1 + 0.2, 1e-5, 123456.5, 1234567.5, 2.0 ** 53]))


@settings(max_examples=300, deadline=None)
@given(st.lists(numbers, max_size=20), st.sampled_from("fgr"), st.integers(0, 12))
def test_each_style_writes_what_python_writes(values, style, width):
    column = np.array(values, dtype=float)
    text = format_rows([column], style, [width], ",")
    assert text.split("\n")[:-1] == [_python(style, v).rjust(width) for v in values]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-2 ** 63 + 1, 2 ** 63 - 1), max_size=20), st.integers(0, 8))
def test_integers_as_python_writes_them(values, width):
    column = np.array(values, dtype=float)  # as the files hold them: float64
    text = format_rows([column], "i", [width], " ")
    assert text.split("\n")[:-1] == [_integer(v).rjust(width) for v in column]


def test_rows_join_columns_with_the_separator_and_end_in_newlines():
    a = np.array([1.0, 2.5])
    text = format_rows([a, ["x", "ü"], a], "isr", [3, 0, 0], ";")
    assert text == "  1;x;1\n  2;ü;2.5\n"
    assert format_rows([], "", [], ",") == ""



@settings(max_examples=300, deadline=None)
@given(st.lists(numbers, max_size=12), st.integers(1, 3))
def test_style_a_writes_a_column_as_integers_only_where_every_value_is_one(values, step):
    """'a' is 'i' for a column of whole numbers below 2^53 in size, else 'f'; a strided
    column (every step-th value of a row-major buffer) is read as the values it strides."""
    flat = np.repeat(np.array(values, dtype=float), step)  # the column, each value then fillers
    flat[1::step] = 0.5 if step > 1 else flat[1::step]
    column = memoryview(flat)[::step]
    whole = all(math.isfinite(v) and v.is_integer() and abs(v) < 2.0 ** 53 for v in values)
    text = format_rows([column], "a", [0], ",")
    assert text.split("\n")[:-1] == [_python("i" if whole else "f", v) for v in values]

@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(-2 ** 70, 2 ** 70), st.booleans(),
                          st.text("ab ,-9", max_size=5),
                          st.floats(allow_nan=True)), max_size=20), st.integers(0, 8))
@example([2 ** 53 - 1, 2 ** 53 + 1, -2 ** 53 - 1, 2 ** 62 + 1, True], 0)  # past float64's
def test_style_o_writes_each_object_as_str_does_and_bytes_are_the_same_text(values, width):
    text = format_rows([values, np.arange(len(values), dtype=float)], "oi", [width, 0], ";")
    assert text.split("\n")[:-1] == [f"{str(v).rjust(width)};{k}" for k, v in enumerate(values)]
    assert format_rows([values], "o", [width], ";", True) == \
        format_rows([values], "o", [width], ";").encode()


def test_rows_handed_to_write_come_in_whole_rows_and_join_to_the_same_text():
    """With ``write``, the text goes out in chunks of about 64 KiB, each ending a row, and
    nothing comes back; a write that fails stops it, its error raised."""
    n = 20_000  # about 400 KiB of rows: several chunks
    a = np.arange(n, dtype=float) / 8
    columns = [a, ["x" * (k % 7) for k in range(n)], list(range(n))]
    whole = format_rows(columns, "rso", [6, 0, 0], ",", True)
    chunks = []
    assert format_rows(columns, "rso", [6, 0, 0], ",", True, chunks.append) is None
    assert b"".join(chunks) == whole
    assert len(chunks) >= 4 and all(c.endswith(b"\n") for c in chunks)
    assert all(len(c) < 65536 + 100 for c in chunks)
    assert format_rows([[]], "o", [0], ",", True, chunks.append) is None  # no rows: no call
    assert b"".join(chunks) == whole

    def full(chunk):
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        format_rows(columns, "rso", [6, 0, 0], ",", True, full)
    with pytest.raises(TypeError, match="callable"):
        format_rows(columns, "rso", [6, 0, 0], ",", True, "not a function")


@settings(max_examples=300, deadline=None)
@given(st.lists(numbers, max_size=20), st.integers(1, 3))
def test_column_bounds_are_min_and_max_of_the_numbers_and_the_nan_count(values, step):
    """NaN left out, a strided column read as the values it strides; of no number at all,
    (inf, -inf): what min() and max() would start their folds from."""
    from emulator.workload._columns import column_bounds

    flat = np.repeat(np.array(values, dtype=float), step)
    flat[1::step] = -1e300 if step > 1 else flat[1::step]  # fillers the stride skips
    numbers_only = [v for v in values if not math.isnan(v)]
    least, greatest, nans = column_bounds(memoryview(flat)[::step])
    assert (least, greatest) == (min(numbers_only, default=math.inf),
                                 max(numbers_only, default=-math.inf))
    assert nans == len(values) - len(numbers_only)
    with pytest.raises(TypeError):
        column_bounds(np.zeros(3, dtype=np.float32))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.floats(-1e18, 1e18), st.sampled_from([0.0, -0.0, 7.0, 1e-300])),
                max_size=20), st.floats(1e-3, 1e3), st.integers(1, 2))
def test_floor_quotients_are_what_python_makes_of_each_value(values, divisor, step):
    """float(math.floor(v / divisor)) for each value a strided column strides, -0.0 as 0.0
    (math.floor gives the int 0)."""
    from emulator.workload._columns import floor_quotients

    flat = np.repeat(np.array(values, dtype=float), step)
    got = floor_quotients(memoryview(flat)[::step], divisor)
    want = [float(math.floor(v / divisor)) for v in values]
    assert got == want and all(type(v) is float for v in got)
    assert [math.copysign(1, v) for v in got] == [math.copysign(1, v) for v in want]


@pytest.mark.parametrize("columns, styles, widths, error", [
    ([np.zeros(2), np.zeros(3)], "ii", [0, 0], "different lengths"),
    ([np.zeros(2)], "x", [0], "unknown column style"),
    ([np.zeros(2)], "ii", [0, 0], "one style and one width"),
    ([np.arange(2)], "i", [0], "1-D float64"),
    ([np.zeros((2, 2))], "i", [0], "1-D float64"),
    ([("a", "b")], "s", [0], "list of str"),
    ([["a", 1]], "s", [0], "must hold str"),
])
def test_bad_columns_are_refused(columns, styles, widths, error):
    with pytest.raises((TypeError, ValueError), match=error):
        format_rows(columns, styles, widths, ",")


# -- SWF's job lines read ---------------------------------------------------------------------

import re  # noqa: E402

from emulator.workload._columns import parse_rows  # noqa: E402

PLAIN = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _plain(token):
    """A token the C reader takes: a plain decimal number that float() reads as finite."""
    return len(token) < 64 and bool(PLAIN.fullmatch(token)) and math.isfinite(float(token))


tokens = st.one_of(
    st.integers(-10 ** 20, 10 ** 20).map(str),
    st.floats(allow_nan=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda v: f"{v:.3e}"),
    st.sampled_from(["-0", "+7", "5.", ".5", "-.5e-3", "1e999", "0x1", "1_0", "inf", "nan",
                     "-", "+.e1", "1e", "²1", "1.2.3", "9" * 19, "9" * 70, "0" * 63 + "1"]))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(tokens, min_size=2, max_size=4), max_size=6), st.integers(2, 4),
       st.sampled_from([" ", "\t", "  "]))
def test_lines_of_plain_numbers_read_as_float_reads_them(rows, fields, sep):
    raw, bad = parse_rows([sep.join(r) for r in rows], fields)
    good = [len(r) == fields and all(_plain(t) for t in r) for r in rows]
    assert bad == (good.index(False) if False in good else -1)
    data = np.frombuffer(raw).reshape(len(rows), fields)
    for k in range(len(rows) if bad < 0 else bad):
        expected = [float(t) for t in rows[k]]
        assert data[k].tolist() == expected
        assert np.signbit(data[k]).tolist() == [math.copysign(1, v) < 0 for v in expected]


@pytest.mark.parametrize("token", ["9" * 15, "9" * 16, "9" * 19, "-" + "9" * 19, "1" + "0" * 22,
                                   "123456789012345.5", "-0", "0" * 62 + "1"])
def test_long_numbers_read_as_float_reads_them(token):
    raw, bad = parse_rows([token, f"1 {token}"], 1)
    assert bad == 1 and np.frombuffer(raw)[0] == float(token)
    assert math.copysign(1, np.frombuffer(raw)[0]) == math.copysign(1, float(token))


class _Held:
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                          st.floats(allow_nan=True, allow_infinity=True))))
def test_an_attribute_column_is_what_numpy_makes_of_the_values(values):
    """None as NaN, every other value as float() gives it (ints past 2^53 rounded, -0.0 kept)."""
    from emulator.workload._columns import attribute_column

    got = np.frombuffer(attribute_column([_Held(v) for v in values], "value"), dtype=float)
    want = np.array([math.nan if v is None else v for v in values], dtype=float)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


class _Later(_Held):
    """A subclass whose value is a property over the slot."""

    def __init__(self, value):
        _Held.value.__set__(self, value)

    @property
    def value(self):
        return 2.5


class _Logged(_Held):
    """A subclass that answers every attribute itself."""

    __slots__ = ()

    def __getattribute__(self, name):
        return 9.0 if name == "value" else object.__getattribute__(self, name)


def test_an_attribute_column_reads_what_getattr_reads_whatever_the_class():
    """The slot is read directly only where getattr() would read it: not past a subclass's
    property or its own __getattribute__; an unset slot is getattr()'s AttributeError."""
    from emulator.workload._columns import attribute_column

    objects = [_Held(1.0), _Later(1.0), _Held(3.0), _Logged(1.0), _Held(None)]
    got = np.frombuffer(attribute_column(objects, "value"), dtype=float)
    assert np.array_equal(got, [1.0, 2.5, 3.0, 9.0, math.nan], equal_nan=True)
    unset = _Held.__new__(_Held)
    with pytest.raises(AttributeError, match="value"):
        attribute_column([_Held(1.0), unset], "value")


def test_an_attribute_that_is_no_number_or_missing_is_an_error():
    from emulator.workload._columns import attribute_column

    with pytest.raises(TypeError, match="must be real number, not str"):
        attribute_column([_Held(1.0), _Held("soon")], "value")
    with pytest.raises(AttributeError, match="no attribute 'other'"):
        attribute_column([_Held(1.0)], "other")


# -- an SWF file read in one pass --------------------------------------------------------------

_SPACE = st.sampled_from(["", " ", "\t", "  \t", "\x0b", "\x0c"])
_LINE = st.one_of(
    st.builds(lambda a, b, c, d: f"{a};{b}{c}{d}", _SPACE, st.text("ab: 1", max_size=6), _SPACE,
              _SPACE),  # a header line
    _SPACE,  # a blank one
    st.builds(lambda a, xs, b: a + " ".join(xs) + b, _SPACE,
              st.lists(st.sampled_from(["1", "-1", "2.5", ".5", "7e2", "x", "1e999"]),
                       min_size=2, max_size=3), _SPACE))  # a job line, or a bad one


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINE, max_size=12), st.lists(st.sampled_from(["\n", "\r\n", "\r"]),
                                              min_size=12, max_size=12), st.booleans())
def test_parse_swf_reads_as_the_lines_one_by_one_read(lines, ends, last_end):
    """parse_swf against the file split into lines (bytes.splitlines), each line then read as
    the line-by-line path reads it: the same header, numbers, line numbers and first bad job
    line."""
    from emulator.workload._columns import parse_swf
    from emulator.workload.swf import _split_lines

    raw = "".join(line + end for line, end in zip(lines, ends))
    if lines and not last_end:
        raw = raw[:-len(ends[len(lines) - 1])]
    raw = raw.encode()
    header, numbers, at, bad = parse_swf(raw, 2)
    want_header, data_lines, want_at = _split_lines(raw)
    want_numbers, want_bad = parse_rows(data_lines, 2)
    assert header == want_header and bad == want_bad
    kept = len(data_lines) if want_bad < 0 else want_bad
    assert bytes(numbers) == bytes(want_numbers[:kept * 16])
    assert memoryview(at).cast("q").tolist() == want_at[:kept]

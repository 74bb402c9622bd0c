"""The per-job files' rows formatted in C: the text Python's own formatting gives."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
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

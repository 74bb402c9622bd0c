"""Estimators over a category's history of run times (pure functions of a sequence).

``windowed_mean(values, n)``   WM(n): the mean of the last n values (Li et al. §2.2).
``linear_regression(values, n)``  LR(n): a least-squares line through the last n values
                               against their position, extended one step (Li et al. §2.2).
``mean_interval(values)``      the mean and the half-width of its 90% confidence interval
                               (Student's t), Smith's estimator (Smith §2.1).
"""

import math

from scipy import stats

CONFIDENCE = 0.90
_T = [math.inf] + [float(stats.t.ppf(0.5 + CONFIDENCE / 2, df)) for df in range(1, 1025)]


def t_quantile(df):
    """The two-sided 90% quantile of Student's t with ``df`` degrees of freedom."""
    return _T[df] if df < len(_T) else 1.6449  # the normal's beyond 1024


def windowed_mean(values, n):
    """WM(n); None for an empty history. ``values`` oldest first."""
    if not values:
        return None
    window = list(values)[-n:]
    return sum(window) / len(window)


def linear_regression(values, n):
    """LR(n): fit y = a + b*i to the last n values (i = 1..k) and predict i = k+1. With one
    value, that value; None for an empty history."""
    window = list(values)[-n:]
    k = len(window)
    if k == 0:
        return None
    if k == 1:
        return window[0]
    mean_i = (k + 1) / 2.0
    mean_y = sum(window) / k
    sxx = sxy = 0.0
    for i, y in enumerate(window, start=1):
        di = i - mean_i
        sxx += di * di
        sxy += di * (y - mean_y)
    slope = sxy / sxx
    return mean_y + slope * (k + 1 - mean_i)


def mean_interval(values):
    """(mean, half-width of the 90% confidence interval of the mean); the half-width is
    infinite for a single value. None for an empty history."""
    n = len(values)
    if n == 0:
        return None
    mean = sum(values) / n
    if n == 1:
        return mean, math.inf
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, t_quantile(n - 1) * math.sqrt(var / n)


def interval_from_sums(n, total, squares):
    """:func:`mean_interval` from running sums (n, sum, sum of squares)."""
    if n == 0:
        return None
    mean = total / n
    if n == 1:
        return mean, math.inf
    var = max(squares - total * mean, 0.0) / (n - 1)
    return mean, t_quantile(n - 1) * math.sqrt(var / n)

"""Bandwidth forecasting per node pair, as the Network Weather Service did.

Every pair keeps a bank of simple predictors, each fed every measurement: the last value,
the running mean, sliding-window medians and exponential smoothing with several gains.
Before a new measurement is added, each predictor's forecast is scored against it; the
predictor with the least mean absolute error over the recent window wins, and its error is
reported with the forecast (Wolski, Spring and Peterson, 1997).
"""

import statistics
from collections import deque

MEDIAN_WINDOWS = (5, 21)
SMOOTHING_GAINS = (0.05, 0.1, 0.2, 0.5)
ERROR_WINDOW = 10


class _Last:
    name = "last"

    def __init__(self):
        self.value = None

    def update(self, x):
        self.value = x


class _Mean:
    name = "mean"

    def __init__(self):
        self.total, self.count, self.value = 0.0, 0, None

    def update(self, x):
        self.total += x
        self.count += 1
        self.value = self.total / self.count


class _Median:
    def __init__(self, window):
        self.name = f"median{window}"
        self.window = deque(maxlen=window)
        self.value = None

    def update(self, x):
        self.window.append(x)
        self.value = statistics.median(self.window)


class _Smooth:
    def __init__(self, gain):
        self.name = f"smooth{gain:g}"
        self.gain, self.value = gain, None

    def update(self, x):
        self.value = x if self.value is None else self.value + self.gain * (x - self.value)


class Forecaster:
    """The predictor bank of one pair.

    >>> f = Forecaster()
    >>> for x in (50, 50, 50, 50, 10):
    ...     f.update(x)
    >>> f.forecast()[0] in (10, 50)
    True
    """

    def __init__(self):
        self.predictors = [_Last(), _Mean()] + [_Median(w) for w in MEDIAN_WINDOWS] + \
            [_Smooth(g) for g in SMOOTHING_GAINS]
        self.errors = {p.name: deque(maxlen=ERROR_WINDOW) for p in self.predictors}
        self.count = 0

    def update(self, measured):
        for p in self.predictors:
            if p.value is not None:
                self.errors[p.name].append(abs(p.value - measured))
            p.update(measured)
        self.count += 1

    def forecast(self):
        """``(value, mean absolute error, predictor name)``; error is None before any
        prediction could be scored."""
        if not self.count:
            raise ValueError("no measurement yet")
        scored = [(statistics.fmean(self.errors[p.name]), i, p) for i, p in
                  enumerate(self.predictors) if self.errors[p.name]]
        if not scored:
            return self.predictors[0].value, None, self.predictors[0].name
        error, _, best = min(scored)
        return best.value, error, best.name


class PairForecasts:
    """Forecasters for every measured pair (unordered)."""

    def __init__(self):
        self.pairs = {}

    def update(self, a, b, measured):
        self.pairs.setdefault(frozenset((a, b)), Forecaster()).update(measured)

    def forecast(self, a, b):
        return self.pairs[frozenset((a, b))].forecast()

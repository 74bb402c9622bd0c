"""Upper bounds on a job's wait, published at its submission, meant to hold for a share
``quantile`` of jobs.

Both bounds take the ``quantile`` quantile of a sample with the binomial method: the k-th
smallest of n observations is at least the sample's true ``quantile`` quantile with
probability ``confidence`` when P(Binomial(n, quantile) <= k - 1) >= confidence (Nurmi,
Brevik and Wolski's QBETS). Observations arrive as jobs start, when their waits become known.

``ForecastBound`` (ours) scales the forward simulation's forecast: the observations are the
ratios (wait + tau) / (forecast + tau) of recently started jobs, and a job's bound takes the
ratios of the ``neighbours`` whose forecasts were nearest its own (in log(forecast + tau)):
a forecast of hours errs in other ways than one of minutes, and the nearest forecasts say
how. The bound is (forecast + tau) * r - tau. A job still queued, with a forecast within the
neighbourhood, whose ratio has already passed the candidate r is a known miss, so it joins
the sample at its current ratio (a lower bound on its final one): the long waits that are
not yet over count before they end. A job the scheduler starts at once is bounded by 0.
When the workload shifts, past ratios stop being a sample of the next ones; the share of
misses the quantile aims at then follows the misses seen, as adaptive conformal inference
does (Gibbs and Candès): after each bounded job, miss += step * (1 - quantile - missed),
capped at 1 - quantile so a calm stretch never makes the bound bolder than nominal.

``QBETSBound`` (the peer) bounds the waits themselves per queue, with QBETS's change-point
rule: a run of misses (waits above the bound) too long to be chance (its probability under
the bound's quantile, allowing for the lag-1 autocorrelation of the misses, below
1 - confidence) means the queue has changed; the history is cut to its most recent
observations, as many as the binomial method needs.
"""

import bisect
import collections
import functools
import math

import numpy as np

CONFIDENCE = 0.95
TAU_SECONDS = 300.0  # the ratio's offset: a forecast of a few seconds is not exact
HISTORY_JOBS = 2048  # started jobs whose ratios are kept
NEIGHBOURS = 300  # of them, those with the nearest forecasts make a job's sample
ADAPT_STEP = 0.002  # how fast the aimed-at miss rate follows the misses seen


@functools.lru_cache(maxsize=4096)
def order_index(n, quantile, confidence=CONFIDENCE):
    """The smallest 0-based k such that the (k+1)-th smallest of ``n`` observations bounds
    the ``quantile`` quantile from above with probability ``confidence``; None if ``n`` is
    too small for any."""
    from scipy.stats import binom

    if n <= 0:
        return None
    k = int(binom.ppf(confidence, n, quantile))  # P(Bin <= k) >= confidence
    return k if k < n else None


def min_history(quantile, confidence=CONFIDENCE):
    """The fewest observations the binomial method bounds the quantile with."""
    return math.ceil(math.log(1 - confidence) / math.log(quantile))


class SortedWindow:
    """Values in arrival order, also kept sorted; the oldest can be cut."""

    def __init__(self):
        self.order = collections.deque()
        self.sorted = []

    def add(self, value):
        self.order.append(value)
        bisect.insort(self.sorted, value)

    def keep_last(self, count):
        while len(self.order) > count:
            old = self.order.popleft()
            del self.sorted[bisect.bisect_left(self.sorted, old)]

    def __len__(self):
        return len(self.order)


class ForecastBound:
    """Ours: the forecast wait scaled by a binomial upper quantile of the forecast ratios of
    the recently started jobs whose forecasts were nearest."""

    name = "forecast"

    def __init__(self, quantile, *, confidence=CONFIDENCE, tau_seconds=TAU_SECONDS,
                 history=HISTORY_JOBS, neighbours=NEIGHBOURS, step=ADAPT_STEP):
        self.quantile, self.confidence, self.tau = quantile, confidence, tau_seconds
        self.neighbours, self.step = neighbours, step
        self.miss = 1 - quantile  # the miss rate aimed at, adapted to the misses seen
        self.need = min_history(quantile, confidence)
        # a ring of the last ``history`` started jobs: log(forecast + tau) and ratio
        self.log_forecast = np.empty(history)
        self.ratio = np.empty(history)
        self.count = 0
        self.waiting = {}  # job -> (submit, forecast wait, its log, bound), until it starts

    def _quantile(self, values):
        """The binomial upper quantile of the sorted ``values`` at the aimed-at level."""
        if self.miss <= 0:
            return values[-1]
        k = order_index(len(values), round(1 - self.miss, 4), self.confidence)
        return values[-1] if k is None else values[k]

    def bound(self, job, now, forecast_wait):
        """The bound on ``job``'s wait, published at its submission ``now``."""
        here = math.log(forecast_wait + self.tau)
        n = min(self.count, len(self.ratio))
        bound = math.inf
        if n >= self.need:
            distance = np.abs(self.log_forecast[:n] - here)
            k = min(self.neighbours, n)
            near = np.argpartition(distance, k - 1)[:k]
            radius = distance[near].max()
            sample = np.sort(self.ratio[near])
            r = self._quantile(sample)
            # known misses: queued neighbours whose wait so far already passes the ratio
            late = [x for x in ((now - s + self.tau) / (f + self.tau)
                                for s, f, lf, _ in self.waiting.values()
                                if abs(lf - here) <= radius) if x > r]
            if late:
                r = self._quantile(np.sort(np.concatenate([sample, late])))
            bound = max(0.0, (forecast_wait + self.tau) * float(r) - self.tau)
        self.waiting[job] = (job.submit, forecast_wait, here, bound)
        return bound

    def started(self, job, wait):
        entry = self.waiting.pop(job, None)
        if entry is None:
            return
        submit, forecast, here, bound = entry
        if self.step and math.isfinite(bound):
            missed = wait > bound
            self.miss = min(1 - self.quantile,
                            self.miss + self.step * ((1 - self.quantile) - missed))
        slot = self.count % len(self.ratio)
        self.log_forecast[slot] = here
        self.ratio[slot] = (wait + self.tau) / (forecast + self.tau)
        self.count += 1


class QBETSBound:
    """The QBETS-style peer: a binomial upper quantile of each queue's past waits, with
    change-point detection."""

    name = "qbets"

    def __init__(self, quantile, *, confidence=CONFIDENCE):
        self.quantile, self.confidence = quantile, confidence
        self.queues = collections.defaultdict(lambda: {"waits": SortedWindow(), "run": 0,
                                                       "misses": [], "bound": None})
        self.need = min_history(quantile, confidence)

    def _bound(self, q):
        values = q["waits"].sorted
        k = order_index(len(values), self.quantile, self.confidence)
        return None if k is None else values[k]

    def bound(self, job, now, forecast_wait=None):
        b = self._bound(self.queues[job.queue])
        return math.inf if b is None else b

    def run_limit(self, misses):
        """Consecutive misses that mean a change: the fewest m with
        (1 - q) p^(m - 1) < 1 - confidence, p = P(miss | miss) from the lag-1
        autocorrelation of the recent miss indicators."""
        miss = 1 - self.quantile
        rho = 0.0
        if len(misses) > 2:
            a, b = misses[:-1], misses[1:]
            ma, mb = sum(a) / len(a), sum(b) / len(b)
            va = sum((x - ma) ** 2 for x in a)
            vb = sum((x - mb) ** 2 for x in b)
            if va > 0 and vb > 0:
                rho = max(0.0, sum((x - ma) * (y - mb) for x, y in zip(a, b))
                          / math.sqrt(va * vb))
        p = min(miss + rho * self.quantile, 0.999)
        m = 1
        while miss * p ** (m - 1) >= 1 - self.confidence and m < 1000:
            m += 1
        return m

    def started(self, job, wait):
        q = self.queues[job.queue]
        b = self._bound(q)
        q["waits"].add(wait)
        if b is None:
            return
        missed = wait > b
        q["misses"] = (q["misses"] + [int(missed)])[-self.need * 4:]
        q["run"] = q["run"] + 1 if missed else 0
        if q["run"] >= self.run_limit(q["misses"]):
            q["waits"].keep_last(self.need)
            q["run"] = 0
            q["misses"] = []


def bound_summary(quantile, waits, bounds):
    """Coverage (the share of jobs whose wait was at most their bound) and tightness (the
    median of bound / wait over the jobs that waited) of one bound."""
    import numpy as np

    waits, bounds = np.asarray(waits, float), np.asarray(bounds, float)
    waited = waits > 0
    ratio = bounds[waited] / waits[waited]
    return {"coverage": float(np.mean(waits <= bounds)) if len(waits) else None,
            "coverage_of_jobs_that_waited": float(np.mean(waits[waited] <= bounds[waited]))
            if waited.any() else None,
            "median_bound_over_wait": float(np.median(ratio)) if len(ratio) else None,
            "unbounded_jobs": int(np.sum(~np.isfinite(bounds)))}


def replay_bounds(jobs, bounder, forecasts=None):
    """The bounds ``bounder`` would have published for ``jobs`` (scheduled: submit and start
    set), replaying their submissions and starts in time order (starts first within an
    instant), as :func:`~emulator.prediction.waits.evaluate_waits` publishes them.
    ``forecasts``: {job index: forecast wait} for a :class:`ForecastBound` (which bounds a
    job started at once by 0). Returns {job index: bound}."""
    events = sorted([(j.submit, 1, j.index, j) for j in jobs]
                    + [(j.start, 0, j.index, j) for j in jobs], key=lambda e: e[:3])
    out = {}
    for t, kind, index, job in events:
        if kind == 0:
            bounder.started(job, job.start - job.submit)
        elif forecasts is None:
            out[index] = bounder.bound(job, t)
        elif job.start == job.submit:
            out[index] = 0.0
        else:
            out[index] = bounder.bound(job, t, forecasts[index])
    return out

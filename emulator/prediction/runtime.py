"""Online run-time predictors (Smith §2; Li et al. §2).

Every predictor has ``name``, ``predict(job, elapsed=0) -> seconds or None`` (None: it has
nothing to go on) and ``observe(job)``, called only when ``job`` has completed, so that its
run time becomes history. ``elapsed`` conditions a prediction on a job having already run
that long. Nothing else about a job's run time is ever read.

``Requested``     the user's requested time.
``LastTwo``       the mean of the user's last two completed jobs (Tsafrir, Etsion and
                  Feitelson 2007).
``Categories``    Smith's categorisation: templates, a bounded history per category, the mean
                  with a 90% confidence interval; the narrowest interval wins.
``InstanceBased`` Smith's instance-based learning: HEOM distance with feature scaling, k
                  nearest neighbours, Gaussian-kernel weights.
``Li``            Li et al.'s predictors: (template, estimator) pairs, each falling back to a
                  coarser template when its category is empty, combined by TEMP-EST (one
                  pair), LSTERR (the pair with the least recent squared error) or AVER.
``Mean``          the mean of several predictors' predictions (names joined by ``+``).
"""

import collections
import math
from dataclasses import dataclass

import numpy as np

from .attributes import NOMINAL, category_key
from .estimators import interval_from_sums, linear_regression, mean_interval, windowed_mean

MIN_SECONDS = 1.0  # a prediction is never shorter


class Requested:
    name = "requested"

    def predict(self, job, elapsed=0.0):
        return job.requested

    def observe(self, job):
        pass


class LastTwo:
    name = "last2"

    def __init__(self):
        self.runs = {}

    def predict(self, job, elapsed=0.0):
        runs = self.runs.get(job.user)
        if not runs:
            return None
        return max(sum(runs) / len(runs), MIN_SECONDS)

    def observe(self, job):
        self.runs.setdefault(job.user, collections.deque(maxlen=2)).append(job.run)


# -- Smith's categorisation -------------------------------------------------------------------

@dataclass(frozen=True)
class Template:
    """A categorisation template (Smith §2.1): nominal attributes (letters of
    :data:`~.attributes.NOMINAL`), a node range size (None: processors not used), a maximum
    history per category, and the data kept: ``actual`` run times or run times ``relative``
    to the requested time."""

    attrs: str = ""
    node_range: int = None
    history: int = 32
    data: str = "actual"

    @property
    def label(self):
        parts = [a.lower() for a in self.attrs]
        if self.node_range is not None:
            parts.append(f"n={self.node_range}")
        return f"({','.join(parts)}) h={self.history} {self.data}"

    def to_json(self):
        return {"attrs": self.attrs, "node_range": self.node_range, "history": self.history,
                "data": self.data}


class _Category:
    __slots__ = ("values", "total", "squares")

    def __init__(self, history):
        self.values = collections.deque(maxlen=history)
        self.total = self.squares = 0.0

    def add(self, v):
        values = self.values
        if len(values) == values.maxlen:
            old = values[0]
            self.total -= old
            self.squares -= old * old
        values.append(v)
        self.total += v
        self.squares += v * v


class Categories:
    """Smith's categorisation predictor over ``templates``."""

    name = "smith"
    conditions = True  # predict() takes the time a job has run into account

    def __init__(self, templates, name="smith"):
        self.templates = list(templates)
        self.name = name
        self.stores = [{} for _ in self.templates]

    def intervals(self, job, elapsed=0.0):
        """(mean, half-width) per template, None where it cannot predict."""
        out = []
        for template, store in zip(self.templates, self.stores):
            relative = template.data == "relative"
            if relative and job.requested is None:
                out.append(None)
                continue
            cat = store.get(category_key(job, template.attrs, template.node_range))
            if cat is None:
                out.append(None)
                continue
            if elapsed > 0:  # only the jobs that ran longer than this one has
                scale = job.requested if relative else 1.0
                est = mean_interval([v for v in cat.values if v * scale > elapsed])
            else:
                est = interval_from_sums(len(cat.values), cat.total, cat.squares)
            if est is not None and relative:
                est = (est[0] * job.requested, est[1] * job.requested)
            out.append(est)
        return out

    def predict(self, job, elapsed=0.0):
        best = None
        for est in self.intervals(job, elapsed):
            if est is not None and (best is None or est[1] < best[1]):
                best = est
        return None if best is None else max(best[0], MIN_SECONDS)

    def observe(self, job):
        for template, store in zip(self.templates, self.stores):
            if template.data == "relative":
                if job.requested is None or job.requested <= 0:
                    continue
                value = job.run / job.requested
            else:
                value = job.run
            key = category_key(job, template.attrs, template.node_range)
            cat = store.get(key)
            if cat is None:
                cat = store[key] = _Category(template.history)
            cat.add(value)


# -- Smith's instance-based learning ----------------------------------------------------------

class InstanceBased:
    """k nearest neighbours under the Heterogeneous Euclidean Overlap Metric (Smith §2.2).

    Nominal features (``nominal``: letters of G, U, Q, E) differ by 0 or 1; linear ones
    (log2 of processors, and log of the requested time if ``use_requested``) by their
    difference over the range seen so far. ``weights`` scale the features (nominal first),
    the ``k`` nearest experiences of the last ``base_size`` are averaged with weights
    exp(-(d / width)^2).
    """

    name = "ibl"
    conditions = True

    def __init__(self, nominal, *, use_requested=False, weights=None, k=8, width=0.5,
                 base_size=2000, name="ibl"):
        self.nominal = nominal
        self.use_requested = use_requested
        self.n_lin = 1 + int(use_requested)
        n_features = len(nominal) + self.n_lin
        self.weights = np.ones(n_features) if weights is None else np.asarray(weights, float)
        if len(self.weights) != n_features:
            raise ValueError(f"{n_features} feature weights needed, got {len(self.weights)}")
        self.k, self.width, self.base_size, self.name = int(k), float(width), int(base_size), name
        self.nom = np.zeros((self.base_size, len(nominal)), dtype=np.int64)
        self.lin = np.zeros((self.base_size, self.n_lin))
        self.y = np.zeros(self.base_size)
        self.count = self.pos = 0
        self.lo = np.full(self.n_lin, np.inf)
        self.hi = np.full(self.n_lin, -np.inf)

    def _features(self, job):
        nom = [getattr(job, {"G": "group", "U": "user", "Q": "queue", "E": "executable"}[a])
               for a in self.nominal]
        lin = [math.log2(max(job.procs, 1))]
        if self.use_requested:
            lin.append(math.log(job.requested) if job.requested else np.nan)
        return nom, lin

    def distances(self, job):
        """Squared weighted HEOM distances from ``job`` to every experience."""
        nom, lin = self._features(job)
        n = self.count
        w2 = self.weights ** 2
        nf = len(self.nominal)
        d2 = np.zeros(n)
        if nf:
            d2 += (self.nom[:n] != np.asarray(nom)) @ w2[:nf]
        span = np.where(self.hi > self.lo, self.hi - self.lo, 1.0)
        diff = np.abs(self.lin[:n] - np.asarray(lin)) / span
        diff = np.where(np.isnan(diff), 1.0, np.minimum(diff, 1.0))  # missing: as far as can be
        d2 += (diff ** 2) @ w2[nf:]
        return d2

    def predict(self, job, elapsed=0.0):
        if self.count == 0:
            return None
        d2 = self.distances(job)
        y = self.y[:self.count]
        if elapsed > 0:
            keep = y > elapsed
            if not keep.any():
                return None
            d2, y = d2[keep], y[keep]
        k = min(self.k, len(y))
        idx = np.argpartition(d2, k - 1)[:k] if k < len(y) else np.arange(len(y))
        w = np.exp(-d2[idx] / (self.width ** 2))
        total = w.sum()
        if total <= 1e-300:
            value = float(y[idx[np.argmin(d2[idx])]])
        else:
            value = float(w @ y[idx] / total)
        return max(value, MIN_SECONDS)

    def observe(self, job):
        nom, lin = self._features(job)
        i = self.pos
        self.nom[i] = nom
        self.lin[i] = lin
        self.y[i] = job.run
        finite = np.isfinite(self.lin[i])
        self.lo = np.where(finite, np.minimum(self.lo, self.lin[i]), self.lo)
        self.hi = np.where(finite, np.maximum(self.hi, self.lin[i]), self.hi)
        self.pos = (i + 1) % self.base_size
        self.count = min(self.count + 1, self.base_size)


# -- Li et al. --------------------------------------------------------------------------------

LI_TEMPLATES = ("G", "GU", "GUQ", "GUE", "GUEN", "GUQEN")
LI_ESTIMATORS = ("WM(1)", "WM(2)", "WM(3)", "WM(5)", "WM(10)", "LR(3)", "LR(5)", "LR(10)")
LSTERR_WINDOW = 10  # the last n completed predictions LSTERR compares


def li_templates(attrs):
    """Li's templates restricted to the attributes a trace has (``attrs``: letters), with
    duplicates (a template that loses only missing attributes) dropped."""
    out = []
    for t in LI_TEMPLATES:
        kept = "".join(a for a in t if a in attrs)
        if kept and kept not in out:
            out.append(kept)
    return out


def estimate(name, values):
    """Apply the estimator called ``name`` (``WM(n)`` or ``LR(n)``) to ``values``."""
    kind, n = name[:2], int(name[3:-1])
    return windowed_mean(values, n) if kind == "WM" else linear_regression(values, n)


class LiBank:
    """Every (template, estimator) pair's prediction for a job; a template whose category is
    empty falls back to the next coarser one (drop its last attribute) down to ``[G]``."""

    HISTORY = 16

    def __init__(self, templates, estimators):
        self.templates, self.estimators = list(templates), list(estimators)
        self.pairs = [(t, e) for t in self.templates for e in self.estimators]
        self.chains = {t: [t[:i] for i in range(len(t), 0, -1)] for t in self.templates}
        self.stores = {p: {} for t in self.templates for p in self.chains[t]}
        self.fallbacks = 0  # predictions made from a coarser template

    def _values(self, job, template):
        for level, attrs in enumerate(self.chains[template]):
            values = self.stores[attrs].get(self._key(job, attrs))
            if values:
                return values, level
        return None, 0

    @staticmethod
    def _key(job, attrs):
        return category_key(job, attrs.replace("N", ""), 1 if "N" in attrs else None)

    def predict_all(self, job):
        """One prediction per pair (None where no template in the chain has history)."""
        out = []
        for t in self.templates:
            values, level = self._values(job, t)
            if level:
                self.fallbacks += 1
            for e in self.estimators:
                v = None if values is None else estimate(e, values)
                out.append(None if v is None else max(v, MIN_SECONDS))
        return out

    def observe(self, job):
        for attrs, store in self.stores.items():
            key = self._key(job, attrs)
            values = store.get(key)
            if values is None:
                values = store[key] = collections.deque(maxlen=self.HISTORY)
            values.append(job.run)


def pair_label(pair):
    template, est = pair
    return f"[{','.join(template)}] {est}"


class Li:
    """Li et al.'s combination of selected (template, estimator) ``pairs``: ``mode`` is
    ``temp-est`` (the first pair), ``lsterr`` or ``aver``."""

    MODES = ("temp-est", "lsterr", "aver")

    def __init__(self, pairs, mode, *, name=None):
        if mode not in self.MODES:
            raise ValueError(f"unknown Li mode {mode!r}")
        self.pairs, self.mode = list(pairs), mode
        self.name = name or f"li-{mode}"
        templates = list(dict.fromkeys(t for t, _ in self.pairs))
        estimators = list(dict.fromkeys(e for _, e in self.pairs))
        self.bank = LiBank(templates, estimators)
        self.index = [self.bank.pairs.index(p) for p in self.pairs]
        self.errors = [collections.deque(maxlen=LSTERR_WINDOW) for _ in self.pairs]
        self.pending = {}  # job id -> the pairs' predictions, until it completes

    def predict(self, job, elapsed=0.0):
        values = self.bank.predict_all(job)
        chosen = [values[i] for i in self.index]
        self.pending[job.id] = chosen
        if self.mode == "aver":
            have = [v for v in chosen if v is not None]
            return sum(have) / len(have) if have else None
        if self.mode == "temp-est":
            return chosen[0]
        best, best_err = None, math.inf
        for v, errs in zip(chosen, self.errors):
            if v is None:
                continue
            err = sum(errs) / len(errs) if errs else math.inf
            if best is None or err < best_err:
                best, best_err = v, err
        return best

    def observe(self, job):
        chosen = self.pending.pop(job.id, None)
        if chosen is not None:
            for v, errs in zip(chosen, self.errors):
                if v is not None:
                    errs.append((v - job.run) ** 2)
        self.bank.observe(job)


class Mean:
    """The mean of several predictors' predictions (Li's AVER across techniques): each part
    learns on its own; a part with nothing to go on is left out. It conditions on elapsed
    time only if every part does."""

    def __init__(self, parts, name=None):
        self.parts = list(parts)
        self.name = name or "+".join(p.name for p in self.parts)
        self.conditions = all(getattr(p, "conditions", False) for p in self.parts)

    def predict(self, job, elapsed=0.0):
        values = [p.predict(job, elapsed) for p in self.parts]
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else None

    def observe(self, job):
        for p in self.parts:
            p.observe(job)


def smith_templates(attrs, requested):
    """Smith's template search space over the attributes a trace has."""
    nominal = [a for a in attrs if a in NOMINAL]
    subsets = [""]
    for a in nominal:
        subsets += [s + a for s in subsets]
    ranges = (None, 1, 2, 4, 8, 16, 32)
    histories = (4, 16, 64, 256)
    data = ("actual", "relative") if requested else ("actual",)
    return [Template(s, r, h, d) for s in subsets for r in ranges for h in histories
            for d in data]

"""Fitting the predictors on a training prefix of a trace.

The prefix is the first jobs by submission; training sees only what was known when the
first later job arrived (the split time): the prefix's submissions, and the completions up to
then. The error minimised over the prefix jobs completed by then is the mean absolute error
(Smith's choice), or the root mean square error for the ``-sq`` predictors.

``search_templates``  Smith's template set: scipy's differential evolution (an evolutionary
                      search, as Smith's genetic algorithm) over sets of up to 10 templates.
                      Each candidate template's predictions and intervals are computed once,
                      so a set is scored by array operations alone.
``search_ibl``        the instance-based learner's feature weights, k and kernel width, by
                      differential evolution.
``select_li``         Li et al.'s quantitative evaluation: every (template, estimator) pair's
                      error; TEMP-EST is the best pair; the selected set keeps the two best
                      estimators on the templates that improve on coarser ones (at most 8).
"""

import math

import numpy as np
from scipy.optimize import differential_evolution

from .attributes import NOMINAL
from .online import blind, events, run_online
from .runtime import (LI_ESTIMATORS, Categories, InstanceBased, LiBank, li_templates,
                      smith_templates)

MAX_TEMPLATES = 10
MAX_LI_PAIRS = 8


class Training:
    """The training prefix: ``jobs`` (all, in submission order), their completion times
    ``ends``, and ``split`` (jobs before it are the prefix)."""

    def __init__(self, jobs, ends, split):
        self.jobs, self.ends, self.split = jobs, np.asarray(ends, float), int(split)
        self.split_time = jobs[split].submit if split < len(jobs) else math.inf
        done = self.ends[:split] <= self.split_time
        self.targets = np.flatnonzero(done)  # prefix jobs whose run time was known by then
        self.runs = np.array([jobs[i].run for i in self.targets])

    def prefix_events(self):
        return [e for e in events(self.jobs[:self.split], self.ends[:self.split])
                if e[0] <= self.split_time and (e[1] == 1 or self.ends[e[2]] <= self.split_time)]

    def replay(self, on_submit, observers):
        """Replay the prefix: ``on_submit(position, job)``; ``observers`` see completions."""
        for _, kind, i in self.prefix_events():
            job = self.jobs[i]
            if kind == 0:
                for o in observers:
                    o.observe(job)
            else:
                on_submit(i, job)

    def mae(self, predictions):
        """Mean absolute error of per-prefix-job predictions over the targets."""
        return float(np.mean(np.abs(predictions[self.targets] - self.runs))) \
            if len(self.targets) else math.inf


def _loss(errors, loss):
    """``mae``: mean absolute error (Smith's); ``rmse``: root mean square error (its
    minimum is the mean's)."""
    if loss == "rmse":
        return float(np.sqrt(np.mean(errors ** 2)))
    if loss != "mae":
        raise ValueError(f"unknown loss {loss!r}")
    return float(np.mean(np.abs(errors)))


def _fallbacks(training):
    """The fallback value of every prefix job, from a predictor that never predicts."""

    class Never:
        name = "never"

        def predict(self, job, elapsed=0.0):
            return None

        def observe(self, job):
            pass

    preds, _ = run_online(training.jobs[:training.split], training.ends[:training.split],
                          [Never()], until=training.split_time)
    return preds[0]


def search_templates(training, attrs, requested, *, seed=1, maxiter=40, loss="mae"):
    """Smith's template set for this trace, fitted to the least ``loss`` (:func:`_loss`).
    Returns (templates, training error)."""
    candidates = smith_templates(attrs, requested)
    bank = Categories(candidates)
    n = training.split
    means = np.full((len(candidates), n), np.nan)
    widths = np.full((len(candidates), n), np.inf)

    def record(i, job):
        for k, est in enumerate(bank.intervals(blind(job))):
            if est is not None:
                means[k, i] = max(est[0], 1.0)
                widths[k, i] = est[1] if math.isfinite(est[1]) else 1e300

    training.replay(record, [bank])
    fallback = _fallbacks(training)
    targets = training.targets
    means, widths = means[:, targets], widths[:, targets]
    fallback, runs = fallback[targets], training.runs
    cols = np.arange(len(targets))
    none = len(candidates)

    def score(x):
        chosen = sorted({int(round(v)) for v in x if int(round(v)) < none})
        if not chosen or not len(targets):
            return math.inf
        w = widths[chosen]
        best = np.argmin(w, axis=0)
        pred = means[chosen][best, cols]
        pred = np.where(np.isfinite(w[best, cols]), pred, fallback)
        return _loss(pred - runs, loss)

    result = differential_evolution(score, [(0, none)] * MAX_TEMPLATES, seed=seed,
                                    maxiter=maxiter, popsize=15, integrality=[True] * MAX_TEMPLATES,
                                    polish=False, tol=0)
    chosen = sorted({int(round(v)) for v in result.x if int(round(v)) < none})
    return [candidates[i] for i in chosen], float(result.fun)


def search_ibl(training, attrs, requested, *, seed=1, maxiter=3, sample=1000, loss="mae"):
    """Instance-based learning parameters, fitted to the least ``loss``. Returns (keyword
    arguments, training error)."""
    nominal = "".join(a for a in attrs if a in NOMINAL)
    n_features = len(nominal) + 1 + int(requested)
    targets = training.targets
    if len(targets) > sample:  # score on the latest prefix jobs; history still all
        targets = targets[-sample:]
    scored = set(targets.tolist())
    runs = {i: training.jobs[i].run for i in targets}
    fallback = _fallbacks(training)

    def params(x):
        return {"weights": list(x[:n_features]), "k": int(round(2 ** x[n_features])),
                "width": float(10 ** x[n_features + 1])}

    def score(x):
        model = InstanceBased(nominal, use_requested=requested, **params(x))
        errors = []

        def record(i, job):
            if i in scored:
                v = model.predict(blind(job))
                errors.append((fallback[i] if v is None else v) - runs[i])

        training.replay(record, [model])
        return _loss(np.array(errors), loss) if errors else math.inf

    bounds = [(0.0, 1.0)] * n_features + [(0.0, 6.0), (-2.0, 0.5)]
    result = differential_evolution(score, bounds, seed=seed, maxiter=maxiter, popsize=5,
                                    polish=False, tol=0, init="sobol")
    found = params(result.x)
    found["weights"] = [round(w, 4) for w in found["weights"]]
    return found, float(result.fun)


def select_li(training, attrs):
    """Li et al.'s selection. Returns (TEMP-EST pair, selected pairs best first, MAE per
    pair label)."""
    templates = li_templates(attrs)
    bank = LiBank(templates, LI_ESTIMATORS)
    n = training.split
    preds = np.full((len(bank.pairs), n), np.nan)

    def record(i, job):
        for k, v in enumerate(bank.predict_all(blind(job))):
            if v is not None:
                preds[k, i] = v

    training.replay(record, [bank])
    fallback = _fallbacks(training)
    filled = np.where(np.isnan(preds), fallback, preds)
    errors = {pair: training.mae(filled[k]) for k, pair in enumerate(bank.pairs)}
    ranked = sorted(bank.pairs, key=lambda p: errors[p])
    best_estimators = sorted(LI_ESTIMATORS, key=lambda e: min(errors[(t, e)] for t in templates))
    best_estimators = best_estimators[:2]
    template_error = {t: min(errors[(t, e)] for e in best_estimators) for t in templates}
    kept = []
    for t in sorted(templates, key=len):  # coarse to fine
        coarser = [k for k in kept if t.startswith(k)]
        if len(t) <= 2 or not coarser or template_error[t] < min(template_error[k]
                                                                  for k in coarser):
            kept.append(t)
    kept.sort(key=lambda t: template_error[t])
    kept = kept[:MAX_LI_PAIRS // 2]
    selected = sorted(((t, e) for t in kept for e in best_estimators), key=lambda p: errors[p])
    return ranked[0], selected, errors

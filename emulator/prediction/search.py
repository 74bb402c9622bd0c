"""Fitting the predictors on a training prefix of a trace.

The prefix is the first jobs by submission; training sees only what was known when the
first later job arrived (the split time): the prefix's submissions, and the completions up to
then. The error minimised over the prefix jobs completed by then is the mean absolute error
(Smith's choice), or the root mean square error for the ``-sq`` predictors.

``search_templates``  Smith's template set, as Smith searched it: a genetic algorithm over
                      template sets encoded as bits (:func:`genetic`), or his greedy search
                      (templates added one at a time, each the one that lowers the error
                      most). Each candidate template's predictions and intervals are computed
                      once, so a set is scored by array operations alone. ``fit="wait"``
                      scores a set instead by the mean wait of the training prefix scheduled
                      with its predictions (Smith §4: templates for the least scheduler wait).
``search_ibl``        the instance-based learner's feature weights, k and kernel width,
                      encoded as bits and searched by the same genetic algorithm.
``select_li``         Li et al.'s quantitative evaluation: every (template, estimator) pair's
                      error; TEMP-EST is the best pair; the selected set keeps the two best
                      estimators on the templates that improve on coarser ones (at most 8).
"""

import math
import random
from dataclasses import dataclass
from typing import Optional

import numpy as np

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


def genetic(n_bits, fitness, *, seed=1, population=40, generations=30, crossover=0.8,
            mutation=None):
    """Smith's genetic algorithm: individuals are bit strings of ``n_bits``; each generation
    is scored (``fitness(bits) -> error``, the lower the better), parents are chosen by
    tournaments of two, mated by one-point crossover (probability ``crossover``) and
    mutated bit by bit (probability ``mutation``, default 1 / n_bits); the best individual
    is kept (elitism). Stops after ``generations``. Returns (best bits, its error).

    >>> best, err = genetic(8, lambda b: abs(sum(b) - 5), seed=3, generations=20)
    >>> err
    0
    """
    rng = random.Random(seed)
    mutation = 1.0 / n_bits if mutation is None else mutation
    cache = {}

    def score(bits):
        key = tuple(bits)
        if key not in cache:
            cache[key] = fitness(bits)
        return cache[key]

    people = [[rng.random() < 0.5 for _ in range(n_bits)] for _ in range(population)]
    best, best_err = None, math.inf
    for _ in range(generations):
        errors = [score(p) for p in people]
        for p, e in zip(people, errors):
            if e < best_err:
                best, best_err = list(p), e

        def pick():
            a, b = rng.randrange(population), rng.randrange(population)
            return people[a] if errors[a] <= errors[b] else people[b]

        children = [list(best)]
        while len(children) < population:
            mother, father = pick(), pick()
            if rng.random() < crossover:
                cut = rng.randrange(1, n_bits)
                child = mother[:cut] + father[cut:]
            else:
                child = list(mother)
            children.append([not g if rng.random() < mutation else g for g in child])
        people = children
    for p in people:  # the last generation's children, scored too
        e = score(p)
        if e < best_err:
            best, best_err = list(p), e
    return best, best_err


def _bits_for(count):
    return max(1, math.ceil(math.log2(count))) if count > 1 else 0


def _number(bits):
    value = 0
    for b in bits:
        value = 2 * value + int(b)
    return value


class TemplateCode:
    """Smith's encoding of a template set: ``MAX_TEMPLATES`` slots, each an *in use* bit, a
    bit per nominal attribute (category by it or not), the node range size (an index into
    none, 1, 2, 4, ..., 32), the maximum history (4, 16, 64, 256) and the data kept (actual
    or relative run times). A slot's fields wrap around their choices. Decodes to indices
    of ``candidates`` (the templates :func:`~.runtime.smith_templates` lists)."""

    def __init__(self, candidates, attrs, requested):
        self.nominal = [a for a in attrs if a in NOMINAL]
        self.ranges = sorted({c.node_range for c in candidates}, key=lambda r: r or 0)
        self.histories = sorted({c.history for c in candidates})
        self.data = ["actual", "relative"] if requested else ["actual"]
        self.index = {(c.attrs, c.node_range, c.history, c.data): i
                      for i, c in enumerate(candidates)}
        self.fields = [len(self.nominal), _bits_for(len(self.ranges)),
                       _bits_for(len(self.histories)), _bits_for(len(self.data))]
        self.slot = 1 + sum(self.fields)
        self.bits = MAX_TEMPLATES * self.slot

    def decode(self, bits):
        chosen = set()
        for s in range(MAX_TEMPLATES):
            g = bits[s * self.slot:(s + 1) * self.slot]
            if not g[0]:
                continue
            at = 1
            attrs = "".join(a for a, on in zip(self.nominal, g[at:at + self.fields[0]]) if on)
            at += self.fields[0]
            values = []
            for field, choices in zip(self.fields[1:], (self.ranges, self.histories,
                                                        self.data)):
                values.append(choices[_number(g[at:at + field]) % len(choices)])
                at += field
            chosen.add(self.index[(attrs, *values)])
        return sorted(chosen)


def _template_tables(training, candidates):
    """Each candidate template's prediction (its category's mean) and interval width for
    every prefix job, as the online discipline makes them; and the fallbacks."""
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
    return means, widths, _fallbacks(training)


def _predict_with(chosen, means, widths, fallback):
    """The predictions of a template set: per job the narrowest interval's mean."""
    w = widths[chosen]
    best = np.argmin(w, axis=0)
    cols = np.arange(w.shape[1])
    pred = means[chosen][best, cols]
    return np.where(np.isfinite(w[best, cols]), pred, fallback)


def prefix_wait(training, estimates, scheduler_of):
    """Mean wait of the prefix's jobs scheduled with ``estimates`` (seconds per prefix job)
    on ``scheduler_of()``: what a set of predictions costs the scheduler (Smith §4)."""
    from ..scheduling.estimates import Function
    from ..scheduling.simulate import simulate

    jobs = training.jobs[:training.split]
    position = {j.index: k for k, j in enumerate(jobs)}
    sim = simulate(jobs, scheduler_of(),
                   estimator=Function(lambda job, now: float(estimates[position[job.index]])))
    return float(np.mean([j.start - j.submit for j in sim.jobs]))


@dataclass(frozen=True)
class TemplateSearch:
    """How Smith's template sets are searched. ``method``: ``ga`` (his genetic algorithm
    over encoded sets, ``generations`` of them, random by ``seed``) or ``greedy`` (templates
    added one at a time while the error falls). ``fit``: ``error`` (the least ``loss`` of
    the run-time predictions, :func:`_loss`) or ``wait`` (the least mean wait of the prefix
    scheduled with the predictions)."""

    method: str = "ga"
    fit: str = "error"
    loss: str = "mae"
    seed: int = 1
    generations: Optional[int] = None


def search_templates(training, attrs, requested, search: TemplateSearch = TemplateSearch(),
                     scheduler_of=None):
    """Smith's template set for this trace, searched as ``search`` says (with ``fit="wait"``
    the prefix is scheduled by ``scheduler_of()``). Returns (templates, the training error
    or wait)."""
    method, fit, loss = search.method, search.fit, search.loss
    candidates = smith_templates(attrs, requested)
    means, widths, fallback = _template_tables(training, candidates)
    targets = training.targets
    if fit == "wait":
        if scheduler_of is None:
            raise ValueError("fit='wait' needs scheduler_of")

        def score(chosen):
            if not chosen:
                return math.inf
            return prefix_wait(training, _predict_with(chosen, means, widths, fallback),
                               scheduler_of)
    elif fit == "error":
        t_means, t_widths, t_fallback = means[:, targets], widths[:, targets], fallback[targets]
        runs = training.runs

        def score(chosen):
            if not chosen or not len(targets):
                return math.inf
            return _loss(_predict_with(chosen, t_means, t_widths, t_fallback) - runs, loss)
    else:
        raise ValueError(f"unknown fit {fit!r} (error or wait)")
    if method == "greedy":
        chosen, best = [], math.inf
        while len(chosen) < MAX_TEMPLATES:
            trial = min(((score(sorted(chosen + [k])), k) for k in range(len(candidates))
                         if k not in chosen), default=(math.inf, None))
            if trial[0] >= best:
                break
            best = trial[0]
            chosen = sorted(chosen + [trial[1]])
        return [candidates[i] for i in chosen], float(best)
    if method != "ga":
        raise ValueError(f"unknown search {method!r} (ga or greedy)")
    code = TemplateCode(candidates, attrs, requested)
    small = fit == "wait"  # every score a scheduling simulation: a smaller search
    bits, best = genetic(code.bits, lambda b: score(code.decode(b)), seed=search.seed,
                         population=16 if small else 40,
                         generations=search.generations or (8 if small else 30))
    return [candidates[i] for i in code.decode(bits)], float(best)


def search_ibl(training, attrs, requested, *, seed=1, generations=6, sample=1000,
               loss="mae"):
    """Instance-based learning parameters, fitted to the least ``loss`` by the genetic
    algorithm: each feature's weight on 4 bits (0 to 1 in fifteenths), k = 2^(0..7) on 3
    bits, the kernel width 10^(-2..0.5) on 4 bits. Returns (keyword arguments, training
    error)."""
    nominal = "".join(a for a in attrs if a in NOMINAL)
    n_features = len(nominal) + 1 + int(requested)
    targets = training.targets
    if len(targets) > sample:  # score on the latest prefix jobs; history still all
        targets = targets[-sample:]
    scored = set(targets.tolist())
    runs = {i: training.jobs[i].run for i in targets}
    fallback = _fallbacks(training)

    def params(bits):
        weights = [_number(bits[4 * f:4 * f + 4]) / 15.0 for f in range(n_features)]
        at = 4 * n_features
        k = 2 ** _number(bits[at:at + 3])
        width = 10 ** (-2.0 + 2.5 * _number(bits[at + 3:at + 7]) / 15.0)
        return {"weights": [round(w, 4) for w in weights], "k": int(k),
                "width": round(float(width), 4)}

    def score(bits):
        found = params(bits)
        if not any(found["weights"]):
            return math.inf
        model = InstanceBased(nominal, use_requested=requested, **found)
        errors = []

        def record(i, job):
            if i in scored:
                v = model.predict(blind(job))
                errors.append((fallback[i] if v is None else v) - runs[i])

        training.replay(record, [model])
        return _loss(np.array(errors), loss) if errors else math.inf

    bits, best = genetic(4 * n_features + 7, score, seed=seed, population=12,
                         generations=generations)
    return params(bits), float(best)


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

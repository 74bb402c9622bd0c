"""Evaluating wait (start-time) predictions as Smith (Tables 1.3, 1.4) and Li et al.
(Table 4) did.

The ground truth is the schedule that actually happens: the whole trace simulated with the
scheduler's own estimates, actual run times and every later arrival. Inside that simulation,
at each job's submission, technique 1 (:mod:`.forward`) predicts its start from a snapshot
with each run-time source (``actual``, ``requested`` or a predictor learning online), and
technique 2 (:mod:`.waitstate`) from similar past states. A job the scheduler starts at once
is predicted to wait 0, exactly. Errors are over the evaluated jobs (the test suffix).

Which forecast with predicted run times to trust is chosen on the training prefix, by one of
two rules (:data:`SELECTION_RULES`):

``work``  the run-time source whose predictions err least on the work of consecutive jobs:
          over the prefix jobs whose run times were known when the prefix ended, in
          submission order, the mean absolute error of the processor-seconds of every
          :data:`WORK_WINDOW_JOBS` consecutive jobs. A start forecast adds up the work of the
          jobs around the job, and a user's burst of alike jobs shares one error, so the error
          of a sum is what counts, not each job's. It needs no forecast on the prefix.
``wait``  the forecast (a source or a mean of forecasts) with the least wait error on the
          prefix, whose waits are forecast too for it, as TEMP-EST chooses a run-time
          predictor. The prefix's waits can be far shorter than those that follow (NASA at
          90% load: 138 min against 1,475), and there a noisy source errs little.
"""

import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from ..scheduling.scheduler import Scheduler
from ..scheduling.simulate import Watch, simulate
from .forward import predict_start, replayed_arrivals
from .online import Online
from .waitstate import StatePredictor, scheduler_state

SELECTION_RULES = ("work", "wait")
WORK_WINDOW_JOBS = 32  # the same choice on five traces for windows of 30 to 100 jobs


class Source:
    """A run-time source for technique 1: ``run_of(job, elapsed)``, and the online
    predictor behind it (None for ``actual`` and ``requested``)."""

    def __init__(self, name: str, predictor: Any = None) -> None:
        self.name = name
        self.online: Optional[Online] = None if predictor is None else Online(predictor)
        self.conditions = getattr(predictor, "conditions", False)

    def run_of(self, job: Any, elapsed: float) -> Optional[float]:
        if self.name == "actual":
            return job.run
        if self.name == "requested":
            return job.requested
        online = self.online
        if online is None:
            raise ValueError(f"run-time source {self.name!r} has no predictor")
        if self.conditions and elapsed > 0:  # Smith's: history of jobs that ran this long
            value = online.predictor.predict(job, elapsed)
            if value is not None:
                return value
        return online.predicted[job.index]


class Learning:
    """The scheduler's estimator, with every predicting source learning beside it."""

    def __init__(self, estimator: Any, sources: Sequence[Source]) -> None:
        self.estimator = estimator
        self.online = [s.online for s in sources if s.online is not None]
        self.name = estimator.name

    def estimate(self, job: Any, now: float) -> float:
        for o in self.online:
            if o is not self.estimator:
                o.estimate(job, now)
        return self.estimator.estimate(job, now)

    def observe(self, job: Any, now: float) -> None:
        for o in self.online:
            if o is not self.estimator:
                o.observe(job, now)
        self.estimator.observe(job, now)


def mean_label(names: Sequence[str]) -> str:
    return f"mean({';'.join(names)})"


def work_error(predicted: dict, jobs: Sequence[Any], window: int = WORK_WINDOW_JOBS) -> float:
    """The mean absolute error, in processor-seconds, of the work of every ``window``
    consecutive ``jobs`` (completed, in submission order) with run times ``predicted``
    (job index -> seconds); the mean over one window of all of them if there are fewer."""
    error = np.array([(predicted[j.index] - j.run) * j.procs for j in jobs], dtype=float)
    if not len(error):
        return float("inf")
    window = min(window, len(error))
    sums = np.concatenate([[0.0], np.cumsum(error)])
    return float(np.abs(sums[window:] - sums[:-window]).mean())


def edg_wait(sched: Any, processors: int) -> Optional[float]:
    """The European DataGrid's published wait (Li et al. §1, their baseline): the requested
    time of every job already queued, as FCFS would run them one after another over the
    whole machine (processor-seconds requested / processors); None if one has no request."""
    work = 0.0
    for job in sched.waiting():
        if job.requested is None:
            return None
        work += job.requested * job.procs
    return work / processors


@dataclass(frozen=True)
class WaitStudy:
    """What :func:`evaluate_waits` measures besides technique 1 with each source.

    ``evaluate``: the job indices whose waits are scored (default all). ``train``: the
    training prefix on which each rule of ``select`` (:data:`SELECTION_RULES`) chooses a
    forecast with predicted run times, scored on ``evaluate`` as
    ``summary["selected"][rule]``. ``means``: groups of source names whose forecasts are also
    averaged (an ensemble of forward simulations), each scored as ``mean(a;b;...)``.
    ``future_seconds``: the arrivals of that many seconds back replayed as those to come.
    ``technique2``: also forecast from similar past states (:mod:`.waitstate`).
    ``quantile``: also publish each job an upper bound on its wait meant to hold for that
    share of jobs (:mod:`.bounds`), from the forecasts with ``bound_source`` (a source name;
    default the first), and the QBETS-style peer's. ``site``: the scheduler's site policy;
    ``kill_at_requested``: jobs end at their requested time.

    >>> WaitStudy(quantile=0.9).technique2
    True
    """

    site: Any = None
    evaluate: Optional[Iterable[int]] = None
    train: Iterable[int] = ()
    select: Sequence[str] = ("work",)
    kill_at_requested: bool = False
    technique2: bool = True
    means: Sequence[Sequence[str]] = ()
    future_seconds: float = 0.0
    quantile: Optional[float] = None
    bound_source: Optional[str] = None

    def check(self, sources: Sequence[Source]) -> None:
        """ValueError naming what does not fit ``sources`` or the rules."""
        unknown = [r for r in self.select if r not in SELECTION_RULES]
        if unknown:
            raise ValueError(f"unknown selection rule {unknown[0]!r}; choose from "
                             f"{', '.join(SELECTION_RULES)}")
        names = {s.name for s in sources}
        for group in self.means:
            missing = [n for n in group if n not in names]
            if missing or len(group) < 2:
                raise ValueError(f"a mean of forecasts needs two or more of the run-time "
                                 f"sources ({', '.join(sorted(names))}); got "
                                 f"{', '.join(group)}")
        if self.quantile is not None:
            if not 0 < self.quantile < 1:
                raise ValueError(f"a bound's quantile must be between 0 and 1, got "
                                 f"{self.quantile}")
            if self.bound_source is not None and self.bound_source not in names:
                raise ValueError(f"the bound's run-time source {self.bound_source!r} is not "
                                 f"one of {', '.join(sorted(names))}")


class TechniqueOne:
    """Technique 1 (:mod:`.forward`): each source's start forecast from a snapshot at each
    job's submission, with the arrivals of the last ``future_seconds`` replayed."""

    def __init__(self, sources: Sequence[Source], knows_estimates: bool,
                 study: WaitStudy) -> None:
        self.sources, self.knows, self.study = sources, knows_estimates, study
        self.predicted: dict = {s.name: {} for s in sources}
        self.seconds = {s.name: 0.0 for s in sources}
        self.queue_sizes: list = []
        self.recent: deque = deque()  # the arrivals of the last future_seconds, oldest first

    def observe(self, now: float, sched: Any, arrived: list, started: list) -> None:
        future = self.study.future_seconds
        if future > 0:
            self.recent.extend(arrived)
            while self.recent and self.recent[0].submit <= now - future:
                self.recent.popleft()

    def at_once(self, job: Any, now: float) -> None:
        for s in self.sources:
            self.predicted[s.name][job.index] = now

    def waiting(self, job: Any, now: float, sched: Any) -> None:
        study = self.study
        self.queue_sizes.append(len(sched.queue) - sched._stale)
        for s in self.sources:
            t0 = time.perf_counter()
            future = replayed_arrivals(self.recent, now, study.future_seconds, s.run_of,
                                       knows_estimates=self.knows, exclude=job) \
                if study.future_seconds > 0 else ()
            self.predicted[s.name][job.index] = predict_start(
                sched, now, job, s.run_of, knows_estimates=self.knows,
                kill_at_requested=study.kill_at_requested, arrivals=future)
            self.seconds[s.name] += time.perf_counter() - t0


class TechniqueTwo:
    """Technique 2 (:mod:`.waitstate`): the wait of similar past states."""

    forecast_all = False

    def __init__(self) -> None:
        self.predictor = StatePredictor()
        self.states: dict = {}
        self.predicted: dict = {}

    def observe(self, now: float, sched: Any, arrived: list, started: list) -> None:
        for job in arrived:
            self.states[job] = scheduler_state(sched, job, now)
        for job in started:
            state = self.states.pop(job, None)
            if state is not None:
                self.predictor.observe(state, job.start - job.submit)

    def at_once(self, job: Any, now: float) -> None:
        self.predicted[job.index] = now

    def waiting(self, job: Any, now: float, sched: Any) -> None:
        wait = self.predictor.predict(self.states[job])
        self.predicted[job.index] = now + (0.0 if wait is None else wait)

    def score(self, outcome: "_Outcome", summary: dict, rows: dict) -> None:
        rows["technique2"] = outcome.predicted_waits(self.predicted)
        summary["technique2"] = outcome.score(outcome.starts_of(self.predicted))


class EDGForecast:
    """The European DataGrid's linear forecast (:func:`edg_wait`)."""

    forecast_all = False

    def __init__(self, processors: int) -> None:
        self.processors = processors
        self.predicted: dict = {}

    def observe(self, now: float, sched: Any, arrived: list, started: list) -> None:
        pass

    def at_once(self, job: Any, now: float) -> None:
        self.predicted[job.index] = now

    def waiting(self, job: Any, now: float, sched: Any) -> None:
        wait = edg_wait(sched, self.processors)
        self.predicted[job.index] = now + (wait - job.requested * job.procs / self.processors)

    def score(self, outcome: "_Outcome", summary: dict, rows: dict) -> None:
        rows["edg"] = outcome.predicted_waits(self.predicted)
        summary["edg"] = outcome.score(outcome.starts_of(self.predicted))


class WaitBounds:
    """Upper bounds on waits (:mod:`.bounds`): ours from technique 1's forecasts with one
    source, and the QBETS-style peer's. Bounds learn from every job, so every job is
    forecast."""

    forecast_all = True

    def __init__(self, quantile: float, one: TechniqueOne, source: str) -> None:
        from .bounds import ForecastBound, QBETSBound

        self.quantile, self.one, self.source = quantile, one, source
        self.bounders = (ForecastBound(quantile), QBETSBound(quantile))
        self.bounds: dict = {b.name: {} for b in self.bounders}

    def observe(self, now: float, sched: Any, arrived: list, started: list) -> None:
        for job in started:
            for b in self.bounders:
                b.started(job, job.start - job.submit)

    def at_once(self, job: Any, now: float) -> None:
        self.bounds["forecast"][job.index] = 0.0
        self.bounds["qbets"][job.index] = self.bounders[1].bound(job, now)

    def waiting(self, job: Any, now: float, sched: Any) -> None:
        forecast = self.one.predicted[self.source][job.index] - now
        for b in self.bounders:
            self.bounds[b.name][job.index] = b.bound(job, now, forecast)

    def score(self, outcome: "_Outcome", summary: dict, rows: dict) -> None:
        from .bounds import CONFIDENCE, TAU_SECONDS, bound_summary

        ours = np.array([self.bounds["forecast"][i] for i in outcome.chosen])
        peer = np.array([self.bounds["qbets"][i] for i in outcome.chosen])
        rows["bound"], rows["qbets_bound"] = ours, peer
        summary["bounds"] = {
            "quantile": self.quantile, "runtimes": self.source, "confidence": CONFIDENCE,
            "tau_seconds": TAU_SECONDS, **bound_summary(self.quantile, outcome.waits, ours),
            "peer": {"name": "qbets", **bound_summary(self.quantile, outcome.waits, peer)}}


class _Outcome:
    """The schedule that happened, on the evaluated jobs that started."""

    def __init__(self, jobs: list, evaluate: set) -> None:
        self.jobs = jobs
        self.by_index = {j.index: j for j in jobs}
        self.chosen = sorted(j.index for j in jobs if j.index in evaluate and j.start is not None)
        self.waits = np.array([self.by_index[i].start - self.by_index[i].submit
                               for i in self.chosen])
        self.starts = np.array([self.by_index[i].start for i in self.chosen])
        self.submits = np.array([self.by_index[i].submit for i in self.chosen])
        self.mean_wait = float(self.waits.mean()) if len(self.waits) else 0.0

    def starts_of(self, predicted: dict) -> np.ndarray:
        return np.array([predicted[i] for i in self.chosen])

    def predicted_waits(self, predicted: dict) -> np.ndarray:
        return self.starts_of(predicted) - self.submits

    def score(self, pred: np.ndarray) -> dict:
        error = np.abs(pred - self.starts)
        return {"mae_seconds": float(error.mean()) if len(error) else 0.0,
                "mae_minutes": float(error.mean() / 60) if len(error) else 0.0,
                "mae_pct_of_mean_wait": float(100 * error.mean() / self.mean_wait)
                if self.mean_wait > 0 else None}

    def utilization(self, processors: int) -> Optional[float]:
        done = [j for j in self.jobs if j.start is not None]
        if not done:
            return None
        span = max(j.end for j in done) - min(j.submit for j in done)
        work = sum(j.procs * (j.end - j.start) for j in done)
        return work / (processors * span) if span > 0 else 0.0


def _instants(one: TechniqueOne, extras: list, forecast_for: set, progress: Any) -> Any:
    """The simulation's ``on_instant``: every analysis sees the instant, then each job to
    forecast is forecast by technique 1 first (the bounds read its forecasts)."""
    done = [0]
    everyone = [one] + extras

    def on_instant(now: float, sched: Any, arrived: list, started: list) -> None:
        for analysis in everyone:
            analysis.observe(now, sched, arrived, started)
        for job in arrived:
            if job.index not in forecast_for:
                continue
            for analysis in everyone:
                if job.start is not None:  # the scheduler started it at once: waits 0
                    analysis.at_once(job, now)
                else:
                    analysis.waiting(job, now, sched)
        done[0] += len(arrived)
        if progress is not None and done[0] >= 256:
            progress(done[0])
            done[0] = 0

    return on_instant


def evaluate_waits(jobs: list, processors: int, policy: str, sources: Sequence[Source],
                   estimator: Any, study: WaitStudy = WaitStudy(), *,
                   progress: Any = None) -> tuple:
    """Predict the wait of every job of ``study.evaluate`` (job indices; default all) at its
    submission, inside the real schedule of ``policy`` with ``estimator``, by technique 1
    with each of ``sources`` and by what ``study`` asks for besides (:class:`WaitStudy`).
    The European DataGrid's linear forecast (:func:`edg_wait`) is scored as
    ``summary["edg"]`` where every job has a requested time. ``progress(n)`` is told of
    every few hundred arrivals. Returns (summary, rows): rows are per evaluated job (index,
    actual wait, predictions)."""
    study.check(sources)
    evaluate = set(range(len(jobs))) if study.evaluate is None else set(study.evaluate)
    train = set(study.train) - evaluate
    forecast_for = evaluate | train if "wait" in study.select else evaluate
    one = TechniqueOne(sources, estimator.name != "actual", study)
    extras: list = []
    if study.technique2:
        extras.append(TechniqueTwo())
    if all(j.requested is not None for j in jobs):
        extras.append(EDGForecast(processors))
    if study.quantile is not None:
        extras.append(WaitBounds(study.quantile, one, study.bound_source or sources[0].name))
    if any(a.forecast_all for a in extras):
        forecast_for = set(range(len(jobs))) | forecast_for
    sim = simulate(jobs, Scheduler(processors, policy, site=study.site),
                   estimator=Learning(estimator, sources),
                   kill_at_requested=study.kill_at_requested,
                   watch=Watch(on_instant=_instants(one, extras, forecast_for,
                                                    progress)))
    outcome = _Outcome(sim.jobs, evaluate)
    forecasts = len(one.queue_sizes)
    summary = {"policy": policy, "scheduler_estimates": estimator.name,
               "jobs": len(outcome.chosen), "future_arrivals_seconds": study.future_seconds,
               "mean_wait_seconds": outcome.mean_wait, "jobs_waiting_at_submission": forecasts,
               "mean_queue_at_prediction": float(np.mean(one.queue_sizes)) if forecasts
               else 0.0,
               "utilization": outcome.utilization(processors), "runtimes": {}}
    rows = {"index": outcome.chosen, "wait": outcome.waits}
    _score_sources(one, study.means, outcome, summary, rows)
    selected = _selections(one, study, outcome, train, evaluate, summary["runtimes"])
    if selected:
        summary["selected"] = selected
    for analysis in extras:
        analysis.score(outcome, summary, rows)
    summary["simulation_seconds"] = sim.seconds
    return summary, rows


def _score_sources(one: TechniqueOne, means: Sequence[Sequence[str]], outcome: _Outcome,
                   summary: dict, rows: dict) -> None:
    """Each source's forecasts, and each mean of them, scored on the evaluated jobs."""
    forecasts = len(one.queue_sizes)
    for s in one.sources:
        rows[s.name] = outcome.predicted_waits(one.predicted[s.name])
        summary["runtimes"][s.name] = {
            **outcome.score(outcome.starts_of(one.predicted[s.name])),
            "seconds_per_prediction": one.seconds[s.name] / forecasts if forecasts else 0.0}
    for group in means:
        seconds_each = [summary["runtimes"][n]["seconds_per_prediction"] for n in group]
        pred = np.mean([[one.predicted[n][i] for i in outcome.chosen] for n in group],
                       axis=0) if outcome.chosen else np.array([])
        label = mean_label(group)
        rows[label] = pred - outcome.submits
        summary["runtimes"][label] = {**outcome.score(pred),
                                      "seconds_per_prediction": sum(seconds_each)}


def _selections(one: TechniqueOne, study: WaitStudy, outcome: _Outcome, train: set,
                evaluate: set, runtimes: dict) -> dict:
    """{rule: the forecast it chose on the training prefix, scored on the evaluated
    jobs}; empty without a prefix, a learning source or a rule."""
    by_index = outcome.by_index
    trained = sorted(j.index for j in outcome.jobs if j.index in train and j.start is not None)
    learning = [s for s in one.sources if s.online is not None]
    if not (trained and learning and study.select):
        return {}

    def choice(errors: dict, **details: Any) -> dict:
        """The candidate with the least training error, scored on the evaluated jobs."""
        best = min(errors, key=errors.__getitem__)
        return {"name": best, **details,
                **{k: v for k, v in runtimes[best].items() if k != "seconds_per_prediction"}}

    selected = {}
    if "work" in study.select:
        # the prefix jobs whose run times were known when the first evaluated job came
        end_of_prefix = min(by_index[i].submit for i in evaluate) if evaluate else np.inf
        known = sorted((by_index[i] for i in trained if by_index[i].end <= end_of_prefix),
                       key=lambda j: (j.submit, j.index))
        errors = {s.name: work_error(s.online.predicted, known) for s in learning
                  if s.online is not None}
        selected["work"] = choice(
            errors, train_jobs=len(known), window_jobs=WORK_WINDOW_JOBS,
            train_work_error_cpu_hours={k: v / 3600 for k, v in errors.items()})
    if "wait" in study.select:
        errors, train_wait = _wait_errors(one, learning, study.means, trained, by_index)
        selected["wait"] = choice(
            errors, train_jobs=len(trained),
            train_mae_pct_of_mean_wait={k: 100 * v / train_wait if train_wait > 0 else None
                                        for k, v in errors.items()})
    return selected


def _wait_errors(one: TechniqueOne, learning: list, means: Sequence[Sequence[str]],
                 trained: list, by_index: dict) -> tuple:
    """({forecast: mean absolute start error on the training prefix}, the prefix's mean
    wait), over the forecasts with predicted run times, each as the sources it averages."""
    candidates = {s.name: [s.name] for s in learning}
    candidates.update((mean_label(g), list(g)) for g in means)
    train_starts = np.array([by_index[i].start for i in trained])
    train_wait = float(np.mean([by_index[i].start - by_index[i].submit for i in trained]))

    def train_error(parts: list) -> float:
        pred = np.mean([[one.predicted[n][i] for i in trained] for n in parts], axis=0)
        return float(np.abs(pred - train_starts).mean())

    return {label: train_error(parts) for label, parts in candidates.items()}, train_wait


def _pct_of_wait(score: dict) -> str:
    value = score["mae_pct_of_mean_wait"]
    return "n/a" if value is None else f"{value:.1f}"


def _share(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def wait_table(summary: dict) -> str:
    """Smith Table 1.3/1.4 and Li et al. Table 4's form, as Markdown."""
    mean = summary["mean_wait_seconds"]
    future = summary.get("future_arrivals_seconds") or 0
    replay = (f"; forecasts take in the arrivals of the last {future / 3600:g} h again as "
              "those to come" if future else "")
    rows = [f"{summary['policy']} (scheduling with {summary['scheduler_estimates']} run "
            f"times); mean wait {mean / 60:.1f} min over {summary['jobs']} jobs{replay}", "",
            "| run times in the simulation | mean error [min] | mean error [% of mean wait] | "
            "seconds per prediction |", "|---|---|---|---|"]
    for name, s in summary["runtimes"].items():
        rows.append(f"| {name} | {s['mae_minutes']:.1f} | {_pct_of_wait(s)} | "
                    f"{s['seconds_per_prediction'] * 1000:.2f} ms |")
    for rule, s in summary.get("selected", {}).items():
        rows.append(f"| chosen on the training prefix by {rule} error: {s['name']} | "
                    f"{s['mae_minutes']:.1f} | {_pct_of_wait(s)} | |")
    for key, label in (("technique2", "technique 2 (similar states)"),
                       ("edg", "EDG (requested times of the jobs queued, FCFS)")):
        if key in summary:
            s = summary[key]
            rows.append(f"| {label} | {s['mae_minutes']:.1f} | {_pct_of_wait(s)} | |")
    if "bounds" in summary:
        b = summary["bounds"]
        rows += ["", f"Wait bounds at quantile {b['quantile']:g} (forecasts with "
                 f"{b['runtimes']} run times):", "",
                 "| bound | jobs within their bound | of the jobs that waited | median bound / "
                 "wait | no bound |", "|---|---|---|---|---|"]
        for label, s in (("forecast x recent ratio (ours)", b), ("QBETS-style, per queue",
                                                                  b["peer"])):
            med = "n/a" if s["median_bound_over_wait"] is None \
                else f"{s['median_bound_over_wait']:.2f}"
            rows.append(f"| {label} | {_share(s['coverage'])} | "
                        f"{_share(s['coverage_of_jobs_that_waited'])} | {med} | "
                        f"{s['unbounded_jobs']} |")
    return "\n".join(rows) + "\n"


def wait_csv(rows: dict) -> str:
    """Per evaluated job: the actual wait and each prediction, in seconds."""
    names = [n for n in rows if n not in ("index", "wait")]
    lines = ["index,wait_seconds," + ",".join(f"{n}_seconds" for n in names)]
    for k, index in enumerate(rows["index"]):
        lines.append(f"{index},{rows['wait'][k]:.0f}," + ",".join(f"{rows[n][k]:.0f}"
                                                                   for n in names))
    # an unbounded wait is written "inf"
    return "\n".join(lines) + "\n"

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

import numpy as np

from ..scheduling.scheduler import Scheduler
from ..scheduling.simulate import simulate
from .forward import predict_start, replayed_arrivals
from .online import Online
from .waitstate import StatePredictor, scheduler_state

SELECTION_RULES = ("work", "wait")
WORK_WINDOW_JOBS = 32  # the same choice on five traces for windows of 30 to 100 jobs


class Source:
    """A run-time source for technique 1: ``run_of(job, elapsed)``, and the online
    predictor behind it (None for ``actual`` and ``requested``)."""

    def __init__(self, name, predictor=None):
        self.name = name
        self.online = None if predictor is None else Online(predictor)
        self.conditions = getattr(predictor, "conditions", False)

    def run_of(self, job, elapsed):
        if self.name == "actual":
            return job.run
        if self.name == "requested":
            return job.requested
        if self.conditions and elapsed > 0:  # Smith's: history of jobs that ran this long
            value = self.online.predictor.predict(job, elapsed)
            if value is not None:
                return value
        return self.online.predicted[job.index]


class Learning:
    """The scheduler's estimator, with every predicting source learning beside it."""

    def __init__(self, estimator, sources):
        self.estimator = estimator
        self.online = [s.online for s in sources if s.online is not None]
        self.name = estimator.name

    def estimate(self, job, now):
        for o in self.online:
            if o is not self.estimator:
                o.estimate(job, now)
        return self.estimator.estimate(job, now)

    def observe(self, job, now):
        for o in self.online:
            if o is not self.estimator:
                o.observe(job, now)
        self.estimator.observe(job, now)


def mean_label(names):
    return f"mean({';'.join(names)})"


def work_error(predicted, jobs, window=WORK_WINDOW_JOBS):
    """The mean absolute error, in processor-seconds, of the work of every ``window``
    consecutive ``jobs`` (completed, in submission order) with run times ``predicted``
    (job index -> seconds); the mean over one window of all of them if there are fewer."""
    error = np.array([(predicted[j.index] - j.run) * j.procs for j in jobs], dtype=float)
    if not len(error):
        return float("inf")
    window = min(window, len(error))
    sums = np.concatenate([[0.0], np.cumsum(error)])
    return float(np.abs(sums[window:] - sums[:-window]).mean())


def edg_wait(sched, processors):
    """The European DataGrid's published wait (Li et al. §1, their baseline): the requested
    time of every job already queued, as FCFS would run them one after another over the
    whole machine (processor-seconds requested / processors); None if one has no request."""
    work = 0.0
    for job in sched.waiting():
        if job.requested is None:
            return None
        work += job.requested * job.procs
    return work / processors


def evaluate_waits(jobs, processors, policy, sources, estimator, *, site=None,
                   evaluate=None, train=(), select=("work",), kill_at_requested=False,
                   technique2=True, means=(), future_seconds=0.0, progress=None,
                   quantile=None, bound_source=None):
    """Predict the wait of every job in ``evaluate`` (job indices; default all) at its
    submission, inside the real schedule of ``policy`` with ``estimator``.

    ``means``: groups of source names whose forecasts are also averaged (an ensemble of
    forward simulations, one per run-time source); each group is scored as
    ``mean(a;b;...)``. ``train``: job indices (the training prefix) on which each rule of
    ``select`` (:data:`SELECTION_RULES`) chooses a forecast with predicted run times; the
    forecast each chose is scored on ``evaluate`` as ``summary["selected"][rule]``.
    ``quantile``: also publish each job an upper bound on its wait meant to hold for that
    share of jobs (:mod:`.bounds`), from the forecasts with ``bound_source`` (a source name;
    default the first), and the QBETS-style peer's; scored as ``summary["bounds"]``.
    The European DataGrid's linear forecast (:func:`edg_wait`) is scored as
    ``summary["edg"]`` where every job has a requested time.
    Returns (summary, rows): rows are per evaluated job (index, actual wait, predictions).
    """
    unknown = [r for r in select if r not in SELECTION_RULES]
    if unknown:
        raise ValueError(f"unknown selection rule {unknown[0]!r}; choose from "
                         f"{', '.join(SELECTION_RULES)}")
    names = {s.name for s in sources}
    for group in means:
        missing = [n for n in group if n not in names]
        if missing or len(group) < 2:
            raise ValueError(f"a mean of forecasts needs two or more of the run-time sources "
                             f"({', '.join(sorted(names))}); got {', '.join(group)}")
    knows = estimator.name != "actual"
    scheduler = Scheduler(processors, policy, site=site)
    evaluate = set(range(len(jobs))) if evaluate is None else set(evaluate)
    train = set(train) - evaluate
    forecast_for = evaluate | train if "wait" in select else evaluate
    if quantile is not None:
        from .bounds import ForecastBound, QBETSBound

        if not 0 < quantile < 1:
            raise ValueError(f"a bound's quantile must be between 0 and 1, got {quantile}")
        bound_source = bound_source or sources[0].name
        if bound_source not in names:
            raise ValueError(f"the bound's run-time source {bound_source!r} is not one of "
                             f"{', '.join(sorted(names))}")
        # bounds learn from every job's forecast, so every job is forecast
        forecast_for = set(range(len(jobs))) | forecast_for
        bounders = (ForecastBound(quantile), QBETSBound(quantile))
        bounds = {b.name: {} for b in bounders}
    edg = {} if all(j.requested is not None for j in jobs) else None
    predicted = {s.name: {} for s in sources}
    seconds = {s.name: 0.0 for s in sources}
    queue_sizes = []
    state_predictor = StatePredictor() if technique2 else None
    states, t2 = {}, {}
    done = [0]
    recent = deque()  # the arrivals of the last future_seconds, oldest first

    def on_instant(now, sched, arrived, started):
        if future_seconds > 0:
            recent.extend(arrived)
            while recent and recent[0].submit <= now - future_seconds:
                recent.popleft()
        if state_predictor is not None:
            for job in arrived:
                states[job] = scheduler_state(sched, job, now)
            for job in started:
                state = states.pop(job, None)
                if state is not None:
                    state_predictor.observe(state, job.start - job.submit)
        if quantile is not None:
            for job in started:
                for b in bounders:
                    b.started(job, job.start - job.submit)
        for job in arrived:
            if job.index not in forecast_for:
                continue
            if job.start is not None:  # the scheduler started it at once
                for s in sources:
                    predicted[s.name][job.index] = now
                if state_predictor is not None:
                    t2[job.index] = now
                if quantile is not None:
                    bounds["forecast"][job.index] = 0.0
                    bounds["qbets"][job.index] = bounders[1].bound(job, now)
                if edg is not None:
                    edg[job.index] = now
                continue
            queue_sizes.append(len(sched.queue) - sched._stale)
            for s in sources:
                t0 = time.perf_counter()
                future = replayed_arrivals(recent, now, future_seconds, s.run_of,
                                           knows_estimates=knows, exclude=job) \
                    if future_seconds > 0 else ()
                predicted[s.name][job.index] = predict_start(
                    sched, now, job, s.run_of, knows_estimates=knows,
                    kill_at_requested=kill_at_requested, arrivals=future)
                seconds[s.name] += time.perf_counter() - t0
            if state_predictor is not None:
                wait = state_predictor.predict(states[job])
                t2[job.index] = now + (0.0 if wait is None else wait)
            if quantile is not None:
                forecast = predicted[bound_source][job.index] - now
                for b in bounders:
                    bounds[b.name][job.index] = b.bound(job, now, forecast)
            if edg is not None:
                wait = edg_wait(sched, processors)
                edg[job.index] = now + (wait - job.requested * job.procs / processors)
        done[0] += len(arrived)
        if progress is not None and done[0] >= 256:
            progress(done[0])
            done[0] = 0

    sim = simulate(jobs, scheduler, estimator=Learning(estimator, sources),
                   kill_at_requested=kill_at_requested, on_instant=on_instant)
    jobs = sim.jobs
    chosen = sorted(j.index for j in jobs if j.index in evaluate and j.start is not None)
    by_index = {j.index: j for j in jobs}
    waits = np.array([by_index[i].start - by_index[i].submit for i in chosen])
    starts = np.array([by_index[i].start for i in chosen])
    mean_wait = float(waits.mean()) if len(waits) else 0.0
    forecasts = len(queue_sizes)
    summary = {"policy": policy, "scheduler_estimates": estimator.name, "jobs": len(chosen),
               "future_arrivals_seconds": future_seconds,
               "mean_wait_seconds": mean_wait, "jobs_waiting_at_submission": forecasts,
               "mean_queue_at_prediction": float(np.mean(queue_sizes)) if forecasts else 0.0,
               "utilization": None, "runtimes": {}}
    done_jobs = [j for j in jobs if j.start is not None]
    if done_jobs:
        span = max(j.end for j in done_jobs) - min(j.submit for j in done_jobs)
        work = sum(j.procs * (j.end - j.start) for j in done_jobs)
        summary["utilization"] = work / (processors * span) if span > 0 else 0.0
    rows = {"index": chosen, "wait": waits}

    def score(pred):
        error = np.abs(pred - starts)
        return {"mae_seconds": float(error.mean()) if len(error) else 0.0,
                "mae_minutes": float(error.mean() / 60) if len(error) else 0.0,
                "mae_pct_of_mean_wait": float(100 * error.mean() / mean_wait)
                if mean_wait > 0 else None}

    for s in sources:
        pred = np.array([predicted[s.name][i] for i in chosen])
        rows[s.name] = pred - np.array([by_index[i].submit for i in chosen])
        summary["runtimes"][s.name] = {
            **score(pred),
            "seconds_per_prediction": seconds[s.name] / forecasts if forecasts else 0.0}
    for group in means:
        seconds_each = [summary["runtimes"][n]["seconds_per_prediction"] for n in group]
        pred = np.mean([[predicted[n][i] for i in chosen] for n in group], axis=0) \
            if chosen else np.array([])
        label = mean_label(group)
        rows[label] = pred - np.array([by_index[i].submit for i in chosen])
        summary["runtimes"][label] = {**score(pred), "seconds_per_prediction": sum(seconds_each)}
    trained = sorted(j.index for j in jobs if j.index in train and j.start is not None)
    learning = [s for s in sources if s.online is not None]

    def choice(errors, **details):
        """The candidate with the least training error, scored on the evaluated jobs."""
        best = min(errors, key=errors.__getitem__)
        return {"name": best, **details,
                **{k: v for k, v in summary["runtimes"][best].items()
                   if k != "seconds_per_prediction"}}

    if trained and learning and select:
        summary["selected"] = {}
        if "work" in select:
            # the prefix jobs whose run times were known when the first evaluated job came
            end_of_prefix = min(by_index[i].submit for i in evaluate) if evaluate else np.inf
            known = sorted((by_index[i] for i in trained if by_index[i].end <= end_of_prefix),
                           key=lambda j: (j.submit, j.index))
            errors = {s.name: work_error(s.online.predicted, known) for s in learning}
            summary["selected"]["work"] = choice(
                errors, train_jobs=len(known), window_jobs=WORK_WINDOW_JOBS,
                train_work_error_cpu_hours={k: v / 3600 for k, v in errors.items()})
        if "wait" in select:
            # the forecasts with predicted run times, each as the sources it averages
            candidates = {s.name: [s.name] for s in learning}
            candidates.update((mean_label(g), list(g)) for g in means)
            train_starts = np.array([by_index[i].start for i in trained])
            train_wait = float(np.mean([by_index[i].start - by_index[i].submit
                                        for i in trained]))

            def train_error(parts):
                pred = np.mean([[predicted[n][i] for i in trained] for n in parts], axis=0)
                return float(np.abs(pred - train_starts).mean())

            errors = {label: train_error(parts) for label, parts in candidates.items()}
            summary["selected"]["wait"] = choice(
                errors, train_jobs=len(trained),
                train_mae_pct_of_mean_wait={k: 100 * v / train_wait if train_wait > 0 else None
                                            for k, v in errors.items()})
    if state_predictor is not None:
        pred = np.array([t2[i] for i in chosen])
        rows["technique2"] = pred - np.array([by_index[i].submit for i in chosen])
        summary["technique2"] = score(pred)
    if edg is not None:
        pred = np.array([edg[i] for i in chosen])
        rows["edg"] = pred - np.array([by_index[i].submit for i in chosen])
        summary["edg"] = score(pred)
    if quantile is not None:
        from .bounds import CONFIDENCE, TAU_SECONDS, bound_summary

        ours = np.array([bounds["forecast"][i] for i in chosen])
        peer = np.array([bounds["qbets"][i] for i in chosen])
        rows["bound"], rows["qbets_bound"] = ours, peer
        summary["bounds"] = {
            "quantile": quantile, "runtimes": bound_source, "confidence": CONFIDENCE,
            "tau_seconds": TAU_SECONDS, **bound_summary(quantile, waits, ours),
            "peer": {"name": "qbets", **bound_summary(quantile, waits, peer)}}
    summary["simulation_seconds"] = sim.seconds
    return summary, rows


def wait_table(summary):
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
        pct = "n/a" if s["mae_pct_of_mean_wait"] is None else f"{s['mae_pct_of_mean_wait']:.1f}"
        rows.append(f"| {name} | {s['mae_minutes']:.1f} | {pct} | "
                    f"{s['seconds_per_prediction'] * 1000:.2f} ms |")
    for rule, s in summary.get("selected", {}).items():
        pct = "n/a" if s["mae_pct_of_mean_wait"] is None else f"{s['mae_pct_of_mean_wait']:.1f}"
        rows.append(f"| chosen on the training prefix by {rule} error: {s['name']} | "
                    f"{s['mae_minutes']:.1f} | {pct} | |")
    if "technique2" in summary:
        s = summary["technique2"]
        pct = "n/a" if s["mae_pct_of_mean_wait"] is None else f"{s['mae_pct_of_mean_wait']:.1f}"
        rows.append(f"| technique 2 (similar states) | {s['mae_minutes']:.1f} | {pct} | |")
    if "edg" in summary:
        s = summary["edg"]
        pct = "n/a" if s["mae_pct_of_mean_wait"] is None else f"{s['mae_pct_of_mean_wait']:.1f}"
        rows.append(f"| EDG (requested times of the jobs queued, FCFS) | {s['mae_minutes']:.1f} "
                    f"| {pct} | |")
    if "bounds" in summary:
        b = summary["bounds"]
        rows += ["", f"Wait bounds at quantile {b['quantile']:g} (forecasts with "
                 f"{b['runtimes']} run times):", "",
                 "| bound | jobs within their bound | of the jobs that waited | median bound / "
                 "wait | no bound |", "|---|---|---|---|---|"]

        def pct(v):
            return "n/a" if v is None else f"{100 * v:.1f}%"

        for label, s in (("forecast x recent ratio (ours)", b), ("QBETS-style, per queue",
                                                                  b["peer"])):
            med = "n/a" if s["median_bound_over_wait"] is None \
                else f"{s['median_bound_over_wait']:.2f}"
            rows.append(f"| {label} | {pct(s['coverage'])} | "
                        f"{pct(s['coverage_of_jobs_that_waited'])} | {med} | "
                        f"{s['unbounded_jobs']} |")
    return "\n".join(rows) + "\n"


def wait_csv(rows):
    """Per evaluated job: the actual wait and each prediction, in seconds."""
    names = [n for n in rows if n not in ("index", "wait")]
    lines = ["index,wait_seconds," + ",".join(f"{n}_seconds" for n in names)]
    for k, index in enumerate(rows["index"]):
        lines.append(f"{index},{rows['wait'][k]:.0f}," + ",".join(f"{rows[n][k]:.0f}"
                                                                   for n in names))
    # an unbounded wait is written "inf"
    return "\n".join(lines) + "\n"

"""Evaluating run-time predictors as Smith (Table 1.1) and Li et al. (Table 2) did.

Predictors are fitted on a training prefix (:mod:`.search`), then run online over the whole
trace; errors are measured over the test suffix: mean absolute error in seconds and as % of
the mean run time, how many jobs each predictor could not predict and what it fell back to,
and the seconds the online pass took.
"""

import time

import numpy as np

from . import PREDICTORS, is_predictor  # noqa: F401  (is_predictor: part of this module's use)
from .attributes import NOMINAL, available, has_requested
from .online import SOURCES, run_online
from .runtime import Categories, InstanceBased, LastTwo, Li, Mean, Requested, pair_label
from .search import TemplateSearch, Training, search_ibl, search_templates, select_li

# Smith fitted his searches to the mean absolute error, which the median of a job's likely
# run times minimises; "-sq" fits minimise the squared error, which their mean minimises.
# Run times are skewed (medians fall short of means), and a forecast that adds run times up
# (a start time) wants means.


def predictor_names(text, jobs):
    """The predictors ``text`` names (comma-separated, or ``all``), checked; ``requested``
    only where the trace has requested times."""
    requested = has_requested(jobs)
    if text == "all":
        return [p for p in PREDICTORS if requested or p != "requested"]
    names = [p.strip() for p in text.split(",") if p.strip()]
    for name in names:
        parts = name.split("+")
        if len(set(parts)) != len(parts):
            raise ValueError(f"{name!r} names a predictor twice")
        for part in parts:
            if part not in PREDICTORS:
                raise ValueError(f"unknown predictor {part!r}; choose from "
                                 f"{', '.join(PREDICTORS)} (or all), or join several with "
                                 "+ for the mean of their predictions")
            if part == "requested" and not requested:
                raise ValueError("no job has a requested time (SWF field 9), so 'requested' "
                                 "cannot predict")
    if not names:
        raise ValueError("no predictor named")
    return names


def build(names, training, *, seed=1, log=None, fit="error", scheduler_of=None):
    """Fit the named predictors on ``training``. Returns (predictors, config per name).

    A name joining predictors with ``+`` is the mean of their predictions; each search runs
    once however many names use it. ``fit="wait"``: Smith's template sets are searched for
    the least mean wait of the training prefix scheduled by ``scheduler_of()`` with their
    predictions (Smith §4), not for the least run-time error."""
    jobs = training.jobs
    attrs, requested = available(jobs), has_requested(jobs)
    log = log or (lambda text: None)
    searched = {}

    def search(name):
        if name not in searched:
            started = time.perf_counter()
            loss = "rmse" if name.endswith("-sq") else "mae"
            error = f"training_{loss}_seconds"
            if name.startswith("smith"):
                log(f"searching Smith's template sets for {name} (genetic algorithm, least "
                    f"{'wait' if fit == 'wait' else loss})")
                templates, err = search_templates(training, attrs, requested, TemplateSearch(
                    fit=fit, loss=loss, seed=seed), scheduler_of=scheduler_of)
                key = "training_wait_seconds" if fit == "wait" else error
                found = templates, {"templates": [t.label for t in templates], key: err,
                                    "fit": fit}
            elif name.startswith("ibl"):
                log(f"searching instance-based learning parameters for {name} "
                    "(genetic algorithm)")
                params, err = search_ibl(training, attrs, requested, seed=seed, loss=loss)
                nominal = "".join(a for a in attrs if a in NOMINAL)
                found = params, {"features": list(nominal) + ["log2 procs"]
                                 + (["log requested"] if requested else []), **params,
                                 error: err}
            else:
                log("evaluating Li's templates and estimators")
                found = select_li(training, attrs), {}
            searched[name] = found, time.perf_counter() - started
        (found, config), seconds = searched[name]
        return found, dict(config), seconds

    def make(name):
        started = time.perf_counter()
        if "+" in name:
            parts = [make(part) for part in name.split("+")]
            predictor = Mean([p for p, _ in parts], name=name)
            return predictor, {"parts": {p.name: c for p, c in parts},
                               "training_seconds": time.perf_counter() - started}
        if name == "requested":
            predictor, config, seconds = Requested(), {}, 0.0
        elif name == "last2":
            predictor, config, seconds = LastTwo(), {}, 0.0
        elif name.startswith("smith"):
            templates, config, seconds = search(name)
            predictor = Categories(templates, name=name)
        elif name.startswith("ibl"):
            params, config, seconds = search(name)
            nominal = "".join(a for a in attrs if a in NOMINAL)
            predictor = InstanceBased(nominal, use_requested=requested, **params, name=name)
        else:
            (best, selected, errors), config, seconds = search("li")
            mode = name[3:]
            pairs = [best] if mode == "temp-est" else selected
            predictor = Li(pairs, mode, name=name)
            config = {"pairs": [pair_label(p) for p in pairs],
                      "training_mae_seconds": errors[best] if mode == "temp-est"
                      else min(errors[p] for p in pairs),
                      "grid_training_mae_seconds": {pair_label(p): e
                                                    for p, e in errors.items()}}
        config["training_seconds"] = seconds + time.perf_counter() - started
        return predictor, config

    predictors, config = [], {}
    for name in names:
        predictor, config[name] = make(name)
        predictors.append(predictor)
    return predictors, config


def evaluate_runtimes(jobs, ends, names, *, train_fraction=0.3, seed=1, log=None,
                      progress=None):
    """Fit on the first ``train_fraction`` of the jobs (by submission), predict every job
    online, and measure on the rest. ``jobs`` in submission order. Returns a dict: the
    summary (JSON-able) and per-job arrays."""
    split = int(round(train_fraction * len(jobs)))
    if not 0 < split < len(jobs):
        raise ValueError(f"a training fraction of {train_fraction} leaves no training or no "
                         f"test jobs among {len(jobs)}")
    training = Training(jobs, ends, split)
    predictors, config = build(names, training, seed=seed, log=log)
    runs = np.array([j.run for j in jobs])
    test = slice(split, len(jobs))
    mean_run = float(runs[test].mean())
    summary = {"jobs": len(jobs), "train_jobs": split, "test_jobs": len(jobs) - split,
               "train_fraction": train_fraction, "mean_runtime_seconds": mean_run,
               "attributes": available(jobs), "predictors": {}}
    predictions, sources = {}, {}
    for p in predictors:
        started = time.perf_counter()
        pred, src = run_online(jobs, ends, [p], progress=progress)
        seconds = time.perf_counter() - started
        pred, src = pred[0], src[0]
        predictions[p.name], sources[p.name] = pred, src
        error = np.abs(pred[test] - runs[test])
        counts = np.bincount(src[test].astype(int), minlength=len(SOURCES))
        summary["predictors"][p.name] = {
            "mae_seconds": float(error.mean()),
            "mae_pct_of_mean": float(100 * error.mean() / mean_run) if mean_run > 0 else None,
            "median_error_seconds": float(np.median(error)),
            "jobs": int(len(error)),
            "predicted_jobs": int(counts[0]),
            "fallbacks": {SOURCES[k]: int(counts[k]) for k in range(1, len(SOURCES))
                          if counts[k]},
            "online_seconds": seconds,
            "seconds_per_prediction": seconds / len(jobs),
            **config[p.name],
        }
    return {"summary": summary, "predictions": predictions, "sources": sources, "runs": runs,
            "split": split}


def runtime_table(summary):
    """The evaluation as a Markdown table (Li et al. Table 2's columns)."""
    rows = ["| predictor | mean error [s] | mean error [% of mean run time] | predicted | "
            "fell back | online [s] |", "|---|---|---|---|---|---|"]
    for name, s in sorted(summary["predictors"].items(), key=lambda kv: kv[1]["mae_seconds"]):
        fell = sum(s["fallbacks"].values())
        rows.append(f"| {name} | {s['mae_seconds']:.0f} | {s['mae_pct_of_mean']:.1f} | "
                    f"{s['predicted_jobs']} | {fell} | {s['online_seconds']:.1f} |")
    rows.append(f"\nTest suffix: {summary['test_jobs']} jobs after {summary['train_jobs']} "
                f"training jobs; mean run time {summary['mean_runtime_seconds']:.0f} s.")
    return "\n".join(rows) + "\n"


def runtime_csv(jobs, result):
    """Per-job predictions and their sources, as CSV text."""
    names = list(result["predictions"])
    lines = ["job,submit_seconds,run_seconds,test," + ",".join(
        f"{n}_seconds,{n}_source" for n in names)]
    split = result["split"]
    for i, job in enumerate(jobs):
        cells = [str(job.id), f"{job.submit:g}", f"{job.run:g}", str(int(i >= split))]
        for n in names:
            cells += [f"{result['predictions'][n][i]:.1f}",
                      SOURCES[result["sources"][n][i]].replace(" ", "-")]
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


def test_errors(result):
    """Absolute errors over the test suffix, per predictor."""
    split, runs = result["split"], result["runs"]
    return {name: np.abs(pred[split:] - runs[split:])
            for name, pred in result["predictions"].items()}


def plot_error_cdf(errors, path, title, xlabel="absolute error [s]"):
    """The CDF of each named array of absolute errors (a log axis; below 1 s at 1 s)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..files import save_figure

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, error in errors.items():
        error = np.sort(np.asarray(error, dtype=float))
        if len(error):
            ax.plot(np.maximum(error, 1.0), np.arange(1, len(error) + 1) / len(error),
                    label=name)
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of jobs")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def fit_predictors(names, jobs, ends, *, train_fraction=0.3, seed=1, log=None, fit="error",
                   scheduler_of=None):
    """The named predictors fitted on the first ``train_fraction`` of ``jobs`` (submission
    order), each search run once for all of them, ready to run online from the start of the
    trace. Returns (predictors, config per name). ``fit``, ``scheduler_of``: see
    :func:`build`."""
    split = max(1, min(len(jobs) - 1, int(round(train_fraction * len(jobs)))))
    return build(names, Training(jobs, ends, split), seed=seed, log=log, fit=fit,
                 scheduler_of=scheduler_of)


def fit_predictor(name, jobs, ends, **kwargs):
    """One predictor, as :func:`fit_predictors`. Returns (predictor, config)."""
    predictors, config = fit_predictors([name], jobs, ends, **kwargs)
    return predictors[0], config[name]


def li_grid(summary):
    """Li et al.'s template x estimator x history-length grid (their Figure 1) from a run-time
    evaluation's summary: rows of (template, estimator, history, training MAE seconds), or
    [] if no Li predictor was fitted."""
    for config in summary["predictors"].values():
        grid = config.get("grid_training_mae_seconds")
        if grid:
            rows = []
            for label, mae in grid.items():
                template, estimator = label.rsplit(" ", 1)
                rows.append((template, estimator[:2], int(estimator[3:-1]), mae))
            return rows
    return []


def li_grid_csv(rows, mean_run_seconds):
    lines = ["template,estimator,history_jobs,training_mae_seconds,training_mae_pct_of_mean_run"]
    for template, est, n, mae in rows:
        pct = 100 * mae / mean_run_seconds if mean_run_seconds > 0 else float("nan")
        lines.append(f'"{template}",{est},{n},{mae:.1f},{pct:.2f}')
    return "\n".join(lines) + "\n"


def plot_li_grid(rows, path, title):
    """Li et al.'s Figure 1: the training error against the history length, a line per
    template, a panel per estimator (WM, LR)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..files import save_figure

    kinds = sorted({r[1] for r in rows}, reverse=True)
    fig, axes = plt.subplots(1, len(kinds), figsize=(5 * len(kinds), 4), sharey=True,
                             squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        for template in dict.fromkeys(r[0] for r in rows):
            pts = sorted((n, mae) for t, k, n, mae in rows if t == template and k == kind)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", label=template)
        ax.set_xlabel(f"{kind}(n): history length n [jobs]")
        ax.set_title(f"{kind} estimator")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("mean absolute error on the training prefix [s]")
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)

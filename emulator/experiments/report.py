"""Experiment results: slowdown statistics, the Markdown table and the Figure-3 bar chart.

Slowdown of a job is ``100 * (seconds / dedicated seconds - 1)``, against the same
application on the same slot's dedicated network (every link at full capacity). Means carry
90% Student-t confidence intervals; method differences use paired-t intervals over the slots
both methods ran (England and Weissman §4 compares policies the same way). Tables and plots
show an interval only from ``MIN_RUNS_FOR_INTERVAL`` runs on: from two runs a 90% interval
spans 6.3 standard errors either side (Student's t with one degree of freedom), so a cell of
fewer runs shows its runs' values instead.
"""

import math

from scipy import stats

from ..files import save_figure

CONFIDENCE = 0.90
REFERENCES = ("oracle",)
MIN_RUNS_FOR_INTERVAL = 3


def t_interval(values, confidence=CONFIDENCE):
    """Mean and its two-sided Student-t confidence interval; ``(mean, None, None)`` for
    fewer than two values.

    >>> [round(x, 3) for x in t_interval([1.0, 2.0, 3.0])]
    [2.0, 0.314, 3.686]
    """
    values = [float(v) for v in values]
    if not values:
        return None, None, None
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, None, None
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    half = stats.t.ppf(0.5 + confidence / 2, len(values) - 1) * sd / math.sqrt(len(values))
    return mean, float(mean - half), float(mean + half)


def paired_difference(rows, benchmark, first, second):
    """Paired-t interval of ``first - second`` slowdown over the slots both ran."""
    by_slot = {}
    for r in rows:
        if r["benchmark"] == benchmark and r["method"] in (first, second) \
                and r.get("slowdown_pct") not in (None, ""):
            by_slot.setdefault(r["slot"], {})[r["method"]] = float(r["slowdown_pct"])
    diffs = [d[first] - d[second] for d in by_slot.values() if len(d) == 2]
    mean, lo, hi = t_interval(diffs)
    return {"mean": mean, "ci90": [lo, hi], "n": len(diffs)}


def _values(rows, benchmark, method, key):
    return [float(r[key]) for r in rows
            if r["benchmark"] == benchmark and r["method"] == method
            and r.get(key) not in (None, "")]


def summarize(rows, config, *, complete, events=()):
    """The summary document (``summary.json``) of an experiment's job rows."""
    benchmarks = [b for b in config["benchmarks"] if any(r["benchmark"] == b for r in rows)]
    methods = list(config["methods"])
    shown = methods + [m for m in REFERENCES if any(r["method"] == m for r in rows)]
    slowdown, ci, counts, runs = {}, {}, {}, {}
    for b in benchmarks:
        slowdown[b], ci[b], counts[b], runs[b] = {}, {}, {}, {}
        for m in shown:
            values = _values(rows, b, m, "slowdown_pct")
            mean, lo, hi = t_interval(values)
            slowdown[b][m], ci[b][m], counts[b][m] = mean, [lo, hi], len(values)
            runs[b][m] = values
    average = {m: _mean([slowdown[b][m] for b in benchmarks]) for m in shown}
    summary = {
        "complete": complete,
        "config": config,
        "jobs": len(rows),
        "slowdown_pct": {b: {m: slowdown[b][m] for m in methods} for b in benchmarks},
        "slowdown_ci90_pct": {b: {m: ci[b][m] for m in methods} for b in benchmarks},
        "jobs_per_method": counts,
        "slowdown_runs_pct": runs,
        "oracle_slowdown_pct": {b: slowdown[b].get("oracle") for b in benchmarks},
        "oracle_slowdown_ci90_pct": {b: ci[b].get("oracle") for b in benchmarks},
        "average_slowdown_pct": average,
        "overhead_pct": {b: _mean(_values(rows, b, "pattern", "overhead_pct"))
                         for b in benchmarks},
        "overhead_seconds": {b: _mean(_values(rows, b, "pattern", "overhead_seconds"))
                             for b in benchmarks},
        "app_full_seconds": {b: _mean(_values(rows, b, "dedicated", "app_full_seconds"))
                             for b in benchmarks},
        "predicted_seconds": {b: {m: _mean(_values(rows, b, m, "predicted_seconds"))
                                  for m in shown} for b in benchmarks},
        "failures": list(events),
    }
    if "oracle" in shown:
        summary["gap_to_oracle_pct"] = {b: {m: _diff(slowdown[b][m], slowdown[b]["oracle"])
                                            for m in methods} for b in benchmarks}
    pairs = [(a, c) for a, c in (("pattern", "random"), ("pattern", "all-all"),
                                 ("all-all", "random")) if a in methods and c in methods]
    summary["paired_difference_pct"] = {
        f"{a} - {c}": {b: paired_difference(rows, b, a, c) for b in benchmarks}
        for a, c in pairs}
    # (a run stopped within a slot may have no job of a method yet)
    if average.get("pattern") is not None and average.get("random"):
        summary["pattern_to_random"] = average["pattern"] / average["random"]
    if average.get("pattern") is not None and average.get("all-all"):
        summary["pattern_to_all_all"] = average["pattern"] / average["all-all"]
    return summary


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _diff(a, b):
    return None if a is None or b is None else a - b


def _fmt(value, ci=None, runs=None):
    """A mean, ± half its interval from ``MIN_RUNS_FOR_INTERVAL`` runs on, or with the
    values of fewer runs in brackets."""
    if value is None:
        return "-"
    if runs is not None and 1 < len(runs) < MIN_RUNS_FOR_INTERVAL:
        return f"{value:.1f} ({', '.join(f'{v:.1f}' for v in runs)})"
    if ci and ci[0] is not None:
        return f"{value:.1f} ± {(ci[1] - ci[0]) / 2:.1f}"
    return f"{value:.1f}"


def _cell(summary, benchmark, method):
    """The formatted slowdown of one benchmark and method (or the oracle)."""
    if method == "oracle":
        value, ci = summary["oracle_slowdown_pct"][benchmark], \
            summary["oracle_slowdown_ci90_pct"][benchmark]
    else:
        value, ci = summary["slowdown_pct"][benchmark][method], \
            summary["slowdown_ci90_pct"][benchmark][method]
    runs = summary.get("slowdown_runs_pct", {}).get(benchmark, {}).get(method)
    return _fmt(value, ci, runs)


def markdown_table(summary):
    """Mean slowdown % per benchmark and method (± half the 90% interval, or the values of
    fewer than ``MIN_RUNS_FOR_INTERVAL`` runs), the oracle, and the pattern framework's
    decision overhead."""
    methods = list(summary["config"]["methods"])
    oracle = any(v is not None for v in summary["oracle_slowdown_pct"].values())
    head = ["benchmark"] + [f"{m} [%]" for m in methods] + (["oracle [%]"] if oracle else [])
    if "pattern" in methods:
        head.append("overhead [% of app]")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for b, by_method in summary["slowdown_pct"].items():
        cells = [b] + [_cell(summary, b, m) for m in methods]
        if oracle:
            cells.append(_cell(summary, b, "oracle"))
        if "pattern" in methods:
            cells.append(_fmt(summary["overhead_pct"][b]))
        lines.append("| " + " | ".join(cells) + " |")
    avg = summary["average_slowdown_pct"]
    cells = ["**average**"] + [_fmt(avg.get(m)) for m in methods]
    if oracle:
        cells.append(_fmt(avg.get("oracle")))
    if "pattern" in methods:
        cells.append(_fmt(_mean(list(summary["overhead_pct"].values()))))
    lines.append("| " + " | ".join(cells) + " |")
    counts = [n for by in summary["jobs_per_method"].values() for n in by.values()]
    notes = []
    if counts and min(counts) < MIN_RUNS_FOR_INTERVAL:
        lines += ["", f"A cell of fewer than {MIN_RUNS_FOR_INTERVAL} runs shows their values in "
                  "brackets: from 2 runs a 90% interval is 6.3 standard errors wide either side. "
                  "Runs differ because each faces the network of its own slot."]
    elif counts:
        lines += ["", "± half the 90% Student-t interval over the runs (slots)."]
    if "pattern_to_random" in summary:
        notes.append(f"pattern/random mean slowdown: {summary['pattern_to_random']:.3f}")
    if "pattern_to_all_all" in summary:
        notes.append(f"pattern/all-all: {summary['pattern_to_all_all']:.3f}")
    if notes:
        lines += ["", "; ".join(notes)
                  + " (Goteti and Subhlok: 20.2/40 = 0.505, 20.2/27.6 = 0.732)"]
    return "\n".join(lines) + "\n"


COLOURS = {"random": "#b0b0b0", "all-all": "#6a9fd4", "pattern": "#d4793a", "oracle": "#5a9e5a"}


def plot_figure3(summary, path):
    """Grouped bars: mean slowdown % per benchmark and method, 90% intervals as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(summary["config"]["methods"])
    if any(v is not None for v in summary["oracle_slowdown_pct"].values()):
        methods.append("oracle")
    benchmarks = list(summary["slowdown_pct"])
    groups = benchmarks + ["average"]
    width = 0.8 / max(1, len(methods))
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(groups), 4.2))
    for k, m in enumerate(methods):
        heights, errors, with_ci, few_runs = [], [[], []], [], []
        for b in groups:
            if b == "average":
                value, ci = summary["average_slowdown_pct"].get(m), None
            elif m == "oracle":
                value = summary["oracle_slowdown_pct"][b]
                ci = summary["oracle_slowdown_ci90_pct"][b]
            else:
                value, ci = summary["slowdown_pct"][b][m], summary["slowdown_ci90_pct"][b][m]
            heights.append(value or 0.0)
            runs = [] if b == "average" else \
                summary.get("slowdown_runs_pct", {}).get(b, {}).get(m, [])
            have = value is not None and ci and ci[0] is not None \
                and len(runs) >= MIN_RUNS_FOR_INTERVAL
            with_ci.append(bool(have))
            few_runs.append(runs if 1 < len(runs) < MIN_RUNS_FOR_INTERVAL else [])
            if have:
                errors[0].append(value - ci[0])
                errors[1].append(ci[1] - value)
        xs = [i + (k - (len(methods) - 1) / 2) * width for i in range(len(groups))]
        ax.bar(xs, heights, width, label=m, color=COLOURS.get(m), edgecolor="black",
               linewidth=0.4)
        # no interval is drawn where there is none (the average over benchmarks)
        ax.errorbar([x for x, w in zip(xs, with_ci) if w],
                    [h for h, w in zip(heights, with_ci) if w], yerr=errors, fmt="none",
                    ecolor="black", capsize=2, linewidth=1)
        # fewer runs than an interval needs: the runs themselves
        dots = [(x, v) for x, vs in zip(xs, few_runs) for v in vs]
        if dots:
            ax.plot([x for x, _ in dots], [v for _, v in dots], "o", color="black",
                    markersize=2.5)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g.upper() if g != "average" else "average" for g in groups])
    ax.set_ylabel("slowdown against a dedicated network [%]")
    ax.axhline(0, color="black", linewidth=0.6)
    config = summary["config"]
    what = "bars: 90% confidence intervals" if config["repeats"] >= MIN_RUNS_FOR_INTERVAL \
        else "dots: the runs (too few for an interval)"
    ax.set_title(f"{config['nprocs']}-node jobs, {config['repeats']} repeat(s); {what}",
                 fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        save_figure(fig, path)
    finally:
        plt.close(fig)

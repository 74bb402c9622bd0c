"""What a trace looks like: the figures of England and Weissman §III (arrivals by hour of the
day, the size distribution, run times against the fitted Weibull) and the numbers a scheduling
study starts from (machine size, offered utilisation)."""

import numpy as np

from ..files import save_figure
from .model import hour_of_week, size_runtime_correlation
from .runtimes import fit_runtimes

QUANTILES = (10, 25, 50, 75, 90, 95, 99)


def offered_utilization(trace, machine_procs=None):
    """Processor-seconds the jobs ask for over what the machine offers between the first
    and the last submission."""
    if len(trace) < 2:
        return 0.0
    submit = trace.column("submit")
    span = submit.max() - submit.min()
    procs = machine_procs or trace.max_procs
    work = float(np.sum(trace.procs * trace.column("run")))
    return work / (procs * span) if span > 0 else float("inf")


def summarize(trace, *, components=4):
    """A JSON-able summary of ``trace``, with its run times fitted (one Weibull and a
    mixture of ``components``)."""
    submit, run = trace.column("submit"), trace.column("run")
    span_days = float(submit.max() - submit.min()) / 86400 if len(trace) else 0.0
    hours = hour_of_week(trace) % 24
    per_hour = np.bincount(hours, minlength=24) / max(span_days, 1e-9)
    sizes, counts = np.unique(trace.procs, return_counts=True)
    single = fit_runtimes(run, components=1)
    mixture = fit_runtimes(run, components=components)
    q = np.array(QUANTILES) / 100
    return {
        "path": trace.path,
        "jobs": len(trace),
        "dropped_jobs": trace.dropped,
        "machine_procs": trace.max_procs,
        "span_days": span_days,
        "offered_utilization": offered_utilization(trace),
        "arrivals_per_day_by_hour": [float(v) for v in per_hour],
        "sizes": {int(s): int(c) for s, c in zip(sizes, counts)},
        "power_of_two_fraction": float(np.mean([(int(p) & (int(p) - 1)) == 0
                                                for p in trace.procs])) if len(trace) else 0.0,
        "runtime_quantiles_seconds": {str(p): float(v) for p, v in
                                      zip(QUANTILES, np.percentile(run, QUANTILES))},
        "mean_runtime_seconds": float(run.mean()),
        "weibull": {"shape": single.shapes[0], "scale": single.scales[0],
                    "quantiles_seconds": {str(p): float(v) for p, v in
                                          zip(QUANTILES, single.quantile(q))}},
        "weibull_mixture": {**mixture.to_json(),
                            "quantiles_seconds": {str(p): float(v) for p, v in
                                                  zip(QUANTILES, mixture.quantile(q))}},
        "size_runtime_correlation": size_runtime_correlation(trace),
        "users": int(len(np.unique(trace.column("user")))) if trace.has("user") else 0,
        "groups": int(len(np.unique(trace.column("group")))) if trace.has("group") else 0,
        "executables": int(len(np.unique(trace.column("executable"))))
        if trace.has("executable") else 0,
        "has_requested_times": trace.has("requested_time"),
        "has_wait_times": trace.has("wait"),
    }


def summary_lines(summary):
    s = summary
    lines = [f"{s['path']}: {s['jobs']} jobs ({s['dropped_jobs']} dropped) over "
             f"{s['span_days']:.1f} days on {s['machine_procs']} processors",
             f"offered utilisation {100 * s['offered_utilization']:.1f}%; "
             f"{s['users']} users, {s['groups']} groups, {s['executables']} executables; "
             f"requested times: {'yes' if s['has_requested_times'] else 'no'}",
             "arrivals per day by hour of day: "
             + " ".join(f"{v:.1f}" for v in s["arrivals_per_day_by_hour"]),
             f"sizes (power of two: {100 * s['power_of_two_fraction']:.1f}% of jobs): "
             + ", ".join(f"{k}: {v}" for k, v in s["sizes"].items()),
             f"size-run time correlation (normal scores): {s['size_runtime_correlation']:.2f}",
             f"{'quantile':<10}{'trace [s]':>12}{'Weibull [s]':>14}{'mixture [s]':>14}"]
    for p in QUANTILES:
        key = str(p)
        lines.append(f"{p:>7}%  {s['runtime_quantiles_seconds'][key]:>12.0f}"
                     f"{s['weibull']['quantiles_seconds'][key]:>14.0f}"
                     f"{s['weibull_mixture']['quantiles_seconds'][key]:>14.0f}")
    lines.append(f"Weibull: shape {s['weibull']['shape']:.3f}, "
                 f"scale {s['weibull']['scale']:.0f} s; "
                 f"mixture of {len(s['weibull_mixture']['weights'])}")
    return lines


def plot_workload(trace, summary, path):
    """Four panels: arrivals by hour of day, size distribution, run-time histogram with the
    fitted densities, run-time CDF against both fits."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy import stats

    from .runtimes import RunTimes

    run = trace.column("run")
    single = RunTimes([1.0], [summary["weibull"]["shape"]], [summary["weibull"]["scale"]],
                      0.0)
    m = summary["weibull_mixture"]
    mixture = RunTimes(m["weights"], m["shapes"], m["scales"], m["zero_fraction"])
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    ax = axes[0, 0]
    ax.bar(range(24), summary["arrivals_per_day_by_hour"], color="tab:blue")
    ax.set_xlabel("hour of day (local time)")
    ax.set_ylabel("arrivals per day")
    ax.set_title("job arrivals by time of day")
    ax = axes[0, 1]
    sizes = list(summary["sizes"])
    counts = np.array(list(summary["sizes"].values()), dtype=float)
    ax.bar(range(len(sizes)), counts / counts.sum(), color="tab:green")
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([str(s) for s in sizes], rotation=90 if len(sizes) > 16 else 0,
                       fontsize=8 if len(sizes) > 16 else 10)
    ax.set_xlabel("processors")
    ax.set_ylabel("probability")
    ax.set_title("job sizes")
    ax = axes[1, 0]
    top = np.percentile(run, 99)
    bins = np.arange(0, top + 500, 500)
    ax.hist(run[run <= top], bins=bins, density=True, color="0.7", label="trace")
    x = np.linspace(1, top, 400)
    ax.plot(x, stats.weibull_min.pdf(x, single.shapes[0], scale=single.scales[0]),
            label="Weibull (MLE)")
    mix_pdf = (1 - mixture.zero_fraction) * sum(
        w * stats.weibull_min.pdf(x, c, scale=s)
        for w, c, s in zip(mixture.weights, mixture.shapes, mixture.scales))
    ax.plot(x, mix_pdf, label=f"mixture of {len(mixture.weights)} Weibulls")
    ax.set_yscale("log")
    ax.set_xlabel("run time [s] (500 s bins, to the 99th percentile)")
    ax.set_ylabel("density")
    ax.set_title("run times against the fits")
    ax.legend(fontsize=8)
    ax = axes[1, 1]
    xs = np.sort(run[run > 0])
    ax.plot(xs, np.arange(1, len(xs) + 1) / len(xs), color="0.3", label="trace")
    grid = np.logspace(0, np.log10(max(xs.max(), 10)), 300)
    ax.plot(grid, single.cdf(grid), label="Weibull (MLE)")
    ax.plot(grid, (mixture.cdf(grid) - mixture.zero_fraction) / (1 - mixture.zero_fraction),
            label="mixture")
    ax.set_xscale("log")
    ax.set_xlabel("run time [s]")
    ax.set_ylabel("fraction of jobs (run time > 0)")
    ax.set_title("run-time distribution")
    ax.legend(fontsize=8)
    fig.suptitle(f"{summary['path']}: {summary['jobs']} jobs, {summary['machine_procs']} "
                 f"processors, offered utilisation {100 * summary['offered_utilization']:.0f}%")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)

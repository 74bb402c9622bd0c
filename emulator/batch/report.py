"""Outputs of batch runs: the per-job CSV, turnaround deviations per estimator (Hanzich et al.
Fig. 3 and Table 1), Markdown tables, the deviation plot and a Gantt chart of the nodes."""

import math

import numpy as np

from .cisne import ESTIMATORS, deviation_pct

# every turnaround prediction recorded: Algorithm 1's estimators and the forward simulation
# of the predictions' technique 1 (``forward``)
COLUMNS = ESTIMATORS + ("forward",)


def columns(estimators):
    """The predictions a run records: its Algorithm 1 estimators and the forward simulation."""
    return tuple(estimators) + ("forward",)

CSV_FIELDS = ("policy", "loaded_fraction", "repeat", "job", "benchmark", "class", "tasks",
              "kind", "arrival_seconds", "submit", "start", "end", "turnaround_seconds",
              "isolated_seconds", "status", "restarts", "nodes", "estimation_ms",
              "predicted_start", "run_start", "run_seconds", "compute_seconds", "cpu_seconds")


def turnaround(rec):
    if rec.get("end") is None or rec.get("status") != "done":
        return None
    return rec["end"] - rec["submit"]


def deviations(records, estimator):
    """Signed turnaround deviations (%) of ``estimator`` over the finished jobs."""
    out = []
    for rec in records:
        actual = turnaround(rec)
        end = rec["predicted_end"].get(estimator)
        if actual is None or end is None:
            continue
        out.append(deviation_pct(end - rec["submit"], actual))
    return [d for d in out if not math.isnan(d)]


def cell_summary(records, estimators=COLUMNS):
    """Per estimator: mean |deviation|, mean signed deviation, share pessimistic, jobs."""
    out = {}
    for e in estimators:
        d = np.asarray(deviations(records, e))
        out[e] = {"mean_abs_pct": float(np.mean(np.abs(d))) if d.size else None,
                  "mean_pct": float(np.mean(d)) if d.size else None,
                  "pessimistic_share": float(np.mean(d >= 0)) if d.size else None,
                  "jobs": int(d.size)}
    return out


def jobs_csv(rows, estimators=COLUMNS):
    """``rows``: (policy, loaded fraction, repeat, record)."""
    def f(v):
        if v is None:
            return ""
        return f"{v:.10g}" if isinstance(v, float) else str(v)

    head = list(CSV_FIELDS) + [f"predicted_turnaround_{e}" for e in estimators]
    lines = [",".join(head)]
    for policy, frac, rep, rec in rows:
        values = [policy, frac, rep, rec["job"], rec["benchmark"], rec["class"], rec["tasks"],
                  rec["kind"], rec["arrival_seconds"], rec["submit"], rec["start"], rec["end"],
                  turnaround(rec), rec["isolated_seconds"], rec["status"], rec["restarts"],
                  rec["nodes"], rec["estimation_ms"], rec.get("predicted_start"),
                  rec.get("run_start"), rec.get("run_seconds"), rec.get("compute_seconds"),
                  rec.get("cpu_seconds")]
        for e in estimators:
            end = rec["predicted_end"].get(e)
            values.append(None if end is None else end - rec["submit"])
        lines.append(",".join(f(v) for v in values))
    return "\n".join(lines) + "\n"


_INT_FIELDS = ("repeat", "job", "tasks", "restarts")
_TEXT_FIELDS = ("policy", "benchmark", "class", "kind", "status", "nodes")


def read_jobs_csv(path, estimators=COLUMNS):
    """The (policy, loaded fraction, repeat, record) rows of a ``jobs.csv`` that
    :func:`jobs_csv` wrote: the inverse, to resume an experiment from its outputs."""
    import csv

    from ..errors import InputFileError

    wanted = list(CSV_FIELDS) + [f"predicted_turnaround_{e}" for e in estimators]
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [k for k in wanted if k not in (reader.fieldnames or [])]
            if missing:
                raise InputFileError(path, f"column {missing[0]!r}", "missing (a jobs.csv of "
                                     "a batch run with these estimators is needed)")
            rows = []
            for line, raw in enumerate(reader, start=2):
                rec = {}
                for k in wanted:
                    v = raw[k]
                    try:
                        if k in _TEXT_FIELDS:
                            rec[k] = v
                        elif v == "":
                            rec[k] = None
                        else:
                            rec[k] = int(v) if k in _INT_FIELDS else float(v)
                    except ValueError:
                        raise InputFileError(path, f"line {line}, field {k!r}",
                                             f"{v!r} is not a number") from None
                if rec["repeat"] is None or rec["loaded_fraction"] is None \
                        or rec["job"] is None or rec["submit"] is None:
                    raise InputFileError(path, f"line {line}", "policy, loaded_fraction, "
                                         "repeat, job and submit are needed")
                rec["predicted_end"] = {}
                for e in estimators:
                    t = rec.pop(f"predicted_turnaround_{e}")
                    rec["predicted_end"][e] = None if t is None else rec["submit"] + t
                policy, frac, repeat = (rec.pop("policy"), rec.pop("loaded_fraction"),
                                        rec.pop("repeat"))
                rec.pop("turnaround_seconds")
                rows.append((policy, frac, repeat, rec))
    except OSError as e:
        raise InputFileError(path, "", f"cannot be read ({e.strerror})") from None
    return rows


def table_md(summary, estimators=None):
    """Table 1's form: rows are local loads, columns policy x estimator (mean |deviation|
    %, with the mean signed deviation beside it). ``estimators``: default, the summary's."""
    estimators = estimators or summary.get("estimators", COLUMNS)
    dev = summary["deviation_pct"]
    signed = summary["signed_deviation_pct"]
    half = summary.get("deviation_interval_pct", {})
    out = []
    for policy, levels in dev.items():
        out += [f"### {policy}", "",
                "| loaded nodes | " + " | ".join(estimators) + " |",
                "|---|" + "---|" * len(estimators)]
        for frac, cells in levels.items():
            row = []
            for e in estimators:
                v, s = cells.get(e), signed[policy][frac].get(e)
                h = half.get(policy, {}).get(frac, {}).get(e)
                row.append("-" if v is None else f"{v:.1f}{'' if h is None else f' ± {h:.1f}'}"
                           f" ({s:+.1f})")
            out.append(f"| {float(frac) * 100:.0f}% | " + " | ".join(row) + " |")
        out.append("")
    out.append("Mean absolute turnaround deviation, % (± half the 90% t interval of the "
               "repeats' own means, from 3 repeats on; mean signed deviation in brackets: "
               "positive is pessimistic).")
    return "\n".join(out) + "\n"


def deviation_plot(summary, path, estimators=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..files import save_figure

    estimators = estimators or summary.get("estimators", COLUMNS)
    dev = summary["signed_deviation_pct"]
    cells = [(p, f) for p, levels in dev.items() for f in levels]
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(cells)), 4))
    width = 0.8 / len(estimators)
    for k, e in enumerate(estimators):
        values = [dev[p][f].get(e) for p, f in cells]
        ax.bar(np.arange(len(cells)) + k * width, [np.nan if v is None else v for v in values],
               width, label=e)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(np.arange(len(cells)) + 0.4 - width / 2)
    ax.set_xticklabels([f"{p}\n{float(f) * 100:.0f}% loaded" for p, f in cells], fontsize=8)
    ax.set_ylabel("turnaround deviation [%]\n(> 0: pessimistic)")
    ax.legend(fontsize=7, ncol=4)
    ax.set_title("Turnaround estimates against actual turnaround (Hanzich et al. Fig. 3)")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def gantt_plot(records, nodes, loaded, path, *, title=""):
    """Nodes over time: one bar per task of every parallel job, loaded nodes shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..files import save_figure

    fig, ax = plt.subplots(figsize=(10, max(3, 0.35 * len(nodes))))
    row = {n: i for i, n in enumerate(nodes)}
    end_all = max([r["end"] or 0 for r in records] + [1])
    for n in loaded:
        ax.axhspan(row[n] - 0.5, row[n] + 0.5, color="0.9", zorder=0)
    cmap = plt.get_cmap("tab20")
    stack = {}  # node -> list of (start, end) to offset overlapping tasks
    for rec in records:
        if rec["start"] is None or not rec["nodes"]:
            continue
        end = rec["end"] if rec["end"] is not None else end_all
        for n in rec["nodes"].split():
            level = sum(1 for s, e in stack.get(n, []) if s < end and rec["start"] < e)
            stack.setdefault(n, []).append((rec["start"], end))
            ax.barh(row[n] - 0.4 + 0.2 * (level % 4), end - rec["start"], 0.2,
                    left=rec["start"], color=cmap(rec["job"] % 20), edgecolor="k", lw=0.3)
    ax.set_yticks(range(len(nodes)))
    ax.set_yticklabels([f"{n}{' (local user)' if n in loaded else ''}" for n in nodes],
                       fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the run started")
    ax.set_title(title or "parallel jobs on the nodes (one colour per job)")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)

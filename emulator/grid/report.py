"""The grid experiment's outputs: a CSV row per replication and configuration, Markdown
tables of mean slowdown with the paired-t intervals, and the slowdown plot (England and
Weissman Fig. 5-7, 9)."""

import numpy as np


def replications_csv(grid, results):
    lines = ["replication,target,sharing_pct,site,local_slowdown,remote_slowdown,local_jobs,"
             "remote_jobs,mean_wait_seconds"]

    def cell(v):
        return "" if v is None else f"{v:.6g}"

    for r, res in enumerate(results):
        for (target, pct), m in sorted(res.items()):
            lines.append(f"{r},{target},{pct},ALL,{cell(m['local'])},{cell(m['remote'])},,"
                         f"{m['moved_jobs']},{cell(m['mean_wait_seconds'])}")
            for name, s in m["sites"].items():
                lines.append(f"{r},{target},{pct},{name},{cell(s['local'])},"
                             f"{cell(s['remote'])},{s['local_jobs']},{s['remote_jobs']},"
                             f"{cell(s['mean_wait_seconds'])}")
    return "\n".join(lines) + "\n"


def tables(summary):
    def f(v):
        return "-" if v is None else f"{v:.2f}"

    rows = [f"{summary['grid']}: {summary['replications']} replications, "
            + (f"{summary['span_days']:g} days of arrivals per site" if summary.get("span_days")
               else f"{summary.get('jobs_per_site', '?')} jobs per site"), ""]
    for target, levels in summary["slowdown"].items():
        rows += [f"### {target}", "", "| sharing | local slowdown | remote slowdown | all | "
                 "mean wait [s] | jobs moved |", "|---|---|---|---|---|---|"]
        for pct, s in levels.items():
            rows.append(f"| {pct}% | {f(s['local'])} | {f(s['remote'])} | {f(s['all'])} | "
                        f"{f(summary['mean_wait_seconds'][target][pct])} | "
                        f"{f(summary['moved_jobs'][target][pct])} |")
        rows.append("")
    kinds = _shared_types(summary)
    if kinds:
        rows += ["### by machine type (jobs of every site of the type)", ""]
        for target, levels in summary["types"].items():
            rows += [f"{target}:", "", "| type | sharing | local slowdown | remote slowdown | "
                     "mean wait [s] | local jobs | remote jobs |", "|---|---|---|---|---|---|---|"]
            for kind in kinds:
                for pct, by_type in levels.items():
                    s = by_type[kind]
                    rows.append(f"| {kind} | {pct}% | {f(s['local'])} | {f(s['remote'])} | "
                                f"{f(s['mean_wait_seconds'])} | {f(s['local_jobs'])} | "
                                f"{f(s['remote_jobs'])} |")
            rows.append("")
    if summary["intervals"]:
        pct = round(100 * summary["confidence"])
        rows += [f"{pct}% paired-t intervals", "", "| difference | mean | interval | "
                 "excludes 0 |", "|---|---|---|---|"]
        for name, i in summary["intervals"].items():
            rows.append(f"| {name} | {i['mean']:.2f} | [{i['low']:.2f}, {i['high']:.2f}] | "
                        f"{'yes' if i['excludes_0'] else 'no'} |")
        rows.append("")
    return "\n".join(rows) + "\n"


def _shared_types(summary):
    """{machine type: its sites} where some sites share a type, else {} (a type per site
    says nothing the per-site figures do not)."""
    kinds = summary.get("type_sites", {})
    return kinds if len(kinds) < sum(len(v) for v in kinds.values()) else {}


def plot_types(summary, folder):
    """England and Weissman Figs. 6-7: one plot per machine type (where sites share a type),
    local and remote slowdown against the sharing level. Returns the files written."""
    import os

    kinds = _shared_types(summary)
    paths = []
    for kind in kinds:
        levels = {t: {p: by_type[kind] for p, by_type in per.items()}
                  for t, per in summary["types"].items()}
        name = "".join(c if c.isalnum() or c in "-_" else "_" for c in kind)
        path = os.path.join(folder, f"slowdown-{name}.png")
        _plot(levels, path, f"{kind} machines ({', '.join(kinds[kind])}), "
                            f"{summary['replications']} replications")
        paths.append(path)
    return paths


def plot_slowdown(summary, path):
    _plot(summary["slowdown"], path, f"{summary['grid']} ({summary['replications']} "
                                     "replications)")


def _plot(slowdown, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..files import save_figure

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for target, levels in slowdown.items():
        pcts = [int(p) for p in levels]
        for kind, style in (("local", "-o"), ("remote", "--s")):
            ys = [np.nan if levels[str(p)][kind] is None else levels[str(p)][kind]
                  for p in pcts]
            ax.plot(pcts, ys, style, label=f"{target}, {kind} jobs")
    ax.set_xlabel("load sharing [% of jobs migratable]")
    ax.set_ylabel("mean slowdown")
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)

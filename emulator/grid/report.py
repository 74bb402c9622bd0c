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
            f"{summary.get('jobs_per_site', '?')} jobs per site", ""]
    for target, levels in summary["slowdown"].items():
        rows += [f"### {target}", "", "| sharing | local slowdown | remote slowdown | all | "
                 "mean wait [s] | jobs moved |", "|---|---|---|---|---|---|"]
        for pct, s in levels.items():
            rows.append(f"| {pct}% | {f(s['local'])} | {f(s['remote'])} | {f(s['all'])} | "
                        f"{f(summary['mean_wait_seconds'][target][pct])} | "
                        f"{f(summary['moved_jobs'][target][pct])} |")
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


def plot_slowdown(summary, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..files import save_figure

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for target, levels in summary["slowdown"].items():
        pcts = [int(p) for p in levels]
        for kind, style in (("local", "-o"), ("remote", "--s")):
            ys = [np.nan if levels[str(p)][kind] is None else levels[str(p)][kind]
                  for p in pcts]
            ax.plot(pcts, ys, style, label=f"{target}, {kind} jobs")
    ax.set_xlabel("load sharing [% of jobs migratable]")
    ax.set_ylabel("mean slowdown")
    ax.set_title(f"{summary['grid']} ({summary['replications']} replications)", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)

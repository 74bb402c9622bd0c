"""A Gantt chart of processors over time for a window of a schedule.

Processors are interchangeable on a trace, so the chart gives each job concrete processors
after the fact: in time order (ends before starts at the same instant), a starting job takes
the lowest-numbered free processors, as a first-fit allocator would (a job of no length takes
them for an instant, before the other starts of that instant). Any schedule that never uses
more processors than exist can be drawn this way.
"""

import heapq

from ..files import save_figure


def assign_processors(jobs, processors):
    """{job: [(first processor, count), ...]}: contiguous runs of processor numbers."""
    events = []  # at one instant: ends, then jobs of no length, then starts
    for j in jobs:
        if j.start is None:
            continue
        if j.end > j.start:
            events.append((j.end, 0, j.index, j))
            events.append((j.start, 2, j.index, j))
        else:
            events.append((j.start, 1, j.index, j))
    events.sort(key=lambda e: e[:3])
    free = list(range(processors))  # a heap of free processor numbers
    held, runs = {}, {}
    for _, kind, _, job in events:
        if kind == 0:
            for p in held.pop(job):
                heapq.heappush(free, p)
            continue
        if job.procs > len(free):
            raise ValueError(f"the schedule uses more than {processors} processors at "
                             f"{job.start:g} s (job {job.id})")
        mine = sorted(heapq.heappop(free) for _ in range(job.procs))
        if job.end > job.start:
            held[job] = mine
        else:
            for p in mine:
                heapq.heappush(free, p)
        spans, first, count = [], mine[0], 1
        for p in mine[1:]:
            if p == first + count:
                count += 1
            else:
                spans.append((first, count))
                first, count = p, 1
        spans.append((first, count))
        runs[job] = spans
    return runs


def plot_gantt(jobs, processors, path, *, start_seconds=None, end_seconds=None, title=None):
    """Draw the jobs running in ``[start_seconds, end_seconds]`` (default: the first day of
    the schedule), one colour per job, queued work shaded over time below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    done = [j for j in jobs if j.start is not None]
    if not done:
        raise ValueError("no job started: nothing to draw")
    t0 = min(j.start for j in done) if start_seconds is None else start_seconds
    t1 = t0 + 86400 if end_seconds is None else end_seconds
    if t1 <= t0:
        raise ValueError(f"the window is empty: {t0:g} to {t1:g} s")
    runs = assign_processors(done, processors)
    fig, (ax, axq) = plt.subplots(2, 1, figsize=(11, 6.5), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 1]})
    cmap = plt.get_cmap("tab20")
    hours = 3600.0
    for job in done:
        if job.end < t0 or job.start > t1 or job.end == job.start:
            continue
        left = (max(job.start, t0) - t0) / hours
        width = (min(job.end, t1) - max(job.start, t0)) / hours
        color = cmap(job.index % 20)
        for first, count in runs[job]:
            ax.broken_barh([(left, width)], (first, count), facecolors=color,
                           edgecolors="black", linewidth=0.2)
    ax.set_ylim(0, processors)
    ax.set_ylabel("processor")
    ax.set_title(title or f"schedule, {len(done)} jobs, {processors} processors")
    grid = np.linspace(t0, t1, 600)
    queued = np.zeros_like(grid)
    for job in done:
        if job.start > t0 and job.submit < t1:
            queued += job.procs * ((grid >= job.submit) & (grid < job.start))
    axq.fill_between((grid - t0) / hours, queued, step="post", color="tab:red", alpha=0.6)
    axq.set_ylabel("queued procs")
    axq.set_xlabel(f"hours after {t0:.0f} s (day {t0 / 86400:.1f} of the trace)")
    axq.set_xlim(0, (t1 - t0) / hours)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)

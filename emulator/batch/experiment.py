"""Batch runs on the emulated cluster, one after another in one ``mpiexec`` job: every
policy at every local load, repeated (Hanzich et al. Fig. 3 and Table 1).

Before the runs: every pair of nodes is measured for the status graph and the applications
are characterized in isolation (cached); before the runs of each local load, every pair is
measured again (the ``pattern`` policy's input and the ``net-net`` estimator's). Each run
then starts its local load, plays its jobs, and stops the load. The outputs are rewritten
atomically after every job that ends, so an interrupted experiment leaves valid partial
results (``"complete": false``). Given ``resume``, the runs an earlier invocation completed in
the same folder with the same settings are kept and only the others are played: an
interrupted experiment goes on, and repeats, policies or loads may be added to a finished one.
"""

import json
import math
import os
import time
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from ..files import write_json_atomic, write_text_atomic
from ..network.sharing import message_costs
from ..prediction.estimators import mean_interval
from . import report
from .characterize import characterize
from .jobs import generate_jobs
from .live import BatchRun, BatchSettings, comm_model_function
from .programs import check_model

MIN_RUNS_FOR_INTERVAL = 3  # repeats of a cell before it gets an interval


def parse_policy(text):
    """``normal+fcfs`` -> (nsp, jsp); ``basic`` -> ("basic", "fcfs")."""
    from ..errors import UserError
    from .placement import NSP

    parts = text.strip().lower().split("+")
    nsp = parts[0]
    jsp = parts[1] if len(parts) > 1 else "fcfs"
    if nsp not in NSP or len(parts) > 2 or jsp not in ("fcfs", "easy"):
        raise UserError(f"unknown policy {text!r}: give NSP+JSP with NSP one of "
                        f"{', '.join(NSP)} and JSP fcfs or easy (basic alone is Normal+FCFS "
                        "with an MPL of 1)")
    if nsp == "basic" and jsp != "fcfs":
        raise UserError("basic is Normal+FCFS with an MPL of 1; it takes no JSP")
    return nsp, jsp


def policy_label(nsp, jsp):
    return "basic" if nsp == "basic" else f"{nsp}+{jsp}"


def summarize(rows, runs, estimation_ms, *, complete, settings_json, characterization,
              estimation_cpu_ms=(), columns=report.COLUMNS):
    """The summary JSON from (policy, fraction, repeat, record) rows; ``estimation_ms`` and
    ``estimation_cpu_ms``: the wall and CPU time of every Algorithm 1 run this invocation
    made; ``columns``: the predictions recorded (:func:`.report.columns`). Each record's
    ``estimation_ms`` (its arrival's Algorithm 1 runs) gives the time per estimator per
    arrival over every run in ``rows``."""
    cells = {}
    for policy, frac, _, rec in rows:
        cells.setdefault(policy, {}).setdefault(f"{frac:g}", []).append(rec)
    dev, signed, pess, counts = {}, {}, {}, {}
    for policy, levels in cells.items():
        for frac, recs in levels.items():
            s = report.cell_summary(recs, columns)
            dev.setdefault(policy, {})[frac] = {e: v["mean_abs_pct"] for e, v in s.items()}
            signed.setdefault(policy, {})[frac] = {e: v["mean_pct"] for e, v in s.items()}
            pess.setdefault(policy, {})[frac] = {e: v["pessimistic_share"]
                                                 for e, v in s.items()}
            counts.setdefault(policy, {})[frac] = max(v["jobs"] for v in s.values())
    # each repeat's own mean |deviation| per cell: their mean and 90% t interval
    by_repeat = {}
    for policy, frac, repeat, rec in rows:
        by_repeat.setdefault((policy, f"{frac:g}"), {}).setdefault(repeat, []).append(rec)
    interval = {}
    for (policy, frac), reps in by_repeat.items():
        if len(reps) < MIN_RUNS_FOR_INTERVAL:
            continue
        means = [report.cell_summary(recs, columns) for recs in reps.values()]
        for e in columns:
            values = [m[e]["mean_abs_pct"] for m in means if m[e]["mean_abs_pct"] is not None]
            got = mean_interval(values) if len(values) >= MIN_RUNS_FOR_INTERVAL else None
            interval.setdefault(policy, {}).setdefault(frac, {})[e] = \
                None if got is None else got[1]
    start_errors = {}
    for policy, frac, _, rec in rows:
        if rec.get("predicted_start") is not None and rec["start"] is not None \
                and rec["status"] == "done":
            start_errors.setdefault(policy, {}).setdefault(f"{frac:g}", []).append(
                abs(rec["predicted_start"] - rec["start"]))
    per_arrival = [r["estimation_ms"] for _, _, _, r in rows if r["estimation_ms"] is not None]
    timed = len(columns) - 1  # one Algorithm 1 run per arrival and column but ``forward``
    by_fraction = {}  # loaded fraction -> ms per estimator at each arrival (every run)
    for _, frac, _, r in rows:
        if r["estimation_ms"] is not None and timed:
            by_fraction.setdefault(f"{frac:g}", []).append(r["estimation_ms"] / timed)
    each = [v for values in by_fraction.values() for v in values]
    return {"deviation_pct": dev, "signed_deviation_pct": signed, "pessimistic_share": pess,
            # half the 90% t interval of the repeats' own mean |deviation| (3 repeats on)
            "deviation_interval_pct": interval,
            "jobs_compared": counts,
            "forward_start_error_seconds": {p: {f: float(np.mean(v)) for f, v in levels.items()}
                                            for p, levels in start_errors.items()},
            "estimation_ms": float(np.mean(estimation_ms)) if estimation_ms else None,
            "estimation_ms_max": float(np.max(estimation_ms)) if estimation_ms else None,
            "estimation_ms_median": float(np.median(estimation_ms)) if estimation_ms else None,
            "estimation_cpu_ms": float(np.mean(estimation_cpu_ms)) if len(estimation_cpu_ms)
            else None,
            "estimation_ms_per_arrival": float(np.mean(per_arrival)) if per_arrival else None,
            # over every run in rows (resumed ones too): one estimator's time per arrival
            "estimation_ms_per_estimator": {
                "mean": float(np.mean(each)), "median": float(np.median(each)),
                "within_1ms_share": float(np.mean([v <= 1.0 for v in each])),
                "by_loaded_fraction": {f: float(np.mean(v)) for f, v in by_fraction.items()},
            } if each else None,
            "estimators": list(columns), "complete": complete, "runs": runs,
            "settings": settings_json,
            "characterization": {"/".join(map(str, k)): v for k, v in characterization.items()}}


# settings that may differ between the invocations of one resumed experiment: they choose
# which runs exist, not how a run is played
RUN_CHOICE = ("policies", "loaded_fractions", "repeats")


def run_key(run):
    """(policy, loaded fraction, repeat): which run a summary's run entry is."""
    return run["policy"], run["loaded_fraction"], run["repeat"]


def completed_runs(out_dir, settings_json, lists, *, cpu, dilation, columns):
    """(rows, runs) of the runs completed in ``out_dir`` by an earlier invocation that this
    one would play too: same settings, CPU model and dilation, and the same jobs for each
    repeat (``lists``). A run is complete when the summary lists it; the rows of a run cut
    short are dropped. Nothing there: ([], [])."""
    from ..errors import InputFileError, UserError

    summary_path = os.path.join(out_dir, "summary.json")
    if not os.path.exists(summary_path):
        return [], []
    try:
        with open(summary_path) as f:
            old = json.load(f)
        old_settings, old_runs = old["settings"], old["runs"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputFileError(summary_path, "", "not a batch experiment's summary to "
                             f"resume ({e})") from None
    now = json.loads(json.dumps(settings_json))
    for key, value in now.items():
        if key not in RUN_CHOICE and old_settings.get(key) != value:
            raise UserError(f"{summary_path}: its {key} is {old_settings.get(key)!r} where this "
                            f"run's is {value!r}; resume with the same settings or give "
                            "another --out")
    wanted = {(policy_label(*parse_policy(p)), float(f), r) for p in now["policies"]
              for f in now["loaded_fractions"] for r in range(now["repeats"])}
    runs = []
    for run in old_runs:
        if (run.get("policy"), run.get("loaded_fraction"), run.get("repeat")) not in wanted:
            continue
        if (run.get("cpu"), run.get("dilation")) != (cpu, dilation):
            raise UserError(f"{summary_path}: its runs had --cpu {run.get('cpu')} and "
                            f"--dilation {run.get('dilation')}, this one has --cpu {cpu} and "
                            f"--dilation {dilation}; give another --out")
        runs.append(run)
    keys = {run_key(r) for r in runs}
    csv_path = os.path.join(out_dir, "jobs.csv")
    rows = [row for row in report.read_jobs_csv(csv_path, columns) if row[:3] in keys]
    for policy, frac, repeat in sorted(keys, key=str):
        got = sorted((rec for p, f, r, rec in rows if (p, f, r) == (policy, frac, repeat)),
                     key=lambda rec: rec["job"])
        jobs = sorted(lists[repeat], key=lambda j: j.id)
        same = len(got) == len(jobs) and all(
            (rec["job"], rec["benchmark"], rec["tasks"]) == (j.id, j.benchmark, j.tasks)
            and math.isclose(rec["arrival_seconds"], j.arrival_seconds, rel_tol=1e-5,
                                abs_tol=1e-6)
            for rec, j in zip(got, jobs))
        if not same:
            raise InputFileError(csv_path, f"{policy} at {frac:g} loaded, repeat {repeat}",
                                 "its jobs are not the ones this run would play; give "
                                 "another --out")
    return rows, runs


DEFAULT_LOAD = {"cpu_fraction": 0.15, "memory_fraction": 0.35, "lan_bytes_per_second": 512.0}


@dataclass(frozen=True)
class ExperimentPlan:
    """What a batch experiment plays: every policy of ``policies`` (``NSP+JSP`` names) at
    every fraction of ``loaded_fractions``, ``repeats`` times. ``jobs``: a fixed job list
    (else ``job_count`` jobs generated per repeat with seed ``base.seed + repeat``, arrivals
    ``mean_gap_seconds`` apart on average). ``base``: the batch settings every run starts
    from; ``load_spec``: the local users' load; ``cache_path`` and ``network_id``: where
    and for which network characterizations are cached; ``probe_bytes``: the measurement's
    probe size.

    >>> ExperimentPlan(["normal+fcfs"], [0.25], 1).job_count
    30
    """

    policies: Sequence[str]
    loaded_fractions: Sequence[float]
    repeats: int
    jobs: Optional[Sequence[Any]] = None
    job_count: int = 30
    mean_gap_seconds: float = 15.0
    base: BatchSettings = field(default_factory=BatchSettings)
    load_spec: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_LOAD))
    cache_path: Optional[str] = None
    network_id: str = "default"
    probe_bytes: int = 256 * 1024

    def job_lists(self, nodes: Sequence[str]) -> dict:
        """{repeat: its jobs}."""
        base = self.base
        return {r: (self.jobs if self.jobs is not None else
                    generate_jobs(self.job_count, seed=base.seed + r,
                                  mean_gap_seconds=self.mean_gap_seconds,
                                  npb_class=base.npb_class, max_tasks=len(nodes)))
                for r in range(self.repeats)}

    def settings_json(self, nodes: Sequence[str]) -> dict:
        """The settings a summary records (and a resumed run must share)."""
        base = self.base
        return {"policies": self.policies, "loaded_fractions": self.loaded_fractions,
                "repeats": self.repeats, "mpl": base.mpl, "class": base.npb_class,
                "iterations": base.iterations, "load": self.load_spec,
                "mean_gap_seconds": self.mean_gap_seconds, "nodes": nodes, "seed": base.seed,
                "estimators": list(base.estimators)}


class _Outputs:
    """The experiment's rows and runs so far, written atomically after every job; outputs
    in the order asked for (policies, then loads, then repeats), resumed or not."""

    def __init__(self, coordinator: Any, out_dir: str, plan: ExperimentPlan,
                 settings_json: dict, columns: Any) -> None:
        self.coordinator, self.out_dir = coordinator, out_dir
        self.settings_json, self.columns = settings_json, columns
        self.rows: list = []
        self.runs: list = []
        self.chars: Any = None
        self.estimation_ms: list = []
        self.estimation_cpu_ms: list = []
        self.rank = {policy_label(*parse_policy(p)): k for k, p in enumerate(plan.policies)}

    def _in_order(self, key: tuple) -> tuple:
        policy, frac, repeat = key
        return self.rank.get(policy, len(self.rank)), float(frac), repeat

    def write(self, current: Optional[list] = None, complete: bool = False) -> dict:
        """Rewrite jobs.csv and summary.json; ``current``: the run being played, [label,
        fraction, repeat, BatchRun]."""
        live = [] if current is None else [(current[0], current[1], current[2], rec)
                                           for rec in current[3].records.values()]
        live_rows = sorted(self.rows + live, key=lambda row: self._in_order(row[:3]))
        ordered_runs = sorted(self.runs, key=lambda r: self._in_order(run_key(r)))
        summary = summarize(
            live_rows, ordered_runs,
            self.estimation_ms + (current[3].estimation_ms if current else []),
            complete=complete, settings_json=self.settings_json,
            characterization=self.chars,
            estimation_cpu_ms=self.estimation_cpu_ms + (
                current[3].estimation_cpu_ms if current else []), columns=self.columns)
        write_text_atomic(os.path.join(self.out_dir, "jobs.csv"),
                          report.jobs_csv(live_rows, self.columns))
        summary["scenario"] = self.coordinator.scenario_report()
        write_json_atomic(os.path.join(self.out_dir, "summary.json"), summary)
        return summary


def _play(coordinator: Any, plan: ExperimentPlan, jobs: list, graph: Any, key: tuple,
          outputs: _Outputs, bar: Any) -> None:
    """Play one run, ``key`` = (policy, loaded fraction, repeat), into ``outputs``."""
    policy, frac, repeat = key
    nsp, jsp = parse_policy(policy)
    settings = replace(plan.base, nsp=nsp, jsp=jsp, loaded_fraction=frac,
                       seed=plan.base.seed + repeat)
    label = policy_label(nsp, jsp)
    current = [label, frac, repeat, None]
    run = BatchRun(coordinator, jobs, outputs.chars, settings, graph=graph,
                   on_change=lambda r: outputs.write(current, False),
                   progress=bar.update if bar else None,
                   program_output_dir=os.path.join(outputs.out_dir, "programs",
                                                   f"{label}-{frac:g}-{repeat}"))
    current[3] = run
    run.start_local_load(plan.load_spec)
    started = time.time()
    try:
        records = run.run()
    finally:
        run.stop_local_load()
    outputs.estimation_ms += run.estimation_ms
    outputs.estimation_cpu_ms += run.estimation_cpu_ms
    outputs.rows += [(label, frac, repeat, rec) for rec in records]
    cs = coordinator.settings
    outputs.runs.append({"policy": label, "loaded_fraction": frac, "repeat": repeat,
                         "wall_seconds": time.time() - started,
                         "loaded_nodes": run.loaded, "events": run.events,
                         "cpu": cs.cpu, "dilation": cs.dilation,
                         "down": sorted(coordinator.down),
                         "measured_local_load": run.measured_local,
                         "jobs_done": sum(r["status"] == "done" for r in records),
                         "jobs_failed": sum(r["status"] == "failed" for r in records)})
    outputs.write(None, False)
    report.gantt_plot(records, coordinator.names, run.loaded,
                      os.path.join(outputs.out_dir, f"gantt-{label}-{frac:g}-{repeat}.png"),
                      title=f"{label}, {frac * 100:.0f}% of nodes loaded, repeat {repeat}")


def run_experiment(coordinator: Any, plan: ExperimentPlan, out_dir: str, *,
                   progress: bool = True, echo: Any = print, resume: bool = False) -> dict:
    """Play ``plan``'s every (policy, loaded fraction, repeat) batch run; write the outputs
    to ``out_dir``; return the summary. ``resume``: keep the runs already complete in
    ``out_dir`` (:func:`completed_runs`); the estimation timings then cover the new runs."""
    from ..coordinator.measure import Monitor

    nodes = coordinator.up
    lists = plan.job_lists(nodes)
    if any(j.command for js in lists.values() for j in js):
        check_model(coordinator)  # before the measurements, not after them
    wanted = {j.application for js in lists.values() for j in js}
    cluster = coordinator.settings.cluster
    columns = report.columns(plan.base.estimators)
    outputs = _Outputs(coordinator, out_dir, plan, plan.settings_json(nodes), columns)
    if resume:
        outputs.rows, outputs.runs = completed_runs(
            out_dir, outputs.settings_json, lists, cpu=coordinator.settings.cpu,
            dilation=coordinator.settings.dilation, columns=columns)
        echo(f"resuming: {len(outputs.runs)} of "
             f"{len(plan.policies) * len(plan.loaded_fractions) * plan.repeats} "
             f"run(s) complete in {out_dir}")
    done = {run_key(r) for r in outputs.runs}

    def todo(frac: float, repeat: int) -> list:
        return [p for p in plan.policies
                if (policy_label(*parse_policy(p)), float(frac), repeat) not in done]

    echo("measuring every pair of nodes ...")
    monitor = Monitor(coordinator, size_bytes=plan.probe_bytes)
    graph = monitor.measure()
    echo(f"characterizing {len(wanted)} application(s) in isolation ...")
    outputs.chars = characterize(
        coordinator, nodes, wanted, iterations=plan.base.iterations, network=plan.network_id,
        cache_path=plan.cache_path,
        comm_model=comm_model_function(graph, lambda n: cluster.nodes[n]["capacity_mbps"],
                                       message_costs(cluster, coordinator.settings.dilation)))
    total = sum(len(lists[r]) * len(todo(f, r)) for r in lists for f in plan.loaded_fractions)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total, unit="job", desc="batch runs", leave=True)
    os.makedirs(out_dir, exist_ok=True)
    for repeat in range(plan.repeats):
        for frac in plan.loaded_fractions:
            if not todo(frac, repeat):
                continue
            graph = monitor.measure()  # the network these runs start on (pattern, net-net)
            for policy in todo(frac, repeat):
                _play(coordinator, plan, lists[repeat], graph, (policy, frac, repeat),
                      outputs, bar)
    if bar:
        bar.close()
    summary = outputs.write(None, True)
    write_text_atomic(os.path.join(out_dir, "table.md"), report.table_md(summary))
    report.deviation_plot(summary, os.path.join(out_dir, "deviation.png"))
    return summary

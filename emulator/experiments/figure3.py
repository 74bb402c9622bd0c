"""The Figure 3 experiment of Goteti and Subhlok §3.3-3.4: node selection methods on a
shared network.

Jobs run in *slots*. Slot ``j`` starts at scenario time ``j * spacing_seconds`` of one
stream-model timeline; the slots cycle through the benchmarks, ``repeats`` times. In a slot:

1. the coordinator measures every pair (NWS style) at the latest multiple of
   ``measure_interval_seconds``, unless it already has that measurement; the methods decide
   from the latest status graph, from the scenario time the measurement ended at, ``D``;
2. the application runs once on a dedicated network (every link at full capacity): the
   baseline of the slot's slowdowns;
3. the oracle (the least flow-model time under the true bandwidths at ``D``) and every
   method run their job, each on a scenario clock restarted at ``D``: every method faces
   the same network, and a method's own decision time (selection, skeleton trials) delays
   its application within that same timeline, as it would on a real cluster.

With ``programs`` (benchmark -> an MPI program and its arguments, built with the mpich
wheel's mpicc) that benchmark's application is the real program, unmodified, under the
interposition library on the same cluster and scenario clock (every message paced by the
model; its output kept in ``programs/``); the trials stay the benchmark's class-S skeleton.

A node that dies is marked down; the job is retried on the remaining nodes and the report
lists what happened. Results are rewritten atomically after every job (``jobs.csv``,
``summary.json``, ``table.md``) and measurement (``measurements.json``); the plot comes at
the end. A stopped run is continued with ``resume``: the slots it finished are kept as they
are, its measurements replayed, and the rest run (:mod:`.resume`).
"""

import csv
import io
import math
import os
import random
import time
from dataclasses import asdict, dataclass, field

from ..coordinator.measure import Monitor
from ..coordinator.pipeline import (
    METHODS,
    JobSpec,
    decide,
    oracle,
    predicted_seconds,
    run_skeleton,
)
from ..errors import NodeFailure, UserError
from ..files import write_json_atomic, write_text_atomic
from ..network.scenario import full_capacity_timeline, pair_bandwidth_function
from ..network.sharing import PROGRAM_MESSAGE_SECONDS, SKELETON_MESSAGE_SECONDS, message_costs
from ..selection.patterns import NAS_BENCHMARKS, allowed_nprocs
from .report import markdown_table, plot_figure3, summarize
from .resume import earlier_run
from .userjob import EmulatedCluster

DEFAULT_BENCHMARKS = ("bt", "cg", "is", "lu", "mg")
COLUMNS = ("slot", "repeat", "benchmark", "method", "scenario_start_seconds", "nodes",
           "mapping", "bottleneck_mbps", "measurement_seconds", "selection_seconds",
           "trial_seconds", "trials", "overhead_seconds", "app_seconds", "app_iterations",
           "full_iterations", "app_full_seconds", "dedicated_seconds", "slowdown_pct",
           "overhead_pct", "predicted_seconds", "oracle_predicted_seconds", "attempts", "note")


@dataclass
class ExperimentConfig:
    benchmarks: tuple = DEFAULT_BENCHMARKS
    methods: tuple = METHODS
    repeats: int = 3
    seed: int = 1
    nprocs: int = 4
    candidates: int = 3
    app_class: str = "A"
    app_iterations: int | None = 3
    trial_iterations: int | None = None
    spacing_seconds: float = 600.0
    measure_interval_seconds: float = 600.0
    probe_bytes: int = 128 * 1024
    oracle: bool = True
    max_attempts: int = 3
    time_scale: float = 10.0
    programs: dict = field(default_factory=dict)  # benchmark -> argv of a real application
    extra: dict = field(default_factory=dict)

    def validate(self, node_count):
        """Raise :class:`UserError` for a configuration that cannot run."""
        from skeletons import SKELETONS, describe

        describe()  # registers the skeletons
        if not self.benchmarks:
            raise UserError("no benchmarks given")
        for b in self.benchmarks:
            if b not in NAS_BENCHMARKS or b not in SKELETONS:
                raise UserError(f"unknown benchmark {b!r}; choose from {', '.join(NAS_BENCHMARKS)}")
            try:
                JobSpec(b, self.nprocs).pattern()
            except UserError:
                raise UserError(f"{b} cannot run on {self.nprocs} ranks: it needs "
                                f"{allowed_nprocs(b)}") from None
        if not self.methods:
            raise UserError("no methods given")
        for m in self.methods:
            if m not in METHODS:
                raise UserError(f"unknown method {m!r}; choose from {', '.join(METHODS)}")
        if len(set(self.methods)) != len(self.methods) or \
                len(set(self.benchmarks)) != len(self.benchmarks):
            raise UserError("a benchmark or method is named twice")
        if self.repeats < 1:
            raise UserError(f"--repeats must be >= 1, got {self.repeats}")
        if self.nprocs > node_count:
            raise UserError(f"jobs of {self.nprocs} nodes need a cluster of at least that many; "
                            f"it has {node_count}")
        for name in ("spacing_seconds", "measure_interval_seconds"):
            if not getattr(self, name) > 0:
                raise UserError(f"--{name.replace('_', '-')} must be > 0")
        for b, argv in self.programs.items():
            if b not in self.benchmarks:
                raise UserError(f"--program {b}=...: {b} is not among the benchmarks")
            if not argv or not os.access(argv[0], os.X_OK):
                raise UserError(f"--program {b}=...: {' '.join(argv) or 'nothing'} is not a "
                                "program that can run (give its path)")

    def slots(self):
        """(repeat, benchmark) of every slot, in run order: repeats of all benchmarks."""
        return [(r, b) for r in range(self.repeats) for b in self.benchmarks]

    def scenario_seconds(self):
        """Scenario time the experiment needs, with room for the last slot's jobs."""
        return len(self.slots()) * self.spacing_seconds + 3600.0

    def to_json(self):
        data = asdict(self)
        data["benchmarks"], data["methods"] = list(self.benchmarks), list(self.methods)
        data["programs"] = {b: list(argv) for b, argv in self.programs.items()}
        return data


class _Progress:
    """A tqdm bar over the jobs of the experiment, or plain lines when not on a terminal."""

    def __init__(self, total, echo):
        self.echo = echo
        try:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="job", dynamic_ncols=True, mininterval=0.5)
        except ImportError:  # pragma: no cover - tqdm is a dependency
            self.bar = None
        self.done, self.total = 0, total

    def step(self, label):
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(label, refresh=False)
            self.bar.update(1)
        else:
            self.echo(f"[{self.done}/{self.total}] {label}")

    def write(self, text):
        if self.bar is not None:
            self.bar.write(text)
        else:
            self.echo(text)

    def close(self):
        if self.bar is not None:
            self.bar.close()


class Experiment:
    """Runs the experiment through a coordinator and writes ``out_dir``."""

    def __init__(self, coordinator, config, out_dir, *, echo=print):
        self.coordinator, self.config, self.out_dir, self.echo = coordinator, config, out_dir, echo
        self.rows, self.events = [], []
        cluster = coordinator.settings.cluster
        self.ports = {n: float(cluster.nodes[n]["capacity_mbps"]) for n in coordinator.names}
        self.full_pair = pair_bandwidth_function(cluster, full_capacity_timeline(cluster))
        self.monitor = Monitor(coordinator, size_bytes=config.probe_bytes)
        self.measured_at = self._measure_end = None
        self.measurements = []  # {"slot", "at", "end", "seconds", "probes"} in order
        self.slots_done = set()
        self.graph = None
        self.paths = {k: os.path.join(out_dir, name) for k, name in (
            ("csv", "jobs.csv"), ("summary", "summary.json"), ("table", "table.md"),
            ("plot", "figure3.png"), ("measurements", "measurements.json"))}
        timeline = coordinator.settings.timeline
        self.identity = {"nodes": list(coordinator.names),
                         "scenario": dict(timeline.meta) if timeline is not None else None}

    # -- the loop ------------------------------------------------------------------------

    def run(self, *, resume=False):
        """Run every slot (with ``resume``, those an earlier run in the folder did not
        finish) and return the summary."""
        config = self.config
        slots = config.slots()
        if resume:
            self._take(earlier_run(self.out_dir, config.to_json(), self.identity))
            self.echo(f"resuming: {len(self.slots_done)} of {len(slots)} slot(s) complete in "
                      f"{self.out_dir}")
        per_slot = 1 + len(config.methods) + (1 if config.oracle else 0)
        self.progress = _Progress((len(slots) - len(self.slots_done)) * per_slot, self.echo)
        started = time.monotonic()
        try:
            for j, (repeat, benchmark) in enumerate(slots):
                if j not in self.slots_done:
                    self._slot(j, repeat, benchmark)  # writes the files after every job
                    self.slots_done.add(j)
                    self._write(complete=False)
        finally:
            self.progress.close()
        summary = self._write(complete=True, wall_seconds=time.monotonic() - started)
        plot_figure3(summary, self.paths["plot"])
        return summary

    def _take(self, earlier):
        """Start from what a stopped run finished: its rows, failures and measurements."""
        self.slots_done = set(earlier.slots_done)
        self.rows, self.events = list(earlier.rows), list(earlier.events)
        for m in earlier.measurements:
            self.graph = self.monitor.replay(m["probes"], m["seconds"],
                                             epoch=self.coordinator.clock(m["at"]))
            self.measurements.append(m)
            self.measured_at, self._measure_end = m["at"], m["end"]

    def _slot(self, j, repeat, benchmark):
        config, coord = self.config, self.coordinator
        spec = JobSpec(benchmark, config.nprocs, config.candidates, app_class=config.app_class,
                       app_iterations=config.app_iterations,
                       trial_iterations=config.trial_iterations)
        pattern, iterations = spec.pattern(), spec.full_iterations()
        measurement_seconds, decided_at = self._measure(j, j * config.spacing_seconds)
        base = {"slot": j, "repeat": repeat, "benchmark": benchmark,
                "scenario_start_seconds": round(decided_at, 3), "full_iterations": iterations}

        path_seconds = PROGRAM_MESSAGE_SECONDS if benchmark in config.programs \
            else SKELETON_MESSAGE_SECONDS  # the application's message path
        costs = message_costs(coord.settings.cluster, coord.settings.dilation, path_seconds)

        def full(u, v):
            return self.full_pair(u, v, 0.0)

        def truth(u, v):
            return coord.true_pair_mbps(u, v, decided_at)

        # the baseline: the best placement on the dedicated network
        def dedicated_attempt():
            mapping, _ = oracle(pattern, coord.up, full, self.ports.get, iterations, costs)
            app = self._application(j, "dedicated", mapping, spec, epoch=None,
                                    timeout=10 * coord.timeout_seconds)
            return {"mapping": mapping}, app
        ded = self._attempts(dedicated_attempt, base, "dedicated")
        if ded is None:
            return
        dedicated_seconds = ded["app_seconds"]
        ded["dedicated_seconds"] = dedicated_seconds
        ded["slowdown_pct"] = 0.0
        ded["predicted_seconds"] = predicted_seconds(pattern, _mapping(ded), full,
                                                     self.ports.get, iterations, costs)
        self._write(complete=False)
        best, best_predicted = oracle(pattern, coord.up, truth, self.ports.get, iterations,
                                      costs)
        # each run waits at most the timeout plus 20 dedicated runs (bandwidth >= 10% of it)
        timeout = coord.timeout_seconds + 20 * dedicated_seconds
        jobs = (["oracle"] if config.oracle else []) + list(config.methods)
        random.Random(config.seed * 7919 + j).shuffle(jobs)  # no method always goes first
        for method in jobs:
            def attempt(method=method):
                epoch = coord.clock(decided_at)
                if method == "oracle":
                    mapping = best
                    if any(n in coord.down for n in mapping.values()):
                        mapping, _ = oracle(pattern, coord.up, truth, self.ports.get,
                                            iterations, costs)
                    info = {"mapping": mapping}
                else:
                    graph = self.graph.subgraph(coord.up).copy()
                    info = decide(coord, method, graph, spec, epoch=epoch,
                                  seed=config.seed * 1_000_003 + j, timeout=timeout)
                app = self._application(j, method, info["mapping"], spec, epoch=epoch,
                                        timeout=timeout)
                return info, app

            row = self._attempts(attempt, base, method,
                                 measurement_seconds=measurement_seconds if method in (
                                     "pattern", "all-all") else 0.0)
            if row is None:
                continue
            row["dedicated_seconds"] = dedicated_seconds
            row["slowdown_pct"] = 100.0 * (row["app_seconds"] / dedicated_seconds - 1.0)
            row["predicted_seconds"] = predicted_seconds(pattern, _mapping(row), truth,
                                                         self.ports.get, iterations, costs)
            row["oracle_predicted_seconds"] = best_predicted
            self._write(complete=False)  # a stop keeps every job that finished

    def _application(self, j, method, mapping, spec, *, epoch, timeout):
        """The slot's application on ``mapping``: the benchmark's skeleton (its app class), or its
        real program under the interposition library; ``{"seconds", "iterations"}``. With
        ``epoch`` None, on the dedicated network."""
        coord = self.coordinator
        argv = self.config.programs.get(spec.benchmark)
        if argv is None:
            return run_skeleton(coord, mapping, spec.benchmark, spec.app_class,
                                iterations=spec.app_iterations, dedicated=epoch is None,
                                epoch=epoch, timeout=timeout)
        settings = coord.settings
        timeline = full_capacity_timeline(settings.cluster) if epoch is None \
            else settings.timeline
        emulated = EmulatedCluster(settings.cluster, timeline,
                                   time.time() if epoch is None else epoch,
                                   time_scale=settings.time_scale, dilation=settings.dilation)
        folder = os.path.join(self.out_dir, "programs")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"slot{j}-{method}.out"), "w") as output:
            run, = emulated.run([([mapping[r] for r in sorted(mapping)], argv)],
                                timeout_seconds=timeout, stdout=output)
        if run.status != 0 or run.seconds is None:
            raise UserError(f"slot {j}, {method}: {' '.join(argv)} failed with status "
                            f"{run.status}: {'; '.join(run.errors) or 'see ' + output.name}")
        return {"seconds": run.seconds, "iterations": spec.full_iterations()}

    def _attempts(self, attempt, base, method, *, measurement_seconds=0.0):
        """Run ``attempt()`` until it succeeds, retrying on the nodes still up after a node
        failure; returns the job's row (also appended to the results), or None."""
        config, coord = self.config, self.coordinator
        label = f"{base['benchmark']} #{base['repeat'] + 1} {method}"
        notes = []
        for n in range(1, config.max_attempts + 1):
            try:
                if len(coord.up) < config.nprocs:
                    raise UserError(f"only {len(coord.up)} nodes are up "
                                    f"({', '.join(coord.up)}); the jobs need {config.nprocs}")
                info, app = attempt()
            except NodeFailure as e:
                message = (f"slot {base['slot']} {label}: {e}; node(s) "
                           f"{', '.join(sorted(coord.down)) or '?'} marked down")
                notes.append(str(e))
                self.events.append({"slot": base["slot"], "benchmark": base["benchmark"],
                                    "method": method, "attempt": n, "error": str(e),
                                    "down": sorted(coord.down)})
                self.progress.write(message + ("; retrying on the remaining nodes"
                                               if n < config.max_attempts else "; giving up"))
                continue
            row = dict(base)
            mapping = info["mapping"]
            overhead = measurement_seconds + info.get("selection_seconds", 0.0) \
                + info.get("trials_total_seconds", 0.0)
            full_seconds = app["seconds"] * base["full_iterations"] / max(1, app["iterations"])
            row.update({
                "method": method,
                "nodes": " ".join(sorted(mapping.values(), key=coord.names.index)),
                "mapping": " ".join(mapping[r] for r in sorted(mapping)),
                "bottleneck_mbps": info.get("bottleneck_mbps"),
                "measurement_seconds": measurement_seconds,
                "selection_seconds": info.get("selection_seconds", 0.0),
                "trial_seconds": info.get("trials_total_seconds", 0.0),
                "trials": ";".join(f"{s:.4f}" for s in info.get("trial_seconds", [])),
                "overhead_seconds": overhead,
                "app_seconds": app["seconds"], "app_iterations": app["iterations"],
                "app_full_seconds": full_seconds,
                "overhead_pct": 100.0 * overhead / full_seconds if full_seconds > 0 else None,
                "attempts": n, "note": " | ".join(notes)})
            self.rows.append(row)
            self.progress.step(label)
            return row
        self.progress.step(label + " (failed)")
        return None

    def _measure(self, j, slot_start):
        """Measure at the latest multiple of the interval, unless done already. Returns the
        wall seconds spent (0 when reused by a later slot) and the scenario time the
        decisions of slot ``j`` start at."""
        interval = self.config.measure_interval_seconds
        at = math.floor(slot_start / interval + 1e-9) * interval
        if self.measured_at == at:
            last = self.measurements[-1]  # slot j's own, when a stop came after it
            return (last["seconds"] if last["slot"] == j else 0.0,
                    max(slot_start, self._measure_end))
        for _ in range(self.config.max_attempts):
            self.monitor.nodes = list(self.coordinator.up)
            try:
                self.graph = self.monitor.measure(epoch=self.coordinator.clock(at))
                break
            except NodeFailure as e:
                self.events.append({"slot": j, "method": "measurement", "error": str(e),
                                    "down": sorted(self.coordinator.down)})
                self.progress.write(f"measurement at {at:g} s: {e}; measuring the rest again")
        else:
            raise UserError("measurement kept failing; see the failures above")
        self.measured_at = at
        self._measure_end = at + self.monitor.seconds * self.coordinator.settings.time_scale
        self.measurements.append({"slot": j, "at": at, "end": self._measure_end,
                                  "seconds": self.monitor.seconds,
                                  "probes": [list(p) for p in self.monitor.probes]})
        write_json_atomic(self.paths["measurements"], self.measurements)
        return self.monitor.seconds, max(slot_start, self._measure_end)

    # -- output --------------------------------------------------------------------------

    def _write(self, *, complete, wall_seconds=None):
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for row in self.rows:
            writer.writerow({k: _cell(row.get(k)) for k in COLUMNS})
        write_text_atomic(self.paths["csv"], buf.getvalue())
        summary = summarize(self.rows, self.config.to_json(), complete=complete,
                            events=self.events)
        summary["files"] = {k: os.path.basename(v) for k, v in self.paths.items()}
        summary["scenario"] = self.coordinator.scenario_report()
        summary["identity"] = self.identity
        summary["slots_done"] = sorted(self.slots_done)
        if wall_seconds is not None:
            summary["wall_seconds"] = wall_seconds
        write_json_atomic(self.paths["summary"], summary)
        write_text_atomic(self.paths["table"], markdown_table(summary))
        return summary


def _mapping(row):
    return dict(enumerate(row["mapping"].split()))


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # read back exactly by a resumed run
    return value

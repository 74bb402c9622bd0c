"""The coordinator as the batch scheduler of a non-dedicated emulated cluster (Hanzich et al.).

Rank 0 runs the scheduler engine (:class:`~emulator.scheduling.Scheduler`, the same policy
code as in trace simulation) on the wall clock. Jobs arrive at their arrival times, queue,
start where the node-selection policy (:mod:`.placement`) puts them, and run for real: the
job's skeleton on its nodes, through the shaped network, in a thread of each node rank
beside the other jobs there, their compute phases sharing the node's CPU with each other
and with the local user (:mod:`emulator.coordinator.cpushare`); a job with a command runs
that real program instead, its messages in the same model (:mod:`.programs`). At every
arrival the coordinator asks the nodes for the CPU time of the running jobs and runs
Algorithm 1 once per estimator (:mod:`.cisne`), recording the arriving job's predicted
turnaround, and the predictions' start-time simulation (``forward``: the queue run forward
with isolated times, the start plus the isolated time as turnaround).

A node that dies: the jobs on it fail, are requeued (or, with ``requeue=False``, marked
failed), the node is marked down and takes no more tasks, and the run goes on.
"""

import functools
import gc
import math
import os
import random
import time
from dataclasses import dataclass, field

from ..errors import NodeFailure
from ..network.sharing import message_costs, pattern_seconds
from ..prediction.forward import forward_snapshot, run_forward
from ..scheduling.job import Job
from ..scheduling.scheduler import Scheduler
from ..selection.patterns import builtin_pattern, uniform_pattern
from .cisne import ESTIMATORS, estimate_ends
from .placement import Placement
from .programs import ProgramJob, check_model

POLL_SECONDS = 0.02
FORWARD = "forward"  # the start-time prediction's turnaround: predicted start + isolated time
JOB_TIMEOUT_FACTOR = 20.0  # a job may take this many times its isolated time (plus timeout)


@dataclass
class BatchSettings:
    jsp: str = "fcfs"
    nsp: str = "normal"
    order: str = None  # a queue order (emulator.scheduling.orders) in place of the JSP's FCFS
    mpl: int = 4
    loaded_fraction: float = 0.25
    npb_class: str = "A"
    iterations: dict = field(default_factory=dict)  # benchmark -> iteration cap
    requeue: bool = True
    seed: int = 1
    estimators: tuple = ESTIMATORS


def loaded_nodes(names, fraction, seed):
    """Which nodes carry a local user: ``fraction x N`` of them rounded (at least one if
    ``fraction`` > 0), chosen by ``seed``."""
    count = min(len(names), math.floor(fraction * len(names) + 0.5))
    if fraction > 0:
        count = max(count, 1)
    return sorted(random.Random(seed).sample(list(names), count), key=list(names).index)


@functools.lru_cache(maxsize=None)
def job_pattern(benchmark, ranks, npb_class):
    """A benchmark's communication pattern on ``ranks`` ranks, built once per process (it is
    part of an application's characterization: MG's on 8 ranks takes 12 ms to build). Read
    only. A real program (no class), whose pattern is not known, talks to all alike."""
    if not npb_class:
        return uniform_pattern(ranks)
    return builtin_pattern(benchmark, ranks, npb_class=npb_class)


def comm_model_function(graph, capacity_of, costs=None):
    """``comm_model(benchmark, npb_class, nodes)``: the flow model's communication seconds
    per iteration of the benchmark's pattern with rank i on ``nodes[i]``, under the status
    graph ``graph`` (a run's, fixed while it lasts: each answer is kept, as ``net-net`` asks
    again at every simulated start), each message on its critical path charged ``costs``
    (:func:`emulator.network.sharing.message_costs`)."""
    def pair(u, v):
        return graph[u][v]["bandwidth_mbps"] if graph.has_edge(u, v) else \
            min(capacity_of(u), capacity_of(v))

    answers = {}

    def model(benchmark, npb_class, nodes):
        key = (benchmark, npb_class, tuple(nodes))
        if key not in answers:
            answers[key] = pattern_seconds(job_pattern(benchmark, len(nodes), npb_class),
                                           dict(enumerate(nodes)), pair, port_mbps=capacity_of,
                                           **(costs or {}))
        return answers[key]

    return model


def comm_factor_function(graph, capacity_of, costs=None):
    """``comm_factor_of(info, nodes)`` for the ``net-net`` estimator: the flow model's
    communication time for the job's pattern on ``nodes`` under the status graph, over the
    same for the nodes it was characterized on under the graph of then (1 if unknown)."""
    if graph is None:
        return None
    model = comm_model_function(graph, capacity_of, costs)

    def factor(info, nodes):
        then = info.get("comm_model_seconds")
        if not then:
            return 1.0
        return model(info["benchmark"], info["npb_class"], nodes) / then

    return factor


class BatchRun:
    """One batch run on a coordinator. Call :meth:`run`; :attr:`records` holds one dict per
    job (see :mod:`.report`)."""

    def __init__(self, coordinator, jobs, characterization, settings, *, graph=None,
                 on_change=None, progress=None, program_output_dir=None):
        self.c = coordinator
        self.jobs = sorted(jobs, key=lambda j: (j.arrival_seconds, j.id))
        self.chars = characterization
        self.s = settings
        self.on_change = on_change or (lambda run: None)
        self.progress = progress
        names = coordinator.up
        self.loaded = loaded_nodes(names, settings.loaded_fraction, settings.seed)
        cluster = coordinator.settings.cluster
        self.capacity_of = lambda n: cluster.nodes[n]["capacity_mbps"]
        costs = message_costs(cluster, coordinator.settings.dilation)
        self.comm_factor_of = comm_factor_function(graph, self.capacity_of, costs)
        if graph is not None:  # the characterized applications' patterns, before any arrival
            for benchmark, npb_class, tasks in characterization:
                job_pattern(benchmark, tasks, npb_class)
        mpl = 1 if settings.nsp == "basic" else settings.mpl

        def pattern_of(info):
            return job_pattern(info["benchmark"], info["tasks"], info["npb_class"])

        self.placement = Placement(settings.nsp, names, mpl=mpl, seed=settings.seed,
                                   graph=graph, pattern_of=pattern_of,
                                   memory_mb={n: cluster.nodes[n]["memory_mb"] for n in names})
        if settings.nsp == "predicted":
            self.placement.predictor = self._predicted_end
        jsp = "fcfs" if settings.nsp == "basic" else settings.jsp
        self.scheduler = Scheduler(len(names) * mpl, order=settings.order or "fcfs",
                                   backfill="easy" if jsp == "easy" else "none",
                                   nodes=self.placement)
        if any(j.command for j in self.jobs):
            check_model(coordinator)
        self.program_output_dir = program_output_dir  # job-ID.out: a program's stdout
        self.records = {}
        self.handles = {}  # job -> coordinator handle
        self.programs = {}  # job -> its ProgramJob (a real program's)
        self.events = []  # what happened (failures), for the summary
        self.estimation_ms = []  # per Algorithm 1 run: wall time
        self.estimation_cpu_ms = []  # and the CPU time of the coordinator's thread
        self.decision_ms = []  # per prediction that chose a placement (--nsp predicted)
        self._progress_at = None  # (now, progress of the running jobs) for those predictions
        self.t0 = None
        self.measured_local = {}

    # -- bookkeeping ----------------------------------------------------------------------

    def now(self):
        """Emulated seconds since the run began."""
        return self.c.emulated_seconds(time.time() - self.t0)

    def _info(self, bj):
        ch = self.chars[bj.application]
        return {"benchmark": bj.benchmark, "npb_class": bj.npb_class, "tasks": bj.tasks,
                "kind": bj.kind, "exe_seconds": ch["exe_seconds"],
                "cpu_seconds": ch["cpu_seconds"],
                "cpu_fraction": min(ch["cpu_seconds"] / ch["exe_seconds"], 1.0),
                "memory_mb": bj.task_memory_mb, "nodes": bj.nodes,
                "comm_model_seconds": ch.get("comm_model_seconds")}

    def _record(self, job, bj):
        self.records[bj.id] = {
            "job": bj.id, "benchmark": bj.benchmark, "class": bj.npb_class, "tasks": bj.tasks,
            "kind": bj.kind, "arrival_seconds": bj.arrival_seconds, "submit": job.submit,
            "start": None, "end": None, "nodes": "", "status": "queued", "restarts": 0,
            "isolated_seconds": job.info["exe_seconds"], "predicted_end": {},
            "estimation_ms": None}

    # -- the loop -------------------------------------------------------------------------

    def start_local_load(self, spec):
        ranks = [self.c.rank_of(n) for n in self.loaded]
        if ranks:
            self.c.broadcast({"op": "load", "spec": spec}, ranks)
        for n in self.loaded:
            state = self.placement.state[n]
            state.local_cpu = spec["cpu_fraction"]
            state.local_memory_mb = spec.get("memory_fraction", 0.0) * state.memory_mb

    def stop_local_load(self):
        ranks = [self.c.rank_of(n) for n in self.loaded if n not in self.c.down]
        if ranks:
            replies = self.c.broadcast({"op": "report"}, ranks)
            self.measured_local = {n: r["load"] for n, r in replies.items() if r.get("load")}
            self.c.broadcast({"op": "unload"}, ranks)

    def _progress_of_running(self):
        """ExeTime_cur and CPUtime_cur (mean over tasks) of every running job; a job the
        scheduler has just started in this pass, not yet on its nodes, has none (0, 0)."""
        now = self.now()
        progress = {job.id: (now - job.start, (now - job.start) * job.info["cpu_fraction"])
                    for job in self.programs}  # a program's CPU is not the node's to tell
        running = [j for j in self.scheduler.running if "handle" in j.info]
        if not running:
            return progress
        nodes = sorted({n for j in running for n in j.nodes if n not in self.c.down},
                       key=self.c.names.index)
        replies = self.c.broadcast({"op": "report"}, [self.c.rank_of(n) for n in nodes])
        now = self.now()
        for job in running:  # CPU-seconds of emulated time, as the nodes keep them
            used = [replies[n]["jobs"].get(job.info["handle"], 0.0)
                    for n in job.nodes if n in replies]
            progress[job.id] = (now - job.start, sum(used) / len(used) if used else 0.0)
        return progress

    def _estimate(self, job):
        progress = self._progress_of_running()
        now = self.now()
        rec = self.records[job.id]
        rec["estimation_ms"] = 0.0
        for estimator in self.s.estimators:
            t, cpu = time.perf_counter(), time.thread_time()
            ends = estimate_ends(self.scheduler, self.placement, now, progress, estimator,
                                 comm_factor_of=self.comm_factor_of)
            ms = (time.perf_counter() - t) * 1000
            self.estimation_ms.append(ms)
            self.estimation_cpu_ms.append((time.thread_time() - cpu) * 1000)
            rec["estimation_ms"] += ms
            rec["predicted_end"][estimator] = ends.get(job.id)
        start = self._forward_start(job, now)
        rec["predicted_start"] = start
        rec["predicted_end"][FORWARD] = None if start is None else \
            start + job.info["exe_seconds"]

    def _predicted_end(self, job, nodes):
        """``--nsp predicted``'s criterion for starting ``job`` on ``nodes`` now: the sum of
        the predicted ends of every job in the system (running and queued, ``job`` started
        there first), by Algorithm 1 with net-net (the best estimator in Hanzich et al.'s
        experiment as run here) or the run's first estimator. Time sharing costs the jobs
        already on those nodes as much as the new one, so all of them count."""
        now = self.now()
        if self._progress_at is None or self._progress_at[0] != now:
            self._progress_at = (now, self._progress_of_running())
        estimators = self.s.estimators
        estimator = "net-net" if "net-net" in estimators or not estimators else estimators[0]
        t = time.perf_counter()
        ends = estimate_ends(self.scheduler, self.placement, now, self._progress_at[1],
                             estimator, comm_factor_of=self.comm_factor_of, start=(job, nodes))
        self.decision_ms.append((time.perf_counter() - t) * 1000)
        if job.id not in ends:
            return math.inf
        everyone = {j.id for j in self.scheduler.running} | \
            {j.id for j in self.scheduler.waiting()} | {job.id}
        return sum(ends.get(j, math.inf) for j in everyone)

    def _forward_start(self, job, now):
        """The predictions' technique 1 (Smith §3.2): the scheduler copied and run
        forward with every job at its characterized (isolated) time, no time sharing
        slowdown; the job's predicted start."""
        sim, mapping = forward_snapshot(self.scheduler, now,
                                        lambda j, elapsed: j.info["exe_seconds"])
        self.placement.copy_onto(sim, mapping)
        target = mapping[job]
        return run_forward(sim, now, [target])[target]

    def _start(self, job):
        bj = job.info["spec"]
        if self.comm_factor_of is not None:
            job.info["comm_factor"] = self.comm_factor_of(job.info, job.nodes)
        if bj.command:
            self._start_program(job, bj)
            return
        handle = self.c.submit(job.nodes, "skeleton", name=bj.benchmark, npb_class=bj.npb_class,
                               iterations=self.s.iterations.get(bj.benchmark), threaded=True)
        job.info["handle"] = handle["job"]
        handle["deadline"] = time.monotonic() + JOB_TIMEOUT_FACTOR * job.info["exe_seconds"] \
            * self.c.settings.dilation + self.c.timeout_seconds
        self.handles[job] = handle
        rec = self.records[job.id]
        rec.update(start=job.start, nodes=" ".join(job.nodes), status="running")

    def _start_program(self, job, bj):
        output = None
        if self.program_output_dir:
            os.makedirs(self.program_output_dir, exist_ok=True)
            output = os.path.join(self.program_output_dir, f"job-{bj.id}.out")
        program = ProgramJob(self.c, job.nodes, bj.command, output)
        program.start()
        self.programs[job] = program
        # as a skeleton's: a program that computes for ever without MPI is ended
        job.info["deadline"] = time.monotonic() + JOB_TIMEOUT_FACTOR * job.info["exe_seconds"] \
            * self.c.settings.dilation + self.c.timeout_seconds
        self.records[job.id].update(start=job.start, nodes=" ".join(job.nodes),
                                    status="running")

    def _poll_programs(self):
        """Programs that ended since the last poll: done (exit status 0) or failed (not
        run again: a program that fails fails alike); one past its deadline is ended."""
        late = [job for job, program in self.programs.items()
                if program.is_alive() and time.monotonic() > job.info["deadline"]]
        for job in late:
            self.programs[job].stop()
        ended = [job for job, program in self.programs.items() if not program.is_alive()]
        if not ended:
            return False
        now = self.now()
        for job in ended:
            program = self.programs.pop(job)
            self.scheduler.finish(job, now)
            run, rec = program.run_result, self.records[job.id]
            if run is not None and run.status == 0 and job not in late:
                rec.update(end=now, status="done", run_seconds=run.seconds)
                if self.progress:
                    self.progress(1)
                continue
            why = "the job outlived its deadline" if job in late else \
                str(program.error) if run is None else \
                f"exit status {run.status}" + "".join(f"; {e}" for e in run.errors)
            rec.update(end=now, status="failed")
            self.events.append({"time": now, "job": job.id, "error": why})
        return True

    def _fail(self, job, error):
        """A job's node failed: requeue it (a fresh copy) or mark it failed."""
        self.handles.pop(job, None)
        self.scheduler.finish(job, self.now())
        rec = self.records[job.id]
        self.events.append({"time": self.now(), "job": job.id, "error": str(error)})
        for n in self.c.down:
            if n in self.placement.state:
                self.placement.mark_down(n)
                self.scheduler.total -= self.placement.mpl
                self.scheduler.free -= self.placement.mpl
        if self.s.requeue and self.scheduler.total >= job.procs:
            again = job.fresh()
            again.submit = job.submit
            again.info = dict(job.info)
            again.restarts = job.restarts + 1
            rec.update(status="requeued", restarts=again.restarts, start=None, nodes="")
            self.scheduler.submit(again, self.now())
        else:
            rec.update(status="failed", end=self.now())

    def _poll(self):
        changed = self._poll_programs()
        now = None
        for job, handle in list(self.handles.items()):
            try:
                replies = self.c.poll(handle)
                if replies is None and time.monotonic() > handle["deadline"]:
                    raise NodeFailure(",".join(job.nodes), "the job outlived its deadline",
                                      nodes=[])
            except NodeFailure as e:
                self._fail(job, e)
                changed = True
                continue
            if replies is None:
                continue
            del self.handles[job]
            if now is None:  # the ends seen in one poll are one instant
                now = self.now()
            self.scheduler.finish(job, now)
            results = [r["result"] for r in replies.values()]
            self.records[job.id].update(
                end=now, status="done", run_seconds=max(r["seconds"] for r in results),
                # when its skeleton's timed part began, emulated seconds into the run
                run_start=self.c.emulated_seconds(min(r["started_at"] for r in results)
                                                  - self.t0),
                compute_seconds=sum(r["phases"].get("compute", 0.0) for r in results)
                / len(results),
                cpu_seconds=sum(r.get("cpu_seconds", 0.0) for r in replies.values())
                / len(replies))
            changed = True
            if self.progress:
                self.progress(1)
        return changed

    def run(self):
        """Run every job to its end; returns the records in job order.

        What the coordinator holds before the first arrival (its modules, the status graph,
        the characterizations) is frozen out of the garbage collector's sight while the run
        lasts: a full collection would walk it (40 ms here) in the middle of an arrival's
        estimates."""
        gc.collect()
        gc.freeze()
        try:
            return self._run()
        finally:
            gc.unfreeze()
            for program in self.programs.values():  # stopped: they go, and their files
                program.stop()

    def _run(self):
        self.t0 = time.time()
        pending = list(self.jobs)
        while pending or self.scheduler.running or self.scheduler.waiting():
            # ends first, then arrivals, then the scheduler: the events in the order of the
            # times they are recorded with, so a replay of the records decides alike
            changed = self._poll()
            now = self.now()
            arrived = []
            while pending and pending[0].arrival_seconds <= now:
                bj = pending.pop(0)
                info = self._info(bj)
                job = Job(bj.id, now, bj.tasks, estimate=info["exe_seconds"])
                job.info = {**info, "spec": bj}
                self._record(job, bj)
                self.scheduler.submit(job, now)
                arrived.append(job)
            if arrived or changed:
                for job in self.scheduler.schedule(self.now()):
                    self._start(job)
                for job in arrived:
                    self._estimate(job)
                self.on_change(self)
            if not pending and not self.scheduler.running and self.scheduler.waiting():
                stuck = self.scheduler.waiting()
                for job in stuck:
                    self.records[job.id].update(status="failed", end=self.now())
                    self.events.append({"time": self.now(), "job": job.id,
                                        "error": "no nodes left that can run it"})
                break
            self.c.idle(POLL_SECONDS)  # a node's reply (a job's end) ends it early
        self.on_change(self)
        return [self.records[k] for k in sorted(self.records)]


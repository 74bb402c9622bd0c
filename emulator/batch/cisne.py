"""Turnaround estimation by on-the-fly simulation (Hanzich et al. §3, Algorithm 1, Eq. 1-9).

A job's characterization (Hanzich et al. §2), from one run in isolation: ``exe_seconds``
(ExeTime_tot), ``cpu_seconds`` (CPUtime_tot, per task) and their ratio CPU(J). While it
runs the coordinator knows ExeTime_cur and CPUtime_cur. The node state is a
:class:`~.placement.Placement`'s: per node the CPU share of its local user (CPU_local) and
the CPU(J) of every parallel task on it.

RemainTime estimators (Alg. 1:4):

``prop``  Eq. 1: ExeTime_cur x (CPUtime_tot - CPUtime_cur) / CPUtime_cur. Before any CPU
          has been used Eq. 1 is 0/0; the job's isolated time stands in.
``mpl``   Eq. 4: RemainTime_isol (Eq. 2) x MPL_max (Eq. 3).
``cpu``   Eq. 5: RemainTime_isol x CPU(J) / CPU_feas (Eq. 6, with CPU_max of Eq. 7).

CPUtime estimators (Alg. 1:7): ``mpl`` Eq. 8 and ``cpu`` Eq. 9. A combination is named
``REMAIN-CPUTIME`` (``mpl-mpl`` and ``cpu-cpu`` are Hanzich et al. Table 1's MPL and CPU).

``net-net`` (beyond Hanzich et al.) splits the isolated run into CPU time and the rest
(communication), stretches the CPU part by the node's CPU as the fluid model shares it (the
same max-min solver as the emulator's CPUs and links, :mod:`emulator.network.sharing`, over
average demands: the local user bounded at CPU_local, each task at its CPU(J); a task's pace
is its rate over its CPU(J), and the job goes at the pace of its slowest node) and the
communication part by ``comm_factor``: the flow model's time for the job's pattern on its
nodes under the status graph over the same at full capacity (1 when no graph is known).
"""

import math

from ..network.sharing import maxmin
from ..scheduling.scheduler import RESOLUTION_SECONDS

REMAIN = ("prop", "mpl", "cpu")
CPUTIME = ("mpl", "cpu")
ESTIMATORS = tuple(f"{r}-{c}" for r in REMAIN for c in CPUTIME) + ("net-net",)


# -- the equations -------------------------------------------------------------------------


def remain_prop(exe_cur, cpu_cur, exe_tot, cpu_tot):
    """Eq. 1."""
    if cpu_cur <= 0:
        return exe_tot
    return max(exe_cur * (cpu_tot - cpu_cur) / cpu_cur, 0.0)


def remain_isol(exe_tot, cpu_tot, cpu_cur):
    """Eq. 2."""
    return max(exe_tot * (cpu_tot - cpu_cur) / cpu_tot, 0.0)


def mpl_max(nodes, state):
    """Eq. 3: the most tasks, parallel and local, on any of the job's nodes."""
    return max(state[n].mpl for n in nodes)


def cpu_max(nodes, state):
    """Eq. 7: the largest CPU demand, parallel and local, on any of the job's nodes."""
    return max(state[n].demand for n in nodes)


def cpu_feas(cpu_j, cpumax):
    """Eq. 6."""
    return min(cpu_j, cpu_j / cpumax) if cpumax > 0 else cpu_j


def remain_mpl(exe_tot, cpu_tot, cpu_cur, mplmax):
    """Eq. 4."""
    return remain_isol(exe_tot, cpu_tot, cpu_cur) * mplmax


def remain_cpu(exe_tot, cpu_tot, cpu_cur, cpumax):
    """Eq. 5."""
    cpu_j = cpu_tot / exe_tot
    return remain_isol(exe_tot, cpu_tot, cpu_cur) * cpu_j / cpu_feas(cpu_j, cpumax)


def cputime_mpl(cpu_cur, dt, exe_tot, cpu_tot, mplmax):
    """Eq. 8."""
    return cpu_cur + dt * cpu_tot / (mplmax * exe_tot)


def cputime_cpu(cpu_cur, dt, feas):
    """Eq. 9."""
    return cpu_cur + dt * feas


def cpu_paces(local_cpu, tasks):
    """The share of its isolated CPU pace each task on a node gets: ``{job: pace}`` for
    ``tasks`` (job -> CPU(J)) beside a local user of ``local_cpu``, by the fluid model's
    max-min over the node's one CPU.

    >>> {j: round(p, 4) for j, p in cpu_paces(0.15, {1: 0.5, 2: 0.8}).items()}
    {1: 0.85, 2: 0.5312}
    """
    demand = local_cpu + sum(tasks.values())
    if demand <= 1.0:
        return {j: 1.0 for j in tasks}
    jobs = list(tasks)
    bounds = ([local_cpu] if local_cpu > 0 else []) + [max(tasks[j], 1e-9) for j in jobs]
    rates = maxmin([1.0], [0], [[0]] * len(bounds), bounds)[-len(jobs):]
    return {j: max(min(r / tasks[j], 1.0), 1e-6) for j, r in zip(jobs, rates)}


def cpu_factor(job, nodes, state):
    """The share of its isolated CPU pace ``job`` gets on its most crowded node."""
    return min((cpu_paces(state[n].local_cpu, state[n].tasks).get(job, 1.0) for n in nodes),
               default=1.0)


def net_rate(exe_tot, cpu_tot, comm_factor, factor):
    """CPU seconds per second of a job running at CPU ``factor`` and ``comm_factor``."""
    comm = max(exe_tot - cpu_tot, 0.0)
    return cpu_tot / (cpu_tot / factor + comm * comm_factor)


# -- Algorithm 1 ---------------------------------------------------------------------------


class _View:
    """A job's view of its nodes for one estimator: (MPL_max (Eq. 3), CPU_max (Eq. 7), CPU
    pace as ``net-net`` sees it), each only if the estimator reads it (else None). A node's
    paces are kept until :meth:`forget` says a job ended or started there."""

    def __init__(self, state, remain, how):
        self.state = state
        self.mpl = "mpl" in (remain, how)
        self.cpu = "cpu" in (remain, how)
        self.pace = remain == "net"
        self.paces = {}

    def __call__(self, job):
        nodes = [n for n in job.nodes if n in self.state]
        if not nodes:  # every node of the job is down: it runs at its isolated pace
            return (1, 0.0, 1.0)
        return (mpl_max(nodes, self.state) if self.mpl else None,
                cpu_max(nodes, self.state) if self.cpu else None,
                min(self._paces(n).get(job.id, 1.0) for n in nodes) if self.pace else None)

    def _paces(self, n):
        if n not in self.paces:
            s = self.state[n]
            self.paces[n] = cpu_paces(s.local_cpu, s.tasks)
        return self.paces[n]

    def forget(self, nodes):
        for n in nodes:
            self.paces.pop(n, None)


def _constants(info):
    """(ExeTime_tot, CPUtime_tot, CPU(J), communication factor) of a job."""
    exe_tot, cpu_tot = info["exe_seconds"], info["cpu_seconds"]
    return (exe_tot, cpu_tot, cpu_tot / exe_tot, info.get("comm_factor", 1.0))


def _remaining(remain, k, exe_cur, cpu_cur, view):
    """RemainTime (Alg. 1:4) of a job of constants ``k`` (:func:`_constants`) seeing
    ``view`` (:class:`_View`: MPL_max, CPU_max, CPU pace)."""
    exe_tot, cpu_tot, cpu_j, comm_factor = k
    if remain == "prop":
        return remain_prop(exe_cur, cpu_cur, exe_tot, cpu_tot)
    if remain == "mpl":
        return remain_mpl(exe_tot, cpu_tot, cpu_cur, view[0])
    if remain == "cpu":
        return remain_cpu(exe_tot, cpu_tot, cpu_cur, view[1])
    return max(cpu_tot - cpu_cur, 0.0) / net_rate(exe_tot, cpu_tot, comm_factor, view[2])


def _cputime(how, k, cpu_cur, dt, view):
    """CPUtime_cur after ``dt`` more seconds (Alg. 1:7)."""
    exe_tot, cpu_tot, cpu_j, comm_factor = k
    if how == "mpl":
        cpu = cputime_mpl(cpu_cur, dt, exe_tot, cpu_tot, view[0])
    elif how == "cpu":
        cpu = cputime_cpu(cpu_cur, dt, cpu_feas(cpu_j, view[1]))
    else:
        cpu = cpu_cur + dt * net_rate(exe_tot, cpu_tot, comm_factor, view[2])
    return min(cpu, cpu_tot)


def estimate_ends(scheduler, placement, now, progress, estimator, *, comm_factor_of=None,
                  start=None):
    """Algorithm 1: the predicted end time of every running and waiting job.

    ``scheduler`` (the live :class:`~emulator.scheduling.Scheduler`, with the run's JSP)
    and ``placement`` (its :class:`~.placement.Placement`, the run's NSP) are copied, never
    changed. ``progress`` maps each running job's id to (ExeTime_cur, CPUtime_cur).
    ``comm_factor_of(info, nodes)`` gives ``net-net`` a simulated start's communication
    factor. ``start``, a queued job and nodes, starts that job there at ``now`` first (what
    a placement would give it). Returns {job id: predicted end (same clock as ``now``)}.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; choose from {', '.join(ESTIMATORS)}")
    sim, mapping = scheduler.snapshot(now)
    copied = placement.copy_onto(sim, mapping)
    state = copied.state
    if start is not None:
        job, nodes = mapping[start[0]], list(start[1])
        copied.pinned[job.id] = nodes
        sim.start_now(job, now)
        if comm_factor_of is not None and estimator == "net-net":
            job.info["comm_factor"] = comm_factor_of(job.info, job.nodes)
    remain, how = estimator.split("-")
    views = _View(state, remain, how)
    # per running job (DRQ): [ExeTime_cur, CPUtime_cur, constants, view]
    running = {c: [*progress.get(c.id, (0.0, 0.0)), _constants(c.info), None]
               for c in sim.running}
    for job, cur in running.items():
        cur[3] = views(job)
    ends = {}
    t0 = now
    while running:  # Alg. 1:3
        done, dt = None, math.inf
        for job, (exe, cpu, k, view) in running.items():  # :4-5 (ties: the earlier job)
            r = _remaining(remain, k, exe, cpu, view)
            if done is None or r < dt or (r == dt and job.index < done.index):
                done, dt = job, r
        ti = t0 + dt
        ends[done.id] = ti  # :6
        del running[done]
        for cur in running.values():  # :7 (the state of [t0, ti], J_i still in it)
            cur[1] = _cputime(how, cur[2], cur[1], dt, cur[3])
            cur[0] += dt
        sim.finish(done, ti)
        touched = set(done.nodes)
        # :8-13 the run's own JSP and NSP start what they can (waiting times advance with
        # the clock: a job's wait is its start minus its submission)
        started = sim.schedule(ti)
        for job in started:
            if comm_factor_of is not None and estimator == "net-net":
                job.info["comm_factor"] = comm_factor_of(job.info, job.nodes)
            running[job] = [0.0, 0.0, _constants(job.info), None]
            touched.update(job.nodes)
        views.forget(touched)
        for job, cur in running.items():  # a view changes only where a job ended or started
            if cur[3] is None or not touched.isdisjoint(job.nodes):
                cur[3] = views(job)
        t0 = ti  # :15
    return ends  # jobs that never start (every node they could use is down) have none


def deviation_pct(predicted_turnaround, actual_turnaround):
    """Hanzich et al. Fig. 3's turnaround deviation: (predicted - actual) / actual, in %; positive
    is pessimistic."""
    if actual_turnaround <= 0:
        return math.nan
    return 100.0 * (predicted_turnaround - actual_turnaround) / max(actual_turnaround,
                                                                    RESOLUTION_SECONDS)

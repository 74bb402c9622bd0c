"""Node selection policies of a non-dedicated cluster (Hanzich et al. §4), and the node state
they read.

A node holds up to ``mpl`` parallel tasks (one per job) beside its local user, if it has
one. Its CPU demand is its local user's CPU share plus the isolated CPU share CPU(J) of each
parallel task on it (Hanzich et al. Eq. 7 without the max). A job's tasks go on distinct nodes.

``normal``   the ``tasks`` least-used eligible nodes (by CPU demand, then parallel tasks,
             then name). A node with a local user takes a parallel task only while the
             parallel demand there stays within one CPU, so the local user is not starved.
``uniform``  as Hanzich et al.: a job of the same size running alone on its nodes, which can
             take one more task each, is joined there (a pair of jobs on the same nodes),
             one of the other kind (communication- vs computation-bound) first; else
             nodes with no parallel task; else as ``normal``.
``basic``    ``normal`` (the run sets an MPL of 1 and FCFS).
``random``   any eligible nodes, seeded.
``pattern``  Goteti and Subhlok: max-min bandwidth pruning for the job's communication pattern on
             the status graph, among the eligible nodes.

:class:`Placement` gives the scheduler engine (:class:`~emulator.scheduling.Scheduler`) its
``can_place``/``place``/``release``; the jobs' ``info`` carries ``tasks``, ``kind``
(``"compute"`` or ``"communication"``), ``cpu_fraction`` (CPU(J)) and ``benchmark``.
"""

import copy
import random
from dataclasses import dataclass, field

NSP = ("normal", "uniform", "basic", "random", "pattern")
LOADED_PARALLEL_CPU_MAX = 1.0  # parallel CPU demand a node with a local user takes at most


@dataclass
class NodeState:
    name: str
    local_cpu: float = 0.0  # CPU_local(n); 0 without a local user
    tasks: dict = field(default_factory=dict)  # job id -> CPU(J) of its task here

    @property
    def loaded(self):
        return self.local_cpu > 0

    @property
    def parallel_cpu(self):
        return sum(self.tasks.values())

    @property
    def demand(self):
        return self.local_cpu + self.parallel_cpu

    @property
    def mpl(self):
        """MPL_paral + MPL_local (Hanzich et al. Eq. 3's terms)."""
        return len(self.tasks) + (1 if self.loaded else 0)


def eligible(node, mpl, cpu_fraction):
    """Can ``node`` take one more parallel task of CPU share ``cpu_fraction``?"""
    if len(node.tasks) >= mpl:
        return False
    if node.loaded and node.tasks and node.parallel_cpu + cpu_fraction > LOADED_PARALLEL_CPU_MAX:
        return False
    return True


def _by_use(nodes):
    return sorted(nodes, key=lambda n: (round(n.demand, 6), len(n.tasks), n.name))


def choose_normal(state, mpl, info):
    ok = [n for n in state.values() if eligible(n, mpl, info["cpu_fraction"])]
    if len(ok) < info["tasks"]:
        return None
    return [n.name for n in _by_use(ok)[:info["tasks"]]]


def choose_uniform(state, mpl, info, jobs):
    """``jobs``: running job id -> (tasks, kind, node names)."""
    size, cpu = info["tasks"], info["cpu_fraction"]
    partners = []
    for jid, (tasks, kind, names) in jobs.items():
        if tasks != size:
            continue
        if any(n not in state for n in names):
            continue  # on a node it may not use
        nodes = [state[n] for n in names]
        if not all(eligible(n, mpl, cpu) for n in nodes):
            continue
        if any(len(n.tasks) > 1 for n in nodes):
            continue  # already a pair (or more): not a partner
        partners.append((kind == info["kind"], sum(n.demand for n in nodes), jid, names))
    if partners:
        return list(min(partners)[3])
    idle = [n for n in state.values() if not n.tasks and eligible(n, mpl, cpu)]
    if len(idle) >= size:
        return [n.name for n in _by_use(idle)[:size]]
    return choose_normal(state, mpl, info)


def choose_random(state, mpl, info, rng):
    ok = sorted(n.name for n in state.values() if eligible(n, mpl, info["cpu_fraction"]))
    if len(ok) < info["tasks"]:
        return None
    return rng.sample(ok, info["tasks"])


def choose_pattern(state, mpl, info, graph, pattern_of):
    """Max-min pruning on the status graph restricted to the eligible nodes; the mapping's
    nodes in rank order. ``pattern_of(info)`` gives the job's pattern graph."""
    from ..errors import PatternDoesNotFitError
    from ..selection.maxmin import max_min_select

    ok = {n.name for n in state.values() if eligible(n, mpl, info["cpu_fraction"])}
    if len(ok) < info["tasks"]:
        return None
    sub = graph.subgraph([v for v, k in graph.nodes(data="kind") if k != "compute" or v in ok])
    try:
        sel = max_min_select(sub, pattern_of(info), candidates=1, time_budget_seconds=1.0)
    except PatternDoesNotFitError:
        return None
    mapping = sel.candidates[0].mapping
    return [mapping[r] for r in sorted(mapping)]


class Placement:
    """Node selection for the scheduler engine: which nodes a starting job gets."""

    def __init__(self, policy, node_names, *, mpl=4, local_cpu=None, seed=1, graph=None,
                 pattern_of=None):
        if policy not in NSP:
            raise ValueError(f"unknown node policy {policy!r}; choose from {', '.join(NSP)}")
        if policy == "pattern" and (graph is None or pattern_of is None):
            raise ValueError("the pattern policy needs a status graph")
        self.policy = policy
        self.mpl = 1 if policy == "basic" else mpl
        local_cpu = local_cpu or {}
        self.state = {n: NodeState(n, float(local_cpu.get(n, 0.0))) for n in node_names}
        self.jobs = {}  # running job id -> (tasks, kind, node names)
        self.rng = random.Random(seed)
        self.graph = graph
        self.pattern_of = pattern_of
        self._choice = None  # (job id, nodes) of the last can_place

    def choose(self, info):
        p = self.policy
        if p in ("normal", "basic"):
            return choose_normal(self.state, self.mpl, info)
        if p == "uniform":
            return choose_uniform(self.state, self.mpl, info, self.jobs)
        if p == "random":
            return choose_random(self.state, self.mpl, info, self.rng)
        return choose_pattern(self.state, self.mpl, info, self.graph, self.pattern_of)

    def can_place(self, job, avoid=None):
        """Can ``job`` start now (on none of the nodes in ``avoid``)?"""
        if avoid:
            kept = {n: s for n, s in self.state.items() if n not in avoid}
            nodes = self.copy_with(kept).choose(job.info)
        else:
            nodes = self.choose(job.info)
        self._choice = (job.id, nodes)
        return nodes is not None

    def reserve(self, head, ending):
        """EASY's reservation on nodes: the nodes ``head`` will need all of once the jobs
        ``ending`` have released theirs (those where it takes the last free slot), which a
        job still running then must not take; empty if the head would not fit even then."""
        then = self.copy()
        for job in ending:
            if job.id in then.jobs:
                then.release(job)
        nodes = then.choose(head.info)
        if nodes is None:
            return frozenset()
        return frozenset(n for n in nodes if len(then.state[n].tasks) + 1 >= then.mpl)

    def place(self, job):
        nodes = self._choice[1] if self._choice and self._choice[0] == job.id else None
        if nodes is None:
            nodes = self.choose(job.info)
        if nodes is None:
            raise RuntimeError(f"job {job.id} started with no nodes free for it")
        self._choice = None
        for n in nodes:
            self.state[n].tasks[job.id] = job.info["cpu_fraction"]
        self.jobs[job.id] = (len(nodes), job.info["kind"], tuple(nodes))
        return list(nodes)

    def release(self, job):
        _, _, nodes = self.jobs.pop(job.id)
        for n in nodes:
            if n in self.state:
                self.state[n].tasks.pop(job.id, None)

    def mark_down(self, node):
        """A failed node takes no more tasks."""
        self.state.pop(node, None)

    def copy_onto(self, sim, mapping):
        """Give ``sim``, a snapshot of the scheduler this placement serves (``mapping``:
        original job -> copy), a copy of the placement; each copied job keeps its nodes and
        gets an info dict of its own. Returns the placement's copy."""
        sim.nodes = other = self.copy()
        for original, c in mapping.items():
            c.nodes = original.nodes
            c.info = dict(original.info or {})
        return other

    def copy(self):
        """An independent placement in the same state (for simulating forward); the random
        policy's copy draws from a copy of the generator, so simulating forward leaves the
        live run's draws as they were."""
        return self.copy_with(self.state)

    def copy_with(self, state):
        """:meth:`copy`, over the nodes of ``state`` only."""
        other = copy.copy(self)
        other.state = {n: NodeState(s.name, s.local_cpu, dict(s.tasks))
                       for n, s in state.items()}
        other.jobs = dict(self.jobs)
        other.rng = random.Random()
        other.rng.setstate(self.rng.getstate())
        other._choice = None
        return other

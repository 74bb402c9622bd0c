"""Node selection policies of a non-dedicated cluster (Hanzich et al. §4), and the node state
they read.

A node holds up to ``mpl`` parallel tasks (one per job) beside its local user, if it has
one. Its CPU demand is its local user's CPU share plus the isolated CPU share CPU(J) of each
parallel task on it (Hanzich et al. Eq. 7 without the max). A job's tasks go on distinct nodes,
and a task only where its memory fits beside the local user's and the other tasks' (every
policy; CISNE's never let a parallel job page the local user out): a job whose tasks fit
nowhere waits.

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
``predicted`` Normal's and Uniform's choices, and of them the one the predictor scores
             least (``predictor(job, nodes)``: in a batch run, the predicted ends of every
             job in the system, by Algorithm 1 with the job started there), the estimates
             deciding as Hanzich et al. leave for future work. Copies made to simulate
             forward have no predictor and place as Normal.

A job whose jobs file names its nodes takes those, whatever the policy, once each can take
it (a run replayed with the placements of another).

:class:`Placement` gives the scheduler engine (:class:`~emulator.scheduling.Scheduler`) its
``can_place``/``place``/``release``; the jobs' ``info`` carries ``tasks``, ``kind``
(``"compute"`` or ``"communication"``), ``cpu_fraction`` (CPU(J)) and ``benchmark``.
"""

import copy
import math
import random
from dataclasses import dataclass, field

NSP = ("normal", "uniform", "basic", "random", "pattern", "predicted")
LOADED_PARALLEL_CPU_MAX = 1.0  # parallel CPU demand a node with a local user takes at most


@dataclass
class NodeState:
    name: str
    local_cpu: float = 0.0  # CPU_local(n); 0 without a local user
    tasks: dict = field(default_factory=dict)  # job id -> CPU(J) of its task here
    memory_mb: float = math.inf  # the node's memory
    local_memory_mb: float = 0.0  # its local user's
    task_memory: dict = field(default_factory=dict)  # job id -> MB of its task here

    def __post_init__(self):
        self._sum()

    def _sum(self):
        # kept, not summed per look: node selection reads them for every node at every try
        self.parallel_cpu = sum(self.tasks.values())
        self.task_memory_mb = sum(self.task_memory.values())

    def add(self, job_id, cpu_fraction, memory_mb):
        """A task of ``job_id`` starts here."""
        self.tasks[job_id] = cpu_fraction
        self.task_memory[job_id] = memory_mb
        self._sum()

    def remove(self, job_id):
        """The task of ``job_id`` here ends (if any)."""
        self.tasks.pop(job_id, None)
        self.task_memory.pop(job_id, None)
        self._sum()

    def copy(self):
        other = NodeState.__new__(NodeState)  # the sums as they are (copied per simulated step)
        other.__dict__.update(self.__dict__)
        other.tasks, other.task_memory = dict(self.tasks), dict(self.task_memory)
        return other

    @property
    def free_memory_mb(self):
        return self.memory_mb - self.local_memory_mb - self.task_memory_mb

    @property
    def loaded(self):
        return self.local_cpu > 0

    @property
    def demand(self):
        return self.local_cpu + self.parallel_cpu

    @property
    def mpl(self):
        """MPL_paral + MPL_local (Hanzich et al. Eq. 3's terms)."""
        return len(self.tasks) + (1 if self.loaded else 0)


def eligible(node, mpl, cpu_fraction, memory_mb=0.0):
    """Can ``node`` take one more parallel task of CPU share ``cpu_fraction`` holding
    ``memory_mb``?"""
    tasks = node.tasks
    if len(tasks) >= mpl or memory_mb > node.free_memory_mb:
        return False
    return not (node.local_cpu > 0 and tasks
                and node.parallel_cpu + cpu_fraction > LOADED_PARALLEL_CPU_MAX)


def _by_use(nodes):
    return sorted(nodes, key=lambda n: (round(n.demand, 6), len(n.tasks), n.name))


def _eligible(state, mpl, info):
    """The nodes of ``state`` that can take one of ``info``'s tasks."""
    cpu_fraction, memory_mb = _needs(info)
    return [n for n in state.values() if eligible(n, mpl, cpu_fraction, memory_mb)]


def choose_normal(state, mpl, info, ok=None):
    """``ok``: :func:`_eligible`'s nodes, if known."""
    ok = _eligible(state, mpl, info) if ok is None else ok
    if len(ok) < info["tasks"]:
        return None
    return [n.name for n in _by_use(ok)[:info["tasks"]]]


def _needs(info):
    """A task's CPU share and memory (MB), as :func:`eligible` takes them."""
    return info["cpu_fraction"], info.get("memory_mb", 0.0)


def choose_uniform(state, mpl, info, jobs):
    """``jobs``: running job id -> (tasks, kind, node names)."""
    size = info["tasks"]
    ok = _eligible(state, mpl, info)
    if len(ok) < size:
        return None  # neither a partner's nodes, nor idle ones, nor Normal's
    names_ok = {n.name for n in ok}
    partners = []
    for jid, (tasks, kind, names) in jobs.items():
        if tasks != size or not names_ok.issuperset(names):
            continue  # another size, or on a node that cannot take the task
        nodes = [state[n] for n in names]
        if any(len(n.tasks) > 1 for n in nodes):
            continue  # already a pair (or more): not a partner
        partners.append((kind == info["kind"], sum(n.demand for n in nodes), jid, names))
    if partners:
        return list(min(partners)[3])
    idle = [n for n in ok if not n.tasks]
    if len(idle) >= size:
        return [n.name for n in _by_use(idle)[:size]]
    return choose_normal(state, mpl, info, ok)


def choose_random(state, mpl, info, rng):
    needs = _needs(info)
    ok = sorted(n.name for n in state.values() if eligible(n, mpl, *needs))
    if len(ok) < info["tasks"]:
        return None
    return rng.sample(ok, info["tasks"])


def choose_pattern(state, mpl, info, graph, pattern_of):
    """Max-min pruning on the status graph restricted to the eligible nodes; the mapping's
    nodes in rank order. ``pattern_of(info)`` gives the job's pattern graph."""
    from ..errors import PatternDoesNotFitError
    from ..selection.maxmin import max_min_select

    needs = _needs(info)
    ok = {n.name for n in state.values() if eligible(n, mpl, *needs)}
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
                 pattern_of=None, memory_mb=None):
        if policy not in NSP:
            raise ValueError(f"unknown node policy {policy!r}; choose from {', '.join(NSP)}")
        if policy == "pattern" and (graph is None or pattern_of is None):
            raise ValueError("the pattern policy needs a status graph")
        self.policy = policy
        self.mpl = 1 if policy == "basic" else mpl
        local_cpu = local_cpu or {}
        memory_mb = memory_mb or {}
        self.state = {n: NodeState(n, float(local_cpu.get(n, 0.0)),
                                   memory_mb=float(memory_mb.get(n, math.inf)))
                      for n in node_names}
        self.jobs = {}  # running job id -> (tasks, kind, node names)
        self.rng = random.Random(seed)
        self.graph = graph
        self.pattern_of = pattern_of
        self.predictor = None  # predicted: (job, nodes) -> a score, the least chosen
        self.pinned = {}  # job id -> the nodes its next start takes (a what-if)
        self._choice = None  # (job id, nodes) of the last can_place
        self._misses = set()  # needs that found no nodes, until a job starts or ends

    def choose(self, info, state=None, jobs=None, rng=None):
        """The nodes the policy gives ``info``'s job now (or with ``state``, ``jobs`` and
        ``rng`` in place of the placement's own)."""
        state = self.state if state is None else state
        fixed = info.get("nodes")
        if fixed:  # the jobs file names its nodes: those, once every one can take it
            ok = all(n in state and eligible(state[n], self.mpl, *_needs(info)) for n in fixed)
            return list(fixed) if ok else None
        p = self.policy
        if p in ("normal", "basic", "predicted"):
            return choose_normal(state, self.mpl, info)
        if p == "uniform":
            return choose_uniform(state, self.mpl, info, self.jobs if jobs is None else jobs)
        if p == "random":
            return choose_random(state, self.mpl, info, rng or self.rng)
        return choose_pattern(state, self.mpl, info, self.graph, self.pattern_of)

    def choose_for(self, job):
        """The nodes ``job`` would take now: pinned ones, or the policy's (with a predictor,
        the better predicted of Normal's and Uniform's choices)."""
        if job.id in self.pinned:
            return self.pinned[job.id]
        if self.policy != "predicted" or self.predictor is None or job.info.get("nodes"):
            return self.choose(job.info)
        options = []
        for nodes in (choose_normal(self.state, self.mpl, job.info),
                      choose_uniform(self.state, self.mpl, job.info, self.jobs)):
            if nodes is not None and sorted(nodes) not in [sorted(o) for o in options]:
                options.append(nodes)
        if len(options) < 2:
            return options[0] if options else None
        return min(options, key=lambda nodes: self.predictor(job, nodes))

    def can_place(self, job, avoid=None):
        """Can ``job`` start now (with ``avoid``, a :meth:`reserve`, on no node whose share
        the reservation's head needs)?"""
        if job.id in self.pinned:
            nodes = self.pinned[job.id]
        else:
            info = job.info
            needs = _needs(info)
            barred = frozenset(n for n, s in avoid.items()
                               if not eligible(s, self.mpl, *needs)) if avoid else frozenset()
            # a miss stays one while no job starts or ends (EASY tries many alike)
            miss = (info["tasks"], needs, tuple(info.get("nodes") or ()), barred)
            if miss in self._misses:
                nodes = None
            elif avoid:
                nodes = self.choose(info, {n: s for n, s in self.state.items() if n not in barred})
            else:
                nodes = self.choose_for(job)
            if nodes is None:
                self._misses.add(miss)
        self._choice = (job.id, nodes)
        return nodes is not None

    def reserve(self, head, ending):
        """EASY's reservation on nodes: the state of the head's nodes once the jobs
        ``ending`` have released theirs and the head has started there ({node: state});
        a job still running then may only take a node whose state has room for it too.
        Empty if the head would not fit even then."""
        state, jobs = dict(self.state), dict(self.jobs)

        def own(n):  # copied before it changes: the placement's own states stay as they are
            if state[n] is self.state[n]:
                state[n] = state[n].copy()
            return state[n]

        for job in ending:
            for n in jobs.pop(job.id, (0, "", ()))[2]:
                if n in state:
                    own(n).remove(job.id)
        nodes = self.choose(head.info, state, jobs, self._rng_copy())
        if nodes is None:
            return {}
        cpu, memory = _needs(head.info)
        for n in nodes:
            own(n).add(head.id, cpu, memory)
        return {n: state[n] for n in nodes}

    def place(self, job):
        nodes = self._choice[1] if self._choice and self._choice[0] == job.id else None
        if nodes is None:
            nodes = self.choose_for(job)
        self.pinned.pop(job.id, None)
        if nodes is None:
            raise RuntimeError(f"job {job.id} started with no nodes free for it")
        self._choice = None
        self._misses.clear()
        cpu, memory = _needs(job.info)
        for n in nodes:
            self.state[n].add(job.id, cpu, memory)
        self.jobs[job.id] = (len(nodes), job.info["kind"], tuple(nodes))
        return list(nodes)

    def release(self, job):
        _, _, nodes = self.jobs.pop(job.id)
        self._misses.clear()
        for n in nodes:
            if n in self.state:
                self.state[n].remove(job.id)

    def mark_down(self, node):
        """A failed node takes no more tasks."""
        self.state.pop(node, None)
        self._misses.clear()

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
        other = copy.copy(self)
        other.state = {n: s.copy() for n, s in self.state.items()}
        other.jobs = dict(self.jobs)
        other.rng = self._rng_copy() or self.rng
        other._choice, other._misses = None, set()
        other.predictor, other.pinned = None, {}
        return other

    def _rng_copy(self):
        """A generator in the live one's state, for draws that must leave it as it was; None
        unless the policy draws (random)."""
        if self.policy != "random":
            return None
        rng = random.Random()
        rng.setstate(self.rng.getstate())
        return rng

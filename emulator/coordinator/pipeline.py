"""One job through the node-selection framework of Goteti and Subhlok §2 (steps 3-5).

1. Take the current network status graph.
2. Select candidate groups: max-min pruning for the job's pattern (``pattern``), the same
   for the complete pattern (``all-all``), or a uniform choice (``random``).
3. ``pattern`` only: run the class-S skeleton on every candidate, disjoint candidates at
   once, intersecting ones in turn (the conflict graph coloured into rounds).
4. Pick the candidate whose skeleton was fastest (the first candidate for the others).
5. Run the class-A application there, with the chosen rank mapping.

The pure parts (selection, trial rounds, the flow-model oracle) take networkx graphs and
plain functions; :func:`run_skeleton` and :func:`run_trials` drive a
:class:`emulator.coordinator.runtime.Coordinator`.
"""

import itertools
import math
import time
from dataclasses import dataclass

import networkx as nx

from ..errors import NodeFailure, UserError
from ..network.sharing import message_costs, pattern_seconds
from ..selection import METHODS
from ..selection.maxmin import all_all_select, max_min_select, random_select
from ..selection.patterns import CLASS_PARAMS, builtin_pattern

ORACLE_MAX_PLACEMENTS = 500_000


@dataclass(frozen=True)
class JobSpec:
    """What a job is: a NAS benchmark on ``nprocs`` nodes, its skeleton and its run."""

    benchmark: str
    nprocs: int = 4
    candidates: int = 3
    app_class: str = "A"
    trial_class: str = "S"
    app_iterations: int | None = None  # None: the class's full count
    trial_iterations: int | None = None
    time_budget_seconds: float = 5.0

    def pattern(self):
        """The application's communication pattern (bytes per iteration on each edge)."""
        return builtin_pattern(self.benchmark, self.nprocs, npb_class=self.app_class)

    def full_iterations(self):
        """Iterations of the whole class-A application (1 for EP, which has no loop)."""
        return CLASS_PARAMS[self.benchmark][self.app_class].get("niter", 1)


def select(method, graph, spec, *, seed=None, costs=None):
    """Candidate groups for ``spec`` on the status graph ``graph`` (a :class:`Selection`),
    their predicted times charging ``costs``
    (:func:`emulator.network.sharing.message_costs`) per message."""
    pattern = spec.pattern()
    if method == "pattern":
        return max_min_select(graph, pattern, candidates=spec.candidates,
                              time_budget_seconds=spec.time_budget_seconds, costs=costs)
    if method == "all-all":
        return all_all_select(graph, spec.nprocs, candidates=1,
                              time_budget_seconds=spec.time_budget_seconds, costs=costs)
    if method == "random":
        return random_select(graph, pattern, seed=seed, costs=costs)
    raise UserError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")


def trial_rounds(groups):
    """Rounds of candidate indices such that no two groups in a round share a node.

    The conflict graph (an edge between intersecting groups) is coloured greedily, largest
    degree first; each colour is a round, and rounds keep the candidates' order.

    >>> trial_rounds([["a", "b"], ["b", "c"], ["d", "e"]])
    [[0, 2], [1]]
    """
    conflicts = nx.Graph()
    conflicts.add_nodes_from(range(len(groups)))
    for i, j in itertools.combinations(range(len(groups)), 2):
        if set(groups[i]) & set(groups[j]):
            conflicts.add_edge(i, j)
    colour = nx.greedy_color(conflicts, strategy="largest_first")
    rounds = {}
    for i in range(len(groups)):
        rounds.setdefault(colour[i], []).append(i)
    return sorted(rounds.values(), key=lambda r: r[0])


def predicted_seconds(pattern, mapping, pair_mbps, port_mbps, iterations, costs=None):
    """Flow-model communication seconds of ``iterations`` iterations of ``pattern``, each
    message on its critical path charged ``costs``
    (:func:`emulator.network.sharing.message_costs`)."""
    return iterations * pattern_seconds(pattern, mapping, pair_mbps, port_mbps=port_mbps,
                                        **(costs or {}))


def oracle(pattern, nodes, pair_mbps, port_mbps, iterations, costs=None):
    """The placement with the least predicted time (charging ``costs`` per message, as
    :func:`predicted_seconds`), by exhaustive search.

    Every ordered choice of ``m`` of ``nodes`` is scored with the flow model under
    ``pair_mbps`` (the true bandwidths). The flow model lets every edge run at once, so port
    sharing often caps many placements at the same time; ties go to the widest bottleneck
    (the least pair bandwidth on a pattern edge), then to the least time with the edges
    taken one at a time at their pair bandwidths, then to the first placement in order.
    Returns ``(mapping, predicted_seconds)``.

    >>> p = nx.Graph(); p.add_edge(0, 1, bytes=1_250_000)
    >>> bw = {frozenset("ab"): 10.0, frozenset("ac"): 100.0, frozenset("bc"): 20.0}
    >>> oracle(p, ["a", "b", "c"], lambda u, v: bw[frozenset((u, v))], lambda u: 100.0, 1)
    ({0: 'a', 1: 'c'}, 0.05)
    """
    m = pattern.number_of_nodes()
    if m > len(nodes):
        raise UserError(f"the job needs {m} nodes but only {len(nodes)} are up")
    placements = math.perm(len(nodes), m)
    if placements > ORACLE_MAX_PLACEMENTS:
        raise UserError(f"the oracle would score {placements} placements (more than "
                        f"{ORACLE_MAX_PLACEMENTS}); use fewer nodes or ranks")
    ranks = sorted(pattern.nodes)
    edges = [(a, b, nbytes) for a, b, nbytes in pattern.edges(data="bytes", default=0)]
    best, best_key, best_seconds = None, None, None
    for perm in itertools.permutations(nodes, m):
        mapping = dict(zip(ranks, perm))
        seconds = predicted_seconds(pattern, mapping, pair_mbps, port_mbps, iterations, costs)
        rates = [pair_mbps(mapping[a], mapping[b]) for a, b, _ in edges]
        serial = sum(n * 8 / (r * 1e6) if r > 0 else math.inf
                     for (_, _, n), r in zip(edges, rates))
        key = (round(seconds, 9), -min(rates, default=0.0), round(serial, 9))
        if best_key is None or key < best_key:
            best, best_key, best_seconds = mapping, key, seconds
    return best, best_seconds


def submit_skeleton(coordinator, mapping, benchmark, npb_class, *, iterations=None, **how):
    """Start a skeleton on the nodes of ``mapping`` (rank -> node), in rank order; ``how``
    goes to :meth:`Coordinator.submit` (``epoch``, ``dedicated``)."""
    nodes = [mapping[r] for r in sorted(mapping)]
    return coordinator.submit(nodes, "skeleton", name=benchmark, npb_class=npb_class,
                              iterations=iterations, **how)


def skeleton_result(coordinator, handle, timeout=None):
    """The skeleton's wall seconds (slowest rank) and iterations done."""
    results = [r["result"] for r in coordinator.wait(handle, timeout=timeout).values()]
    return {"seconds": max(r["seconds"] for r in results),
            "iterations": results[0]["iterations"]}


def run_skeleton(coordinator, mapping, benchmark, npb_class, *, timeout=None, **kwargs):
    """Run a skeleton on the nodes of ``mapping`` and return :func:`skeleton_result`."""
    return skeleton_result(coordinator, submit_skeleton(coordinator, mapping, benchmark,
                                                        npb_class, **kwargs), timeout)


def run_trials(coordinator, candidates, spec, *, epoch=None, timeout=None):
    """Skeleton trials on every candidate (:class:`Candidate` list), in conflict-free rounds.

    Returns the trial seconds of each candidate, in order. A failed node raises
    :class:`NodeFailure` after the rest of its round has finished.
    """
    seconds = [None] * len(candidates)
    for rnd in trial_rounds([c.nodes for c in candidates]):
        handles = {i: submit_skeleton(coordinator, candidates[i].mapping, spec.benchmark,
                                      spec.trial_class, iterations=spec.trial_iterations,
                                      epoch=epoch)
                   for i in rnd}
        failure = None
        for i, handle in handles.items():
            try:
                seconds[i] = skeleton_result(coordinator, handle, timeout)["seconds"]
            except NodeFailure as e:
                failure = failure or e
        if failure:
            raise failure
    return seconds


def decide(coordinator, method, graph, spec, *, epoch, seed=None, timeout=None):
    """Steps 2-4 for one method on the status graph ``graph``.

    Returns a dict with the chosen ``mapping``, the ``selection`` (JSON), the trial seconds
    and the seconds spent selecting and trying.
    """
    start = time.monotonic()
    selection = select(method, graph, spec, seed=seed,
                       costs=message_costs(coordinator.settings.cluster,
                                           coordinator.settings.dilation))
    selected = time.monotonic()
    trials = []
    chosen = selection.candidates[0]
    if method == "pattern" and len(selection.candidates) > 1:
        trials = run_trials(coordinator, selection.candidates, spec, epoch=epoch,
                            timeout=timeout)
        chosen = selection.candidates[min(range(len(trials)), key=trials.__getitem__)]
    return {"mapping": dict(chosen.mapping), "nodes": list(chosen.nodes),
            "bottleneck_mbps": chosen.bottleneck_mbps, "selection": selection.to_json(),
            "trial_seconds": trials,
            "selection_seconds": coordinator.emulated_seconds(selected - start),
            "trials_total_seconds": coordinator.emulated_seconds(time.monotonic() - selected)}

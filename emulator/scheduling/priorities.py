"""What Slurm's multifactor priority (:mod:`.multifactor`) keeps as jobs come and go: each
association's usage, decayed every PriorityCalcPeriod; each user's fair-share factor, once a
period; each queued job's whole-number priority; the queue sorted again by it.

Two implementations of one interface: :class:`CPriorities` (``_priority.c``, the default
where it is built) and :class:`PythonPriorities`, the reference it is tested against number
for number. Both take the weighted factors of a job that do not change while it waits
(``static``) from the order, and give keys: the priority negated, at most -1.
"""

from typing import Any, Optional

from .slurmshare import ROOT, DecayedUsage, ShareTree, classic_factor, fair_tree_table

try:
    from ._priority import Priorities
except ImportError:  # not built: the Python reference
    Priorities = None

__all__ = ["PythonPriorities", "CPriorities", "make_priorities"]


class PythonPriorities:
    """The reference: usage in numpy (:class:`~.slurmshare.DecayedUsage`), factors memoised
    per tick, keys summed in Python.

    Parameters
    ----------
    tree : ShareTree
        The associations; it grows as users appear (call :meth:`grew`).
    period_seconds, half_life_seconds : float
        PriorityCalcPeriod and PriorityDecayHalfLife.
    fair_tree : bool
        Fair Tree, else classic fair share.
    weights : tuple
        ``(w_age, w_fs, 1 / PriorityMaxAge)``.
    """

    def __init__(self, tree: ShareTree, period_seconds: float, half_life_seconds: float,
                 fair_tree: bool, weights: tuple) -> None:
        self.tree = tree
        self.usage = DecayedUsage(tree, period_seconds=period_seconds,
                                  half_life_seconds=half_life_seconds)
        self.fair_tree = fair_tree
        self._sum = weights
        self._statics: dict = {}  # job -> (submit, static, user node)
        self._fair: tuple = (None, {}, None)  # (tick, {user node: factor}, Fair Tree table)

    def grew(self) -> None:
        """The tree has new associations: every Fair Tree rank may change."""
        self._fair = (None, {}, None)

    def __contains__(self, job: Any) -> bool:
        return job in self._statics

    def enter(self, job: Any, submit: float, static: float, node: tuple) -> None:
        self._statics[job] = (submit, static, node)

    def _tick_memo(self, now: float) -> dict:
        """{user node: factor} of the tick ``now`` falls in, filled as users are asked for."""
        self.usage.advance(now)
        if self._fair[0] != self.usage.tick:
            self._fair = (self.usage.tick, {}, None)
        return self._fair[1]

    def _factor(self, node: tuple, memo: dict) -> float:
        if self.fair_tree:
            tick, _, table = self._fair
            if table is None:
                table = fair_tree_table(self.tree, self.usage)
                self._fair = (tick, memo, table)
            slots, factors = table
            factor = memo[node] = float(factors[slots[node]])
        else:
            factor = memo[node] = classic_factor(self.tree, self.usage, node,
                                                 self.usage.scaled_of(ROOT))
        return factor

    def factor(self, node: tuple, now: float) -> float:
        memo = self._tick_memo(now)
        factor = memo.get(node)
        return self._factor(node, memo) if factor is None else factor

    def key(self, job: Any, now: float) -> int:
        return self.keys((job,), now)[0]

    def keys(self, jobs: Any, now: float) -> list:
        w_age, w_fs, per_second = self._sum
        if w_fs and self.fair_tree:
            self._tick_memo(now)
        statics, out, memo = self._statics, [], None
        for job in jobs:
            submit, static, node = statics[job]
            fs: Any = 0.0
            if w_fs:
                if memo is None:
                    memo = self._tick_memo(now)
                fs = memo.get(node)
                if fs is None:
                    fs = self._factor(node, memo)
            age = (now - submit) * per_second if now > submit else 0.0
            priority = int(w_age * (age if age < 1.0 else 1.0) + w_fs * fs + static)
            out.append(-priority if priority > 1 else -1)
        return out

    def started(self, job: Any, node: tuple, now: float) -> float:
        """``job`` starts: returns its user's factor at ``now``; its usage counts from now."""
        factor = self.factor(node, now)
        self.usage.started(job, node, now)
        return factor

    def finished(self, job: Any, now: float) -> None:
        self.usage.finished(job, now)
        self._statics.pop(job, None)

    def resort(self, queue: list, now: float) -> Optional[tuple]:
        return None  # the scheduler sorts by keys()


class _CoreUsage:
    """:class:`~.slurmshare.DecayedUsage`'s reading side over the C state."""

    def __init__(self, core: Any, tree: ShareTree) -> None:
        self._core, self._tree = core, tree

    @property
    def tick(self) -> int:
        return self._core.tick

    def advance(self, now: float) -> None:
        self._core.advance(now)

    def scaled_of(self, node: tuple) -> float:
        return self._core.scaled(self._tree.index.get(node, -1))

    def usage(self, node: tuple) -> float:
        return self._core.usage(self._tree.index.get(node, -1))


class CPriorities:
    """The same state and numbers in C (``_priority.Priorities``); jobs are known by a slot
    each, from their entry to their end."""

    def __init__(self, tree: ShareTree, period_seconds: float, half_life_seconds: float,
                 fair_tree: bool, weights: tuple) -> None:
        if Priorities is None:
            raise RuntimeError("emulator.scheduling._priority is not built")
        self.tree = tree
        self.core = Priorities(period_seconds, half_life_seconds, fair_tree, *weights)
        self.usage = _CoreUsage(self.core, tree)
        self._ids: dict = {}  # job -> slot
        self.grew()

    def grew(self) -> None:
        """The tree's new associations, row by row, into the C state."""
        tree, core = self.tree, self.core
        if core.rows == len(tree.index):
            return
        for node in list(tree.index)[core.rows:]:
            parent = tree.parent.get(node)
            core.add_node(-1 if parent is None else tree.index[parent],
                          float(tree.shares.get(node, 0)), node[0] == "user")

    def __contains__(self, job: Any) -> bool:
        return job in self._ids

    def enter(self, job: Any, submit: float, static: float, node: tuple) -> None:
        self._ids[job] = self.core.enter(submit, static, self.tree.index[node])

    def factor(self, node: tuple, now: float) -> float:
        return self.core.factor(self.tree.index[node], now)

    def key(self, job: Any, now: float) -> int:
        return self.core.key(self._ids[job], now)

    def keys(self, jobs: Any, now: float) -> list:
        ids = self._ids
        return self.core.keys([ids[job] for job in jobs], now)

    def started(self, job: Any, node: tuple, now: float) -> float:
        return self.core.started(self._ids[job], job.procs, now)

    def finished(self, job: Any, now: float) -> None:
        slot = self._ids.pop(job, None)
        if slot is None:
            self.core.advance(now)
            return
        self.core.finished(slot, now)
        self.core.forget(slot)

    def resort(self, queue: list, now: float) -> Optional[tuple]:
        return self.core.resort(queue, self._ids, now)


def make_priorities(tree: ShareTree, period_seconds: float, half_life_seconds: float,
                    fair_tree: bool, weights: tuple) -> Any:
    """:class:`CPriorities` where built, else :class:`PythonPriorities`."""
    kind = CPriorities if Priorities is not None else PythonPriorities
    return kind(tree, period_seconds, half_life_seconds, fair_tree, weights)

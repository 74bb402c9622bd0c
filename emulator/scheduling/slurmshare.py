"""Slurm's fair-share factor: usage decayed by its half-life on the association tree, then
classic fair share or Fair Tree.

The tree: root, accounts (from an associations file, each under its parent), users under
accounts. A job belongs to the user's association under the account named by the job's
group (the trace's group id as text) when there is one, else under the first account that
lists the user; a user the file does not know joins the account of its group, and an
account the file does not know joins root, each with 1 share (Slurm's default).

Usage: every ``period`` seconds (PriorityCalcPeriod), each association's usage is decayed
by ``2 ** (-period / half_life)`` and the processor-seconds its jobs ran in the period are
added (Slurm's decay thread). Kept lazily: ``scaled[u] = usage[u] / d ** tick`` changes only
when usage is added, so a tick costs nothing per association.

Classic (``PriorityFlags=NO_FAIR_TREE``): ``F = 2 ** (-effective / shares_norm)`` with
``shares_norm`` the product of the shares fractions down the tree and ``effective = norm +
(parent's effective - norm) * shares / level shares`` (an account under root: its ``norm``),
``norm`` the association's usage over root's.

Fair Tree: each level's siblings sorted by Level Fairshare, ``(shares / siblings' shares) /
(usage / siblings' usage)`` (no usage: first), depth first; the users met in that order get
ranks from the number of users down (equal values, equal ranks); ``F = rank / users``.
Sibling accounts of equal Level Fairshare are visited one after the other, not merged.
"""

import math
from typing import Any, Optional

import numpy as np

ROOT = ("account", "root")


class ShareTree:
    """Associations with raw shares: ``("account", name)`` and ``("user", account, name)``."""

    def __init__(self, associations: Any = None) -> None:
        self.parent: dict = {}
        self.shares: dict = {}
        self.children: dict = {ROOT: []}
        self.level: dict = {ROOT: 0}  # node -> its children's shares, summed
        self.accounts_of: dict = {}  # user name -> [account, ...] from the file
        self._chains: dict = {}  # node -> ancestors(node)
        self._flat: Optional[tuple] = None  # (nodes then, the two-level arrays or None)
        if associations is not None:
            pending = dict(associations.accounts)
            while pending:  # parents before children
                for name, (parent, shares) in list(pending.items()):
                    if parent == "root" or ("account", parent) in self.shares:
                        self._add(("account", name), ("account", parent), shares)
                        del pending[name]
            for (account, user), shares in associations.users.items():
                self._account(account)
                self._add(("user", account, user), ("account", account), shares)
                self.accounts_of.setdefault(user, []).append(account)
        self.users = [n for n in self.shares if n[0] == "user"]

    def _add(self, node: tuple, parent: tuple, shares: int) -> None:
        self.parent[node], self.shares[node] = parent, shares
        self.children.setdefault(parent, []).append(node)
        self.children.setdefault(node, [])
        self.level[parent] = self.level.get(parent, 0) + shares
        self.level.setdefault(node, 0)
        self._chains = {}

    def _account(self, name: str) -> tuple:
        node = ("account", name)
        if node not in self.shares and name != "root":
            self._add(node, ROOT, 1)
        return node if name != "root" else ROOT

    def user_of(self, user: Any, group: Any) -> tuple:
        """The association of a job of trace user ``user`` and group ``group``."""
        name, account = str(user), str(group)
        listed = self.accounts_of.get(name)
        if listed:
            account = account if account in listed else listed[0]
        node = ("user", account, name)
        if node not in self.shares:
            self._add(node, self._account(account), 1)
            self.users.append(node)
        return node

    def ancestors(self, node: tuple) -> list:
        """The node and each account above it, root last."""
        chain = self._chains.get(node)
        if chain is None:
            chain = [node]
            while chain[-1] != ROOT:
                chain.append(self.parent[chain[-1]])
            self._chains[node] = chain
        return chain


class DecayedUsage:
    """Usage per association, decayed every ``period_seconds`` by its half-life."""

    def __init__(self, tree: ShareTree, *, period_seconds: float = 300.0,
                 half_life_seconds: float = 7 * 86400.0) -> None:
        self.tree = tree
        self.period = float(period_seconds)
        self.decay = 2.0 ** (-self.period / half_life_seconds) if half_life_seconds > 0 \
            else 1.0
        self.tick = 0  # usage is counted up to tick * period
        self.scaled: dict = {}  # node (user, account, root) -> usage / decay ** tick
        self.running: dict = {}  # job -> [node, procs, counted until]
        self.pending: dict = {}  # node -> processor-seconds ended since the last tick

    def growth(self, tick: int) -> float:
        return self.decay ** -tick

    def _credit(self, node: tuple, amount: float, tick: int) -> None:
        """Add ``amount`` processor-seconds, counted at ``tick``, to a user and its parents."""
        value = amount * self.growth(tick)
        for n in self.tree.ancestors(node):
            self.scaled[n] = self.scaled.get(n, 0.0) + value

    def advance(self, now: float) -> None:
        """Count every tick up to ``now``: pending usage at the first, running jobs' time in
        each."""
        tick = int(now // self.period)
        if tick <= self.tick:
            return
        first = self.tick + 1
        for node, amount in self.pending.items():
            self._credit(node, amount, first)
        self.pending = {}
        end_first = first * self.period
        for job, state in self.running.items():
            node, procs, counted = state
            self._credit(node, procs * (end_first - counted), first)
            if tick > first:  # whole periods first+1 .. tick
                self._credit(node, procs * self.period * self._series(first + 1, tick), 0)
            state[2] = tick * self.period
        self.tick = tick

    def _series(self, a: int, b: int) -> float:
        """Sum of growth(k) for k in a..b."""
        if self.decay == 1.0:
            return float(b - a + 1)
        return sum_growth(self.decay, a, b)

    def started(self, job: Any, node: tuple, now: float) -> None:
        self.advance(now)
        self.running[job] = [node, job.procs, now]

    def finished(self, job: Any, now: float) -> None:
        self.advance(now)
        state = self.running.pop(job, None)
        if state is not None:
            node, procs, counted = state
            self.pending[node] = self.pending.get(node, 0.0) + procs * (now - counted)

    def usage(self, node: tuple) -> float:
        """The node's usage as of the last tick (processor-seconds, decayed)."""
        return self.scaled.get(node, 0.0) / self.growth(self.tick)


def sum_growth(d: float, a: int, b: int) -> float:
    """Sum of d ** -k for k = a..b (b >= a), in closed form."""
    r = 1.0 / d
    return r ** a * (r ** (b - a + 1) - 1.0) / (r - 1.0)


def classic_factor(tree: ShareTree, usage: DecayedUsage, node: tuple, root: float) -> float:
    """The classic fair-share factor of user ``node``; ``root``: root's scaled usage."""
    chain = tree.ancestors(node)[:-1][::-1]  # top account first, the user last
    effective, shares_norm = 0.0, 1.0
    for depth, n in enumerate(chain):
        level = tree.level[tree.parent[n]]
        fraction = tree.shares[n] / level if level else 0.0
        shares_norm *= fraction
        norm = usage.scaled.get(n, 0.0) / root if root > 0 else 0.0
        effective = norm if depth == 0 else norm + (effective - norm) * fraction
    if not shares_norm:
        return 0.0
    return 2.0 ** (-effective / shares_norm)


def fair_tree_factors(tree: ShareTree, usage: DecayedUsage) -> dict:
    """{user node: Fair Tree factor} for every user of the tree: at once in numpy where
    accounts hold only users (:func:`fair_tree_two_levels`), else by the walk."""
    fast = fair_tree_two_levels(tree, usage)
    return fast if fast is not None else fair_tree_walk(tree, usage)


def _two_levels(tree: ShareTree) -> Optional[tuple]:
    """The arrays a two-level tree's Fair Tree needs, kept until the tree changes; None if
    an account holds an account."""
    if tree._flat is not None and tree._flat[0] == len(tree.shares):
        return tree._flat[1]
    top = list(tree.children[ROOT])
    if any(k[0] == "account" and kid[0] == "account" for k in top
           for kid in tree.children.get(k, [])):
        tree._flat = (len(tree.shares), None)
        return None
    at = {k: i for i, k in enumerate(top)}
    users = [u for k in top for u in ([k] if k[0] == "user" else tree.children.get(k, []))]
    parent = np.array([at[u] if u in at else at[tree.parent[u]] for u in users])
    own = np.array([u in at for u in users])  # a user right under root
    place = {k: i for kids in tree.children.values() for i, k in enumerate(kids)}
    position = np.array([place[u] for u in users])
    top_share = np.array([tree.shares[k] / tree.level[ROOT] if tree.level[ROOT] else 0.0
                          for k in top])
    user_share = np.array([tree.shares[u] / tree.level[tree.parent[u]]
                           if tree.level[tree.parent[u]] else 0.0 for u in users])
    flat = (top, users, parent, own, position, top_share, user_share)
    tree._flat = (len(tree.shares), flat)
    return flat


def _level_fairshare(share: np.ndarray, used: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Shares over usage, both as fractions of their level; no usage: first (inf)."""
    fraction = np.divide(used, total, out=np.zeros_like(used), where=total > 0)
    with np.errstate(divide="ignore"):
        return np.where(fraction == 0, np.inf, share / np.where(fraction == 0, 1.0, fraction))


def fair_tree_two_levels(tree: ShareTree, usage: DecayedUsage) -> Optional[dict]:
    """Fair Tree for accounts of users under root (and users right under root), in numpy:
    the same ranks as :func:`fair_tree_walk`. None for deeper trees."""
    flat = _two_levels(tree)
    if flat is None or not tree.users:
        return None if flat is None else {}
    top, users, parent, own, position, top_share, user_share = flat
    scaled = usage.scaled
    top_used = np.array([scaled.get(k, 0.0) for k in top])
    user_used = np.array([scaled.get(u, 0.0) for u in users])
    top_lf = _level_fairshare(top_share, top_used, np.full(len(top), top_used.sum()))
    sibling_used = np.bincount(parent, weights=user_used, minlength=len(top))[parent]
    user_lf = np.where(own, top_lf[parent],
                       _level_fairshare(user_share, user_used, sibling_used))
    order = np.lexsort((position, -np.where(own, 0.0, user_lf), parent, -top_lf[parent]))
    value, group = user_lf[order], np.where(own, -1, parent)[order]
    n = len(users)
    change = np.ones(n, dtype=bool)
    change[1:] = (value[1:] != value[:-1]) | (group[1:] != group[:-1])
    last = np.maximum.accumulate(np.where(change, np.arange(n), 0))
    factor = np.empty(n)
    factor[order] = (n - last) / n
    return dict(zip(users, factor.tolist()))


def fair_tree_walk(tree: ShareTree, usage: DecayedUsage) -> dict:
    """Fair Tree by walking the tree level by level (any depth): the reference."""
    users = len(tree.users)
    if not users:
        return {}
    order: list = []

    def visit(parent: tuple) -> None:
        kids = tree.children.get(parent, [])
        if not kids:
            return
        shares = tree.level[parent]
        used = sum(usage.scaled.get(k, 0.0) for k in kids)
        levels = []
        for k in kids:
            s = tree.shares[k] / shares if shares else 0.0
            u = usage.scaled.get(k, 0.0) / used if used > 0 else 0.0
            levels.append((math.inf if u == 0 else s / u, k))
        levels.sort(key=lambda e: -e[0])
        for value, k in levels:
            if k[0] == "user":
                order.append((value, k))
            else:
                visit(k)

    visit(ROOT)
    factors, rank, previous = {}, users, None
    for i, (value, node) in enumerate(order):
        if previous is not None and value != previous[0]:
            rank = users - i
        elif previous is not None and tree.parent[node] != tree.parent[previous[1]]:
            rank = users - i
        factors[node] = rank / users
        previous = (value, node)
    return factors

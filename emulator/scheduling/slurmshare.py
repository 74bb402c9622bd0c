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
when usage is added, and running jobs are added as each association's processors times the
period, one array operation a tick for the whole tree.

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
        self.index: dict = {ROOT: 0}  # node -> its place in usage arrays
        self._rows: dict = {}  # node -> the indices of ancestors(node)
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
        self.index[node] = len(self.index)
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
    """Usage per association, decayed every ``period_seconds`` by its half-life.

    Kept as a rate: ``rate[n]`` is the processors association ``n``'s running jobs hold, and
    each tick adds ``rate * period`` to every association at once; a job's start and end
    put the part of its period it did not run (or ran) in ``pending``, counted at the next
    tick. Arrays are indexed by :attr:`ShareTree.index`."""

    def __init__(self, tree: ShareTree, *, period_seconds: float = 300.0,
                 half_life_seconds: float = 7 * 86400.0) -> None:
        self.tree = tree
        self.period = float(period_seconds)
        self.decay = 2.0 ** (-self.period / half_life_seconds) if half_life_seconds > 0 \
            else 1.0
        self.tick = 0  # usage is counted up to tick * period
        self.scaled = np.zeros(16)  # usage / decay ** tick, by tree index
        self.rate = np.zeros(16)  # processors running, by tree index
        self.running: dict = {}  # job -> (node, procs)
        self.pending: dict = {}  # node -> processor-seconds to add at the next tick

    def growth(self, tick: int) -> float:
        return self.decay ** -tick

    def _rows(self, node: tuple) -> tuple:
        """The array indices of ``node`` and its parents, the arrays grown to hold them (a
        tuple: a few items set one by one cost less than numpy's indexing)."""
        tree = self.tree
        rows = tree._rows.get(node)
        if rows is None:
            rows = tree._rows[node] = tuple(tree.index[n] for n in tree.ancestors(node))
        self.grow()
        return rows

    def grow(self) -> None:
        """Room in the arrays for every node of the tree."""
        if len(self.scaled) < len(self.tree.index):
            more = np.zeros(2 * len(self.tree.index) - len(self.scaled))
            self.scaled = np.concatenate([self.scaled, more])
            self.rate = np.concatenate([self.rate, more])

    def _credit(self, node: tuple, amount: float, tick: int) -> None:
        """Add ``amount`` processor-seconds, counted at ``tick``, to a user and its parents."""
        rows, scaled = self._rows(node), self.scaled  # may grow the arrays
        amount *= self.growth(tick)
        for i in rows:
            scaled[i] += amount

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
        if self.running:
            self.scaled += self.rate * (self.period * self._series(first, tick))
        self.tick = tick

    def _series(self, a: int, b: int) -> float:
        """Sum of growth(k) for k in a..b."""
        if self.decay == 1.0:
            return float(b - a + 1)
        return sum_growth(self.decay, a, b)

    def _hold(self, node: tuple, procs: float, seconds: float) -> None:
        """``procs`` more processors from now (fewer if negative); ``seconds`` of this
        period counted at the next tick."""
        rows, rate = self._rows(node), self.rate  # may grow the arrays
        for i in rows:
            rate[i] += procs
        self.pending[node] = self.pending.get(node, 0.0) + seconds

    def started(self, job: Any, node: tuple, now: float) -> None:
        self.advance(now)
        self.running[job] = (node, job.procs)
        # the rate counts the whole period at the next tick; take off what had passed
        self._hold(node, job.procs, -job.procs * (now - self.tick * self.period))

    def finished(self, job: Any, now: float) -> None:
        self.advance(now)
        state = self.running.pop(job, None)
        if state is not None:
            node, procs = state
            self._hold(node, -procs, procs * (now - self.tick * self.period))

    def scaled_of(self, node: tuple) -> float:
        """The node's usage over ``decay ** -tick`` (0 for a node never charged)."""
        i = self.tree.index.get(node)
        return float(self.scaled[i]) if i is not None and i < len(self.scaled) else 0.0

    def usage(self, node: tuple) -> float:
        """The node's usage as of the last tick (processor-seconds, decayed)."""
        return self.scaled_of(node) / self.growth(self.tick)


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
        norm = usage.scaled_of(n) / root if root > 0 else 0.0
        effective = norm if depth == 0 else norm + (effective - norm) * fraction
    if not shares_norm:
        return 0.0
    return 2.0 ** (-effective / shares_norm)


def fair_tree_factors(tree: ShareTree, usage: DecayedUsage) -> dict:
    """{user node: Fair Tree factor} for every user of the tree: at once in numpy where
    accounts hold only users (:func:`fair_tree_two_levels`), else by the walk."""
    fast = fair_tree_two_levels(tree, usage)
    return fast if fast is not None else fair_tree_walk(tree, usage)


def fair_tree_table(tree: ShareTree, usage: DecayedUsage) -> tuple:
    """The same factors as ``({user node: slot}, factors by slot)``: the slots are kept with
    the tree, so a tick builds no dict."""
    flat = _two_levels(tree)
    if flat is None:
        walked = fair_tree_walk(tree, usage)
        return {node: i for i, node in enumerate(walked)}, list(walked.values())
    return flat[-1], _two_level_factors(flat, usage)


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
    parent = np.array([at[u] if u in at else at[tree.parent[u]] for u in users], dtype=np.intp)
    own = np.array([u in at for u in users], dtype=bool)  # a user right under root
    place = {k: i for kids in tree.children.values() for i, k in enumerate(kids)}
    position = np.array([place[u] for u in users])
    top_share = np.array([tree.shares[k] / tree.level[ROOT] if tree.level[ROOT] else 0.0
                          for k in top])
    user_share = np.array([tree.shares[u] / tree.level[tree.parent[u]]
                           if tree.level[tree.parent[u]] else 0.0 for u in users])
    top_rows = np.array([tree.index[k] for k in top], dtype=np.intp)
    user_rows = np.array([tree.index[u] for u in users], dtype=np.intp)
    # one account and no user under root: users in place order, a stable sort is enough
    single = len(top) == 1 and not own.any()
    flat = (users, parent, own, position, top_share, user_share, top_rows, user_rows, single,
            {u: i for i, u in enumerate(users)})
    tree._flat = (len(tree.shares), flat)
    return flat


def _level_fairshare(share: np.ndarray, used: np.ndarray, total: Any) -> np.ndarray:
    """Shares over usage, both as fractions of their level; no usage: first (inf)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        fraction = used / total  # used > 0 only where total >= used > 0
        return np.where(used > 0, share / fraction, np.inf)


def fair_tree_two_levels(tree: ShareTree, usage: DecayedUsage) -> Optional[dict]:
    """Fair Tree for accounts of users under root (and users right under root), in numpy:
    the same ranks as :func:`fair_tree_walk`. None for deeper trees."""
    flat = _two_levels(tree)
    if flat is None or not tree.users:
        return None if flat is None else {}
    return dict(zip(flat[0], _two_level_factors(flat, usage).tolist()))


def _total(values: np.ndarray) -> float:
    """The sum taken left to right, as the walk takes it (numpy's sum is pairwise)."""
    return float(np.cumsum(values)[-1]) if len(values) else 0.0


def _two_level_factors(flat: tuple, usage: DecayedUsage) -> np.ndarray:
    """The factor of each user of a two-level tree, in the order of ``flat``'s users."""
    users, parent, own, position, top_share, user_share, top_rows, user_rows, single, _ = flat
    n = len(users)
    if not n:
        return np.empty(0)
    usage.grow()
    top_used, user_used = usage.scaled[top_rows], usage.scaled[user_rows]
    if single:
        value = _level_fairshare(user_share, user_used, _total(user_used))
        order = np.argsort(-value, kind="stable")
        value = value[order]
        change = np.empty(n, dtype=bool)
        change[0] = True
        np.not_equal(value[1:], value[:-1], out=change[1:])
    else:
        top_lf = _level_fairshare(top_share, top_used, _total(top_used))
        sibling_used = np.bincount(parent, weights=user_used, minlength=len(top_rows))[parent]
        user_lf = np.where(own, top_lf[parent],
                           _level_fairshare(user_share, user_used, sibling_used))
        order = np.lexsort((position, -np.where(own, 0.0, user_lf), parent,
                            -top_lf[parent]))
        value, group = user_lf[order], np.where(own, -1, parent)[order]
        change = np.ones(n, dtype=bool)
        change[1:] = (value[1:] != value[:-1]) | (group[1:] != group[:-1])
    last = np.maximum.accumulate(np.where(change, np.arange(n), 0))
    factor = np.empty(n)
    factor[order] = (n - last) / n
    return factor


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
        used = sum(usage.scaled_of(k) for k in kids)
        levels = []
        for k in kids:
            s = tree.shares[k] / shares if shares else 0.0
            u = usage.scaled_of(k) / used if used > 0 else 0.0
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

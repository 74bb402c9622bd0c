"""The embedding test of :func:`~emulator.selection.maxmin.max_min_select`: does a pattern
embed (subgraph monomorphism) into the graph of node pairs with bandwidth >= a threshold?

A backtracking search on bitsets (in C, ``_search.c``, with this module's Python as the
fallback): the rank with the fewest nodes left goes first, adjacency and common-neighbour
counts are checked forward, the pattern's symmetries are broken by conditions from its
automorphism group (:mod:`.symmetry`); complete patterns use a clique branch and bound."""

import math
import time

import numpy as np

from .symmetry import common_links, pattern_order, symmetry_conditions

try:  # the searches in C, built by the package's install; the Python ones are the fallback
    from . import _search
except ImportError:  # pragma: no cover - a source tree without its build
    _search = None

# common neighbours are counted only where a pair has at most this many on average (where
# they can prune)
COMMON_MAX = 4.0
COMMON_NODES_MAX = 1024  # common neighbours are counted (a dense product) up to this size
REORDER_NODES_MAX = 1024  # nodes are relabelled by degree at each threshold up to this size

class OutOfTime(Exception):
    """A search ran past its deadline."""


def _bits(flags):
    """A boolean vector as a Python integer bitset (bit i set where ``flags[i]``)."""
    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


def _words(flags):
    """Boolean vectors (last axis) as little-endian 64-bit words, for the C searches."""
    packed = np.packbits(flags, axis=-1, bitorder="little")
    pad = -packed.shape[-1] % 8
    if pad:
        packed = np.concatenate(
            [packed, np.zeros(packed.shape[:-1] + (pad,), dtype=np.uint8)], axis=-1)
    return np.ascontiguousarray(packed).view("<u8")


def _group_words(groups, inverse, w):
    """Node groups (original indices) as rows of 64-bit words in search order."""
    words = np.zeros((len(groups), w), dtype="<u8")
    for g, group in enumerate(groups):
        for i in group:
            v = int(inverse[i])
            words[g, v >> 6] |= np.uint64(1 << (v & 63))
    return words


class Matcher:
    """Subgraph-monomorphism search of a pattern into thresholded pair graphs, on bitsets.

    At each threshold the graph's vertices are relabelled by decreasing degree, so the search
    tries well-connected nodes first; neighbourhoods are bitsets: 64-bit words for the C
    searches (``_search``), Python integers for the fallback, which searches alike. A search
    can be told to find a node group different from given ones.
    """

    CACHE_LEVELS = 24

    def __init__(self, matrix, pattern, deadline, symmetry_deadline=-math.inf):
        self.matrix = matrix
        self.order, back, ahead, self.degree = pattern_order(pattern)
        self.m = len(self.order)
        self.complete = self.m >= 3 and pattern.number_of_edges() == self.m * (self.m - 1) // 2
        if self.complete:  # the clique search has no use for symmetry conditions
            symmetry_deadline = -math.inf
        self.bigger, self.smaller = symmetry_conditions(pattern, self.order, symmetry_deadline)
        common = [] if self.complete else common_links(pattern, self.order)
        self.common_counts = sorted({k for links in common for _, k in links})
        # each position's constraints on the others, as (position, table kind): 0 is
        # adjacency, k >= 1 at least k common neighbours
        self.links = [[(q, 0) for q in back[i] + ahead[i]] + (common[i] if common else [])
                      for i in range(self.m)]
        self._compiled = {}  # table kinds -> the links and symmetry conditions as C arrays
        self.edges = list(pattern.edges)
        self.deadline = deadline
        self.steps = 0
        self._cache = {}

    def level(self, emb, values):
        """Index in ``values`` of the bottleneck of an embedding (node indices by rank)."""
        bottleneck = min(self.matrix[emb[a], emb[b]] for a, b in self.edges)
        return int(np.searchsorted(values, bottleneck, side="right")) - 1

    def _clique(self, adj, cand, avoid):
        """A clique of size m (node bits) by branch and bound with a greedy-colouring bound
        (Tomita and Seki's MCQ): a candidate set that colours with c colours holds no clique
        larger than c."""
        m, chosen = self.m, []

        def colour_order(cand):
            order, colours, colour, rest = [], [], 0, cand
            while rest:
                colour += 1
                q = rest
                while q:
                    low = q & -q
                    v = low.bit_length() - 1
                    rest &= ~low
                    q &= ~low & ~adj[v]
                    order.append(v)
                    colours.append(colour)
            return order, colours

        def grow(cand, need, used):
            if need == 0:
                return True
            order, colours = colour_order(cand)
            for v, colour in zip(reversed(order), reversed(colours)):
                if colour < need:
                    return False
                if time.monotonic() > self.deadline:  # a step here costs a colouring
                    raise OutOfTime
                bit = 1 << v
                now = used | bit
                if need == 1 and any(now & ~group == 0 for group in avoid):
                    cand &= ~bit
                    continue
                chosen.append(v)
                if grow(cand & adj[v], need - 1, now):
                    return True
                chosen.pop()
                cand &= ~bit
            return False

        return chosen if grow(cand, m, 0) else None

    def _graph(self, threshold):
        if threshold in self._cache:
            return self._cache[threshold]
        adj = self.matrix >= threshold
        deg = adj.sum(axis=1)
        if deg.size <= REORDER_NODES_MAX:
            perm = np.argsort(-deg, kind="stable")
            adj = adj[np.ix_(perm, perm)]
            deg = deg[perm]
        else:  # relabelling costs a gather of n^2 flags per threshold: not on big networks
            perm = np.arange(deg.size)
        inverse = np.empty_like(perm)
        inverse[perm] = np.arange(perm.size)
        flags = {0: adj}
        n = deg.size
        # common-neighbour counts: only where a pair has few on average (they prune there)
        if (self.common_counts and n <= COMMON_NODES_MAX
                and float(np.square(deg, dtype=float).sum()) <= COMMON_MAX * n * n):
            a = adj.astype(np.float32)
            common = a @ a
            np.fill_diagonal(common, 0)
            for k in self.common_counts:
                flags[k] = common >= k
        degree_flags = {d: deg >= d for d in set(self.degree)}
        if _search is not None:  # 64-bit words for the C searches
            kinds = list(flags)
            tables = (kinds, _words(np.stack([flags[k] for k in kinds]) if len(kinds) > 1
                                    else adj[np.newaxis]))
            masks = {d: _words(f) for d, f in degree_flags.items()}
        else:  # Python integers as bitsets
            tables = {k: [_bits(row) for row in f] for k, f in flags.items()}
            masks = {d: _bits(f) for d, f in degree_flags.items()}
        if len(self._cache) >= self.CACHE_LEVELS:
            self._cache.pop(next(iter(self._cache)))
        self._cache[threshold] = (perm, inverse, tables, masks)
        return self._cache[threshold]

    def embed(self, threshold, avoid=()):
        """One embedding at ``threshold`` as a tuple of node indices by rank, or ``None``.

        ``avoid`` lists node groups (sets of indices) the embedding's group must differ from:
        it must use, for each of them, a node outside it. Raises ``OutOfTime`` past the
        deadline.
        """
        perm, inverse, tables, masks = self._graph(threshold)
        if _search is not None:
            found = self._embed_compiled(tables, masks, inverse, avoid)
            if found is None:
                return None
            if self.complete:
                return tuple(sorted(int(perm[v]) for v in found))
            by_rank = [0] * self.m
            for i, r in enumerate(self.order):
                by_rank[r] = int(perm[found[i]])
            return tuple(by_rank)
        adj = tables[0]
        order, m, bigger, smaller = self.order, self.m, self.bigger, self.smaller
        links = [[(q, tables[k]) for q, k in self.links[i] if k in tables] for i in range(m)]
        avoid = [sum(1 << int(inverse[i]) for i in group) for group in avoid]
        everyone = masks[min(self.degree)]  # nodes with enough pairs at this threshold
        if self.complete:
            found = self._clique(adj, everyone, avoid)
            return None if found is None else tuple(sorted(int(perm[v]) for v in found))
        assign, placed = [0] * m, [False] * m

        def extend(count, used, domains):
            """Place one more rank; ``domains`` holds every position's remaining nodes."""
            if count == m:
                return True
            free = everyone & ~used
            if free.bit_count() < m - count:
                return False  # not enough nodes left
            for group in avoid:  # still inside an avoided group, with no way out of it
                if used & ~group == 0 and free & ~group == 0:
                    return False
            pos, cand, size = -1, 0, math.inf
            for p in range(m):  # fail first: the open position with the fewest nodes left
                if not placed[p]:
                    c = domains[p] & ~used
                    s = c.bit_count()
                    if s < size:
                        pos, cand, size = p, c, s
            if count == m - 1:  # the last node must take the group out of every avoided one
                for group in avoid:
                    if used & ~group == 0:
                        cand &= ~group
            placed[pos] = True
            while cand:
                self.steps += 1
                if self.steps & 1023 == 0 and time.monotonic() > self.deadline:
                    raise OutOfTime
                low = cand & -cand
                cand ^= low
                v = assign[pos] = low.bit_length() - 1
                now = used | low
                narrowed = self._narrow(domains, v, now, links[pos], bigger[pos],
                                        smaller[pos], placed)
                if narrowed is not None and extend(count + 1, now, narrowed):
                    return True
            placed[pos] = False
            return False

        if not extend(0, 0, [masks[d] for d in self.degree]):
            return None
        by_rank = [0] * m
        for i, r in enumerate(order):
            by_rank[r] = int(perm[assign[i]])
        return tuple(by_rank)

    def _embed_compiled(self, tables, masks, inverse, avoid):
        """The search in C: node indices by search position (by clique member for a
        complete pattern), or ``None``; raises ``OutOfTime`` past the deadline."""
        kinds, words = tables
        n, w = words.shape[1], words.shape[2]
        groups = _group_words(avoid, inverse, w)
        everyone = masks[min(self.degree)]
        if self.complete:
            status, found, steps = _search.clique(n, w, self.m, words[0], everyone, groups,
                                                  self.deadline)
        else:
            domains = np.stack([masks[d] for d in self.degree])
            status, found, steps = _search.embed(n, w, self.m, words, everyone, domains, groups,
                                                 *self._compiled_arrays(tuple(kinds)),
                                                 self.deadline)
        self.steps += steps
        if status < 0:
            raise OutOfTime
        return found

    def _compiled_arrays(self, kinds):
        """Links (position, other, table index) and symmetry conditions (position, other)
        as the C search takes them, made once per set of tables a threshold has."""
        if kinds not in self._compiled:
            table_of = {k: t for t, k in enumerate(kinds)}
            links = [(i, q, table_of[k]) for i in range(self.m) for q, k in self.links[i]
                     if k in table_of]
            bigs = [(i, q) for i in range(self.m) for q in self.bigger[i]]
            smalls = [(i, q) for i in range(self.m) for q in self.smaller[i]]
            self._compiled[kinds] = (np.array(links, dtype=np.int32).reshape(-1, 3),
                                     np.array(bigs, dtype=np.int32).reshape(-1, 2),
                                     np.array(smalls, dtype=np.int32).reshape(-1, 2))
        return self._compiled[kinds]

    def best_cliques(self, values, emb, top, avoid=(), k=1):
        """For a complete pattern, in C: the k cliques of largest bottleneck at or above
        ``emb``'s, by one branch and bound that raises its threshold with the k-th best found;
        it stops early once the k-th reaches ``values[top]``. Returns them, best first, and
        whether they were proven best (``False`` out of time)."""
        lo = self.level(emb, values)
        # only nodes with m - 1 pairs at that level can be in such a clique; by decreasing
        # degree, the order the colouring bound works best in
        deg = (self.matrix >= values[lo]).sum(axis=1)
        inside = np.flatnonzero(deg >= self.m - 1)
        inside = inside[np.argsort(-deg[inside], kind="stable")]
        local = {int(v): i for i, v in enumerate(inside)}
        sub = np.ascontiguousarray(self.matrix[np.ix_(inside, inside)])
        n = len(inside)
        w = (n + 63) // 64
        groups = [[local[i] for i in g] for g in avoid if all(i in local for i in g)]
        everyone = _words(np.ones(n, dtype=bool))
        lower = float(values[lo - 1]) if lo > 0 else -math.inf  # emb's own level counts
        status, found, steps = _search.best_clique(
            n, w, self.m, k, sub, everyone,
            _group_words(groups, np.arange(n), w), lower, float(values[top]), self.deadline)
        self.steps += steps
        found = [tuple(sorted(int(inside[v]) for v in group)) for group in found]
        return found or [emb], status > 0

    @staticmethod
    def _narrow(domains, v, used, links, bigger, smaller, placed):
        """The open positions' domains narrowed after placing a rank on node ``v``; None if
        one keeps no free node (forward checking)."""
        new = domains[:]
        for q, table in links:
            if not placed[q]:
                d = new[q] = new[q] & table[v]
                if not d & ~used:
                    return None
        above, below = ~((2 << v) - 1), (1 << v) - 1
        for q in bigger:  # symmetry: a position that must take a higher node
            if not placed[q]:
                d = new[q] = new[q] & above
                if not d & ~used:
                    return None
        for q in smaller:  # and one that must take a lower node
            if not placed[q]:
                d = new[q] = new[q] & below
                if not d & ~used:
                    return None
        return new

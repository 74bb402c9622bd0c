"""Ranks of the groups of an order whose key is its group's (fair share: one key per user
and group), so that the queue is sorted again only when the groups' order changes.

The queue holds each job under its group's rank, not its key. Ranks are compared, never
read as keys: two groups with equal keys have equal ranks, and a group of higher key a
higher rank. As long as the groups' keys keep that order, the queue's order is what sorting
it by the keys would give, and nothing needs to move.

>>> ranks = GroupRanks()
>>> ranks.rerank({"a": 5.0, "b": 1.0})   # the first ranking: everything moves
True
>>> ranks.rank_of("c", 3.0)              # a newcomer slots in between
0.5
>>> ranks.rerank({"a": 9.0, "b": 2.0, "c": 4.0})   # same order, other keys
False
>>> ranks.rerank({"a": 1.0, "b": 2.0})   # a overtakes b
True
"""

import math
from operator import itemgetter
from typing import Any, Optional


class GroupRanks:
    """The rank of every group seen, and its key when last ranked."""

    def __init__(self) -> None:
        self.rank: dict = {}
        self.key: dict = {}
        # before this instant the ranked groups' keys keep their order (the order says
        # when: FairShare.rerank); a newcomer ends it
        self.holds_until = -math.inf

    def rank_of(self, group: Any, key: Any) -> float:
        """The rank of ``group``, whose key is ``key`` now; a group not ranked yet is put
        among the others by that key (between two ranks, or equal to a group of equal
        key)."""
        rank = self.rank.get(group)
        if rank is not None:
            return rank
        below: Optional[float] = None
        above: Optional[float] = None
        for other, other_key in self.key.items():
            r = self.rank[other]
            if other_key == key:
                below = above = r
                break
            if other_key < key and (below is None or r > below):
                below = r
            elif other_key > key and (above is None or r < above):
                above = r
        if below is None:
            rank = 0.0 if above is None else above - 1.0
        elif above is None:
            rank = below + 1.0
        else:
            rank = (below + above) / 2.0
        self.rank[group], self.key[group] = rank, key
        self.holds_until = -math.inf
        return rank

    def keep(self, keys: dict, rank: Optional[dict] = None) -> bool:
        """Take the groups' keys now, their ranks known to order them (``rank``: the ranks
        of these groups alone, if known); returns False."""
        if rank is not None:
            self.rank = rank
        elif len(self.rank) != len(keys):  # groups with no queued job leave: if they come
            self.rank = {g: self.rank[g] for g in keys}  # back, they are placed anew
        self.key = keys
        return False

    def rerank(self, keys: dict) -> bool:
        """Take the groups' keys now (those with queued jobs). False if their ranks already
        order them as the keys do (the queue stays as it is); else every group gets a new
        rank and True is returned (the queue must be sorted again)."""
        ordered = sorted(keys.items(), key=itemgetter(1))
        rank = self.rank
        same = True
        previous_key = previous_rank = None
        for group, key in ordered:
            r = rank.get(group)
            if r is None or (previous_rank is not None and (
                    r != previous_rank if key == previous_key else r <= previous_rank)):
                same = False
                break
            previous_key, previous_rank = key, r
        if same:
            return self.keep(keys)
        self.rank, self.key = {}, keys
        level, previous_key = -1.0, None
        for group, key in ordered:
            if key != previous_key:
                level, previous_key = level + 1.0, key
            self.rank[group] = level
        return True

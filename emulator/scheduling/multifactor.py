"""Slurm's multifactor priority (``PriorityType=priority/multifactor``) as a queue order.

A job's priority is the sum of each factor (between 0 and 1) times its ``PriorityWeight*``,
kept as a whole number as Slurm keeps it (at least 1); the highest goes first, ties by
submit time, then trace order:

- age: the time since submission over ``PriorityMaxAge``, at most 1;
- fair share: the user's association's factor (:mod:`.slurmshare`, classic or Fair Tree);
- job size: with ``N`` nodes of ``C`` processors in all, a job of ``n`` nodes and ``c``
  processors has ``(n / N + c / C) / 2`` (``PriorityFavorSmall=YES``: ``((N - n) / N + (C -
  c) / C) / 2``); with ``PriorityFlags=SMALL_RELATIVE_TO_TIME``, ``max(n C / N, c)`` over its
  time limit in minutes, over ``C`` (favouring small: 1 minus that);
- partition: its partition's ``PriorityJobFactor`` over the largest (the partition named
  by the trace's queue number, else the default one);
- QOS: 0 (traces carry no QOS).

Priorities are computed at submission and again at the first scheduling pass of every
``PriorityCalcPeriod`` (usage is decayed on the same period), as Slurm's decay thread does.
:meth:`Multifactor.factors` gives what ``sprio`` shows; :attr:`Multifactor.at_start` keeps
it for every job at its start.
"""

import math
from typing import Any, Optional

from .orders import Order
from .priorities import make_priorities
from .slurmconf import SlurmConfig
from .slurmshare import ShareTree

FACTORS = ("age", "fairshare", "job_size", "partition", "qos")


class Multifactor(Order):
    name = "multifactor"
    static = False
    trusted = True

    def __init__(self, config: SlurmConfig, processors: int, associations: Any = None, *,
                 priorities: Any = make_priorities) -> None:
        """``priorities(tree, period, half-life, fair_tree, weights)`` makes the state the
        order keeps (:mod:`.priorities`: in C where built, else the Python reference)."""
        self.config = config
        self.period_seconds = config.calc_period_seconds
        self.cpus = int(processors)
        self.nodes = max(1, self.cpus // max(1, config.cpus_per_node))
        self.tree = ShareTree(associations)
        top = max((p.priority_job_factor for p in config.partitions), default=0)
        self._partition = {p.name: (p.priority_job_factor / top if top else 0.0)
                           for p in config.partitions}
        default = next((p.name for p in config.partitions if p.default),
                       config.partitions[0].name if config.partitions else None)
        self._default_partition = self._partition.get(default, 1.0)
        self._owner: dict = {}  # (user, group) -> user node
        self._started: list = []  # (job, its start, its fair-share factor then)
        self._by_time = "SMALL_RELATIVE_TO_TIME" in config.flags
        self._statics: dict = {}  # (procs, queue[, requested, estimate]) -> static part
        max_age = config.max_age_seconds
        weights = (config.weights["age"], config.weights["fairshare"],
                   1.0 / max_age if max_age > 0 else math.inf)  # (w_age, w_fs, 1/max age)
        self.state = priorities(self.tree, config.calc_period_seconds,
                                config.decay_half_life_seconds, config.fair_tree, weights)

    @property
    def usage(self) -> Any:
        """Each association's usage, decayed (``advance(now)``, ``usage(node)``)."""
        return self.state.usage

    # -- the factors ------------------------------------------------------------------------

    def owner(self, job: Any) -> tuple:
        who = (job.user, job.group)
        node = self._owner.get(who)
        if node is None:
            known = len(self.tree.index)
            node = self._owner[who] = self.tree.user_of(job.user, job.group)
            if len(self.tree.index) != known:
                self.state.grew()  # a new user changes every Fair Tree rank
        return node

    def fairshare(self, node: tuple, now: float) -> float:
        return self.state.factor(node, now)

    def job_size(self, job: Any) -> float:
        config, C, N = self.config, self.cpus, self.nodes
        c = job.procs
        n = math.ceil(c / max(1, config.cpus_per_node))
        if "SMALL_RELATIVE_TO_TIME" in config.flags:
            limit = job.requested if job.requested is not None and job.requested > 0 \
                else job.estimate
            minutes = max(1, math.ceil(limit / 60.0))
            size = max(n * C / N, c) / minutes / C
            size = 1.0 - size if config.favor_small else size
        elif config.favor_small:
            size = ((N - n) / N + (C - c) / C) / 2.0
        else:
            size = (n / N + c / C) / 2.0
        return min(1.0, max(0.0, size))

    def partition(self, job: Any) -> float:
        """The partition factor: the job's partition (named by its queue number, else the
        default one) over the largest PriorityJobFactor."""
        return self._partition.get(str(job.queue), self._default_partition)

    def factors(self, job: Any, now: float, fairshare: Optional[float] = None) -> dict:
        """Each factor of ``job`` at ``now``, between 0 and 1 (``fairshare``: the fair-share
        factor, if known)."""
        max_age = self.config.max_age_seconds
        age = 1.0 if max_age <= 0 else min(1.0, max(0.0, now - job.submit) / max_age)
        if fairshare is None:
            fairshare = self.fairshare(self.owner(job), now)
        return {"age": age, "fairshare": fairshare,
                "job_size": self.job_size(job),
                "partition": self.partition(job),
                "qos": 0.0}

    def _static(self, job: Any) -> float:
        """The weighted factors that do not change while ``job`` waits: a function of its
        size and partition (and time limit, relative to time) alone, kept for each such."""
        memo_key = (job.procs, job.queue, job.requested, job.estimate) if self._by_time \
            else (job.procs, job.queue)
        static = self._statics.get(memo_key)
        if static is None:
            weights = self.config.weights
            static = self._statics[memo_key] = (weights["job_size"] * self.job_size(job)
                                                + weights["partition"] * self.partition(job))
        return static

    def _enter(self, job: Any) -> None:
        """``job``'s submit time, static part and association, kept while it waits or runs
        (the owner first: a new user changes every Fair Tree rank)."""
        node = self.owner(job)
        self.state.enter(job, job.submit, self._static(job), node)

    def priority(self, job: Any, now: float) -> int:
        """The whole-number priority: the weighted factors summed, at least 1."""
        return self.keys([job], now)[0] * -1

    def _whole(self, job: Any, now: float, fairshare: float) -> int:
        """The priority from a known fair-share factor, summed as :meth:`keys` sums it."""
        weights, max_age = self.config.weights, self.config.max_age_seconds
        per_second = 1.0 / max_age if max_age > 0 else math.inf
        age = (now - job.submit) * per_second if now > job.submit else 0.0
        fs = fairshare if weights["fairshare"] else 0.0
        priority = int(weights["age"] * (age if age < 1.0 else 1.0) + weights["fairshare"] * fs
                       + self._static(job))
        return priority if priority > 1 else 1

    def key(self, job: Any, now: float) -> int:
        state = self.state
        if job not in state:
            self._enter(job)
        return state.key(job, now)

    def keys(self, jobs: Any, now: float) -> list:
        # at every submission and for the whole queue every period (resort, in C)
        state = self.state
        for job in [job for job in jobs if job not in state]:
            self._enter(job)
        return state.keys(jobs, now)

    def resort(self, queue: list, now: float) -> Optional[tuple]:
        """The scheduler's queue sorted by the keys at ``now``, in one C call; None where
        the Python reference keeps the state (the scheduler then sorts by :meth:`keys`)."""
        return self.state.resort(queue, now)

    def sprio(self, job: Any, now: float, fairshare: Optional[float] = None) -> dict:
        """``sprio -l``'s columns for ``job`` at ``now``: the priority and each weighted
        factor (``fairshare``: the fair-share factor then, if known)."""
        factors, weights = self.factors(job, now, fairshare), self.config.weights
        node = self.owner(job)
        weighted = {k: weights[k] * factors[k] for k in FACTORS}
        row = {"job": job.id, "user": node[2], "account": node[1],
               "priority": self._whole(job, now, factors["fairshare"])}
        row.update({k: round(weighted[k], 6) for k in FACTORS})
        row.update({f"{k}_norm": round(factors[k], 6) for k in FACTORS})
        return row

    @property
    def at_start(self) -> dict:
        """Job id -> its ``sprio`` row at its start, in start order."""
        return {job.id: self.sprio(job, now, fs) for job, now, fs in self._started}

    # -- usage ------------------------------------------------------------------------------

    def started(self, job: Any, now: float) -> None:
        if job not in self.state:  # an advance reservation's job was never queued
            self._enter(job)
        self._started.append((job, now, self.state.started(job, self.owner(job), now)))

    def finished(self, job: Any, now: float) -> None:
        self.state.finished(job, now)

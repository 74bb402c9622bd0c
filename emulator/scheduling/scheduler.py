"""The batch scheduler: a queue, running jobs and a policy that decides which jobs start.

One :class:`Scheduler` serves every clock. A trace simulation (:mod:`.simulate`) and the
live coordinator call the same four methods with their own notion of *now*:
:meth:`~Scheduler.submit` when a job arrives, :meth:`~Scheduler.finish` when one ends,
:meth:`~Scheduler.schedule` to start what the policy allows, and
:meth:`~Scheduler.next_wakeup` for the next instant the scheduler wants to act on its own
(an advance reservation's start).

A policy is a queue order (:mod:`.orders`: ``fcfs``, ``sjf``, ``lwf``, ``fairshare`` or
your own) and a backfilling rule:

``none``          jobs start in queue order; the first that does not fit stops the pass.
``easy``          aggressive backfilling (EASY): only the queue head holds a reservation; a
                  later job starts now if it ends before that reservation or uses only
                  processors the head does not need then.
``conservative``  every queued job holds a reservation, made at arrival; a job starts early
                  only where it delays no reservation. When a job ends early, each
                  reservation in queue order is taken out and made again as early as it
                  fits (compression, Mu'alem and Feitelson): no job moves later, so none
                  starts after the reservation it was first given. A job that outlives
                  its estimate, or one that enters the queue ahead of others, makes every
                  reservation again in queue order.
``slurm``         Slurm's backfill: the plan made again at every pass, reservations only
                  within a window, a test limit, a time resolution; a pass every
                  ``bf_interval`` seconds, Slurm's main scheduler (priority order until
                  one waits) at every event between (:mod:`.slurmbackfill`).

The policy names of Smith §3.1 and England and Weissman §IV.A are shorthands: ``fcfs``
(fcfs, none), ``lwf`` (lwf, none), ``easy`` (fcfs, easy), ``conservative`` (fcfs,
conservative).

Priorities and MAXPROC limits come from a :class:`~.policyfile.SitePolicy`: the queue is
ordered by priority first, and a job whose user or group is at its limit is passed over (it
holds no reservation) until the limit allows it. Which processors a starting job gets is a
separate node-selection policy (``nodes``); on a trace any free processors will do.

Conservative backfilling's reservations are kept by :mod:`.conservative`, advance
reservations by :mod:`.advance`; Slurm's backfill pass is :mod:`.slurmbackfill`.
"""

import bisect
import copy
import heapq
import math
from operator import itemgetter

from .advance import AdvanceReservations
from .conservative import ConservativeBackfill
from .estimates import extended_estimate
from .orders import check_key, make_order
from .profile import Profile
from .ranks import GroupRanks
from .slurmbackfill import BackfillParams, slurm_schedule

POLICIES = ("fcfs", "lwf", "easy", "conservative")
SHORTHANDS = {"fcfs": ("fcfs", "none"), "lwf": ("lwf", "none"), "easy": ("fcfs", "easy"),
              "conservative": ("fcfs", "conservative")}
BACKFILLS = ("none", "easy", "conservative", "slurm")
RESOLUTION_SECONDS = 1.0  # SWF's: an estimate below it counts as this long
DEPTH = {"none": 0, "easy": 1, "conservative": math.inf, "slurm": math.inf}


class Scheduler(ConservativeBackfill, AdvanceReservations):
    """A batch scheduler for a machine of ``processors``.

    Parameters
    ----------
    processors : int
        Processors (or, on a time-shared cluster, task slots) of the machine.
    policy : str, optional
        One of :data:`POLICIES`, a shorthand for an order and a backfilling rule (default
        ``easy`` where neither ``order`` nor ``backfill`` is given).
    order : str or Order, optional
        The queue order (:func:`.orders.make_order`), default the policy's.
    backfill : str, optional
        One of :data:`BACKFILLS`, default the policy's.
    site : SitePolicy, optional
        Priorities, MAXPROC limits and reservation settings.
    nodes : object, optional
        A node-selection policy with ``can_place(job)``, ``place(job) -> nodes`` and
        ``release(job)``; without one, any free processors will do.
    slurm : BackfillParams, optional
        The ``slurm`` rule's window, resolution and test limit (default Slurm's: a day,
        60 s, 500 jobs).
    """

    def __init__(self, processors, policy=None, *, order=None, backfill=None, site=None,
                 nodes=None, slurm=None):
        if policy is None and order is None and backfill is None:
            policy = "easy"
        if policy is not None and policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
        own_order, own_backfill = SHORTHANDS.get(policy, ("fcfs", "none"))
        order = own_order if order is None else order
        backfill = own_backfill if backfill is None else backfill
        if backfill not in BACKFILLS:
            raise ValueError(f"unknown backfilling {backfill!r}; choose from "
                             f"{', '.join(BACKFILLS)}")
        if processors < 1:
            raise ValueError(f"processors must be >= 1, got {processors}")
        self.total = int(processors)
        self.free = int(processors)
        self.order = make_order(order, site=site)
        self._trusted = getattr(self.order, "trusted", False) is True
        self.backfill = backfill
        self.slurm = slurm or BackfillParams()  # the slurm rule's window, resolution, limit
        # the shorthand's name where the order and rule are one's, else "ORDER+RULE"
        self.policy = next((p for p, (o, b) in SHORTHANDS.items()
                            if (o, b) == (self.order.name, backfill)),
                           f"{self.order.name}+{backfill}")
        self.site = site
        self.nodes = nodes
        self.queue = []  # (key, job), ordered; may hold started jobs until compacted
        self._stale = 0  # started jobs still in the queue
        self._sizes = {}  # procs -> queued jobs of that size
        self.running = {}  # job -> None: an ordered set
        self.releases = []  # (estimated end, index, job), ordered
        self.used_users, self.used_groups = {}, {}
        self._limits = bool(site and site.has_limits)
        self.granted = []  # advance reservations granted, not yet started (ReservationRequest)
        self._due_tried = -math.inf  # the last instant the due reservations were tried
        self._profile = None  # conservative: the reservations of the queue
        self._slots = []  # conservative: (slot, index, job), a heap; stale entries skipped
        self._dirty = True
        self._compress = False  # conservative: a job ended early, the profile knows
        self._bf_due = None  # slurm: when the next backfill pass runs, if one is due
        self._next_reorder = -math.inf  # an order whose keys change: the next sort
        # an order whose jobs share their group's key: the groups' ranks (see .ranks)
        self._ranks = GroupRanks() if hasattr(self.order, "group_keys") else None
        self._groups = {}  # group -> queued jobs of it

    # -- the queue ------------------------------------------------------------------------

    def _key(self, job, now):
        if self._ranks is None:
            order = self.order  # a built-in order's keys need no checking (Order.trusted)
            key = order.key(job, now) if self._trusted else check_key(order, job, now)
            return (-job.priority, key, job.submit, job.index)
        group = self.order.group(job)
        rank = self._ranks.rank.get(group)
        if rank is None:
            rank = self._ranks.rank_of(group, self.order.key(job, now))
        return (-job.priority, rank, job.submit, job.index)

    def _reorder(self, now):
        """An order whose keys change over time: sort the queue again (conservative
        backfilling makes its reservations again if the order changed). An order of group
        keys (:mod:`.ranks`) sorts only when the groups' order changed, and does not even
        look before its ``rerank`` says the order may have."""
        period = self.order.period_seconds
        self._next_reorder = (math.floor(now / period) + 1) * period if period > 0 else now
        ranks = self._ranks
        if ranks is not None:
            if len(self._groups) < 2 or now < ranks.holds_until:
                return  # one group's jobs keep their order, and keys that cannot cross theirs
            rerank = getattr(self.order, "rerank", None)
            # processors running, at most: a what-if start (start_now) may overcommit
            busiest = self.total - min(self.free, 0)
            moved = rerank(ranks, self._groups, now, busiest) if rerank is not None \
                else ranks.rerank(self.order.group_keys(self._groups.keys(), now))
            if not moved:
                return
        elif self._resort(now):
            return
        jobs = [job for _, job in self.queue if job.start is None]
        if self._ranks is not None:
            group, rank = self.order.group, self._ranks.rank
            waiting = [((-job.priority, rank[group(job)], job.submit, job.index), job)
                       for job in jobs]
        else:
            waiting = [((-job.priority, key, job.submit, job.index), job)
                       for job, key in zip(jobs, self.order.keys(jobs, now))]
        waiting.sort(key=itemgetter(0))
        if self.backfill == "conservative" and [j for _, j in waiting] != jobs:
            self._dirty = True
        self.queue = waiting
        self._stale = 0

    def _resort(self, now):
        """The order sorts the queue itself where it can (:meth:`.orders.Order.resort`);
        False where it cannot."""
        done = self.order.resort(self.queue, now)
        if done is None:
            return False
        self.queue, moved = done
        if moved and self.backfill == "conservative":
            self._dirty = True
        self._stale = 0
        return True

    def submit(self, job, now):
        """A job arrives (its ``estimate`` already set). Raises ValueError if it asks for
        more processors than the machine has, or if it was scheduled before (a job record
        holds one schedule: submit :meth:`~.job.Job.fresh` copies to schedule again)."""
        if job.start is not None or job.end is not None:
            raise ValueError(f"job {job.id} was already scheduled (start {job.start}); "
                             f"submit a fresh copy (Job.fresh) to schedule it again")
        if job.procs > self.total:
            raise ValueError(f"job {job.id} asks for {job.procs} processors, more than the "
                             f"machine's {self.total}")
        if job.estimate is None:
            raise ValueError(f"job {job.id} has no estimate")
        # a job of no length still holds its processors for an instant; at one second it
        # holds them in every profile too, and ending early is what schedulers handle
        job.estimate = max(job.estimate, RESOLUTION_SECONDS)
        if self.site is not None:
            job.priority = self.site.priority(job)
        entry = (self._key(job, now), job)
        self._sizes[job.procs] = self._sizes.get(job.procs, 0) + 1
        if self._ranks is not None:
            self._count_group(job, 1)
        queue = self.queue
        at_end = not queue or entry[0] > queue[-1][0]
        if at_end:
            queue.append(entry)
        else:
            bisect.insort(queue, entry, key=lambda e: e[0])
        if self.backfill == "conservative":
            if not at_end:
                self._dirty = True
            elif self._compress:
                job.slot = None  # reserved by the compression, after the jobs ahead of it
            elif not self._dirty and self._profile is not None and not self._held(job):
                self._profile_from(now)
                self._reserve_slot(job, now)
            else:
                self._dirty = True

    def finish(self, job, now):
        """A running job ended at ``now``."""
        del self.running[job]
        self._release(job)
        self.order.finished(job, now)
        if self._limits:
            self._dirty = True  # a held job may now be eligible
        elif job.est_end > now and self._profile is not None and not self._dirty:
            # ended early: its processors come back now; compress at the next pass
            self._profile.release(now, job.est_end - now, job.procs)
            self._compress = True
        elif job.est_end != now:
            self._dirty = True

    def _release(self, job):
        self.free += job.procs
        i = bisect.bisect_left(self.releases, (job.est_end, job.index))
        del self.releases[i]
        if self._limits:
            self.used_users[job.user] -= job.procs
            self.used_groups[job.group] -= job.procs
        if self.nodes is not None:
            self.nodes.release(job)

    def _held(self, job):
        """True if a MAXPROC limit keeps ``job`` from starting now."""
        if not self._limits:
            return False
        user_max, group_max = self.site.maxproc(job)
        return ((user_max is not None and self.used_users.get(job.user, 0) + job.procs > user_max)
                or (group_max is not None
                    and self.used_groups.get(job.group, 0) + job.procs > group_max))

    def _placeable(self, job, avoid=None):
        if self.nodes is None:
            return True
        return self.nodes.can_place(job, avoid=avoid) if avoid else self.nodes.can_place(job)

    def _count_group(self, job, change):
        """Keep count of the queued jobs of each group of an order of group keys."""
        if self._ranks is not None:
            group = self.order.group(job)
            left = self._groups.get(group, 0) + change
            if left:
                self._groups[group] = left
            else:
                del self._groups[group]

    def _start(self, job, now):
        if job.index >= 0:  # from the queue (not an advance reservation's application)
            sizes = self._sizes
            sizes[job.procs] -= 1
            if not sizes[job.procs]:  # only sizes queued: the smallest is min(sizes)
                del sizes[job.procs]
            if self._ranks is not None:
                self._count_group(job, -1)
        job.start = now
        job.est_end = now + job.estimate
        self.free -= job.procs
        self.running[job] = None
        bisect.insort(self.releases, (job.est_end, job.index, job))
        if self._limits:
            self.used_users[job.user] = self.used_users.get(job.user, 0) + job.procs
            self.used_groups[job.group] = self.used_groups.get(job.group, 0) + job.procs
        if self.nodes is not None:
            job.nodes = self.nodes.place(job)
        self.order.started(job, now)

    def start_now(self, job, now):
        """Start queued ``job`` at ``now`` whatever the policy says (a what-if: the
        turnaround predictions of a placement start the job there first)."""
        self._start(job, now)
        self._drop_started(1)
        if self._ranks is not None:  # the order's bound may assume fewer processors busy
            self._ranks.holds_until = -math.inf

    def _drop_started(self, count):
        """Note ``count`` queued jobs started; compact the queue once many have."""
        self._stale += count
        queue = self.queue
        k = 0
        while k < len(queue) and queue[k][1].start is not None:
            k += 1
        if k:
            del queue[:k]
            self._stale -= k
        if self._stale > 32 and self._stale * 4 > len(self.queue):
            self.queue = [e for e in self.queue if e[1].start is None]
            self._stale = 0

    def waiting(self):
        """The queued jobs, in queue order."""
        return [job for _, job in self.queue if job.start is None]

    # -- scheduling -------------------------------------------------------------------------

    def schedule(self, now):
        """Start every job the policy allows at ``now``; returns them in start order."""
        releases = self.releases
        if releases and releases[0][0] <= now:
            self._extend_overruns(now)
        if not self.queue:
            self._bf_due = None  # Slurm's backfill: nothing waits, no pass due
            return []
        if not self.order.static and now >= self._next_reorder:
            self._reorder(now)
        if self.backfill == "conservative":
            started = self._conservative(now)
        elif self.backfill == "slurm":
            started = slurm_schedule(self, now, self.slurm)
        elif self.granted:
            started = self._general(now, DEPTH[self.backfill])
        elif self.backfill == "easy":
            started = self._easy(now)
        else:
            started = self._in_order(now)
        if started:
            self._drop_started(sum(1 for j in started if j.index >= 0))
        return started

    def _extend_overruns(self, now):
        """Jobs still running past their estimated end get a longer estimate (EASY++)."""
        releases = self.releases
        while releases and releases[0][0] <= now:
            _, _, job = releases.pop(0)
            job.est_end = job.start + extended_estimate(job, now)
            bisect.insort(releases, (job.est_end, job.index, job))
            self._dirty = True

    def _in_order(self, now):
        """FCFS and LWF: start jobs in queue order until one does not fit."""
        started = []
        limits, nodes = self._limits, self.nodes  # site limits, node placement: both rare
        for _, job in self.queue:
            if job.start is not None or (limits and self._held(job)):
                continue
            if job.procs > self.free or (nodes is not None and not self._placeable(job)):
                break
            self._start(job, now)
            started.append(job)
        return started

    def shadow(self, now, procs):
        """EASY's reservation for a job of ``procs``: the earliest estimated time enough
        processors are free (the shadow time), and the processors left over then."""
        avail = self.free
        if avail >= procs:
            return now, avail - procs
        releases = self.releases
        n = len(releases)
        i = 0
        while i < n:
            t = releases[i][0]
            while i < n and releases[i][0] == t:  # every release at that instant
                avail += releases[i][2].procs
                i += 1
            if avail >= procs:
                return max(t, now), avail - procs
        return math.inf, 0

    def _easy(self, now):
        started = []
        limits, nodes = self._limits, self.nodes  # site limits, node placement: both rare
        queue = self.queue
        n = len(queue)
        i = 0
        head = None
        while i < n:
            job = queue[i][1]
            i += 1
            if job.start is not None or (limits and self._held(job)):
                continue
            if job.procs <= self.free and (nodes is None or self._placeable(job)):
                self._start(job, now)
                started.append(job)
            else:
                head = job
                break
        if head is None or self.free == 0:
            if head is not None and head.reserved is None:
                head.reserved = self.shadow(now, head.procs)[0]
            return started
        shadow, extra = self.shadow(now, head.procs)
        if head.reserved is None:
            head.reserved = shadow
        # node-aware placements (time-shared nodes) reserve the head's nodes too: a job that
        # would still run at the shadow time keeps off those the head needs all of then
        reserve = getattr(self.nodes, "reserve", None)
        avoid = reserve(head, [r[2] for r in self.releases if r[0] <= shadow]) \
            if reserve is not None and shadow < math.inf else None
        smallest = min(self._sizes)
        free = self.free  # read once a job: this loop is hot
        while i < n and free >= smallest:
            job = queue[i][1]
            i += 1
            procs = job.procs
            if procs > free or job.start is not None:
                continue
            end = now + job.estimate
            if end > shadow and procs > extra:
                continue
            if limits and self._held(job):
                continue
            if nodes is not None and not self._placeable(job, avoid if end > shadow else None):
                continue
            if end > shadow:
                extra -= procs
            self._start(job, now)
            started.append(job)
            free = self.free
        return started

    def _base_profile(self, now):
        """Free processors from ``now`` on: running jobs by their estimated ends, and the
        advance reservations granted."""
        profile = Profile(now, self.free, [(e, j.procs) for e, _, j in self.releases])
        self._reserve_granted(profile, now)
        return profile

    def next_wakeup(self):
        """The next instant the scheduler must act without an arrival or an ending: the
        start of a granted advance reservation or of a conservative reservation; None if
        there is none. A reservation already tried and waiting for processors (a job
        overran its estimate) wakes nothing: an end or a kill frees them."""
        if not self.granted and not self._slots and self._bf_due is None:
            return None  # EASY's and FCFS's every pass
        wake = next((r.granted_seconds for r in self.granted
                     if r.granted_seconds > self._due_tried), None)
        slots = self._slots
        while slots and (slots[0][2].slot != slots[0][0] or slots[0][2].start is not None):
            heapq.heappop(slots)  # stale: reserved again since, or started
        if slots and not self._dirty and (wake is None or slots[0][0] < wake):
            wake = slots[0][0]
        if self._bf_due is not None and self._sizes and (wake is None or self._bf_due < wake):
            wake = self._bf_due  # Slurm's next backfill pass, something having changed
        return wake

    # -- a copy to simulate forward -------------------------------------------------------

    def snapshot(self, now=None, *, job_copy=None):
        """An independent scheduler in the same state: running jobs (with their start
        times) and queued jobs are copies (``job_copy(job) -> Job``, default
        :meth:`Job.fresh`, with the schedule fields carried over). With ``job_copy`` and
        ``now``, a running copy's estimated end follows its own ``estimate`` (extended if
        already past). Where every copy keeps its job's estimate and estimated end, the
        copy keeps the queue's order and conservative backfilling's reservations as they
        are; otherwise it sorts its queue at ``now`` and makes the reservations again.
        Returns (scheduler, map from original job to copy)."""
        clone = job_copy or (lambda j: j.fresh())
        mapping = {job: clone(job) for job in (*self.running, *self.waiting())}
        # an order's state names jobs (fair share's running ones): it names the copies
        order = self.order if self.order.static else copy.deepcopy(
            self.order, {id(job): c for job, c in mapping.items()})
        other = Scheduler(self.total, order=order, backfill=self.backfill, site=self.site,
                          nodes=None, slurm=self.slurm)
        self._copy_running(other, mapping, now if job_copy is not None else None)
        exact = all(c.estimate == job.estimate and c.est_end == job.est_end
                    for job, c in mapping.items())
        self._copy_queue(other, mapping, now, exact)
        other.granted = [r.copy() for r in self.granted]
        other._due_tried, other._bf_due = self._due_tried, self._bf_due
        other._next_reorder = self._next_reorder
        return other, mapping

    def _copy_running(self, other, mapping, now):
        """The running jobs' copies into ``other``; with ``now``, each copy's estimated end
        follows its own estimate."""
        for job in self.running:
            c = mapping[job]
            c.start, c.est_end, c.reserved = job.start, job.est_end, job.reserved
            if now is not None:
                c.est_end = c.start + max(c.estimate, RESOLUTION_SECONDS)
                if c.est_end <= now:
                    c.est_end = c.start + extended_estimate(c, now)
            other.running[c] = None
            other.free -= c.procs
            bisect.insort(other.releases, (c.est_end, c.index, c))
            if other._limits:
                other.used_users[c.user] = other.used_users.get(c.user, 0) + c.procs
                other.used_groups[c.group] = other.used_groups.get(c.group, 0) + c.procs

    def _copy_queue(self, other, mapping, now, exact):
        """The queued jobs' copies into ``other``: in the queue's own order with their
        reservations where ``exact``, else sorted by their keys at ``now``."""
        if self._ranks is not None:
            other._ranks = copy.deepcopy(self._ranks)
        for key, job in self.queue:
            if job.start is not None:
                continue
            c = mapping[job]
            c.reserved = job.reserved
            if not exact:
                key = other._key(c, job.submit if now is None else now)
            other.queue.append((key, c))
            other._sizes[c.procs] = other._sizes.get(c.procs, 0) + 1
            other._count_group(c, 1)
        other.queue.sort(key=itemgetter(0))
        if exact and self._profile is not None:
            for job, c in mapping.items():
                c.slot = job.slot
            other._profile = self._profile.copy()
            other._slots = [(t, i, mapping[j]) for t, i, j in self._slots
                            if j in mapping and j.start is None and j.slot == t]
            heapq.heapify(other._slots)
            other._dirty, other._compress = self._dirty, self._compress

"""The availability profile of :mod:`.profile` in numpy: the reference the C ``Profile`` is
tested against, and its fallback where the C module is not built."""

import numpy as np

from .resolution import INFINITY, round_up


def _first_fit(bounds, small, starts, duration):
    """The first segment, not ``small``, from whose start (``starts``) the next small segment
    begins at least ``duration`` later; None if there is none. ``bounds`` holds the segments'
    times and one more: where the last one ends."""
    n = len(small)
    positions = np.where(small, np.arange(n), n)
    next_small = np.minimum.accumulate(positions[::-1])[::-1]
    ok = ~small & (bounds[next_small] >= starts + duration)
    k = int(np.argmax(ok))
    return k if ok[k] else None


class PyProfile:
    """Free processors over time from ``now`` on.

    Parameters
    ----------
    now : float
        The first instant of the profile.
    free_now : int
        Processors free at ``now``.
    releases : iterable of (float, int)
        ``(time, procs)``: processors a running job gives back at its estimated end. Times
        at or before ``now`` count as released at ``now``.

    Examples
    --------
    >>> p = PyProfile(0.0, 2, [(10.0, 6)])
    >>> p.earliest(4, 5.0, 0.0)
    10.0
    >>> p.reserve(10.0, 5.0, 4); p.earliest(5, 5.0, 0.0)
    15.0
    """

    __slots__ = ("_t", "_f", "n")

    def __init__(self, now, free_now, releases=()):
        times = [now]
        free = [free_now]
        for t, procs in sorted(releases):
            t = max(t, now)
            if t == times[-1]:
                free[-1] += procs
            else:
                times.append(t)
                free.append(free[-1] + procs)
        self.n = len(times)
        capacity = max(16, 2 * self.n + 1)
        self._t = np.empty(capacity, dtype=np.float64)
        self._f = np.empty(capacity, dtype=np.int64)
        self._t[:self.n] = times
        self._f[:self.n] = free
        self._t[self.n] = INFINITY  # a sentinel past the last breakpoint

    @property
    def times(self):
        return self._t[:self.n]

    @property
    def free(self):
        return self._f[:self.n]

    @classmethod
    def from_running(cls, now, free_now, running, resolution=0.0):
        """The profile of ``free_now`` processors and the running jobs of ``running``,
        ``(estimated end, anything, job)`` in end order (a scheduler's releases), each end
        rounded up to ``resolution`` from ``now``."""
        return cls(now, free_now, [(now + round_up(end - now, resolution), job.procs)
                                   for end, _, job in running])

    def copy(self):
        p = PyProfile.__new__(PyProfile)
        p._t, p._f, p.n = self._t.copy(), self._f.copy(), self.n
        return p

    def __len__(self):
        return self.n

    def advance(self, now):
        """Drop what lies before ``now``."""
        n = self.n
        i = int(np.searchsorted(self._t[:n], now, side="right")) - 1
        if i > 0:
            self._t[:n - i + 1] = self._t[i:n + 1]
            self._f[:n - i] = self._f[i:n]
            self.n = n - i
        if self._t[0] < now:
            self._t[0] = now

    def _split(self, t):
        """Index of the breakpoint at ``t``, made if missing (``t`` >= the first time)."""
        n = self.n
        i = int(np.searchsorted(self._t[:n], t, side="right")) - 1
        if self._t[i] == t:
            return i
        if n + 1 >= len(self._t):
            self._t = np.concatenate((self._t, np.empty(n + 1, dtype=np.float64)))
            self._f = np.concatenate((self._f, np.empty(n + 1, dtype=np.int64)))
        tt, ff = self._t, self._f
        tt[i + 2:n + 2] = tt[i + 1:n + 1]  # the sentinel moves along
        ff[i + 2:n + 1] = ff[i + 1:n]
        tt[i + 1] = t
        ff[i + 1] = ff[i]
        self.n = n + 1
        return i + 1

    def add_release(self, t, procs):
        """``procs`` processors become free at ``t`` and stay free."""
        i = self._split(t)
        self._f[i:self.n] += procs

    def reserve(self, start, duration, procs):
        """Take ``procs`` processors over ``[start, start + duration)``."""
        if duration <= 0:
            return
        i = self._split(start)
        end = start + duration
        j = self._split(end) if end < INFINITY else self.n
        self._f[i:j] -= procs

    def release(self, start, duration, procs):
        """Give ``procs`` processors back over ``[start, start + duration)`` (a reservation
        ended early): :meth:`reserve` of ``-procs``. The C profile also keeps the stretch
        for :meth:`compress_queue`'s ``settled``."""
        self.reserve(start, duration, -procs)

    def earlier_start(self, procs, duration, slot):
        """The earliest start of a job reserved on ``[slot, slot + duration)`` were its
        reservation taken out: ``slot`` itself if nothing earlier fits. It can start at
        ``s`` < ``slot`` only if ``procs`` are free on ``[s, slot)`` (from ``slot`` on, its
        own processors come back), or on the whole of ``[s, s + duration)`` before that."""
        times, free = self._t, self._f
        i = int(np.searchsorted(times[:self.n], slot, side="left"))
        if i == 0:
            return slot
        bad = np.flatnonzero(free[:i] < procs)
        if len(bad) == 0:
            return float(times[0])
        j = int(bad[-1])  # the last segment before the slot that is too small
        if j == 0:
            return float(times[1]) if i > 1 else slot
        # a hole before segment j long enough on its own
        k = _first_fit(times[:j + 1], free[:j] < procs, times[:j], duration)
        if k is not None:
            return float(times[k])
        return float(times[j + 1]) if j + 1 < i else slot

    def compact(self):
        """Merge neighbouring segments with the same free count (reservations taken out
        leave them behind)."""
        n = self.n
        f = self._f[:n]
        keep = np.ones(n, dtype=bool)
        keep[1:] = f[1:] != f[:-1]
        if keep.all():
            return
        idx = np.flatnonzero(keep)
        m = len(idx)
        self._t[:m] = self._t[idx]
        self._f[:m] = self._f[idx]
        self._t[m] = INFINITY
        self.n = m

    def free_at(self, t):
        return int(self._f[int(np.searchsorted(self.times, t, side="right")) - 1])

    def earliest(self, procs, duration, after):
        """The first time >= ``after`` with ``procs`` processors free for ``duration``
        seconds, or None if there is none (more processors than the profile ever frees)."""
        times, free = self._t[:self.n], self._f[:self.n]
        i = max(int(np.searchsorted(times, after, side="right")) - 1, 0)
        start0 = max(after, float(times[0]))
        n = len(times) - i
        # the common cases first: fits in the first segment, or the first few
        if free[i] >= procs and (n == 1 or times[i + 1] >= start0 + duration):
            return start0
        t = times[i:]
        bad = free[i:] < procs
        if not bad.any():
            return start0
        if bad[-1] and bad.all():
            return None
        starts = t.copy()
        starts[0] = start0
        # the sentinel past the last segment stands for 'never too small'
        k = _first_fit(self._t[i:self.n + 1], bad, starts, duration)
        return None if k is None else float(starts[k])

    def fits(self, procs, duration, start):
        """True if ``procs`` processors are free over ``[start, start + duration)``."""
        times = self.times
        i = max(int(np.searchsorted(times, start, side="right")) - 1, 0)
        j = max(int(np.searchsorted(times, start + duration, side="left")), i + 1)
        return bool((self.free[i:j] >= procs).all())

    def nearest(self, procs, duration, target, after):
        """The feasible start time closest to ``target`` (not before ``after``); ties go to
        the earlier time. Candidates are ``target``, the earliest fit, the breakpoints and
        the breakpoints less ``duration`` (a start that ends just as a segment begins)."""
        candidates = {max(target, after)}
        candidates.update(float(t) for t in self.times if t >= after)
        candidates.update(float(t) - duration for t in self.times if t - duration >= after)
        first = self.earliest(procs, duration, after)
        if first is not None:
            candidates.add(first)
        best = None
        for t in sorted(candidates):
            if self.fits(procs, duration, t):
                key = (abs(t - target), t)
                if best is None or key < best:
                    best = key
        return None if best is None else best[1]

    def compress(self, jobs, now):
        """Conservative backfilling's compression (Mu'alem and Feitelson): ``jobs`` are the
        waiting jobs in queue order as ``(procs, estimate, slot or None)``. Each reservation
        in queue order is taken out and made again as early as it fits (a job with no slot,
        queued since the last pass, is reserved behind the others), again up to the last
        one that moved, until nothing moves. Returns each job's new slot (None where nothing
        fits) or False where it did not move; None if a reservation already lies in the past
        (make them all again instead)."""
        self.advance(now)
        slots = [s for _, _, s in jobs]
        moved = [False] * len(jobs)
        limit = len(jobs)
        while limit:  # a job moved up may leave room for one ahead of it: pass again
            last = None
            for k, (procs, estimate, _) in enumerate(jobs):
                if k >= limit and last is None:
                    break
                old = slots[k]
                if old is None:
                    if moved[k]:
                        continue  # reserved already, and nothing fits it
                    t = self.earliest(procs, estimate, now)
                    moved[k], slots[k] = True, t
                    if t is not None:
                        self.reserve(t, estimate, procs)
                    continue
                if old < now:
                    return None
                t = self.earlier_start(procs, estimate, old)
                if t == old:
                    continue
                self.reserve(old, estimate, -procs)
                self.reserve(t, estimate, procs)
                slots[k], moved[k], last = t, True, k
            limit = last or 0
            self.compact()
        return [s if m else False for s, m in zip(slots, moved)]

    def compress_queue(self, queue, now, settled=False):
        """:meth:`compress` over a scheduler's queue of ``(key, job)`` entries (started jobs
        skipped), setting ``slot`` (and ``reserved``, where it is None) on the jobs that
        moved. Returns None if a reservation lies in the past (nothing set), else ``(slot,
        index, job)`` for the jobs given a slot, in queue order.

        ``settled``: the caller vouches that the reservations were compressed (or made in
        queue order, each as early as it fit) when the last compression ended, and that
        room was freed since only by :meth:`release`. The C profile then tries first only
        the jobs those releases freed room for; this reference tries every job, to the same
        slots."""
        waiting = [job for _, job in queue if job.start is None]
        slots = self.compress([(j.procs, j.estimate, j.slot) for j in waiting], now)
        if slots is None:
            return None
        moved = []
        for job, t in zip(waiting, slots):
            if t is False:
                continue
            job.slot = t
            if t is not None:
                if job.reserved is None:
                    job.reserved = t
                moved.append((t, job.index, job))
        return moved

    def plan(self, queue, now, free_now, smallest, window, resolution, max_test):
        """One pass of Slurm's backfill (:mod:`.slurmbackfill`) over a scheduler's queue,
        ``(key, job)`` entries in priority order: started jobs are skipped, at most
        ``max_test`` others looked at. A job that fits now starts (reserved from now); one
        that does not is reserved at its earliest start when that is within ``window``;
        durations rounded up to ``resolution``; a job reserved later that has no ``reserved``
        time yet gets that one. Stops once ``free_now`` is below ``smallest``. Returns the
        jobs that start now, in queue order."""
        self.advance(now)
        out, tested = [], 0
        for _, job in queue:
            if tested >= max_test or free_now < smallest:
                break
            if job.start is not None:
                continue
            tested += 1
            duration = round_up(job.estimate, resolution)
            if job.procs <= free_now and self.fits(job.procs, duration, now):
                t = now
                free_now -= job.procs
            else:
                t = self.earliest(job.procs, duration, now)
                if t is None or not t - now < window:
                    continue
            self.reserve(t, duration, job.procs)
            if t == now:
                out.append(job)
            elif job.reserved is None:
                job.reserved = t
        return out

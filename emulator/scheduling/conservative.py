"""Conservative backfilling's reservations, for :class:`~.scheduler.Scheduler`.

Every queued job holds a reservation on an availability profile (:mod:`.profile`), made at
arrival; a job starts early only where it delays no reservation. When a job ends early, each
reservation in queue order is taken out and made again as early as it fits (compression,
Mu'alem and Feitelson); a job that outlives its estimate, or one that enters the queue ahead
of others, makes every reservation again in queue order.
"""

import heapq


class ConservativeBackfill:
    """The scheduler's conservative rule: its profile (``_profile``), the reservations'
    start times as a heap (``_slots``) and when to make them again (``_dirty``,
    ``_compress``). Mixed into :class:`~.scheduler.Scheduler`, whose state it reads."""

    # stale heap entries (reserved again since, or started) are skipped when met; they are
    # dropped all at once when they outnumber the queue twice over plus this many
    stale_slots_allowed = 64

    def _profile_from(self, now):
        """The conservative profile, moved on to ``now``."""
        self._profile.advance(now)

    def _reserve_slot(self, job, now):
        t = self._profile.earliest(job.procs, job.estimate, now)
        job.slot = t
        if t is not None:
            self._profile.reserve(t, job.estimate, job.procs)
            heapq.heappush(self._slots, (t, job.index, job))
            if job.reserved is None:
                job.reserved = t

    def _compress_slots(self, now):
        """Take each reservation out in queue order and make it again as early as it fits
        (never later: its old place is free again); jobs queued since are reserved after
        the jobs ahead of them, until nothing moves (:meth:`.pyprofile.PyProfile.compress`).
        False if a reservation is already past (then rebuild)."""
        # settled: the profile was made by a rebuild (each reservation as early as it fit, in
        # queue order) or the last compression, and room comes back only by release()
        moved = self._profile.compress_queue(self.queue, now, True)  # sets slot, reserved
        if moved is None:
            return False
        slots = self._slots
        if len(slots) + len(moved) > 2 * len(self.queue) + self.stale_slots_allowed:
            slots = self._slots = [e for e in slots
                                   if e[2].slot == e[0] and e[2].start is None] + moved
            heapq.heapify(slots)
        else:
            for entry in moved:
                heapq.heappush(slots, entry)
        self._compress = False
        return True

    def _rebuild(self, now):
        self._profile = self._base_profile(now)
        self._slots = []
        for _, job in self.queue:
            if job.start is not None:
                continue
            if self._held(job):
                job.slot = None
            else:
                self._reserve_slot(job, now)
        self._dirty = self._compress = False

    def _conservative(self, now):
        started = []
        for _ in range(2):  # a stale promise found: rebuild once and go on
            if self._dirty or self._profile is None:
                self._rebuild(now)
            elif not self._compress:
                self._profile_from(now)
            elif not self._compress_slots(now):
                self._rebuild(now)
            slots = self._slots
            while slots and slots[0][0] <= now:
                slot, _, job = heapq.heappop(slots)
                if job.slot != slot or job.start is not None:
                    continue  # reserved again since, or started
                if job.procs <= self.free and not self._held(job) and self._placeable(job):
                    self._start(job, now)
                    started.append(job)
                    if slot < now:
                        self._dirty = True  # its reservation began before it did
                else:
                    self._dirty = True
                    break
            if not self._dirty:
                break
        return started

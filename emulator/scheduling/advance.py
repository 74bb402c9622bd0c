"""Advance reservations (Smith §5) for :class:`~.scheduler.Scheduler`: granted on a timeline
of what runs and what is queued, started when due (killing restartable queue jobs if the
site allows it), and every policy run on one profile while any is granted.
"""

import bisect
import math

from .job import Job
from .profile import Profile


class AdvanceReservations:
    """Requests for processors at a time: ``granted`` holds those granted and not started.
    Mixed into :class:`~.scheduler.Scheduler`, whose state it reads."""

    def _general(self, now, depth):
        """Start jobs in queue order on a profile that holds the granted advance
        reservations: FCFS and LWF stop at the first job that cannot start (depth 0), EASY
        reserves for that one (depth 1), conservative for every one."""
        profile = self._base_profile(now)
        started = []
        blocked = 0
        for _, job in self.queue:
            if job.start is not None or self._held(job):
                continue
            if (blocked == 0 or depth > 0) and job.procs <= self.free \
                    and profile.fits(job.procs, job.estimate, now) and self._placeable(job):
                profile.reserve(now, job.estimate, job.procs)
                self._start(job, now)
                started.append(job)
                continue
            if depth == 0:
                break
            if blocked < depth:
                t = profile.earliest(job.procs, job.estimate, now)
                if t is not None:
                    profile.reserve(t, job.estimate, job.procs)
                    if job.reserved is None:
                        job.reserved = t
                blocked += 1
        return started

    def _reserve_granted(self, profile, now):
        """Hold on ``profile`` what the granted reservations take from ``now`` on; one due
        and still waiting for processors holds what is left of its window, from now."""
        for req in self.granted:
            start = max(req.granted_seconds, now)
            profile.reserve(start, req.duration_seconds - (start - req.granted_seconds),
                            req.procs)

    def request_reservation(self, req, now):
        """Grant ``req`` at the feasible time nearest to the one asked for, on a timeline of
        the running jobs, the reservations granted and the protected share of the queue
        (those it may not delay); with restartable jobs, of the reservations alone (queue
        jobs make room when it starts). Returns the granted time."""
        if req.procs > self.total:
            raise ValueError(f"reservation {req.id} asks for {req.procs} processors, more "
                             f"than the machine's {self.total}")
        if self.site is not None and self.site.mode == "restartable":
            # queue jobs can be terminated: only reservations stand in the way
            apps = [(e, j.procs) for e, _, j in self.releases if j.index < 0]
            profile = Profile(now, self.total - sum(p for _, p in apps), apps)
            self._reserve_granted(profile, now)
        else:
            profile = self._base_profile(now)
            waiting = self.waiting()
            protected = math.ceil(self.site.queued_priority * len(waiting)) if self.site else 0
            for job in waiting[:protected]:
                t = profile.earliest(job.procs, job.estimate, now)
                if t is not None:
                    profile.reserve(t, job.estimate, job.procs)
        req.granted_seconds = profile.nearest(req.procs, req.duration_seconds, req.start_seconds,
                                              now)
        self.granted.append(req)
        self.granted.sort(key=lambda r: r.granted_seconds)
        self._dirty = True
        return req.granted_seconds

    def start_reservations(self, now):
        """Start the reservations due at ``now``. Returns (reservation jobs started, queue
        jobs killed to make room). With restartable jobs, running queue jobs are killed by
        least cost (work done and work left, weighted) and requeued; otherwise a due
        reservation that does not fit waits."""
        started, killed = [], []
        self._due_tried = now
        for req in [r for r in self.granted if r.granted_seconds <= now]:
            if req.procs > self.free and self.site is not None and self.site.mode == "restartable":
                killed += self._kill_for(req.procs - self.free, now)
            if req.procs > self.free:
                continue  # waits (a job overran its maximum); the next event tries again
            self.granted.remove(req)
            run = req.duration_seconds if req.run_seconds is None else req.run_seconds
            job = Job(-req.id, req.submit_seconds, req.procs, run, estimate=req.duration_seconds,
                      index=-req.id)
            job.info = {"reservation": req}
            req.started_seconds = now
            self._start(job, now)
            started.append(job)
            self._dirty = True
        return started, killed

    def _kill_for(self, procs, now):
        done_weight, left_weight = self.site.restart_cost
        victims = []
        for job in self.running:
            if job.info and "reservation" in job.info:
                continue  # reserved applications are never terminated
            done = job.procs * (now - job.start)
            left = job.procs * max(job.est_end - now, 0.0)
            victims.append((done_weight * done + left_weight * left, job.index, job))
        victims.sort(key=lambda v: v[:2])
        chosen, freed = [], 0
        for _, _, job in victims:
            if freed >= procs:
                break
            chosen.append(job)
            freed += job.procs
        # started jobs may linger in the queue: drop them before the victims go back in
        self.queue = [e for e in self.queue if e[1].start is None]
        self._stale = 0
        for job in chosen:
            del self.running[job]
            self._release(job)
            self.order.finished(job, now)
            job.start = job.est_end = job.end = None
            job.restarts += 1
            self._sizes[job.procs] = self._sizes.get(job.procs, 0) + 1
            self._count_group(job, 1)
            bisect.insort(self.queue, (self._key(job, now), job), key=lambda e: e[0])
        return chosen

"""Advance reservations (Smith §5): a request for N processors at a time T for at most M
seconds, granted at T or at the feasible time nearest to it (the scheduler decides, see
:meth:`~.scheduler.Scheduler.request_reservation`), and Smith's experiment that turns a share
of a trace's jobs into reservation requests."""

import copy
import random
from typing import Optional

HORIZON_SECONDS = 7200.0  # requested start times lie up to two hours after the request


class ReservationRequest:
    """N processors at ``start_seconds`` for at most ``duration_seconds``, asked at
    ``submit_seconds``; the application runs ``run_seconds`` (default: the whole duration).
    The scheduler fills in ``granted_seconds``, ``started_seconds`` and ``end_seconds``.

    >>> r = ReservationRequest(0.0, 60.0, 4, 600.0, id=7)
    >>> r == ReservationRequest(0.0, 60.0, 4, 600.0, id=7), r.copy() is r, r.offset_seconds
    (True, False, None)
    """

    __slots__ = ("submit_seconds", "start_seconds", "procs", "duration_seconds", "run_seconds",
                 "id", "granted_seconds", "started_seconds", "end_seconds")

    def __init__(self, submit_seconds: float, start_seconds: float, procs: int,
                 duration_seconds: float, run_seconds: Optional[float] = None,
                 id: Optional[int] = None) -> None:
        self.submit_seconds, self.start_seconds = submit_seconds, start_seconds
        self.procs, self.duration_seconds, self.run_seconds = procs, duration_seconds, run_seconds
        self.id = id
        self.granted_seconds: Optional[float] = None  # what the scheduler made of it
        self.started_seconds: Optional[float] = None
        self.end_seconds: Optional[float] = None

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable, as the fields it compares

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in
                           zip(self.__slots__, self._values()))
        return f"ReservationRequest({fields})"

    def copy(self) -> "ReservationRequest":
        return copy.copy(self)  # every slot, the scheduler's outcomes too

    @property
    def offset_seconds(self):
        return None if self.granted_seconds is None else self.granted_seconds - self.start_seconds


def jobs_as_reservations(jobs, fraction, *, seed, horizon_seconds=HORIZON_SECONDS):
    """Turn ``fraction`` of ``jobs`` (chosen at random) into reservation requests, as Smith
    did: each asks, at the job's submit time, for its processors at a start time drawn
    uniformly from the next ``horizon_seconds``, for its maximum run time (requested, else
    actual), and runs as long as the job ran. Returns (the other jobs, the requests)."""
    if not 0 <= fraction <= 1:
        raise ValueError(f"the reservation fraction must lie in [0, 1], got {fraction}")
    rng = random.Random(seed)
    chosen = set(rng.sample(range(len(jobs)), round(fraction * len(jobs))))
    kept, requests = [], []
    for i, job in enumerate(jobs):
        if i not in chosen:
            kept.append(job)
            continue
        limit = job.limit()
        requests.append(ReservationRequest(
            submit_seconds=job.submit, start_seconds=job.submit + rng.uniform(0, horizon_seconds),
            procs=job.procs, duration_seconds=max(limit, 1.0), run_seconds=min(job.run, limit),
            id=len(requests) + 1))
    return kept, requests

"""A batch job as the scheduler sees it, and the jobs of an SWF trace.

A job is submitted at ``submit`` asking for ``procs`` processors; ``estimate`` is how long the
scheduler believes it will run (the user's requested time, the actual run time, or a
predictor's output), ``run`` how long it really runs (unknown to the scheduler; ``None`` on a
live cluster until it ends). The scheduler fills in ``start`` and ``end``.
"""

import math
from typing import Any, NamedTuple, Optional, Sequence

from ..workload import _columns  # type: ignore[attr-defined]  # compiled


class Owner(NamedTuple):
    """Who submitted a job, and where: SWF's user, group, executable and queue (fields 12
    to 15; Slurm's user, account, job name and partition); -1 where not known.

    >>> Job(1, 0, 4, 60.0, owner=Owner(user=3, queue=1)).owner
    Owner(user=3, group=-1, executable=-1, queue=1)
    """

    user: Any = -1
    group: Any = -1
    executable: Any = -1
    queue: Any = -1


NOBODY = Owner()


class Job:
    """One job; see the module docstring. ``reserved`` is the first start time the scheduler
    promised it (EASY's reservation of a blocked queue head, or conservative backfilling's
    reservation at arrival), ``None`` if it never had one."""

    __slots__ = ("id", "index", "submit", "procs", "run", "requested", "estimate", "user",
                 "group", "executable", "queue", "priority", "start", "end", "est_end",
                 "killed", "reserved", "slot", "restarts", "nodes", "info")

    def __init__(self, id: Any, submit: float, procs: int, run: Optional[float] = None, *,
                 requested: Optional[float] = None, estimate: Optional[float] = None,
                 owner: Sequence = NOBODY, index: Optional[int] = None) -> None:
        self.id = id
        self.index = id if index is None else index
        self.submit = float(submit)
        self.procs = int(procs)
        self.run = None if run is None else float(run)
        self.requested = None if requested is None or requested < 0 else float(requested)
        self.estimate = estimate
        self.user, self.group, self.executable, self.queue = owner
        self.priority = 0
        self.start = self.end = self.est_end = self.reserved = self.slot = None
        self.killed = False
        self.restarts = 0
        self.nodes = None
        self.info = None

    def __repr__(self) -> str:
        return (f"Job({self.id}, submit={self.submit:g}, procs={self.procs}, run={self.run}, "
                f"estimate={self.estimate}, start={self.start})")

    @property
    def owner(self) -> Owner:
        return Owner(self.user, self.group, self.executable, self.queue)

    @property
    def wait(self) -> Optional[float]:
        return None if self.start is None else self.start - self.submit

    def limit(self) -> Optional[float]:
        """The longest the job may run: its requested time, else (perfect knowledge) its
        actual run time."""
        return self.requested if self.requested is not None else self.run

    def fresh(self) -> "Job":
        """A copy as submitted: same attributes, no schedule."""
        copy = _new_job(Job)  # the attributes are already what __init__ would make them
        copy.id, copy.index, copy.submit, copy.procs = self.id, self.index, self.submit, self.procs
        copy.run, copy.requested, copy.estimate = self.run, self.requested, self.estimate
        copy.user, copy.group = self.user, self.group
        copy.executable, copy.queue = self.executable, self.queue
        copy.priority, copy.info = self.priority, self.info
        copy.start = copy.end = copy.est_end = copy.reserved = copy.slot = copy.nodes = None
        copy.killed = False
        copy.restarts = 0
        return copy


_new_job = object.__new__


def compress_arrivals(jobs: Sequence["Job"], factor: float) -> list:
    """Copies of ``jobs`` (as submitted) with every submit time divided by ``factor`` and
    rounded down to a whole second, as SWF times are: a factor above 1 brings arrivals
    closer and loads the machine more. The jobs given are left as they are.

    >>> jobs = [Job(1, 0, 4, 60.0), Job(2, 7, 2, 30.0), Job(3, 10, 1, 5.0)]
    >>> [j.submit for j in compress_arrivals(jobs, 2.0)]
    [0.0, 3.0, 5.0]
    >>> [j.submit for j in jobs]
    [0.0, 7.0, 10.0]
    """
    if not factor > 0:
        raise ValueError(f"the compression factor must be positive, got {factor}")
    out = [job.fresh() for job in jobs]
    if factor != 1.0:
        for job in out:
            job.submit = float(math.floor(job.submit / factor))
    return out


def attribute_values(jobs: Sequence["Job"], name: str) -> "memoryview[float]":
    """Attribute ``name`` of every job as a float64 memoryview, NaN where it is None.

    >>> a, b = Job(1, 0, 4, 60.0), Job(2, 5, 2, 30.0)
    >>> a.start = 3.0
    >>> attribute_values([a, b], "start").tolist()
    [3.0, nan]
    """
    return memoryview(_columns.attribute_column(list(jobs), name)).cast("d")


def jobs_from_trace(trace: Any, compress: float = 1.0) -> list:
    """The jobs of an SWF :class:`~emulator.workload.swf.Trace`, in file order; their
    arrivals compressed by ``compress`` as :func:`compress_arrivals` does.

    >>> from emulator.workload.swf import Trace
    >>> trace = Trace([[1, 0, 0, 60, 4, -1, -1, 4, 120, -1, 1, 3, 1, -1, 1, -1, -1, -1],
    ...                [2, 7, 0, 30, 2, -1, -1, 2, -1, -1, 1, 5, 1, -1, 1, -1, -1, -1]])
    >>> [(j.id, j.submit, j.procs, j.run, j.requested, j.user) for j in jobs_from_trace(trace, 2)]
    [(1, 0.0, 4, 60.0, 120.0, 3), (2, 3.0, 2, 30.0, None, 5)]
    """
    if not compress > 0:
        raise ValueError(f"the compression factor must be positive, got {compress}")
    submit, run, requested = (trace.values(name) for name in ("submit", "run", "requested_time"))
    procs = trace.procs_column()
    if not all(math.isfinite(sum(column)) for column in (submit, run, requested, procs)):
        # a value float() or int() refuses: Job says what is wrong
        names = ("job", "user", "group", "executable", "queue")
        rows = zip(*(trace.values(name) for name in names))
        jobs = [Job(int(r[0]), submit[i], int(procs[i]), run[i], requested=requested[i],
                    owner=(int(r[1]), int(r[2]), int(r[3]), int(r[4])), index=i)
                for i, r in enumerate(rows)]
        return compress_arrivals(jobs, compress) if compress != 1.0 else jobs
    if compress != 1.0:  # as compress_arrivals does it, in C
        submit = _columns.floor_quotients(trace.view("submit"), compress)
    # each job as Job(id, submit, procs, run, requested=..., owner=..., index=i) makes it,
    # its values already of their types, made in C (half the time of Python's, on NASA);
    # int() of each id and owner (ValueError or OverflowError for NaN or an infinity)
    columns = {slot: _columns.whole_numbers(trace.view(name)) for slot, name in
               (("id", "job"), ("user", "user"), ("group", "group"),
                ("executable", "executable"), ("queue", "queue"))}
    columns.update(index=list(range(len(procs))), submit=submit,
                   procs=_columns.whole_numbers(procs),
                   run=run, requested=[None if r < 0 else r for r in requested])
    return _columns.new_objects(Job, len(procs), {**columns, **_UNSCHEDULED})


# a job's attributes before any schedule, as Job.__init__ sets them
_UNSCHEDULED = dict(estimate=None, start=None, end=None, est_end=None, reserved=None,
                    slot=None, nodes=None, info=None, priority=0, restarts=0, killed=False)

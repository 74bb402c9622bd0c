"""One policy over a whole trace, as ``nodesel schedule`` runs it: the trace's jobs (arrivals
compressed), advance reservations (the site's, and a share of the jobs turned into requests
as Smith did), the run-time estimates the scheduler believes, and the rule that ends a job at
its requested time.

>>> from emulator.workload.swf import read_swf
>>> from emulator.workload.traces import resolve_trace
>>> from emulator.scheduling.scheduler import Scheduler
>>> trace = read_swf(resolve_trace("nasa"))
>>> options = TraceRunOptions(compress_arrivals=2.0)
>>> run = schedule_trace(trace, lambda n: Scheduler(n, "easy"), options)
>>> round(sum(j.start - j.submit for j in run.simulation.jobs) / len(run.simulation.jobs))
75422
"""

from typing import Any, Callable, NamedTuple, Optional

from .estimates import Function, estimator
from .job import jobs_from_trace
from .reservations import jobs_as_reservations
from .simulate import Simulation, Watch, simulate_owned

__all__ = ["TraceRunOptions", "TraceRun", "check_trace_options", "trace_jobs",
           "schedule_trace"]


class TraceRunOptions(NamedTuple):
    """How a trace is run. ``estimates``: ``actual`` or ``requested`` (a predictor is given
    to :func:`schedule_trace` as ``estimator``); ``compress_arrivals``: submit times divided
    by it; ``kill_at_requested``: a job ends at its requested time; ``reservation_fraction``:
    that share of the jobs becomes advance reservation requests (random, by ``seed``)."""

    estimates: str = "actual"
    compress_arrivals: float = 1.0
    kill_at_requested: bool = False
    reservation_fraction: float = 0.0
    seed: int = 1


class TraceRun(NamedTuple):
    """What came of it: the simulation, and what the scheduler believed run times were
    (``maximum`` where non-restartable reservations must hold)."""

    simulation: Simulation
    estimates: str


def check_trace_options(trace: Any, options: TraceRunOptions) -> None:
    """Raise ValueError, naming the trace, for options the trace cannot serve."""
    if not 0 <= options.reservation_fraction <= 1:
        raise ValueError(f"the reservation fraction must lie in [0, 1], got "
                         f"{options.reservation_fraction}")
    if not options.compress_arrivals > 0:
        raise ValueError(f"the arrival compression must be positive, got "
                         f"{options.compress_arrivals}")
    if options.estimates == "requested" and not trace.has("requested_time"):
        raise ValueError(f"{trace.path}: no job has a requested time (SWF field 9); use "
                         "--estimates actual")
    if options.kill_at_requested and not trace.has("requested_time"):
        raise ValueError(f"{trace.path}: --kill-at-requested needs requested times (SWF "
                         "field 9)")


def trace_jobs(trace: Any, options: TraceRunOptions) -> tuple:
    """(the jobs a run of ``trace`` schedules, the reservation requests made of the others):
    arrivals compressed, ``options.reservation_fraction`` of the jobs turned into requests."""
    jobs = jobs_from_trace(trace, options.compress_arrivals)
    if not options.reservation_fraction:
        return jobs, []
    return jobs_as_reservations(jobs, options.reservation_fraction, seed=options.seed)


def schedule_trace(trace: Any, make_scheduler: Callable[[int], Any],
                   options: TraceRunOptions, *, site: Any = None, estimator_obj: Any = None,
                   progress: Optional[Callable[[int], None]] = None) -> TraceRun:
    """Simulate ``make_scheduler(processors)`` over ``trace`` as ``options`` say.

    ``site``: the policy file's settings (its advance reservations are requested too);
    ``estimator_obj``: what the scheduler believes a run time is (default: the one
    ``options.estimates`` names). Raises ValueError for options the trace cannot serve or a
    reservation larger than the machine."""
    check_trace_options(trace, options)
    processors = trace.max_procs
    jobs, converted = trace_jobs(trace, options)
    requests = (list(site.reservations) if site is not None else []) + converted
    for r in requests:
        if r.procs > processors:
            raise ValueError(f"reservation {r.id} asks for {r.procs} processors, more than "
                             f"the machine's {processors}")
    est = estimator_obj if estimator_obj is not None else estimator(options.estimates)
    label = options.estimates
    mode = getattr(site, "mode", "nonrestartable")
    nonrestartable = bool(requests) and mode == "nonrestartable"
    if nonrestartable:  # reservations must hold: schedule with maximum run times
        est, label = Function(lambda job, now: job.limit(), "maximum"), "maximum"
    # the jobs were made for this run alone: scheduled as they are, not copied
    sim = simulate_owned(jobs, make_scheduler(processors), estimator=est,
                         kill_at_requested=options.kill_at_requested or nonrestartable,
                         reservations=requests, watch=Watch(progress=progress))
    return TraceRun(sim, label)

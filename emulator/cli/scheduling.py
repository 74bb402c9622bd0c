"""The ``schedule`` command: simulate a batch scheduler over an SWF trace."""

import os
import sys

from ..errors import UserError
from .common import (collector_off, command, finite_float, fraction, output_folder,
                     positive_float)
from .workload import NASA, read_trace, trace_options


def register(sub):
    sch = command(sub, "schedule",
                  help="simulate a batch scheduler over a trace (FCFS, LWF, EASY, conservative)",
                  examples=[f"nodesel schedule {NASA} --policy easy --estimates actual "
                            "--out results/schedule",
                            f"nodesel schedule {NASA} --policy fcfs,lwf,easy,conservative "
                            "--compress-arrivals 1.93 --out results/nasa90",
                            "nodesel schedule W.swf --policy conservative --estimates requested "
                            "--kill-at-requested --policy-file site.toml --out results/w",
                            "nodesel schedule W.swf --policy easy,conservative --estimates smith "
                            "--out results/w-smith",
                            f"nodesel schedule {NASA} --order sjf --backfill easy "
                            "--out results/sjf",
                            "nodesel schedule SDSC-SP2-1998-4.2-cln.swf.gz --order my_order.py:key "
                            "--backfill conservative --estimates requested --out results/mine",
                            "nodesel schedule CTC-SP2-1996-3.1-cln.swf.gz --slurm-conf slurm.conf "
                            "--associations assoc.txt --estimates requested --kill-at-requested"],
                  handler=cmd_schedule)
    trace_options(sch)
    sch.add_argument("--policy",
                     help="fcfs, lwf, easy or conservative, or several comma-separated, or all "
                          "(default easy); each a shorthand of an order and a backfilling "
                          "rule (easy = --order fcfs --backfill easy)")
    sch.add_argument("--order",
                     help="the queue order: fcfs, sjf, lwf, fairshare (FS* settings from "
                          "--policy-file), multifactor (Slurm's, with --slurm-conf), or "
                          "FILE.py:NAME, your function NAME(job, now) returning a sort key "
                          "(smallest first) or class with key(job, now) (default fcfs)")
    sch.add_argument("--backfill", choices=("none", "easy", "conservative", "slurm"),
                     help="the backfilling rule with --order (default easy; slurm: Slurm's "
                          "sched/backfill, with --slurm-conf)")
    sch.add_argument("--slurm-conf",
                     help="a site's slurm.conf: PriorityType, PriorityWeight*, "
                          "PriorityDecayHalfLife, PriorityMaxAge, PriorityCalcPeriod, "
                          "PriorityFavorSmall, PriorityFlags, SchedulerType, "
                          "SchedulerParameters bf_window/bf_resolution/bf_max_job_test, "
                          "PartitionName PriorityJobFactor; it sets the order and the "
                          "backfill unless --order or --backfill is given")
    sch.add_argument("--associations",
                     help="with --slurm-conf: accounts, users and their shares, as "
                          "'sacctmgr show assoc --parsable2' prints them (default: every "
                          "trace group an account of 1 share, every user 1 share in it)")
    sch.add_argument("--estimates", default="actual",
                     help="what the policies schedule with: requested (the user's requested "
                          "time, SWF field 9), actual (the run time: perfect knowledge), or a "
                          "run-time predictor learning online (last2, smith, ibl, li-temp-est, "
                          "li-lsterr, li-aver; fitted on --train-fraction); default actual")
    sch.add_argument("--train-fraction", type=fraction, default=0.3,
                     help="with a predictor as --estimates: the share of the trace it is "
                          "fitted on (default 0.3)")
    sch.add_argument("--fit", choices=("error", "wait"), default="error",
                     help="with smith predictors: fit the templates to the least run-time "
                          "error (default) or to the least mean wait of the training share "
                          "scheduled with the predictions by the run's own policy (Smith §4)")
    sch.add_argument("--kill-at-requested", action="store_true",
                     help="end a job at its requested time if it would run longer")
    sch.add_argument("--policy-file",
                     help="priorities, MAXPROC limits and advance reservations: TOML, or Maui "
                          "GROUPCFG[...]/USERCFG[...] lines")
    sch.add_argument("--compress-arrivals", type=positive_float, default=1.0,
                     help="divide every submit time by this factor (rounded down to a whole "
                          "second), to make the trace heavier (default 1)")
    sch.add_argument("--reservation-fraction", type=float, default=0.0,
                     help="turn this share of the jobs into advance reservation requests for "
                          "up to two hours ahead, as Smith did (default 0)")
    sch.add_argument("--seed", type=int, default=1,
                     help="seed of --reservation-fraction and of predictor searches (default 1)")
    sch.add_argument("--out", help="output folder; its parent must exist (default "
                                   "results/schedule, created as needed)")
    sch.add_argument("--gantt", action="store_true",
                     help="draw gantt.png, a Gantt chart of a window of the schedule")
    sch.add_argument("--gantt-start-seconds", type=finite_float,
                     help="start of the Gantt chart's window (default: the first start)")
    sch.add_argument("--gantt-hours", type=positive_float, default=24.0,
                     help="length of the Gantt chart's window (default 24)")
    sch.add_argument("--no-progress", action="store_true", help="no progress bar")


def policies_of(text):
    from ..scheduling.scheduler import POLICIES

    names = list(POLICIES) if text == "all" else [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in POLICIES]
    if unknown or not names:
        raise UserError(f"unknown policy {unknown[0] if unknown else text!r}; choose from "
                        f"{', '.join(POLICIES)} (or all)")
    return names


def schedulers_of(args, site):
    """``[(label, make_scheduler(processors))]`` the command runs: the --policy shorthands,
    one --order with one --backfill rule, or a --slurm-conf site."""
    from ..scheduling.scheduler import Scheduler

    if args.slurm_conf:
        return [_slurm_site(args, site)]
    if args.associations:
        raise UserError("--associations needs --slurm-conf")
    if args.order is None and args.backfill is None:
        return [(p, lambda n, p=p: Scheduler(n, p, site=site))
                for p in policies_of(args.policy or "easy")]
    if args.policy is not None:
        raise UserError("give --policy, or --order and --backfill, not both")
    if args.order == "multifactor" or args.backfill == "slurm":
        asked = "order multifactor" if args.order == "multifactor" else "backfill slurm"
        raise UserError(f"--{asked} needs --slurm-conf (a slurm.conf with at least its "
                        "weights)")
    order, backfill = args.order or "fcfs", args.backfill or "easy"
    label = Scheduler(1, order=order, backfill=backfill, site=site).policy  # checks the order
    return [(label, lambda n: Scheduler(n, order=order, backfill=backfill, site=site))]


def _slurm_site(args, site):
    """(label, make_scheduler) of the site --slurm-conf describes; the parameters it does not
    model are listed once on stderr."""
    from ..scheduling.slurm import slurm_scheduler
    from ..scheduling.slurmconf import read_associations, read_slurm_conf

    if args.policy is not None:
        raise UserError("give --policy or --slurm-conf, not both")
    config = read_slurm_conf(args.slurm_conf)
    associations = read_associations(args.associations) if args.associations else None
    if config.unused:
        print(f"nodesel: {args.slurm_conf}: not modelled, left aside: "
              f"{', '.join(config.unused)}", file=sys.stderr)

    def make(n):
        scheduler = slurm_scheduler(n, config, associations, order=args.order,
                                    backfill=args.backfill, site=site)
        made.append(scheduler)
        return scheduler

    made = []
    make.made = made
    return slurm_scheduler(1, config, order=args.order, backfill=args.backfill,
                           site=site).policy, make


def _predicting(args, trace, options, scheduler_of=None):
    """A run-time predictor as the estimator, fitted on the first jobs of the trace (with
    ``--fit wait``, for the least wait under ``scheduler_of()``): the jobs the run
    schedules (:func:`~emulator.scheduling.trace_run.trace_jobs`)."""
    from ..prediction.evaluate import fit_predictor, predictor_names
    from ..prediction.online import Online, completion_times
    from ..scheduling.trace_run import trace_jobs

    jobs, _ = trace_jobs(trace, options)

    try:
        predictor_names(args.estimates, jobs)
    except ValueError as e:
        raise UserError(f"--estimates {args.estimates}: {e}") from None
    ordered = sorted(jobs, key=lambda j: (j.submit, j.index))
    ends = completion_times([j.fresh() for j in ordered], trace.max_procs)
    predictor, _ = fit_predictor(args.estimates, ordered, ends,
                                 train_fraction=args.train_fraction, seed=args.seed,
                                 fit=args.fit, scheduler_of=scheduler_of)
    return Online(predictor)


def _write_sprio(path, scheduler):
    """sprio.csv: every job's priority and weighted factors at its start."""
    import csv
    import io

    from ..files import write_text_atomic
    from ..scheduling.slurm import SPRIO_COLUMNS, sprio_rows

    rows = sprio_rows(scheduler)
    if not rows:
        return
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=SPRIO_COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(path, buf.getvalue())


def _site_policy(path):
    """The policy file's settings, or None (its module is imported only for a file)."""
    if not path:
        return None
    from ..scheduling.policyfile import read_policy_file

    return read_policy_file(path)


def cmd_schedule(args):
    with collector_off():
        return _schedule(args)


def _write_files(folder, trace, sim, processors, columns, slurm_scheduler):
    """A run's jobs.csv, batsim_jobs.csv, schedule.swf (where every job of the trace was
    scheduled) and, for a Slurm site, sprio.csv."""
    from ..scheduling import metrics
    from ..scheduling.batsim_out import write_batsim_jobs_csv

    metrics.write_jobs_csv(os.path.join(folder, "jobs.csv"), sim.jobs, columns=columns)
    if slurm_scheduler is not None:
        _write_sprio(os.path.join(folder, "sprio.csv"), slurm_scheduler)
    write_batsim_jobs_csv(os.path.join(folder, "batsim_jobs.csv"), sim.jobs, processors,
                          columns=columns)
    if len(sim.jobs) == len(trace):
        metrics.write_scheduled_swf(os.path.join(folder, "schedule.swf"), trace, sim.jobs,
                                    columns=columns)


def _schedule(args):
    from ..files import write_json_atomic, write_text_atomic
    from ..scheduling import metrics
    from ..scheduling.estimates import estimator
    from ..scheduling.trace_run import TraceRunOptions, check_trace_options, schedule_trace

    from ..prediction import is_predictor

    site = _site_policy(args.policy_file)
    schedulers = schedulers_of(args, site)
    predicting = is_predictor(args.estimates) and args.estimates != "requested"
    if not predicting:
        estimator(args.estimates)  # an unknown name fails before any work
    options = TraceRunOptions(estimates=args.estimates, compress_arrivals=args.compress_arrivals,
                              kill_at_requested=args.kill_at_requested,
                              reservation_fraction=args.reservation_fraction, seed=args.seed)
    trace = read_trace(args)
    try:
        check_trace_options(trace, options)
    except ValueError as e:
        raise UserError(str(e)) from None
    out = output_folder(args.out, "results/schedule")
    processors = trace.max_procs
    summaries = []
    for policy, make in schedulers:
        est = _predicting(args, trace, options, lambda: make(processors)) if predicting \
            else None
        bar = None
        if not args.no_progress and sys.stderr.isatty():
            from tqdm import tqdm

            bar = tqdm(total=len(trace), desc=policy, unit="job", leave=False)
        progress = (lambda done: bar.update(done - bar.n)) if bar else None
        try:
            run = schedule_trace(trace, make, options, site=site, estimator_obj=est,
                                 progress=progress)
        except ValueError as e:
            raise UserError(str(e)) from None
        finally:
            if bar is not None:
                bar.close()
        sim = run.simulation
        folder = out if len(schedulers) == 1 else os.path.join(out, policy)
        os.makedirs(folder, exist_ok=True)
        columns = metrics.job_columns(sim.jobs)  # read once for the summary and the files
        summary = metrics.summarize(sim, dropped_jobs=trace.dropped, estimates=run.estimates,
                                    columns=columns)
        summary.update(trace=trace.path, compress_arrivals=args.compress_arrivals,
                       kill_at_requested=args.kill_at_requested,
                       filled_requested_jobs=trace.filled)
        summaries.append(summary)
        _write_files(folder, trace, sim, processors, columns,
                     make.made[-1] if getattr(make, "made", None) else None)
        write_json_atomic(os.path.join(folder, "summary.json"), summary)
        if args.gantt:
            from ..scheduling.gantt import plot_gantt

            start = args.gantt_start_seconds
            plot_gantt(sim.jobs, processors, os.path.join(folder, "gantt.png"),
                       start_seconds=start,
                       end_seconds=None if start is None else start + args.gantt_hours * 3600,
                       title=f"{policy} on {os.path.basename(trace.path)}"
                       + (f", arrivals compressed {args.compress_arrivals:g}x"
                          if args.compress_arrivals != 1 else ""))
        print(f"{policy}: {summary['jobs']} jobs, utilisation "
              f"{100 * summary['utilization']:.1f}%, "
              f"mean wait {summary['mean_wait_seconds']:.0f} s, "
              f"mean bounded slowdown {summary['mean_bounded_slowdown']:.2f} "
              f"({summary['simulated_jobs_per_second']:.0f} jobs/s simulated)", flush=True)
    if len(schedulers) > 1:
        write_json_atomic(os.path.join(out, "summary.json"), {"policies": summaries})
    write_text_atomic(os.path.join(out, "table.md"), metrics.summary_table(summaries))
    print(f"results in {out}")
    return 0

"""The ``predict`` commands: run times, waits and published start times."""

import os
import sys

from ..errors import UserError
from .common import (actions, command, finite_float, fraction, output_folder, positive_float,
                     positive_int)
from .workload import NASA, read_trace, trace_options


def register(sub):
    predict = actions(sub, "predict",
                      help="predict run times, waits and start times (Smith; Li et al.)",
                      examples=[f"nodesel predict runtime {NASA} --predictor all "
                                "--out results/runtime",
                                f"nodesel predict wait {NASA} --policy easy --compress-arrivals "
                                "1.93 --runtimes actual,smith --out results/wait",
                                f"nodesel predict starts {NASA} --at 864000 --policy-file "
                                "site.toml"])
    _register_runtime(predict)
    _register_wait(predict)
    _register_starts(predict)


def _register_runtime(predict):
    rt = command(predict, "runtime", help="fit run-time predictors on a training prefix of "
                                          "a trace and evaluate them online on the rest",
                 examples=[f"nodesel predict runtime {NASA} --predictor all "
                           "--train-fraction 0.3 --out results/runtime",
                           "nodesel predict runtime W.swf --predictor requested,last2,smith"],
                 handler=cmd_runtime)
    trace_options(rt)
    rt.add_argument("--predictor", default="all",
                    help="requested, last2, smith, ibl, smith-sq, ibl-sq (fitted to the "
                         "least squared error: means, not medians), li-temp-est, li-lsterr, "
                         "li-aver; several comma-separated, or all (default)")
    _common(rt)


def _register_wait(predict):
    wt = command(predict, "wait", help="predict every job's wait at its submission by "
                                       "simulating the scheduler forward (technique 1) and from "
                                       "similar past states (technique 2), against the "
                                       "schedule that actually happens",
                 examples=[f"nodesel predict wait {NASA} --policy easy --compress-arrivals 1.93 "
                           "--runtimes actual,smith --out results/wait",
                           "nodesel predict wait W.swf --policy conservative --runtimes "
                           "actual,requested,li-aver",
                           f"nodesel predict wait {NASA} --compress-arrivals 1.93 --runtimes "
                           "smith,ibl,smith+ibl --mean-of smith,ibl --select work,wait",
                           f"nodesel predict wait {NASA} --compress-arrivals 1.93 --runtimes "
                           "smith-sq+ibl-sq",
                           f"nodesel predict wait {NASA} --compress-arrivals 1.93 --runtimes "
                           "actual,smith-sq --future-arrivals 24"],
                 handler=cmd_wait)
    trace_options(wt)
    _scheduler_options(wt)
    wt.add_argument("--runtimes", default="actual",
                    help="run times the forward simulation believes: actual, requested, or a "
                         "predictor (see predict runtime); several comma-separated "
                         "(default actual)")
    wt.add_argument("--mean-of", action="append", default=[], metavar="NAMES",
                    help="also score the mean of the forecasts made with these --runtimes "
                         "sources (comma-separated, two or more); may be repeated")
    wt.add_argument("--select", metavar="RULES",
                    help="choose on the training prefix the forecast with predicted run times "
                         "to trust, and score it on the rest as 'selected': work (the "
                         "predictor of --runtimes that errs least on the processor-seconds of "
                         "32 consecutive completed jobs), wait (forecast the prefix too; the "
                         "predictor or --mean-of that errs least there) or work,wait")
    wt.add_argument("--future-arrivals", type=positive_float, metavar="HOURS",
                    help="each forward simulation also takes in the jobs of the last HOURS, "
                         "submitted again HOURS later, as the arrivals to come (default: "
                         "no later arrivals)")
    wt.add_argument("--quantile", type=fraction, metavar="Q",
                    help="also publish, for each job at submission, an upper bound on its wait "
                         "meant to hold for a share Q of jobs (e.g. 0.95), beside a "
                         "QBETS-style peer: jobs.csv gains bound_seconds and "
                         "qbets_bound_seconds, summary.json 'bounds'")
    wt.add_argument("--bound-runtimes", metavar="NAME",
                    help="the --runtimes source whose forecasts the bound scales (default "
                         "the first)")
    wt.add_argument("--no-technique2", action="store_true",
                    help="skip the prediction from similar scheduler states")
    _common(wt)


def _register_starts(predict):
    st = command(predict, "starts", help="publish start times per group and user: simulate "
                                         "the trace up to --at, add one probe job per group "
                                         "and user with a policy, and simulate forward (Li "
                                         "et al. §4.1)",
                 examples=[f"nodesel predict starts {NASA} --at 864000 --policy-file site.toml",
                           f"nodesel predict starts {NASA} --at 864000 --runtimes smith "
                           "--out results/starts"],
                 handler=cmd_starts)
    trace_options(st)
    _scheduler_options(st)
    st.add_argument("--at", type=finite_float, required=True,
                    help="the snapshot time, in seconds from the trace's start")
    st.add_argument("--runtimes", default="actual",
                    help="run times the forward simulation believes: actual, requested or a "
                         "predictor (default actual)")
    st.add_argument("--probe-procs", type=positive_int, default=1,
                    help="processors each probe job asks for (default 1)")
    st.add_argument("--train-fraction", type=fraction, default=0.3,
                    help="share of the trace a predictor is fitted on (default 0.3)")
    st.add_argument("--seed", type=int, default=1, help="seed of the predictor searches")
    st.add_argument("--out", help="also write the table as CSV, JSON, Markdown and a plot here")


def _common(p):
    p.add_argument("--train-fraction", type=fraction, default=0.3,
                   help="share of the jobs (first by submission) predictors are fitted on; "
                        "errors are measured on the rest (default 0.3)")
    p.add_argument("--seed", type=int, default=1, help="seed of the predictor searches "
                                                       "(default 1)")
    p.add_argument("--out", help="output folder; its parent must exist (default "
                                 "results/predict, created as needed)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _scheduler_options(p):
    p.add_argument("--policy", default="easy",
                   help="the scheduler: fcfs, lwf, easy or conservative (default easy)")
    p.add_argument("--estimates",
                   help="what the scheduler itself schedules with: actual, requested or a "
                        "predictor (default: requested where the trace has requested times, "
                        "else actual)")
    p.add_argument("--policy-file",
                   help="priorities and MAXPROC limits (TOML or Maui GROUPCFG/USERCFG lines)")
    p.add_argument("--kill-at-requested", action="store_true",
                   help="end a job at its requested time if it would run longer")
    p.add_argument("--compress-arrivals", type=positive_float, default=1.0,
                   help="divide every submit time by this factor (rounded down to a whole "
                        "second), to load the trace more (default 1)")


def _jobs(args, trace):
    from ..scheduling.job import compress_arrivals, jobs_from_trace

    jobs = compress_arrivals(jobs_from_trace(trace), getattr(args, "compress_arrivals", 1.0))
    jobs.sort(key=lambda j: (j.submit, j.index))
    return jobs


def _bar(args, total, desc):
    if getattr(args, "no_progress", False) or not sys.stderr.isatty():
        return None, None
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="job", leave=False, dynamic_ncols=True)
    return bar, bar.update


def _log(text):
    print(text, file=sys.stderr, flush=True)


def cmd_runtime(args):
    import numpy as np

    from ..files import write_json_atomic, write_text_atomic
    from ..prediction import evaluate
    from ..prediction.online import completion_times

    trace = read_trace(args)
    jobs = _jobs(args, trace)
    try:
        names = evaluate.predictor_names(args.predictor, jobs)
    except ValueError as e:
        raise UserError(f"{trace.path}: {e}") from None
    out = output_folder(args.out, "results/predict")
    waits = trace.column("wait")[[j.index for j in jobs]]
    ends = completion_times(jobs, trace.max_procs, waits=waits)
    bar, update = _bar(args, len(jobs) * len(names), "predicting")
    try:
        result = evaluate.evaluate_runtimes(jobs, ends, names,
                                            train_fraction=args.train_fraction, seed=args.seed,
                                            log=_log, progress=update)
    except ValueError as e:
        raise UserError(f"{trace.path}: {e}") from None
    finally:
        if bar is not None:
            bar.close()
    summary = result["summary"]
    summary.update(trace=trace.path, dropped_jobs=trace.dropped)
    write_text_atomic(os.path.join(out, "jobs.csv"), evaluate.runtime_csv(jobs, result))
    write_json_atomic(os.path.join(out, "summary.json"), summary)
    table = evaluate.runtime_table(summary)
    write_text_atomic(os.path.join(out, "table.md"), table)
    evaluate.plot_error_cdf(evaluate.test_errors(result), os.path.join(out, "errors-cdf.png"),
                            f"run-time prediction errors, {os.path.basename(trace.path)}")
    grid = evaluate.li_grid(summary)
    if grid:
        write_text_atomic(os.path.join(out, "li-grid.csv"),
                          evaluate.li_grid_csv(grid, float(np.mean(
                              [j.run for j in jobs[:summary["train_jobs"]]]))))
        evaluate.plot_li_grid(grid, os.path.join(out, "li-grid.png"),
                              f"Li et al.'s templates and estimators, "
                              f"{os.path.basename(trace.path)}")
    print(table, end="")
    print(f"results in {out}")
    return 0


def _scheduler_estimator(args, trace, jobs):
    """The scheduler's own estimator, and whether predictors may be fitted."""
    from ..prediction.evaluate import PREDICTORS
    from ..scheduling.estimates import estimator

    name = args.estimates or ("requested" if trace.has("requested_time") else "actual")
    if name in ("actual", "requested"):
        if name == "requested" and not trace.has("requested_time"):
            raise UserError(f"{trace.path}: no job has a requested time (SWF field 9); use "
                            "--estimates actual")
        return estimator(name)
    if name not in PREDICTORS:
        raise UserError(f"unknown --estimates {name!r}; choose actual, requested or one of "
                        f"{', '.join(PREDICTORS)}")
    from ..prediction.online import Online

    return Online(_fit(args, trace, jobs, [name])[0])


def _fit(args, trace, jobs, names):
    """The named predictors fitted on the training prefix, searches shared."""
    from ..prediction.evaluate import fit_predictors
    from ..prediction.online import completion_times

    ends = completion_times(jobs, trace.max_procs)
    predictors, _ = fit_predictors(names, jobs, ends, train_fraction=args.train_fraction,
                                   seed=args.seed, log=_log)
    return predictors


def _sources(args, trace, jobs, text):
    from ..prediction.evaluate import PREDICTORS, is_predictor, predictor_names
    from ..prediction.waits import Source

    names = [n.strip() for n in text.split(",") if n.strip()]
    learning = []
    for name in names:
        if name in ("actual", "requested"):
            if name == "requested" and not trace.has("requested_time"):
                raise UserError(f"{trace.path}: no job has a requested time (SWF field 9), "
                                "so --runtimes requested cannot be used")
        elif is_predictor(name):
            try:
                predictor_names(name, jobs)
            except ValueError as e:
                raise UserError(f"--runtimes {name}: {e}") from None
            learning.append(name)
        else:
            raise UserError(f"unknown --runtimes {name!r}; choose actual, requested or one of "
                            f"{', '.join(PREDICTORS)}, or join predictors with + for the mean "
                            "of their predictions")
    if not names:
        raise UserError("--runtimes names nothing")
    fitted = iter(_fit(args, trace, jobs, learning) if learning else ())
    return [Source(name, next(fitted) if name in learning else None) for name in names]


def _site(args):
    from ..scheduling.policyfile import read_policy_file
    from ..scheduling.scheduler import POLICIES

    if args.policy not in POLICIES:
        raise UserError(f"unknown policy {args.policy!r}; choose from {', '.join(POLICIES)}")
    return read_policy_file(args.policy_file) if args.policy_file else None


def cmd_wait(args):
    from ..files import write_json_atomic, write_text_atomic
    from ..prediction.evaluate import plot_error_cdf
    from ..prediction.waits import WaitStudy, evaluate_waits, wait_csv, wait_table

    site = _site(args)
    trace = read_trace(args)
    if args.kill_at_requested and not trace.has("requested_time"):
        raise UserError(f"{trace.path}: --kill-at-requested needs requested times (SWF field 9)")
    jobs = _jobs(args, trace)
    out = output_folder(args.out, "results/predict")
    est = _scheduler_estimator(args, trace, jobs)
    sources = _sources(args, trace, jobs, args.runtimes)
    means = [[n.strip() for n in text.split(",") if n.strip()] for text in args.mean_of]
    known = [s.name for s in sources]
    for group in means:
        if len(group) < 2 or any(n not in known for n in group) or len(set(group)) < len(group):
            raise UserError(f"--mean-of {','.join(group)}: name two or more different sources "
                            f"of --runtimes ({', '.join(known)})")
    select = _selection_rules(args.select)
    if args.bound_runtimes is not None:
        if args.quantile is None:
            raise UserError("--bound-runtimes needs --quantile")
        if args.bound_runtimes not in known:
            raise UserError(f"--bound-runtimes {args.bound_runtimes}: not one of --runtimes "
                            f"({', '.join(known)})")
    if args.quantile is not None and not 0 < args.quantile < 1:
        raise UserError(f"--quantile {args.quantile:g}: must be between 0 and 1")
    split = max(1, min(len(jobs) - 1, int(round(args.train_fraction * len(jobs)))))
    evaluate = [j.index for j in jobs[split:]]
    bar, update = _bar(args, len(jobs), f"{args.policy}, predicting waits")
    try:
        study = WaitStudy(
            site=site, evaluate=evaluate, kill_at_requested=args.kill_at_requested,
            technique2=not args.no_technique2, means=means,
            future_seconds=3600 * args.future_arrivals if args.future_arrivals else 0.0,
            train=[j.index for j in jobs[:split]] if select else (), select=select,
            quantile=args.quantile, bound_source=args.bound_runtimes)
        summary, rows = evaluate_waits([j.fresh() for j in jobs], trace.max_procs,
                                       args.policy, sources, est, study, progress=update)
    finally:
        if bar is not None:
            bar.close()
    summary.update(trace=trace.path, compress_arrivals=args.compress_arrivals,
                   train_jobs=split, dropped_jobs=trace.dropped)
    write_json_atomic(os.path.join(out, "summary.json"), summary)
    write_text_atomic(os.path.join(out, "jobs.csv"), wait_csv(rows))
    table = wait_table(summary)
    write_text_atomic(os.path.join(out, "table.md"), table)
    names = [n for n in rows if n not in ("index", "wait", "bound", "qbets_bound")]
    plot_error_cdf({n: abs(rows[n] - rows["wait"]) for n in names},
                   os.path.join(out, "errors-cdf.png"),
                   f"wait prediction errors, {args.policy}, {os.path.basename(trace.path)}")
    print(table, end="")
    print(f"results in {out}")
    return 0


def _selection_rules(text):
    from ..prediction.waits import SELECTION_RULES

    if text is None:
        return ()
    rules = tuple(r.strip() for r in text.split(",") if r.strip())
    bad = [r for r in rules if r not in SELECTION_RULES]
    if bad or not rules or len(set(rules)) < len(rules):
        raise UserError(f"--select {text}: name one or both of the rules "
                        f"{', '.join(SELECTION_RULES)}, comma-separated")
    return rules


def cmd_starts(args):
    from ..files import write_json_atomic, write_text_atomic
    from ..prediction.starts import (Machine, plot_starts, published_starts, starts_csv,
                                     starts_table)

    site = _site(args)
    trace = read_trace(args)
    jobs = _jobs(args, trace)
    if args.probe_procs > trace.max_procs:
        raise UserError(f"--probe-procs {args.probe_procs} is more than the machine's "
                        f"{trace.max_procs} processors")
    est = _scheduler_estimator(args, trace, jobs)
    source = _sources(args, trace, jobs, args.runtimes)
    if len(source) != 1:
        raise UserError("predict starts takes one --runtimes source")
    machine = Machine(trace.max_procs, args.policy, site=site,
                      kill_at_requested=args.kill_at_requested)
    result = published_starts(jobs, machine, est, source[0], args.at,
                              probe_procs=args.probe_procs,
                              unix_start=trace.header_number("UnixStartTime"))
    table = starts_table(result)
    print(table, end="")
    if args.out:
        out = output_folder(args.out, "results/starts")
        write_json_atomic(os.path.join(out, "summary.json"), result)
        write_text_atomic(os.path.join(out, "starts.csv"), starts_csv(result))
        write_text_atomic(os.path.join(out, "table.md"), table)
        plot_starts(result, os.path.join(out, "starts.png"))
        print(f"results in {out}")
    return 0

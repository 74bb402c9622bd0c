"""Workload commands: ``workload fit`` (the model of England and Weissman, fitted to a trace),
``workload generate`` (a synthetic SWF trace from a model) and ``workload show`` (a trace's
figures)."""

import json
import os

from ..errors import InputFileError, UserError
from .common import actions, command, positive_int

NASA = "nasa"  # the built-in NASA iPSC/860 trace


def trace_options(p):
    p.add_argument("trace", help="SWF trace: .swf, .swf.gz, or a .zip holding one; 'nasa' is "
                                 "the built-in NASA Ames iPSC/860 trace (1993, 18,239 jobs)")
    p.add_argument("--processors", type=positive_int,
                   help="processors of the machine (default: the header's MaxProcs)")
    p.add_argument("--skip-bad", action="store_true",
                   help="drop malformed lines (a wrong field count, a field that is not a "
                        "number) and count them, instead of stopping at the first")
    p.add_argument("--strict", action="store_true",
                   help="refuse jobs that cannot be scheduled (no size, no run time, larger "
                        "than the machine) and missing requested times, naming the first, "
                        "instead of dropping and filling them")
    p.add_argument("--fill-requested", default="max",
                   help="a missing requested time (in a trace that has them): max, the "
                        "trace's largest request (default); run, the job's run time; or "
                        "SECONDS")
    p.add_argument("--size-field", choices=("requested", "allocated"), default="requested",
                   help="a job's size: requested processors (SWF field 8, else field 5; "
                        "default) or allocated (field 5, else field 8)")


def read_trace(args, *, quiet=False):
    """The trace of ``args``: read, then the jobs a schedule can use (the notes printed)."""
    from ..workload.swf import prepare
    from ..workload.traces import resolve_trace

    trace = read_any(resolve_trace(args.trace), skip_bad=args.skip_bad)
    if len(trace) == 0:
        raise InputFileError(args.trace, None, "holds no jobs")
    if trace.dropped:
        print(f"dropped {trace.dropped} malformed lines, e.g. {trace.drop_reasons[0]}",
              flush=True)
    try:
        trace, notes = prepare(trace, machine_procs=args.processors, strict=args.strict,
                               fill_requested=args.fill_requested, size_field=args.size_field)
    except ValueError as e:
        if isinstance(e, InputFileError):
            raise
        raise UserError(f"--fill-requested: {e}") from None
    if len(trace) == 0:
        raise InputFileError(args.trace, None, "holds no job that can be scheduled")
    if args.processors:
        trace = trace.with_header(MaxProcs=args.processors)
    if not quiet:
        for note in notes:
            print(note, flush=True)
    return trace


def read_any(path, *, skip_bad=False, source="auto"):
    """A trace file as it is: a Batsim workload (``source`` "batsim", or "auto" and a
    ``.json`` name) or SWF."""
    from ..workload.swf import read_swf

    if source == "batsim" or (source == "auto" and str(path).endswith(".json")):
        from ..workload.batsim import read_batsim

        return read_batsim(path)
    return read_swf(path, skip_bad=skip_bad, check=False)


def check_out(path):
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UserError(f"the folder of {path}, {parent}, does not exist")
    if os.path.isdir(path):
        raise UserError(f"{path} is a folder; give a file name")


def register(sub):
    wsub = actions(sub, "workload", help="job traces (SWF) and the workload model of England and "
                                           "Weissman",
                   examples=[f"nodesel workload show {NASA} --plot nasa.png",
                             f"nodesel workload fit {NASA} --out model.json",
                             "nodesel workload generate --model model.json --jobs 100000 "
                             "--seed 1 --out W.swf"])
    fit = command(wsub, "fit", help="fit the workload model to a trace",
                  examples=[f"nodesel workload fit {NASA} --out model.json",
                            f"nodesel workload fit {NASA} --out model.json --size-runtime "
                            "correlated"],
                  handler=cmd_workload)
    trace_options(fit)
    fit.add_argument("--out", required=True, help="the model's JSON file")
    fit.add_argument("--components", type=positive_int, default=4,
                     help="Weibulls in the run-time mixture; 1 is England and Weissman's "
                          "single Weibull (default 4)")
    fit.add_argument("--arrival-periods", type=positive_int, metavar="K",
                     help="K periods of the day, each with one arrival rate, placed where "
                          "they fit the hourly rates best (England and Weissman used 6; "
                          "default: a rate per hour of the week, or of the day on a trace "
                          "shorter than 4 weeks)")
    fit.add_argument("--size-runtime", choices=("independent", "correlated"),
                     default="independent",
                     help="independent: run time does not depend on size, as England and "
                          "Weissman found (default); correlated: keep the trace's correlation")
    gen = command(wsub, "generate", help="sample a synthetic trace from a model",
                  examples="nodesel workload generate --model model.json --jobs 100000 --seed 1 "
                           "--out W.swf",
                  handler=cmd_workload)
    gen.add_argument("--model", required=True, help="model JSON from 'nodesel workload fit'")
    gen.add_argument("--jobs", type=positive_int, required=True, help="jobs to generate")
    gen.add_argument("--seed", type=int, required=True,
                     help="random seed (the same seed gives the same file, byte for byte)")
    gen.add_argument("--out", required=True, help="the SWF file (.swf or .swf.gz)")
    gen.add_argument("--modal-requests", action="store_true",
                     help="where the model has no requested times, give each user's run of "
                          "jobs one round requested time (5 min to 2 days) above its run times")
    conv = command(wsub, "convert", help="convert a trace between SWF and Batsim's workload "
                   "JSON", handler=cmd_convert,
                   examples=[f"nodesel workload convert {NASA} --to batsim --out nasa.json",
                             "nodesel workload convert nasa.json --to swf --out nasa.swf",
                             "nodesel workload convert sacct.txt --from sacct --to swf "
                             "--out site.swf"])
    conv.add_argument("trace", help="SWF (.swf, .swf.gz, a .zip holding one, 'nasa') or a "
                                    "Batsim workload (.json)")
    conv.add_argument("--from", dest="source", choices=("auto", "swf", "batsim", "sacct"),
                      default="auto", help="the input's format (default: by its name, .json "
                                           "Batsim, else SWF); sacct: sacct --parsable2 output, "
                                           "of which JobIDRaw (or JobID), Submit, Start, End, "
                                           "Timelimit, AllocCPUS (or NCPUS), ReqCPUS, User, "
                                           "Group, Partition and State are read")
    conv.add_argument("--to", required=True, choices=("swf", "batsim"),
                      help="the format to write")
    conv.add_argument("--out", required=True, help="the file to write")
    show = command(wsub, "show", help="print a trace's figures, and plot them",
                   examples=[f"nodesel workload show {NASA}",
                             f"nodesel workload show {NASA} --plot nasa.png --json"],
                   handler=cmd_workload)
    trace_options(show)
    show.add_argument("--plot", help="PNG: arrivals by hour, sizes, run times against the fits")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")
    show.add_argument("--components", type=positive_int, default=4,
                      help="Weibulls in the mixture compared with the trace (default 4)")


def cmd_convert(args):
    """The trace as read (nothing filled), in the other format; to Batsim, less the jobs it
    cannot hold (counted)."""
    from ..workload.traces import resolve_trace

    check_out(args.out)
    if args.source == "sacct":
        from ..workload.sacct import read_sacct

        trace, unfinished = read_sacct(args.trace)
        if unfinished:
            print(f"left out {unfinished} job(s) still pending or running")
    else:
        trace = read_any(resolve_trace(args.trace), source=args.source)
    if args.to == "batsim":
        from ..workload.batsim import holdable, write_batsim

        keep = holdable(trace)
        if not keep.all():
            print(f"left out {int((~keep).sum())} job(s) with no size, no run time or a "
                  f"negative submit time: a Batsim workload cannot hold them")
            trace = trace.subset(keep)
        write_batsim(args.out, trace)
    else:
        from ..workload.swf import write_swf

        write_swf(args.out, trace)
    print(f"wrote {args.out}: {len(trace)} jobs of {trace.path} as {args.to}")
    return 0


def cmd_workload(args):
    from ..workload.model import fit_model, read_model, sample

    if args.action == "fit":
        check_out(args.out)
        if args.arrival_periods is not None and args.arrival_periods > 24:
            raise UserError(f"--arrival-periods {args.arrival_periods}: a day has 24 hours")
        trace = read_trace(args)
        try:
            model = fit_model(trace, components=args.components, size_runtime=args.size_runtime,
                              arrival_periods=args.arrival_periods)
        except ValueError as e:
            raise InputFileError(args.trace, None, str(e)) from None
        model.write(args.out)
        from ..workload.summary import offered_utilization

        probe = sample(model, 20000, seed=0)
        print(f"wrote {args.out}: {len(trace)} jobs of {trace.path} on {model.machine_procs} "
              f"processors; arrivals per hour of the "
              f"{'week' if model.period_hours == 168 else 'day'}"
              f"{f' in {len(model.arrival_periods)} periods' if model.arrival_periods else ''}"
              f", {len(model.sizes)} sizes, {len(model.runtime['weights'])} Weibull(s), "
              f"{len(model.users)} users, run correlation {model.run_correlation:.2f}; "
              f"offered utilisation {100 * offered_utilization(probe):.1f}% "
              f"(the trace's {100 * offered_utilization(trace):.1f}%)")
        return 0
    if args.action == "generate":
        from ..workload.swf import write_swf

        check_out(args.out)
        model = read_model(args.model)
        trace = sample(model, args.jobs, seed=args.seed, modal_requests=args.modal_requests)
        write_swf(args.out, trace)
        print(f"wrote {args.out}: {args.jobs} jobs, seed {args.seed}")
        return 0
    from ..workload.summary import plot_workload, summarize, summary_lines

    trace = read_trace(args)
    try:
        summary = summarize(trace, components=args.components)
    except ValueError as e:  # too few jobs to fit run times
        raise InputFileError(args.trace, None, str(e)) from None
    if args.plot:
        check_out(args.plot)
        plot_workload(trace, summary, args.plot)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print("\n".join(summary_lines(summary)))
        if args.plot:
            print(f"wrote {args.plot}")
    return 0

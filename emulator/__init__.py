"""nodesel: an emulator and resource manager for shared clusters, driven by MPI.

The objects a study needs are here at the top level, one name each; a module is imported the
first time one of its names is used, so a node rank or a scheduling run loads only what it
calls. ``help(emulator)`` lists them all; each carries its own documentation.

Clusters, scenarios and the flow model
    crossbar, load_cluster, cluster_from_dict, describe_cluster, node_names,
    generate_streams, static_timeline, load_scenario, Timeline, simulate_flows, read_flows,
    read_graph, to_node_link
Node selection and communication patterns (Goteti and Subhlok)
    builtin_pattern, resolve_pattern, pattern_from_matrix, pattern_names, pair_bandwidths,
    max_min_select, all_all_select, random_select, Selection, Candidate
Skeletons through the flow model
    SkeletonSimulator
Workloads and traces (SWF; England and Weissman's model)
    read_swf, write_swf, read_batsim, write_batsim, prepare_trace, Trace, resolve_trace,
    offered_utilization,
    fit_model, sample_jobs, read_model
The batch scheduler
    Job, Owner, jobs_from_trace, compress_arrivals, Scheduler, POLICIES, simulate_schedule,
    schedule_trace, TraceRunOptions, Simulation, Watch, schedule_summary, make_order, Order,
    SitePolicy, Credential, read_policy_file, ReservationRequest, Actual, Requested,
    EstimateFunction, estimator
Predictions (Smith; Li et al.)
    evaluate_runtimes, fit_predictor, predictor_names, evaluate_waits, WaitStudy, Source,
    predict_start, probe_starts, published_starts, StartsMachine, ForecastBound, QBETSBound
Turnaround on time-shared nodes (Hanzich et al.)
    BatchJob, read_batch_jobs, generate_batch_jobs, estimate_ends, CISNE_ESTIMATORS
Load sharing across a grid (England and Weissman)
    Grid, Site, read_grid, simulate_grid
Errors
    UserError, InputFileError, SelectionError

Example: one trace under two policies (the jobs given are never changed).

>>> import emulator as ns
>>> trace = ns.read_swf(ns.resolve_trace("nasa"))
>>> jobs = ns.compress_arrivals(ns.jobs_from_trace(trace), 2.0)
>>> for policy in ("fcfs", "easy"):
...     sim = ns.simulate_schedule(jobs, ns.Scheduler(trace.max_procs, policy))
...     print(policy, round(ns.schedule_summary(sim)["mean_wait_seconds"]))
fcfs 440280
easy 75422

The subpackages, by domain: ``network`` (clusters, scenarios, status graphs, the flow
model), ``shaping`` and ``kernel`` (in-process and tc shaping), ``selection``, ``coordinator``
(the MPI runtime), ``experiments``, ``workload``, ``scheduling``, ``prediction``, ``batch``,
``grid``, and ``cli`` (the ``nodesel`` command, a thin door over this API).
"""

import importlib as _importlib
import os as _os

_BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"
_blas_default = False  # this process gave itself one BLAS thread (_one_blas_thread)


def _one_blas_thread() -> None:
    """numpy's OpenBLAS runs a thread per core once loaded, each spinning a while (about
    0.1 s of CPU) though nodesel asks it for nothing: one thread, unless the user set
    ``OPENBLAS_NUM_THREADS``. Call before numpy is imported. Programs started for the user
    do not inherit this default (:func:`emulator.coordinator.launch.user_environment`)."""
    global _blas_default
    if _BLAS_THREADS_ENV not in _os.environ:
        _os.environ[_BLAS_THREADS_ENV] = "1"
        _blas_default = True


if any(k in _os.environ for k in ("PMI_RANK", "OMPI_COMM_WORLD_RANK")):
    _one_blas_thread()  # a rank emulates one node, and ranks outnumber cores

# public name -> (module, name in it); a leading "." is a module of this package
_API = {
    # clusters, scenarios and the flow model
    "crossbar": (".network.cluster", "crossbar"),
    "load_cluster": (".network.cluster", "load_cluster"),
    "cluster_from_dict": (".network.cluster", "cluster_from_dict"),
    "describe_cluster": (".network.cluster", "describe"),
    "node_names": (".network.cluster", "node_names"),
    "generate_streams": (".network.scenario", "generate_streams"),
    "static_timeline": (".network.scenario", "static_timeline"),
    "load_scenario": (".network.scenario", "load_scenario"),
    "Timeline": (".network.scenario", "Timeline"),
    "simulate_flows": (".network.sharing", "simulate"),
    "read_flows": (".network.flowfile", "read_flows"),
    "read_graph": (".network.netgraph", "read_graph"),
    "to_node_link": (".network.netgraph", "to_node_link"),
    # node selection and patterns
    "builtin_pattern": (".selection.patterns", "builtin_pattern"),
    "resolve_pattern": (".selection.patternfile", "resolve_pattern"),
    "pattern_from_matrix": (".selection.patternfile", "pattern_from_matrix"),
    "pattern_names": (".selection.patterns", "pattern_names"),
    "pair_bandwidths": (".selection.maxmin", "pair_bandwidths"),
    "max_min_select": (".selection.maxmin", "max_min_select"),
    "all_all_select": (".selection.maxmin", "all_all_select"),
    "random_select": (".selection.maxmin", "random_select"),
    "Selection": (".selection.maxmin", "Selection"),
    "Candidate": (".selection.maxmin", "Candidate"),
    # skeletons
    "SkeletonSimulator": ("skeletons.simulate", "Simulator"),
    # workloads and traces
    "read_swf": (".workload.swf", "read_swf"),
    "write_swf": (".workload.swf", "write_swf"),
    "prepare_trace": (".workload.swf", "prepare"),
    "Trace": (".workload.swf", "Trace"),
    "resolve_trace": (".workload.traces", "resolve_trace"),
    "read_batsim": (".workload.batsim", "read_batsim"),
    "write_batsim": (".workload.batsim", "write_batsim"),
    "offered_utilization": (".workload.summary", "offered_utilization"),
    "fit_model": (".workload.model", "fit_model"),
    "sample_jobs": (".workload.model", "sample"),
    "read_model": (".workload.model", "read_model"),
    # the batch scheduler
    "Job": (".scheduling.job", "Job"),
    "Owner": (".scheduling.job", "Owner"),
    "jobs_from_trace": (".scheduling.job", "jobs_from_trace"),
    "compress_arrivals": (".scheduling.job", "compress_arrivals"),
    "Scheduler": (".scheduling.scheduler", "Scheduler"),
    "POLICIES": (".scheduling.scheduler", "POLICIES"),
    "simulate_schedule": (".scheduling.simulate", "simulate"),
    "schedule_trace": (".scheduling.trace_run", "schedule_trace"),
    "TraceRunOptions": (".scheduling.trace_run", "TraceRunOptions"),
    "Simulation": (".scheduling.simulate", "Simulation"),
    "Watch": (".scheduling.simulate", "Watch"),
    "schedule_summary": (".scheduling.metrics", "summarize"),
    "make_order": (".scheduling.orders", "make_order"),
    "Order": (".scheduling.orders", "Order"),
    "SitePolicy": (".scheduling.policyfile", "SitePolicy"),
    "Credential": (".scheduling.policyfile", "Credential"),
    "read_policy_file": (".scheduling.policyfile", "read_policy_file"),
    "ReservationRequest": (".scheduling.reservations", "ReservationRequest"),
    "Actual": (".scheduling.estimates", "Actual"),
    "Requested": (".scheduling.estimates", "Requested"),
    "EstimateFunction": (".scheduling.estimates", "Function"),
    "estimator": (".scheduling.estimates", "estimator"),
    # predictions
    "evaluate_runtimes": (".prediction.evaluate", "evaluate_runtimes"),
    "fit_predictor": (".prediction.evaluate", "fit_predictor"),
    "predictor_names": (".prediction.evaluate", "predictor_names"),
    "evaluate_waits": (".prediction.waits", "evaluate_waits"),
    "WaitStudy": (".prediction.waits", "WaitStudy"),
    "Source": (".prediction.waits", "Source"),
    "predict_start": (".prediction.forward", "predict_start"),
    "probe_starts": (".prediction.forward", "probe_starts"),
    "published_starts": (".prediction.starts", "published_starts"),
    "StartsMachine": (".prediction.starts", "Machine"),
    "ForecastBound": (".prediction.bounds", "ForecastBound"),
    "QBETSBound": (".prediction.bounds", "QBETSBound"),
    # turnaround on time-shared nodes
    "BatchJob": (".batch.jobs", "BatchJob"),
    "read_batch_jobs": (".batch.jobs", "read_jobs"),
    "generate_batch_jobs": (".batch.jobs", "generate_jobs"),
    "estimate_ends": (".batch.cisne", "estimate_ends"),
    "CISNE_ESTIMATORS": (".batch.cisne", "ESTIMATORS"),
    # load sharing across a grid
    "Grid": (".grid.gridfile", "Grid"),
    "Site": (".grid.gridfile", "Site"),
    "read_grid": (".grid.gridfile", "read_grid"),
    "simulate_grid": (".grid.simulate", "simulate_grid"),
    # errors
    "UserError": (".errors", "UserError"),
    "InputFileError": (".errors", "InputFileError"),
    "SelectionError": (".errors", "SelectionError"),
}

__all__ = sorted(_API)


def __getattr__(name: str) -> object:
    try:
        module, attribute = _API[name]
    except KeyError:
        raise AttributeError(f"module 'emulator' has no attribute {name!r}") from None
    value = getattr(_importlib.import_module(module, __name__), attribute)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))

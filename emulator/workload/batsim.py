"""Batsim workloads (JSON) as traces, and traces as Batsim workloads.

A Batsim workload gives the machine's size (``nb_res``), its jobs (``id``, ``subtime``,
``res``, ``walltime``, ``profile``) and profiles by name. A job's run time is its profile's
``delay`` (``"type": "delay"``), ended at its walltime as Batsim ends it; a job whose profile
gives no run time (``parallel``, ``parallel_homogeneous``, ``composed``, ...) cannot be
scheduled here and is refused, counted by profile. Read, a workload becomes an SWF
:class:`~emulator.workload.swf.Trace`: job number (the id, or its position where the id is
not a number), submit, run, processors (requested and allocated), requested time, and
``MaxProcs`` from ``nb_res``; the other SWF fields are missing (-1).

Written, each job gets a ``delay`` profile shared by the jobs of the same run time, and an
``swf`` object with the SWF fields Batsim has no word for (wait, status, user, group,
executable, queue, ...) and the SWF run time where it outlasts the walltime (Batsim would
end it there): read back, the trace is the one written (Batsim ignores the extra fields).

>>> from emulator.workload.swf import Trace
>>> import numpy as np
>>> row = np.full(18, -1.0); row[[0, 1, 3, 4, 7, 8]] = [1, 0, 50, 4, 4, 100]
>>> doc = to_batsim(Trace(np.array([row]), header=[" MaxProcs: 8"]))
>>> doc["nb_res"], doc["jobs"][0]["res"], doc["profiles"][doc["jobs"][0]["profile"]]
(8, 4, {'type': 'delay', 'delay': 50.0})
"""

import json
from typing import Any, Optional

import numpy as np

from ..errors import InputFileError
from ..files import digits_only, finite_number, read_input_text, write_json_atomic
from .swf import COLUMN, FIELDS, MISSING, Trace

__all__ = ["read_batsim", "from_batsim", "to_batsim", "write_batsim", "holdable"]

# what Batsim's own fields carry; the rest travel in each job's "swf" object
CARRIED = ("job", "submit", "run", "allocated_procs", "requested_procs", "requested_time")
EXTRA = tuple(f for f in FIELDS if f not in CARRIED)


def read_batsim(path: str) -> Trace:
    """The trace of a Batsim workload file. Raises InputFileError naming the file, the job
    (by index and id) and the field."""
    text = read_input_text(path, "Batsim workload (JSON)")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputFileError(path, f"line {e.lineno}", f"not JSON: {e.msg}") from None
    return from_batsim(doc, path)


def _number(path: str, where: str, value: Any, *, positive: bool = False) -> float:
    if not finite_number(value):
        raise InputFileError(path, where, f"must be a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise InputFileError(path, where, f"must be {'> 0' if positive else '>= 0'}, got "
                                          f"{value!r}")
    return float(value)


def _run_time(path: str, profiles: dict, name: Any) -> Optional[float]:
    """A profile's delay, or None where it gives no run time."""
    profile = profiles.get(name) if isinstance(name, str) else None
    if not isinstance(profile, dict):
        raise InputFileError(path, f"profile {name!r}", "is not among the profiles")
    if profile.get("type") != "delay":
        return None
    return _number(path, f"profiles.{name}.delay", profile.get("delay"))


def from_batsim(doc: Any, path: str = "<workload>") -> Trace:
    """A parsed Batsim workload as a trace (see the module docstring)."""
    if not isinstance(doc, dict):
        raise InputFileError(path, "top level", "expected an object")
    for key in ("nb_res", "jobs", "profiles"):
        if key not in doc:
            raise InputFileError(path, key, "missing (a Batsim workload has nb_res, jobs and "
                                            "profiles)")
    nb_res = _number(path, "nb_res", doc["nb_res"], positive=True)
    jobs, profiles = doc["jobs"], doc["profiles"]
    if not isinstance(jobs, list) or not isinstance(profiles, dict):
        raise InputFileError(path, "jobs", "jobs must be a list and profiles an object")
    rows: list = []
    unusable: dict = {}
    for k, job in enumerate(jobs):
        where = f"jobs[{k}]"
        if not isinstance(job, dict):
            raise InputFileError(path, where, "expected an object")
        for key in ("id", "subtime", "res", "profile"):
            if key not in job:
                raise InputFileError(path, where, f"no '{key}'")
        where = f"jobs[{k}] (id {job['id']!r})"
        delay = _run_time(path, profiles, job["profile"])
        if delay is None:
            unusable[job["profile"]] = unusable.get(job["profile"], 0) + 1
            continue
        row = np.full(len(FIELDS), MISSING)
        ident = str(job["id"])  # Batsim's ids are strings; digits 0-9 keep their number
        row[COLUMN["job"]] = float(ident) if digits_only(ident) else k + 1
        row[COLUMN["submit"]] = _number(path, f"{where}.subtime", job["subtime"])
        res = _number(path, f"{where}.res", job["res"], positive=True)
        row[COLUMN["requested_procs"]] = row[COLUMN["allocated_procs"]] = res
        walltime = job.get("walltime", -1)
        if walltime not in (-1, None):
            walltime = _number(path, f"{where}.walltime", walltime, positive=True)
            row[COLUMN["requested_time"]] = walltime
            delay = min(delay, walltime)  # Batsim ends a job at its walltime
        row[COLUMN["run"]] = delay
        _restore(path, where, row, job.get("swf"))
        rows.append(row)
    if unusable:
        named = ", ".join(f"{n} job(s) of profile {p!r}" for p, n in sorted(unusable.items()))
        raise InputFileError(path, "profiles", f"{sum(unusable.values())} job(s) have a profile "
                             f"that gives no run time (only 'delay' profiles do): {named}")
    data = np.array(rows) if rows else np.zeros((0, len(FIELDS)))
    return Trace(data, header=[f" MaxProcs: {int(nb_res)}", " Converted from a Batsim "
                               "workload"], path=path)


def _restore(path: str, where: str, row: np.ndarray, extra: Any) -> None:
    """The SWF fields a workload written here carries in a job's "swf" object."""
    if extra is None:
        return
    if not isinstance(extra, dict):
        raise InputFileError(path, f"{where}.swf", "expected an object")
    for name, value in extra.items():
        if name not in EXTRA and name not in ("run", "allocated_procs", "requested_procs"):
            raise InputFileError(path, f"{where}.swf.{name}", "not an SWF field Batsim lacks")
        if not finite_number(value):
            raise InputFileError(path, f"{where}.swf.{name}",
                                 f"must be a finite number, got {value!r}")
        row[COLUMN[name]] = float(value)


def holdable(trace: Trace) -> np.ndarray:
    """Which jobs a Batsim workload can hold: a size, a run time, a submit time >= 0."""
    return (trace.procs > 0) & (trace.column("run") >= 0) & (trace.column("submit") >= 0)


def to_batsim(trace: Trace) -> dict:
    """A trace as a Batsim workload document (see the module docstring). Raises ValueError
    if a job has no size, no run time or a negative submit time (see :func:`holdable`)."""
    bad = np.flatnonzero(~holdable(trace))
    if len(bad):
        raise ValueError(f"{len(bad)} job(s) have no size, no run time or a negative submit "
                         f"time, which a Batsim workload cannot hold (the first: job "
                         f"{int(trace.data[bad[0], COLUMN['job']])})")
    jobs: list = []
    profiles: dict = {}
    for row in trace.data:
        run = float(row[COLUMN["run"]])
        name = f"delay_{run:g}"
        profiles.setdefault(name, {"type": "delay", "delay": run})
        procs = row[COLUMN["requested_procs"]]
        if procs <= 0:
            procs = row[COLUMN["allocated_procs"]]
        job = {"id": str(int(row[COLUMN["job"]])), "subtime": float(row[COLUMN["submit"]]),
               "res": int(procs), "profile": name}
        walltime = float(row[COLUMN["requested_time"]])
        job["walltime"] = walltime if walltime > 0 else -1
        extra = {f: _plain(row[COLUMN[f]]) for f in EXTRA if row[COLUMN[f]] != MISSING}
        for f in ("allocated_procs", "requested_procs"):  # where SWF's two sizes differ
            if row[COLUMN[f]] != procs:
                extra[f] = _plain(row[COLUMN[f]])
        if walltime > 0 and run > walltime:
            extra["run"] = _plain(run)  # Batsim would end it at its walltime
        if extra:
            job["swf"] = extra
        jobs.append(job)
    return {"description": f"converted from {trace.path}", "nb_res": int(trace.max_procs),
            "jobs": jobs, "profiles": profiles}


def _plain(value: float) -> float:
    return int(value) if float(value).is_integer() else float(value)


def write_batsim(path: str, trace: Trace) -> None:
    """Write ``trace`` as a Batsim workload, atomically."""
    write_json_atomic(path, to_batsim(trace))

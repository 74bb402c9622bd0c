"""A site's own history out of Slurm: ``sacct --parsable2`` as an SWF trace.

``sacct --parsable2`` prints a header of field names and one line per job or job step,
fields separated by ``|``. Read: ``JobIDRaw`` (or ``JobID``), ``Submit``, ``Start``,
``End``, ``Timelimit``, ``AllocCPUS`` (or ``NCPUS``), ``ReqCPUS``, ``User``, ``Group``,
``Partition`` and ``State``; others are ignored. Steps (``123.batch``, ``123.0``,
``123.extern``) are folded into their job. Times are Slurm's (``2024-01-05T10:22:31``;
``Unknown`` or ``None`` where missing; a time limit in any of Slurm's duration forms,
``UNLIMITED`` or ``Partition_Limit``). Jobs are numbered in submit order from 1, users,
groups and partitions from 1 in order of appearance, and the trace's time 0 is the first
submit (``UnixStartTime``). States become SWF's status: completed 1, failed (FAILED,
TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED, BOOT_FAIL, DEADLINE) 0, cancelled 5, whether
before it started (no run time) or after. Jobs still pending or running are left out and
counted. A line that cannot be read is named with its number and field.

>>> text = ("JobIDRaw|Submit|Start|End|Timelimit|AllocCPUS|ReqCPUS|User|Group|Partition|State\\n"
...         "7|2024-01-05T10:00:00|2024-01-05T10:00:30|2024-01-05T11:00:30|1-00:00:00|8|8|"
...         "ann|lab|batch|COMPLETED\\n"
...         "7.batch|2024-01-05T10:00:30|2024-01-05T10:00:30|2024-01-05T11:00:30||8|||||"
...         "COMPLETED\\n")
>>> trace, left_out = parse_sacct(text)
>>> [int(v) for v in trace.data[0][[0, 1, 2, 3, 4, 8, 10]]], left_out
([1, 0, 30, 3600, 8, 86400, 1], 0)
"""

import datetime
import math
from typing import Any, Callable, Optional

import numpy as np

from ..errors import InputFileError
from ..files import read_input_text
from .slurmtime import slurm_duration_seconds
from .swf import COLUMN, FIELDS, MISSING, Trace

__all__ = ["read_sacct", "parse_sacct"]

FAILED = ("FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
          "DEADLINE")
UNFINISHED = ("PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD",
              "REQUEUE_FED", "REVOKED", "SPECIAL_EXIT", "STOPPED", "SIGNALING")
NEEDED = ("Submit", "State")


def _limit(text: str) -> Optional[float]:
    """A time limit in seconds; None where sacct gives none."""
    if text.strip() in ("", "Partition_Limit", "INVALID", "NONE"):
        return None
    seconds = slurm_duration_seconds(text)
    return None if seconds == math.inf else seconds


def _time(text: str) -> Optional[float]:
    text = text.strip()
    if text in ("", "Unknown", "None"):
        return None
    return datetime.datetime.fromisoformat(text).replace(
        tzinfo=datetime.timezone.utc).timestamp()


def read_sacct(path: str) -> tuple:
    """(the trace, jobs left out because they had not ended) of a ``sacct --parsable2``
    file. Raises InputFileError naming the file, the line and the field."""
    return parse_sacct(read_input_text(path, "sacct --parsable2 file"), path)


def parse_sacct(text: str, path: str = "<sacct>") -> tuple:
    """:func:`read_sacct` on the text of such a file."""
    lines = text.splitlines()
    if not lines or "|" not in lines[0]:
        raise InputFileError(path, "line 1", "no header of field names separated by '|' "
                                             "(sacct --parsable2)")
    names = lines[0].split("|")
    col = {n: i for i, n in enumerate(names)}
    ident = "JobIDRaw" if "JobIDRaw" in col else "JobID"
    cpus = "AllocCPUS" if "AllocCPUS" in col else "NCPUS" if "NCPUS" in col else None
    missing = [n for n in NEEDED if n not in col] + (["JobIDRaw"] if ident not in col else [])
    if missing:
        raise InputFileError(path, "line 1", f"no {', '.join(missing)} field")
    jobs, left_out = [], 0
    for number, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        cells = line.split("|")
        if len(cells) != len(names):
            raise InputFileError(path, f"line {number}", f"{len(cells)} fields, the header "
                                                         f"has {len(names)}")
        job_id = cells[col[ident]].strip()
        if "." in job_id:
            continue  # a step (123.batch, 123.0): its job's line holds the job
        state = cells[col["State"]].split()[0] if cells[col["State"]].strip() else ""
        if state in UNFINISHED:
            left_out += 1
            continue
        jobs.append(_job(path, number, cells, col, cpus, state))
    return _trace(jobs, path), left_out


def _job(path: str, number: int, cells: list, col: dict, cpus: Optional[str],
         state: str) -> dict:
    def field(name: str, read: Callable[[str], Any]) -> Any:
        if name not in col:
            return None
        try:
            return read(cells[col[name]])
        except ValueError as e:
            raise InputFileError(path, f"line {number}, field {name}", str(e)) from None

    def count(text: str) -> Optional[float]:
        text = text.strip()
        return float(int(text)) if text else None

    submit = field("Submit", _time)
    if submit is None:
        raise InputFileError(path, f"line {number}, field Submit", "no submit time")
    if state.startswith("CANCELLED"):
        status = 5.0
    elif state in FAILED:
        status = 0.0
    elif state == "COMPLETED":
        status = 1.0
    else:
        raise InputFileError(path, f"line {number}, field State", f"unknown state {state!r}")
    return {"submit": submit, "start": field("Start", _time), "end": field("End", _time),
            "limit": field("Timelimit", _limit),
            "cpus": field(cpus, count) if cpus else None, "req": field("ReqCPUS", count),
            "user": field("User", str.strip), "group": field("Group", str.strip),
            "partition": field("Partition", str.strip), "status": status}


def _trace(jobs: list, path: str) -> Trace:
    jobs.sort(key=lambda j: j["submit"])
    origin = jobs[0]["submit"] if jobs else 0.0
    numbers: dict = {"user": {}, "group": {}, "partition": {}}
    data = np.full((len(jobs), len(FIELDS)), MISSING)
    for k, j in enumerate(jobs):
        row = data[k]
        row[COLUMN["job"]] = k + 1
        row[COLUMN["submit"]] = j["submit"] - origin
        started = j["start"] is not None and j["start"] >= j["submit"]
        if started:
            row[COLUMN["wait"]] = j["start"] - j["submit"]
            if j["end"] is not None:
                row[COLUMN["run"]] = max(0.0, j["end"] - j["start"])
        if started and j["cpus"]:
            row[COLUMN["allocated_procs"]] = j["cpus"]
        if j["req"]:
            row[COLUMN["requested_procs"]] = j["req"]
        if j["limit"] is not None:
            row[COLUMN["requested_time"]] = j["limit"]
        row[COLUMN["status"]] = j["status"]
        for name, swf in (("user", "user"), ("group", "group"), ("partition", "partition")):
            if j[name]:
                row[COLUMN[swf]] = numbers[name].setdefault(j[name], len(numbers[name]) + 1)
    header = [" Converted from Slurm accounting (sacct --parsable2)",
              f" UnixStartTime: {int(origin)}"]
    return Trace(data, header=header, path=path)

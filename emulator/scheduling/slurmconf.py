"""A site's Slurm configuration in its own words: the scheduling lines of ``slurm.conf`` and
the associations of ``sacctmgr show assoc --parsable2``.

From ``slurm.conf`` (keys are case-insensitive, ``#`` starts a comment):

``PriorityType``         ``priority/multifactor`` or ``priority/basic`` (FIFO)
``PriorityWeightAge``, ``PriorityWeightFairshare``, ``PriorityWeightJobSize``,
``PriorityWeightPartition``, ``PriorityWeightQOS``   the weights (default 0)
``PriorityMaxAge``       age at which the age factor reaches 1 (default ``7-0``)
``PriorityDecayHalfLife``  half-life of past usage (default ``7-0``; 0: no decay)
``PriorityCalcPeriod``   minutes between recomputations of usage and priorities (default 5)
``PriorityFavorSmall``   ``YES``: smaller jobs get the larger size factor
``PriorityFlags``        ``SMALL_RELATIVE_TO_TIME``, ``NO_FAIR_TREE`` (classic fair share;
                         Fair Tree otherwise, Slurm's default); others are listed as unused
``SchedulerType``        ``sched/backfill`` (default) or ``sched/builtin``
``SchedulerParameters``  ``bf_window`` (minutes, default 1440), ``bf_resolution`` (seconds,
                         default 60), ``bf_max_job_test`` (default 500), ``bf_interval``
                         (seconds between backfill passes, default 30), ``bf_continue``
``PartitionName=NAME ... PriorityJobFactor=N [Default=YES]``  the partition factor
``NodeName=... CPUs=N``  processors per node (the job size factor counts nodes too)

Durations are Slurm's: ``minutes``, ``minutes:seconds``, ``hours:minutes:seconds``,
``days-hours``, ``days-hours:minutes``, ``days-hours:minutes:seconds``. Every other parameter is
reported once as not modelled, never an error.

The associations file is ``sacctmgr show assoc --parsable2`` output (``|``-separated, a
header line): the columns ``Account``, ``User`` and ``Share`` are read, and ``Par Name``
(``ParentName``) when present; a row without a user is an account.
"""

import re
from dataclasses import dataclass, field
from typing import Optional

from ..errors import InputFileError
from ..files import read_input_text
from ..workload.slurmtime import slurm_duration_seconds

WEIGHTS = {"priorityweightage": "age", "priorityweightfairshare": "fairshare",
           "priorityweightjobsize": "job_size", "priorityweightpartition": "partition",
           "priorityweightqos": "qos"}
WEIGHT_MAX = 2 ** 32 - 1  # Slurm keeps each PriorityWeight* in 32 bits
DURATIONS = {"prioritymaxage": "max_age_seconds",  # a bare number counts minutes
             "prioritydecayhalflife": "decay_half_life_seconds",
             "prioritycalcperiod": "calc_period_seconds"}
FLAGS = ("SMALL_RELATIVE_TO_TIME", "NO_FAIR_TREE")
# SchedulerParameters this reader models: (attribute, seconds a unit, Slurm's largest value)
BACKFILL = {"bf_window": ("bf_window_seconds", 60.0, 43200),
            "bf_resolution": ("bf_resolution_seconds", 1.0, 3600),
            "bf_max_job_test": ("bf_max_job_test", 1, 1_000_000),
            "bf_interval": ("bf_interval_seconds", 1.0, 10800)}


@dataclass(frozen=True)
class Partition:
    name: str
    priority_job_factor: int = 1
    default: bool = False


@dataclass(frozen=True)
class SlurmConfig:
    """The scheduling settings of a ``slurm.conf``, Slurm's defaults where it is silent."""

    priority_type: str = "priority/multifactor"
    scheduler_type: str = "sched/backfill"
    weights: dict = field(default_factory=lambda: {k: 0 for k in WEIGHTS.values()})
    max_age_seconds: float = 7 * 86400.0
    decay_half_life_seconds: float = 7 * 86400.0
    calc_period_seconds: float = 300.0
    favor_small: bool = False
    flags: frozenset = frozenset()
    bf_window_seconds: float = 1440 * 60.0
    bf_resolution_seconds: float = 60.0
    bf_max_job_test: int = 500
    bf_interval_seconds: float = 30.0
    bf_continue: bool = False
    partitions: tuple = ()
    cpus_per_node: int = 1
    unused: tuple = ()  # parameters read but not modelled, in file order

    @property
    def fair_tree(self) -> bool:
        return "NO_FAIR_TREE" not in self.flags

    @property
    def backfill(self) -> str:
        """The engine's backfilling rule: Slurm's own, or none for ``sched/builtin``."""
        return "slurm" if self.scheduler_type == "sched/backfill" else "none"


PAIR = re.compile(r"(\S+?)=(\"[^\"]*\"|\S*)")


def read_slurm_conf(path: str) -> SlurmConfig:
    """The :class:`SlurmConfig` of a ``slurm.conf`` file; a malformed value raises
    :class:`~emulator.errors.InputFileError` naming the line and parameter."""
    text = read_input_text(path, "slurm.conf")
    values: dict = {"weights": {k: 0 for k in WEIGHTS.values()}, "flags": set(),
                    "partitions": [], "unused": []}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        pairs = PAIR.findall(line)
        if not pairs or "=" not in line.split()[0]:
            raise InputFileError(path, f"line {number}", f"expected Parameter=value, got "
                                 f"{line.split()[0]!r}")
        first = pairs[0][0].lower()
        if first == "partitionname":
            values["partitions"].append(_partition(path, number, pairs))
            continue
        if first == "nodename":
            cpus = [v for k, v in pairs if k.lower() == "cpus"]
            if cpus and values.get("cpus_per_node") is None:
                values["cpus_per_node"] = _integer(path, number, "CPUs", cpus[0])
            continue
        for key, value in pairs:
            _parameter(path, number, key, value.strip('"'), values)
    values["partitions"] = tuple(values["partitions"])
    values["flags"] = frozenset(values["flags"])
    values["unused"] = tuple(dict.fromkeys(values["unused"]))
    if values.get("cpus_per_node") is None:
        values.pop("cpus_per_node", None)
    return SlurmConfig(**values)


def _integer(path: str, number: int, key: str, value: str, minimum: int = 0,
             maximum: Optional[int] = None) -> int:
    try:
        n = int(value)
    except ValueError:
        raise InputFileError(path, f"line {number}, {key}", f"{value!r} is not a whole "
                             "number") from None
    if n < minimum:
        raise InputFileError(path, f"line {number}, {key}", f"must be at least {minimum}")
    if maximum is not None and n > maximum:
        raise InputFileError(path, f"line {number}, {key}", f"must be at most {maximum}")
    return n


def _duration(path: str, number: int, key: str, value: str) -> float:
    try:
        return slurm_duration_seconds(value)
    except ValueError:
        raise InputFileError(path, f"line {number}, {key}", f"{value!r} is not a Slurm "
                             "duration (minutes, days-hours:minutes:seconds, ...)") from None


def _parameter(path: str, number: int, key: str, value: str, values: dict) -> None:
    lower = key.lower()
    if lower in WEIGHTS:
        values["weights"][WEIGHTS[lower]] = _integer(path, number, key, value,
                                                     maximum=WEIGHT_MAX)
    elif lower in DURATIONS:
        name = DURATIONS[lower]
        values[name] = _duration(path, number, key, value)
        if lower == "prioritycalcperiod" and not values[name] > 0:
            raise InputFileError(path, f"line {number}, {key}", "must be above zero")
    elif lower == "priorityfavorsmall":
        if value.upper() not in ("YES", "NO"):
            raise InputFileError(path, f"line {number}, {key}", "must be YES or NO")
        values["favor_small"] = value.upper() == "YES"
    elif lower == "priorityflags":
        for flag in filter(None, value.upper().split(",")):
            (values["flags"].add(flag) if flag in FLAGS
             else values["unused"].append(f"PriorityFlags={flag}"))
    elif lower == "prioritytype":
        if value not in ("priority/multifactor", "priority/basic"):
            raise InputFileError(path, f"line {number}, {key}", "this reader models "
                                 "priority/multifactor and priority/basic")
        values["priority_type"] = value
    elif lower == "schedulertype":
        if value not in ("sched/backfill", "sched/builtin"):
            raise InputFileError(path, f"line {number}, {key}", "this reader models "
                                 "sched/backfill and sched/builtin")
        values["scheduler_type"] = value
    elif lower == "schedulerparameters":
        for item in filter(None, value.split(",")):
            name, _, setting = item.partition("=")
            if name in BACKFILL:
                attribute, unit, most = BACKFILL[name]
                values[attribute] = _integer(path, number, name, setting, 1, most) * unit
            elif name == "bf_continue":
                values["bf_continue"] = True
            else:
                values["unused"].append(f"SchedulerParameters={name}")
    else:
        values["unused"].append(key)


def _partition(path: str, number: int, pairs: list) -> Partition:
    settings = {k.lower(): v for k, v in pairs}
    factor = settings.get("priorityjobfactor", "1")
    return Partition(settings["partitionname"],
                     _integer(path, number, "PriorityJobFactor", factor),
                     settings.get("default", "NO").upper() == "YES")


@dataclass(frozen=True)
class Associations:
    """Accounts (name -> (parent, shares)) and users ((account, user) -> shares)."""

    accounts: dict = field(default_factory=dict)
    users: dict = field(default_factory=dict)


def read_associations(path: str) -> Associations:
    """The associations of ``sacctmgr show assoc --parsable2`` output."""
    text = read_input_text(path, "associations file")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise InputFileError(path, "line 1", "empty; expected sacctmgr's header line")
    header = [h.strip() for h in lines[0].rstrip("|").split("|")]
    column = {h.lower().replace(" ", ""): i for i, h in enumerate(header)}
    for needed in ("account", "user", "share"):
        if needed not in column:
            raise InputFileError(path, "line 1", f"no {needed.capitalize()} column (the "
                                 f"header has {', '.join(header)})")
    parent_column = column.get("parname", column.get("parentname"))
    accounts: dict = {}
    users: dict = {}
    for number, line in enumerate(lines[1:], start=2):
        cells = line.rstrip("|").split("|")
        if len(cells) < len(header):
            cells += [""] * (len(header) - len(cells))
        account, user = cells[column["account"]].strip(), cells[column["user"]].strip()
        share = cells[column["share"]].strip() or "1"
        if share.lower() == "parent":
            raise InputFileError(path, f"line {number}, Share", "Share=parent is not "
                                 "modelled; give the association its own shares")
        shares = _integer(path, number, "Share", share)
        if not account:
            raise InputFileError(path, f"line {number}, Account", "empty")
        if user:
            users[(account, user)] = shares
        elif account != "root":
            parent = (cells[parent_column].strip() if parent_column is not None else "") \
                or "root"
            accounts[account] = (parent, shares)
    for account, (parent, _) in accounts.items():
        seen = {account}
        while parent != "root":
            if parent not in accounts:
                raise InputFileError(path, f"account {account}", f"its parent {parent!r} is "
                                     "not in the file")
            if parent in seen:
                raise InputFileError(path, f"account {account}", "its parents form a loop")
            seen.add(parent)
            parent = accounts[parent][0]
    return Associations(accounts, users)

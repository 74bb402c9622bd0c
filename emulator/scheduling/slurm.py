"""A Slurm site as a scheduler: the priority order and the backfill its ``slurm.conf`` names.

>>> from emulator.scheduling.slurmconf import SlurmConfig
>>> config = SlurmConfig(weights={"age": 1000, "fairshare": 10000, "job_size": 0,
...                               "partition": 0, "qos": 0})
>>> slurm_scheduler(128, config).policy
'multifactor+slurm'
"""

from typing import Any, Optional

from .multifactor import Multifactor
from .scheduler import Scheduler
from .slurmbackfill import BackfillParams
from .slurmconf import SlurmConfig

SPRIO_COLUMNS = ("job", "user", "account", "priority", "age", "fairshare", "job_size",
                 "partition", "qos", "age_norm", "fairshare_norm", "job_size_norm",
                 "partition_norm", "qos_norm")


def slurm_scheduler(processors: int, config: SlurmConfig, associations: Any = None, *,
                    order: Optional[Any] = None, backfill: Optional[str] = None,
                    site: Any = None) -> Scheduler:
    """The scheduler of a Slurm site: ``PriorityType``'s order (multifactor, or FIFO for
    ``priority/basic``) and ``SchedulerType``'s backfill (Slurm's, or none for
    ``sched/builtin``) with its ``bf_*`` parameters; ``order`` or ``backfill`` replace them
    (an order name or object, a rule of :data:`~.scheduler.BACKFILLS`)."""
    if order is None or order == "multifactor":
        order = Multifactor(config, processors, associations) \
            if config.priority_type == "priority/multifactor" or order == "multifactor" \
            else "fcfs"
    return Scheduler(processors, order=order, backfill=backfill or config.backfill,
                     site=site, slurm=BackfillParams.from_config(config))


def sprio_rows(scheduler: Scheduler) -> list:
    """Each started job's priority and weighted factors at its start (``sprio -l``'s
    columns), in start order; empty for an order that is not multifactor."""
    return list(getattr(scheduler.order, "at_start", {}).values())

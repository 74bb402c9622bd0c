"""What every rank of an emulated cluster agrees on (:class:`Settings`, broadcast by rank 0
at start-up) and the timings and tags of the coordinator's conversation with the node
ranks."""

from dataclasses import dataclass, field

IDLE_POLL_MIN_SECONDS = 0.0005
IDLE_POLL_MAX_SECONDS = 0.01
# With doorbells (every rank on one machine) a waiting rank sleeps until the coordinator, or
# a node replying to it, rings; this long at most (it also bounds how late the coordinator
# checks for dead nodes)
IDLE_BELL_MAX_SECONDS = 0.25
DEFAULT_TIMEOUT_SECONDS = 30.0
CONTROL_TAG = 7
JOB_TAG_BASE = 1000  # a threaded job's reply comes on JOB_TAG_BASE + its number
JOB_TAGS = 1 << 20
GRACE_SECONDS = 2.0
SEND_POLL_SECONDS = 0.0005  # between tests of control messages not yet taken
STOP_GRACE_SECONDS = 1.5  # a node failure waits this long for a stop that would explain it
DEATH_SETTLE_SECONDS = 0.5  # ranks found dead are looked at again after this: a machine's
# ranks die together, and are named together


@dataclass
class Settings:
    """Everything every rank must agree on; rank 0 broadcasts it at start-up."""

    cluster: object  # the graph on rank 0, a ClusterView on the node ranks
    timeline: object
    time_scale: float = 1.0
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    # "inproc": the emulator paces messages on the cluster's shared model; "tc": real
    # traffic, shaped by the kernel on the testbed (the coordinator plays the scenario into
    # tc); "external": real traffic, shaped by someone else or not at all (a real cluster)
    shaping: str = "inproc"
    epoch: float = 0.0
    # wall seconds per emulated second (in-process shaping): bandwidths divided by it,
    # latencies and compute phases multiplied by it, the scenario clock slowed by it
    dilation: float = 1.0
    # "model": compute phases and local users share each node's CPU in the fluid model;
    # "kernel": they burn real CPU in the node's cgroup (emulator.kernel.cgroups)
    cpu: str = "model"
    extra: dict = field(default_factory=dict)

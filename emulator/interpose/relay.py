"""The cluster's model served to a real program's ranks on this machine.

The interposition library (``_pmpi.c``) reads and writes a mirror of the model (the layout
of ``emulator/network/mirror.h``) in a shared-memory file: a send takes a slot and puts its
flow's start in the mirror's outbox. A thread of the launcher owns the model
(:class:`~emulator.network.sharing.ClusterModel`): it takes the starts, solves, and writes
each flow's end (and a large send's release) back into the mirror, which rings the waiting
rank's doorbell. It is the served model's owner and a host's agent
(:mod:`emulator.shaping.served`) in one thread, the mirror between them in place of MPI.

Each pair of ranks' one-way latency (:func:`~emulator.network.cluster.path_latency_seconds`,
wall seconds under the dilation) is a second file the library maps.
"""

import importlib.util
import mmap
import os
import secrets
import select
import socket
import time
from typing import Any, Optional, Sequence

import numpy as np

from ..network import cluster as clusters
from ..network.sharing import BUFFER_BITS, ClusterModel
from ..network import _mirror  # type: ignore[attr-defined]  # compiled
from ..network.owner import ModelOwner

NET_SECONDS = 0.01  # the relay's longest sleep with nothing due and no ring
SHM_DIR = "/dev/shm"
MIRROR_SLOTS = 16384  # flows in flight at once
PREFIX = "nodesel-pmpi-"


def library_path() -> str:
    """The interposition library the install built."""
    spec = importlib.util.find_spec("emulator.interpose._pmpi")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("the interposition library is not built: pip install -e .")
    return spec.origin


class LocalOwner(ModelOwner):
    """The model's owner with its one host's mirror in the same process. It sleeps until
    the model's next event or a ring of its doorbell (``bell``: a rank that starts a flow
    rings it), at most NET_SECONDS: no polling while the ranks compute."""

    nap_max_seconds = NET_SECONDS

    def __init__(self, model: ClusterModel, mirror: Any, node_host: list, bell: bytes) -> None:
        super().__init__("nodesel-program-relay", None, model, node_host, [0])
        self.mirror = mirror
        self.lost = 0  # reports the mirror could not keep (its table full)
        self.bell = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.bell.bind(bell)
        self.bell.setblocking(False)

    def nap(self, seconds: float) -> None:
        if select.select([self.bell], [], [], max(seconds, 0.0))[0]:
            try:
                while self.bell.recv(64):
                    pass
            except BlockingIOError:
                pass

    def run(self) -> None:
        try:
            super().run()
        finally:
            self.bell.close()

    def step(self) -> bool:
        got = False
        if self.mirror.pending():
            for event in self.mirror.take():
                self._event(0, event)
            got = True
        self.fluid.advance(time.time())
        return self._report() or got

    def send(self, message: Any, rank: int, tag: int) -> None:
        self.lost += self.mirror.apply(message)

    def finish(self) -> bool:
        return True


def _shared_file(path: str, size: int) -> Any:
    """A new file of ``size`` bytes (this user's alone), mapped."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, size)
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def remove_orphan_files(directory: str = SHM_DIR) -> list:
    """Remove the files of launchers that are gone (killed before they could): each file
    names its launcher's pid. Returns the paths removed."""
    removed = []
    for name in os.listdir(directory):
        pid = name[len(PREFIX):].split("-", 1)[0]
        if not name.startswith(PREFIX) or not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            path = os.path.join(directory, name)
            try:
                os.unlink(path)
                removed.append(path)
            except FileNotFoundError:
                pass
        except PermissionError:
            pass  # another user's launcher, alive
    return removed


class ServedProgram:
    """The model served to programs that run at once on one cluster: job j has
    ``len(jobs[j])`` ranks, its rank r on node ``jobs[j][r]`` (a name of ``cluster``), and
    every job's messages share the one model. A context manager: on entry the files and the
    relay exist and :meth:`environment` is what each rank of a job needs; on exit both are
    gone. Each job has its own id (its ranks' doorbells) and latency table. The scenario's
    time 0 is at wall time ``epoch`` (default: on entry), so a run can go on from where an
    earlier one on the same scenario left it."""

    def __init__(self, cluster: Any, timeline: Any, jobs: Sequence[Sequence[str]], *,
                 dilation: float = 1.0, time_scale: float = 1.0,
                 max_slots: int = MIRROR_SLOTS, epoch: Optional[float] = None) -> None:
        if not 1 <= len(jobs) < 255:
            raise ValueError(f"1 to 254 programs at once, not {len(jobs)}")
        self.cluster, self.timeline = cluster, timeline
        self.jobs = [list(nodes) for nodes in jobs]
        self.dilation, self.time_scale = dilation, time_scale
        self.max_slots = max_slots
        base = secrets.token_hex(2)
        self.ids = [f"{base}{j:02x}" for j in range(len(jobs))]
        self.relay_id = f"{base}ff"
        self.paths = [self._path(self.relay_id, "mirror")] + \
            [self._path(job, "latency") for job in self.ids]
        self._maps: list = []
        self.mirror: Any = None
        self.model: Optional[ClusterModel] = None
        self.relay: Optional[LocalOwner] = None
        self.epoch = epoch

    @staticmethod
    def _path(job: str, what: str) -> str:
        return os.path.join(SHM_DIR, f"{PREFIX}{os.getpid()}-{job}-{what}")

    def __enter__(self) -> "ServedProgram":
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _start(self) -> None:
        remove_orphan_files()
        self.model = ClusterModel(self.cluster, self.timeline)
        if self.epoch is None:
            self.epoch = time.time()
        self.model.set_clock(epoch=self.epoch, time_scale=self.time_scale,
                             dilation=self.dilation)
        n_nodes = len(self.model.nodes)
        memory = _shared_file(self.paths[0], _mirror.mirror_bytes(n_nodes, self.max_slots))
        self._maps.append(memory)
        self.mirror = _mirror.Mirror(0, 1, [0] * n_nodes, self.max_slots, BUFFER_BITS,
                                     window=memory, create=True)
        for nodes, path in zip(self.jobs, self.paths[1:]):
            latency = np.asarray(clusters.path_latency_seconds(self.cluster, nodes),
                                 dtype=np.float64) * self.dilation
            table = _shared_file(path, max(latency.nbytes, 8))
            table[:latency.nbytes] = latency.tobytes()
            self._maps.append(table)
        self.relay = LocalOwner(self.model, self.mirror, [0] * n_nodes,
                                b"\0P" + self.relay_id.encode() + b"ffffffff")
        self.relay.start()

    def environment(self, job: int = 0) -> dict:
        """What each rank of ``job`` reads (``NODESEL_PMPI_*``)."""
        assert self.model is not None, "entered first"
        return {
            "NODESEL_PMPI_MIRROR": self.paths[0],
            "NODESEL_PMPI_LATENCIES": self.paths[1 + job],
            "NODESEL_PMPI_MODEL_NODES": str(len(self.model.nodes)),
            "NODESEL_PMPI_SLOTS": str(self.max_slots),
            "NODESEL_PMPI_NODES": ",".join(str(self.model.index[name])
                                           for name in self.jobs[job]),
            "NODESEL_PMPI_EPOCH": repr(self.epoch),
            "NODESEL_PMPI_DILATION": repr(float(self.dilation)),
            "NODESEL_PMPI_JOB": self.ids[job],
            "NODESEL_PMPI_RELAY": self.relay_id,
            "NODESEL_PMPI_LAUNCHER": str(os.getpid()),  # its ranks end if it goes
        }

    def close(self) -> None:
        """Stop the relay, let go of the files and remove them (again: nothing)."""
        if self.relay is not None:
            self.relay.stop()
            self.relay.join(timeout=10.0)
            self.relay = None
        if self.mirror is not None:
            self.mirror.detach()
            self.mirror = None
        for memory in self._maps:
            memory.close()
        self._maps = []
        for path in self.paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

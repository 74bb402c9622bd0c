"""The cluster's model served to a real program's ranks on this machine.

The interposition library (``_pmpi.c``) reads and writes a mirror of the model (the layout
of ``emulator/network/mirror.h``) in a shared-memory file: a send takes a slot and puts its
flow's start in the mirror's outbox. A thread of the launcher owns the model
(:class:`~emulator.network.sharing.ClusterModel`): it takes the starts, solves, and writes
each flow's end (and a large send's release) back into the mirror, which rings the waiting
rank's doorbell. It is the served model's owner and a host's agent
(:mod:`emulator.shaping.served`) in one thread, the mirror between them in place of MPI.

In a batch run (:mod:`emulator.batch.live`) the model is the one the node ranks share
(an MPI shared-memory window, solved by whichever process touches it):
:class:`WindowRelay` puts the program's flows into it beside the skeletons' and reads their
ends there, since another process may be the one that reaches them.

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

FL_RECEIVER = 1  # the party whose doorbell a flow's earlier end rings (fluid.h)
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


class WindowRelay(LocalOwner):
    """:class:`LocalOwner` over a model that other processes solve too. Their solves are
    not in this process's log, so it reads each of its flows' state; its flows carry its
    doorbell, rung when another's solve brings their end earlier."""

    def __init__(self, model: ClusterModel, mirror: Any, node_host: list, bell: bytes) -> None:
        super().__init__(model, mirror, node_host, bell)
        self.fluid.track(False)  # the log would only grow: nothing here takes it
        self.bell_name = bell
        self.releases: dict = {}  # (slot, gen) -> projected release wall time, not yet out
        self.next_release = float("inf")

    def due(self) -> float:
        return max(min(self.fluid.next_event(), self.next_release) - time.time(), 0.0)

    def run(self) -> None:
        try:
            super().run()
        finally:  # a program gone mid-run leaves no background flow in the shared model
            for slot, gen in [*self.flows, *self.persistent.values()]:
                self.fluid.drop(slot, gen)

    def _event(self, host: int, event: tuple) -> None:
        kind, gid, ggen, src, dst, amount, bound, resource, persistent, bucket, wall, _ = event
        if kind == _mirror.END or persistent:
            super()._event(host, event)
            return
        slot, gen, _ = self.fluid.add(min(wall, time.time()), src, dst, amount,
                                      receiver_bell=self.bell_name, bound=bound,
                                      resource=resource, bucket=bool(bucket))
        self.flows[(slot, gen)] = (gid, ggen)
        self.releases[(slot, gen)] = float("nan")

    def _report(self) -> bool:
        batch = []
        now = time.time()
        self.next_release = float("inf")
        for key, (gid, ggen) in list(self.flows.items()):
            view = self.fluid.view(*key, now, FL_RECEIVER)
            if view["done"]:
                batch.append((gid, ggen, _mirror.DONE, view["end"]))
                del self.flows[key]
                self.releases.pop(key, None)
                self.fluid.drop(*key)
            elif view["released"] and key in self.releases:
                batch.append((gid, ggen, _mirror.RELEASE, view["release"]))
                del self.releases[key]
            elif key in self.releases:
                self.next_release = min(self.next_release, view["release"])
        if batch:
            self.send(batch, 0, 0)
        return bool(batch)


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
    earlier one on the same scenario left it. Given ``model`` (a model other processes
    share, its clock set), the programs' flows go into it, on its clock, beside theirs."""

    def __init__(self, cluster: Any, timeline: Any, jobs: Sequence[Sequence[str]], *,
                 dilation: float = 1.0, time_scale: float = 1.0,
                 max_slots: int = MIRROR_SLOTS, epoch: Optional[float] = None,
                 model: Optional[ClusterModel] = None) -> None:
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
        self.shared = model

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
        if self.shared is not None:
            self.model = self.shared
            clock = self.model.clock()
            self.epoch, self.dilation = clock["epoch"], clock["dilation"]
            self.time_scale = clock["time_scale"]
        else:
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
        relay = LocalOwner if self.shared is None else WindowRelay
        self.relay = relay(self.model, self.mirror, [0] * n_nodes,
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

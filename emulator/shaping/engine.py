"""The shaped communicator's compiled message path (``_engine.c``) and when it is used.

:class:`CompiledShapedComm` is :class:`~emulator.shaping.comm.ShapedComm` with its
per-message work (matching, the fluid model, token buckets, notices, waits with doorbells)
in C: the same model, wire format and waits, so ranks of either kind can talk. The C code
calls MPI through the library mpi4py loaded; :func:`available` binds it once per process,
after checking that the library has MPICH's ABI (integer handles; the offsets of a status's
source and tag are measured here, not assumed) and that a message to itself comes back
intact through the engine. Where that fails (another MPI, no compiled module) the Python
path is used.

``NODESEL_SHAPING_ENGINE=python`` (or ``c``) chooses explicitly; the default is C where it
binds.
"""

import ctypes
import functools
import math
import os
import struct
import time

from mpi4py import MPI

from ..errors import NodeFailure
from .comm import BELL_MAX_SECONDS, COMPILED, ShapedComm, tag_base
from .network import Network
from .doorbell import local as local_bell

try:
    from . import _engine
except ImportError:  # not built: the Python path
    _engine = None

ENV = "NODESEL_SHAPING_ENGINE"
_FUNCTIONS = ("MPI_Isend", "MPI_Irecv", "MPI_Iprobe", "MPI_Recv", "MPI_Test", "MPI_Wait",
              "MPI_Get_count")


def wanted():
    """The engine asked for: "c" (default) or "python"."""
    choice = os.environ.get(ENV, "c").strip().lower() or "c"
    if choice not in ("c", "python"):
        raise ValueError(f"{ENV} must be c or python, got {choice!r}")
    return choice


def _library():
    """The loaded MPI library exporting MPI_Isend (by its path in /proc/self/maps)."""
    paths = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            path = fields[5] if len(fields) >= 6 else ""
            name = os.path.basename(path)
            if name.startswith("libmpi") and ".so" in name and path not in paths:
                paths.append(path)
    for path in paths:
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        except OSError:
            continue
        if all(hasattr(lib, fn) for fn in _FUNCTIONS):
            return lib
    return None


def _status_offsets():
    """Where a status keeps its source and tag, in ints."""
    status = MPI.Status()
    status.Set_source(0x5A5A1)
    status.Set_tag(0x3C3C2)
    size = MPI._sizeof(MPI.Status)
    words = struct.unpack(f"{size // 4}i", ctypes.string_at(MPI._addressof(status), size))
    if words.count(0x5A5A1) != 1 or words.count(0x3C3C2) != 1:
        return None
    return words.index(0x5A5A1), words.index(0x3C3C2)


def _fail(engine):
    """A wait of ``engine`` timed out: the failure, naming the nodes it waited for."""
    nodes = engine.owner or []
    waiting = sorted({str(nodes[p]) for p in engine.pending() if p < len(nodes)})
    raise NodeFailure(", ".join(waiting) or "?",
                      f"no message within {engine.timeout_seconds:.0f} s")


@functools.cache
def available():
    """True once the C engine is bound to this process's MPI and passed its self-check."""
    if _engine is None or not MPI.Is_initialized() or MPI.Is_finalized():
        return False
    if any(MPI._sizeof(t) != 4 for t in (MPI.Comm, MPI.Request, MPI.Datatype)):
        return False  # not MPICH's ABI of integer handles
    if MPI._sizeof(MPI.Status) > 32 * 4:
        return False
    offsets, lib = _status_offsets(), _library()
    if offsets is None or lib is None:
        return False
    functions = {fn: ctypes.cast(getattr(lib, fn), ctypes.c_void_p).value for fn in _FUNCTIONS}
    _engine.bind(functions, MPI.BYTE.handle, MPI.REQUEST_NULL.handle, MPI.ANY_SOURCE,
                 MPI.ANY_TAG, offsets[0], offsets[1], _fail)
    return _self_check()


def _self_check():
    """A small and a large message from this rank to itself, through the engine."""
    from ..network.sharing import ClusterModel, node_plan

    comm = MPI.COMM_SELF.Dup()
    model = ClusterModel(None, None, max_flows=16, plan=node_plan("n1"))
    model.set_clock(epoch=time.time())
    network = Network(model, latency_seconds=0.0)
    try:
        engine = _engine.Engine(comm.handle, [0], 0, network.model.fluid, [0], 0.0, 0, -1, None,
                                BELL_MAX_SECONDS, 10.0)
        ok = True
        for size in (8, 100_000):
            out = bytes(range(256)) * (size // 256) + bytes(size % 256)
            into = bytearray(size)
            reqs = [engine.irecv(into, 0, 7), engine.isend(out, 0, 7)]
            ok &= engine.wait(reqs, 10.0, math.inf, 0.0) and bytes(into) == out
        return bool(ok)
    finally:
        comm.Free()


def use_compiled():
    return wanted() == "c" and available()


class CompiledShapedComm(ShapedComm):
    """:class:`~emulator.shaping.comm.ShapedComm` with its message path in C. Same
    parameters and surface; made by ``ShapedComm(...)`` where :func:`use_compiled`."""

    def __init__(self, comm, members, nodes, network, *, context=0, timeout_seconds=120.0,
                 doorbells=None, bell=None):
        self._join(comm, members, nodes, network)
        self._bell = (bell or local_bell()) if doorbells else None
        self._engine = _engine.Engine(
            comm.handle, self.members, self.rank, network.model.fluid, self._model_nodes,
            self._latency, tag_base(comm, context),
            -1 if self._bell is None else self._bell.sock.fileno(),
            None if self._bell is None else list(doorbells), BELL_MAX_SECONDS,
            float(timeout_seconds))
        self._engine.owner = self.nodes
        self.shared_cpu = None

    def Isend(self, buf, dest, tag=0):
        return self._engine.isend(buf, dest, tag)

    def Irecv(self, buf, source, tag=0):
        return self._engine.irecv(buf, source, tag)

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=None, recvtag=None):
        source = dest if source is None else source
        recvtag = sendtag if recvtag is None else recvtag
        _engine.Request.Waitall([self._engine.irecv(recvbuf, source, recvtag),
                                 self._engine.isend(sendbuf, dest, sendtag)])

    @property
    def bytes_sent(self):
        return self._engine.bytes_sent

    @property
    def messages_sent(self):
        return self._engine.messages_sent

    @property
    def timeout_seconds(self):
        return self._engine.timeout_seconds

    @property
    def bell_max_seconds(self):
        return self._engine.bell_max_seconds

    @bell_max_seconds.setter
    def bell_max_seconds(self, seconds):
        self._engine.bell_max_seconds = seconds

    def _progress(self):
        return self._engine.progress()

    def __del__(self):
        pass  # the engine gives its references back to the model when it goes

    def _wait_until(self, condition, timeout=None, until=math.inf, nap_max=None):
        timeout = self.timeout_seconds if timeout is None else timeout
        if not self._engine.wait(None, timeout, until, nap_max or 0.0, condition):
            _fail(self._engine)


COMPILED.update({"class": CompiledShapedComm, "use": use_compiled})

"""NAS-like communication skeletons (class S) and application stand-ins (class A).

Each benchmark module reproduces the MPI structure of its NPB 3.x counterpart: which ranks
exchange data, message sizes and counts per iteration, the collectives used, the order of
phases and the number of iterations, with compute phases in between. Run one with::

    mpiexec -n 4 python -m skeletons cg --class S [--json]

or call :func:`run` with any communicator: a plain mpi4py communicator, the emulator's
shaped group communicator, or a :class:`skeletons.recorder.RecordingComm`.
"""

import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import numpy as np

from emulator.selection.patterns import CLASS_PARAMS, allowed_nprocs, check_nprocs

from .comm import as_comm

SKELETONS = {}
CLASSES = ("S", "W", "A", "B")
# Modeled compute speed of one emulated node: NPB on the 1.7 GHz Xeons of Goteti and
# Subhlok's testbed ran at a few hundred Mflop/s per CPU.
NODE_MFLOPS = 300.0


def register(fn):
    """Add a skeleton ``fn(run) -> None`` to the registry under its module's name."""
    name = fn.__name__.rstrip("_")
    SKELETONS[name] = fn
    return fn


@dataclass
class Result:
    name: str
    npb_class: str
    nprocs: int
    rank: int
    seconds: float
    iterations: int
    bytes_sent: int
    messages_sent: int
    phases: dict = field(default_factory=dict)
    # when the timed part began: wall time (time.time()), or a simulation's clock
    started_at: float = None

    def to_json(self):
        return asdict(self)


class Run:
    """What a skeleton sees: its communicator, class parameters, compute and phase timers."""

    def __init__(self, comm, name, npb_class, *, compute="modeled", iterations=None,
                 node_mflops=NODE_MFLOPS):
        self.comm = comm
        self.name = name
        self.npb_class = npb_class
        self.params = CLASS_PARAMS[name][npb_class]
        self.rank, self.size = comm.rank, comm.size
        self.mode = compute
        self.node_flops = node_mflops * 1e6
        self.iterations = iterations
        self.phases = {}
        self._phase = None
        # a simulated communicator keeps its own clock (skeletons.simulate)
        self.clock = getattr(comm, "clock", time.perf_counter)

    def niter(self, default):
        return default if self.iterations is None else min(self.iterations, default)

    @contextmanager
    def phase(self, name):
        start = self.clock()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + self.clock() - start

    def compute(self, flops):
        """A compute phase of ``flops`` floating-point operations on this rank."""
        if flops <= 0:
            return
        with self.phase("compute"):
            if self.mode == "modeled":
                self.comm.compute(flops / self.node_flops)
            else:
                _real_work(flops)

    def buffer(self, count, dtype=np.float64):
        """A message buffer (touched, so no page faults happen mid-transfer)."""
        return np.ones(max(int(count), 0), dtype=dtype)


_WORK = np.ones(1 << 16)


def _real_work(flops):
    """Real floating-point work: multiply-adds on a cache-sized vector until ``flops``."""
    x, y = _WORK, np.empty_like(_WORK)
    per = 2 * x.size
    for _ in range(max(1, int(flops // per))):
        np.multiply(x, 1.0000001, out=y)
        np.add(y, 1e-9, out=y)


def check(name, npb_class, nprocs):
    """Raise ValueError for an unknown benchmark or class or a disallowed process count."""
    from . import bt, cg, ep, ft, is_, lu, mg, sp  # noqa: F401  (register)

    if name not in SKELETONS:
        raise ValueError(f"unknown benchmark {name!r}; choose from {', '.join(sorted(SKELETONS))}")
    if npb_class not in CLASS_PARAMS[name]:
        raise ValueError(f"unknown class {npb_class!r}; choose from {', '.join(CLASSES)}")
    check_nprocs(name, nprocs)


def run(name, comm, npb_class="S", *, compute="modeled", iterations=None,
        node_mflops=NODE_MFLOPS):
    """Run skeleton ``name`` on ``comm``; every rank returns its :class:`Result`."""
    from . import bt, cg, ep, ft, is_, lu, mg, sp  # noqa: F401  (register)

    comm = as_comm(comm)
    check(name, npb_class, comm.size)
    ctx = Run(comm, name, npb_class, compute=compute, iterations=iterations,
              node_mflops=node_mflops)
    bytes0, msgs0 = comm.bytes_sent, comm.messages_sent
    comm.Barrier()
    start = ctx.clock()
    started_at = getattr(comm, "clock", time.time)()
    iterations_done = SKELETONS[name](ctx)
    comm.Barrier()
    # on a dilated emulator K wall seconds are one emulated second: times are emulated
    dilation = getattr(comm, "dilation", 1.0)
    seconds = (ctx.clock() - start) / dilation
    phases = {k: v / dilation for k, v in ctx.phases.items()}
    phases["communication"] = max(0.0, seconds - phases.get("compute", 0.0))
    return Result(name, npb_class, comm.size, comm.rank, seconds, iterations_done,
                  comm.bytes_sent - bytes0, comm.messages_sent - msgs0, phases, started_at)


def describe():
    from . import bt, cg, ep, ft, is_, lu, mg, sp  # noqa: F401

    return [(name, "/".join(c for c in CLASSES if c in CLASS_PARAMS[name]), allowed_nprocs(name))
            for name in sorted(SKELETONS)]

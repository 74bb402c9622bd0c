"""One emulated node's CPU as its compute phases see it: modelled (the default) or burnt
under the kernel's scheduler (``--cpu kernel``).

:class:`NodeCPU` (``--cpu model``) makes the CPU one more resource of the cluster's fluid
model (:mod:`emulator.network.sharing`): a compute phase of ``s`` seconds is a flow of ``s``
CPU-seconds on its node's CPU (one CPU-second per emulated second), and a local user wanting
a share ``L`` is a flow bounded at ``L`` there. The model's max-min rates then give the
local user its ``L`` (or an equal share, when that is less) and split the rest equally
among the phases computing at the same instant, each at most one CPU; rates are solved again
whenever a phase starts or ends, as for the network's flows. A task that waits on the
network uses no CPU. In the emulator's message path the node's CPU lives in the same
shared model as the network; under kernel shaping a node keeps a model of its own.

:class:`KernelCPU` (``--cpu kernel``) burns each phase as real work, calibrated so that a
phase of ``s`` seconds is ``s`` seconds of this machine's CPU, in the calling thread. The
node's processes (its rank and its local user, a real process that burns its share) sit in
the node's cgroup (:mod:`emulator.kernel.cgroups`), which holds them to one node's CPU, so
the kernel's scheduler decides what each phase gets.

Both keep every task's CPU time by job (finished phases and the current ones), in emulated
CPU-seconds, so the node can report CPUtime_cur (Hanzich et al. §2).

>>> from emulator.network.cluster import crossbar
>>> from emulator.network.sharing import ClusterModel
>>> model = ClusterModel(crossbar(1), max_flows=8, base=0.0)
>>> _ = model.set_clock(epoch=0.0, wall=0.0)
>>> cpu = NodeCPU(model, "n1", local_fraction=0.15, clock=lambda: 0.0)
>>> phase = cpu.begin(job=1, seconds=0.85)
>>> cpu.progress(phase)  # (done, the wall time it ends at the current rates)
(False, 1.0)
"""

import threading
import time

from ..network import _fluid


class NodeCPU:
    """A node's CPU in the fluid model ``model`` (shared by the ranks of a machine, or this
    process's own). ``dilation``: wall seconds per emulated second, as the model's clock
    says. ``clock``: wall time (for checks)."""

    def __init__(self, model, node, *, dilation=1.0, local_fraction=0.0, clock=time.time):
        self.model = model
        self.fluid = model.fluid
        self.name = node
        self.node = model.index[node]
        self.resource = model.resources.cpu(node)
        self.dilation = float(dilation)
        self.clock = clock
        self._lock = threading.Lock()
        self._done = {}  # job -> CPU-seconds of its finished phases
        self._active = {}  # token -> [job, slot, gen, seconds]
        self._next = 0
        self._local = None  # the local user's flow
        self.set_local(local_fraction)

    def set_local(self, fraction):
        """The node's local user takes ``fraction`` of the CPU (0: none)."""
        from ..network.sharing import steady_flow

        with self._lock:
            if self._local is not None:
                self.fluid.drop(*self._local, wall=self.clock())
                self._local = None
            if fraction > 0:
                self._local = steady_flow(self.model, self.name, ("cpu", self.name), fraction,
                                          dilation=self.dilation, wall=self.clock())

    def begin(self, job, seconds, bell=None):
        """Start a phase of ``seconds`` CPU-seconds for ``job``; returns its token. The model
        rings ``bell`` (a doorbell address) when a re-solve brings the phase's end earlier."""
        slot, gen, _ = self.fluid.add(self.clock(), self.node, self.node, float(seconds),
                                      resource=self.resource, receiver_bell=bell)
        with self._lock:
            self._next += 1
            self._active[self._next] = [job, slot, gen, float(seconds)]
            return self._next

    def progress(self, token):
        """(done, wall time the phase ends at the current rates)."""
        _, slot, gen, _ = self._active[token]
        view = self.fluid.view(slot, gen, wall=self.clock(), party=_fluid.RECEIVER)
        return view["done"], view["end"]

    def end(self, token):
        with self._lock:
            job, slot, gen, seconds = self._active.pop(token)
            self._done[job] = self._done.get(job, 0.0) + seconds
        self.fluid.drop(slot, gen, party=_fluid.RECEIVER, wall=self.clock())

    def compute(self, job, seconds, wait_until, bell=None):
        """A compute phase: ``wait_until(end, changed)`` waits (progressing messages) until
        wall time ``end`` or until ``changed()`` (the phase's end moved)."""
        token = self.begin(job, seconds, bell)
        try:
            while True:
                done, end = self.progress(token)
                if done:
                    return
                wait_until(end, lambda: self.progress(token)[1] != end)
        finally:
            self.end(token)

    def start_task(self, job):
        """Nothing to do: in the model a task's CPU time is its phases' (messages cost the
        model's CPUs nothing)."""

    def cpu_seconds(self, job):
        """CPUtime_cur of ``job``'s task here: its finished phases and the current ones."""
        with self._lock:
            used = self._done.get(job, 0.0)
            current = [(s, g, seconds) for j, s, g, seconds in self._active.values() if j == job]
        for slot, gen, seconds in current:
            try:
                view = self.fluid.view(slot, gen, wall=self.clock())
            except KeyError:  # ended meanwhile: counted in _done by now
                continue
            used += seconds - view["remaining"]
        return used

    def forget(self, job):
        with self._lock:
            self._done.pop(job, None)


class KernelCPU:
    """A node's CPU as the kernel shares it: each phase burns ``seconds`` of this machine's
    CPU in the calling thread (:func:`emulator.coordinator.work.burn`, at ``units_per_second``
    units per CPU-second); the node's cgroup holds the node to its share."""

    def __init__(self, units_per_second):
        self.units_per_second = float(units_per_second)
        self._lock = threading.Lock()
        self._done = {}  # job -> CPU-seconds of finished phases
        self._active = {}  # thread id -> (job, its CPU clock, the clock at the phase's start)
        self._tasks = {}  # job -> (its thread's CPU clock, the clock when the task began)

    def set_local(self, fraction):
        """Nothing to model: the local user is a real process in the node's cgroup."""

    def start_task(self, job):
        """Count all of ``job``'s CPU here from now, in the calling thread, which runs its
        task: under the kernel a task's messages take the node's CPU as its phases do, and
        CISNE's CPUtime is what the operating system accounts to the job."""
        clock = time.pthread_getcpuclockid(threading.get_ident())
        with self._lock:
            self._tasks[job] = (clock, time.clock_gettime(clock))

    def compute(self, job, seconds, wait_until=None, bell=None):
        from .work import burn

        me = threading.get_ident()
        clock = time.pthread_getcpuclockid(me)
        start = time.clock_gettime(clock)
        with self._lock:
            self._active[me] = (job, clock, start)
        try:
            burn(seconds * self.units_per_second)
        finally:
            used = time.clock_gettime(clock) - start
            with self._lock:
                del self._active[me]
                self._done[job] = self._done.get(job, 0.0) + used

    def cpu_seconds(self, job):
        """CPUtime_cur of ``job``'s task here: its thread's CPU time since :meth:`start_task`
        (its phases' alone for a task that did not begin here)."""
        with self._lock:
            task = self._tasks.get(job)
        if task is not None:
            try:
                return time.clock_gettime(task[0]) - task[1]
            except OSError:  # the thread ended meanwhile
                pass
        with self._lock:
            used = self._done.get(job, 0.0)
            running = [(clock, start) for j, clock, start in self._active.values() if j == job]
        for clock, start in running:
            try:
                used += time.clock_gettime(clock) - start
            except OSError:  # the thread ended meanwhile: counted in _done by now
                pass
        return used

    def forget(self, job):
        with self._lock:
            self._done.pop(job, None)
            self._tasks.pop(job, None)

"""One emulated node's CPU, shared by the compute phases of the parallel tasks on it and by
its local user, as a time-sharing kernel shares a CPU among runnable processes.

Compute phases are modelled (a phase of ``s`` seconds is ``s`` seconds of work on a whole
CPU), so sharing is modelled too: processor sharing with max-min fairness. The local user
wants ``local_fraction`` of the CPU and gets it (it is never more than a fair share at the
MPLs used here: 15% against 1/5 with four parallel tasks); the phases computing at the same
instant split the rest equally, each at most one CPU. A phase of ``s`` seconds on a node
where ``k`` phases compute beside a local user of share ``L`` progresses at
``min(1, (1 - L) / k)`` CPU-seconds per second, re-evaluated whenever a phase starts or
ends. A task that waits on the network uses no CPU.

Every task's CPU time (its finished and current work, in CPU-seconds) is kept by job, so
the node can report CPUtime_cur (Hanzich et al. §2).

>>> cpu = NodeCPU(local_fraction=0.15)
>>> cpu.rate_for(1), round(cpu.rate_for(2), 3)
(0.85, 0.425)
"""

import threading
import time


class NodeCPU:
    def __init__(self, local_fraction=0.0):
        self.local_fraction = float(local_fraction)
        self._lock = threading.Lock()
        self._active = {}  # phase token -> (job, virtual start, virtual target)
        self._virtual = 0.0  # CPU-seconds every active phase has received since the origin
        self._stamp = time.monotonic()
        self._done = {}  # job -> CPU-seconds of its finished phases
        self.version = 0  # changes whenever the set of computing phases does
        self._wakers = {}  # phase token -> wake() of its waiting thread, or None
        self._next = 0

    def rate_for(self, k):
        """CPU-seconds per second of each of ``k`` phases computing at once."""
        if k <= 0:
            return 0.0
        local = min(self.local_fraction, 1.0 / (k + 1)) if self.local_fraction > 0 else 0.0
        return min(1.0, (1.0 - local) / k)

    def set_local(self, fraction):
        with self._lock:
            self._advance(time.monotonic())
            self.local_fraction = float(fraction)
            self.version += 1

    def _advance(self, now):
        self._virtual += (now - self._stamp) * self.rate_for(len(self._active))
        self._stamp = now

    def begin(self, job, seconds, wake=None):
        """Start a phase of ``seconds`` CPU-seconds for ``job``; returns its token.
        ``wake()`` is called whenever another phase starts or ends (the pace changes)."""
        with self._lock:
            self._advance(time.monotonic())
            self._next += 1
            token = self._next
            self._active[token] = (job, self._virtual, self._virtual + seconds)
            self.version += 1
            others = [w for w in self._wakers.values() if w is not None]
            self._wakers[token] = wake
        for w in others:
            w()
        return token

    def eta(self, token):
        """Wall seconds from now until the phase ends at the current rates (0 if done)."""
        with self._lock:
            now = time.monotonic()
            self._advance(now)
            _, _, target = self._active[token]
            left = target - self._virtual
            if left <= 1e-9:
                return 0.0
            return left / self.rate_for(len(self._active))

    def end(self, token):
        with self._lock:
            self._advance(time.monotonic())
            job, start, target = self._active.pop(token)
            self._done[job] = self._done.get(job, 0.0) + (target - start)
            self.version += 1
            self._wakers.pop(token, None)
            others = [w for w in self._wakers.values() if w is not None]
        for w in others:
            w()

    def cpu_seconds(self, job):
        """CPUtime_cur of ``job``'s task here: its finished phases and the current one."""
        with self._lock:
            self._advance(time.monotonic())
            used = self._done.get(job, 0.0)
            for j, start, target in self._active.values():
                if j == job:
                    used += min(self._virtual, target) - start
            return used

    def forget(self, job):
        with self._lock:
            self._done.pop(job, None)

    def compute(self, job, seconds, wait_until, wake=None):
        """A compute phase: ``wait_until(deadline, version)`` waits (progressing messages)
        until wall time ``deadline`` or until :attr:`version` differs from ``version``;
        ``wake()`` interrupts that wait (see :meth:`begin`)."""
        token = self.begin(job, seconds, wake)
        try:
            while True:
                version = self.version
                left = self.eta(token)
                if left <= 0:
                    return
                wait_until(time.time() + left, version)
        finally:
            self.end(token)

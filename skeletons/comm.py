"""A plain mpi4py communicator with waits that do not spin, and the collectives of
:mod:`emulator.shaping.collectives`.

MPICH busy-polls inside blocking calls; four ranks on two cores would then measure the
polling. This adapter waits with ``Test`` and short sleeps instead, and counts what it sends.
The sleeps grow from 50 us but stay short (0.2 ms), so a wait ends at most that late: with
sleeps growing to 2 ms, a 16 KB message at 100 Mbit/s took 1.71 ms one way through the
kernel's shaping instead of 1.23 ms. Compute phases are sleeps paced like the shaped
communicator's (:mod:`emulator.shaping.timing`).
"""

import math
import time

import numpy as np
from mpi4py import MPI

from emulator.shaping import timing
from emulator.shaping.collectives import Collectives

POLL_MIN_SECONDS = 0.00005
POLL_MAX_SECONDS = 0.0002
_COMPUTE_AIM = timing.Aim(max_seconds=0.001)  # compute phases end on time on average


def wait_all(requests):
    """Wait for mpi4py requests (or the emulator's) without spinning."""
    if not requests:
        return
    if not isinstance(requests[0], MPI.Request):
        requests[0].Waitall(requests)
        return
    pause = POLL_MIN_SECONDS
    while not MPI.Request.Testall(requests):
        time.sleep(pause)
        pause = min(pause * 1.5, POLL_MAX_SECONDS)


class MPIComm(Collectives):
    """Wraps an mpi4py communicator: buffer point-to-point calls, no spinning, counting."""

    poll_max_seconds = POLL_MAX_SECONDS  # the longest sleep of wait_any between tests

    def __init__(self, comm, dilation=1.0):
        self.comm = comm
        self.dilation = dilation  # on a dilated testbed: wall seconds per emulated second
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.bytes_sent = 0
        self.messages_sent = 0
        self.shared_cpu = None  # (the node's CPU, job) on a time-shared node
        timing.precise_timers()

    def Isend(self, buf, dest, tag=0):
        self.bytes_sent += np.asarray(buf).nbytes
        self.messages_sent += 1
        return self.comm.Isend(buf, dest, tag)

    def Irecv(self, buf, source, tag=0):
        return self.comm.Irecv(buf, source, tag)

    def Send(self, buf, dest, tag=0):
        wait_all([self.Isend(buf, dest, tag)])

    def Recv(self, buf, source, tag=0):
        wait_all([self.Irecv(buf, source, tag)])

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=None, recvtag=None):
        source = dest if source is None else source
        recvtag = sendtag if recvtag is None else recvtag
        wait_all([self.Irecv(recvbuf, source, recvtag), self.Isend(sendbuf, dest, sendtag)])

    def wait_any(self, requests, *, until=math.inf, timeout=None):
        """Wait until one of ``requests`` is done, or wall time ``until`` (no spinning); the
        indices of those done. A timeout raises :class:`TimeoutError`."""
        done, pause = set(), POLL_MIN_SECONDS
        start = time.monotonic()
        while True:
            done.update(i for i, r in enumerate(requests) if i in done or r.Test())
            if not requests:  # a test drives MPI's progress; with none, a probe does, or
                self.comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG)  # this rank's sends would stall
            if done or time.time() >= until:
                return sorted(done)
            if timeout is not None and time.monotonic() - start > timeout:
                raise TimeoutError("no message in time")
            time.sleep(max(0.0, min(pause, until - time.time())))
            pause = min(pause * 1.5, self.poll_max_seconds)

    def compute(self, seconds):
        if self.shared_cpu is not None:  # the node's CPU decides when the phase ends
            cpu, job = self.shared_cpu

            def wait_until(end, changed):
                while time.time() < end and not changed():
                    time.sleep(min(max(end - time.time(), 0.0), POLL_MAX_SECONDS * 5))

            cpu.compute(job, seconds, wait_until)
            return
        seconds *= self.dilation
        _COMPUTE_AIM.pace(seconds, lambda aim: time.sleep(max(aim - time.time(), 0.0)))


def as_comm(comm):
    """Our communicator interface for ``comm`` (wrapping a plain mpi4py communicator)."""
    return MPIComm(comm) if isinstance(comm, MPI.Comm) else comm

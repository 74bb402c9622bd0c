"""The flows work of ``nodesel flows`` (``emulator.coordinator.tasks.flows``) on a recording
communicator: its receive buffers are in memory before MPI copies into them.

A payload of megabytes copied into fresh pages in one MPI call (MPICH's single copy on one
machine) took 20-30 ms under 13 ranks on 2 cores, page faults and all, and a send the rank
owed meanwhile left that late."""

import mmap
import os
import struct
import sys
import time

import numpy as np
import pytest

from emulator.coordinator import tasks

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc/self/pagemap")
PAGE = mmap.PAGESIZE


def resident_share(buf):
    """The share of ``buf``'s pages present in memory, from /proc/self/pagemap (bit 63)."""
    first = buf.ctypes.data // PAGE
    last = (buf.ctypes.data + buf.nbytes - 1) // PAGE
    with open(f"/proc/{os.getpid()}/pagemap", "rb") as f:
        f.seek(first * 8)
        entries = struct.unpack(f"{last - first + 1}Q", f.read(8 * (last - first + 1)))
    return sum(e >> 63 for e in entries) / len(entries)


class Request:
    done = True

    @staticmethod
    def Waitall(requests):
        pass


class RecordingComm:
    """Every receive done at once; the share of each buffer resident when it was posted."""

    rank, dilation = 1, 1.0

    def __init__(self):
        self.posted = []  # (tag, nbytes, resident share)

    def Irecv(self, buf, source, tag=0):
        self.posted.append((tag, buf.nbytes, resident_share(buf)))
        return Request()

    def Isend(self, buf, dest, tag=0):
        return Request()

    def Barrier(self):
        pass

    def wait_any(self, requests, *, until, timeout):
        return list(range(len(requests)))


def test_a_flows_receive_buffers_are_in_memory_when_posted():
    comm = RecordingComm()
    sizes = [8 << 20, 3 << 20]
    flows = [(0, 0.0, 0, 1, sizes[0]), (1, 0.0, 2, 1, sizes[1])]
    before = time.time()
    out = tasks.WORK["flows"](comm, flows=flows, start_wall=0.0, timeout_seconds=5.0)
    assert sorted(out["ends"]) == [0, 1]
    assert before <= out["ready_wall"] <= min(out["ends"].values())
    payloads = [(n, share) for tag, n, share in comm.posted if tag == 0]
    assert sorted(n for n, _ in payloads) == sorted(sizes)
    assert all(share == 1.0 for _, share in payloads), payloads


def test_a_flow_is_suspect_when_its_sender_or_receiver_was_not_ready_in_time():
    """The sender ready after the flow's start, or the receiver after its end in the model;
    ready at the very instant is in time."""
    flows = [(0, 1.0, 0, 1, 8), (1, 1.0, 1, 0, 8), (2, 2.0, 2, 0, 8), (3, 0.5, 2, 1, 8)]
    model_ends = [1.5, 1.25, 3.0, 1.0]
    ready = {0: 1.0, 1: 1.25, 2: 0.75}
    # 0: sender ready at its start, receiver at its end; 1: sender 0.25 s late;
    # 2: in time; 3: sender 0.25 s late, receiver 0.25 s late: the larger gap
    assert tasks.late_flows(flows, ready, model_ends) == {1: 0.25, 3: 0.25}
    ready[1] = 1.75  # now the receiver of flow 3 is 0.75 s late, of flow 0 0.25 s
    assert tasks.late_flows(flows, ready, model_ends) == {0: 0.25, 1: 0.75, 3: 0.75}

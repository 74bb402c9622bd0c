"""A traffic recorder: wrap any communicator and count what each rank sends.

:class:`RecordingComm` counts bytes and messages per destination and per call type. It runs
the collectives itself (:mod:`emulator.shaping.collectives`) over its own point-to-point calls, so
the traffic inside a collective is counted as it is sent, under the collective's name.
Tracing a skeleton gives the communication matrix from which the selection pattern comes
(step 1 of the framework).
"""

import math

import numpy as np

from emulator.files import save_figure, write_json_atomic, write_text_atomic
from emulator.network.netgraph import to_node_link
from emulator.selection.patternfile import pattern_from_matrix
from emulator.shaping.collectives import Collectives

from .comm import as_comm

CALLS = ("p2p", "Barrier", "Bcast", "Reduce", "Allreduce", "Allgather", "Alltoall", "Alltoallv")


class RecordingComm(Collectives):
    def __init__(self, comm):
        self.inner = as_comm(comm)
        self.rank, self.size = self.inner.rank, self.inner.size
        self.bytes = np.zeros((len(CALLS), self.size), dtype=np.int64)
        self.messages = np.zeros((len(CALLS), self.size), dtype=np.int64)
        self._call = 0

    def _record(self, buf, dest):
        self.bytes[self._call, dest] += np.asarray(buf).nbytes
        self.messages[self._call, dest] += 1

    @property
    def bytes_sent(self):
        return int(self.bytes.sum())

    @property
    def messages_sent(self):
        return int(self.messages.sum())

    def Isend(self, buf, dest, tag=0):
        self._record(buf, dest)
        return self.inner.Isend(buf, dest, tag)

    def Irecv(self, buf, source, tag=0):
        return self.inner.Irecv(buf, source, tag)

    def Send(self, buf, dest, tag=0):
        self._record(buf, dest)
        self.inner.Send(buf, dest, tag)

    def Recv(self, buf, source, tag=0):
        self.inner.Recv(buf, source, tag)

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=None, recvtag=None):
        self._record(sendbuf, dest)
        self.inner.Sendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag)

    def compute(self, seconds):
        self.inner.compute(seconds)

    def gather(self):
        """On rank 0: ``(bytes, messages)``, arrays [call, source, destination]; else None.
        Uses the wrapped communicator directly, so the gathering is not recorded."""
        mine = np.stack([self.bytes, self.messages])
        if self.rank != 0:
            self.inner.Send(mine, 0, tag=99)
            return None
        full = np.zeros((2, len(CALLS), self.size, self.size), dtype=np.int64)
        full[:, :, 0, :] = mine
        for src in range(1, self.size):
            got = np.empty_like(mine)
            self.inner.Recv(got, src, tag=99)
            full[:, :, src, :] = got
        return full[0], full[1]


def _as_call(name):
    index = CALLS.index(name)

    def method(self, *args, **kwargs):
        previous, self._call = self._call, index
        try:
            return getattr(Collectives, name)(self, *args, **kwargs)
        finally:
            self._call = previous

    method.__name__ = name
    return method


for _name in CALLS[1:]:
    setattr(RecordingComm, _name, _as_call(_name))


def trace_files(base):
    """The files a trace writes: matrix JSON, matrix CSV and pattern node-link JSON."""
    stem = base[:-5] if base.endswith(".json") else base
    return {"json": stem + ".json", "csv": stem + ".csv", "pattern": stem + ".pattern.json"}


def write_trace(base, bytes_by_call, messages_by_call, *, benchmark, npb_class, iterations,
                threshold=0.1, min_bytes=1024):
    """Write the communication matrix (JSON and CSV) and the pattern it gives.

    The pattern keeps edges with at least ``threshold`` of the heaviest edge's bytes and at
    least ``min_bytes`` per iteration (so a few scalar reductions do not make edges). Its
    rounds are the most messages a rank sends per iteration, every call's: a trace cannot
    tell which of them overlap, so each is taken to wait its latency after the last.
    """
    files = trace_files(base)
    total = bytes_by_call.sum(axis=0)
    per_iteration = total / max(iterations, 1)
    data = {"benchmark": benchmark, "class": npb_class, "nprocs": int(total.shape[0]),
            "iterations": iterations, "bytes": total.tolist(),
            "messages": messages_by_call.sum(axis=0).tolist(),
            "bytes_by_call": {c: bytes_by_call[i].tolist() for i, c in enumerate(CALLS)
                              if bytes_by_call[i].any()},
            "messages_by_call": {c: messages_by_call[i].tolist() for i, c in enumerate(CALLS)
                                 if messages_by_call[i].any()}}
    write_json_atomic(files["json"], data)
    lines = [",".join(str(i) for i in range(total.shape[0]))]
    lines += [",".join(str(int(v)) for v in row) for row in total]
    write_text_atomic(files["csv"], "\n".join(lines) + "\n")
    sym = per_iteration + per_iteration.T
    matrix = np.where(sym >= min_bytes, per_iteration, 0)
    rounds = messages_by_call.sum(axis=(0, 2)).max(initial=0) / max(iterations, 1)
    pattern = pattern_from_matrix(matrix, threshold=threshold, name=f"{benchmark} (traced)",
                                  rounds=rounds)
    write_json_atomic(files["pattern"], to_node_link(pattern))
    return files, pattern


def plot_pattern(pattern, path, title):
    """A Figure-2-style picture: ranks on a circle, line width proportional to bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = pattern.number_of_nodes()
    pos = {r: (math.cos(2 * math.pi * r / m), math.sin(2 * math.pi * r / m)) for r in range(m)}
    heaviest = max((b for *_, b in pattern.edges(data="bytes")), default=1)
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    for a, b, nbytes in pattern.edges(data="bytes"):
        (x1, y1), (x2, y2) = pos[a], pos[b]
        ax.plot([x1, x2], [y1, y2], color="tab:blue", lw=0.5 + 7.5 * nbytes / heaviest,
                solid_capstyle="round", zorder=1)
    for r, (x, y) in pos.items():
        ax.scatter([x], [y], s=500, color="white", edgecolors="black", zorder=2)
        ax.text(x, y, str(r), ha="center", va="center", zorder=3)
    ax.set_title(title, fontsize=10)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)

"""Collective operations built from point-to-point messages.

A class that provides ``rank``, ``size``, ``Send``, ``Recv`` and ``Sendrecv`` (mpi4py buffer
signatures) gets the collectives from :class:`Collectives`. The shaped communicator uses it,
so collectives are shaped; the traffic recorder uses it, so it counts the traffic inside
collectives exactly as it is sent. The algorithms are the standard ones:

- Barrier: dissemination (ceil(log2 p) rounds of zero-byte messages);
- Bcast, Reduce: binomial tree;
- Allreduce: recursive doubling (powers of two), else reduce then broadcast;
- Allgather: recursive doubling (powers of two), else ring;
- Alltoall, Alltoallv: pairwise exchange (p - 1 rounds).

Buffers are numpy arrays; counts in ``Alltoallv`` are in elements, displacements the
running sums of the counts.
"""

import numpy as np
from mpi4py import MPI

COLLECTIVE_TAG_BASE = 1 << 12  # user tags must stay below this


def _apply(op, a, b):
    if op == MPI.SUM:
        return a + b
    if op == MPI.MAX:
        return np.maximum(a, b)
    if op == MPI.MIN:
        return np.minimum(a, b)
    if op == MPI.PROD:
        return a * b
    raise ValueError(f"unsupported reduction {op}")


class Collectives:
    """Mixin: collectives over ``Send``/``Recv``/``Sendrecv``, and ``Get_rank``/``Get_size``."""

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def _coll_tag(self, k):
        return COLLECTIVE_TAG_BASE + k

    def Barrier(self):
        empty = np.zeros(0, dtype=np.uint8)
        dist = 1
        while dist < self.size:
            self.Sendrecv(empty, (self.rank + dist) % self.size, self._coll_tag(1),
                          np.zeros(0, dtype=np.uint8), (self.rank - dist) % self.size,
                          self._coll_tag(1))
            dist *= 2

    def Bcast(self, buf, root=0):
        rel = (self.rank - root) % self.size
        mask = 1
        while mask < self.size:
            if rel & mask:
                self.Recv(buf, (rel - mask + root) % self.size, self._coll_tag(2))
                break
            mask <<= 1
        mask >>= 1
        while mask > 0:
            if rel + mask < self.size:
                self.Send(buf, (rel + mask + root) % self.size, self._coll_tag(2))
            mask >>= 1

    def Reduce(self, sendbuf, recvbuf, op=MPI.SUM, root=0):
        acc = np.array(sendbuf, copy=True)
        tmp = np.empty_like(acc)
        rel = (self.rank - root) % self.size
        mask = 1
        while mask < self.size:
            if rel & mask:
                self.Send(acc, (rel - mask + root) % self.size, self._coll_tag(3))
                break
            if rel + mask < self.size:
                self.Recv(tmp, (rel + mask + root) % self.size, self._coll_tag(3))
                acc = _apply(op, acc, tmp)
            mask <<= 1
        if self.rank == root:
            np.copyto(np.asarray(recvbuf), acc)

    def Allreduce(self, sendbuf, recvbuf, op=MPI.SUM):
        acc = np.array(sendbuf, copy=True)
        if self.size & (self.size - 1) == 0:  # recursive doubling
            tmp = np.empty_like(acc)
            mask = 1
            while mask < self.size:
                self.Sendrecv(acc, self.rank ^ mask, self._coll_tag(4), tmp, self.rank ^ mask,
                              self._coll_tag(4))
                acc = _apply(op, acc, tmp)
                mask <<= 1
            np.copyto(np.asarray(recvbuf), acc)
        else:
            self.Reduce(acc, recvbuf, op, 0)
            self.Bcast(recvbuf, 0)

    def Allgather(self, sendbuf, recvbuf):
        send = np.asarray(sendbuf)
        out = np.asarray(recvbuf).reshape(self.size, -1)
        out[self.rank] = send.reshape(-1)
        if self.size & (self.size - 1) == 0:  # recursive doubling on blocks
            mask = 1
            while mask < self.size:
                peer = self.rank ^ mask
                mine, theirs = self.rank & ~(mask - 1), peer & ~(mask - 1)
                block = np.ascontiguousarray(out[mine:mine + mask])
                got = np.empty_like(block)
                self.Sendrecv(block, peer, self._coll_tag(5), got, peer, self._coll_tag(5))
                out[theirs:theirs + mask] = got
                mask <<= 1
        else:  # ring
            for step in range(self.size - 1):
                send_idx = (self.rank - step) % self.size
                recv_idx = (self.rank - step - 1) % self.size
                got = np.empty_like(out[0])
                self.Sendrecv(np.ascontiguousarray(out[send_idx]), (self.rank + 1) % self.size,
                              self._coll_tag(5), got, (self.rank - 1) % self.size,
                              self._coll_tag(5))
                out[recv_idx] = got

    def Alltoall(self, sendbuf, recvbuf):
        send = np.asarray(sendbuf).reshape(self.size, -1)
        recv = np.asarray(recvbuf).reshape(self.size, -1)
        recv[self.rank] = send[self.rank]
        for step in range(1, self.size):  # pairwise exchange
            dest = (self.rank + step) % self.size
            src = (self.rank - step) % self.size
            got = np.empty_like(recv[src])
            self.Sendrecv(np.ascontiguousarray(send[dest]), dest, self._coll_tag(6), got, src,
                          self._coll_tag(6))
            recv[src] = got

    def Alltoallv(self, sendbuf, sendcounts, recvbuf, recvcounts):
        send, recv = np.asarray(sendbuf).reshape(-1), np.asarray(recvbuf).reshape(-1)
        sdispl = np.concatenate([[0], np.cumsum(sendcounts)[:-1]]).astype(int)
        rdispl = np.concatenate([[0], np.cumsum(recvcounts)[:-1]]).astype(int)
        me = self.rank
        recv[rdispl[me]:rdispl[me] + recvcounts[me]] = send[sdispl[me]:sdispl[me] + sendcounts[me]]
        for step in range(1, self.size):
            dest = (me + step) % self.size
            src = (me - step) % self.size
            got = np.empty(int(recvcounts[src]), dtype=recv.dtype)
            self.Sendrecv(np.ascontiguousarray(send[sdispl[dest]:sdispl[dest] + sendcounts[dest]]),
                          dest, self._coll_tag(7), got, src, self._coll_tag(7))
            recv[rdispl[src]:rdispl[src] + recvcounts[src]] = got

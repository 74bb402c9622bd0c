"""A receive of one control message of any size, tested without blocking.

The coordinator and its node ranks wait for each other's pickled messages by polling, as a
request from mpi4py's ``irecv`` is polled. But ``irecv`` without a buffer takes at most
32 KiB, and a larger message (a job's flows list, a node's results for many flows) fails
it as truncated. :class:`Receive` matches the message with a probe (``improbe``) and then
receives it whole, whatever its size.
"""

from typing import Any


class Receive:
    """The next message from ``source`` with ``tag`` on ``comm``: :meth:`test` returns
    ``(done, message)`` as ``Request.test`` does, receiving it once it has come."""

    def __init__(self, comm: Any, source: int, tag: int) -> None:
        self.comm, self.source, self.tag = comm, source, tag
        self._done, self._message = False, None

    def test(self) -> tuple:
        if not self._done:
            matched = self.comm.improbe(source=self.source, tag=self.tag)
            if matched is not None:
                self._message = matched.recv()
                self._done = True
        return self._done, self._message

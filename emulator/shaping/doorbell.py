"""Doorbells: wake a waiting rank the moment a message is sent to it.

MPI has no blocking wait that does not spin, so the shaped communicator's waits sleep
between polls, and a message that arrives during a sleep is noticed up to one sleep late:
with 0.1-0.3 ms sleeps that is several times the emulated latency of a LAN. A doorbell is a
Unix datagram socket per rank, in the abstract namespace (nothing on disk to clean up).
After every MPI send a rank rings the receiver's bell; a waiting rank sleeps in ``select``
on its own bell until a ring or its next due delivery, whichever comes first.

Abstract sockets reach only ranks on the same machine and in the same network namespace:
:func:`place` names both, and a group whose ranks are not all in one place goes without
bells (its waits poll).
"""

import os
import select
import socket
import time

from . import timing

_BELL = None
# A ring may come before its message is visible to MPI: measured on a loaded 2-core host,
# up to ~7 ms after the sender's MPI call returned. For this long after a ring that has
# brought nothing yet, sleeps are no longer than the time since the ring, and never longer
# than EARLY_POLL_MAX_SECONDS: a late message costs at most that, not a whole sleep.
EARLY_RING_SECONDS = 0.05
EARLY_POLL_SECONDS = 0.00005
EARLY_POLL_MAX_SECONDS = 0.002


def early_ring_cap(since_seconds):
    """The longest sleep ``since_seconds`` after a ring that has brought nothing yet."""
    return min(max(since_seconds, EARLY_POLL_SECONDS), EARLY_POLL_MAX_SECONDS)


def boot_id():
    """The running kernel's boot id (None where Linux does not give one)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def place():
    """Where this rank's bell can be heard: boot id and network namespace."""
    boot = boot_id()
    try:
        return None if boot is None else f"{boot}/{os.stat('/proc/self/ns/net').st_ino}"
    except OSError:
        return None


class Doorbell:
    """This rank's bell: :meth:`ring` another's, :meth:`wait` for one's own."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("")  # Linux picks a free abstract address
        self.sock.setblocking(False)
        self.address = self.sock.getsockname()

    def ring(self, address):
        """Wake the rank at ``address``. A full queue means it has rings waiting already; a
        rank that is gone is found by its peers' timeouts."""
        try:
            self.sock.sendto(b"\0", address)
        except OSError:
            pass

    def wait(self, seconds):
        """Sleep until a ring or for ``seconds``; True if it rang (rings are drained)."""
        if seconds > 0 and not select.select([self.sock], [], [], seconds)[0]:
            return False
        rang = False
        try:
            while True:
                self.sock.recv(16)
                rang = True
        except BlockingIOError:
            return rang

    def close(self):
        self.sock.close()


class Sleeper:
    """The sleeps of a loop that polls for messages which their senders announce by ringing
    ``bell``: after a poll that found nothing, :meth:`sleep` sleeps until a ring or for
    ``max_seconds``, and briskly after a ring whose message has not come yet; call
    :meth:`found` when a poll found something. Without a bell it polls with sleeps growing
    from ``poll_seconds[0]`` to ``poll_seconds[1]``.
    """

    def __init__(self, bell, max_seconds, poll_seconds=(0.0005, 0.01)):
        self.bell, self.max_seconds = bell, max_seconds
        self.min_poll, self.max_poll = poll_seconds
        self.pause = self.min_poll
        self.rang_at = None

    def found(self):
        """A poll found a message. Polls stay brisk for the rest of the last ring's window: one
        wait drains every ring that came, and the other messages they announced may not be
        visible yet (a reply of four nodes at once: the first found, the rest slept out a
        whole 0.25 s nap)."""
        self.pause = self.min_poll

    def sleep(self, at_most=None):
        cap = self.max_seconds if at_most is None else max(min(self.max_seconds, at_most), 0.0)
        if self.bell is None:
            time.sleep(min(self.pause, cap))
            self.pause = min(self.pause * 1.5, self.max_poll)
            return
        if self.rang_at is not None:
            since = time.monotonic() - self.rang_at
            if since <= EARLY_RING_SECONDS:
                cap = min(cap, early_ring_cap(since))
            else:
                self.rang_at = None
        if self.bell.wait(cap):
            self.rang_at = time.monotonic()


def local():
    """This process's bell (made on first use), or None where Unix sockets are missing."""
    global _BELL
    if _BELL is None and hasattr(socket, "AF_UNIX") and place() is not None:
        _BELL = Doorbell()
        timing.precise_timers()
    return _BELL

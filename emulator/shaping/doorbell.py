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

from . import timing

_BELL = None


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


def local():
    """This process's bell (made on first use), or None where Unix sockets are missing."""
    global _BELL
    if _BELL is None and hasattr(socket, "AF_UNIX") and place() is not None:
        _BELL = Doorbell()
        timing.precise_timers()
    return _BELL

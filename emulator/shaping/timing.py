"""Timed waits that end on time on a busy host.

A sleep on Linux ends late: by the timer slack (50 us unless asked otherwise) plus the time
to be scheduled again, which on an oversubscribed host, or a virtual machine, is often
longer than a skeleton's compute phase. Both communicators (the shaped one and the plain one
used under kernel shaping) pace compute phases with :class:`Aim`, so a phase lasts what was
asked for on average, whichever backend shapes the traffic.
"""

import ctypes
import functools
import time

_PR_SET_TIMERSLACK = 29
LEAD_WEIGHT = 0.1


@functools.cache
def precise_timers():
    """Ask Linux for sleeps that end on time (1 us timer slack instead of 50 us); once per
    process."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_TIMERSLACK, 1000, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Aim:
    """Where a timed wait should aim so that it ends on time on average.

    ``lead_seconds`` integrates how late waits have ended (:meth:`observe`), between 0 and
    ``max_seconds``; :meth:`target` aims that much early, never before the wait's start.

    >>> aim = Aim(0.001)
    >>> for _ in range(100):
    ...     aim.observe(0.0002)  # every wait ended 0.2 ms late
    >>> round(aim.lead_seconds, 6), round(aim.target(10.0, 5.0), 6)
    (0.001, 9.999)
    """

    def __init__(self, max_seconds):
        self.max_seconds = max_seconds
        self.lead_seconds = 0.0

    def target(self, end, seconds):
        """The wall time to wait until for a wait of ``seconds`` that should end at ``end``."""
        return end - min(self.lead_seconds, seconds)

    def observe(self, late_seconds):
        """A wait ended ``late_seconds`` after its end (negative: early)."""
        self.lead_seconds = min(max(self.lead_seconds + LEAD_WEIGHT * late_seconds, 0.0),
                                self.max_seconds)

    def pace(self, seconds, wait_until):
        """Let ``seconds`` of wall time pass: ``wait_until(t)`` waits until wall time ``t``,
        aimed early by the lead, and how late it ended is observed."""
        end = time.time() + seconds
        wait_until(self.target(end, seconds))
        self.observe(time.time() - end)

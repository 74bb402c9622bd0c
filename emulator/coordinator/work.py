"""Real CPU work for compute phases under the kernel's scheduler (``--cpu kernel``).

:func:`calibrate` measures how many work units this machine's CPU does per CPU-second (by
the thread's own CPU clock, so a busy machine does not skew it); :func:`burn` does that much
work, in C with the GIL released. A compute phase of ``s`` seconds burns ``s`` times the
calibrated rate: ``s`` CPU-seconds of this machine's CPU, whatever share of it the node's
cgroup then gives it.
"""

import os
import statistics
import time

from ._work import burn as _burn

CALIBRATION_SECONDS = 0.2


def burn(units):
    """Do ``units`` units of floating-point work in this thread."""
    if units > 0:
        _burn(float(units))


def calibrate(seconds=CALIBRATION_SECONDS, *, threads=None):
    """Work units per CPU-second of a thread, over about ``seconds`` of CPU, measured with
    ``threads`` threads burning at once (default one per core: an emulated cluster keeps
    every core busy, and a core does less work per second beside busy neighbours).

    >>> calibrate(0.05, threads=1) > 0
    True
    """
    import threading

    units = 100.0
    while True:  # a size that takes about a quarter of ``seconds``
        start = time.thread_time()
        _burn(units)
        if time.thread_time() - start >= seconds / 4:
            break
        units *= 4
    rates = []

    def one():
        best = 0.0
        for _ in range(3):  # the best of three: interruptions only slow a run down
            start = time.thread_time()
            _burn(units)
            best = max(best, units / max(time.thread_time() - start, 1e-9))
        rates.append(best)

    workers = [threading.Thread(target=one) for _ in range(threads or os.cpu_count() or 1)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return statistics.median(rates)

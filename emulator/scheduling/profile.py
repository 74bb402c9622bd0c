"""An availability profile: free processors over future time, as backfilling schedulers keep
it (Mu'alem and Feitelson).

Breakpoints ``times[i]`` with ``free[i]`` processors free on ``[times[i], times[i+1])``; the
last segment runs to infinity. Running jobs release processors at their estimated ends;
reservations take processors over an interval. A profile's ``earliest`` finds the first time a
job of ``procs`` processors fits for ``duration`` seconds, and its ``compress`` is conservative
backfilling's compression of every reservation of a queue.

:class:`Profile` is the same in C (``_profile.c``: a compression pass over a long queue costs no
Python call per job); :class:`PyProfile`, in :mod:`.pyprofile`, is its reference in numpy, and
the fallback where the C module is not built (a schedule run without it imports numpy).
"""

try:
    from ._profile import Profile
except ImportError:  # not built: the reference
    from .pyprofile import PyProfile as Profile

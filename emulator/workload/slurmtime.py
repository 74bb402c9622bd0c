"""Slurm's durations, as ``slurm.conf`` and ``sacct`` write them: ``minutes``,
``minutes:seconds``, ``hours:minutes:seconds``, ``days-hours``, ``days-hours:minutes`` and
``days-hours:minutes:seconds`` (Slurm's ``time_str2secs``), ``INFINITE`` or ``UNLIMITED``.

>>> [slurm_duration_seconds(t) for t in ("5", "10:30", "1-2", "1-2:03", "1-02:03:04")]
[300.0, 630.0, 93600.0, 93780.0, 93784.0]
>>> slurm_duration_seconds("UNLIMITED")
inf
"""

import math

from ..files import digits_only

__all__ = ["slurm_duration_seconds"]

UNLIMITED = ("INFINITE", "UNLIMITED")


def slurm_duration_seconds(text: str) -> float:
    """Seconds of a Slurm duration; ``math.inf`` for ``INFINITE`` or ``UNLIMITED``. Raises
    ValueError naming the text if it is not one (digits 0-9 only: no sign, decimal point,
    exponent, nan or inf)."""
    text = text.strip()
    if text.upper() in UNLIMITED:
        return math.inf
    days, dash, clock = text.partition("-")
    if not dash:
        days, clock = "0", text
    parts = clock.split(":")
    if not digits_only(days) or not 1 <= len(parts) <= 3 or not all(map(digits_only, parts)):
        raise ValueError(f"not a Slurm duration: {text!r}")
    values = [int(p) for p in parts]
    if dash:  # days-hours[:minutes[:seconds]]
        hours, minutes, seconds = values + [0] * (3 - len(values))
    elif len(values) == 1:  # minutes
        hours, minutes, seconds = 0, values[0], 0
    else:  # [hours:]minutes:seconds
        hours, minutes, seconds = [0] * (3 - len(values)) + values
    return float(((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds)

"""Times as a scheduler's profile holds them: rounded up to its resolution (Slurm's
``bf_resolution``), and the end of time."""

import math

INFINITY = float("inf")


def round_up(seconds, resolution):
    """``seconds`` rounded up to a multiple of ``resolution`` (as is where it is 0); a
    positive time is at least one multiple, however small against it."""
    if not resolution > 0:
        return seconds
    steps = math.ceil(seconds / resolution - 1e-9)
    return (1 if seconds > 0 and steps < 1 else steps) * resolution

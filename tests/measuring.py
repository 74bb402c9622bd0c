"""Measuring the kernel's shaping and CPU groups on a machine that others share.

Contention slows a shaped link or a capped group down and never speeds it up: a bound that it
cannot break (a ceiling on a rate, a floor on a time) must hold on every attempt, and a bound it
can break on the best of a few attempts, as timeit keeps the best of its repeats.
"""

ATTEMPTS = 3


def best_of(measure, within, attempts=ATTEMPTS):
    """The results of ``measure()``, called until one is ``within`` bounds or ``attempts`` are
    spent; the last is the one to judge."""
    results = []
    for _ in range(attempts):
        results.append(measure())
        if within(results[-1]):
            break
    return results

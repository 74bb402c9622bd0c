"""The probe schedule of a measurement: every pair once, no node in two probes at once."""

import heapq
import random

import pytest

from emulator.coordinator.measure import ProbeQueue, round_robin_pairs


def _run(nodes, seconds_of):
    """Drive a ProbeQueue as the monitor does, with probe durations ``seconds_of(pair)``;
    returns [(start, end, pair)]."""
    queue, now, running, log = ProbeQueue(nodes), 0.0, [], []
    while len(queue) or running:
        for pair in queue.ready():
            heapq.heappush(running, (now + seconds_of(pair), now, pair))
        end, start, pair = heapq.heappop(running)
        now = end
        log.append((start, end, pair))
        queue.done(pair)
    return log


@pytest.mark.parametrize("n", [2, 3, 4, 7, 10, 16])
def test_every_pair_is_probed_once_and_no_node_is_in_two_probes_at_once(n):
    nodes = [f"n{i}" for i in range(1, n + 1)]
    rng = random.Random(n)
    seconds = {}
    log = _run(nodes, lambda p: seconds.setdefault(frozenset(p), rng.uniform(0.01, 0.2)))
    pairs = [frozenset(p) for _, _, p in log]
    assert len(pairs) == len(set(pairs)) == n * (n - 1) // 2
    for i, (s1, e1, p1) in enumerate(log):
        for s2, e2, p2 in log[i + 1:]:
            if set(p1) & set(p2):
                assert e1 <= s2 or e2 <= s1, (p1, p2)  # one node never probes twice at once


def test_equal_probes_take_about_as_long_as_rounds():
    nodes = [f"n{i}" for i in range(1, 65)]
    rng = random.Random(1)
    seconds = {}
    log = _run(nodes, lambda p: seconds.setdefault(frozenset(p), rng.uniform(0.95, 1.05)))
    rounds = sum(max(seconds[frozenset(p)] for p in pairs) for pairs in round_robin_pairs(nodes))
    assert max(end for _, end, _ in log) < 1.05 * rounds


@pytest.mark.parametrize("seed", range(3))
def test_links_of_mixed_speeds_are_measured_sooner_than_in_rounds(seed):
    nodes = [f"n{i}" for i in range(1, 65)]
    rng = random.Random(seed)
    seconds = {frozenset(p): 0.021 * 100 / rng.choice([20, 25, 100 / 3, 50, 100])  # 256 KiB
               for pairs in round_robin_pairs(nodes) for p in pairs}
    log = _run(nodes, lambda p: seconds[frozenset(p)])
    rounds = sum(max(seconds[frozenset(p)] for p in pairs) for pairs in round_robin_pairs(nodes))
    assert max(end for _, end, _ in log) < 0.8 * rounds

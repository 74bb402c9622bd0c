"""Doorbells: a ring wakes a waiting process; nothing else does before the timeout."""

import multiprocessing
import time

import pytest

from emulator.shaping import doorbell

pytestmark = pytest.mark.skipif(doorbell.place() is None, reason="needs Linux (boot id, netns)")


def _ring_later(address, seconds):
    time.sleep(seconds)
    doorbell.Doorbell().ring(address)


def test_a_ring_from_another_process_ends_the_wait():
    bell = doorbell.Doorbell()
    ringer = multiprocessing.get_context("fork").Process(target=_ring_later,
                                                         args=(bell.address, 0.2))
    ringer.start()
    try:
        start = time.monotonic()
        assert bell.wait(10.0) is True
        waited = time.monotonic() - start
    finally:
        ringer.join()
        bell.close()
    assert 0.15 < waited < 5.0  # woken by the ring, not by the 10 s timeout


def test_without_a_ring_the_wait_times_out():
    bell = doorbell.Doorbell()
    start = time.monotonic()
    assert bell.wait(0.05) is False
    assert time.monotonic() - start >= 0.05
    bell.close()


def test_rings_are_drained_and_a_full_queue_or_a_closed_bell_is_no_error():
    bell, other = doorbell.Doorbell(), doorbell.Doorbell()
    for _ in range(1000):  # far more than the socket queues
        other.ring(bell.address)
    assert bell.wait(0) is True
    assert bell.wait(0) is False  # all drained
    address = bell.address
    bell.close()
    other.ring(address)  # the rank is gone: its peers' timeouts deal with that
    other.close()


def test_place_names_machine_and_network_namespace():
    boot, netns = doorbell.place().split("/")
    assert len(boot) == 36 and netns.isdigit()
    assert doorbell.local() is doorbell.local()  # one bell per process


def test_a_message_that_comes_after_its_ring_is_seen_within_a_brisk_poll():
    """MPI may show a message some ms after its ring (seen up to ~7 ms on a loaded host): the
    loop keeps polling at EARLY_POLL_MAX_SECONDS for EARLY_RING_SECONDS, not one long sleep."""
    bell, other = doorbell.Doorbell(), doorbell.Doorbell()
    sleeper = doorbell.Sleeper(bell, max_seconds=10.0)
    other.ring(bell.address)
    # the "message" shows 30 ms after the ring, inside the early window (50 ms): some 15 polls
    # at the 2 ms cap, and at least 5 even when a loaded host oversleeps each threefold
    visible_at = time.monotonic() + 0.03
    sleeper.sleep()  # the ring: nothing to see yet
    polls = 0
    while time.monotonic() < visible_at:
        sleeper.sleep()
        polls += 1
    late = time.monotonic() - visible_at
    bell.close()
    other.close()
    assert polls >= 5  # brisk polls, not one sleep of 10 s
    assert late < 1.0, late  # found at the next poll, not at the 10 s net


def test_after_the_window_an_empty_ring_no_longer_keeps_the_loop_polling():
    bell, other = doorbell.Doorbell(), doorbell.Doorbell()
    sleeper = doorbell.Sleeper(bell, max_seconds=0.3)
    other.ring(bell.address)
    sleeper.sleep()
    time.sleep(doorbell.EARLY_RING_SECONDS)
    start = time.monotonic()
    sleeper.sleep()
    bell.close()
    other.close()
    assert time.monotonic() - start >= 0.3  # the full sleep: nothing was coming


def test_the_compiled_engine_keeps_the_same_early_ring_window():
    engine = pytest.importorskip("emulator.shaping._engine")
    assert engine.EARLY_RING_SECONDS == doorbell.EARLY_RING_SECONDS
    assert engine.EARLY_POLL_MAX_SECONDS == doorbell.EARLY_POLL_MAX_SECONDS


def test_after_a_ring_the_sleeper_polls_briskly_for_every_message_it_announced():
    """Four nodes reply and ring at once; one wait drains the four rings. The first reply
    found must not end the brisk polls: the other three, announced by rings already drained,
    may become visible a moment later, and sleeping out the whole nap for them cost the
    coordinator 0.25 s on a trial in three."""
    bell, ringer = doorbell.Doorbell(), doorbell.Doorbell()
    sleeper = doorbell.Sleeper(bell, 0.25)
    try:
        for _ in range(4):
            ringer.ring(bell.address)
        sleeper.sleep()  # drains all four
        sleeper.found()  # the first reply
        start = time.monotonic()
        sleeper.sleep()  # no ring left: a brisk poll, not a 0.25 s nap
        assert time.monotonic() - start < 0.02
        time.sleep(doorbell.EARLY_RING_SECONDS)
        start = time.monotonic()
        sleeper.sleep()  # the ring's window has run out: the whole nap
        assert time.monotonic() - start >= 0.2
    finally:
        bell.close()
        ringer.close()

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

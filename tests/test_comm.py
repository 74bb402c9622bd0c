"""The plain communicator's waits: no spinning, and no sleeping long past a completion."""

import types

from skeletons import comm


class _Request:
    """Completes on the ``after``-th check."""

    def __init__(self, after):
        self.checks_left = after

    @classmethod
    def Testall(cls, requests):
        requests[0].checks_left -= 1
        return requests[0].checks_left <= 0


def test_a_wait_checks_at_least_every_fifth_of_a_millisecond(monkeypatch):
    slept = []
    monkeypatch.setattr(comm, "MPI", types.SimpleNamespace(Request=_Request))
    monkeypatch.setattr(comm, "time", types.SimpleNamespace(sleep=slept.append))
    comm.wait_all([_Request(after=40)])
    assert len(slept) == 39  # it sleeps between checks, never spins
    assert slept[0] == comm.POLL_MIN_SECONDS == 0.00005
    assert slept == sorted(slept)  # backs off ...
    assert max(slept) == comm.POLL_MAX_SECONDS == 0.0002  # ... to at most 0.2 ms

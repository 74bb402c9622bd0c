"""What every test session shares: MPICH's shared memory left by the tests' own MPI jobs
(ranks a test kills, jobs it starts with mpiexec directly) goes when the session ends."""

import time

import pytest

from emulator.coordinator import stop


@pytest.fixture(scope="session", autouse=True)
def no_mpich_segments_left():
    began = time.time()
    yield
    stop.remove_orphan_segments(began)

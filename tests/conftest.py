"""What every test session shares: MPICH's shared memory left by the tests' own MPI jobs
(ranks a test kills, jobs it starts with mpiexec directly) goes when the session ends; the
test program ``tests/mpi_programs/paced.c``, built once with the mpich wheel's mpicc."""

import time

import pytest

from emulator.coordinator import stop
from programs import HAVE_MPICC, build_paced


@pytest.fixture(scope="session", autouse=True)
def no_mpich_segments_left():
    began = time.time()
    yield
    stop.remove_orphan_segments(began)


@pytest.fixture(scope="session")
def paced(tmp_path_factory):
    """``tests/mpi_programs/paced.c`` built with the mpich wheel's mpicc."""
    if not HAVE_MPICC:
        pytest.skip("needs the mpich wheel's mpicc and a C compiler")
    return build_paced(str(tmp_path_factory.mktemp("paced")))

"""Real MPI programs for the tests: the mpich wheel's mpicc, and ``paced.c`` built with it."""

import os
import shutil
import subprocess
import sys

from emulator.coordinator.launch import mpiexec_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPICC = os.path.join(os.path.dirname(sys.executable), "mpicc")
HAVE_MPICC = mpiexec_path() is not None and os.path.exists(MPICC) and \
    (shutil.which("gcc") or shutil.which("cc")) is not None


def build_paced(folder: str) -> str:
    """``paced`` (the C program that times paced messages, its usage at its top) built in
    ``folder``; its path."""
    out = os.path.join(folder, "paced")
    build = subprocess.run([MPICC, "-O2", "-o", out,
                            os.path.join(ROOT, "tests", "mpi_programs", "paced.c")],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    return out

"""The typed part of the public API passes mypy (pyproject.toml's [tool.mypy] lists it):
every function annotated, and the annotations consistent with the code."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_mypy_passes_on_the_typed_modules(tmp_path):
    pytest.importorskip("mypy", reason="mypy comes with the test extra")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Success: no issues found in 26 source files" in proc.stdout

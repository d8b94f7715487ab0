"""Runs the C++ unit tests (tests/cpp/test_*.cpp, built by CMake into build/tests/)."""
import glob
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = sorted(glob.glob(os.path.join(ROOT, "tests", "cpp", "test_*.cpp")))


@pytest.mark.parametrize("name", [os.path.basename(s)[:-4] for s in SOURCES])
def test_cpp(name):
    binary = os.path.join(ROOT, "build", "tests", name)
    assert os.path.exists(binary), f"{binary} not built: run `make build`"
    proc = subprocess.run([binary], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr

import os
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The runtime tests own their compile cache; set before the runtime initializes.
os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="torch_tpu_test_cache_"))


def run_python(code, env=None, check=True):
    """Runs `code` in a fresh interpreter (the runtime is one per process); returns the result."""
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env,
                          cwd=ROOT, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def python():
    return run_python


@pytest.fixture(autouse=True)
def _seeded():
    """Every test draws the same random inputs whatever ran before it (no order-dependent results)."""
    import torch
    torch.manual_seed(0)

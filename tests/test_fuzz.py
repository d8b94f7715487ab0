"""A short seeded slice of the fuzzer (`make fuzz` runs 5,000 cases): random ops, shapes (0-size
too), dtypes, bad dims, out-of-range indices and non-contiguous views on tpu against CPU. Any wrong
exception type, silent mismatch, abort or hang fails."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("fuse", ["0", "1"], ids=["strict", "fuse"])
def test_fuzz_slice(fuse):
    proc = subprocess.run([sys.executable, "tools/fuzz.py", "--cases", "400", "--seed", "7"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, TORCH_TPU_DEFER_AND_FUSE=fuse))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "400 cases (seed 7): 400 ok" in proc.stdout


def test_fuzzer_catches_a_silent_mismatch(monkeypatch):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import torch

    import fuzz
    case = {"kind": "unary", "op": "neg", "shape": [3], "dtype": "float32", "view": "plain", "seed": 1}
    assert fuzz.run_case(case, torch) == "ok"
    real_neg = torch.neg
    monkeypatch.setattr(torch, "neg", lambda a: real_neg(a) + (a.device.type == "tpu"))
    assert fuzz.run_case(case, torch) == "values differ"

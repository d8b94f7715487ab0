"""The CI slice of the OpInfo sweep: one sample per op, float32, forward and backward, over a fixed
list of common ops that pass today. A failure here is a regression (the full sweep is
`python -m tests.opinfo.run --full`, see docs/op_coverage.md)."""
import copy
import json
import os
import subprocess
import sys

import pytest
import torch

from . import harness

SLICE = [
    # elementwise
    "abs", "neg", "exp", "log", "sin", "tanh", "sigmoid", "sqrt", "pow", "add", "mul", "div.no_rounding_mode",
    "maximum", "minimum", "clamp", "where", "lerp", "atan2", "erf", "expm1", "remainder", "fmod", "addcmul",
    "addcdiv",
    # activations
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "nn.functional.softplus",
    "nn.functional.leaky_relu", "nn.functional.elu", "nn.functional.hardtanh", "nn.functional.mish",
    "nn.functional.logsigmoid",
    # reductions and scans
    "sum", "mean", "prod", "amax", "max.reduction_with_dim", "argmax", "var", "std", "logsumexp", "norm",
    "cumsum", "softmax", "log_softmax", "all", "any",
    # matmul
    "matmul", "mm", "bmm", "addmm", "baddbmm", "linalg.vector_norm", "einsum", "outer", "dot",
    "nn.functional.linear",
    # indexing
    "index_select", "gather", "scatter", "scatter_add", "index_add", "index_put", "take_along_dim",
    "masked_fill", "__getitem__", "narrow", "select",
    # shapes
    "repeat", "expand", "cat", "stack", "split", "permute", "reshape", "view", "flatten", "unsqueeze", "flip",
    "roll", "tril", "triu", "diagonal", "tile",
    # nn.functional
    "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.max_pool2d", "nn.functional.avg_pool2d",
    "nn.functional.adaptive_avg_pool2d", "nn.functional.layer_norm", "nn.functional.group_norm",
    "nn.functional.batch_norm", "nn.functional.embedding", "nn.functional.cross_entropy",
    "nn.functional.nll_loss", "nn.functional.mse_loss", "nn.functional.smooth_l1_loss",
    "nn.functional.binary_cross_entropy_with_logits", "nn.functional.normalize",
]

OPS = harness.ops_by_name()
CASES = [(name, variant) for name in SLICE for variant in ("forward", "backward")
         if any(d == torch.float32 and ok for d, ok in harness.variant_dtypes(OPS[name], variant))]


def test_slice_covers_forward_and_backward():
    assert len(SLICE) == len(set(SLICE)) and 60 <= len(SLICE) <= 100
    assert sum(v == "backward" for _, v in CASES) >= 0.8 * len(SLICE)


@pytest.mark.parametrize("name,variant", CASES, ids=[f"{n}-{v}" for n, v in CASES])
def test_opinfo(name, variant):
    res = harness.run_case(OPS[name], variant, torch.float32, max_samples=1, record=False)
    assert res["status"] == "pass", f"{name} {variant}: {res['status']}: {res.get('detail', '')}"
    assert res["samples"] == 1


# The oracle itself: it must be able to fail, and a crash must not lose the sweep.

def test_harness_catches_wrong_values():
    op = copy.copy(OPS["sin"])
    op.op = lambda x, *a, **k: torch.sin(x) + (x.device.type == "tpu")
    res = harness.run_case(op, "forward", torch.float32, max_samples=1, record=False)
    assert res["status"] == "fail" and "values differ" in res["detail"], res


def test_harness_catches_wrong_gradients():
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos() * (2 if x.device.type == "tpu" else 1)
    op = copy.copy(OPS["sin"])
    op.op = lambda x, *a, **k: Bad.apply(x)
    res = harness.run_case(op, "backward", torch.float32, max_samples=1, record=False)
    assert res["status"] == "fail" and "grad 0" in res["detail"], res


def test_sweep_survives_a_crash(tmp_path):
    results = tmp_path / "r.jsonl"
    env = dict(os.environ, OPINFO_SELFTEST_CRASH="neg")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run([sys.executable, "-m", "tests.opinfo.run", "--ops", "neg,abs", "--variants", "forward",
                    "--dtypes", "float32", "--max-samples", "1", "--results", str(results), "--no-report", "--quiet"],
                   cwd=root, env=env, check=True, timeout=300)
    recs = {r["op"]: r for r in map(json.loads, results.read_text().splitlines())}
    assert recs["neg"]["status"] == "crash" and "SIGSEGV" in recs["neg"]["detail"]
    assert recs["abs"]["status"] == "pass"

"""Real training on tpu against CPU from the same initial weights: the tiny Llama with AdamW and a
small CNN with SGD. float32 at highest matmul precision."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import small_cnn  # noqa: E402
import tiny_llama  # noqa: E402


@pytest.fixture(autouse=True)
def highest_precision():
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(old)


def test_tiny_llama_adamw_matches_cpu():
    cpu = tiny_llama.train("cpu", 20, seed=0, batch_size=4)
    tpu = tiny_llama.train("tpu", 20, seed=0, batch_size=4)
    assert tpu[-1] < tpu[0] * 0.8, "loss did not fall"
    torch.testing.assert_close(torch.tensor(tpu), torch.tensor(cpu), rtol=1e-4, atol=0)


def test_small_cnn_sgd_matches_cpu():
    # lr 0.01: at 0.05 the net is chaotic enough to amplify float rounding (exact for 4 steps) past 1e-4
    cpu = small_cnn.train("cpu", 20, seed=0, batch_size=16, lr=0.01)
    tpu = small_cnn.train("tpu", 20, seed=0, batch_size=16, lr=0.01)
    assert tpu[-1] < tpu[0]
    torch.testing.assert_close(torch.tensor(tpu), torch.tensor(cpu), rtol=1e-4, atol=1e-5)

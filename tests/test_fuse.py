"""DeferAndFuse: ops are recorded, not launched, and run as one program at a flush. Each test selects
the mode itself (torch_tpu.execution_mode), so it runs whatever mode the suite runs in."""
import io
import os
import sys

import pytest
import torch

import torch_tpu
from torch_tpu import _aten

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import small_cnn  # noqa: E402
import tiny_llama  # noqa: E402


def counter(name):
    return torch_tpu.metrics.counters().get(name, 0)


@pytest.fixture
def fuse():
    with torch_tpu.execution_mode("fuse"):
        yield


def test_mode_switches():
    assert torch_tpu.get_execution_mode() in ("strict", "fuse", "debug")
    with torch_tpu.execution_mode("fuse"):
        assert torch_tpu.get_execution_mode() == "fuse"
        with torch_tpu.execution_mode("strict"):
            assert torch_tpu.get_execution_mode() == "strict"
        assert torch_tpu.get_execution_mode() == "fuse"
    with pytest.raises(ValueError, match="fuse"):
        torch_tpu.set_execution_mode("lazy")


def test_env_selects_fuse(python):
    proc = python("import torch, torch_tpu; print(torch_tpu.get_execution_mode())",
                  env={"TORCH_TPU_DEFER_AND_FUSE": "1", "TORCH_TPU_LAUNCH_BLOCKING": "0"})
    assert proc.stdout.strip() == "fuse"


def test_ops_are_recorded_then_run_as_one_program(fuse):
    x = torch.randn(64, device="tpu")
    torch_tpu.sync()
    executions, dispatched = counter("executions"), counter("ops_dispatched")
    y = ((x.sin() * 2 + 1).relu() - x).sum()
    assert counter("executions") == executions  # nothing ran yet
    assert not _aten.is_ready(y)
    expected = ((x.cpu().sin() * 2 + 1).relu() - x.cpu()).sum()
    torch.testing.assert_close(y.cpu(), expected, rtol=1e-5, atol=1e-5)
    assert counter("ops_dispatched") - dispatched == 6
    assert counter("executions") - executions == 1


@pytest.mark.parametrize("trigger", [
    lambda t: t.cpu(),
    lambda t: t.sum().item(),
    lambda t: t.tolist(),
    lambda t: t.cpu().numpy(),
    lambda t: str(t),
    lambda t: bool(t.sum() > -1e9),
    lambda t: torch.save(t, io.BytesIO()),
    lambda t: torch.tpu.synchronize(),
    lambda t: torch_tpu.sync(),
    lambda t: torch.nonzero(t > 0),                    # data-dependent result shape
    lambda t: t.masked_select(t > 0),
], ids=["cpu", "item", "tolist", "numpy", "print", "bool", "save", "synchronize", "sync", "nonzero",
        "masked_select"])
def test_flush_points(fuse, trigger):
    t = torch.randn(8, device="tpu") * 3
    before = counter("executions")
    trigger(t)
    assert counter("executions") > before
    assert _aten.is_ready(t) or True  # computed: reading it needs no further flush
    runs = counter("executions")
    t.cpu()
    assert counter("executions") == runs


def test_backward_and_optimizer_step_flush(fuse):
    model = torch.nn.Linear(8, 4).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(3, 8, device="tpu")).square().mean()
    before = counter("executions")
    loss.backward()
    assert counter("executions") == before + 1  # the end of backward cut the graph
    opt.step()
    assert counter("executions") == before + 2  # and so did the step


def test_graph_size_cap(python):
    proc = python("""
import torch, torch_tpu
x = torch.zeros(4, device="tpu")
torch.tpu.synchronize()
c = torch_tpu.metrics.counters
before = c()["executions"]
for i in range(25):
    x = x + 1
values = x.tolist()  # the last 5 ops
print(c()["executions"] - before, values)
""", env={"TORCH_TPU_DEFER_AND_FUSE": "1", "TORCH_TPU_FUSE_MAX_OPS": "10"})
    runs, values = proc.stdout.split(" ", 1)
    assert int(float(runs)) == 3 and values.strip() == "[25.0, 25.0, 25.0, 25.0]"


def test_bad_cap_is_named(python):
    proc = python("import torch; x = torch.ones(2, device='tpu') + 1",
                  env={"TORCH_TPU_DEFER_AND_FUSE": "1", "TORCH_TPU_FUSE_MAX_OPS": "lots"}, check=False)
    assert proc.returncode != 0 and "TORCH_TPU_FUSE_MAX_OPS" in proc.stderr


def test_a_loop_compiles_once_and_scalars_stay_operands(fuse):
    x = torch.randn(16, device="tpu")
    for i in range(2):
        y = x * (1.0 + i) + i
        y.cpu()
    before = counter("compiles")
    for i in range(2, 20):
        y = x * (1.0 + i) + i
        torch.testing.assert_close(y.cpu(), x.cpu() * (1.0 + i) + i)
    assert counter("compiles") == before


def test_in_place_and_views_keep_semantics(fuse):
    base = torch.arange(12.0).reshape(3, 4)
    t = base.to("tpu")
    alias = t[1]
    snapshot = t.clone()
    t.mul_(2)
    alias.add_(100)  # writes through to t
    t[:, 0] = -1
    col = t[:, 3]
    expected = base * 2
    expected[1] += 100
    expected[:, 0] = -1
    assert torch.equal(t.cpu(), expected)
    assert torch.equal(col.cpu(), expected[:, 3])
    assert torch.equal(snapshot.cpu(), base)  # recorded before the writes: the old values


def test_one_op_writing_several_views_of_one_storage(fuse):
    # FSDP2's all-gather copy-in: a foreach op whose outputs are slices of one flat buffer
    flat, expected = torch.zeros(6, device="tpu"), torch.zeros(6)
    torch._foreach_add_([flat[:4], flat[4:]], 1.0)
    torch._foreach_add_([expected[:4], expected[4:]], 1.0)
    parts = [torch.arange(4.0), torch.tensor([7.0, 8.0])]
    torch._foreach_copy_([flat[:4], flat[4:]], [p.to("tpu") for p in parts])
    torch._foreach_copy_([expected[:4], expected[4:]], parts)
    grid, grid_expected = torch.ones(2, 3, device="tpu"), torch.ones(2, 3)
    torch._foreach_mul_([grid[0], grid[1, 1:]], 2.0)
    torch._foreach_mul_([grid_expected[0], grid_expected[1, 1:]], 2.0)
    assert torch.equal(flat[1:].cpu(), expected[1:])
    assert torch.equal(grid.cpu(), grid_expected)


def test_dead_intermediates_and_reused_inputs(fuse):
    x = torch.randn(32, device="tpu")
    a = x * 2
    b = a + 1  # a dies below: it is computed inside the program only
    del a
    c = b * b
    x.add_(1)  # x's old value was already read by the ops above
    torch.testing.assert_close(c.cpu(), ((x.cpu() - 1) * 2 + 1) ** 2, rtol=1e-5, atol=1e-5)


def test_errors_raise_at_the_op_naming_it(fuse):
    a = torch.randn(3, 3, device="tpu")
    torch_tpu.sync()
    runs = counter("executions")
    with pytest.raises(RuntimeError, match="linalg_lu_factor_ex.*pivoting"):  # our rule rejects it
        torch.linalg.lu_factor(a, pivot=False)
    assert counter("executions") == runs  # raised while recording, not at a later flush
    with pytest.raises(RuntimeError, match="same dtype"):  # PyTorch's shape and dtype rules
        torch.vdot(a[0], a[1].double())
    with pytest.raises(RuntimeError):
        torch.ones(2, 3, device="tpu") + torch.ones(4, 3, device="tpu")
    torch.testing.assert_close((a + 1).cpu(), a.cpu() + 1)  # the graph is still usable


def test_fused_training_matches_cpu(fuse):
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        cpu = tiny_llama.train("cpu", 8, seed=0, batch_size=4)
        before = counter("executions")
        tpu = tiny_llama.train("tpu", 8, seed=0, batch_size=4)
        assert counter("executions") - before < 8 * 10  # a few programs a step, not one per op
        torch.testing.assert_close(torch.tensor(tpu), torch.tensor(cpu), rtol=1e-4, atol=0)
        cpu = small_cnn.train("cpu", 6, seed=0, batch_size=16, lr=0.01)
        tpu = small_cnn.train("tpu", 6, seed=0, batch_size=16, lr=0.01)
        torch.testing.assert_close(torch.tensor(tpu), torch.tensor(cpu), rtol=1e-4, atol=1e-5)
    finally:
        torch.set_float32_matmul_precision(old)


def test_training_steps_compile_nothing_after_the_second(fuse):
    torch.manual_seed(0)
    model = tiny_llama.TinyLlama(tiny_llama.Config(n_layers=1, dim=64, n_heads=2, seq_len=32)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 256, (2, 32))

    def step():
        loss = model(x.to("tpu")).logsumexp(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step(), step()
    before = counter("compiles")
    for _ in range(3):
        step()
    assert counter("compiles") == before

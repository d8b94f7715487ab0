"""torch.compile(backend="tpu"): compiled vs eager vs CPU, in Strict and Fuse mode (the mode of the
eager parts around the compiled graphs). Each FX graph is captured once and replayed afterwards."""
import copy
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from torch_tpu import compiler

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import tiny_llama  # noqa: E402


@pytest.fixture(params=["strict", "fuse"], autouse=True)
def mode(request):
    torch._dynamo.reset()
    with torch_tpu.execution_mode(request.param):
        yield request.param
    torch._dynamo.reset()


@pytest.fixture
def highest_precision():
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(old)


def counter(name):
    return torch_tpu.metrics.counters().get(name, 0)


def tpu(x):
    return x.to("tpu")


def test_backend_is_registered():
    assert "tpu" in torch._dynamo.list_backends()
    from torch._dynamo.device_interface import get_interface_for_device
    f = torch.compile(lambda x: x * 2, backend="tpu")
    f(torch.ones(2, device="tpu"))
    assert get_interface_for_device("tpu").device_count() == torch.tpu.device_count()


def test_replay_is_one_program_without_dispatch():
    f = torch.compile(lambda a, b: ((a @ b).relu() * 3).sum(dim=0), backend="tpu")
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    f(tpu(a), tpu(b))  # capture
    ta, tb = tpu(a), tpu(b)
    ops, runs = counter("ops_dispatched"), counter("executions")
    out = f(ta, tb)
    assert counter("ops_dispatched") == ops, "a replay dispatches no op"
    assert counter("executions") == runs + 1, "a replay runs one program"
    torch.testing.assert_close(out.cpu(), ((a @ b).relu() * 3).sum(dim=0))


def test_tiny_llama_train_matches_cpu(highest_precision):
    cfg = tiny_llama.Config(dim=64, n_layers=2, n_heads=4, hidden_dim=160, seq_len=32)
    cpu = tiny_llama.train("cpu", 20, seed=0, batch_size=4, config=cfg)
    tpu_losses = tiny_llama.train("tpu", 20, seed=0, batch_size=4, config=cfg, compile="tpu")
    assert tpu_losses[-1] < tpu_losses[0] * 0.8
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu), rtol=1e-4, atol=0)
    graphs = [e for e in compiler.compile_events() if e["reason"] == "new graph"]
    assert graphs, "the model ran through captured graphs"
    assert all("runs recorded" not in e["reason"] for e in compiler.compile_events())


class CNN(nn.Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(p)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(self.drop(F.relu(self.bn(self.conv(x)))).flatten(1))


def test_cnn_batchnorm_training_matches_cpu(highest_precision):
    torch.manual_seed(0)
    cpu = CNN(p=0.0)
    dev = copy.deepcopy(cpu).to("tpu")
    step = torch.compile(dev, backend="tpu")
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.1, momentum=0.9)
    opt_t = torch.optim.SGD(dev.parameters(), lr=0.1, momentum=0.9)
    for i in range(4):
        x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
        loss_c = F.cross_entropy(cpu(x), y)
        loss_t = F.cross_entropy(step(tpu(x)), tpu(y))
        for opt, loss in ((opt_c, loss_c), (opt_t, loss_t)):
            opt.zero_grad()
            loss.backward()
            opt.step()
        torch.testing.assert_close(loss_t.cpu(), loss_c, rtol=1e-5, atol=1e-6)
    # running statistics are inputs mutated by the graph: written back on every replay
    torch.testing.assert_close(dev.bn.running_mean.cpu(), cpu.bn.running_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(dev.bn.running_var.cpu(), cpu.bn.running_var, rtol=1e-5, atol=1e-6)
    assert dev.bn.num_batches_tracked.item() == cpu.bn.num_batches_tracked.item() == 4
    # eval mode switches the compiled model to running statistics
    cpu.eval(), dev.eval()
    x = torch.randn(4, 3, 8, 8)
    with torch.no_grad():
        out = step(tpu(x))
    assert not out.requires_grad
    torch.testing.assert_close(out.cpu(), cpu(x), rtol=1e-5, atol=1e-5)


def test_dropout_draws_fresh_randomness_every_call():
    torch.manual_seed(0)
    m = CNN(p=0.5).to("tpu").train()
    f = torch.compile(lambda x: m.drop(x), backend="tpu")
    x = torch.ones(64, 64, device="tpu")
    masks = [f(x).cpu() for _ in range(4)]
    for mk in masks:
        assert set(mk.unique().tolist()) <= {0.0, 2.0}
        assert 0.35 < (mk == 0).float().mean().item() < 0.65
    assert all(not torch.equal(masks[i], masks[j]) for i in range(4) for j in range(i))
    torch.tpu.manual_seed(7)
    a = f(x).cpu()
    torch.tpu.manual_seed(7)
    assert torch.equal(f(x).cpu(), a), "the tpu generator's seed decides a replay's randomness"


def test_compiled_adamw_step_matches_cpu(highest_precision):
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    dev = copy.deepcopy(cpu).to("tpu")
    opt_c = torch.optim.AdamW(cpu.parameters(), lr=0.05)
    opt_t = torch.optim.AdamW(dev.parameters(), lr=0.05)
    step = torch.compile(opt_t.step, backend="tpu")
    for i in range(4):
        x = torch.randn(5, 8)
        cpu(x).square().mean().backward()
        dev(tpu(x)).square().mean().backward()
        opt_c.step()
        step()
        opt_c.zero_grad(), opt_t.zero_grad()
    for pc, pt in zip(cpu.parameters(), dev.parameters()):  # Adam's sqrt and division round differently
        torch.testing.assert_close(pt.cpu(), pc, rtol=1e-4, atol=2e-5)


def test_graph_break_mixes_compiled_and_eager():
    def f(x):
        y = x.sin() * 2
        torch._dynamo.graph_break()
        return y.cos() + x

    g = torch.compile(f, backend="tpu")
    x = torch.randn(5, 3)
    for _ in range(2):
        torch.testing.assert_close(g(tpu(x)).cpu(), f(x))


def test_input_mutation_is_written_back():
    def f(a, b):
        a.add_(b)
        b.mul_(2)
        return a * 2

    g = torch.compile(f, backend="tpu")
    a, b = torch.zeros(3, device="tpu"), torch.arange(3.0, device="tpu")
    results = [g(a, b).cpu() for _ in range(3)]  # capture, then two replays
    assert a.cpu().tolist() == [0.0, 7.0, 14.0]  # b, 2b, 4b added
    assert b.cpu().tolist() == [0.0, 8.0, 16.0]
    assert results[-1].tolist() == [0.0, 14.0, 28.0]


def test_outputs_alias_inputs():
    g = torch.compile(lambda x: (x.view(2, 3), x[1:], x * 1), backend="tpu")
    x = torch.arange(6.0, device="tpu")
    for _ in range(2):
        v, tail, copy_ = g(x)
        assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        assert tail.storage_offset() == 1
        assert copy_.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    v.add_(10)  # a write through the aliasing output reaches the input
    assert x.cpu().tolist() == [10.0, 11.0, 12.0, 13.0, 14.0, 15.0]
    assert copy_.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_results_keep_channels_last_and_transposed_layouts():
    def fn(x, w):
        y = F.conv2d(x, w, padding=1).relu() * 2
        return y, y.sum(1), x.permute(0, 2, 3, 1).sin()
    x = torch.randn(2, 3, 6, 5).contiguous(memory_format=torch.channels_last)
    w = torch.randn(4, 3, 3, 3).contiguous(memory_format=torch.channels_last)
    expected = fn(x, w)
    compiled = torch.compile(fn, backend="tpu")
    for _ in range(2):  # the capture, then a replay
        got = compiled(x.to("tpu"), w.to("tpu"))
        for g, e in zip(got, expected):
            assert g.stride() == e.stride()
            torch.testing.assert_close(g.cpu(), e, rtol=1e-4, atol=1e-4)


def test_inference_under_no_grad_and_autocast():
    torch.manual_seed(0)
    lin = nn.Linear(16, 8)
    dev = copy.deepcopy(lin).to("tpu")

    def f(m, x):
        with torch.autocast("tpu" if x.device.type == "tpu" else "cpu", dtype=torch.bfloat16):
            return m(x).float().softmax(-1)

    g = torch.compile(f, backend="tpu")
    x = torch.randn(4, 16)
    with torch.no_grad():
        for _ in range(2):
            out = g(dev, tpu(x))
    assert not out.requires_grad and out.dtype == torch.float32
    with torch.no_grad():
        eager = f(dev, tpu(x))
    torch.testing.assert_close(out.cpu(), eager.cpu())
    torch.testing.assert_close(out.cpu(), f(lin, x), rtol=2e-2, atol=2e-2)  # bf16 matmul vs CPU's bf16


def test_edge_value_lowerings_match_cpu():
    # compiled graphs reuse each op's lowering: ldexp's exact scaling, complex nan_to_num, pow's shortcuts
    def f(m, e, z):
        return torch.ldexp(m, e), torch.nan_to_num(z), z ** 2, F.pad(m.float().view(1, 2, 4), (2, 2), mode="reflect")

    inf, nan = float("inf"), float("nan")
    m = torch.tensor([2.0 ** -10, -2.0, 1.5, inf, 3.0, 0.5, -0.0, 1.0], dtype=torch.half)
    e = torch.tensor([20, -25, 3, -160, 1, 2, 3, 4])
    z = torch.tensor([complex(-1, inf), complex(nan, 2), complex(inf, -inf), 1 + 2j], dtype=torch.complex128)
    g = torch.compile(f, backend="tpu")
    for _ in range(2):
        out = g(tpu(m), tpu(e), tpu(z))
    for a, b in zip(out, f(m, e, z)):
        a, b = a.cpu(), b
        if a.is_complex():
            a, b = torch.view_as_real(a), torch.view_as_real(b)
        torch.testing.assert_close(a, b, equal_nan=True, rtol=0, atol=0)


def test_dynamic_true_is_refused():
    with pytest.raises(Exception, match=r"dynamic=True.*use dynamic=None"):
        torch.compile(lambda x: x + 1, backend="tpu", dynamic=True)(torch.ones(3, device="tpu"))


def test_shape_change_recompiles_with_reason():
    g = torch.compile(lambda x: x.exp() - 1, backend="tpu")
    start = len(compiler.compile_events())
    for n in (4, 4, 6, 6, 9):
        x = torch.randn(n)
        torch.testing.assert_close(g(tpu(x)).cpu(), x.exp() - 1)
    events = compiler.compile_events()[start:]
    assert [e["reason"] for e in events][0] == "new graph"
    assert len(events) == 3, events  # one capture per shape
    assert "changed from float32[4] to float32[6]" in events[1]["reason"]
    assert "changed from float32[6] to float32[9]" in events[2]["reason"]
    assert all(e["where"].endswith("test_compile.py:" + e["where"].rsplit(":", 1)[1]) for e in events)
    assert "changed from float32[4] to float32[6]" in torch_tpu.metrics.report(file=open(os.devnull, "w"))


def test_view_geometry_change_captures_again():
    g = torch.compile(lambda x: x * 2, backend="tpu")
    base = torch.arange(12.0, device="tpu")
    assert g(base[:4]).cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
    assert g(base[4:8]).cpu().tolist() == [8.0, 10.0, 12.0, 14.0]  # same shape, another offset


def test_no_recompile_raises_on_any_compile():
    g = torch.compile(lambda x: x.cos() * 3 + 1.25, backend="tpu")
    warm = torch.randn(5, device="tpu")
    g(warm)
    with compiler.no_recompile():
        g(warm)  # warmed up: replays
        with pytest.raises(RuntimeError, match="no_recompile"):
            g(torch.zeros(7, 11, device="tpu") + 1)
    g(torch.zeros(7, 11, device="tpu") + 1)  # allowed again


def test_compile_options_pass_through_to_xla():
    f = lambda a, b: (a @ b).tanh()  # noqa: E731
    a, b = torch.randn(32, 16), torch.randn(16, 8)
    g = torch.compile(f, backend="tpu", options={"xla_cpu_enable_fast_math": False, "xla_cpu_use_xnnpack": False})
    torch.testing.assert_close(g(tpu(a), tpu(b)).cpu(), f(a, b), rtol=1e-4, atol=1e-5)
    bad = torch.compile(f, backend="tpu", options={"no_such_xla_option": 1})
    with pytest.raises(RuntimeError, match="no_such_xla_option"):
        bad(tpu(a), tpu(b))


def run_script(code, env):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, **env), timeout=300)
    return proc


MODEL = """
import sys, torch, torch_tpu
sys.path.insert(0, "examples")
import tiny_llama
cfg = tiny_llama.Config(dim=32, n_layers=1, n_heads=2, hidden_dim=64, seq_len=16)
losses = tiny_llama.train("tpu", 2, seed=0, batch_size=2, config=cfg, compile="tpu")
c = torch_tpu.metrics.counters()
print("RESULT", c.get("compiles", 0), c.get("cache.disk_hits", 0), losses[-1])
"""


def test_second_process_compiles_nothing(tmp_path, mode):
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path / "cache"), "TORCH_TPU_DEFER_AND_FUSE": "1" if mode == "fuse" else "0"}
    first, second = (run_script(MODEL, env) for _ in range(2))
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    c1, h1, loss1 = first.stdout.split("RESULT")[1].split()
    c2, h2, loss2 = second.stdout.split("RESULT")[1].split()
    assert float(c1) > 0 and float(c2) == 0, (c1, c2)
    assert float(h2) >= float(c1)
    assert loss1 == loss2


def test_fail_on_recompile_and_dump_dir(tmp_path, mode):
    code = """
    import torch, torch_tpu
    g = torch.compile(lambda x: x.sin() + 2, backend="tpu")
    g(torch.ones(3, device="tpu"))
    g(torch.ones(3, device="tpu"))
    try:
        g(torch.ones(4, device="tpu"))
    except Exception as e:
        print("RAISED", type(e).__name__, e)
    """
    dump = tmp_path / "dump"
    proc = run_script(code, {"TORCH_TPU_FAIL_ON_RECOMPILE": "1", "TORCH_TPU_DUMP_DIR": str(dump),
                             "TORCH_TPU_CACHE_DIR": str(tmp_path / "cache"),
                             "TORCH_TPU_DEFER_AND_FUSE": "1" if mode == "fuse" else "0"})
    assert proc.returncode == 0, proc.stderr
    assert "RAISED" in proc.stdout and "TORCH_TPU_FAIL_ON_RECOMPILE" in proc.stdout
    assert "changed from float32[3] to float32[4]" in proc.stdout
    texts = [p.read_text() for p in dump.glob("*.mlir")]
    assert any("compiled for: graph of 2 ops ending with add" in t and "stablehlo.sine" in t for t in texts), texts


def test_replay_donates_inputs_updated_in_place():
    def update(p, g):
        p.mul_(0.5).add_(g)

    step = torch.compile(update, backend="tpu")
    n = 1 << 20  # 4 MiB of float32 each
    p, g = torch.ones(n, device="tpu"), torch.ones(n, device="tpu")
    step(p, g)  # capture (donates nothing: the caller's buffers)
    torch.tpu.synchronize()
    base = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    for _ in range(3):
        step(p, g)
    torch.tpu.synchronize()
    assert torch.tpu.max_memory_allocated() - base < n * 4 // 2, "the update reused the parameter's buffer"
    torch.testing.assert_close(p[:4].cpu(), torch.full((4,), 1.9375))  # 1 -> 1.5 -> 1.75 -> 1.875 -> 1.9375
    view = p[:8]  # another tensor on the storage: the buffer is still the storage's alone
    step(p, g)
    torch.testing.assert_close(view.cpu(), torch.full((8,), 1.96875))

"""The tpu device as users meet it: registration, torch.tpu, execution modes, errors, metrics,
save/load, autocast. Values are checked against CPU PyTorch."""
import io
import textwrap

import pytest
import torch

import torch_tpu
from torch_tpu import _aten


def test_registration_and_device_module():
    assert torch.tpu.is_available() and torch.tpu.device_count() >= 1
    t = torch.ones(2, device="tpu")
    assert t.device == torch.device("tpu:0") and t.is_tpu and not torch.ones(1).is_tpu
    assert torch.tpu.current_device() == 0
    with torch.tpu.device(0):
        assert torch.tpu.current_device() == 0
    assert torch.tpu.get_device_name().startswith("cpu")
    assert torch.tpu.is_bf16_supported()
    assert torch.bfloat16 in torch.tpu.get_amp_supported_dtype()
    free, total = torch.tpu.mem_get_info()
    assert free >= 0 and total >= 0 and torch.tpu.memory_allocated() >= 0
    torch.tpu.synchronize()
    s = torch.tpu.current_stream()
    e = s.record_event()
    e.synchronize()
    assert torch.accelerator.current_accelerator() == torch.device("tpu")
    m = torch.nn.Linear(2, 2).tpu()
    assert m.weight.device.type == "tpu"
    g = torch.Generator(device="tpu")
    g.manual_seed(3)
    assert g.initial_seed() == 3 and g.device.type == "tpu"


def test_autoload_can_be_turned_off(python):
    proc = python(textwrap.dedent("""
        import torch
        try:
            torch.ones(1, device="tpu")
            print("loaded")
        except RuntimeError:
            print("not loaded")
    """), env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert proc.stdout.strip() == "not loaded"
    proc = python("import torch; print(torch.ones(1, device='tpu').device)")
    assert proc.stdout.strip() == "tpu:0"


def test_import_torch_survives_a_missing_plugin(python):
    proc = python(textwrap.dedent("""
        import torch
        print(torch.tpu.is_available())
        try:
            torch.ones(1, device="tpu")
        except Exception as e:
            print(type(e).__name__, e)
    """), env={"TORCH_TPU_PJRT_PLUGIN": "/nonexistent/plugin.so"})
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "False"
    assert "RuntimeError" in lines[1] and "/nonexistent/plugin.so" in lines[1]


def test_strict_dispatch_is_asynchronous():
    x = torch.ones(4_000_000, device="tpu")
    for _ in range(40):
        x = torch.sin(x) * 1.0001 + 0.5
    assert not _aten.is_ready(x), "the chain finished before Python got control back"
    expected = torch.ones(4_000_000)
    for _ in range(40):
        expected = torch.sin(expected) * 1.0001 + 0.5
    torch.testing.assert_close(x.cpu(), expected)


def test_scalars_are_runtime_operands_not_recompiles():
    x = torch.randn(16, device="tpu")
    (x * 0.5 + 1).cpu()
    before = torch_tpu.metrics.counters().get("compiles", 0)
    for i in range(100):
        y = x * (1.0 + i / 100) + i
    y.cpu()
    assert torch_tpu.metrics.counters().get("compiles", 0) == before
    torch.testing.assert_close(y.cpu(), x.cpu() * 1.99 + 99)


def test_one_compile_per_shape():
    before = torch_tpu.metrics.counters().get("compiles", 0)
    for n in (3, 5, 3, 5, 3):
        (torch.ones(n, 7, device="tpu") - 2.0).cpu()
    new = torch_tpu.metrics.counters().get("compiles", 0) - before
    assert new <= 4  # (fill + sub) x two shapes, whatever the call count


def test_matmul_precision_is_part_of_the_key():
    a = torch.randn(8, 8, device="tpu")
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        (a @ a).cpu()
        before = torch_tpu.metrics.counters()["compiles"]
        torch.set_float32_matmul_precision("medium")
        (a @ a).cpu()
        assert torch_tpu.metrics.counters()["compiles"] == before + 1
    finally:
        torch.set_float32_matmul_precision(old)


@pytest.mark.parametrize("fn", [
    lambda d: torch.tensor([1, 2, 3], device=d) / 2,                      # integer true_divide
    lambda d: torch.tensor([1, 2], dtype=torch.uint8, device=d) + 5.5,     # int tensor + Python float
    lambda d: torch.arange(0.0, 3.0, device=d),                            # factories without dtype=
    lambda d: torch.full((2,), 1.5, device=d),
    lambda d: torch.tensor([3], device=d).true_divide(torch.tensor(2, device=d)),
])
@pytest.mark.parametrize("mode", ["strict", "fuse"])  # Fuse caches launch plans by the same key
def test_default_dtype_decides_result_types_of_cached_ops(fn, mode):
    old = torch.get_default_dtype()
    try:
        with torch_tpu.execution_mode(mode):
            for dtype in (torch.float32, torch.float64, torch.float32):  # the op is cached after the first call
                torch.set_default_dtype(dtype)
                got, want = fn("tpu"), fn("cpu")
                assert got.dtype == want.dtype == dtype
                torch.testing.assert_close(got.cpu(), want)
    finally:
        torch.set_default_dtype(old)


@pytest.mark.parametrize("mode", ["strict", "fuse"])
def test_autocast_between_calls_of_a_cached_op(mode):
    with torch_tpu.execution_mode(mode):
        autocast_between_calls()


def autocast_between_calls():
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    ta, tb = a.to("tpu"), b.to("tpu")
    assert (ta @ tb).dtype == torch.float32
    with torch.autocast("tpu", dtype=torch.bfloat16):
        inside = ta @ tb
    after = ta @ tb
    assert inside.dtype == torch.bfloat16 and after.dtype == torch.float32
    torch.testing.assert_close(after.cpu(), a @ b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(inside.cpu().float(), a @ b, rtol=2e-2, atol=5e-2)


def test_deterministic_mode_between_calls():
    x = torch.zeros(6, device="tpu")
    idx = torch.tensor([0, 2, 2, 5], device="tpu")
    src = torch.ones(4, device="tpu")
    first = x.index_add(0, idx, src).cpu()
    try:
        torch.use_deterministic_algorithms(True)
        # uninitialized memory reads as NaN (integers: their maximum), as on CPU and CUDA
        assert torch.empty(3, device="tpu").cpu().isnan().all()
        assert (torch.empty(2, dtype=torch.int32, device="tpu").cpu() == torch.iinfo(torch.int32).max).all()
        assert torch.equal(x.index_add(0, idx, src).cpu(), first)
    finally:
        torch.use_deterministic_algorithms(False)
    assert torch.equal(x.index_add(0, idx, src).cpu(), torch.tensor([1.0, 0, 2, 0, 0, 1]))


@pytest.mark.parametrize("fn, exc", [
    (lambda d: torch.ones(2, 3, device=d) + torch.ones(4, 3, device=d), RuntimeError),
    (lambda d: torch.ones(2, 3, device=d) @ torch.ones(2, 3, device=d), RuntimeError),
    (lambda d: torch.ones(2, 3, device=d).view(4), RuntimeError),
    (lambda d: torch.ones(2, 3, device=d).sum(dim=5), IndexError),
    (lambda d: torch.ones(2, 3, device=d).to(torch.int64) @ torch.ones(3, 2, device=d), RuntimeError),
    (lambda d: torch.tensor([1, 2], device=d).softmax(0), NotImplementedError),  # a dtype the op lacks
    (lambda d: torch.tensor([1.0, 2.0], device=d) & torch.tensor([1.0, 2.0], device=d), NotImplementedError),
])
def test_bad_input_raises_like_cpu(fn, exc):
    with pytest.raises(exc):
        fn("cpu")
    with pytest.raises(exc):
        fn("tpu")


def test_median_of_nothing_is_nan():
    for fn in (torch.median, torch.nanmedian):
        assert torch.isnan(fn(torch.empty(0, device="tpu")).cpu()) and torch.isnan(fn(torch.empty(0)))


def test_device_mismatch_raises():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="tpu") + torch.ones(3)
    # 0-dim CPU tensors are scalars, as on CUDA
    torch.testing.assert_close((torch.ones(3, device="tpu") + torch.tensor(2.0)).cpu(), torch.full((3,), 3.0))


def test_debug_mode_bounds_checks(python):
    code = textwrap.dedent("""
        import torch
        x = torch.arange(5.0, device="tpu")
        for name, fn in [("index", lambda: x[torch.tensor([1, 7], device="tpu")]),
                         ("gather", lambda: x.gather(0, torch.tensor([9], device="tpu"))),
                         ("embedding", lambda: torch.nn.functional.embedding(torch.tensor([6], device="tpu"),
                                                                             torch.ones(5, 2, device="tpu")))]:
            try:
                fn().cpu()
                print(name, "no error")
            except Exception as e:
                print(name, type(e).__name__)
    """)
    debug = python(code, env={"TORCH_TPU_LAUNCH_BLOCKING": "1"}).stdout.split("\\n")
    assert "index IndexError" in debug[0] and "gather RuntimeError" in debug[0] and "embedding IndexError" in debug[0]
    strict = python(code).stdout  # device-side checks: raised at the host read (.cpu()), same types
    assert "index IndexError" in strict and "gather RuntimeError" in strict and "embedding IndexError" in strict


def test_unsupported_op_message_and_cpu_fallback():
    # the general (non-symmetric) eigendecomposition has no lowering (see docs/op_coverage.md)
    a = torch.tensor([[2.0, 1.0], [0.5, 3.0]])
    x = a.to("tpu")
    with pytest.raises(NotImplementedError, match=r"aten::_linalg_eigvals.*TORCH_TPU_CPU_FALLBACK=1.*cpu_fallback"):
        torch.linalg.eigvals(x)

    def fallbacks():
        return sum(v for k, v in torch_tpu.metrics.counters().items() if k.startswith("cpu_fallback:_linalg_eigvals"))
    before = fallbacks()
    with torch_tpu.cpu_fallback():
        y = torch.linalg.eigvals(x)
    assert y.device.type == "tpu"
    torch.testing.assert_close(y.cpu(), torch.linalg.eigvals(a))
    assert fallbacks() == before + 1


def test_operators_defined_again_are_named_right():
    # dispatch knows each operator by an entry made at its first call; an operator defined after another
    # was dropped (its memory possibly reused) must not be taken for it
    x = torch.ones(2, device="tpu")
    for k in range(4):
        lib = torch.library.Library(f"tpu_test_ns{k}", "DEF")
        lib.define(f"op{k}(Tensor x) -> Tensor")
        with pytest.raises(NotImplementedError, match=rf"tpu_test_ns{k}::op{k} has no tpu lowering"):
            getattr(getattr(torch.ops, f"tpu_test_ns{k}"), f"op{k}")(x)
        lib._destroy()


def test_metrics_report_names_op_and_line():
    torch_tpu.metrics.reset()
    (torch.ones(3, 11, device="tpu") * 3).cpu()
    text = torch_tpu.metrics.report(file=io.StringIO())
    assert "compiles" in text and "test_device.py:" in text
    c = torch_tpu.metrics.counters()
    assert c["ops_dispatched"] >= 2 and c["host_syncs"] >= 1


def test_save_and_load_round_trip(tmp_path):
    model = torch.nn.Linear(3, 2).tpu()
    t = torch.arange(6.0, device="tpu").reshape(2, 3)
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "t": t, "view": t[:, 1]}, path)
    cpu = torch.load(path, map_location="cpu")
    torch.testing.assert_close(cpu["t"], t.cpu())
    torch.testing.assert_close(cpu["view"], t.cpu()[:, 1])
    back = torch.load(path, map_location="tpu")
    assert back["t"].device.type == "tpu" and back["model"]["weight"].device.type == "tpu"
    torch.testing.assert_close(back["model"]["weight"].cpu(), model.weight.cpu())
    fresh = torch.nn.Linear(3, 2).tpu()
    fresh.load_state_dict(back["model"])
    torch.testing.assert_close(fresh(t).cpu(), model(t).cpu())


def test_autocast_bf16_matmul():
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    with torch.autocast("tpu", dtype=torch.bfloat16):
        out = a.tpu() @ b.tpu()
    assert out.dtype == torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = a @ b
    torch.testing.assert_close(out.cpu(), ref, rtol=2e-2, atol=2e-2)


def test_several_devices_and_cross_device_copies(python):
    proc = python(textwrap.dedent("""
        import torch
        assert torch.tpu.device_count() == 2
        a = torch.arange(6.0).reshape(2, 3).to("tpu:1")
        assert a.device == torch.device("tpu:1")
        b = (a * 2).to("tpu:0")
        c = a.t().to("tpu:0")  # a strided view crosses devices too
        print(b.device, (b + c.t()).cpu().tolist())
        with torch.tpu.device(1):
            assert torch.empty(1, device="tpu").device.index == 1
    """), env={"TORCH_TPU_NUM_DEVICES": "2"})
    assert proc.stdout.strip() == "tpu:0 [[0.0, 3.0, 6.0], [9.0, 12.0, 15.0]]"


def test_pinned_host_memory():
    # pin_memory=True and Tensor.pin_memory() (DDP stages its bookkeeping through pinned buffers)
    pinned = torch.empty(5, pin_memory=True)
    assert pinned.is_pinned() and pinned[2:].is_pinned()
    assert not torch.empty(5).is_pinned()
    host = torch.arange(5.0).pin_memory()
    assert host.is_pinned() and torch.equal(host, torch.arange(5.0))
    pinned.copy_(host.to("tpu"), non_blocking=True)
    torch.tpu.synchronize()
    assert torch.equal(pinned, torch.arange(5.0))
    assert torch.equal(pinned.to("tpu", non_blocking=True).cpu(), torch.arange(5.0))

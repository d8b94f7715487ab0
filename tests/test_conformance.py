"""Conformance beyond OpInfo: tpu tensors behave like CPU PyTorch where the op sweep does not look —
out= dtype rules, alpha and fill-value checks, CPU's warnings, writes through conj / neg views, and
clear NotImplementedErrors for quantized and sparse tensors. CPU PyTorch is the oracle."""
import re
import warnings

import pytest
import torch

import torch_tpu
from tpu_check import assert_close, flat


def outcome(fn, device):
    """fn(device): (result or exception, [(category, message)] of the warnings it gave)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn(device)
        except Exception as e:  # noqa: BLE001 - the exception is what is compared
            result = e
    return result, [(w.category, str(w.message)) for w in caught]


def first_line(e):
    return str(e).split("\n")[0]


def same(fn, match=None):
    """fn raises on tpu what it raises on CPU (type and message), or returns the same values."""
    cpu, _ = outcome(fn, "cpu")
    tpu, _ = outcome(fn, "tpu")
    if isinstance(cpu, Exception):
        assert type(tpu) is type(cpu), f"CPU raised {type(cpu).__name__}: {cpu}; tpu gave {tpu!r}"
        assert first_line(cpu) in str(tpu), f"CPU: {first_line(cpu)!r}\ntpu: {first_line(tpu)!r}"
        if match:
            assert re.search(match, str(tpu))
        return
    assert not isinstance(tpu, Exception), f"CPU accepts; tpu raised {type(tpu).__name__}: {tpu}"
    if isinstance(cpu, (torch.Tensor, list, tuple)):
        assert_close([x.to("tpu") for x in flat(tpu)], cpu)  # also checks the dtypes
    else:
        assert tpu == cpu


def t(device, dtype=torch.float32, values=(1., 0., 2.)):
    return torch.tensor(values, device=device).to(dtype)


def empty(device, dtype, n=3):
    return torch.empty(n, dtype=dtype, device=device)


# ------------------------------------------------------------- out= dtypes
def test_nonzero_out_dtype():
    same(lambda d: torch.nonzero(t(d), out=empty(d, torch.int32, 0)), match="nonzero")
    same(lambda d: torch.nonzero(t(d), out=empty(d, torch.int64, 0)))


@pytest.mark.parametrize("op", ["all", "any"])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.int64, torch.bool])
def test_all_any_out_dtype(op, out_dtype):
    same(lambda d: getattr(torch, op)(t(d), out=empty(d, out_dtype, 0)))
    same(lambda d: getattr(torch, op)(t(d).reshape(3, 1), 1, out=empty(d, out_dtype, 0)))


UNARY = ["neg", "abs", "bitwise_not", "sign", "floor", "trunc", "sqrt", "exp", "logical_not", "isnan", "sgn",
         "reciprocal", "sigmoid", "signbit"]
CASTS = [(torch.int32, torch.int64), (torch.float32, torch.float64), (torch.float32, torch.int32),
         (torch.float32, torch.bool), (torch.int64, torch.float32)]


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtypes", CASTS, ids=lambda p: f"{p[0]}-{p[1]}".replace("torch.", ""))
def test_unary_out_dtype(op, dtypes):
    """Ops that allow no cast into out= raise CPU's "Found dtype"; the others cast (or refuse unsafe casts)."""
    src, dst = dtypes
    same(lambda d: getattr(torch, op)(t(d, src), out=empty(d, dst)))


@pytest.mark.parametrize("call", [
    lambda d, o: torch.argmax(t(d), out=o),
    lambda d, o: torch.sum(t(d), out=o),
    lambda d, o: torch.mean(t(d), out=o),
    lambda d, o: torch.amax(t(d), 0, out=o),
    lambda d, o: torch.count_nonzero(t(d), out=o),
    lambda d, o: torch.eq(t(d), 1, out=o),
    lambda d, o: torch.clamp(t(d), 0, 1, out=o),
    lambda d, o: torch.add(t(d, torch.int32), 1, out=o),
    lambda d, o: torch.mul(t(d), t(d), out=o),
    lambda d, o: torch.where(t(d) > 0, t(d), t(d), out=o),
], ids=["argmax", "sum", "mean", "amax", "count_nonzero", "eq", "clamp", "add", "mul", "where"])
@pytest.mark.parametrize("out_dtype", [torch.int32, torch.float64, torch.bool, torch.int64])
def test_out_dtype(call, out_dtype):
    same(lambda d: call(d, empty(d, out_dtype, 0)))


def test_out_dtype_cast_values():
    """Ops that cast into out= still compute the right values on tpu."""
    same(lambda d: torch.add(t(d, torch.int32), t(d, torch.int32), out=empty(d, torch.float32)))
    same(lambda d: torch.mm(torch.ones(2, 2, device=d), torch.ones(2, 2, device=d),
                            out=torch.empty(2, 2, dtype=torch.float64, device=d)))


def test_max_dim_out_dtypes():
    same(lambda d: torch.max(t(d), 0, out=(empty(d, torch.float32, 0), empty(d, torch.int32, 0))))
    same(lambda d: torch.max(t(d), 0, out=(empty(d, torch.float64, 0), empty(d, torch.int64, 0))))


# ------------------------------------------------------------- alpha, fill values
@pytest.mark.parametrize("call", [
    lambda d: torch.add(t(d, torch.bool), t(d, torch.bool), alpha=1.5),
    lambda d: torch.add(t(d, torch.int32), t(d, torch.int32), alpha=1.5),
    lambda d: torch.add(t(d, torch.int64), 2, alpha=0.5),
    lambda d: torch.sub(t(d, torch.int32), t(d, torch.int32), alpha=1.5),
    lambda d: torch.rsub(t(d, torch.int32), t(d, torch.int32), alpha=1.5),
    lambda d: t(d, torch.int32).add_(t(d, torch.int32), alpha=2.5),
    lambda d: torch.add(t(d, torch.int32), t(d, torch.int32), alpha=2.5, out=empty(d, torch.float32)),
    lambda d: torch.add(t(d), t(d), alpha=True),
    lambda d: torch.add(t(d, torch.int32), t(d, torch.int32), alpha=True),
], ids=["bool", "int", "int-scalar", "sub", "rsub", "inplace", "out", "bool-alpha", "bool-alpha-int"])
def test_alpha_rejected(call):
    cpu, _ = outcome(call, "cpu")
    assert isinstance(cpu, RuntimeError)
    same(call, match="alpha")


def test_alpha_checked_after_other_checks():
    same(lambda d: torch.sub(t(d, torch.bool), t(d, torch.bool), alpha=1.5), match="Subtraction")
    same(lambda d: torch.add(t(d, torch.int32), t(d, torch.int32).reshape(3, 1)[:2], alpha=1.5))


@pytest.mark.parametrize("call", [
    lambda d: torch.add(t(d), t(d), alpha=1.5),
    lambda d: torch.add(t(d, torch.int32), t(d, torch.int32), alpha=2),
    lambda d: torch.add(t(d, torch.int32), t(d), alpha=1.5),
    lambda d: torch.add(t(d, torch.bool), t(d, torch.bool), alpha=True),
    lambda d: torch.sub(t(d, torch.complex64), t(d), alpha=0.5j),
], ids=["float", "int-int-alpha", "promoted", "bool-bool", "complex"])
def test_alpha_accepted(call):
    same(call)


@pytest.mark.parametrize("self_dtype", [torch.bool, torch.float32, torch.int64])
def test_index_fill_complex_value(self_dtype):
    idx = lambda d: torch.tensor([0, 2], device=d)  # noqa: E731
    same(lambda d: torch.zeros(3, dtype=self_dtype, device=d).index_fill_(0, idx(d), 1j), match="index_fill_")
    same(lambda d: torch.zeros(3, dtype=self_dtype, device=d).index_fill(0, idx(d), torch.tensor(1j)))
    same(lambda d: torch.zeros(3, dtype=torch.complex64, device=d).index_fill(0, idx(d), 1j))


@pytest.mark.parametrize("dtype,value", [(torch.float32, 1j), (torch.int8, 300), (torch.int32, 2 ** 40),
                                         (torch.float16, 1e6), (torch.float32, 1e300), (torch.uint8, -1),
                                         (torch.bool, 2), (torch.int64, 1.5), (torch.complex64, 1j)])
def test_fill_value_overflow(dtype, value):
    same(lambda d: torch.zeros(2, dtype=dtype, device=d).fill_(value))
    same(lambda d: torch.full((2,), value, dtype=dtype, device=d))
    same(lambda d: torch.zeros(2, dtype=dtype, device=d).masked_fill_(torch.tensor([True, False], device=d), value))


# ------------------------------------------------------------- CPU's warnings
def warned(fn, device, text):
    result, caught = outcome(fn, device)
    assert not isinstance(result, Exception), result
    return [m for c, m in caught if issubclass(c, UserWarning) and text in m]


@pytest.mark.parametrize("call,name", [
    (lambda d: torch.ones(1, device=d).var(), "var"),
    (lambda d: torch.ones(1, device=d).std(), "std"),
    (lambda d: torch.var_mean(torch.ones(1, device=d)), "var_mean"),
    (lambda d: torch.std_mean(torch.ones(2, 3, device=d), dim=1, correction=3), "std_mean"),
    (lambda d: torch.ones(2, 3, device=d).var(dim=0, correction=2), "var"),
    (lambda d: torch.ones(0, device=d).var(), "var"),
    (lambda d: torch.ones(2, 0, device=d).var(dim=1), "var"),
    (lambda d: torch.ones(0, 3, device=d).std(dim=0), "std"),
])
def test_degrees_of_freedom_warning(call, name):
    text = f"{name}(): degrees of freedom is <= 0"
    assert warned(call, "cpu", text)
    assert warned(call, "tpu", text)
    same(call)


@pytest.mark.parametrize("call", [
    lambda d: torch.ones(3, device=d).var(),
    lambda d: torch.ones(2, 3, device=d).std(dim=1, correction=0),
    lambda d: torch.var_mean(torch.ones(2, 3, device=d), dim=(0, 1), correction=5),
])
def test_no_degrees_of_freedom_warning(call):
    assert not warned(call, "cpu", "degrees of freedom")
    assert not warned(call, "tpu", "degrees of freedom")


def test_var_rejected_without_warning():
    """A call CPU rejects (a bool input, a bad dim) raises CPU's error and gives no warning."""
    for call in [lambda d: torch.ones(1, dtype=torch.bool, device=d).expand(3).var(-4),
                 lambda d: torch.ones(1, device=d).var(3)]:
        same(call)
        assert not outcome(call, "tpu")[1]


@pytest.mark.parametrize("what,args", [
    ("boundary", "b[::2], v"),
    ("input value", "b, torch.arange(8., device=d)[::2]"),
    ("sorter", "b.flip(0), v, sorter=torch.stack([torch.arange(9, -1, -1, device=d)] * 2, 1)[:, 0]"),
])
def test_searchsorted_noncontiguous_warning(python, what, args):
    """Once per process, as on CPU: each operand in a fresh interpreter."""
    code = f"""
import warnings, torch, torch_tpu
def run(d):
    b, v = torch.arange(10., device=d), torch.tensor([3., 4.5], device=d)
    return torch.searchsorted({args}).cpu()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    r = run("tpu")
    run("tpu")
    print(repr([str(x.message) for x in w if issubclass(x.category, UserWarning)]))
print(r.tolist() == run("cpu").tolist())
"""
    out = python(code).stdout.splitlines()
    text = f"torch.searchsorted(): {what} tensor is non-contiguous"
    assert len([m for m in eval(out[-2]) if text in m]) == 1, out
    assert out[-1] == "True"


# ------------------------------------------------------------- writes through conj / neg views
def conj_write(op):
    def fn(d):
        x = torch.tensor([1 + 2j, 3 + 4j, -1 - 1j], device=d)
        y = x.conj()
        op(y, x)
        return x, y
    return fn


@pytest.mark.parametrize("op", [
    lambda y, x: y.add_(x),
    lambda y, x: y.add_(1j),
    lambda y, x: y.mul_(2j),
    lambda y, x: y.copy_(torch.tensor([5 + 1j, 1j, 2], device=x.device)),
    lambda y, x: y.copy_(torch.tensor([5 + 1j, 1j, 2])),  # from the host
    lambda y, x: y.fill_(1j),
    lambda y, x: y.zero_(),
    lambda y, x: y[1:].add_(1j),
    lambda y, x: y[::2].mul_(y[::2]),
    lambda y, x: torch.add(x, 1j, out=y),
    lambda y, x: torch.mul(y, 2, out=y),
    lambda y, x: y.imag.add_(1),  # .imag of a conj view: a neg view
    lambda y, x: y.real.mul_(2),
], ids=["add_x", "add_scalar", "mul_", "copy_", "copy_host", "fill_", "zero_", "slice", "strided", "out",
        "out_self", "imag", "real"])
def test_write_through_conj_view(op):
    same(conj_write(op))


@pytest.mark.parametrize("op", [
    lambda y, x: y.add_(1),
    lambda y, x: y.mul_(x),
    lambda y, x: y.copy_(torch.tensor([5., 6., 7.], device=x.device)),
    lambda y, x: y.fill_(2),
    lambda y, x: y[1:].sub_(1),
    lambda y, x: torch.add(x, 1, out=y),
], ids=["add_", "mul_", "copy_", "fill_", "slice", "out"])
def test_write_through_neg_view(op):
    def fn(d):
        x = torch.tensor([1., 2., -3.], device=d)
        y = torch._neg_view(x)
        op(y, x)
        return x, y
    same(fn)


def test_read_conj_neg_views():
    same(lambda d: torch.tensor([1 + 2j, 3 - 4j], device=d).conj().cpu())
    same(lambda d: torch.tensor([1 + 2j, 3 - 4j], device=d).conj().imag.cpu())
    same(lambda d: torch._neg_view(torch.tensor([1., 2.], device=d))[1:].cpu())
    same(lambda d: torch.tensor([1 + 2j, 3 - 4j], device=d).conj()[1].item())


# ------------------------------------------------------------- quantized and sparse tensors
QUANTIZE = [
    lambda d: torch.quantize_per_tensor(t(d), 0.1, 0, torch.quint8),
    lambda d: torch.quantize_per_tensor(t(d), torch.tensor(0.1, device=d), torch.tensor(0, device=d), torch.qint8),
    lambda d: torch.quantize_per_channel(t(d), torch.ones(3, device=d), torch.zeros(3, dtype=torch.long, device=d),
                                         0, torch.qint8),
    lambda d: torch.quantize_per_tensor_dynamic(t(d), torch.quint8, False),
    lambda d: torch.empty(3, dtype=torch.qint32, device=d),
    lambda d: torch.quantize_per_tensor(t("cpu"), 0.1, 0, torch.quint8).to(d),
]


@pytest.mark.parametrize("fallback", [False, True])
@pytest.mark.parametrize("call", QUANTIZE, ids=["per_tensor", "tensor_qparams", "per_channel", "dynamic", "empty",
                                                "from_cpu"])
def test_quantized_not_implemented(call, fallback):
    """Quantized tpu tensors are not supported: NotImplementedError naming the dtype, also with the CPU
    fallback on (it could not help: its result could not live on tpu)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CPU's deprecation warning of torch.ao quantization
        call("cpu")
    with torch_tpu.cpu_fallback() if fallback else warnings.catch_warnings():
        with pytest.raises(NotImplementedError, match=r"quantized tensors \(torch\.q(u?int8|int32)\)") as e:
            call("tpu")
    assert "TORCH_TPU_CPU_FALLBACK" not in str(e.value)


SPARSE_UNSUPPORTED = [
    (lambda d: t(d).reshape(1, 3).to_sparse_csr(), "sparse_csr"),
    (lambda d: t(d).reshape(1, 3).to_sparse(layout=torch.sparse_csc), "sparse_csc"),
    (lambda d: torch.empty(1, 3, layout=torch.sparse_csr, device=d), "sparse_csr"),
    (lambda d: coo(d).sin(), "sparse_coo"),
    (lambda d: torch.mm(coo(d), coo(d).to_dense().t().to_sparse()), "sparse_coo"),
]


@pytest.mark.parametrize("fallback", [False, True])
@pytest.mark.parametrize("call,layout", SPARSE_UNSUPPORTED, ids=["to_sparse_csr", "to_sparse_csc", "empty_csr", "sin",
                                                                 "sparse_mm_sparse"])
def test_sparse_not_implemented(call, layout, fallback):
    """Sparse layouts and ops tpu lacks: NotImplementedError naming the layout, also with the CPU fallback."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        call("cpu")
    with torch_tpu.cpu_fallback() if fallback else warnings.catch_warnings():
        with pytest.raises(NotImplementedError, match=f"torch.{layout}") as e:
            call("tpu")
    assert "TORCH_TPU_CPU_FALLBACK" not in str(e.value)


def coo(d, dtype=torch.float32):
    """A 2x3 COO tensor with a duplicate entry (uncoalesced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CPU's note on sparse invariant checks
        return torch.sparse_coo_tensor(torch.tensor([[0, 1, 1, 0], [2, 0, 2, 2]]), torch.tensor([1., 2., 3., 4.]),
                                       (2, 3), device=d).to(dtype)


def dense(d):
    return torch.arange(6., device=d).reshape(2, 3) - 2


def as_dense(x):
    """A sparse result as (dense values, its coalesced indices and values) for comparison."""
    if isinstance(x, torch.Tensor) and x.layout == torch.sparse_coo:
        assert x.device.type in ("cpu", "tpu")
        c = x.coalesce()
        return x.to_dense(), c.indices(), c.values(), torch.tensor(c.is_coalesced())
    return x


@pytest.mark.parametrize("call", [
    lambda d: coo(d),
    lambda d: coo(d).coalesce(),
    lambda d: coo(d, torch.int64),
    lambda d: dense(d).to_sparse(),
    lambda d: dense(d).to_sparse(1),
    lambda d: torch.zeros(3, 2, device=d).to_sparse(),
    lambda d: torch.zeros(2, 3, layout=torch.sparse_coo, device=d),
    lambda d: torch.sparse_coo_tensor(torch.tensor([[0, 1, 0]]), torch.tensor([[1., 2.], [3., 4.], [5., 6.]]), (2, 2),
                                      device=d),
    lambda d: torch.sparse_coo_tensor(torch.tensor([[0, 1, 0], [1, 1, 1], [2, 0, 2]]), torch.tensor([1., 2., 3.]),
                                      (2, 2, 3), device=d),
    lambda d: torch.sparse.mm(coo(d), torch.arange(12., device=d).reshape(3, 4)),
    lambda d: coo(d) @ torch.arange(12., device=d).reshape(3, 4),
    lambda d: torch.addmm(torch.ones(2, 4, device=d), coo(d), torch.arange(12., device=d).reshape(3, 4), beta=0.5,
                          alpha=2),
    lambda d: torch.sparse.sum(coo(d)),
    lambda d: coo(d).sum(),
    lambda d: coo(d) + coo(d),
    lambda d: torch.add(coo(d), coo(d), alpha=2),
    lambda d: dense(d) + coo(d),
    lambda d: coo(d) + dense(d),
    lambda d: dense(d).add_(coo(d)),
    lambda d: coo(d).add_(coo(d)),
    lambda d: coo(d) * 2,
    lambda d: coo(d).mul(torch.tensor(0.5, device=d)),
    lambda d: coo(d).cpu(),
    lambda d: coo("cpu").to(d),
    lambda d: coo(d)._nnz(),
    lambda d: coo(d).coalesce()._nnz(),
    lambda d: coo(d).t(),
    lambda d: coo(d).t() @ torch.ones(2, 2, device=d),
], ids=["create", "coalesce", "int", "to_sparse", "to_sparse_1", "to_sparse_zeros", "zeros", "hybrid", "3d", "mm",
        "matmul", "addmm", "sparse_sum", "sum", "add", "add_alpha", "dense_add", "add_dense", "dense_add_", "add_",
        "mul_number", "mul_tensor", "cpu", "from_cpu", "nnz", "coalesced_nnz", "t",
        "t_mm"])
def test_sparse_coo(call):
    same(lambda d: as_dense(call(d)))


def test_sparse_coo_device_and_print():
    s = coo("tpu")
    assert s.device.type == "tpu" and s.is_sparse and s.layout == torch.sparse_coo
    assert s._indices().device.type == "tpu" and s._values().device.type == "tpu"
    assert "layout=torch.sparse_coo" in repr(s) and "nnz=4" in repr(s)


def setitem(values, index, device, base=None):
    """x[index(x)] = values on a copy of `base` (default: arange(8.) as [4, 2]); returns x."""
    x = (torch.arange(8.0).view(4, 2) if base is None else base).to(device)
    x[index(x)] = values.to(device) if isinstance(values, torch.Tensor) else values
    return x


@pytest.mark.parametrize("index, values", [
    (lambda x: x[:, 0] > 1, torch.ones(2, 2)),            # a mask selecting 3 rows, 2 values: a device-side check
    (lambda x: x[:, 0] > 1, torch.ones(3, 2)),            # as many as selected
    (lambda x: x[:, 0] > 1, torch.ones(1, 2)),            # broadcast
    (lambda x: x > 2, torch.tensor([1.0, 2.0])),          # a full mask, too few values
    (lambda x: ([0, 1], [0, 1, 0]), 0.0),                 # indices that do not broadcast: IndexError
    (lambda x: [0, 1], torch.ones(3, 2)),                 # values that do not fit the result
    (lambda x: (slice(None), [1]), torch.ones(4, 1, dtype=torch.int64)),  # another dtype than self
    (lambda x: (slice(None), [1]), 5),                    # a Python number takes self's dtype
])
def test_index_put_checks(index, values):
    same(lambda d: setitem(values, index, d).cpu())


def test_nonzero_out_on_another_device():
    x = torch.tensor([0.0, 1.0, 2.0], device="tpu")
    with pytest.raises(RuntimeError, match="nonzero: Expected out tensor to be on tpu:0"):
        torch.nonzero(x, out=torch.empty(0, dtype=torch.long))

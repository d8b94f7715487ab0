"""Conformance beyond OpInfo: tpu tensors behave like CPU PyTorch where the op sweep does not look —
out= dtype rules, alpha and fill-value checks, CPU's warnings, writes through conj / neg views, and
clear NotImplementedErrors for quantized and sparse tensors. CPU PyTorch is the oracle."""
import re
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from tpu_check import assert_close, check, check_vs_float64, flat


def outcome(fn, device):
    """fn(device): (result or exception, [(category, message)] of the warnings it gave)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn(device)
        except Exception as e:  # noqa: BLE001 - the exception is what is compared
            result = e
    return result, [(w.category, message_of(w)) for w in caught]


def message_of(warning):
    return str(warning.message).split(" (Triggered internally")[0]  # without the C++ file and line


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


def sparse_grad(d):
    """The gradient of a dense tensor through to_sparse (sparse_mask of the incoming gradient)."""
    x = dense(d).requires_grad_()
    (x.to_sparse() * torch.arange(6., device=d).reshape(2, 3).to_sparse()).to_dense().sum().backward()
    return x.grad


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
    lambda d: coo(d) - coo(d).coalesce() * 3,
    lambda d: dense(d) - coo(d),
    lambda d: coo(d).sub_(coo(d), alpha=0.5),
    lambda d: dense(d).sub_(coo(d)),
    lambda d: coo(d, torch.uint8).add_(coo(d, torch.int16)),               # cast back to self's dtype, as CPU
    lambda d: (coo(d) * coo(d)).to_dense(),
    lambda d: (coo(d) * dense(d)).to_dense(),
    lambda d: (dense(d) * coo(d)).to_dense(),
    lambda d: coo(d).mul_(coo(d).coalesce()).to_dense(),
    lambda d: dense(d).mul_(coo(d)),
    lambda d: coo(d) / 4,
    lambda d: coo(d, torch.int64) / 2,                                       # integer division promotes
    lambda d: torch.true_divide(coo(d, torch.int32), torch.tensor(3, device=d)),
    lambda d: coo(d).div_(2),
    lambda d: dense(d).sparse_mask(coo(d)),
    lambda d: dense(d).sparse_mask(coo(d).coalesce()),
    lambda d: coo(d).sparse_mask(dense(d).to_sparse()),
    lambda d: torch.ones(2, 2, device=d).sparse_mask(torch.sparse_coo_tensor(torch.tensor([[1]]), torch.ones(1, 2), (2, 2),
                                                                              device=d)),
    lambda d: sparse_grad(d),
], ids=["create", "coalesce", "int", "to_sparse", "to_sparse_1", "to_sparse_zeros", "zeros", "hybrid", "3d", "mm",
        "matmul", "addmm", "sparse_sum", "sum", "add", "add_alpha", "dense_add", "add_dense", "dense_add_", "add_",
        "mul_number", "mul_tensor", "cpu", "from_cpu", "nnz", "coalesced_nnz", "t",
        "t_mm", "sub", "dense_sub", "sub_", "dense_sub_", "add_cast", "mul_sparse", "mul_dense", "dense_mul",
        "mul_", "dense_mul_", "div", "div_int", "true_divide", "div_", "sparse_mask", "sparse_mask_coalesced",
        "sparse_mask_of_sparse", "sparse_mask_hybrid", "to_sparse_backward"])
def test_sparse_coo(call):
    same(lambda d: as_dense(call(d)))


@pytest.mark.parametrize("call", [
    lambda d: coo(d) / coo(d),                                       # division only by a scalar
    lambda d: coo(d) / dense(d),
    lambda d: dense(d) / coo(d),
    lambda d: coo(d) - dense(d),                                     # sparse - dense: use dense - sparse
    lambda d: coo(d, torch.bool) - coo(d, torch.bool),
    lambda d: coo(d, torch.int32).add_(coo(d)),                      # float result into int
    lambda d: dense(d).int().add_(coo(d)),
    lambda d: coo(d, torch.int32).mul_(coo(d)),
], ids=["div_sparse", "div_dense", "dense_div", "sub_dense", "sub_bool", "add_float_into_int", "dense_add_float_into_int",
        "mul_float_into_int"])
def test_sparse_coo_errors(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError):
            call("cpu")
        with pytest.raises(RuntimeError):
            call("tpu")


# ------------------------------------------------------------- in-place results must cast to self's dtype
@pytest.mark.parametrize("call", [
    lambda a, b: a.mul_(b), lambda a, b: a.mul_(1.5), lambda a, b: a.addcmul_(b, b), lambda a, b: a.addcdiv_(b, b),
], ids=["mul_tensor", "mul_number", "addcmul_", "addcdiv_"])
def test_inplace_result_type_must_cast_to_self(call):
    def run(d):
        a, b = torch.tensor([1, 2], dtype=torch.int32, device=d), torch.tensor([1.5, 2.0], device=d)
        call(a, b)
    for d in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Int"):
            run(d)
    a = torch.tensor([1, 2], dtype=torch.int32, device="tpu")
    assert a.mul_(3).addcmul_(a, a, value=2).tolist() == [21, 78]


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
    (lambda x: x > 2, torch.ones(0)),                     # no values for a mask that selects some
    (lambda x: x > 10, torch.ones(0)),                    # no values for a mask that selects none
    (lambda x: ([0, 1], [0, 1, 0]), 0.0),                 # indices that do not broadcast: IndexError
    (lambda x: [0, 1], torch.ones(3, 2)),                 # values that do not fit the result
    (lambda x: (slice(None), [1]), torch.ones(4, 1, dtype=torch.int64)),  # another dtype than self
    (lambda x: (slice(None), [1]), 5),                    # a Python number takes self's dtype
])
def test_index_put_checks(index, values):
    same(lambda d: setitem(values, index, d).cpu())


def test_nonzero_out_on_another_device():
    x = torch.tensor([0.0, 1.0, 2.0], device="tpu")
    with pytest.raises(RuntimeError, match="nonzero: expected self and out to be on the same device"):
        torch.nonzero(x, out=torch.empty(0, dtype=torch.long))


@pytest.mark.parametrize("call", [lambda x, out: torch.add(x, x, out=out), lambda x, out: torch.sum(x, 0, out=out),
                                  lambda x, out: torch.neg(x, out=out)])
def test_out_on_another_device(call):
    x = torch.ones(3, 3, device="tpu")
    with pytest.raises(RuntimeError, match=r"^Expected out tensor to have device tpu:0, but got cpu instead"):
        call(x, torch.empty(3))


# ------------------------------------------------------------- view(dtype) of strided views
VIEW_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
               torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128]


def raw(x):
    """x's bytes (bool as it is), for comparing values whose bits are arbitrary (NaN payloads)."""
    return x if x.dtype == torch.bool else x.contiguous().view(torch.uint8)


@pytest.mark.parametrize("src", VIEW_DTYPES, ids=str)
def test_view_dtype_of_strided_view(src):
    # A strided view reinterpreted as another dtype, then materialized (contiguous, clone) and written
    # through: complex element types cannot be bitcast in StableHLO, so they go through their real parts.
    base = torch.arange(64).remainder(7).view(8, 8)
    for dst in VIEW_DTYPES:
        for layout in (lambda x: x.t(), lambda x: x[::2], lambda x: x[1:, 2:][::3]):
            def read(d):
                x = layout(base.to(src).to(d))
                try:
                    v = x.view(dst)
                except RuntimeError as e:
                    return e
                return raw(v.contiguous().cpu()), v.stride(), v.shape
            cpu, tpu = read("cpu"), read("tpu")
            if isinstance(cpu, Exception):
                assert type(tpu) is type(cpu), (src, dst, tpu)
                continue
            assert not isinstance(tpu, Exception), (src, dst, tpu)
            assert tpu[1:] == cpu[1:] and torch.equal(tpu[0], cpu[0]), (src, dst)


@pytest.mark.parametrize("src,dst", [(torch.float64, torch.complex64), (torch.float32, torch.complex64),
                                     (torch.complex128, torch.float32), (torch.complex128, torch.complex64),
                                     (torch.int16, torch.complex64)])
def test_write_through_strided_dtype_view(src, dst):
    def run(d):
        x = torch.arange(64).remainder(5).view(8, 8).to(src).to(d)
        v = x[::2].view(dst)
        v.add_(torch.ones((), dtype=dst, device=d) * (1 + 1j if dst.is_complex else 1))
        if src.itemsize == dst.itemsize:
            x.t().view(dst).mul_(2)
        return raw(x.cpu())
    assert torch.equal(run("tpu"), run("cpu"))


# ------------------------------------------------------------- clone / contiguous memory formats
CL, CL3 = torch.channels_last, torch.channels_last_3d


@pytest.mark.parametrize("fn,shape", [
    (lambda x: x.contiguous(memory_format=CL), (2, 3, 4, 5)),
    (lambda x: x.clone(memory_format=CL), (2, 3, 4, 5)),
    (lambda x: x.contiguous(memory_format=CL3), (2, 3, 4, 5, 2)),
    (lambda x: x.clone(memory_format=CL), (1, 3, 1, 5)),                  # size-1 dims
    (lambda x: x.contiguous(memory_format=CL).clone(), (2, 3, 4, 5)),     # preserve_format keeps channels_last
    (lambda x: x.permute(2, 0, 3, 1).clone(), (2, 3, 4, 5)),              # and any dense permutation
    (lambda x: x.t().clone(memory_format=torch.preserve_format), (3, 5)),
    (lambda x: x.contiguous(memory_format=CL)[:, :, ::2].clone(), (2, 3, 4, 5)),  # not dense: suggested format
    (lambda x: x.contiguous(memory_format=CL).contiguous(), (2, 3, 4, 5)),
    (lambda x: x.to(torch.complex64).conj().clone(memory_format=CL), (2, 3, 4, 5)),
    (lambda x: x.contiguous(memory_format=CL).mul_(2)[:, 1], (2, 3, 4, 5)),
], ids=["contiguous_cl", "clone_cl", "contiguous_cl3d", "clone_cl_size1", "preserve_cl", "preserve_permuted",
        "preserve_t", "preserve_strided", "contiguous_of_cl", "conj_cl", "write_cl"])
def test_clone_memory_format(fn, shape):
    x = torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)
    cpu, tpu = fn(x), fn(x.to("tpu"))
    assert tpu.stride() == cpu.stride()
    assert torch.equal(tpu.cpu(), cpu)
    assert tpu.is_contiguous(memory_format=CL) == cpu.is_contiguous(memory_format=CL)


# ------------------------------------------------------------- result layouts follow the inputs', as on CPU and CUDA
def conv_cl(x):
    w = torch.arange(162, dtype=x.dtype, device=x.device).reshape(6, 3, 3, 3).div(100).contiguous(memory_format=CL)
    return F.conv2d(x, w, padding=1)


def norm(x):
    w = torch.linspace(0.5, 1.5, x.shape[1], device=x.device)
    return F.batch_norm(x, torch.zeros_like(w), torch.ones_like(w), w, w, training=True)


@pytest.mark.parametrize("fn,shape", [
    (lambda x: x.contiguous(memory_format=CL).exp(), (2, 3, 4, 5)),
    (lambda x: x.contiguous(memory_format=CL) * 2 + 1, (2, 3, 4, 5)),
    (lambda x: x.contiguous(memory_format=CL) + x, (2, 3, 4, 5)),                 # mixed layouts: CPU's pick
    (lambda x: x + x.contiguous(memory_format=CL), (2, 3, 4, 5)),
    (lambda x: torch.where(x > 3, x.contiguous(memory_format=CL), 0.0), (2, 3, 4, 5)),
    (lambda x: x.contiguous(memory_format=CL3).relu(), (2, 3, 4, 5, 2)),
    (lambda x: x.t().sin(), (3, 5)),
    (lambda x: x.permute(2, 0, 1) - 1, (2, 3, 4)),
    (lambda x: x.t().to(torch.float64), (3, 5)),
    (lambda x: x.expand(2, 4, 5).transpose(1, 2) * 1, (4, 5)),                    # overlapping: row-major
    (lambda x: conv_cl(x.contiguous(memory_format=CL)), (2, 3, 5, 6)),
    (lambda x: F.max_pool2d(x.contiguous(memory_format=CL), 2), (2, 3, 4, 6)),
    (lambda x: F.adaptive_avg_pool2d(x.contiguous(memory_format=CL), 1), (2, 3, 4, 6)),
    (lambda x: F.interpolate(x.contiguous(memory_format=CL), scale_factor=2), (2, 3, 4, 6)),
    (lambda x: norm(x.contiguous(memory_format=CL)), (2, 3, 4, 6)),
], ids=["unary_cl", "scalar_cl", "mixed_cl_first", "mixed_cl_second", "where_cl", "relu_cl3d", "unary_t", "permuted",
        "cast_t", "overlapping", "conv_cl", "max_pool_cl", "adaptive_pool_cl", "interpolate_cl", "batch_norm_cl"])
def test_result_layout(fn, shape):
    x = torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape).div(7)
    cpu, tpu = fn(x), fn(x.to("tpu"))
    assert tpu.stride() == cpu.stride()
    torch.testing.assert_close(tpu.cpu(), cpu, rtol=1e-5, atol=1e-5)


def test_channels_last_network_keeps_its_layout_through_backward():
    def run(d):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                  torch.nn.MaxPool2d(2), torch.nn.Conv2d(4, 2, 1))
        net = net.to(d, memory_format=CL)
        x = torch.randn(2, 3, 6, 6).to(d, memory_format=CL).requires_grad_()
        y = net(x)
        y.square().sum().backward()
        return y, x.grad, net[0].weight.grad
    for cpu, tpu in zip(run("cpu"), run("tpu")):
        assert tpu.is_contiguous(memory_format=CL) == cpu.is_contiguous(memory_format=CL)
        torch.testing.assert_close(tpu.cpu(), cpu, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("call", [
    lambda x, out: torch.add(x.t(), 1, out=out),
    lambda x, out: torch.neg(x.t(), out=out),
    lambda x, out: torch.mul(x.reshape(2, 3, 2, 2).contiguous(memory_format=CL), 2, out=out),
    lambda x, out: torch.where(x.t() > 1, x.t(), x.t().neg(), out=out),
    lambda x, out: torch.add(x.t().half(), 1, out=out),                    # cast into a wider out
    lambda x, out: torch.sum(x.reshape(2, 3, 2, 2).contiguous(memory_format=CL), 1, out=out),  # not pointwise
    lambda x, out: torch.mm(x.t(), x, out=out),
], ids=["add_t", "neg_t", "mul_cl", "where_t", "add_half_t", "sum_cl", "mm_t"])
@pytest.mark.parametrize("out_numel", [0, 5, 12])
def test_out_resized_takes_the_result_layout(call, out_numel):
    # an out tensor of another shape is resized to the layout TensorIterator gives the result; one of the
    # right shape keeps its own
    def run(d):
        x = torch.arange(24, dtype=torch.float32, device=d).reshape(6, 4).div(7)
        out = torch.empty(out_numel, device=d)
        if out_numel == 12:
            out = out.view(4, 3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return call(x, out)
    cpu, tpu = run("cpu"), run("tpu")
    assert tpu.stride() == cpu.stride()
    torch.testing.assert_close(tpu.cpu(), cpu, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------- out= of a wider dtype: computed in the inputs' dtype
def half(d):
    return torch.tensor([33000.0, 1.5, -2.0], dtype=torch.float16, device=d)


@pytest.mark.parametrize("call", [
    lambda d: torch.add(half(d), half(d), out=empty(d, torch.float64, 0)),          # overflows in f16: inf
    lambda d: torch.add(half(d), half(d), alpha=2, out=empty(d, torch.float32, 0)),
    lambda d: torch.mul(half(d), 3, out=empty(d, torch.float64, 0)),
    lambda d: torch.addcmul(half(d), half(d), half(d), out=empty(d, torch.float64, 0)),
    lambda d: torch.exp(half(d) / 3000, out=empty(d, torch.float32, 0)),
    lambda d: torch.div(torch.tensor([7, -3], device=d), 3, out=empty(d, torch.float64, 0)),
    lambda d: torch.sum(half(d), 0, out=empty(d, torch.float64, 0)),                 # reductions: in out's dtype
    lambda d: torch.sum(torch.stack([half(d), half(d)]), 0, out=empty(d, torch.float32, 0)),
    lambda d: torch.cumsum(half(d), 0, out=empty(d, torch.float64, 0)),
    lambda d: torch.neg(half(d), out=empty(d, torch.float64, 0)),                    # rejected
    lambda d: torch.neg(half(d), out=empty(d, torch.float16, 0)),
    lambda d: torch.floor_divide(torch.tensor([7, -7], dtype=torch.int16, device=d),
                                 torch.tensor([2], dtype=torch.int32, device=d), out=empty(d, torch.complex64, 0)),
], ids=["add", "add_alpha", "mul_scalar", "addcmul", "exp", "div_int", "sum", "sum_dim", "cumsum", "neg_wider",
        "neg", "floor_divide_complex"])
def test_out_wider_dtype_computes_in_result_type(call):
    same(lambda d: call(d).cpu())


# ------------------------------------------------------------- complex32: stored as u32, computed as complex64
def chalf(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.complex(torch.randn(*shape, generator=g), torch.randn(*shape, generator=g)).to(torch.chalf)


def bits(x):
    """A complex32 tensor's halves as float16 (CPU has no torch.equal for complex32)."""
    return torch.view_as_real(x.cpu())


@pytest.mark.parametrize("fn", [
    lambda d: chalf(2, 3).to(d),
    lambda d: chalf(4).to(d) + chalf(4, seed=1).to(d),
    lambda d: torch.tensor([1.0, -2.5], dtype=torch.half, device=d) + (1 + 2j),  # promotion gives complex32
    lambda d: torch.tensor([0.5, 3.0], dtype=torch.half, device=d) * chalf(2).to(d),
    lambda d: torch.randn(5, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).to(d).to(torch.chalf),
    lambda d: chalf(5).to(d).to(torch.complex64),
    lambda d: torch.complex(torch.ones(3, dtype=torch.half, device=d), torch.arange(3, dtype=torch.half, device=d)),
    lambda d: torch.view_as_complex(torch.arange(6, dtype=torch.half, device=d).view(3, 2)),
    lambda d: torch.view_as_real(chalf(3).to(d)),
    lambda d: chalf(2, 4).to(d).view(torch.float32),
    lambda d: chalf(4).view(torch.float32).to(d).view(torch.chalf),
    lambda d: chalf(4, 3).to(d).t().conj().resolve_conj(),
    lambda d: torch.cat([chalf(2).to(d), chalf(3, seed=1).to(d)]),
    lambda d: chalf(3).to(d).real,
    lambda d: torch.full((2,), 1 - 3j, dtype=torch.chalf, device=d),
], ids=["roundtrip", "add", "half_plus_complex", "mul_half", "from_f64", "to_c64", "complex", "view_as_complex",
        "view_as_real", "view_f32", "view_chalf", "t_conj", "cat", "real", "full"])
def test_complex32_values(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "ComplexHalf support is experimental"
        cpu, tpu = fn("cpu"), fn("tpu")
    assert tpu.device.type == "tpu" and tpu.dtype == cpu.dtype and tpu.shape == cpu.shape
    if cpu.dtype == torch.chalf:
        cpu, tpu = bits(cpu), bits(tpu)
    # products round once from complex64 on tpu, as on CPU; sums of halves are exact in float32
    assert torch.equal(tpu.cpu(), cpu)


def test_complex32_writes_and_reductions():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x, y = chalf(6), chalf(6, seed=1)
        a = x.to("tpu")
        a[1:3] = y[:2].to("tpu")  # a write into part of a complex32 storage
        a[::2] += y[::2].to("tpu")  # a strided in-place update
        expected = x.clone()
        expected[1:3] = y[:2]
        expected[::2] += y[::2]
        assert torch.equal(bits(a), bits(expected))
        s = a.sum()  # CPU has no complex32 sum: float64 reference, rounded to complex32
        ref = expected.to(torch.complex128).sum()
        assert s.dtype == torch.chalf
        assert_close(s.to(torch.complex128), ref, atol=2e-3, rtol=1e-3)
        m = (a.view(2, 3) @ y.view(3, 2).to("tpu")).to(torch.complex128)
        assert_close(m, expected.view(2, 3).to(torch.complex128) @ y.view(3, 2).to(torch.complex128), atol=1e-2, rtol=2e-3)


def test_complex32_compiled():
    x = chalf(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn = torch.compile(lambda a: a * a + 1, backend="tpu")
        got = fn(x.to("tpu"))
    # each op's result is complex32, as in eager: the product rounds before the sum
    square = (x.to(torch.complex64) * x.to(torch.complex64)).to(torch.chalf)
    assert torch.equal(bits(got), bits((square.to(torch.complex64) + 1).to(torch.chalf)))


# ------------------------------------------------------------- TorchScript: Tensor?[] arrives as a GenericList
def mask_assign(x):
    x[x < 50] = 1.0
    return x


def index_assign(x, i):
    x[i] = 2.0
    return x[i, :1] + x[[0, 1]].sum()


def index_put_none(x, i):
    return torch.index_put(x, [None, i], torch.tensor(3.0, device=x.device), accumulate=True)


def test_torchscript_indexing():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.script is deprecated
        fns = [torch.jit.script(f) for f in (mask_assign, index_assign, index_put_none)]
    same(lambda d: fns[0](torch.arange(100.0, device=d)).cpu())
    same(lambda d: fns[1](torch.arange(12.0, device=d).view(4, 3), torch.tensor([1, 3], device=d)).cpu())
    same(lambda d: fns[2](torch.zeros(2, 3, device=d), torch.tensor([0, 2, 2], device=d)).cpu())


# ------------------------------------------------------------- index_put: values checked against the indexing result
def error_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the point is which exception, compared with CPU's
        return type(e), str(e).split(" (tpu:")[0]
    return None


@pytest.mark.parametrize("values", [[], [1, 2, 3], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0], [5]],
                         ids=["empty_float", "short_same_dtype", "short_float", "fits_float", "broadcast"])
@pytest.mark.parametrize("index", ["mask", "positions"])
def test_index_put_checks_value_shape_before_dtype(values, index):
    """Raised at the assignment itself, as on CPU (a mask's count is read when the values could misfit)."""
    def run(d):
        a = torch.arange(4, device=d)
        where = a > -1 if index == "mask" else torch.tensor([0, 1, 2, 3], device=d)
        a[where] = torch.tensor(values).to(d)
        return a
    cpu = error_of(lambda: run("cpu"))
    assert error_of(lambda: run("tpu")) == cpu
    if cpu is None:
        assert torch.equal(run("tpu").cpu(), run("cpu"))


# ------------------------------------------------------------- uint8 masks in index_put: CPU's deprecation warning
@pytest.mark.parametrize("accumulate", [False, True])
def test_uint8_mask_assignment_warns_like_cpu(accumulate):
    def run(device):
        x = torch.arange(16.0, device=device).view(4, 4)
        m = torch.tensor([1, 0, 1, 0], dtype=torch.uint8, device=device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x.index_put_((m,), torch.tensor([3.0, 4.0, 5.0, 6.0], device=device), accumulate=accumulate)
        return x.cpu(), [str(w.message).split(" (Triggered")[0] for w in caught]
    (cpu_x, cpu_warnings), (tpu_x, tpu_warnings) = run("cpu"), run("tpu")
    assert torch.equal(tpu_x, cpu_x)
    assert tpu_warnings == cpu_warnings and "uint8 is now deprecated" in cpu_warnings[0]


# ------------------------------------------------------------- in-place ops whose result would need a larger self
@pytest.mark.parametrize("op", ["atan2_", "copysign_", "eq_", "fmod_", "hypot_", "xlogy_", "add_"])
@pytest.mark.parametrize("rows", [0, 2])
def test_inplace_broadcast_to_larger_shape_raises(op, rows):
    same(lambda d: getattr(torch.ones(rows, 1, 3, device=d), op)(torch.ones(rows, 10, 3, device=d)).cpu())


def test_inplace_broadcast_int_ops_raise():
    same(lambda d: torch.ones(0, 1, 3, dtype=torch.int64, device=d).bitwise_and_(
        torch.ones(0, 10, 3, dtype=torch.int64, device=d)).cpu())


# ------------------------------------------------------------- _unsafe_masked_index: masked-out indices may be out of range
def test_unsafe_masked_index_ignores_masked_out_indices():
    def run(d):
        x = torch.arange(5.0, device=d)
        mask = torch.tensor([True, False, True, False], device=d)
        idx = torch.tensor([1, 6, -2, -9], device=d)
        got = torch.ops.aten._unsafe_masked_index(x, mask, [idx], -1.0)
        acc = torch.ops.aten._unsafe_masked_index_put_accumulate(x.clone(), mask, [idx], torch.full((4,), 10.0, device=d))
        return got.cpu(), acc.cpu()
    same(run)


# ------------------------------------------------------------- argument checks CPU makes before computing
@pytest.mark.parametrize("call", [
    lambda d: torch.as_strided_scatter(torch.zeros(10, device=d), torch.ones(2, 2, device=d), (2, 2), (200, 200)),
    lambda d: torch.as_strided_scatter(torch.zeros(10, device=d), torch.ones(2, 2, device=d), (2, 2), (3, 1), 4),
    lambda d: torch.as_strided_scatter(torch.zeros(10, device=d), torch.ones(2, 2, device=d), (2, 2), (3, 1), 5),
    lambda d: torch.as_strided_scatter(torch.zeros(12, device=d)[2:], torch.ones(2, 2, device=d), (2, 2), (4, 1)),
    lambda d: torch.nn.functional.conv3d(torch.ones(1, 1, 4, 4, 4, device=d), torch.ones(1, 1, 2, 2, 2, device=d), padding=-1),
    lambda d: torch.nn.functional.conv2d(torch.ones(1, 1, 4, 4, device=d), torch.ones(1, 1, 2, 2, device=d), stride=0),
    lambda d: torch.nn.functional.conv2d(torch.ones(1, 1, 4, 4, device=d), torch.ones(1, 1, 2, 2, device=d), dilation=(1, 0)),
    lambda d: torch.nn.functional.conv_transpose2d(torch.ones(1, 1, 4, 4, device=d), torch.ones(1, 1, 2, 2, device=d),
                                                   output_padding=-1),
])
def test_checked_arguments(call):
    same(lambda d: call(d).cpu())


@pytest.mark.parametrize("call", [
    lambda x, m: torch.masked_select(x, m, out=x),           # data-dependent: computed on the host
    lambda x, m: torch.gather(x, 0, torch.zeros(5, dtype=torch.long, device=x.device), out=x),
])
def test_out_overlapping_input_raises(call):
    def run(d):
        x = torch.arange(5.0, device=d)
        return call(x, torch.ones(5, dtype=torch.bool, device=d)).cpu()
    same(run)


def test_out_checked_for_overlap_after_it_is_resized():
    def run(d):  # out ends where the index begins, until it takes the index's shape
        buf = torch.tensor([7, 0, 1], device=d)
        return torch.gather(torch.arange(3, device=d), 0, buf[1:], out=buf[:1]).cpu()
    same(run, match="single memory location")


# ------------------------------------------------------------- out= forms with CPU's shape and dtype rules
@pytest.mark.parametrize("out", [0, 1, 3, 5])
def test_normal_float_std_out_broadcasts_mean_with_out(out):
    def run(d):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch's note on resizing a non-empty output
            return torch.normal(torch.zeros(3, device=d), 1.0, out=torch.empty(out, device=d)).shape
    same(run)


def test_narrow_copy_out():
    x = torch.arange(20.0).reshape(4, 5)
    same(lambda d: torch.narrow_copy(x.to(d), 1, 1, 3, out=torch.empty(0, device=d)).cpu())
    same(lambda d: torch.narrow_copy(x.to(d), 0, -2, 2, out=torch.empty(7, device=d)).cpu())
    with pytest.raises(RuntimeError, match="narrow_copy"):
        torch.narrow_copy(x.to("tpu"), 1, 1, 3, out=torch.empty(0, device="tpu", dtype=torch.float64))


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("op", ["native_batch_norm", "_native_batch_norm_legit"])
def test_batch_norm_out_forms(op, training):
    torch.manual_seed(0)
    x, w, b = torch.randn(4, 3, 5), torch.rand(3) + 0.5, torch.randn(3)
    mean, var = torch.randn(3), torch.rand(3) + 0.5

    def run(d):
        stats = [mean.clone().to(d), var.clone().to(d)]  # updated in place in training
        outs = [torch.empty(0, device=d) for _ in range(3)]
        res = getattr(torch.ops.aten, op).out(x.to(d), w.to(d), b.to(d), *stats, training, 0.1, 1e-5,
                                             out=outs[0], save_mean=outs[1], save_invstd=outs[2])
        assert all(r is o for r, o in zip(res, outs))
        return outs + stats
    cpu, tpu = run("cpu"), run("tpu")
    assert_close(tpu, cpu)


# ------------------------------------------------------------- histc: a range that is not finite
@pytest.mark.parametrize("data,lo,hi", [
    ([1.0, float("inf")], 0, 0), ([float("nan"), 1.0], 0, 0), ([1.0, 2.0], 0, float("inf")),
    ([1.0, float("inf")], 0, 3), ([float("nan"), 1.0], 0, 3), ([1.0, 2.0], 0, 0),
], ids=["inf_data", "nan_data", "inf_max", "inf_data_in_range", "nan_data_in_range", "finite"])
def test_histc_range_must_be_finite(data, lo, hi):
    def run(d):
        return torch.histc(torch.tensor(data, device=d), 3, lo, hi)
    try:
        expected = run("cpu")
    except RuntimeError:
        x = torch.tensor(data, device="tpu")
        with pytest.raises(RuntimeError, match="torch.histc: range of .* is not finite"):
            torch.histc(x, 3, lo, hi)  # by the call, as on CPU and CUDA: no later sync needed
        with pytest.raises(RuntimeError, match="torch.histc: range of .* is not finite"):
            torch.compile(lambda v: torch.histc(v, 3, lo, hi), backend="tpu")(x)
        return
    assert torch.equal(run("tpu").cpu(), expected)


# ------------------------------------------------------------- reducing one dim of more than 64
@pytest.mark.parametrize("call", [
    lambda x: torch.argmax(x, 0), lambda x: torch.argmin(x, -1), lambda x: torch.nansum(x, 0),
    lambda x: torch.nansum(x, [0, 1]), lambda x: x.max(0), lambda x: x.min(3), lambda x: torch.sum(x, 0),
    lambda x: torch.argmax(x), lambda x: torch.nansum(x), lambda x: x.max(),
], ids=["argmax", "argmin", "nansum", "nansum_dims", "max_dim", "min_dim", "sum", "argmax_all", "nansum_all", "max_all"])
def test_reduction_dim_limit_of_64(call):
    same(lambda d: call(torch.ones([1] * 65, device=d)))


# ------------------------------------------------------------- searchsorted's side= and sorter= checks
@pytest.mark.parametrize("kwargs", [
    lambda d: {"side": "middle"}, lambda d: {"sorter": torch.tensor([0., 1., 2.], device=d)},
    lambda d: {"sorter": torch.tensor([0, 1], device=d)}, lambda d: {"side": "left", "right": True},
    lambda d: {"side": "right", "sorter": torch.tensor([2, 0, 1], device=d)},
], ids=["side", "sorter_dtype", "sorter_size", "side_vs_right", "valid"])
def test_searchsorted_argument_checks(kwargs):
    same(lambda d: torch.searchsorted(torch.tensor([3., 1., 2.], device=d), torch.tensor([2.5, 0.], device=d),
                                      **kwargs(d)))


# ------------------------------------------------------------- addr_ in place: self is the result as it is
@pytest.mark.parametrize("shape", [(3, 4), (3, 1), (1, 4), (4,), (), (3, 4, 1)])
def test_addr_in_place_neither_broadcasts_nor_resizes(shape):
    def run(d):
        x = torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape).to(d)
        return x.addr_(torch.arange(3.0, device=d), torch.arange(4.0, device=d), beta=0.5, alpha=2).cpu()
    try:
        expected = run("cpu")
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=re.escape(str(e))):
            run("tpu")
        return
    assert torch.equal(run("tpu"), expected)
    x = torch.ones(3, 4, device="tpu", requires_grad=True)
    x.clone().addr_(torch.ones(3, device="tpu"), torch.ones(4, device="tpu")).sum().backward()
    assert torch.equal(x.grad.cpu(), torch.ones(3, 4))


@pytest.mark.parametrize("shape", [(3, 4), (4,), (1, 4), (3, 1), ()])
def test_addbmm_in_place_takes_the_result_shape(shape):
    def run(d):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch's note on resizing a non-empty output
            return torch.ones(shape, device=d).addbmm_(torch.arange(30.0, device=d).reshape(2, 3, 5),
                                                       torch.ones(2, 5, 4, device=d), beta=0.5).cpu()
    cpu, tpu = run("cpu"), run("tpu")
    assert tpu.shape == cpu.shape
    if shape == (3, 4):  # (resized outputs hold whatever memory they got on CPU)
        assert torch.equal(tpu, cpu)


# ------------------------------------------------------------- matrix products XLA CPU or the composites got wrong
def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_addr_rounds_once_in_half_types(dtype):
    # beta * self + alpha * outer(v1, v2) cancels here: rounding each step (CPU) loses the result's
    # digits; CUDA and tpu compute in float32 and round once
    self_, v1, v2 = (torch.tensor(x, dtype=dtype) for x in ([[-8.0625]], [4.5625], [5.15625]))
    check_vs_float64(lambda s, a, b: torch.addr(s, a, b, beta=0.6, alpha=0.2), self_, v1, v2, ulps=2)
    check(torch.addr, randn(3, 4, dtype=dtype), randn(3, dtype=dtype), randn(4, dtype=dtype), rtol=1e-2, atol=1e-2)
    check(lambda s, a, b: torch.addr(s, a, b, beta=0), torch.full((2, 3), float("nan")), randn(2), randn(3))
    check(lambda s, a, b: torch.addr(s, a, b, beta=False), torch.tensor([[True, False]]), torch.tensor([True]),
          torch.tensor([False, True]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_bmm_of_one_matrix_with_a_transposed_operand(dtype):
    # bilinear's backward makes these; XLA CPU could not run a batch-of-one bfloat16 product batched
    grad = dtype == torch.float32
    tol = {} if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    a_t = randn(1, 8, 3, dtype=dtype).transpose(1, 2)
    check(torch.bmm, a_t, randn(1, 8, 4, dtype=dtype), grad=grad, **tol)
    check(torch.baddbmm, randn(1, 3, 4, dtype=dtype), a_t, randn(1, 8, 4, dtype=dtype), grad=grad, **tol)
    check(torch.nn.functional.bilinear, randn(8, 3, dtype=dtype), randn(8, 4, dtype=dtype), randn(5, 3, 4, dtype=dtype),
          grad=True, **tol)


# ------------------------------------------------------------- XLA CPU's emitters where they differ from PyTorch
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
@pytest.mark.parametrize("n", [12, 5000])  # up to 4096 elements XLA CPU compiles with its loop emitters
def test_integer_pow_wraps_as_cpu(dtype, n):
    base = torch.arange(-n // 2, n // 2).to(dtype)
    exponents = [0, 1, 2, 3, 7, 63, 64, 70, 127, 200, 255, 1000, 12345, 2**31 - 1]
    if dtype.is_signed:
        exponents += [-1, -2, -3, -2**31]
    for k in exponents:
        check(torch.pow, base, torch.full((n,), k).to(dtype))
    check(lambda b: torch.pow(b, 3), base)
    check(lambda b: torch.pow(2, b.clamp(min=0)), base)


@pytest.mark.parametrize("n", [6, 5000])
def test_nan_passes_through_bounded_functions(n):
    x = torch.linspace(-12, 12, n)
    x[::5] = float("nan")
    check(lambda t: torch.logit(t.sigmoid(), eps=0.1), x)
    check(torch.special.airy_ai, x, rtol=2e-5, atol=2e-6)
    check(lambda t: t.clamp(-1, 1), x)


def test_abs_of_unsigned_is_the_value():
    check(torch.abs, torch.tensor([0, 1, 200], dtype=torch.uint8))


def test_complex_logcumsumexp_keeps_cpus_angle():
    # the angle of a partial result is not wrapped to (-pi, pi]: it depends on the order of combination,
    # which is CPU's left-to-right loop
    g = torch.Generator().manual_seed(0)
    x = torch.complex(torch.randn(3, 40, 5, generator=g), 4 * torch.randn(3, 40, 5, generator=g))
    for dim in (0, 1, -1):
        check(lambda t: torch.logcumsumexp(t, dim), x, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------- found by PyTorch's ufunc and nn device tests
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.int64])
@pytest.mark.parametrize("call", [
    lambda a, b: torch.fmod(a, b), lambda a, b: torch.remainder(a, b), lambda a, b: torch.floor_divide(a, b),
    lambda a, b: torch.div(a, b, rounding_mode="trunc"), lambda a, b: torch.div(a, b, rounding_mode="floor"),
    lambda a, b: a % 3, lambda a, b: torch.gcd(a, b),
], ids=["fmod", "remainder", "floor_divide", "div_trunc", "div_floor", "mod_scalar", "gcd"])
@pytest.mark.parametrize("shape", [(0,), (2, 0, 3)])
def test_integer_division_of_empty_tensors(call, dtype, shape):
    # XLA's constant folder once divided by the zero it took an empty constant for, on the host (SIGFPE)
    check(call, torch.empty(shape, dtype=dtype), torch.empty(shape, dtype=dtype))


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("call", [
    lambda x: torch._foreach_norm([x, x[:2]], INF), lambda x: torch._foreach_norm([x], -INF),
    lambda x: torch._foreach_max([x]), lambda x: torch.linalg.vector_norm(x, INF),
    lambda x: torch.renorm(x.view(1, 4), INF, 0, 1.0), lambda x: torch.cdist(x.view(1, 4, 1), x.view(1, 4, 1), INF),
    lambda x: torch.pdist(x.view(4, 1), INF),  # CPU's cdist and pdist drop the NaN: so does tpu
], ids=["foreach_norm_inf", "foreach_norm_neg_inf", "foreach_max", "vector_norm_inf", "renorm_inf", "cdist_inf",
        "pdist_inf"])
def test_max_norms_propagate_nan(call):
    check(call, torch.tensor([1.0, NAN, -3.0, 2.0]))


def test_clip_grad_norm_inf_raises_on_nan_gradient():
    def clip(d):
        p = torch.ones(4, dtype=torch.float64, device=d, requires_grad=True)
        p.mul(NAN).sum().backward()
        return torch.nn.utils.clip_grad_norm_([p], 1.0, norm_type=INF, error_if_nonfinite=True)
    same(clip)


def test_complex_isinf_and_abs_of_non_finite_parts():
    z = torch.tensor([complex(1, INF), complex(INF, 0), complex(NAN, INF), complex(1, 2), complex(1, NAN),
                      complex(0, -INF), complex(NAN, 0)])
    for fn in (torch.isinf, torch.isfinite, torch.isnan, torch.abs):
        check(fn, z)
        check(fn, z.to(torch.complex128))


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic"])
@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64])
def test_interpolate_rejects_integer_images(mode, dtype):
    # CPU and CUDA take float and (CPU) uint8 images only
    x = torch.arange(60).view(1, 3, 4, 5).to(dtype)
    with pytest.raises(NotImplementedError, match="not implemented for"):
        F.interpolate(x.to("tpu"), size=(6, 7), mode=mode)


@pytest.mark.parametrize("mode,antialias", [("nearest", False), ("nearest-exact", False), ("bilinear", False),
                                            ("bicubic", False), ("bilinear", True), ("bicubic", True)])
@pytest.mark.parametrize("size,align", [((6, 9), False), ((3, 2), False), ((7, 5), True)])
def test_interpolate_uint8_images(mode, antialias, size, align):
    # CPU rounds each separable pass to uint8 with 16-bit fixed-point weights; tpu with float weights:
    # at most one step apart
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (2, 3, 5, 6), dtype=torch.uint8, generator=g)
    kw = {} if "nearest" in mode else {"align_corners": align, "antialias": antialias}
    expected = F.interpolate(x, size=size, mode=mode, **kw)
    actual = F.interpolate(x.to("tpu"), size=size, mode=mode, **kw)
    assert actual.dtype == torch.uint8 and actual.shape == expected.shape
    tol = 0 if "nearest" in mode else 1
    assert (actual.cpu().int() - expected.int()).abs().max() <= tol


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("size", [(3, 9), (12, 5)])
def test_interpolate_bicubic_antialias(dtype, size):
    x = torch.randn(2, 3, 6, 7, dtype=dtype, generator=torch.Generator().manual_seed(0))
    for align in (False, True):
        check(lambda t: F.interpolate(t, size=size, mode="bicubic", antialias=True, align_corners=align), x, grad=True)


@pytest.mark.parametrize("fn", [
    lambda t: F.avg_pool2d(t, 2), lambda t: F.max_pool2d(t, 2), lambda t: F.adaptive_avg_pool2d(t, 3),
    lambda t: F.interpolate(t, size=(8, 8), mode="bilinear"), lambda t: F.interpolate(t, size=(8, 8), mode="bicubic"),
], ids=["avg_pool", "max_pool", "adaptive_avg_pool", "bilinear", "bicubic"])
def test_result_layout_does_not_depend_on_call_order(fn):
    # same shape and dtype, but only a is channels_last (b's batch stride of 5 makes it contiguous-like)
    a = torch.rand(1, 5, 10, 10).contiguous(memory_format=torch.channels_last)
    b = a[0][None]
    for order in ((a, b), (b, a)):
        for x in order:
            assert fn(x.to("tpu")).stride() == fn(x).stride()


def test_hardswish_gradient_at_the_kinks():
    check(F.hardswish, torch.tensor([-4.0, -3.0, -1.0, 0.0, 3.0, 4.0]), grad=True)
    check(F.hardsigmoid, torch.tensor([-4.0, -3.0, -1.0, 0.0, 3.0, 4.0]), grad=True)


@pytest.mark.parametrize("fn", [
    lambda d: torch.heaviside(torch.tensor([-1, 0, 2], device=d), torch.tensor([.5, .5, .5], device=d)),
    lambda d: torch.heaviside(torch.tensor([1 + 1j], device=d), torch.tensor([1 + 0j], device=d)),
    lambda d: torch.heaviside(torch.tensor([-1., 0., 2.], device=d), torch.tensor([.5, .5, .5], device=d)),
    lambda d: torch.polar(torch.ones(2, device=d), torch.ones(2, device=d, dtype=torch.float64)),
    lambda d: torch.complex(torch.ones(2, device=d), torch.ones(2, device=d, dtype=torch.float64)),
], ids=["heaviside_dtypes", "heaviside_complex", "heaviside", "polar_dtypes", "complex_dtypes"])
def test_binary_dtype_errors(fn):
    same(fn)


@pytest.mark.parametrize("forward", [
    lambda t: F.elu_(t, alpha=-2), lambda t: F.celu_(t, alpha=-2), lambda t: F.leaky_relu_(t, -2),
    lambda t: F.rrelu_(t, -5.0, 1.0), lambda t: F.elu_(t, alpha=2), lambda t: F.leaky_relu_(t, 0.5),
], ids=["elu_", "celu_", "leaky_relu_", "rrelu_", "elu_ok", "leaky_relu_ok"])
def test_inplace_activation_backward_with_negative_slope(forward):
    def run(d):
        a = torch.tensor([-1., 1.], device=d, requires_grad=True)
        forward(a.clone()).backward(torch.ones(2, device=d))
        return a.grad.cpu()
    same(run)


def test_threshold_inplace_on_expanded_tensor():
    def run(d):
        x = torch.randn(1, 6, generator=torch.Generator().manual_seed(0)).to(d).expand(6, 6)
        F.threshold(x, 0.5, -1.0, inplace=True)
        F.threshold_(x, 0.3, 7.0)
        return x.cpu()
    same(run)


@pytest.mark.parametrize("target_lengths", [[0, 0, 0], [0, 2, 1], [3, 0, 1]])
def test_ctc_loss_with_empty_targets(target_lengths):
    g = torch.Generator().manual_seed(0)
    log_probs = torch.randn(12, 3, 6, dtype=torch.float64, generator=g).log_softmax(2)
    targets = torch.randint(1, 6, (sum(target_lengths),), generator=g)
    for reduction in ("none", "mean"):
        check(lambda lp, t: F.ctc_loss(lp, t, [12, 10, 8], target_lengths, reduction=reduction), log_probs, targets,
              grad=True)


def test_ctc_loss_of_empty_log_probs_raises():
    same(lambda d: F.ctc_loss(torch.rand(0, 0, 4, device=d), torch.zeros(0, dtype=torch.long, device=d), [], []))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("call", [
    lambda t: torch.fmod(t, 2.3), lambda t: torch.remainder(t, 2.3), lambda t: torch.remainder(2.3, t),
], ids=["fmod", "remainder", "rremainder"])
def test_fmod_remainder_round_the_scalar_to_the_tensor_dtype(call, dtype):
    # CPU and CUDA compute these in the tensor's own type: the Python scalar is rounded to it first
    check(call, torch.tensor([7.3, -7.3, 0.5, 100.0]).to(dtype))


def test_half_division_truncates_the_rounded_quotient():
    # CUDA (and CPU's vectorized loop) truncate the float16 quotient: 56672 / 31.3125 rounds to 1810
    g = torch.Generator().manual_seed(0)
    a = (torch.rand(4096, generator=g) * 120000 - 60000).half()
    b = (torch.rand(4096, generator=g) * 200 - 100).half()
    b[b == 0] = 1
    a[0], b[0] = 56672.0, 31.3125
    expected = torch.from_numpy(np.trunc(a.numpy() / b.numpy()).astype(np.float16))
    actual = torch.div(a.to("tpu"), b.to("tpu"), rounding_mode="trunc").cpu()
    assert actual[0] == 1810
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
def test_lcm_wraps_as_cpu(dtype):
    # C++ takes |a / gcd * b| in int for 8- and 16-bit types, then wraps to the result type
    hi = torch.iinfo(dtype).max
    a = torch.tensor([1113 % hi, 7, 3 % hi, hi, 0]).to(dtype)
    b = torch.tensor([10701 % hi, 3, hi - 1, hi - 2, 5]).to(dtype)
    if dtype.is_signed:
        b = -b
    check(torch.lcm, a, b)


def test_complex_logaddexp_of_infinities():
    z = torch.tensor([complex(INF, 0), complex(-INF, 0), complex(-INF, 1), complex(NAN, 0), complex(3, NAN),
                      complex(1, 2), complex(2, 1)])
    w = torch.tensor([complex(INF, 0), complex(-INF, 0), complex(-INF, 2), complex(1, 0), complex(1, 1),
                      complex(0.5, -1), complex(2, -1)])
    check(torch.logaddexp, z, w)
    check(torch.logaddexp, w, z)


def test_atanh_near_minus_one():
    check_vs_float64(torch.atanh, torch.tensor([-0.99979001, -0.9999, -0.5, -0.0, 0.0, 0.3, 0.9999, 0.99979001]))
    check(torch.atanh, torch.tensor([1.0, -1.0, 2.0, NAN, -0.0]))


@pytest.mark.parametrize("fn", [torch.cosh, torch.sinh])
def test_complex_cosh_sinh_near_overflow(fn):
    z = torch.tensor([100 + 100j, 1 + 2j, -100 + 50j, 0.5 - 0.3j, 89 + 1j, -89.3 + 2j, 88.5 - 1j])
    check(fn, z)
    check(fn, torch.tensor([710 + 1j, -709.5 + 2j, 3 - 4j], dtype=torch.complex128), rtol=1e-12, atol=0)


@pytest.mark.parametrize("fn", [torch.exp, torch.exp2, torch.log10, torch.log2])
def test_complex_exp_and_log_of_non_finite_values(fn):
    # C's cases of e^(inf + i inf); scaling by ln 2 or 1 / ln 10 goes part by part (not inf * 0 = NaN)
    z = torch.tensor([complex(INF, 0), complex(-INF, 0), complex(0, 0), complex(1e20, 0), complex(-INF, 1),
                      complex(0, INF), complex(INF, INF), complex(1, 2), complex(-3, 0.5)], dtype=torch.complex128)
    parts = lambda t: torch.view_as_real(fn(t))  # noqa: E731 - infinite parts compare part by part
    check(parts, z, rtol=1e-12, atol=1e-300)
    check(parts, z.to(torch.complex64)[-2:], rtol=4e-6, atol=0)


def test_complex_pow_special_values():
    # CPU's e^(y log x): 0^y is 0 for Re y > 0, NaN for y = 0 and inf + i NaN for Re y < 0; overflow is infinite
    x = torch.tensor([0j, 0j, 0j, 0j, -501 - 501j, complex(INF, -INF), 20 + 0j, 2 + 3j, -1 + 0j, 0j])
    y = torch.tensor([0.001 + 0.001j, 0j, -1 + 0j, 2 + 1j, 501 - 501j, complex(-INF, -INF), 30 + 0j, 0.5 - 0.25j,
                      0.5 + 0j, 1j])
    check(lambda a, b: torch.view_as_real(torch.pow(a, b)), x, y)
    g = torch.Generator().manual_seed(0)
    z = torch.complex(torch.randn(200, generator=g), torch.randn(200, generator=g)) * 2
    w = torch.complex(torch.randn(200, generator=g), torch.randn(200, generator=g))
    check(torch.pow, z, w)
    check(lambda a: torch.pow(a, 2.5), z)


@pytest.mark.parametrize("exponent", [2, 0.5, 2 + 0j, 3, 2.5, -1, -2, -0.5])
def test_complex_pow_by_a_python_scalar_takes_cpus_shortcuts(exponent):
    # z ** 2 is z * z, z ** 0.5 sqrt(z), z ** -1 1 / z and so on, as CPU's kernel (not e^(y log z)): they differ
    # at infinities
    vals = [0.0, -1.0, 1.0, 2.5, INF, -INF, NAN]
    z = torch.tensor([complex(a, b) for a in vals for b in vals], dtype=torch.complex128)
    check(lambda t: torch.view_as_real(t ** exponent), z)
    check(lambda t: torch.view_as_real(torch.pow(t, exponent)), z.to(torch.complex64))
    # a 0-d tensor exponent takes the general path on CPU too
    check(lambda t, e: torch.view_as_real(torch.pow(t, e)), z, torch.tensor(complex(exponent), dtype=torch.complex128))


def test_complex_nan_to_num_replaces_each_part():
    x = torch.tensor([0.0, -0.0, INF, -INF, NAN, 1e-30, -1e30, 2.5])
    z = torch.complex(x, x.flip(0))
    for dtype in (torch.complex64, torch.complex128):
        check(torch.nan_to_num, z.to(dtype))
        check(lambda t: torch.nan_to_num(t, nan=12.0, posinf=2.0, neginf=-3.0), z.to(dtype))


def test_complex_reciprocal_divides_as_cpu():
    # NumPy's scaled division: 1 / (inf + inf i) is NaN, 1 / 0 is inf + i NaN
    vals = [0.0, -0.0, 1.0, -2.5, 1e300, INF, -INF, NAN]
    z = torch.tensor([complex(a, b) for a in vals for b in vals], dtype=torch.complex128)
    for fn in (torch.reciprocal, torch.rsqrt):
        check(lambda t: torch.view_as_real(fn(t)), z)


@pytest.mark.parametrize("fn", [torch.atan, torch.atanh])
def test_complex_atan_atanh_poles_and_infinities(fn):
    # as C's catan / catanh: +-i inf at atan's poles +-i (atanh's +-1), +-pi/2 towards infinity
    z = torch.tensor([1j, -1j, 1 + 0j, -1 + 0j, complex(0, INF), complex(INF, INF), complex(INF, 0), complex(-INF, 0),
                      complex(0, -INF), 1e20 + 1j, -1e20j, 0.5 + 0.3j, -2 + 1j, 0j, complex(-0.0, 2), 1e-30 + 1e-30j,
                      complex(NAN, INF), complex(NAN, -INF), complex(INF, NAN), complex(-INF, NAN)],
                     dtype=torch.complex128)
    check(lambda t: torch.view_as_real(fn(t)), z, rtol=1e-14, atol=1e-300)
    g = torch.Generator().manual_seed(0)
    w = torch.complex(torch.randn(500, generator=g), torch.randn(500, generator=g)) * 3
    check(fn, w)


@pytest.mark.parametrize("fn", [torch.sin, torch.cos])
def test_complex_sin_cos_on_the_imaginary_axis(fn):
    z = torch.tensor([complex(0, INF), complex(0, -1e20), complex(-0.0, INF), complex(-0.0, -INF), complex(0, 2),
                      complex(1, 2), complex(0, 0), complex(-0.0, 0.5)], dtype=torch.complex128)
    parts = lambda t: torch.view_as_real(fn(t))  # noqa: E731
    check(parts, z, rtol=1e-14, atol=1e-300)
    actual, expected = parts(z.to("tpu")).cpu(), parts(z)
    assert torch.equal(torch.signbit(actual), torch.signbit(expected))  # C's signed zeros


@pytest.mark.parametrize("fn", [torch.asin, torch.acos, torch.asinh, torch.acosh, torch.sqrt])
def test_complex_inverse_trig_infinities_and_branch_cuts(fn):
    # as C99: infinite arguments give infinite parts (not NaN); on a branch cut the sign of a zero part
    # picks the side
    z = torch.tensor([complex(0, INF), complex(INF, INF), complex(INF, 0), complex(-INF, 0), complex(1, INF),
                      complex(-INF, 1), complex(1e20, 0), complex(0, -1e20), complex(-0.0, -1.57), complex(0.0, -1.57),
                      complex(-0.0, 1.57), complex(2, 0.0), complex(2, -0.0), complex(-2, 0.0), complex(-2, -0.0),
                      complex(-4, -0.0), 0.3 + 0.2j, -0.7 - 1.1j], dtype=torch.complex128)
    check(lambda t: torch.view_as_real(fn(t)), z, rtol=1e-14, atol=1e-15)
    g = torch.Generator().manual_seed(0)
    for scale in (1e-6, 1.0, 3.0, 3e4):
        check(fn, torch.complex(torch.randn(300, generator=g), torch.randn(300, generator=g)) * scale)


def test_complex_pow_sqrt_log_exp_on_the_extremal_grid():
    # every pair of parts from {0, 1, -1, inf, -inf, nan}: C99's special cases, as CPU computes them
    parts = [0.0, 1.0, -1.0, INF, -INF, NAN]
    z = torch.tensor([complex(a, b) for a in parts for b in parts], dtype=torch.complex128)
    for fn in (torch.sqrt, torch.rsqrt, torch.log, torch.log10, torch.exp):
        check(lambda t: torch.view_as_real(fn(t)), z, rtol=1e-14, atol=1e-300)
    x, y = z.repeat_interleave(len(z)), z.repeat(len(z))
    expected, actual = torch.pow(x, y), torch.pow(x.to("tpu"), y.to("tpu")).cpu()
    assert torch.isclose(actual, expected, equal_nan=True).all()


# ------------------------------------------------------------- sequence factories into out=
@pytest.mark.parametrize("fn", [
    lambda o: torch.linspace(0, 3, 4, out=o), lambda o: torch.logspace(0, 3, 4, out=o),
    lambda o: torch.arange(4, out=o), lambda o: torch.arange(1, 9, 2, out=o),
], ids=["linspace", "logspace", "arange", "arange_step"])
@pytest.mark.parametrize("out", ["narrow", "transposed", "2x2", "wrong_numel", "empty"])
def test_sequence_into_out_keeps_its_shape(fn, out):
    # an out= with the sequence's number of elements keeps its shape and gets the sequence in logical order;
    # another is resized to 1-D (arange warns that it is)
    def run(d):
        base = torch.zeros(2, 3, device=d)
        o = {"narrow": lambda: base.narrow(1, 1, 2), "transposed": lambda: base[:, :2].t(),
             "2x2": lambda: torch.zeros(2, 2, device=d), "wrong_numel": lambda: base,
             "empty": lambda: torch.zeros(0, device=d)}[out]()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r = fn(o)
        return base.cpu(), o.cpu(), r.shape, [message_of(w) for w in caught]
    assert_equal_runs(run)


def assert_equal_runs(run):
    """run(device) gives the same tensors (exactly) and the same other values on tpu as on CPU."""
    for a, e in zip(run("tpu"), run("cpu")):
        if isinstance(e, torch.Tensor):
            assert torch.equal(a, e), (a, e)
        else:
            assert a == e


# ------------------------------------------------------------- fills through aliased elements
@pytest.mark.parametrize("fill", [lambda t: t.fill_(1.5), lambda t: t.zero_()], ids=["fill_", "zero_"])
def test_fill_of_an_internally_overlapping_view(fill):
    # one value at every alias is well defined: CPU allows it (fill_ with a tensor value still refuses)
    def run(d):
        base = torch.arange(60.0, device=d)
        fill(base.as_strided((4, 3, 2), (10, 0, 3)))
        return (base.cpu(),)
    assert_equal_runs(run)
    same(lambda d: torch.empty_strided((4, 3, 2), (10, 0, 3), device=d).fill_(torch.tensor(2.0, device=d)))


# ------------------------------------------------------------- random fills: PyTorch's bounds checks
@pytest.mark.parametrize("dtype,lo,hi", [
    (torch.bool, -1, 2), (torch.int32, -2 ** 31 - 1, 2), (torch.int8, 0, 200), (torch.uint8, -1, 5),
    (torch.int8, 5, 3), (torch.float16, -2 ** 17, 5), (torch.float32, 0, 2 ** 25), (torch.float32, -2 ** 25, 0),
    (torch.complex64, 0, 5), (torch.int64, -5, 5), (torch.bfloat16, 0, 2 ** 9),
])
def test_random_bounds(dtype, lo, hi):
    # CPU's errors and precision warnings; a valid call fills [lo, hi)
    for call in (lambda t: t.random_(lo, hi), lambda t: t.random_(hi), lambda t: torch.randint(lo, hi, t.shape, dtype=dtype, device=t.device)):
        def run(d):
            result, caught = outcome(lambda d: call(torch.empty(50, dtype=dtype, device=d)), d)
            if isinstance(result, Exception):
                return type(result).__name__, first_line(result), caught
            vals = result.cpu().to(torch.float64) if dtype != torch.complex64 else result.cpu().real.double()
            return "ok", bool(((vals >= min(lo, 0)) & (vals <= hi)).all()), caught
        assert run("tpu") == run("cpu")


@pytest.mark.parametrize("dtype,lo,hi", [
    (torch.float32, -3e38, 3e38), (torch.float16, -1e5, 1.0), (torch.float32, 2.0, 1.0), (torch.int32, 0.0, 1.0),
    (torch.float64, -1.0, 1.0),
])
def test_uniform_bounds(dtype, lo, hi):
    same(lambda d: torch.empty(5, dtype=dtype, device=d).uniform_(lo, hi).abs().le(max(abs(lo), abs(hi))))


@pytest.mark.parametrize("dtype,n", [(torch.uint8, 2 ** 8 + 1), (torch.float16, 2 ** 11 + 2), (torch.float16, 2 ** 11 + 1),
                                     (torch.int64, -1)])
def test_randperm_n_too_large_for_the_out_dtype(dtype, n):
    same(lambda d: torch.randperm(n, out=torch.empty(0, dtype=dtype, device=d), device=d).sort().values)


@pytest.mark.parametrize("call", [
    lambda d: torch.normal(torch.zeros(3, device=d), torch.tensor([1.0, -1.0, 1.0], device=d)),
    lambda d: torch.normal(0.0, torch.tensor([1.0, -1.0], device=d)),
    lambda d: torch.normal(torch.zeros(2, device=d), torch.ones(2, device=d)).abs().lt(100),
    lambda d: torch.normal(0.0, torch.ones(2, dtype=torch.complex64, device=d)),
], ids=["tensor_std", "float_mean", "valid", "complex_std"])
def test_normal_std_tensor_checked_by_the_call(call):
    same(call)  # raised by the call itself: CPU and CUDA read the smallest std on the host


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.float32])
def test_normal_of_an_empty_tensor_of_any_dtype(dtype):
    same(lambda d: torch.empty(2, 0, dtype=dtype, device=d).normal_())


# ------------------------------------------------------------- cat: legacy 1-D empties
@pytest.mark.parametrize("dim", [0, 1, 3, -1])
def test_cat_of_legacy_empties_ignores_the_dim(dim):
    same(lambda d: torch.cat([torch.zeros(0, device=d), torch.zeros(0, device=d)], dim=dim))
    same(lambda d: torch.cat([torch.zeros(0, device=d), torch.ones(2, 3, 2, 2, device=d), torch.zeros(0, device=d)], dim=dim))


# ------------------------------------------------------------- _foreach_norm of complex tensors
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("p", [0, 1, 2, 3.5, INF])
def test_foreach_norm_of_complex_tensors(dtype, p):
    # real norms of |z| (C's cabs: an infinite part wins over a NaN one), as linalg.vector_norm
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(n, dtype=dtype, generator=g) for n in (10, 700, 3)]
    xs[1][7] = complex(INF, NAN)
    xs[2][0] = complex(1.0, NAN)
    actual = [t.cpu() for t in torch._foreach_norm([x.to("tpu") for x in xs], p)]
    for a, e in zip(actual, torch._foreach_norm(xs, p)):
        assert a.dtype == e.dtype
        assert torch.allclose(a, e, rtol=1e-5, equal_nan=True), (a, e)


# ------------------------------------------------------------- foreach ops with a Scalar[] of the wrong length
@pytest.mark.parametrize("scalars", [[], [2.0, 3.0]], ids=["empty", "longer"])
@pytest.mark.parametrize("op", [torch._foreach_add, torch._foreach_add_, torch._foreach_mul, torch._foreach_div_])
def test_foreach_scalar_list_length_checked(op, scalars):
    # an empty Scalar[] stays a Scalar[] (it used to reach CPU's check as a Tensor?[])
    same(lambda d: op([torch.ones(2, device=d)], scalars))


# ------------------------------------------------------------- Python scalars that must fit self's dtype
@pytest.mark.parametrize("call", [
    lambda d: torch._foreach_add_([torch.ones(2, device=d)], 1j),
    lambda d: torch._foreach_mul_([torch.ones(2, device=d), torch.ones(2, device=d)], [2.0, 1j]),
    lambda d: torch._foreach_add_([torch.ones(2, dtype=torch.int64, device=d)], 2.5),
    lambda d: torch._foreach_div_([torch.ones(2, dtype=torch.int64, device=d)], 2),
    lambda d: torch._foreach_mul_([torch.ones(2, device=d)], 2.5),
    lambda d: torch._foreach_add([torch.ones(2, device=d)], 1j),
    lambda d: torch._foreach_lerp([torch.ones(2, device=d)], [torch.zeros(2, device=d)], 1j),
    lambda d: torch._foreach_addcdiv([torch.ones(2, device=d)], [torch.ones(2, device=d)], [torch.ones(2, device=d)], [1j]),
    lambda d: torch._foreach_addcmul_([torch.ones(2, device=d)], [torch.ones(2, device=d)], [torch.ones(2, device=d)], 0.5),
    lambda d: torch.addcdiv(torch.ones(2, device=d), torch.ones(2, device=d), torch.ones(2, device=d), value=1j),
    lambda d: torch.ones(2, device=d).addcmul_(torch.ones(2, device=d), torch.ones(2, device=d), value=1j),
    lambda d: torch.lerp(torch.ones(2, device=d), torch.zeros(2, device=d), 1j),
    lambda d: torch.lerp(torch.ones(2, device=d), torch.zeros(2, device=d), 0.25),
    lambda d: torch._foreach_addcmul([torch.ones(3, device=d)], [torch.ones(2, device=d)], [torch.ones(3, device=d)], [1j]),
    # a weight or value goes to the opmath type (float for half), which holds 70000; masked_fill's goes to half
    lambda d: torch.lerp(torch.full((2,), -3e4, dtype=torch.half, device=d), torch.zeros(2, dtype=torch.half, device=d), 7e4),
    lambda d: torch.ones(2, dtype=torch.half, device=d).addcmul_(torch.ones(2, dtype=torch.half, device=d),
                                                                  torch.ones(2, dtype=torch.half, device=d), value=7e4),
    lambda d: torch._foreach_lerp([torch.ones(2, dtype=torch.bfloat16, device=d)], [torch.zeros(2, dtype=torch.bfloat16, device=d)], 7e4),
    lambda d: torch.lerp(torch.ones(2, dtype=torch.half, device=d), torch.zeros(2, dtype=torch.half, device=d), 1e39),
    lambda d: torch.ones(2, dtype=torch.half, device=d).masked_fill_(torch.ones(2, dtype=torch.bool, device=d), 7e4),
], ids=["foreach_add_complex", "foreach_mul_list", "foreach_add_int_float", "foreach_div_int", "foreach_mul_ok",
        "foreach_add_outplace_ok", "foreach_lerp", "foreach_addcdiv_list", "foreach_addcmul_ok", "addcdiv",
        "addcmul_", "lerp", "lerp_ok", "foreach_shapes_before_value", "lerp_half_weight_beyond_half",
        "addcmul_half_value_beyond_half", "foreach_lerp_bf16", "lerp_half_weight_beyond_float", "masked_fill_half"])
def test_python_scalars_checked_against_self(call):
    same(call)  # CPU's errors (not a lowering error), or its values


# ------------------------------------------------------------- complex inputs that CPU's and CUDA's kernels refuse
def _z(d, n=3):
    return torch.tensor([1 + 2j, -0.5j, 3.0][:n], dtype=torch.complex128, device=d)


@pytest.mark.parametrize("call", [
    lambda d: torch.clamp(_z(d), 0, 1),
    lambda d: torch.clamp_max(torch.ones(3, device=d), 1j),
    lambda d: torch.relu(_z(d)),
    lambda d: F.hardtanh(_z(d)),
    lambda d: torch.maximum(torch.ones(3, dtype=torch.float64, device=d), _z(d)),
    lambda d: torch.max(_z(d), _z(d)),
    lambda d: torch.fmin(_z(d), _z(d)),
    lambda d: torch.ceil(_z(d)),
    lambda d: torch.floor(_z(d)),
    lambda d: torch.trunc(_z(d)),
    lambda d: torch.sign(_z(d)),
    lambda d: torch.signbit(_z(d)),
    lambda d: torch.argmax(_z(d)),
    lambda d: torch.max(_z(d), 0),
    lambda d: torch._foreach_sign([_z(d)]),
    lambda d: torch._foreach_trunc_([_z(d)]),
    lambda d: torch._foreach_clamp_min([torch.ones(3, dtype=torch.float64, device=d)], 1j),
    lambda d: torch._foreach_maximum([torch.ones(3, dtype=torch.float64, device=d)], [1j]),
    lambda d: torch.atan2(torch.ones(3, dtype=torch.float64, device=d), torch.ones(3, dtype=torch.float64, device=d),
                          out=torch.empty(3, dtype=torch.complex128, device=d)),  # a complex out= is no input
], ids=["clamp", "clamp_max_scalar", "relu", "hardtanh", "maximum", "max_binary", "fmin", "ceil", "floor", "trunc",
        "sign", "signbit", "argmax", "max_dim", "foreach_sign", "foreach_trunc_", "foreach_clamp_min_scalar",
        "foreach_maximum_scalar_list", "atan2_complex_out"])
def test_complex_inputs_refused_with_cpus_error(call):
    same(call)


@pytest.mark.parametrize("call", [
    lambda d: torch.erf(_z(d)),
    lambda d: torch.special.i0e(_z(d)),
    lambda d: torch.atan2(_z(d), _z(d)),
    lambda d: torch.lt(_z(d), _z(d)),
    lambda d: torch.xlogy(_z(d), _z(d)),
    lambda d: torch.logit(_z(d)),
    lambda d: F.mse_loss(_z(d), _z(d)),
    lambda d: F.avg_pool1d(_z(d).reshape(1, 1, 3), 2),
    lambda d: F.batch_norm(_z(d).reshape(3, 1), None, None, training=True),
    lambda d: torch._foreach_erf([_z(d)]),
    lambda d: torch._foreach_round([_z(d)]),
    lambda d: torch.aminmax(_z(d)),
], ids=["erf", "special_i0e", "atan2", "lt", "xlogy", "logit", "mse_loss", "avg_pool1d", "batch_norm", "foreach_erf",
        "foreach_round", "aminmax"])
def test_complex_inputs_refused_as_a_kernel_without_the_dtype(call):
    # CPU names its kernel ("erf_vml_cpu"); tpu names the op, with the same error type
    with pytest.raises(NotImplementedError) as cpu:
        call("cpu")
    with pytest.raises(NotImplementedError, match="not implemented for 'ComplexDouble'") as tpu:
        call("tpu")
    assert "not implemented for 'ComplexDouble'" in str(cpu.value)
    assert "lowering" not in str(tpu.value)


def test_foreach_maximum_of_complex_lists_refused_as_cuda():
    # CUDA's per-tensor kernel of _foreach_maximum.List is clamp_min (CPU's is maximum: "maximum_cpu" ...)
    with pytest.raises(NotImplementedError, match="clamp is not supported for complex types"):
        torch._foreach_maximum([_z("tpu")], [_z("tpu")])


# ------------------------------------------------------------- foreach checks CPU makes tensor by tensor
@pytest.mark.parametrize("call", [
    lambda d: torch._foreach_sub([torch.ones(2, dtype=torch.float64, device=d)], True),
    lambda d: torch._foreach_sub([torch.ones(2, device=d)], [2.0]) and torch._foreach_sub([torch.ones(2, device=d)], [True]),
    lambda d: torch._foreach_sub_([torch.ones(2, device=d)], True),
    lambda d: torch._foreach_sub([torch.ones(2, device=d)], 2),
    lambda d: torch.addcdiv(*[torch.ones(2, dtype=torch.bool, device=d)] * 3),
    # per tensor: addcdiv's integer division refused before the shapes of a later tensor are checked
    lambda d: torch._foreach_addcdiv([torch.ones(3, 3, dtype=torch.int16, device=d)] * 2,
                                     [torch.ones(3 - i, 1, dtype=torch.int16, device=d) for i in range(2)],
                                     [torch.ones(1, 3 - i, dtype=torch.int16, device=d) for i in range(2)], [1, 2]),
    lambda d: torch._foreach_addcdiv([torch.ones(3, 3, dtype=torch.int16, device=d)] * 2,
                                     [torch.ones(3 - i, 1, dtype=torch.int16, device=d) for i in range(2)],
                                     [torch.ones(1, 3 - i, dtype=torch.int16, device=d) for i in range(2)],
                                     torch.tensor([1.0, 2.0])),
    lambda d: torch._foreach_addcmul([torch.ones(3, 3, device=d)] * 2,
                                     [torch.ones(3 - i, 1, device=d) for i in range(2)],
                                     [torch.ones(1, 3 - i, device=d) for i in range(2)], torch.tensor([1.0, 2.0])),
    lambda d: torch._foreach_sub([torch.ones(2, dtype=torch.bool, device=d)], [torch.ones(2, dtype=torch.bool, device=d)]),
    lambda d: torch._foreach_sub_([torch.ones(2, device=d)], [torch.ones(2, dtype=torch.bool, device=d)]),
    # the shapes of a pair are checked before its dtypes, and the lists' lengths before either
    lambda d: torch._foreach_clamp_min([torch.zeros(2, 3, dtype=torch.complex64, device=d)],
                                       [torch.ones(3, 3, dtype=torch.complex64, device=d)]),
    lambda d: torch._foreach_clamp_max([torch.zeros(2, dtype=torch.complex64, device=d)], []),
], ids=["sub_bool_scalar", "sub_bool_scalar_list", "sub_inplace_bool", "sub_int_ok", "addcdiv_bool",
        "foreach_addcdiv_int_first", "foreach_addcdiv_tensor_scalars", "foreach_addcmul_shapes", "sub_bool_lists",
        "sub_inplace_bool_list", "clamp_min_shapes_first", "clamp_max_lengths_first"])
def test_foreach_checks_per_tensor(call):
    same(call)


def test_foreach_scalar_tensor_checked_as_cuda():
    xs = [torch.ones(2, 2, device="tpu")] * 2
    with pytest.raises(RuntimeError, match="scalar tensor expected to be on tpu:0 but is on cpu"):
        torch._foreach_add(xs, torch.tensor(1.0), alpha=1.0)
    with pytest.raises(RuntimeError, match="scalar tensor expected to be 0 dim but it has 1 dimensions and 2 elements"):
        torch._foreach_mul(xs, torch.tensor([1.0, 1.0], device="tpu"))
    with pytest.raises(RuntimeError, match="scalar tensor expected to be 0 dim"):  # before the devices of the list
        torch._foreach_mul([torch.ones(2, 2), xs[0]], torch.tensor([1.0, 1.0], device="tpu"))
    got = torch._foreach_add(xs, torch.tensor(2.0, device="tpu"), alpha=2.0)
    assert all(torch.equal(g.cpu(), torch.full((2, 2), 5.0)) for g in got)
    for op in (torch._foreach_mul, torch._foreach_div):  # these also take a CPU scalar tensor, as on CUDA
        got = op(xs, torch.tensor(4.0))
        assert all(torch.equal(g.cpu(), op([torch.ones(2, 2)], torch.tensor(4.0))[0]) for g in got)


# ------------------------------------------------------------- complex gradients are conjugated
@pytest.mark.parametrize("fn", [torch.sigmoid, torch.tanh, lambda x: torch._foreach_sigmoid([x])[0],
                                lambda x: torch._foreach_tanh([x])[0]], ids=["sigmoid", "tanh", "foreach_sigmoid",
                                                                              "foreach_tanh"])
def test_complex_backward_of_activations(fn):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, dtype=torch.complex128, generator=g)
    grad = torch.randn(6, dtype=torch.complex128, generator=g)
    grads = []
    for d in ("cpu", "tpu"):
        leaf = x.clone().to(d).requires_grad_()
        fn(leaf).backward(grad.to(d))
        grads.append(leaf.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_inf_norm_gradient_reaches_the_largest_element(dtype):
    # the gradient's mask compares abs(x) with the forward's norm: both programs must round |z| alike
    g = torch.Generator().manual_seed(0)
    for shape, dim in [((5, 10, 5), 2), ((4, 5), 1), ((3, 5), 1), ((64, 33), 1), ((300, 7), 0)]:
        x = torch.randn(shape, dtype=dtype, generator=g) * 5
        grads = []
        for d in ("cpu", "tpu"):
            leaf = x.clone().to(d).requires_grad_()
            torch.linalg.vector_norm(leaf, INF, dim=dim).sum().backward()
            grads.append(leaf.grad.cpu())
        torch.testing.assert_close(grads[1], grads[0], rtol=1e-6, atol=1e-6)


def test_complex64_abs_is_correctly_rounded():
    x = torch.randn(10000, dtype=torch.complex64, generator=torch.Generator().manual_seed(0)) * 5
    assert torch.equal(x.to("tpu").abs().cpu(), x.abs())  # CPU's hypotf rounds once, from double


@pytest.mark.parametrize("fn,error", [(torch.relu, "clamp is not supported for complex types"),
                                      (torch.ceil, "ceil is not supported for complex inputs")], ids=["relu", "ceil"])
def test_complex_refusals_through_torch_compile(fn, error):
    with pytest.raises(NotImplementedError, match=error):
        torch.compile(fn, backend="tpu")(_z("tpu"))


def test_complex_sigmoid_gradient_through_torch_compile():
    x = torch.randn(4, 5, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))
    leaf = x.to("tpu").requires_grad_()
    got = torch.autograd.grad(torch.compile(lambda t: torch.sigmoid(t).real.sum(), backend="tpu")(leaf), leaf)[0]
    cpu = x.clone().requires_grad_()
    torch.testing.assert_close(got.cpu(), torch.autograd.grad(torch.sigmoid(cpu).real.sum(), cpu)[0])


# ------------------------------------------------------------- float64 special functions to float64 accuracy
# CPU's float64 kernels (Cephes) are within a few ulp of the exact values; these were computed to float32 accuracy
# (erf to 6e-9, erfc/erfcx/erfinv/log_ndtr to 1e-7, K0/K1 to 3e-8, I0/I1 to 2e-11), log1p to 3e-14. mpmath is the
# reference.
def _mp(name):
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 80  # ndtri's reference, erfinv(2p - 1), needs 2p - 1 to more digits than float64 has
    return {
        "erf": (torch.erf, mpmath.erf, np.linspace(-6, 6, 241)),
        "erfc": (torch.erfc, mpmath.erfc, np.linspace(-6, 26.5, 261)),
        "erfcx": (torch.special.erfcx, lambda v: mpmath.exp(v * v) * mpmath.erfc(v), np.linspace(-5, 60, 261)),
        "erfinv": (torch.erfinv, mpmath.erfinv, np.concatenate([np.linspace(-0.999, 0.999, 201),
                                                                [1e-300, 1e-10, 0.5, 1 - 1e-12, 1 - 2**-53]])),
        "ndtri": (torch.special.ndtri, lambda v: mpmath.sqrt(2) * mpmath.erfinv(2 * v - 1),
                  np.concatenate([np.linspace(0.001, 0.999, 201), [1e-30, 1e-20, 0.5 - 1e-12, 1 - 1e-15]])),
        "log_ndtr": (torch.special.log_ndtr, lambda v: mpmath.log(mpmath.ncdf(v)), np.linspace(-40, 5, 181)),
        "k0": (torch.special.modified_bessel_k0, lambda v: mpmath.besselk(0, v), np.linspace(0.01, 60, 241)),
        "k1e": (torch.special.scaled_modified_bessel_k1, lambda v: mpmath.besselk(1, v) * mpmath.exp(v),
                np.linspace(0.01, 60, 241)),
        "i0": (torch.special.i0, lambda v: mpmath.besseli(0, v), np.linspace(-60, 60, 241)),
        "i1e": (torch.special.i1e, lambda v: mpmath.besseli(1, v) * mpmath.exp(-abs(v)), np.linspace(-60, 60, 241)),
        # XLA CPU's own float64 log1p is 120 ulp off near x = -0.41
        "log1p": (torch.log1p, mpmath.log1p, np.concatenate([np.linspace(-0.999, 3, 401), np.linspace(-0.4142, -0.4, 101),
                                                              [1e-300, -1e-17, 1e-10, 1e300]])),
    }[name]


@pytest.mark.parametrize("name", ["erf", "erfc", "erfcx", "erfinv", "ndtri", "log_ndtr", "k0", "k1e", "i0", "i1e",
                                  "log1p"])
def test_float64_special_functions_match_mpmath(name):
    fn, ref, xs = _mp(name)
    x = torch.tensor(xs, dtype=torch.float64)
    mpf = pytest.importorskip("mpmath").mpf
    want = torch.tensor([float(ref(mpf(v))) for v in xs.tolist()], dtype=torch.float64)
    assert_close(fn(x.to("tpu")), want, rtol=2e-14, atol=0)
    # the float32 kernels keep their float32 accuracy
    x32 = x.float()
    want32 = torch.tensor([float(ref(mpf(v))) for v in x32.double().tolist()], dtype=torch.float64)
    assert_close(fn(x32.to("tpu")).double(), want32, rtol=2e-6, atol=1e-30)


def test_float64_gelu_gradient_through_torch_compile():
    x = torch.linspace(-8, 8, 101, dtype=torch.float64, requires_grad=True)
    xt = x.detach().to("tpu").requires_grad_()
    f = torch.compile(lambda v: F.gelu(v).sum(), backend="tpu")
    f(xt).backward()
    F.gelu(x).sum().backward()
    assert_close(xt.grad, x.grad, rtol=1e-14, atol=1e-16)


# ------------------------------------------------------------- found by test_scatter_gather, test_segment_reductions,
# nn/test_pooling, nn/test_embedding and nn/test_convolution
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("call", [
    lambda d, dt: torch.zeros(3, dtype=dt, device=d).scatter_reduce(
        0, torch.tensor([0, 0, 2], device=d), torch.tensor([float("nan"), 1, 2], dtype=dt, device=d), "amax"),
    lambda d, dt: torch.zeros(3, dtype=dt, device=d).scatter_reduce(
        0, torch.tensor([0, 2, 2], device=d), torch.tensor([-1, 5, float("nan")], dtype=dt, device=d), "amin"),
    lambda d, dt: torch.ones(3, 2, dtype=dt, device=d).index_reduce(
        0, torch.tensor([1, 1], device=d), torch.tensor([[float("nan"), 3], [0, 4]], dtype=dt, device=d), "amax"),
    lambda d, dt: torch.tensor([1, float("nan"), 3], dtype=dt, device=d).scatter_reduce(
        0, torch.tensor([1, 1], device=d), torch.tensor([7, 2], dtype=dt, device=d), "amin"),
], ids=["scatter_amax", "scatter_amin", "index_amax", "nan_in_self"])
def test_scatter_reduce_extremes_propagate_nan(call, dtype):
    same(lambda d: call(d, dtype))


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_mean_of_complex(include_self):
    same(lambda d: torch.zeros(3, 2, dtype=torch.complex64, device=d).scatter_reduce(
        0, torch.tensor([[0, 1], [0, 1], [2, 1]], device=d),
        torch.tensor([[1 + 2j, 3j], [3j, 1], [4, -1j]], dtype=torch.complex64, device=d), "mean",
        include_self=include_self))


def _data(d):
    return torch.arange(1., 7., device=d)


@pytest.mark.parametrize("call", [
    lambda d: torch._segment_reduce(_data(d), "amax", lengths=torch.tensor([2, 3, 0, 1], device=d), axis=0, unsafe=True),
    lambda d: torch._segment_reduce(_data(d), "amin", lengths=torch.tensor([2, 3, 0, 1], device=d), axis=0, unsafe=True),
    lambda d: torch._segment_reduce(_data(d), "sum", lengths=torch.tensor([0, 2, 3, 0], device=d), axis=0),
    lambda d: torch._segment_reduce(_data(d), "sum", lengths=torch.tensor([-1, 2, 3, 2], device=d), axis=0),
    lambda d: torch._segment_reduce(_data(d), "max", lengths=torch.tensor([1, 2, 3], device=d), axis=0),
    lambda d: torch._segment_reduce(_data(d).reshape(2, 3), "sum", lengths=torch.tensor([[1, 2], [3, 1]], device=d),
                                    axis=1),
], ids=["amax", "amin", "lengths_short", "lengths_negative", "lengths_right", "lengths_rows_2d"])
def test_segment_reduce_names_and_length_checks(call):
    same(call)


@pytest.mark.parametrize("call", [
    lambda d: F.fractional_max_pool3d(torch.randn(2, 4, 5, 4, 4, device=d), 2, output_size=2,
                                      _random_samples=torch.rand(1, 4, 3, device=d)),
    lambda d: F.fractional_max_pool3d(torch.randn(2, 4, 5, 4, 4, device=d), 2, output_size=2,
                                      _random_samples=torch.rand(2, 3, 3, device=d)),
    lambda d: F.fractional_max_pool3d(torch.randn(2, 4, 5, 4, 4, device=d), 2, output_size=2,
                                      _random_samples=torch.rand(2, 4, 2, device=d)),
    lambda d: F.fractional_max_pool3d(torch.arange(320.).reshape(4, 5, 4, 4).to(d).cos(), 2, output_size=2,
                                      _random_samples=torch.full((1, 4, 3), 0.5, device=d)),
    lambda d: F.adaptive_avg_pool2d(torch.arange(16, device=d).view(1, 4, 4).int(), 2),
    lambda d: F.adaptive_avg_pool1d(torch.arange(16, device=d).view(1, 4, 4).to(torch.uint8), 2),
    lambda d: F.adaptive_max_pool2d(torch.arange(16, device=d).view(1, 4, 4).long(), 2),
    lambda d: F.adaptive_avg_pool2d(torch.zeros(1, 4, 4, dtype=torch.bool, device=d), 2),
    lambda d: torch.embedding_bag(torch.zeros(2, 6, device=d), torch.ones(2, 1, 1, 6, 6, dtype=torch.long, device=d),
                                  torch.zeros(2, dtype=torch.long, device=d)),
    lambda d: torch.embedding_bag(torch.zeros(2, 6, device=d), torch.ones(4, dtype=torch.long, device=d),
                                  torch.zeros(2, 2, dtype=torch.long, device=d)),
    lambda d: torch.embedding_bag(torch.zeros(2, 6, 2, device=d), torch.ones(4, dtype=torch.long, device=d),
                                  torch.zeros(2, dtype=torch.long, device=d)),
], ids=["frac3d_batch", "frac3d_channels", "frac3d_three", "frac3d_unbatched", "adaptive_avg_int", "adaptive_avg1d_u8",
        "adaptive_max_long", "adaptive_avg_bool", "bag_5d_input", "bag_2d_offsets", "bag_3d_weight"])
def test_pooling_and_bag_input_checks(call):
    same(call)


@pytest.mark.parametrize("call", [
    lambda d: F.conv2d(torch.randn(2, 4, 5, 5, device=d), torch.randn(9, 2, 2, 2, device=d), groups=2),
    lambda d: F.conv2d(torch.randn(2, 4, 5, 5, device=d), torch.randn(8, 4, 2, 2, device=d), torch.randn(7, device=d)),
    lambda d: F.conv2d(torch.randn(2, 4, 5, 5, device=d), torch.randn(0, 4, 2, 2, device=d)),
    lambda d: F.conv_transpose2d(torch.randn(2, 4, 5, 5, device=d), torch.randn(3, 4, 2, 2, device=d)),
    lambda d: F.conv_transpose2d(torch.randn(2, 4, 5, 5, device=d), torch.randn(4, 4, 2, 2, device=d),
                                 torch.randn(3, device=d)),
    lambda d: F.conv1d(torch.randn(2, 0, 15, device=d), torch.randn(8, 0, 2, device=d), stride=2),
    lambda d: F.conv2d(torch.randn(2, 0, 5, 5, device=d), torch.randn(9, 0, 2, 2, device=d), torch.randn(9, device=d)),
    lambda d: F.conv2d(torch.randn(0, 6, 5, 5, device=d), torch.randn(9, 2, 2, 2, device=d), groups=3),
], ids=["weight_not_divisible_by_groups", "bias_size", "no_output_channels", "transposed_channels",
        "transposed_bias_size", "no_input_channels", "no_input_channels_bias", "empty_batch_groups"])
def test_convolution_shape_checks_and_empty_channels(call):
    same(call)


@pytest.mark.parametrize("shapes", [((2, 0, 15), (8, 0, 2)), ((0, 4, 15), (8, 4, 2))], ids=["channels", "batch"])
def test_convolution_backward_of_empty_inputs(shapes):
    def grads(d):
        x = torch.randn(*shapes[0], device=d, requires_grad=True)
        w = torch.randn(*shapes[1], device=d, requires_grad=True)
        b = torch.randn(shapes[1][0], device=d, requires_grad=True)
        (F.conv1d(x, w, b, stride=2) * 2).sum().backward()
        return x.grad, w.grad, b.grad
    same(grads)
    x, w, b = torch.compile(grads, backend="tpu")("tpu")
    assert_close((x, w, b), grads("cpu"))


@pytest.mark.parametrize("mode,padding_idx,weights,sparse", [
    ("sum", None, False, False), ("mean", 1, False, False), ("sum", 1, True, False), ("max", None, False, False),
    ("sum", None, False, True), ("mean", 1, False, True), ("sum", 1, True, True)])  # (PyTorch has no sparse max)
def test_embedding_bag_gradient_dense_and_sparse(mode, padding_idx, weights, sparse):
    def grad(d):
        torch.manual_seed(0)
        bag = torch.nn.EmbeddingBag(5, 3, mode=mode, sparse=sparse, padding_idx=padding_idx).to(d)
        idx, off = torch.tensor([3, 1, 1, 4, 4, 0], device=d), torch.tensor([0, 2, 2], device=d)
        psw = torch.arange(1., 7., device=d) if weights else None
        (bag(idx, off, per_sample_weights=psw) * torch.arange(9., device=d).reshape(3, 3)).sum().backward()
        assert bag.weight.grad.is_sparse == sparse
        return bag.weight.grad.to_dense()
    same(grad)


# ------------------------------------------------------------- found by test_spectral_ops and nn/test_pooling
@pytest.mark.parametrize("fn", [torch.fft.hfft, torch.fft.irfft, torch.fft.fft])
def test_complex32_fft_results_are_half(fn):
    x = torch.randn(64, dtype=torch.complex64).to(torch.complex32)  # CPU has no complex32 FFT; CUDA has
    want = fn(x.to(torch.complex64))
    got = fn(x.to("tpu"))
    assert got.dtype == (torch.float16 if fn is not torch.fft.fft else torch.complex32)
    assert_close(got.to(want.dtype), want, rtol=2e-3, atol=2e-3 * want.abs().max().item())


def test_unbatched_channels_last_3d_max_pool_keeps_the_layout():
    def pool(d):
        x = torch.arange(7 * 15 * 12 * 13.).reshape(1, 7, 15, 12, 13).cos().to(d)
        x = x.contiguous(memory_format=torch.channels_last_3d).squeeze(0).requires_grad_()
        out, idx = F.max_pool3d(x, (5, 6, 7), return_indices=True)
        out.backward(torch.ones_like(out))
        return out, idx, x.grad
    cpu, tpu = pool("cpu"), pool("tpu")
    assert [t.stride() for t in tpu] == [t.stride() for t in cpu]
    assert tpu[0].stride() == (1, 14, 7, 7)  # the results are channels_last_3d once unsqueezed, as on CPU and CUDA
    assert_close(tpu, cpu)


# ------------------------------------------------------------- found by test_torch (TestTorchDeviceType)
def test_logcumsumexp_of_two_infinities_is_infinite():
    inf, nan = float("inf"), float("nan")
    same(lambda d: torch.tensor([-inf, -inf, 1., 1., inf, inf, nan, 1.], device=d).logcumsumexp(0))


@pytest.mark.parametrize("shape,dim", [((100, 100), 1), ((100, 100), 0), ((3, 257, 2), 1), ((1000,), 0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_cummax_cummin_of_long_dims(shape, dim, dtype):
    # a variadic reduce_window crashed XLA CPU's compiler from 100 elements on
    def both(d):
        x = (torch.arange(torch.Size(shape).numel()).reshape(shape) * 7 % 5).to(dtype)
        if dtype.is_floating_point:
            x.view(-1)[::37] = float("nan")
        x = x.to(d)
        return torch.cummax(x, dim) + torch.cummin(x, dim)
    same(both)


def test_masked_scatter_with_too_few_source_elements():
    mask = [0, 0, 0, 0, 1, 0, 1, 0, 1, 0]

    def scatter(d, n):
        out = torch.arange(10., device=d).masked_scatter_(torch.tensor(mask, dtype=torch.bool, device=d),
                                                          torch.arange(n, dtype=torch.float32, device=d))
        return out.cpu()  # a host sync: the device-side check raises here
    same(lambda d: scatter(d, 2))
    same(lambda d: scatter(d, 0))
    same(lambda d: scatter(d, 3))


def test_cummax_of_a_long_dim_through_torch_compile():
    x = (torch.arange(10000.).reshape(100, 100) * 7 % 5)
    values, indices = torch.compile(lambda v: torch.cummax(v, 1), backend="tpu")(x.to("tpu"))
    want = torch.cummax(x, 1)
    assert_close((values, indices), tuple(want))


def _i(d):
    return torch.tensor([2, 1, 0], device=d)


@pytest.mark.parametrize("call", [
    lambda x: x.index_add_(0, x, x.clone()),
    lambda x: x.index_add_(0, x.clone(), x),
    lambda x: x.index_copy_(0, x, x.clone()),
    lambda x: x.put_(x, x.clone()),
    lambda x: x.scatter_(0, x, x.clone()),
    lambda x: x.scatter_(0, x.clone(), x),
    lambda x: x.scatter_add_(0, x, x.clone()),
    lambda x: x.scatter_reduce_(0, x.clone(), x, "sum"),
    lambda x: x.index_fill_(0, x, 5),
    lambda x: x[:2].index_add_(0, x[1:2].clone(), x[1:2]),
    lambda x: x.index_put_((x,), torch.tensor(1, device=x.device)),
    lambda x: x.__setitem__(x[:2], 2),
    lambda x: torch.ops.aten.index.Tensor_out(x, [x.clone()], out=x),
    # no alias: these run
    lambda x: x.index_add_(0, x.clone(), x.clone()),
    lambda x: x.scatter_(0, x.clone(), 3),
    lambda x: x.masked_scatter_(x > 0, x),
    lambda x: torch.index_add(x, 0, x.clone(), x.clone(), out=x),
    lambda x: x.index_put_((x.clone(),), torch.tensor(1, device=x.device)),
    lambda x: torch.ops.aten.index.Tensor_out(x, [x], out=x.clone()),
], ids=["index_add_index", "index_add_source", "index_copy", "put", "scatter_index", "scatter_src", "scatter_add",
        "scatter_reduce", "index_fill", "index_add_view", "index_put_index", "setitem_index", "index_out_self",
        "index_add_clones", "scatter_value", "masked_scatter_self", "index_add_out_self", "index_put_clone",
        "index_out"])
def test_in_place_scatters_refuse_an_index_or_source_aliasing_self(call):
    same(lambda d: call(_i(d)))


def test_put_without_accumulate_is_not_deterministic():
    def put(d, accumulate):
        return torch.zeros(3, device=d).put_(torch.tensor([0, 0], device=d), torch.tensor([0., 1.], device=d),
                                             accumulate=accumulate)
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        same(lambda d: put(d, False))
        same(lambda d: put(d, True))
    finally:
        torch.use_deterministic_algorithms(was)



def test_is_set_to_compares_storage_and_geometry():
    x = torch.arange(4, device="tpu")
    assert x.is_set_to(x.view(4)) and x.is_set_to(x)
    assert not x.is_set_to(x[1:]) and not x.is_set_to(x.clone()) and not x.is_set_to(x.view(2, 2))


@pytest.mark.parametrize("call", [
    lambda x: x.__ilshift__(2),
    lambda x: x.__irshift__(1),
    lambda x: x.__ilshift__(torch.tensor([1, 0, 2, 3], device=x.device)),
    lambda x: x.__irshift__(torch.tensor(1, device=x.device)),
    lambda x: x.float().__ilshift__(1),                                   # CPU's NotImplementedError
], ids=["ilshift", "irshift", "ilshift_tensor", "irshift_0d", "float"])
def test_in_place_shift_operators(call):
    def run(d):
        x = torch.tensor([5, -3, 7, 1], device=d)
        y = call(x)
        assert y is x or y.dtype != x.dtype
        return x
    same(run)


@pytest.mark.parametrize("call", [
    lambda x, d: x.masked_fill_(torch.tensor([[True, False, True]] * 4, device=d), 2.),
    lambda x, d: x.masked_fill_(torch.tensor([[True], [False], [False], [False]], device=d), 2.),  # one row
    lambda x, d: x.masked_fill_(torch.tensor([False, True, False], device=d), torch.tensor(-1, device=d)),
    lambda x, d: x.index_fill_(1, torch.tensor([0, 2], device=d), 3.),
    lambda x, d: x.index_fill_(0, torch.tensor([3], device=d), 3.),
    lambda x, d: x.index_put_((torch.tensor([1], device=d),), torch.tensor(5., device=d)),
    lambda x, d: x.index_put_((torch.tensor([1, 2, 2], device=d),), torch.tensor([1., 2., 4.], device=d),
                              accumulate=True),                          # each aliased element adds all
    lambda x, d: x.index_put_((torch.tensor([0, 3], device=d), torch.tensor([2, 0], device=d)),
                              torch.tensor([7., 8.], device=d)),
    lambda x, d: x.__setitem__(torch.tensor([True, False, True, False], device=d), 9.),
    lambda x, d: x.__setitem__((slice(None), torch.tensor([1], device=d)), 6.),
], ids=["masked_fill", "masked_fill_one_row", "masked_fill_tensor", "index_fill", "index_fill_rows", "index_put",
        "index_put_accumulate", "index_put_pairs", "setitem_mask", "setitem_column"])
def test_writes_into_an_expanded_self_warn_and_write_the_selected_elements(call):
    def run(d):
        base = torch.arange(3, device=d, dtype=torch.float32).unsqueeze(0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call(base.expand(4, 3), d)
        assert any("on expanded tensors is deprecated" in str(w.message) for w in caught)
        return base
    same(run)

@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.complex64, torch.bool])
def test_deterministic_resize_fills_the_new_elements(dtype):
    def grow(d):  # the kept elements keep their values; the new ones read as NaN (integers: their maximum)
        x = torch.tensor([1, 0], device=d, dtype=dtype)
        x.resize_(5)
        y = torch.ones(4, device=d, dtype=dtype)
        y.resize_(2)
        y.resize_(4)  # within the old storage: nothing new to fill
        return x, y
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        same(grow)
    finally:
        torch.use_deterministic_algorithms(was)


def test_ldexp_scales_by_powers_of_two_beyond_the_mantissa_type():
    # an integer exponent scales exactly (no power of two is formed in the narrow type), as CPU
    m = torch.tensor([-2.0, 2.0**-10, 1.5, INF, -INF, NAN, -0.0, 3.0])
    e = torch.tensor([-25, 20, 3, -160, -30, 4, 7, 13])
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        check(torch.ldexp, m.to(dtype), e)
    check(torch.ldexp, m.to(torch.float16), e.int())
    assert torch.ldexp(torch.tensor([2.0**-10], dtype=torch.half, device="tpu"),
                       torch.tensor([20], device="tpu")).item() == 1024.0
    check(torch.ldexp, torch.tensor([3, -1, 0]), torch.tensor([2, 1, 5]))  # integers: float results
    # complex: CPU forms 2^other as a complex power (inexact, NaN for infinite parts); finite values agree
    check(torch.ldexp, torch.complex(m[:3], m[-3:]).to(torch.complex128), e[:3], rtol=1e-14, atol=0)
    # a floating exponent: self * 2^other, with gradients
    check(torch.ldexp, torch.randn(4, 3, dtype=torch.float64), torch.randn(3, dtype=torch.float64), grad=True)
    x = torch.tensor([1.0, 2.0, 3.0], device="tpu")
    x.ldexp_(torch.tensor([1, 2, 3], device="tpu"))
    assert x.cpu().tolist() == [2.0, 8.0, 24.0]


@pytest.mark.parametrize("call", [
    lambda d: torch.ops.aten.reflection_pad1d(torch.randn(3, 3, 10, 10, device=d), (2, 2)),
    lambda d: torch.ops.aten.replication_pad1d(torch.randn(3, 3, 10, 10, device=d), (2, 2)),
    lambda d: torch.ops.aten.reflection_pad2d(torch.randn(3, 3, 3, 10, 10, device=d), (2, 2, 2, 2)),
    lambda d: torch.ops.aten.reflection_pad3d(torch.randn(2, 3, 3, 3, 4, 4, device=d), (1, 1, 1, 1, 1, 1)),
    lambda d: torch.nn.ReflectionPad2d(2)(torch.randn(3, 0, 10, 10, device=d)),
    lambda d: torch.nn.ReplicationPad3d(1)(torch.randn(0, 2, 3, 3, 3, device=d)),
    lambda d: torch.nn.ReflectionPad1d(2)(torch.arange(60.0, device=d).reshape(2, 3, 10)),
], ids=["reflect1d_4d", "replicate1d_4d", "reflect2d_5d", "reflect3d_6d", "empty_channels", "empty_batch", "ok"])
def test_padding_ranks_checked(call):
    same(call)  # CPU's "Expected 2D or 3D (batch mode) tensor ..." (not a lowering error), or its values

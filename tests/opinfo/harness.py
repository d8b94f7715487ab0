"""Runs one OpInfo (torch.testing._internal.common_methods_invocations.op_db) on tpu and on CPU and
compares them. CPU PyTorch is the oracle; the samples are generated on CPU and copied to tpu, so both
devices see the same values.

A *case* is (op, variant, dtype); variants are
  forward   op(sample) for each dtype of TARGET_DTYPES the op supports on CPU
  backward  gradients of every differentiable input (each of BACKWARD_DTYPES, op.supports_autograd)
  inplace   op.inplace_variant: the result and the mutated input (float32, else the first target dtype)
  out       op(sample, out=...) where op.supports_out: the result and the out tensors (same dtype)
  error     op.error_inputs("cpu"): tpu must raise an exception of the type CPU raises (dtype "-")
Every sample of a case must agree for it to pass: same result structure, tensors on tpu with CPU's
dtypes and shapes, values within DEFAULT_TOL of the result dtype (or a TOL_OVERRIDES entry). Three
refinements keep the oracle honest without loosening it: META_ONLY ops (random, uninitialized)
compare metadata only; TIE_INDEX_OPS (sort, topk, ...) accept any indices that select CPU's values;
a value mismatch (forward or gradient) passes when tpu is as close to the op's float64 (complex128) result as CPU is.
Statuses:
  pass / fail (detail: the first failing sample and the first line of its error or mismatch) /
  cpu-fallback (fails natively, passes under torch_tpu.cpu_fallback(); detail names the aten ops that
  fell back) / not-supported-on-cpu (CPU PyTorch lacks the dtype) / no-samples (the OpInfo generated
  none that CPU accepts) / crash, timeout (recorded by run.py when the worker dies or hangs).
"""
import collections
import os
import contextlib
import itertools
import re
import time

import torch
import torch_tpu
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._python_dispatch import TorchDispatchMode
from torch_tpu import metrics

from .core_extra import OPS as CORE_EXTRA

TPU = "tpu"
# TORCH_TPU_OPINFO_COMPILE=1 (`make opinfo MODE=compile`): the tpu calls of forward and backward cases
# run through torch.compile(backend="tpu"), so each sample is one captured and replayed program.
COMPILE = os.environ.get("TORCH_TPU_OPINFO_COMPILE") == "1"
TARGET_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool,
                 torch.float64, torch.complex64]  # the XLA CPU plugin supports both of the last two
BACKWARD_DTYPES = [torch.float32, torch.bfloat16, torch.complex64]
VARIANTS = ["forward", "backward", "inplace", "out", "error"]

# (rtol, atol) by result dtype. float32 is tests/tpu_check.py's 1.3e-5/1e-5 scaled by 4-5x: XLA CPU
# fuses and reorders reductions and uses its own transcendental approximations.
DEFAULT_TOL = {
    torch.float32: (5e-5, 5e-5), torch.complex64: (5e-5, 5e-5), torch.float64: (1e-7, 1e-7),
    torch.complex128: (1e-7, 1e-7),
    torch.bfloat16: (1.6e-2, 1e-2), torch.float16: (1e-3, 1e-3), torch.complex32: (1e-3, 1e-3),
}

# The one place for per-op tolerance overrides: (op full name, variant or "*", dtype or None) ->
# (rtol, atol, reason). Every entry needs a reason a reviewer can check. Every other mismatch of the
# last sweep was either a defect or within CPU's own error (closer_to_float64).
TOL_OVERRIDES = {
    **{(name, "forward", torch.float64): (
        1e-7, 5e-7, "CPU's float64 Bessel kernel is off by up to 3.2e-7 near |x| = 5.5 (j0 at -5.4215, y1 at "
        "5.5761; mpmath as the reference); tpu's float64 series agree with mpmath to 1e-13 there")
       for name in ("special.bessel_j0", "special.bessel_y1")},
    ("logcumsumexp", "backward", torch.float32): (
        2e-3, 1e-3, "the gradient subtracts logcumsumexps of large values: CPU's own float32 gradient is "
        "1e-3 (relative) off the float64 one, at other elements than tpu's"),
    ("logcumsumexp", "backward", torch.complex64): (
        2e-3, 1e-3, "as in float32: CPU's complex64 gradient is 8e-4 (relative) off the complex128 one, tpu's "
        "1.4e-3 (sample 0, gradients near 19)"),
    ("linalg.householder_product", "backward", torch.complex64): (
        5e-5, 1.0, "gradients up to 3.7e4 cancel into small elements: CPU's complex64 error is 0.66 and tpu's "
        "1.26 against complex128 (2e-5 and 3.4e-5 of the largest gradient, sample 7), at any element"),
}

# Ops whose values cannot be compared with CPU (random numbers, uninitialized memory, undefined
# results): only the result metadata (type, shape, dtype, device) is compared. Besides this list, an
# op is meta-only when PyTorch's own TestCommon.test_compare_cpu skips it for one of these reasons.
META_ONLY = {
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout.with_train",
    "randn", "randint", "normal.number_mean",
}
META_ONLY_REASONS = ("non-deterministic", "undefined")
# Ops whose results are defined only up to a sign or phase per vector (singular and eigenvectors): the
# forward results are compared after the sample's output_process_fn_grad, which PyTorch's OpInfo
# provides exactly to remove that ambiguity (absolute values, or products that cancel the sign).
GAUGE_OPS = {"svd", "linalg.svd", "linalg.eigh", "linalg.eig"}
# out= variants run without the op Recorder: under any TorchDispatchMode, PyTorch's composite
# matrix_rank(..., out=) never writes its result into out (on CPU too).
OUT_UNRECORDED = {"linalg.matrix_rank", "linalg.matrix_rank.hermitian"}
# Ops that are random only with dropout: meta-only for the samples with dropout_p > 0 (keyword, or
# this args position), value-compared otherwise.
DROPOUT_ARG = {"nn.functional.scaled_dot_product_attention": None, "nn.functional.multi_head_attention_forward": 9}


def full_name(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def ops_by_name():
    return {full_name(op): op for op in op_db + CORE_EXTRA}


def dtype_name(dtype):
    return str(dtype).replace("torch.", "") if isinstance(dtype, torch.dtype) else str(dtype)


def tolerance(name, variant, dtype):
    """The override (rtol, atol) of a case, or (None, None): DEFAULT_TOL by each result's dtype."""
    for key in ((name, variant, dtype), (name, "*", dtype), (name, variant, None), (name, "*", None)):
        if key in TOL_OVERRIDES:
            return TOL_OVERRIDES[key][:2]
    return None, None


def meta_only(op):
    if full_name(op) in DROPOUT_ARG:
        return False
    if full_name(op) in META_ONLY or op.has_nondeterministic_output:
        return True
    for d in list(op.decorators) + list(op.skips or ()):
        if getattr(d, "test_name", None) == "test_compare_cpu" and getattr(d, "device_type", None) in (None, "cpu"):
            for dec in d.decorators:
                cells = [c.cell_contents for c in (getattr(dec, "__closure__", None) or ())]
                if any(isinstance(s, str) and any(r in s for r in META_ONLY_REASONS) for s in cells):
                    return True
    return False


# ---------------------------------------------------------------------------------------------------
# moving samples between devices

def copy_tensor(x, device, memo=None):
    """x on `device` with x's layout: a strided view (non-contiguous, offset, expanded, a window of a
    larger storage) is copied with its whole storage and viewed the same way, so ops that read the
    storage (as_strided) see the same memory and tpu's strided reads are exercised too. `memo`: CPU
    storage -> its device copy, so arguments that share memory on the CPU (out= the input) share it on
    the device too."""
    x = x.detach()
    if device == "cpu" or x.device.type in (device, "meta"):  # meta: a sample that mixes devices on purpose
        return x
    if x.layout != torch.strided or x.numel() == 0:
        return x.to(device)
    size = x.untyped_storage().nbytes() // x.element_size()
    key = (x.untyped_storage().data_ptr(), x.dtype)
    shared = memo is not None and key in memo
    if shared and memo[key] is not None:
        return memo[key].as_strided(x.shape, x.stride(), x.storage_offset())
    if x.is_contiguous() and x.storage_offset() == 0 and size == x.numel() and not shared:
        return x.to(device)
    whole = x.as_strided((size,), (1,), 0).to(device)
    if shared:
        memo[key] = whole
    return whole.as_strided(x.shape, x.stride(), x.storage_offset())


def to_device(x, device, like=None, memo=None):
    """Copies every tensor of a (nested) argument to `device` with its layout (copy_tensor), keeping
    requires_grad leaves; a device argument ("cpu", torch.device("cpu")) becomes `device` (factory
    functions). `like`: the same sample generated for the meta device, where a tensor that is still on
    the CPU is one the op wants there (tensor_split's indices): it stays on the CPU."""
    if isinstance(x, torch.Tensor):
        keep = isinstance(like, torch.Tensor) and like.device.type == "cpu"
        y = x.detach().clone() if keep else copy_tensor(x, device, None if x.requires_grad else memo)
        return y.requires_grad_(True) if x.requires_grad else y
    if isinstance(x, torch.device) or (isinstance(x, str) and x == "cpu"):
        return torch.device(device) if isinstance(x, torch.device) else device

    def sub(k):
        if isinstance(like, dict):
            return like.get(k)
        if isinstance(like, (list, tuple)) and isinstance(k, int) and len(like) == len(x):
            return like[k]
        return None
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(to_device(e, device, sub(i), memo) for i, e in enumerate(x)))
    if isinstance(x, (list, tuple)):
        return type(x)(to_device(e, device, sub(i), memo) for i, e in enumerate(x))
    if isinstance(x, dict):
        return {k: to_device(v, device, sub(k), memo) for k, v in x.items()}
    return x


def to_cpu(x):
    """Results to CPU (a host sync): tensors, nested sequences, named tuples."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return tuple(to_cpu(e) for e in x)
    if isinstance(x, (list, tuple)):
        return type(x)(to_cpu(e) for e in x)
    if isinstance(x, dict):
        return {k: to_cpu(v) for k, v in x.items()}
    return x


def flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for e in x for t in flat(e)]
    if isinstance(x, dict):
        return [t for e in x.values() for t in flat(e)]
    return []


def map_leaves(fn, x):
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(map_leaves(fn, e) for e in x)
    if isinstance(x, dict):
        return {k: map_leaves(fn, v) for k, v in x.items()}
    return fn(x)


def clone(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, (list, tuple)):
        return type(x)(clone(e) for e in x)
    return x


class Call:
    """One sample on one device: input, args, kwargs (and the sample's output post-processing)."""

    def __init__(self, sample, device, like=None):
        tensors = flat([sample.input, sample.args, sample.kwargs])
        keys = collections.Counter((t.untyped_storage().data_ptr(), t.dtype) for t in tensors
                                   if t.layout == torch.strided and not t.requires_grad and t.numel())
        memo = {k: None for k, n in keys.items() if n > 1}  # storages that several arguments share
        self.input = to_device(sample.input, device, like.input if like is not None else None, memo)
        self.args = to_device(tuple(sample.args), device, tuple(like.args) if like is not None else None, memo)
        self.kwargs = to_device(dict(sample.kwargs), device, dict(like.kwargs) if like is not None else None, memo)
        self.post = sample.output_process_fn_grad or (lambda o: o)

    def tensors(self):
        return flat([self.input, self.args, self.kwargs])


# ---------------------------------------------------------------------------------------------------
# comparison

class Mismatch(AssertionError):
    pass


def first_line(e):
    text = str(e).strip()
    if isinstance(e, Mismatch):
        return text if len(text) <= 300 else text[:297] + "..."
    if isinstance(e, AssertionError) and ("not close" in text or "not equal" in text):
        # assert_close: keep the counts and the largest difference, not the banner
        keep = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(("Mismatched", "Greatest"))]
        line = "values differ: " + "; ".join(keep[:2])
    else:
        line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = re.sub(r"(has no tpu lowering yet)\. To run it on the CPU.*", r"\1", line)
    line = f"{type(e).__name__}: {line}"
    return line if len(line) <= 300 else line[:297] + "..."


def describe_mismatch(a, e, rtol, atol):
    """'values differ: k of n elements; first at index i: tpu x vs CPU y (rtol, atol)', or None."""
    try:
        if a.is_complex() or e.is_complex():
            a, e = torch.view_as_real(a.resolve_conj()), torch.view_as_real(e.resolve_conj())
        a64, e64 = a.to(torch.float64), e.to(torch.float64)
        close = torch.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=True)
        bad = (~close).nonzero()
        if not len(bad):
            return None
        i = tuple(bad[0].tolist())
        return (f"values differ: {len(bad)} of {e.numel()} elements; first at {list(i)}: tpu {a[i].item():.6g} vs "
                f"CPU {e[i].item():.6g} (rtol {rtol:g}, atol {atol:g})")
    except Exception:  # noqa: BLE001 - fall back to assert_close's own message
        return None


def compare(actual, expected, rtol, atol, meta, what="result"):
    """actual (tpu) equals expected (CPU): structure, tensor devices, dtypes, shapes and (unless meta)
    values; a non-tensor result must be equal."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise Mismatch(f"{what}: tpu returned {type(actual).__name__}, CPU a tensor")
        if actual.device.type != TPU:
            raise Mismatch(f"{what}: tensor on {actual.device}, not tpu")
        if actual.dtype != expected.dtype or actual.shape != expected.shape:
            raise Mismatch(f"{what}: tpu {actual.dtype}{list(actual.shape)} vs CPU {expected.dtype}{list(expected.shape)}")
        if meta:
            return
        a = actual.detach().cpu()
        r, t = (rtol, atol) if rtol is not None else DEFAULT_TOL.get(expected.dtype, (0.0, 0.0))
        try:
            torch.testing.assert_close(a, expected.detach(), rtol=r, atol=t, equal_nan=True, check_stride=False,
                                       check_layout=False)
        except AssertionError as e:
            raise Mismatch(f"{what}: {describe_mismatch(a, expected.detach(), r, t) or first_line(e).split(': ', 1)[1]}") from None
        return
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise Mismatch(f"{what}: tpu returned {type(actual).__name__} of {len(actual) if isinstance(actual, (list, tuple)) else '-'}"
                           f" items, CPU {type(expected).__name__} of {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            compare(a, e, rtol, atol, meta, f"{what}[{i}]")
        return
    if meta:
        return
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        r, t = (rtol, atol) if rtol is not None else DEFAULT_TOL[torch.float64]
        if not (abs(actual - expected) <= t + r * abs(expected) or (actual != actual and expected != expected)):
            raise Mismatch(f"{what}: tpu {actual} vs CPU {expected}")
        return
    if actual != expected:
        raise Mismatch(f"{what}: tpu {actual!r} vs CPU {expected!r}")


# Ops whose index results are unspecified among equal values (PyTorch documents no tie order): the
# values must agree and the tpu indices must select them. name -> (dim: args position, default;
# keepdim: args position or None; result: "pair" (values, indices) or "indices")
TIE_INDEX_OPS = {
    "sort": ((0, -1), None, "pair"), "argsort": ((0, -1), None, "indices"), "topk": ((1, -1), None, "pair"),
    "kthvalue": ((1, -1), (2,), "pair"), "mode": ((0, -1), (1,), "pair"),
    "median": ((0, None), (1,), "pair"), "nanmedian": ((0, None), (1,), "pair"),
}


def check_ties(name, cpu, actual, expected, rtol, atol):
    (dim_pos, dim_default), keep_pos, kind = TIE_INDEX_OPS[name]
    dim = cpu.kwargs.get("dim", cpu.args[dim_pos] if len(cpu.args) > dim_pos else dim_default)
    if dim is None or cpu.kwargs.get("stable") or (name == "sort" and len(cpu.args) > 2 and cpu.args[2]):
        return compare(actual, expected, rtol, atol, False)  # a full reduction, or a stable sort: exact order
    keepdim = cpu.kwargs.get("keepdim", cpu.args[keep_pos[0]] if keep_pos and len(cpu.args) > keep_pos[0] else False)
    x = cpu.input
    if kind == "pair":
        compare(actual[0], expected[0], rtol, atol, False, "result[0]")
        compare(actual[1], expected[1], 0, 0, True, "result[1]")  # metadata
        idx, want = actual[1].cpu(), expected[0]
    else:
        compare(actual, expected, 0, 0, True)
        idx = actual.cpu()
        want = x.gather(dim, expected) if x.dim() else x
    if x.dim() == 0:
        if idx.numel() and idx.reshape(-1).abs().max() != 0:
            raise Mismatch("indices: nonzero index into a 0-d input")
        return
    if kind == "pair" and name not in ("sort", "topk") and not keepdim:
        idx, want = idx.unsqueeze(dim), want.unsqueeze(dim)
    if idx.numel() and (idx.min() < 0 or idx.max() >= x.shape[dim]):
        raise Mismatch(f"indices out of range [0, {x.shape[dim]})")
    got = x.gather(dim, idx)
    try:
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    except AssertionError:
        raise Mismatch("indices: the tpu indices select other values than CPU's") from None
    if name in ("sort", "argsort") and not torch.equal(idx.sort(dim).values, torch.arange(x.shape[dim]).expand_as(idx.movedim(dim, -1)).movedim(-1, dim)):
        raise Mismatch("indices: not a permutation")


def tie_sums_agree(x, actual, expected, tol):
    """A sort-like op's gradient when x has ties: which of equal elements receives a gradient is
    unspecified, so the gradients summed over each group of equal input values must agree."""
    if x.is_complex() or actual.shape != expected.shape or x.shape != expected.shape:
        return False
    values, group = torch.unique(x.detach().reshape(-1), return_inverse=True)
    sums = [torch.zeros(len(values), dtype=torch.float64).index_add_(0, group, g.detach().cpu().reshape(-1).double())
            for g in (actual, expected)]
    rtol, atol = tol if tol[0] is not None else DEFAULT_TOL.get(expected.dtype, (0.0, 0.0))
    return bool(torch.allclose(sums[0], sums[1], rtol=rtol, atol=atol * 4))


def weights_like(o):
    # made on the CPU and copied: the loss must not depend on the tpu ops under test
    return (torch.arange(o.numel()) % 7 + 1).reshape(o.shape).to(torch.float32).to(o.device)


def loss_of(out, dtype=torch.float32):
    """A scalar loss of every differentiable output: sum(o * w) with fixed distinct weights, so each
    output element gets its own cotangent."""
    terms = []
    for o in flat(out):
        if not o.requires_grad:
            continue
        if o.is_complex():
            w = weights_like(o).to(dtype)
            terms += [(o.real.to(dtype) * w).sum(), (o.imag.to(dtype) * w).sum()]
        elif o.is_floating_point():
            terms.append((o.to(dtype) * weights_like(o).to(dtype)).sum())
    return sum(terms) if terms else None


class Recorder(TorchDispatchMode):
    """Records the ATen ops ("name.overload", "name" for the default overload) that reach the
    dispatcher below autograd while active."""

    def __init__(self, ops):
        super().__init__()
        self.ops = ops

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(aten_name(func))
        return func(*args, **(kwargs or {}))


def aten_name(func):
    ov = func._overloadname
    return func._overloadpacket.__name__ + ("" if ov == "default" else "." + ov)


_KEEPS_CPU = {}  # OpInfo name -> its meta samples hold CPU tensors (Runner.meta_samples)


class Skip(Exception):
    """The sample says nothing for this variant (e.g. no differentiable output)."""


# ---------------------------------------------------------------------------------------------------
# one sample of each variant: `run(sample)` raises on disagreement, Skip when not applicable

class Runner:
    def __init__(self, op, dtype, variant, record=None):
        self.op, self.dtype, self.variant = op, dtype, variant
        self.name = full_name(op)
        self.meta = meta_only(op)
        self.tol = tolerance(self.name, variant, dtype)
        self.factory = False  # the current sample has no tensor arguments (see calls)
        self.like = None  # the current sample generated for the meta device, where it says something
        self.f64_rescued = 0  # results that passed by the float64 reference (closer_to_float64)
        # sets that collect the aten ops of the tpu calls (a backward's gradient computation goes to
        # record_bw), or None
        self.record = record
        self.record_bw = set() if record is not None else None

    def compiled(self, fn):
        """fn on tpu tensors: itself, or (TORCH_TPU_OPINFO_COMPILE=1) compiled with backend "tpu" and
        called twice, so that the result compared is a replay of the captured program."""
        if not COMPILE:
            return fn()
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="tpu")
        compiled()
        return compiled()

    def calls(self, sample):
        """The sample on tpu and on CPU. A call without tensor arguments (a factory function) creates
        its result on the default device, so the tpu call runs with tpu as the default device."""
        dev, cpu = Call(sample, TPU, self.like), Call(sample, "cpu")
        self.factory = not dev.tensors()
        return dev, cpu

    def tpu(self, fn, record=None):
        """fn() on tpu, recording its aten ops into `record` (default: self.record; False: none)."""
        record = self.record if record is None else record
        with contextlib.ExitStack() as stack:
            if self.factory:
                stack.enter_context(torch.device(TPU))
            if record is not None and record is not False:
                stack.enter_context(Recorder(record))
            return fn()

    def expect_same_error(self, cpu_error, tpu_fn):
        try:
            to_cpu(self.tpu(tpu_fn))
        except Exception as e:  # noqa: BLE001 - any exception type is the thing compared
            if type(e) is type(cpu_error):  # exactly: NotImplementedError is a RuntimeError too
                return
            raise Mismatch(f"tpu raised {first_line(e)}; CPU raised {type(cpu_error).__name__}") from None
        raise Mismatch(f"tpu raised nothing; CPU raised {first_line(cpu_error)}")

    def sample_meta(self, cpu):
        """Metadata-only for this sample? (the op's flag, or dropout in a DROPOUT_ARG op's sample)"""
        if self.name not in DROPOUT_ARG:
            return self.meta
        pos = DROPOUT_ARG[self.name]
        p = cpu.kwargs.get("dropout_p", cpu.args[pos] if pos is not None and len(cpu.args) > pos else 0.0)
        return bool(p) and cpu.kwargs.get("training", True) is not False

    def forward(self, sample):
        dev, cpu = self.calls(sample)
        op = self.op
        try:
            expected = op(cpu.input, *cpu.args, **cpu.kwargs)
        except Exception as e:  # noqa: BLE001
            return self.expect_same_error(e, lambda: op(dev.input, *dev.args, **dev.kwargs))
        actual = self.tpu(lambda: self.compiled(lambda: op(dev.input, *dev.args, **dev.kwargs)))
        if self.name in GAUGE_OPS:
            actual, expected = dev.post(actual), cpu.post(expected)
        if self.name in TIE_INDEX_OPS and self.dtype != "-":
            return check_ties(self.name, cpu, actual, expected, *self.tol)
        try:
            compare(actual, expected, *self.tol, self.sample_meta(cpu))
        except Mismatch:
            if not self.closer_to_float64(sample, actual, expected):
                raise
            self.f64_rescued += 1

    def upcast(self, sample, leaves=False):
        """The sample in float64 (complex: complex128) on the CPU: tensors of the case's dtype and a dtype=
        argument of it; with leaves, the upcast tensors that required grad require it."""
        dtype = self.dtype
        wide = torch.complex128 if dtype.is_complex else torch.float64

        def up(x):
            if isinstance(x, torch.Tensor) and x.dtype == dtype:
                y = x.detach().to(wide)
                return y.requires_grad_(True) if leaves and x.requires_grad else y
            return wide if x is dtype else x
        return map_leaves(up, sample.input), map_leaves(up, tuple(sample.args)), map_leaves(up, dict(sample.kwargs))

    def closer_to_float64(self, sample, actual, expected, reference=None):
        """A value mismatch passes when tpu is as close to the op's float64 result as CPU is: CPU's
        float32/bfloat16/float16 kernels round differently (after every step of an accumulation, in
        cancelling sums), so CPU itself can be the less accurate one. Elementwise, within the result
        dtype's tolerance: |tpu - ref| <= |cpu - ref| + atol + rtol |ref| (where CPU overflowed to NaN
        and the reference did not: |tpu - ref| <= atol + rtol |ref|, or tpu's infinity where the
        reference is beyond the dtype's range). Types, dtypes, shapes and
        non-float values must still be equal. `reference`: the float64 result (else computed)."""
        if not isinstance(self.dtype, torch.dtype) or not (self.dtype.is_floating_point or self.dtype.is_complex):
            return False
        if self.sample_meta(Call(sample, "cpu")):
            return False
        if reference is None:
            try:
                x, args, kwargs = self.upcast(sample)
                reference = self.op(x, *args, **kwargs)
                if self.name in GAUGE_OPS and sample.output_process_fn_grad:
                    reference = sample.output_process_fn_grad(reference)
            except Exception:  # noqa: BLE001 - no float64 kernel: no reference
                return False
        try:
            compare(actual, expected, None, None, True)  # only values may differ
        except Mismatch:
            return False
        a, e, r = flat(actual), flat(expected), flat(reference)
        if not (len(a) == len(e) == len(r)):
            return False
        for x, y, z in zip(a, e, r):
            x = x.detach().cpu()
            if not y.is_floating_point() and not y.is_complex():
                if not torch.equal(x, y):
                    return False
                continue
            if y.is_complex() or z.is_complex():
                x, y, z = (torch.view_as_real(t.resolve_conj()) for t in (x, y, z.detach()))
            rt, at = DEFAULT_TOL.get(y.dtype, (0.0, 0.0))
            largest = torch.finfo(y.dtype).max
            x, y, z = x.double(), y.double(), z.detach().double()
            if z.shape != y.shape:
                return False
            ok = (x - z).abs() <= (y - z).abs() + at + rt * z.abs()
            ok |= y.isnan() & ~z.isnan() & ((x - z).abs() <= at + rt * z.abs())  # CPU NaN, tpu right
            ok |= y.isnan() & x.isinf() & (z.abs() > largest) & (x.sign() == z.sign())  # tpu overflows as it should
            if not (ok | (x.isnan() & y.isnan())).all():
                return False
        return True

    def reference_grads(self, sample):
        """The gradients in float64 on the CPU (for closer_to_float64), or None."""
        try:
            x, args, kwargs = self.upcast(sample, leaves=True)
            leaves = [t for t in flat([x, args, kwargs]) if t.requires_grad]
            loss = loss_of(sample.output_process_fn_grad(self.op(x, *args, **kwargs)), torch.float64)
            return torch.autograd.grad(loss, leaves, allow_unused=True)
        except Exception:  # noqa: BLE001
            return None

    def backward(self, sample):
        dev, cpu = self.calls(sample)
        cpu_leaves = [t for t in cpu.tensors() if t.requires_grad]
        dev_leaves = [t for t in dev.tensors() if t.requires_grad]
        if not cpu_leaves:
            raise Skip("no input requires grad")
        op = self.op
        expected = cpu.post(op(cpu.input, *cpu.args, **cpu.kwargs))
        loss = loss_of(expected)
        if loss is None:
            raise Skip("no differentiable output")
        grads = torch.autograd.grad(loss, cpu_leaves, allow_unused=True)

        out = self.tpu(lambda: dev.post(self.compiled(lambda: op(dev.input, *dev.args, **dev.kwargs))))
        dev_loss = loss_of(out)
        if dev_loss is None:
            raise Mismatch("tpu output does not require grad")
        dev_grads = self.tpu(lambda: torch.autograd.grad(dev_loss, dev_leaves, allow_unused=True), self.record_bw)
        reference = None
        for i, (a, e) in enumerate(zip(dev_grads, grads)):
            if (a is None) != (e is None):
                raise Mismatch(f"grad {i}: tpu {'None' if a is None else 'a tensor'}, CPU {'None' if e is None else 'a tensor'}")
            if e is None:
                continue
            try:
                compare(a, e, *self.tol, self.sample_meta(cpu), f"grad {i}")
            except Mismatch:
                if (self.name in TIE_INDEX_OPS or self.name == "msort") and tie_sums_agree(cpu_leaves[i], a, e, self.tol):
                    continue
                reference = reference or self.reference_grads(sample)
                if reference is None or len(reference) != len(grads) or reference[i] is None or \
                        not self.closer_to_float64(sample, a, e, reference[i]):
                    raise
                self.f64_rescued += 1

    def inplace(self, sample):
        fn = self.op.inplace_variant
        dev, cpu = self.calls(sample)
        cpu_self, dev_self = clone(cpu.input), clone(dev.input)
        try:
            expected = fn(cpu_self, *cpu.args, **cpu.kwargs)
        except Exception as e:  # noqa: BLE001
            return self.expect_same_error(e, lambda: fn(dev_self, *dev.args, **dev.kwargs))
        actual = self.tpu(lambda: fn(dev_self, *dev.args, **dev.kwargs))
        compare(actual, expected, *self.tol, self.sample_meta(cpu))
        compare(dev_self, cpu_self, *self.tol, self.sample_meta(cpu), "mutated input")

    def out(self, sample):
        op = self.op
        dev, cpu = self.calls(sample)
        try:
            reference = op(cpu.input, *cpu.args, **cpu.kwargs)
        except Exception:  # noqa: BLE001 - an invalid sample: forward reports it
            raise Skip("CPU rejects the sample") from None
        if not (isinstance(reference, torch.Tensor) or (isinstance(reference, (list, tuple)) and reference
                                                        and all(isinstance(t, torch.Tensor) for t in reference))):
            raise Skip("result is not a tensor or a tuple of tensors")

        def empties(device):
            if isinstance(reference, torch.Tensor):
                return torch.empty(0, dtype=reference.dtype, device=device)
            return tuple(torch.empty(0, dtype=t.dtype, device=device) for t in reference)
        cpu_out, dev_out = empties("cpu"), empties(TPU)
        try:
            expected = op(cpu.input, *cpu.args, **cpu.kwargs, out=cpu_out)
        except Exception as e:  # noqa: BLE001
            return self.expect_same_error(e, lambda: op(dev.input, *dev.args, **dev.kwargs, out=dev_out))
        record = False if self.name in OUT_UNRECORDED else None
        actual = self.tpu(lambda: op(dev.input, *dev.args, **dev.kwargs, out=dev_out), record)
        if self.name in GAUGE_OPS:
            actual, expected = dev.post(actual), cpu.post(expected)
            dev_out, cpu_out = dev.post(dev_out), cpu.post(cpu_out)
        compare(actual, expected, *self.tol, self.sample_meta(cpu))
        compare(dev_out, cpu_out, *self.tol, self.sample_meta(cpu), "out")

    def error(self, error_input):
        sample, op = error_input.sample_input, self.op
        dev, cpu = self.calls(sample)
        try:
            op(cpu.input, *cpu.args, **cpu.kwargs)
        except Exception as e:  # noqa: BLE001
            return self.expect_same_error(e, lambda: op(dev.input, *dev.args, **dev.kwargs))
        raise Skip("CPU raises nothing for this error input")

    def samples(self):
        torch.manual_seed(0)
        if self.variant == "error":
            return self.op.error_inputs("cpu")
        return self.op.sample_inputs("cpu", self.dtype, requires_grad=self.variant == "backward")

    def meta_samples(self):
        """The samples generated for the meta device, when they hold CPU tensors (arguments the op
        wants on the CPU, see to_device); else None."""
        if self.variant == "error":
            return None
        if self.name not in _KEEPS_CPU:
            try:
                first = list(itertools.islice(self.op.sample_inputs("meta", self.dtype), 20))
                _KEEPS_CPU[self.name] = any(t.device.type == "cpu" for s in first
                                            for t in flat([s.input, list(s.args), dict(s.kwargs)]))
            except Exception:  # noqa: BLE001 - a sample function that needs data
                _KEEPS_CPU[self.name] = False
        if not _KEEPS_CPU[self.name]:
            return None
        return self.op.sample_inputs("meta", self.dtype, requires_grad=self.variant == "backward")

    def run(self, max_samples=None):
        """Runs the samples; returns (samples run, samples skipped); raises on the first failure with
        the sample index in the message."""
        run = skipped = 0
        fn = getattr(self, self.variant)
        metas = self.meta_samples()
        for i, sample in enumerate(self.samples()):
            if max_samples is not None and run >= max_samples:
                break
            try:
                self.like = next(metas) if metas is not None else None
            except Exception:  # noqa: BLE001 - fewer or failing meta samples: move every tensor
                metas, self.like = None, None
            torch.manual_seed(i)
            try:
                fn(sample)
                run += 1
            except Skip:
                skipped += 1
            except Exception as e:  # noqa: BLE001
                e.sample_index = i
                raise
        return run, skipped


# ---------------------------------------------------------------------------------------------------
# cases

def variant_dtypes(op, variant):
    """The dtypes a variant is run for: [(dtype, supported on CPU)]."""
    if variant == "forward":
        supported = op.supported_dtypes("cpu")
        return [(d, d in supported) for d in TARGET_DTYPES]
    if variant == "backward":
        if not op.supports_autograd:
            return []
        supported = op.supported_backward_dtypes("cpu")
        return [(d, d in supported) for d in BACKWARD_DTYPES]
    if variant == "inplace" and op.inplace_variant is None:
        return []
    if variant == "out" and not op.supports_out:
        return []
    if variant == "error":
        return [("-", True)] if op.error_inputs_func is not None else []
    supported = op.supported_dtypes("cpu")
    for d in TARGET_DTYPES:
        if d in supported:
            return [(d, True)]
    return [(torch.float32, False)]


def fallback_counts():
    return {k.split(":", 1)[1]: v for k, v in metrics.counters().items() if k.startswith("cpu_fallback:")}


def run_case(op, variant, dtype, max_samples=None, record=True):
    """One (op, variant, dtype): a result dict (see the module doc)."""
    t0 = time.time()
    res = {"op": full_name(op), "variant": variant, "dtype": dtype_name(dtype), "samples": 0, "skipped": 0,
           "meta_only": meta_only(op)}
    runner = Runner(op, dtype, variant, set() if record else None)
    counters0 = metrics.counters()
    try:
        res["samples"], res["skipped"] = runner.run(max_samples)
        res["status"] = "pass" if res["samples"] else "no-samples"
        if not res["samples"]:
            res["detail"] = f"{res['skipped']} samples, none applicable"
    except Exception as e:  # noqa: BLE001
        res["status"], res["detail"] = "fail", f"sample {getattr(e, 'sample_index', '?')}: {first_line(e)}"
        before = fallback_counts()
        try:  # does it pass with the ops that have no lowering run on the CPU?
            with torch_tpu.cpu_fallback():
                Runner(op, dtype, variant).run(max_samples)
            after = fallback_counts()
            fell = sorted(k for k in after if after[k] != before.get(k, 0))
            if fell:
                res["status"], res["fallback_ops"] = "cpu-fallback", fell
        except Exception:  # noqa: BLE001 - still failing: keep the native error
            pass
    if runner.f64_rescued:
        res["float64_ref"] = runner.f64_rescued
    counters1 = metrics.counters()
    for key, name in (("compiles", "compiles"), ("cache.disk_hits", "disk_hits")):
        if counters1.get(key, 0) - counters0.get(key, 0):
            res[name] = int(counters1.get(key, 0) - counters0.get(key, 0))
    res["seconds"] = round(time.time() - t0, 3)
    if runner.record:
        res["aten_ops"] = sorted(runner.record)
    if runner.record_bw:
        res["aten_ops_bw"] = sorted(runner.record_bw)
    return res


def run_op(op, variants=VARIANTS, dtypes=None, max_samples=None, record=True):
    """Every case of one OpInfo; yields result dicts."""
    for variant in variants:
        for dtype, supported in variant_dtypes(op, variant):
            if dtypes is not None and dtype != "-" and dtype not in dtypes:
                continue
            if not supported:
                yield {"op": full_name(op), "variant": variant, "dtype": dtype_name(dtype),
                       "status": "not-supported-on-cpu", "samples": 0, "seconds": 0.0}
                continue
            yield run_case(op, variant, dtype, max_samples, record)


def cause_of(detail):
    """A failure detail reduced to its cause (for the report's tally): no sample index, no numbers."""
    text = re.sub(r"^sample \S+: ", "", detail or "")
    m = re.search(r"aten::(\S+) has no tpu lowering", text)
    if m:
        return f"no tpu lowering: aten::{m.group(1)}"
    text = re.sub(r"(result|grad|out|mutated input)(\[\d+\]| \d+)*", r"\1", text)
    text = re.sub(r"values differ: .*", "values differ", text)
    text = re.sub(r"(?<![A-Za-z_\d])-?\d+(\.\d+)?(e[-+]?\d+)?", "N", text)  # numbers, not dtype names
    return text[:160]

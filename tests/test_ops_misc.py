"""Ops the OpInfo sweep found missing, on tpu against CPU: reflection / replication padding, norm,
pairwise_distance, vdot, linalg.cross, trace, addbmm, angle, cummax / cummin (forward, and backward
for float32)."""
import pytest
import torch
import torch.nn.functional as F

from tpu_check import both_raise, check, to

FLOATS = [torch.float32, torch.bfloat16, torch.float16]


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def R(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)



# ---------------------------------------------------------------------------------------------
# Padding

PADS = [((2, 3, 5), (1, 2)), ((2, 3, 5), (0, 4)), ((2, 3, 5), (-1, 2)), ((3, 5), (2, 1)),
        ((2, 3, 4, 5), (1, 2, 3, 0)), ((3, 4, 5), (2, 2, 1, 3)),
        ((1, 2, 3, 4, 5), (1, 2, 0, 1, 2, 1)), ((2, 3, 4, 5), (1, 1, 2, 0, 1, 2))]


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("shape,pad", PADS)
def test_pad_forward_backward(mode, shape, pad):
    def padded(x):
        return F.pad(x, pad, mode=mode)
    check(padded, R(*shape), grad=True)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("dtype", FLOATS[1:] + [torch.float64])
def test_pad_dtypes(mode, dtype):
    check(lambda x: F.pad(x, (2, 1, 1, 2), mode=mode), R(2, 3, 4, 5, dtype=dtype))
    check(lambda x: F.pad(x, (3, 1), mode=mode), R(2, 3, 5, dtype=dtype))


def test_pad_out():
    x = R(2, 3, 5)
    for fn in (torch._C._nn.reflection_pad1d, torch._C._nn.replication_pad1d):
        def into(x):
            out = torch.empty(0, device=x.device)
            fn(x, (2, 1), out=out)
            return out
        check(into, x)


def test_pad_errors():
    both_raise(RuntimeError, lambda x: F.pad(x, (5, 1), mode="reflect"), R(2, 3, 5))
    both_raise(RuntimeError, lambda x: F.pad(x, (1, 1, 1, 1), mode="replicate"), R(5))


# ---------------------------------------------------------------------------------------------
# Norms

@pytest.mark.parametrize("p", [1, 2, 3, 0.5, float("inf"), float("-inf"), 0])
def test_norm_p_dim(p):
    check(lambda x: torch.norm(x, p, 1), R(3, 4), grad=p not in (0,))
    check(lambda x: torch.norm(x, p, (0, 2), keepdim=True), R(3, 4, 2))


@pytest.mark.parametrize("dtype", FLOATS[1:])
def test_norm_dtypes(dtype):
    check(lambda x: torch.norm(x, 3, 1), R(3, 4, dtype=dtype))
    check(lambda x: torch.norm(x, 2), R(3, 4, dtype=dtype))


def test_norm_out_and_pairwise_distance():
    def into(x):
        out = torch.empty(0, device=x.device)
        torch.norm(x, 3, 1, out=out)
        return out
    check(into, R(3, 4))
    check(lambda a, b: F.pairwise_distance(a, b), R(3, 4), R(3, 4), grad=True)
    check(lambda a, b: F.pairwise_distance(a, b, p=1.5, keepdim=True), R(3, 4), R(3, 4), grad=True)
    check(lambda a, b: F.pairwise_distance(a, b), R(3, 4, dtype=torch.bfloat16), R(3, 4, dtype=torch.bfloat16))
    both_raise(IndexError, lambda x: torch.norm(x, 3, 4), R(3, 4))
    check(lambda x: torch.ops.aten.norm.ScalarOpt_dim(x, None, [1]), R(3, 4), grad=True)
    check(lambda x: torch.ops.aten.norm.Scalar(x, 3), R(3, 4), grad=True)
    check(lambda x: torch.ops.aten.norm.ScalarOpt_dim_dtype(x, 3, [0], True, dtype=torch.float64), R(3, 4))


# ---------------------------------------------------------------------------------------------
# Linear algebra

@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_vdot(dtype):
    make = (lambda n: torch.randint(-5, 5, (n,))) if dtype == torch.int64 else (lambda n: R(n, dtype=dtype))
    check(torch.vdot, make(7), make(7), grad=dtype == torch.float32)
    both_raise(RuntimeError, torch.vdot, make(7), make(6))
    both_raise(RuntimeError, torch.vdot, R(2, 3), R(2, 3))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_linalg_cross(dtype):
    make = (lambda *s: torch.randint(-5, 5, s)) if dtype == torch.int64 else (lambda *s: R(*s, dtype=dtype))
    grad = dtype == torch.float32
    check(torch.linalg.cross, make(4, 3), make(4, 3), grad=grad)
    check(lambda a, b: torch.linalg.cross(a, b, dim=0), make(3, 2, 4), make(3, 1, 4), grad=grad)
    check(lambda a, b: torch.cross(a, b, dim=1), make(2, 3), make(2, 3), grad=grad)

    def into(a, b):
        out = torch.empty(0, dtype=a.dtype, device=a.device)
        torch.linalg.cross(a, b, out=out)
        return out
    check(into, make(4, 3), make(4, 3))
    both_raise(RuntimeError, torch.linalg.cross, make(4, 2), make(4, 2))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32])
def test_trace(dtype):
    make = (lambda *s: torch.randint(-5, 5, s, dtype=dtype)) if not dtype.is_floating_point else \
        (lambda *s: R(*s, dtype=dtype))
    grad = dtype == torch.float32
    check(torch.trace, make(4, 3), grad=grad)
    check(torch.trace, make(3, 5), grad=grad)
    both_raise(RuntimeError, torch.trace, make(2, 3, 4))


@pytest.mark.parametrize("dtype", FLOATS)
def test_addbmm(dtype):
    grad = dtype == torch.float32
    tol = {} if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    check(torch.addbmm, R(3, 5, dtype=dtype), R(2, 3, 4, dtype=dtype), R(2, 4, 5, dtype=dtype), grad=grad, **tol)
    check(lambda s, a, b: torch.addbmm(s, a, b, beta=0.5, alpha=2), R(5, dtype=dtype), R(2, 3, 4, dtype=dtype),
          R(2, 4, 5, dtype=dtype), grad=grad, **tol)
    nan = torch.full((3, 5), float("nan")).to(dtype)
    check(lambda s, a, b: torch.addbmm(s, a, b, beta=0), nan, R(2, 3, 4, dtype=dtype), R(2, 4, 5, dtype=dtype),
          **tol)
    both_raise(RuntimeError, torch.addbmm, R(3, 5), R(2, 3, 4), R(3, 4, 5))


# ---------------------------------------------------------------------------------------------
# Elementwise and scans

@pytest.mark.parametrize("dtype", FLOATS + [torch.float64, torch.int64])
def test_angle(dtype):
    x = torch.tensor([-2.0, -0.0, 0.0, 3.0, float("nan"), float("-inf")])
    x = x[:4].to(dtype) if dtype == torch.int64 else x.to(dtype)
    check(torch.angle, x)
    check(torch.angle, R(3, 4), grad=True)


@pytest.mark.parametrize("fn", [torch.cummax, torch.cummin])
@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32])
def test_cummax_cummin(fn, dtype):
    if dtype.is_floating_point:
        x = R(4, 6, dtype=dtype)
        x[1, 2] = float("nan")
        x[2, 1] = x[2, 3] = x[2, 4]  # ties
    else:
        x = torch.randint(-2, 3, (4, 6), dtype=dtype)
    check(lambda x: tuple(fn(x, 1)), x)
    check(lambda x: tuple(fn(x, 0)), x)
    check(lambda x: tuple(fn(x, -1)), x[0])


@pytest.mark.parametrize("fn", [torch.cummax, torch.cummin])
def test_cummax_cummin_backward_and_errors(fn):
    check(lambda x: fn(x, 1).values, R(3, 5), grad=True)
    check(lambda x: fn(x, 0).values, R(3, 5), grad=True)
    check(lambda x: tuple(fn(x, 0)), R(()))

    def into(x):
        v, i = torch.empty(0, device=x.device), torch.empty(0, dtype=torch.long, device=x.device)
        fn(x, 1, out=(v, i))
        return v, i
    check(into, R(3, 5))
    both_raise(IndexError, fn, R(3, 5), 2)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
def test_mode(dtype):
    x = torch.randint(0, 4, (3, 7)).to(dtype)
    for dim in (0, 1, -1):
        check(lambda x: tuple(torch.mode(x, dim)), x)
        check(lambda x: tuple(torch.mode(x, dim, keepdim=True)), x)
    check(lambda x: tuple(torch.mode(x)), torch.tensor([3, 1, 3, 1, 2, 3, 1, 5]).to(dtype))
    check(lambda x: tuple(torch.mode(x, 0)), torch.tensor(5).to(dtype))

    def into(x):
        v, i = torch.empty(0, dtype=x.dtype, device=x.device), torch.empty(0, dtype=torch.long, device=x.device)
        torch.mode(x, 1, out=(v, i))
        return v, i
    check(into, x)
    both_raise(IndexError, torch.mode, x, 2)


def test_mode_backward():
    x = torch.randint(0, 4, (3, 7)).float()
    check(lambda x: torch.mode(x, 1).values, x, grad=True)


# ---------------------------------------------------------------------------------------------
# equal (a Python bool read on the host)

def test_equal():
    a = R(3, 4)
    nan = torch.tensor([1.0, float("nan")])
    cases = [(a, a.clone()), (a, a + 1), (a, a[:2]), (a, a.reshape(4, 3)), (a, a.t().contiguous().t()),
             (nan, nan), (nan, nan.clone()), (torch.ones(2), torch.ones(2, dtype=torch.int64)),
             (torch.ones(0), torch.ones(0)), (a.to(torch.bfloat16), a.to(torch.bfloat16)),
             (torch.tensor([True, False]), torch.tensor([True, True]))]
    for x, y in cases:
        expected = torch.equal(x, y)
        actual = torch.equal(*to((x, y), "tpu"))
        assert type(actual) is bool and actual == expected, (x, y)
    with pytest.raises(RuntimeError):
        torch.equal(a.to("tpu"), a)


# ---------------------------------------------------------------------------------------------
# 3-d pooling

@pytest.mark.parametrize("shape,size", [((1, 2, 4, 5, 6), 2), ((2, 3, 5, 4), (3, 2, 4)), ((1, 2, 4, 4, 4), (4, 1, 3))])
def test_adaptive_avg_pool3d(shape, size):
    check(lambda x: F.adaptive_avg_pool3d(x, size), R(*shape), grad=True)
    check(lambda x: F.adaptive_avg_pool3d(x, size), R(*shape, dtype=torch.bfloat16))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(2, 3, 2), stride=1, padding=1),
                                dict(kernel_size=3, stride=2, ceil_mode=True), dict(kernel_size=2, dilation=2)])
def test_max_pool3d(kw):
    x = R(2, 2, 5, 6, 5)
    check(lambda x: F.max_pool3d(x, return_indices=True, **kw), x, grad=True)
    check(lambda x: F.max_pool3d(x, return_indices=True, **kw), x.to(torch.bfloat16))
    check(lambda x: F.max_pool3d(x, **kw), x[0], grad=True)


def test_pool3d_errors():
    both_raise(RuntimeError, lambda x: F.max_pool3d(x, 2, padding=2), R(1, 2, 4, 4, 4))
    both_raise(RuntimeError, lambda x: F.adaptive_avg_pool3d(x, 2), R(4, 4))

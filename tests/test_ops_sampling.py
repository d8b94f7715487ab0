"""Sampling and pooling ops on tpu against CPU (csrc/lower/sampling.cpp): max unpooling, channel
shuffle, unfold / fold (im2col / col2im), avg pool 3d, adaptive max pool 3d, fractional max pool,
bicubic and antialiased bilinear upsampling, grid sampling; forward, and backward for float32."""
import pytest
import torch
import torch.nn.functional as F

from tpu_check import both_raise, check

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
TOL = dict(rtol=1e-4, atol=1e-4)  # summation order of taps / window sums differs from CPU's loops


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def R(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_max_unpool(dtype):
    x = R(2, 3, 6, 8, dtype=dtype)
    _, idx = F.max_pool2d(x.float(), 2, return_indices=True)
    v = R(*idx.shape, dtype=dtype)
    grad = dtype == torch.float32
    check(lambda v: F.max_unpool2d(v, idx.to(v.device), 2, output_size=(7, 9)), v, grad=grad)
    x1 = R(2, 3, 10)
    _, i1 = F.max_pool1d(x1, 3, stride=2, return_indices=True)
    check(lambda v: F.max_unpool1d(v, i1.to(v.device), 3, stride=2), R(*i1.shape, dtype=dtype), grad=grad)
    x3 = R(1, 2, 4, 4, 6)
    _, i3 = F.max_pool3d(x3, 2, return_indices=True)
    check(lambda v: F.max_unpool3d(v, i3.to(v.device), 2), R(*i3.shape, dtype=dtype), grad=grad)


def test_max_unpool_errors():
    v, idx = R(1, 1, 2, 2), torch.zeros(1, 1, 2, 2, dtype=torch.long)
    both_raise(RuntimeError, lambda v, i: torch.ops.aten.max_unpool2d(v, i[0], [4, 4]), v, idx)
    both_raise(RuntimeError, lambda v, i: F.max_unpool2d(v, i.float(), 2), v, idx)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
def test_channel_shuffle(dtype):
    x = torch.randint(0, 2, (2, 6, 3, 2)).to(dtype)
    check(lambda x: F.channel_shuffle(x, 3), x)
    check(lambda x: F.channel_shuffle(x, 2), R(2, 4, 5), grad=True)
    both_raise(RuntimeError, lambda x: F.channel_shuffle(x, 4), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_unfold_fold(dtype):
    grad = dtype == torch.float32
    check(lambda x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), R(2, 3, 6, 7, dtype=dtype),
          grad=grad)
    check(lambda x: F.unfold(x, 2), R(3, 4, 5, dtype=dtype), grad=grad)
    check(lambda x: F.fold(x, (5, 6), (2, 3), dilation=(2, 1), padding=(1, 0), stride=(1, 2)),
          R(2, 12, 10, dtype=dtype), grad=grad, **(TOL if grad else {}))
    check(lambda x: F.fold(x, (4, 4), 2, stride=2), R(8, 4, dtype=dtype), grad=grad)
    both_raise(RuntimeError, lambda x: F.fold(x, (4, 4), 2), R(2, 7, 9))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])  # no half types on CPU
def test_avg_pool3d(dtype):
    x = R(2, 3, 5, 6, 7, dtype=dtype)
    grad = dtype == torch.float32
    check(lambda x: F.avg_pool3d(x, 3, stride=2, padding=1, ceil_mode=True), x, grad=grad, **TOL)
    check(lambda x: F.avg_pool3d(x, (2, 3, 2), padding=(1, 1, 0), count_include_pad=False), x, grad=grad, **TOL)
    check(lambda x: F.avg_pool3d(x, 2, divisor_override=3), x[0], grad=grad, **TOL)
    both_raise(RuntimeError, lambda x: F.avg_pool3d(x, 9), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_adaptive_max_pool3d(dtype):
    grad = dtype == torch.float32
    check(lambda x: F.adaptive_max_pool3d(x, (2, 3, 4), return_indices=True), R(2, 3, 5, 7, 6, dtype=dtype), grad=grad)
    check(lambda x: F.adaptive_max_pool3d(x, 3, return_indices=True), R(2, 4, 3, 5, dtype=dtype), grad=grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fractional_max_pool(dtype):
    grad = dtype == torch.float32
    x, u = R(2, 3, 9, 8, dtype=dtype), torch.rand(2, 3, 2).to(dtype)
    check(lambda x: F.fractional_max_pool2d(x, (2, 3), output_size=(4, 3), _random_samples=u.to(x.device),
                                            return_indices=True), x, grad=grad)
    x, u = R(3, 7, 7, dtype=dtype), torch.rand(1, 3, 2).to(dtype)
    check(lambda x: F.fractional_max_pool2d(x, 2, output_ratio=(0.5, 0.5), _random_samples=u.to(x.device)), x,
          grad=grad)
    x, u = R(2, 3, 6, 7, 8, dtype=dtype), torch.rand(2, 3, 3).to(dtype)
    check(lambda x: F.fractional_max_pool3d(x, (2, 3, 2), output_size=(3, 2, 4), _random_samples=u.to(x.device),
                                            return_indices=True), x, grad=grad)
    both_raise(RuntimeError, lambda x: F.fractional_max_pool2d(x, 5, output_size=(6, 6), _random_samples=u[:, :, :2]),
               R(2, 3, 9, 8))


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64])  # float64: weights in double, like PyTorch
def test_bicubic_and_antialias(dtype):
    grad = dtype == torch.float32
    tol = TOL if grad else {}
    x = R(2, 3, 5, 7, dtype=dtype)
    for size, align in [((9, 4), False), ((3, 11), True)]:
        check(lambda x: F.interpolate(x, size=size, mode="bicubic", align_corners=align), x, grad=grad, **tol)
        if dtype in (torch.float32, torch.float64):
            check(lambda x: F.interpolate(x, size=size, mode="bilinear", antialias=True, align_corners=align), x,
                  grad=grad, **tol)
    check(lambda x: F.interpolate(x, scale_factor=1.7, mode="bicubic"), x, grad=grad, **tol)


@pytest.mark.parametrize("mode,padding,align", [
    ("bilinear", "zeros", False), ("bilinear", "border", True), ("bilinear", "reflection", False),
    ("bilinear", "reflection", True), ("nearest", "zeros", True), ("nearest", "reflection", False),
    ("bicubic", "zeros", False), ("bicubic", "border", True), ("bicubic", "reflection", False)])
def test_grid_sample_2d(mode, padding, align):
    x, g = R(2, 3, 5, 6), torch.rand(2, 4, 3, 2) * 2.4 - 1.2
    check(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align), x, g, grad=True,
          **TOL)


@pytest.mark.parametrize("mode,padding", [("bilinear", "zeros"), ("bilinear", "reflection"), ("nearest", "border")])
def test_grid_sample_3d(mode, padding):
    x, g = R(2, 2, 3, 4, 5), torch.rand(2, 2, 3, 2, 3) * 2.4 - 1.2
    check(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=False), x, g, grad=True,
          **TOL)


def test_grid_sample_dtypes_and_errors():
    x, g = R(1, 2, 4, 4), torch.rand(1, 3, 3, 2) * 2 - 1
    check(lambda x, g: F.grid_sample(x, g, align_corners=True), x.double(), g.double(), grad=True)
    check(lambda x, g: F.grid_sample(x, g, align_corners=True), x.bfloat16(), g.bfloat16())
    both_raise(RuntimeError, lambda x, g: F.grid_sample(x, g, align_corners=False), x, g[..., :1])
    both_raise(RuntimeError, lambda x, g: F.grid_sample(x, g, mode="bicubic", align_corners=False),
               R(1, 2, 3, 3, 3), torch.rand(1, 2, 2, 2, 3))


def test_grid_sample_3d_unnormalize_rounding():
    # (g + 1) * 23 just above a power of two: subtracting 1 drops a binade, where an FMA rounds
    # differently from PyTorch's two roundings. A ramp along H (D = W = 1) gives the exact coordinate.
    gy = (torch.tensor([16.0, 32.0, 64.0]).repeat(8) + torch.rand(24)) / 23 - 1
    g = torch.stack([torch.rand(24) * 2 - 1, gy, torch.rand(24) * 2 - 1], -1).reshape(1, 4, 6, 1, 3)
    x = torch.arange(23.).reshape(1, 1, 1, 23, 1).repeat(1, 2, 1, 1, 1)
    check(lambda x, g: F.grid_sample(x, g, padding_mode="reflection", align_corners=False), x, g, rtol=0, atol=0)

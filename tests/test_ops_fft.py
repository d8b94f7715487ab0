"""FFT (csrc/lower/fft.cpp: _fft_r2c, _fft_c2c, _fft_c2r) against CPU: torch.fft functions with every norm,
float32 and complex64 inputs, forward, and backward in float32."""
import pytest
import torch

import torch_tpu  # noqa: F401
from tpu_check import check

torch.manual_seed(0)
REAL = torch.randn(3, 6, 8)
CPLX = torch.randn(3, 6, 8, dtype=torch.complex64)
NORMS = [None, "ortho", "forward"]


def as_real(f):
    def g(*a, **k):
        y = f(*a, **k)
        return torch.view_as_real(y.resolve_conj()) if y.is_complex() else y
    g.__name__ = f.__name__
    return g


FNS = {
    "fft": (torch.fft.fft, {}), "ifft": (torch.fft.ifft, {}), "rfft": (torch.fft.rfft, {}),
    "irfft": (torch.fft.irfft, {}), "fft2": (torch.fft.fft2, {}), "rfft2": (torch.fft.rfft2, {}),
    "irfft2": (torch.fft.irfft2, {}), "fftn": (torch.fft.fftn, {}), "hfft": (torch.fft.hfft, {}),
    "fft_n": (torch.fft.fft, {"n": 5, "dim": 1}), "irfft_n": (torch.fft.irfft, {"n": 7}),
    "rfftn_dims": (torch.fft.rfftn, {"dim": (0, 2)}), "ifftn_s": (torch.fft.ifftn, {"s": (4, 5), "dim": (2, 0)}),
}
REAL_IN = ["fft", "ifft", "rfft", "irfft", "fft2", "rfft2", "irfft2", "fftn", "hfft", "fft_n", "irfft_n",
           "rfftn_dims", "ifftn_s"]
COMPLEX_IN = ["fft", "ifft", "irfft", "fft2", "irfft2", "fftn", "hfft", "fft_n", "irfft_n", "ifftn_s"]


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", REAL_IN)
def test_real_forward(name, norm):
    f, kw = FNS[name]
    check(as_real(f), REAL, norm=norm, **kw)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", COMPLEX_IN)
def test_complex_forward(name, norm):
    f, kw = FNS[name]
    check(as_real(f), CPLX, norm=norm, **kw)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", REAL_IN)
def test_backward(name, norm):
    f, kw = FNS[name]
    check(as_real(f), REAL, grad=True, norm=norm, **kw)


def test_fft_4d():
    check(as_real(torch.fft.fftn), torch.randn(2, 3, 4, 5, dtype=torch.complex64))
    check(as_real(torch.fft.rfftn), torch.randn(2, 3, 4, 5), grad=True, norm="ortho")
    check(torch.fft.irfftn, torch.randn(2, 3, 4, 5, dtype=torch.complex64))


def test_out():
    def f(x):
        out = torch.empty(3, 6, 5, dtype=torch.complex64, device=x.device)
        torch.fft.rfft(x, out=out)
        return torch.view_as_real(out)
    check(f, REAL)


def test_errors():
    for dev in ("cpu", "tpu"):
        with pytest.raises(IndexError):
            torch.fft.fft(REAL.to(dev), dim=5)
        with pytest.raises(RuntimeError):
            torch.fft.fft(REAL.to(dev), n=0)
        with pytest.raises(RuntimeError):
            torch.fft.rfft(CPLX.to(dev))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_types_unsupported(dtype):
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="Unsupported dtype"):
            torch.fft.fft(REAL.to(dtype).to(dev))


def test_other_dtypes():
    check(as_real(torch.fft.rfft2), REAL.double())
    check(as_real(torch.fft.ifft), CPLX.to(torch.complex128), norm="ortho")
    check(as_real(torch.fft.fft), torch.arange(12).reshape(3, 4))  # integers promote to float


def test_lazy_conj_inputs():
    # results with the lazy conj bit (ifft of real input, x.conj()) must be materialized when read
    check(lambda x: torch.view_as_real(x.conj() * 2), CPLX)
    check(lambda x: torch.view_as_real(x.conj().clone()), CPLX)
    check(lambda x: torch.view_as_real(torch.fft.ifft(x).resolve_conj()), REAL)


def test_view_as_real_write():
    def f(x):
        y = x.clone()
        torch.view_as_real(y)[..., 1].mul_(3)  # writes through a real view of a complex base
        return torch.view_as_real(y)
    check(f, CPLX)

"""Special math functions (csrc/lower/special.cpp) against CPU: gamma family, modified Bessel functions,
erfcx / ndtri / log_ndtr, entr, xlog1py; forward in float32 / bfloat16 / float16, backward in float32."""
import pytest
import torch

import torch_tpu  # noqa: F401
from tpu_check import check

INF, NAN = float("inf"), float("nan")
# a spread of arguments: negative, near poles, small, around the zeros of lgamma and digamma, large
REAL = torch.tensor([-7.3, -2.5, -1.5, -0.7, -0.3, -1e-3, 1e-4, 0.25, 0.5, 1.0, 1.4616, 2.0, 3.7, 9.5, 10.5,
                     17.0, 45.0, 120.0, 1e4, 3e7])
POS = torch.tensor([1e-3, 0.1, 0.5, 1.0, 1.4616, 2.0, 3.7, 9.5, 12.0, 33.0, 250.0])
EDGE = torch.tensor([0.0, -0.0, -1.0, -2.0, -5.0, INF, -INF, NAN])
BESSEL = torch.tensor([-100.0, -30.0, -14.9, -7.5, -1.0, -1e-3, 0.0, 1e-3, 0.6, 3.0, 8.0, 14.99, 15.0, 15.01,
                       40.0, 87.0, 95.0, INF, -INF, NAN])

UNARY = {
    "lgamma": torch.lgamma, "digamma": torch.digamma, "i0": torch.i0, "i0e": torch.special.i0e,
    "i1": torch.special.i1, "i1e": torch.special.i1e, "entr": torch.special.entr,
}
HALF_OK = ["lgamma", "digamma", "i0", "i0e", "i1", "i1e", "entr"]  # CPU has half kernels for these


@pytest.mark.parametrize("name", list(UNARY))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_unary_forward(name, dtype):
    fn = UNARY[name]
    x = torch.cat([REAL, EDGE, BESSEL]) if name.startswith("i") else torch.cat([REAL, EDGE])
    if dtype == torch.float16:
        x = x[x.abs() < 6e4]
    check(fn, x.to(dtype))


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_backward(name):
    x = BESSEL[BESSEL.isfinite()].clamp(-30, 30) if name.startswith("i") else REAL[REAL.abs() < 1e3]
    if name == "entr":
        x = POS
    check(UNARY[name], x, grad=True)


@pytest.mark.parametrize("name", ["lgamma", "digamma", "i0", "special_i1e", "special_entr", "special_erfcx"])
def test_out_and_inplace(name):
    fn = getattr(torch.special, name[8:]) if name.startswith("special_") else getattr(torch, name)

    def out(x):
        o = torch.empty_like(x)
        fn(x, out=o)
        return o
    check(out, POS.clone())
    if hasattr(torch.Tensor, name + "_"):
        check(lambda x: getattr(x.clone(), name + "_")(), POS)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_integer_inputs_promote(dtype):
    x = torch.tensor([-3, -1, 0, 1, 2, 5, 40]).to(dtype)
    for fn in [torch.lgamma, torch.digamma, torch.i0, torch.special.i1e, torch.special.erfcx,
               torch.special.log_ndtr, torch.special.entr, lambda v: torch.polygamma(2, v)]:
        assert check(fn, x).dtype == torch.float32


def test_lgamma_poles_and_signs():
    x = torch.tensor([0.0, -0.0, -1.0, -4.0, -100.0, -1e10, -0.5, -1.5, -2.5, 1e-30, 3e38])
    r = check(torch.lgamma, x)
    assert torch.isinf(r[:6]).all() and (r[:6] > 0).all()


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 6])
def test_polygamma(n):
    x = torch.cat([POS, torch.tensor([-0.3, -1.5, -2.5, -3.7, 3e3])])
    check(lambda v: torch.polygamma(n, v), x)
    check(lambda v: torch.special.polygamma(n, v), x.bfloat16())
    if n >= 2:  # trigamma (n = 1) on CPU gives large finite values at the negative integer poles
        check(lambda v: torch.polygamma(n, v), torch.tensor([0.0, -1.0, -3.0]))
    check(lambda v: torch.polygamma(n, v), POS[:8], grad=True)


def test_polygamma_out_inplace():
    x = torch.cat([POS, torch.tensor([-1.5, -2.5])])

    def out(v):
        o = torch.empty_like(v)
        torch.polygamma(3, v, out=o)
        return o
    check(out, x)
    check(lambda v: v.clone().polygamma_(2), x)


def test_polygamma_negative_n():
    for dev in ["cpu", "tpu"]:
        with pytest.raises(RuntimeError):
            torch.polygamma(-1, torch.ones(3, device=dev))


def test_erfcx_log_ndtr():
    x = torch.tensor([-30.0, -9.0, -5.0, -1.5, -0.3, 0.0, 0.2, 0.5, 1.0, 2.0, 4.0, 9.0, 26.0, 1e3, 1e10, 1e30,
                      INF, -INF, NAN])
    check(torch.special.erfcx, x)
    check(torch.special.log_ndtr, torch.cat([x, torch.tensor([-200.0, -1e4, 5.0, 7.0])]))
    g = torch.tensor([-8.0, -3.0, -1.5, -0.3, 0.0, 0.2, 0.5, 1.0, 2.0, 4.0, 9.0])
    check(torch.special.erfcx, g, grad=True)
    check(torch.special.log_ndtr, g, grad=True)


def test_ndtri():
    p = torch.tensor([0.0, 1e-37, 1e-30, 1e-10, 1e-5, 0.01, 0.02425, 0.1, 0.3, 0.5, 0.7, 0.9, 0.97575, 0.999,
                      1 - 2 ** -20, 1 - 2 ** -24, 1.0, -0.5, 1.5, NAN])
    check(torch.special.ndtri, p)
    check(torch.special.ndtri, torch.linspace(0.001, 0.999, 999))
    check(torch.special.ndtri, torch.tensor([1e-10, 1e-3, 0.1, 0.4, 0.5, 0.8, 0.999]), grad=True)


def test_entr_edges():
    check(torch.special.entr, torch.tensor([-1.0, -0.0, 0.0, 1e-30, 0.3, 1.0, 5.0, INF, -INF, NAN]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_xlog1py(dtype):
    x = torch.tensor([[0.0, 1.0, -2.0, 3.5, 0.0, 2.0, 1e-3]]).to(dtype)
    y = torch.tensor([[NAN], [-1.0], [-0.5], [0.0], [1e-4], [7.0]]).to(dtype)
    check(torch.special.xlog1py, x, y)
    check(lambda a: torch.special.xlog1py(2.0, a), y)
    check(lambda a: torch.special.xlog1py(a, 3), x)
    if dtype == torch.float32:
        check(torch.special.xlog1py, torch.tensor([0.5, 1.0, -2.0, 3.5]), torch.tensor([0.1, 2.0, -0.5, 7.0]),
              grad=True)

        def out(a, b):
            o = torch.empty(6, 7, device=a.device)
            torch.special.xlog1py(a, b, out=o)
            return o
        check(out, x, y)


@pytest.mark.parametrize("p", [1, 3, 5])
def test_mvlgamma(p):
    x = torch.tensor([2.6, 3.0, 4.5, 10.0, 77.0])
    check(lambda v: torch.mvlgamma(v, p), x)
    check(lambda v: torch.special.multigammaln(v, p), x.bfloat16())
    check(lambda v: torch.mvlgamma(v, p), x, grad=True)


def test_mvlgamma_out_and_outside_domain():
    # this PyTorch no longer rejects x <= (p - 1) / 2: both devices return the lgamma sum
    check(lambda v: torch.mvlgamma(v, 3), torch.tensor([0.1, 0.7, 3.0]))

    def out(v):
        o = torch.empty_like(v)
        torch.mvlgamma(v, 2, out=o)
        return o
    check(out, torch.tensor([1.5, 4.0, 9.0]))
    check(lambda v: v.clone().mvlgamma_(2), torch.tensor([1.5, 4.0, 9.0]))


def test_shapes():
    x = torch.rand(3, 1, 4) * 10 - 3
    check(torch.lgamma, x)
    check(torch.special.i0e, x.transpose(0, 2))
    check(torch.digamma, torch.empty(0, 3))
    check(torch.special.ndtri, torch.tensor(0.3))


def test_float64_gamma_and_bessel():
    # float64 keeps double-precision methods for these (erfcx / log_ndtr / ndtri are float32-grade, ~1e-7)
    x = torch.cat([REAL, EDGE]).double()
    for fn in [torch.lgamma, torch.digamma, lambda v: torch.polygamma(3, v)]:
        check(fn, x)
    for fn in [torch.i0, torch.special.i0e, torch.special.i1, torch.special.i1e]:
        check(fn, BESSEL.double())


def test_mvlgamma_bad_p():
    for dev in ["cpu", "tpu"]:
        with pytest.raises(RuntimeError):
            torch.mvlgamma(torch.tensor([3.0], device=dev), 0)

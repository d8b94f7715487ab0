"""torch.special Bessel / Airy functions, orthogonal polynomials, Hurwitz zeta and the incomplete gamma functions
(csrc/lower/special_functions.cpp) against CPU PyTorch. The transcendental functions are compared with CPU's
float64 kernels as well: CPU's float32 Airy and Bessel J/Y kernels are themselves off by up to ~1e-6 absolute."""
import pytest
import torch

from tests.tpu_check import both_raise, check, assert_close

S = torch.special
INF, NAN = float("inf"), float("nan")
GRID = torch.cat([torch.linspace(-30, 30, 241), torch.tensor([0.0, 1e-6, -1e-6, 1.0, -1.0, 8.0, 9.0, 17.0, 120.0,
                                                              INF, -INF, NAN])])
UNARY = [S.airy_ai, S.bessel_j0, S.bessel_j1, S.bessel_y0, S.bessel_y1, S.modified_bessel_i0, S.modified_bessel_i1,
         S.modified_bessel_k0, S.modified_bessel_k1, S.scaled_modified_bessel_k0, S.scaled_modified_bessel_k1,
         S.spherical_bessel_j0]


def check64(fn, *args, rtol=2e-5, atol=2e-6):
    """fn on tpu (float32 arguments) equals fn on CPU in float64, rounded to float32."""
    expected = fn(*[a.double() if isinstance(a, torch.Tensor) else a for a in args]).float()
    actual = fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])
    assert_close(actual, expected, rtol=rtol, atol=atol, msg=fn.__name__)


@pytest.mark.parametrize("fn", UNARY, ids=lambda f: f.__name__)
def test_unary(fn):
    check64(fn, GRID)
    check(fn, torch.arange(-9, 10), atol=5e-6)           # int64 -> float32


def test_unary_bool_out():
    check(S.bessel_y1, torch.tensor([True, False]))
    out = torch.empty(3, device="tpu")
    S.modified_bessel_k1(torch.tensor([0.5, 2.0, 20.0], device="tpu"), out=out)
    assert_close(out, S.modified_bessel_k1(torch.tensor([0.5, 2.0, 20.0])))


POLYS = [S.chebyshev_polynomial_t, S.chebyshev_polynomial_u, S.chebyshev_polynomial_v, S.chebyshev_polynomial_w,
         S.shifted_chebyshev_polynomial_t, S.shifted_chebyshev_polynomial_u, S.shifted_chebyshev_polynomial_v,
         S.shifted_chebyshev_polynomial_w, S.hermite_polynomial_h, S.hermite_polynomial_he,
         S.laguerre_polynomial_l, S.legendre_polynomial_p]


@pytest.mark.parametrize("fn", POLYS, ids=lambda f: f.__name__)
def test_polynomial(fn):
    x = torch.cat([torch.linspace(-1.2, 1.2, 13), torch.tensor([-1.0, 0.0, 0.5, 1.0, 3.5])]).reshape(-1, 1)
    n = torch.tensor([-2.0, 0.0, 1.0, 2.0, 3.0, 6.0, 7.0, 9.0, 12.0, 4.7])
    check(fn, x, n, atol=1e-4)
    check(fn, torch.arange(-3, 4).reshape(-1, 1), torch.arange(-1, 11))  # int64 -> float32, x = +-1 and 0 exactly
    check(fn, x.flatten(), 5)             # n_scalar


def test_polynomial_bool_empty_out():
    check(S.hermite_polynomial_h, torch.tensor(True), torch.tensor(3))
    check(S.shifted_chebyshev_polynomial_v, 0.25, torch.tensor([0.0, 3.0, 7.0, 9.0]))  # x_scalar
    check(S.legendre_polynomial_p, torch.empty(0, 3), torch.empty(3))
    check(S.chebyshev_polynomial_u, torch.tensor([0.5, 2.0, 0.5, 2.0, 1.0]), torch.tensor([NAN, NAN, INF, -INF, 1e30]))
    out = torch.empty(4, device="tpu")
    x, n = torch.tensor([0.5, -2.0, 1.0, 3.0]), torch.tensor([3, 8, 2, 5])
    S.chebyshev_polynomial_w(x.to("tpu"), n.to("tpu"), out=out)
    assert_close(out, S.chebyshev_polynomial_w(x, n))


def test_zeta():
    x = torch.tensor([1.5, 2.0, 3.3, 8.9, 1.01, 1.0, 0.5, 4.0, 3.0, 2.5])
    q = torch.tensor([[0.01], [0.3], [1.0], [7.5], [20.0]])
    check(S.zeta, x, q)
    check(S.zeta, torch.tensor([2.0, 3.0, 4.0, 2.0, 2.5, 2.0]), torch.tensor([-3.5, -8.5, -0.5, -2.0, -2.5, 0.0]))
    check(S.zeta, torch.arange(-1, 6).reshape(-1, 1), torch.arange(-3, 9))  # int64 -> float32
    check(S.zeta, torch.tensor([2.0, INF, NAN, 2.0, 2.0, INF, 3.0, 50.0, 2.0, INF]),
          torch.tensor([INF, 2.0, 2.0, NAN, -INF, -0.5, -1000.5, 0.5, 1e-30, 0.5]))
    check(S.zeta, 2.0, q)
    check(S.zeta, x, 2.0)


@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac], ids=lambda f: f.__name__)
def test_igamma(fn):
    a = torch.tensor([0.01, 0.5, 1.0, 3.0, 8.0, 25.0, 150.0, 0.0, INF, -1.0, NAN]).reshape(-1, 1)
    x = torch.tensor([1e-3, 0.3, 0.5, 1.0, 2.5, 7.0, 8.5, 30.0, 140.0, 170.0, 0.0, INF, -1.0, NAN])
    check(fn, a, x)
    check(fn, a.half(), x.half())
    y = a.expand(11, 14).clone().to("tpu")
    getattr(y, fn.__name__ + "_")(x.to("tpu"))
    assert_close(y, fn(a, x))
    out = torch.empty(11, 14, device="tpu")
    fn(a.to("tpu"), x.to("tpu"), out=out)
    assert_close(out, fn(a, x))


def test_errors():
    both_raise(RuntimeError, S.zeta, torch.ones(2), torch.ones(3))
    both_raise(RuntimeError, S.chebyshev_polynomial_t, torch.ones(2), torch.ones(3))
    both_raise(RuntimeError, torch.igamma, torch.ones(2), torch.ones(3))
    both_raise(RuntimeError, torch.igamma, torch.ones(2, dtype=torch.long), torch.ones(2, dtype=torch.long))


def test_float64_matches_mpmath():
    mpmath = pytest.importorskip("mpmath")
    x = torch.tensor([0.3, 2.5, 5.421528, 5.576059, 8.9, 16.9, 17.1, 40.0], dtype=torch.float64)
    refs = {S.bessel_j0: lambda v: mpmath.besselj(0, v), S.bessel_j1: lambda v: mpmath.besselj(1, v),
            S.bessel_y0: lambda v: mpmath.bessely(0, v), S.bessel_y1: lambda v: mpmath.bessely(1, v),
            S.modified_bessel_k0: lambda v: mpmath.besselk(0, v), S.airy_ai: lambda v: mpmath.airyai(-v)}
    for fn, ref in refs.items():
        arg = -x if fn is S.airy_ai else x
        want = torch.tensor([float(ref(v)) for v in x.tolist()], dtype=torch.float64)
        assert_close(fn(arg.to("tpu")), want, rtol=1e-9, atol=1e-15, msg=fn.__name__)  # J, Y: 5e-10 near x = 17


@pytest.mark.xfail(strict=True, reason="CPU's float64 bessel_j0 is off by 1.9e-7 at x = 5.4215 (mpmath agrees with tpu "
                                       "to 1e-14, see test_float64_matches_mpmath)")
def test_float64_j0_vs_cpu():
    check(S.bessel_j0, torch.tensor([5.421528], dtype=torch.float64))

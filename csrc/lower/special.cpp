// Special math functions (gamma family, modified Bessel, error-function relatives, entropy). StableHLO has
// none, so each is an explicit numerical method evaluated in the result's compute type: Lanczos for lgamma,
// recurrence + asymptotic series for digamma and the Hurwitz zeta (polygamma), power / asymptotic series for
// I0 and I1, erfcx and log_ndtr from elementwise.cpp's erfcx, Giles's erfinv polynomials and Newton steps for ndtri.
#include <cmath>
#include <vector>

#include "lower/helpers.h"

namespace tpu::lower {
using hlo::Cmp;
using hlo::Op;

namespace {

constexpr double kPi = 3.14159265358979323846;

Value lt(Builder& b, Value x, double v) { return b.compare(x, K(b, x, v), Cmp::LT); }
Value eq(Builder& b, Value x, double v) { return b.compare(x, K(b, x, v), Cmp::EQ); }
Value un(Builder& b, Op op, Value x) { return b.unary(op, x); }
Value recip(Builder& b, Value x) { return b.div(K(b, x, 1), x); }
// c[0] + c[1] t + c[2] t^2 + ...
Value poly(Builder& b, Value t, const std::vector<double>& c) {
  Value p = K(b, t, c.back());
  for (size_t i = c.size() - 1; i-- > 0;) p = b.add(K(b, t, c[i]), b.mul(p, t));
  return p;
}
// x^n for a structural n >= 0, by squaring
Value ipow(Builder& b, Value x, int64_t n) {
  Value r = K(b, x, 1);
  for (Value p = x; n > 0; n >>= 1, p = b.mul(p, p))
    if (n & 1) r = b.mul(r, p);
  return r;
}
// x - round(x), exact: |sin(pi x)| and tan(pi x) from it stay accurate near the integers
Value near_int_offset(Builder& b, Value x) { return b.sub(x, un(b, Op::RoundNearestEven, x)); }
Value is_int(Builder& b, Value x) { return b.compare(x, un(b, Op::Floor, x), Cmp::EQ); }

// ---- gamma family
// lgamma for x >= 0.5: Lanczos (g = 7, 9 terms), ln sqrt(2 pi) + (x - 1/2) ln t - t + ln A(x), t = x + 6.5
Value lgamma_pos(Builder& b, Value x) {
  static const double c[] = {0.99999999999980993,  676.5203681218851,     -1259.1392167224028,
                             771.32342877765313,   -176.61502916214059,   12.507343278686905,
                             -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7};
  Value xm = b.sub(x, K(b, x, 1));
  Value a = K(b, x, c[0]);
  for (int i = 1; i < 9; ++i) a = b.add(a, b.div(K(b, x, c[i]), b.add(xm, K(b, x, i))));
  Value t = b.add(xm, K(b, x, 7.5));
  Value r = b.sub(b.mul(b.sub(xm, K(b, x, -0.5)), un(b, Op::Log, t)), t);
  return b.add(b.add(r, K(b, x, 0.91893853320467274)), un(b, Op::Log, a));
}
// |x| < 0.5 by reflection: lgamma(x) = ln(pi / |sin(pi x)|) - lgamma(1 - x); poles give +inf
Value lgamma_of(Builder& b, Value x) {
  Value s = un(b, Op::Abs, un(b, Op::Sine, b.mul(K(b, x, kPi), near_int_offset(b, x))));
  Value refl = b.sub(un(b, Op::Log, b.div(K(b, x, kPi), s)), lgamma_pos(b, b.sub(K(b, x, 1), x)));
  Value neg_pole = b.and_(b.compare(x, K(b, x, 0), Cmp::LE), is_int(b, x));
  refl = b.select(neg_pole, K(b, x, INFINITY), refl);
  Value r = b.select(lt(b, x, 0.5), refl, lgamma_pos(b, x));
  return b.select(eq(b, un(b, Op::Abs, x), INFINITY), K(b, x, INFINITY), r);
}

// digamma: reflection below 0.5 (psi(1 - x) - pi / tan(pi x)), recurrence up to 10, asymptotic series
Value digamma_of(Builder& b, Value x) {
  Value neg = lt(b, x, 0.5);
  Value y = b.select(neg, b.sub(K(b, x, 1), x), x);
  Value acc = zeros(b, x.type);
  for (int i = 0; i < 10; ++i) {
    Value small = lt(b, y, 10);
    acc = b.select(small, b.sub(acc, recip(b, y)), acc);
    y = b.select(small, b.add(y, K(b, y, 1)), y);
  }
  Value w = recip(b, b.mul(y, y));  // -sum B_2k / (2k y^2k)
  Value series = b.mul(w, poly(b, w, {-1.0 / 12, 1.0 / 120, -1.0 / 252, 1.0 / 240, -1.0 / 132, 691.0 / 32760,
                                      -1.0 / 12}));
  Value r = b.add(acc, b.add(b.sub(un(b, Op::Log, y), b.div(K(b, y, 0.5), y)), series));
  Value refl = b.sub(r, b.div(K(b, x, kPi), un(b, Op::Tan, b.mul(K(b, x, kPi), near_int_offset(b, x)))));
  r = b.select(neg, refl, r);
  // PyTorch: psi(+-0) = -+inf, psi(negative integer) = NaN, psi(inf) = inf
  Value zero = eq(b, x, 0);
  DType it = x.type.dtype == DType::F64 ? DType::S64 : x.type.dtype == DType::F32 ? DType::S32 : DType::S16;
  Value bits = b.bitcast_convert(x, it);
  Value signed_inf = b.select(lt(b, bits, 0), K(b, x, INFINITY), K(b, x, -INFINITY));
  r = b.select(b.and_(lt(b, x, 0), is_int(b, x)), K(b, x, NAN), r);
  r = b.select(eq(b, x, INFINITY), x, r);
  return b.select(zero, signed_inf, r);
}

// polygamma(n >= 1, x) = (-1)^(n+1) n! zeta(n + 1, x), the Hurwitz zeta by direct terms until x + k >= 10
// (up to 30 of them) then Euler-Maclaurin.
Value polygamma_of(Builder& b, int64_t n, Value x) {
  if (n == 0) return digamma_of(b, x);
  int64_t s = n + 1;
  Value a = x, acc = zeros(b, x.type), comp = acc;  // Neumaier summation: terms of both signs cancel for x < 0
  for (int i = 0; i < 30; ++i) {
    Value small = lt(b, a, 10);
    Value term = b.select(small, recip(b, ipow(b, a, s)), zeros(b, x.type));
    Value t = b.add(acc, term);
    Value big = b.compare(un(b, Op::Abs, acc), un(b, Op::Abs, term), Cmp::GE);
    comp = b.add(comp, b.select(big, b.add(b.sub(acc, t), term), b.add(b.sub(term, t), acc)));
    acc = t;
    a = b.select(small, b.add(a, K(b, a, 1)), a);
  }
  acc = b.add(acc, comp);
  // tail: a^-s (a / (s - 1) + 1/2 + sum_j B_2j / (2j)! (s)_(2j-1) a^(1-2j))
  static const double bern[] = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6,
                                -3617.0 / 510, 43867.0 / 798};
  std::vector<double> coef;
  double poch = 1, fact = 1;  // (s)_(2j-1), (2j)!
  for (int j = 1; j <= 9; ++j) {
    poch *= (j == 1) ? s : (s + 2.0 * j - 3) * (s + 2.0 * j - 2);
    fact *= (2.0 * j - 1) * (2.0 * j);
    coef.push_back(bern[j - 1] / fact * poch);
  }
  Value ia = recip(b, a);
  Value sum = b.mul(ia, poly(b, b.mul(ia, ia), coef));
  Value tail = b.mul(ipow(b, ia, s), b.add(b.add(b.div(a, K(b, a, s - 1.0)), K(b, a, 0.5)), sum));
  Value z = b.add(acc, tail);
  double scale = (n % 2 ? 1.0 : -1.0) * std::tgamma(n + 1.0);
  Value r = b.mul(z, K(b, z, scale));
  // poles at non-positive integers: zeta = inf there, as in PyTorch
  Value pole = b.and_(b.compare(x, K(b, x, 0), Cmp::LE), is_int(b, x));
  return b.select(pole, K(b, x, scale * INFINITY), r);
}

// ---- modified Bessel functions of order 0 and 1: exp(-|x|) I_nu(x) for |x| (I1 is odd)
// |x| < 15 (40 in float64): power series sum_k (x^2/4)^k / (k! (k+nu)!) (times (x/2)^nu); above: the asymptotic
// series exp(|x|) / sqrt(2 pi |x|) sum_k (-1)^k a_k(nu) / |x|^k, a_k = prod_j (4 nu^2 - (2j-1)^2) / (8j), whose
// 13th term is below float64's rounding from |x| = 40 on.
Value bessel_scaled(Builder& b, Value ax, int nu) {
  bool f64 = ax.type.dtype == DType::F64;
  double big = f64 ? 40 : 15;
  Value xs = b.min(ax, K(b, ax, big));  // keeps the unused branch finite
  Value y = b.mul(b.mul(xs, xs), K(b, xs, 0.25));
  Value p = K(b, y, 1);
  for (int k = f64 ? 72 : 40; k >= 1; --k) p = b.add(K(b, y, 1), b.div(b.mul(p, y), K(b, y, double(k) * (k + nu))));
  if (nu == 1) p = b.mul(p, b.mul(xs, K(b, xs, 0.5)));
  Value small = b.mul(p, un(b, Op::Exp, un(b, Op::Neg, xs)));
  std::vector<double> coef{1};
  double ak = 1;
  for (int j = 1; j <= 12; ++j) {
    ak *= -(4.0 * nu * nu - (2.0 * j - 1) * (2.0 * j - 1)) / (8.0 * j);
    coef.push_back(ak);
  }
  Value xl = b.max(ax, K(b, ax, big));
  Value large = b.mul(poly(b, recip(b, xl), coef), un(b, Op::Rsqrt, b.mul(xl, K(b, xl, 2 * kPi))));
  return b.select(lt(b, ax, big), small, large);
}
// I_nu(x) = exp(|x|) scaled, as exp(|x|/2)^2 so that it overflows only where I_nu does
Value bessel(Builder& b, Value x, int nu, bool scaled) {
  Value ax = un(b, Op::Abs, x);
  Value r = bessel_scaled(b, ax, nu);
  if (!scaled) {
    Value h = un(b, Op::Exp, b.mul(ax, K(b, ax, 0.5)));
    r = b.mul(b.mul(r, h), h);
  }
  if (nu == 1) r = b.select(lt(b, x, 0), un(b, Op::Neg, r), r);
  return r;
}

// ---- error-function relatives
Value erfcx_of(Builder& b, Value x) {
  Value e = erfcx_nonneg(b, un(b, Op::Abs, x));
  Value neg = b.sub(b.mul(K(b, x, 2), un(b, Op::Exp, b.mul(x, x))), e);  // erfcx(-x) = 2 exp(x^2) - erfcx(x)
  return b.select(lt(b, x, 0), neg, e);
}
// log Phi(x), Phi(x) = erfc(z) / 2 with z = -x / sqrt 2: log erfcx(z) - z^2 - ln 2 for z > 0, else log1p(-erfc(-z)/2)
Value log_ndtr_of(Builder& b, Value x) {
  Value z = b.mul(x, K(b, x, -0.70710678118654752));
  Value az = un(b, Op::Abs, z);
  Value le = log_erfcx_nonneg(b, az);
  Value z2 = b.mul(z, z);
  Value left = b.sub(b.sub(le, z2), K(b, x, 0.69314718055994531));
  Value right = un(b, Op::Log1p, b.mul(K(b, x, -0.5), un(b, Op::Exp, b.sub(le, z2))));
  right = b.select(eq(b, x, INFINITY), K(b, x, 0), right);
  return b.select(lt(b, x, 0), left, right);
}
// ndtri(p) = -ndtri(1 - p) for p > 1/2 (1 - p is exact there). Below: sqrt 2 erfinv(2p - 1) with Giles's erfinv in
// w = -log(1 - (2p-1)^2) = -log(4 p (1 - p)) while w < 16 (its range), the asymptotic -sqrt(L - log L - log 2 pi),
// L = -2 log p, beyond; then Newton steps on log_ndtr(x) = log p. Near p = 1/2 those steps would lose the small
// result's relative accuracy, so p in (1/4, 3/4) takes sqrt 2 erfinv(2p - 1) (2p - 1 is exact there).
Value ndtri_of(Builder& b, Value p) {
  Value q = b.sub(K(b, p, 1), p);
  Value upper = b.compare(p, K(b, p, 0.5), Cmp::GT);
  Value pm = b.max(b.select(upper, q, p), K(b, p, 1e-300));  // (0, 1/2]; 0 is handled below
  Value w = un(b, Op::Neg, un(b, Op::Log, b.mul(K(b, pm, 4), b.mul(pm, b.sub(K(b, pm, 1), pm)))));
  Value x = b.mul(erfinv_giles(b, b.sub(b.add(pm, pm), K(b, pm, 1)), b.min(w, K(b, w, 16))), K(b, pm, M_SQRT2));
  Value logp = un(b, Op::Log, pm);
  Value L = b.mul(logp, K(b, pm, -2));
  Value asym = un(b, Op::Neg, un(b, Op::Sqrt, b.sub(b.sub(L, un(b, Op::Log, L)), K(b, L, 1.8378770664093453))));
  x = b.select(lt(b, w, 16), x, asym);
  // x -= (log Phi(x) - log p) Phi(x) / phi(x); the asymptotic start needs a third step for float64 accuracy
  for (int i = 0, n = p.type.dtype == DType::F64 ? 3 : 2; i < n; ++i) {
    Value lf = log_ndtr_of(b, x);
    Value ratio = b.mul(un(b, Op::Exp, b.add(lf, b.mul(b.mul(x, x), K(b, x, 0.5)))), K(b, x, 2.5066282746310002));
    x = b.sub(x, b.mul(b.sub(lf, logp), ratio));
  }
  Value r = b.select(upper, un(b, Op::Neg, x), x);
  Value centred = b.sub(b.add(p, p), K(b, p, 1));
  r = b.select(lt(b, un(b, Op::Abs, centred), 0.5), b.mul(erfinv_central(b, centred), K(b, p, M_SQRT2)), r);
  r = b.select(eq(b, p, 0), K(b, p, -INFINITY), r);
  r = b.select(eq(b, p, 1), K(b, p, INFINITY), r);
  Value bad = b.or_(lt(b, p, 0), b.compare(p, K(b, p, 1), Cmp::GT));
  return b.select(bad, K(b, p, NAN), r);
}

// ---- rules
template <Value (*F)(Builder&, Value)>
Values unary_fn(Ctx& c) {
  return {result(c, F(c.b, operand(c, 0)))};
}
Value i0_of(Builder& b, Value x) { return bessel(b, x, 0, false); }
Value i0e_of(Builder& b, Value x) { return bessel(b, x, 0, true); }
Value i1_of(Builder& b, Value x) { return bessel(b, x, 1, false); }
Value i1e_of(Builder& b, Value x) { return bessel(b, x, 1, true); }
Value entr_of(Builder& b, Value x) {  // -x ln x, 0 at 0, -inf below
  Value r = b.mul(un(b, Op::Neg, x), un(b, Op::Log, x));
  r = b.select(eq(b, x, 0), K(b, x, 0), r);
  return b.select(lt(b, x, 0), K(b, x, -INFINITY), r);
}

// polygamma(n, self) and polygamma_(self, n)
Values polygamma(Ctx& c) {
  bool n_first = c.arg(0).kind == Arg::Int;
  int64_t n = c.i(n_first ? 0 : 1);
  if (n < 0) c.fail("polygamma(n, x) does not support negative n.");
  return {result(c, polygamma_of(c.b, n, operand(c, n_first ? 1 : 0)))};
}
// mvlgamma(x, p) = p (p - 1) / 4 ln pi + sum_i<p lgamma(x - i / 2)
Values mvlgamma(Ctx& c) {
  int64_t p = c.i(1);
  if (p < 1) c.fail("p has to be greater than or equal to 1");
  Value x = operand(c, 0);
  Value r = K(c.b, x, p * (p - 1) / 4.0 * std::log(kPi));
  for (int64_t i = 0; i < p; ++i) r = c.b.add(r, lgamma_of(c.b, c.b.sub(x, K(c.b, x, i / 2.0))));
  return {result(c, r)};
}
Values xlog1py(Ctx& c) {  // x log1p(y), 0 where x == 0 (unless y is NaN)
  Builder& b = c.b;
  Value x = operand(c, 0), y = operand(c, 1);
  Value r = b.select(eq(b, x, 0), K(b, x, 0), b.mul(x, un(b, Op::Log1p, y)));
  return {result(c, b.select(is_nan(b, y), y, r))};
}

static Register r({
    {"lgamma|lgamma.out", unary_fn<lgamma_of>},
    {"digamma|digamma.out", unary_fn<digamma_of>},
    {"polygamma|polygamma.out", polygamma},
    {"mvlgamma|mvlgamma.out", mvlgamma},
    {"i0|i0.out", unary_fn<i0_of>},
    {"special_i0e|special_i0e.out", unary_fn<i0e_of>},
    {"special_i1|special_i1.out", unary_fn<i1_of>},
    {"special_i1e|special_i1e.out", unary_fn<i1e_of>},
    {"special_erfcx|special_erfcx.out", unary_fn<erfcx_of>},
    {"special_ndtri|special_ndtri.out", unary_fn<ndtri_of>},
    {"special_log_ndtr|special_log_ndtr.out", unary_fn<log_ndtr_of>},
    {"special_entr|special_entr.out", unary_fn<entr_of>},
    {"special_xlog1py|special_xlog1py.self_scalar|special_xlog1py.other_scalar|special_xlog1py.out|"
     "special_xlog1py.self_scalar_out|special_xlog1py.other_scalar_out",
     xlog1py},
});

}  // namespace
// shared through special.h
Value special_lgamma(Builder& b, Value x) { return lgamma_of(b, x); }
Value special_bessel_i(Builder& b, Value x, int nu, bool scaled) { return bessel(b, x, nu, scaled); }
Value special_ndtri(Builder& b, Value p) { return ndtri_of(b, p); }
}  // namespace tpu::lower

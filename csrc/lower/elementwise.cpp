// Elementwise math: unary, binary, comparison, logical, bitwise, select/clamp. Activations: activation.cpp.
#include <cmath>
#include <initializer_list>
#include <utility>
#include <vector>

#include "lower/helpers.h"
#include "lower/special.h"

namespace tpu::lower {
using hlo::Cmp;
using hlo::Op;

namespace {

// erfcx(x) = exp(x^2) erfc(x) on x >= 0, as t exp(P(t)), t = 1 / (1 + x/2): the Numerical Recipes rational
// approximation, relative error below 1.2e-7 for every x (so erfc stays accurate where it is tiny).
std::pair<Value, Value> erfcx_rational(Builder& b, Value ax) {
  Value t = b.div(K(b, ax, 1), b.add(K(b, ax, 1), b.mul(K(b, ax, 0.5), ax)));
  const double coef[] = {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                         0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277};
  Value p = K(b, ax, coef[9]);
  for (int i = 8; i >= 0; --i) p = b.add(K(b, ax, coef[i]), b.mul(t, p));
  return {t, p};
}

// (1 + x/2) erfcx(x) is smooth on [0, inf] as a function of s = (x - 2) / (x + 2): 27 Chebyshev terms of it reach
// float64 accuracy (3e-16).
Value erfcx_chebyshev(Builder& b, Value ax) {
  static const std::vector<double> c{
      0.5770337386164697,     -0.3554369212704985,    0.06509515882878653,    -0.003671142395836639,
      -0.0011128447433526325, 0.0001607582991537808,  3.278031574173137e-05,  -5.442441645505016e-06,
      -1.5154665553171482e-06, 1.4297608181169865e-07, 8.234608827419493e-08,  1.2962846852306563e-09,
      -4.154721631015199e-09, -6.347058278362811e-10, 1.4320822712256225e-10, 6.160390105204585e-11,
      2.0612138554721698e-12, -3.5714931488477042e-12, -8.586422843251796e-13, 6.14560021379063e-14,
      7.418725748596617e-14,  1.2895042755032325e-14, -2.358726385710632e-15, -1.5729349381685912e-15,
      -2.2782966239546465e-16, 6.31233045075643e-17,  3.5916763531814925e-17};
  return b.div(chebyshev_half_line(b, ax, 0, 2, c), b.add(K(b, ax, 1), b.mul(ax, K(b, ax, 0.5))));
}

}  // namespace

Value erfcx_nonneg(Builder& b, Value ax) {
  if (ax.type.dtype == DType::F64) return erfcx_chebyshev(b, ax);
  auto [t, p] = erfcx_rational(b, ax);
  return b.mul(t, b.unary(Op::Exp, p));
}
Value log_erfcx_nonneg(Builder& b, Value ax) {
  if (ax.type.dtype == DType::F64) return b.unary(Op::Log, erfcx_chebyshev(b, ax));
  auto [t, p] = erfcx_rational(b, ax);
  return b.add(b.unary(Op::Log, t), p);
}

namespace {

DType int_of_width(DType t) {
  switch (byte_size(t)) {
    case 1: return DType::S8;
    case 2: return DType::S16;
    case 4: return DType::S32;
    default: return DType::S64;
  }
}
// y exp(e - x^2), with exp(-x^2) as exp(-h^2) exp(-(x - h)(x + h)), h = x with the low half of its mantissa
// cleared (h^2 is exact), so that the rounding of x^2 does not cost relative accuracy for large x. The product
// is formed as (y e^a) e^b: XLA folds e^a e^b back into e^(a+b).
Value times_exp_neg_sq(Builder& b, Value y, Value x, Value e) {
  DType it = int_of_width(x.type.dtype);
  Value bits = b.bitcast_convert(x, it);
  int low = x.type.dtype == DType::F64 ? 27 : x.type.dtype == DType::F32 ? 12 : 0;
  Value h = b.bitcast_convert(b.and_(bits, K(b, bits, -(1ll << low))), x.type.dtype);
  Value rest = b.mul(b.sub(x, h), b.add(x, h));
  return b.mul(b.mul(y, b.unary(Op::Exp, b.unary(Op::Neg, b.mul(h, h)))), b.unary(Op::Exp, b.sub(e, rest)));
}
// erfc(|x|): erfcx(|x|) exp(-x^2) in float64; in float32 t exp(P(t) - x^2) (erfcx_rational).
Value erfc_abs(Builder& b, Value ax) {
  Value e;
  if (ax.type.dtype == DType::F64) {
    e = times_exp_neg_sq(b, erfcx_nonneg(b, ax), ax, zeros(b, ax.type));
  } else {
    auto [t, p] = erfcx_rational(b, ax);
    e = times_exp_neg_sq(b, t, ax, p);
  }
  return b.select(cmp(b, ax, Cmp::EQ, K(b, ax, INFINITY)), K(b, ax, 0), e);  // (inf - inf) above
}

Value erfc_of(Builder& b, Value x) {
  Value e = erfc_abs(b, b.unary(Op::Abs, x));
  return b.select(cmp(b, x, Cmp::LT, K(b, x, 0)), b.sub(K(b, x, 2), e), e);
}

// NaN-propagating max / min (stablehlo.maximum need not propagate a NaN in its second operand).
Value max_of(Builder& b, Value x, Value y, bool is_max = true) {
  Value m = is_max ? b.max(x, y) : b.min(x, y);
  if (!is_float(x.type.dtype)) return m;
  return b.select(b.or_(is_nan(b, x), is_nan(b, y)), b.add(x, y), m);
}

Value signbit_of(Builder& b, Value x) {
  if (x.type.dtype == DType::Pred) return convert(b, zeros(b, x.type), DType::Pred);
  if (!is_float(x.type.dtype)) return cmp(b, x, Cmp::LT, K(b, x, 0));
  Value bits = b.bitcast_convert(x, int_of_width(x.type.dtype));
  return cmp(b, bits, Cmp::LT, K(b, bits, 0));
}
// -x where `sign` has its sign bit set, else x (copysign, for a non-negative x)
Value with_sign_of(Builder& b, Value x, Value sign) { return b.select(signbit_of(b, sign), b.unary(Op::Neg, x), x); }

// PyTorch's result_type: dimensioned tensors outrank 0-d tensors, which outrank Python scalars; a lower
// tier only raises the category (bool < integer < float < complex).
int category(DType t) { return is_complex(t) ? 3 : is_float(t) ? 2 : t == DType::Pred ? 0 : 1; }
DType promote(DType a, DType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) {
    DType hi = ca > cb ? a : b, lo = ca > cb ? b : a;
    if (is_complex(hi) && is_float(lo) && byte_size(lo) == 8) return DType::C128;
    return hi;
  }
  if (ca == 1 && info(a).is_unsigned != info(b).is_unsigned) {
    DType u = info(a).is_unsigned ? a : b, s = info(a).is_unsigned ? b : a;
    if (byte_size(s) > byte_size(u)) return s;
    return byte_size(u) == 1 ? DType::S16 : byte_size(u) == 2 ? DType::S32 : DType::S64;
  }
  if (byte_size(a) == byte_size(b)) return DType::F32;  // f16 with bf16
  return byte_size(a) > byte_size(b) ? a : b;
}
DType combine(int tier_hi, DType hi, int tier_lo, DType lo) {  // tiers: -1 = empty
  if (tier_lo < 0) return hi;
  if (tier_hi < 0) return lo;
  int ch = category(hi), cl = category(lo);
  if (ch == 3) return hi;
  if (cl == 3) return ch == 2 ? (byte_size(hi) == 8 ? DType::C128 : DType::C64) : lo;
  if (ch == 2) return hi;
  if (ch == 0 || cl == 2) return promote(hi, lo);
  return hi;
}
DType result_type(Ctx& c, std::initializer_list<size_t> args) {
  DType tier[3] = {};  // dimensioned, 0-d, Python scalar
  bool seen[3] = {};
  for (size_t i : args) {
    DType t = c.v(i).type.dtype;
    bool number = c.arg(i).kind == Arg::Scalar || (c.arg(i).kind == Arg::Tensor && c.arg(i).i < 0);
    int k = number ? 2 : c.v(i).type.rank() == 0 ? 1 : 0;
    if (k == 2) t = t == DType::F64 ? DType::F32 : t == DType::C128 ? DType::C64 : t;  // default dtypes
    tier[k] = seen[k] ? promote(tier[k], t) : t;
    seen[k] = true;
  }
  DType low = combine(seen[1] ? 1 : -1, tier[1], seen[2] ? 2 : -1, tier[2]);
  return combine(seen[0] ? 0 : -1, tier[0], seen[1] || seen[2] ? 1 : -1, low);
}

// ---- unary
Values abs_(Ctx& c) {  // |complex| is real: take it before converting; unsigned values are their own
  DType t = c.v(0).type.dtype;
  if (info(t).is_unsigned || t == DType::Pred) return {result(c, c.v(0))};
  return is_complex(t) ? Values{result(c, c.b.unary(Op::Abs, c.v(0)))} : unary(c, Op::Abs);
}
Values neg(Ctx& c) { return unary(c, Op::Neg); }
// e^z with C's non-finite cases, which XLA's complex exp makes NaN: e^(x + 0i) is e^x + 0i, e^(inf + i y)
// for a non-finite y is inf + i NaN, e^(-inf + i y) is 0.
Value exp_of(Builder& b, Value z) {
  Value e = b.unary(Op::Exp, z);
  if (!is_complex(z.type.dtype)) return e;
  Value re = b.unary(Op::Real, z), im = b.unary(Op::Imag, z);
  e = b.select(cmp(b, im, Cmp::EQ, K(b, im, 0)), b.binary(Op::Complex, b.unary(Op::Exp, re), im), e);  // no inf * 0
  Value odd = b.unary(Op::Not, b.unary(Op::IsFinite, im));
  Value pos = b.and_(odd, cmp(b, re, Cmp::EQ, K(b, re, INFINITY)));
  Value neg = b.and_(odd, cmp(b, re, Cmp::EQ, K(b, re, -INFINITY)));
  Value inf_nan = b.binary(Op::Complex, K(b, re, INFINITY), K(b, re, NAN));
  return b.select(pos, inf_nan, b.select(neg, zeros(b, z.type), e));
}
Values exp_(Ctx& c) { return {result(c, exp_of(c.b, operand(c, 0)))}; }
Values expm1_(Ctx& c) { return unary(c, Op::Expm1); }
// log z as C's clog where a part is not finite: log|z| with |z| infinite beside a NaN (XLA's complex log
// takes a NaN-dropping |z|: log(1 + NaN i) would be 0 + NaN i).
Value log_of(Builder& b, Value z) {
  Value l = b.unary(Op::Log, z);
  if (!is_complex(z.type.dtype)) return l;
  Value re = b.unary(Op::Real, z), im = b.unary(Op::Imag, z);
  Value odd = b.unary(Op::Not, b.and_(b.unary(Op::IsFinite, re), b.unary(Op::IsFinite, im)));
  Value fixed = b.binary(Op::Complex, b.unary(Op::Log, b.unary(Op::Abs, z)), b.binary(Op::Atan2, im, re));
  return b.select(odd, fixed, l);
}
Values log_(Ctx& c) { return {result(c, log_of(c.b, operand(c, 0)))}; }
Values log1p_(Ctx& c) { return unary(c, Op::Log1p); }
// sqrt(z) as C's csqrt: the imaginary part takes the sign of Im z, also of a zero (XLA's loses -0, which
// puts sqrt(-4 - 0i) on the wrong side of the cut), and an infinite one wins over a NaN.
Value sqrt_of(Builder& b, Value z) {
  Value r = b.unary(Op::Sqrt, z);
  if (!is_complex(z.type.dtype)) return r;
  Value zr = b.unary(Op::Real, z), zi = b.unary(Op::Imag, z), inf = K(b, zi, INFINITY);
  Value root = b.binary(Op::Complex, b.unary(Op::Real, r), with_sign_of(b, b.unary(Op::Abs, b.unary(Op::Imag, r)), zi));
  root = b.select(b.or_(is_nan(b, zr), is_nan(b, zi)), b.binary(Op::Complex, K(b, zr, NAN), K(b, zr, NAN)), root);
  // sqrt(inf + iy) = inf + i0y, sqrt(-inf + iy) = |0y| +- i inf (0y: y's signed zero, NaN for a NaN y);
  // sqrt(x +- i inf) = inf +- i inf
  Value zero_y = b.mul(K(b, zi, 0), zi);
  root = b.select(cmp(b, zr, Cmp::EQ, inf), b.binary(Op::Complex, inf, zero_y), root);
  root = b.select(cmp(b, zr, Cmp::EQ, K(b, zr, -INFINITY)),
                  b.binary(Op::Complex, b.unary(Op::Abs, zero_y), with_sign_of(b, inf, zi)), root);
  return b.select(cmp(b, b.unary(Op::Abs, zi), Cmp::EQ, inf), b.binary(Op::Complex, inf, zi), root);
}
Values sqrt_(Ctx& c) { return {result(c, sqrt_of(c.b, operand(c, 0)))}; }
// 1 / (p + qi) by CPU's (NumPy's) scaled division: with r = q / p, s = 1 / (p + q r), it is s - i r s where
// |p| >= |q| (the roles swapped otherwise); so 1 / (inf + inf i) is NaN and 1 / 0 is inf + i NaN, as on CPU.
Value complex_reciprocal(Builder& b, Value z) {
  Value p = b.unary(Op::Real, z), q = b.unary(Op::Imag, z);
  Value p_major = cmp(b, b.unary(Op::Abs, p), Cmp::GE, b.unary(Op::Abs, q));
  Value big = b.select(p_major, p, q), small = b.select(p_major, q, p);
  Value ratio = b.div(small, big), scale = b.div(K(b, big, 1), b.add(big, b.mul(small, ratio)));
  Value re = b.select(p_major, scale, b.mul(ratio, scale));
  Value im = b.unary(Op::Neg, b.select(p_major, b.mul(ratio, scale), scale));
  Value zero = b.and_(cmp(b, p, Cmp::EQ, K(b, p, 0)), cmp(b, q, Cmp::EQ, K(b, q, 0)));
  re = b.select(zero, K(b, re, INFINITY), re);
  im = b.select(zero, K(b, im, NAN), im);
  return b.binary(Op::Complex, re, im);
}
Values rsqrt(Ctx& c) {
  Value z = operand(c, 0);
  if (!is_complex(z.type.dtype)) return {result(c, c.b.unary(Op::Rsqrt, z))};
  return {result(c, complex_reciprocal(c.b, sqrt_of(c.b, z)))};
}
Values tanh_(Ctx& c) { return unary(c, Op::Tanh); }
Values sigmoid(Ctx& c) { return unary(c, Op::Logistic); }
// sin / cos of a complex z on the imaginary axis, as C: the zero part stays a signed zero where XLA
// multiplies it by an infinite sinh or cosh (0 * inf = NaN).
Values sin_cos(Ctx& c, bool cos) {
  Value z = operand(c, 0), r = c.b.unary(cos ? Op::Cosine : Op::Sine, z);
  if (!is_complex(z.type.dtype)) return {result(c, r)};
  Builder& b = c.b;
  Value x = b.unary(Op::Real, z), y = b.unary(Op::Imag, z);
  Value on_axis = cmp(b, x, Cmp::EQ, K(b, x, 0));
  Value re = b.unary(Op::Real, r), im = b.unary(Op::Imag, r);
  if (cos) {  // cos(+-0 + iy) = cosh y - i (+-0) sinh y
    Value neg = b.binary(Op::Xor, signbit_of(b, x), signbit_of(b, y));
    im = b.select(on_axis, b.select(neg, K(b, x, 0.0), K(b, x, -0.0)), im);
  } else {  // sin(+-0 + iy) = +-0 + i sinh y
    re = b.select(on_axis, x, re);
  }
  return {result(c, b.binary(Op::Complex, re, im))};
}
Values sin_(Ctx& c) { return sin_cos(c, false); }
Values cos_(Ctx& c) { return sin_cos(c, true); }
Values tan_(Ctx& c) { return unary(c, Op::Tan); }
Values floor_(Ctx& c) { return is_integral(c.out[0].dtype) ? Values{c.v(0)} : unary(c, Op::Floor); }
Values ceil_(Ctx& c) { return is_integral(c.out[0].dtype) ? Values{c.v(0)} : unary(c, Op::Ceil); }
Values round_(Ctx& c) { return is_integral(c.out[0].dtype) ? Values{c.v(0)} : unary(c, Op::RoundNearestEven); }
Values round_decimals(Ctx& c) {  // round(x * 10^d) / 10^d, or round(x / 10^-d) * 10^-d
  if (is_integral(c.out[0].dtype)) return {c.v(0)};
  Value x = operand(c, 0);
  int64_t d = c.i(1);
  Value p = K(c.b, x, std::pow(10.0, static_cast<double>(d < 0 ? -d : d)));
  Value r = c.b.unary(Op::RoundNearestEven, d < 0 ? c.b.div(x, p) : c.b.mul(x, p));
  return {result(c, d < 0 ? c.b.mul(r, p) : c.b.div(r, p))};
}
Value trunc_of(Builder& b, Value x) {
  return b.select(cmp(b, x, Cmp::LT, K(b, x, 0)), b.unary(Op::Ceil, x), b.unary(Op::Floor, x));
}
Values trunc_(Ctx& c) { return is_integral(c.out[0].dtype) ? Values{c.v(0)} : Values{result(c, trunc_of(c.b, operand(c, 0)))}; }
Values frac(Ctx& c) {
  Value x = operand(c, 0);
  return {result(c, c.b.sub(x, trunc_of(c.b, x)))};
}
Values sign_(Ctx& c) {  // (x > 0) - (x < 0): sign(NaN) = 0 as on CPU
  if (c.out[0].dtype == DType::Pred) return {c.v(0)};
  Value x = operand(c, 0);
  if (is_complex(x.type.dtype)) return {result(c, c.b.unary(Op::Sign, x))};
  auto as_num = [&](Value p) { return convert(c.b, p, x.type.dtype); };
  return {result(c, c.b.sub(as_num(cmp(c.b, x, Cmp::GT, K(c.b, x, 0))), as_num(cmp(c.b, x, Cmp::LT, K(c.b, x, 0)))))};
}
Values signbit(Ctx& c) { return {signbit_of(c.b, c.v(0))}; }
Values bitwise_not(Ctx& c) { return unary(c, Op::Not); }
Values logical_not(Ctx& c) {
  Value x = convert(c.b, c.v(0), DType::Pred);
  return {convert(c.b, c.b.unary(Op::Not, broadcast_to(c.b, x, c.out[0].dims)), c.out[0].dtype)};
}
Values reciprocal(Ctx& c) {
  Value x = operand(c, 0);
  return {result(c, is_complex(x.type.dtype) ? complex_reciprocal(c.b, x) : c.b.div(K(c.b, x, 1), x))};
}
Values square(Ctx& c) {
  Value x = operand(c, 0);
  return {result(c, c.b.mul(x, x))};
}
Values erf_(Ctx& c) { return {result(c, erf_of(c.b, operand(c, 0)))}; }
Values erfc_(Ctx& c) { return {result(c, erfc_of(c.b, operand(c, 0)))}; }
// erfinv: Giles's polynomials; float64 refines them. For |x| < 1/2 that is erfinv_central. Above, it is
// erfinv(x) = -ndtri((1 - |x|) / 2) / sqrt 2 with x's sign: 1 - |x| is exact there, so the tail keeps its
// relative accuracy.
Values erfinv(Ctx& c) {
  Builder& b = c.b;
  Value x = operand(c, 0);
  Value ax = b.unary(Op::Abs, x);
  Value y;
  if (x.type.dtype == DType::F64) {
    Value tail = b.mul(special_ndtri(b, b.mul(b.sub(K(b, ax, 1), ax), K(b, ax, 0.5))), K(b, ax, -M_SQRT1_2));
    y = b.select(cmp(b, ax, Cmp::LT, K(b, ax, 0.5)), erfinv_central(b, x), with_sign_of(b, tail, x));
  } else {
    y = erfinv_giles(b, x, b.unary(Op::Neg, b.unary(Op::Log, b.mul(b.sub(K(b, x, 1), x), b.add(K(b, x, 1), x)))));
  }
  Value edge = cmp(b, ax, Cmp::EQ, K(b, x, 1));
  return {result(c, b.select(edge, b.mul(x, K(b, x, INFINITY)), y))};
}

// inverse trigonometric and hyperbolic functions (StableHLO has atan2, exp, log1p and expm1)
Value one_minus_sq(Builder& b, Value x) { return b.mul(b.sub(K(b, x, 1), x), b.add(K(b, x, 1), x)); }
// z * k for a real k, part by part: a complex product with k + 0i turns an infinite part's inf * 0 into NaN
Value scale(Builder& b, Value z, double k) {
  if (!is_complex(z.type.dtype)) return b.mul(z, K(b, z, k));
  Value re = b.unary(Op::Real, z), im = b.unary(Op::Imag, z);
  return b.binary(Op::Complex, b.mul(re, K(b, re, k)), b.mul(im, K(b, im, k)));
}
// atan(x + iy) for complex z, as C's catan: Re = atan2(2x, (1 - x)(1 + x) - y^2) / 2,
// Im = sign(y) log1p(4|y| / (x^2 + (1 - |y|)^2)) / 4 (+-i inf at the poles +-i; |y| keeps log1p's
// argument positive); far out, +-pi/2 + i y / |z|^2 (NaN + i y for an infinite y and a NaN x, as C).
Value complex_atan(Builder& b, Value z) {
  Value x = b.unary(Op::Real, z), y = b.unary(Op::Imag, z), one = K(b, x, 1), ay = b.unary(Op::Abs, y);
  Value re = scale(b, b.binary(Op::Atan2, b.add(x, x), b.sub(b.mul(b.sub(one, x), b.add(one, x)), b.mul(y, y))), 0.5);
  Value ym = b.sub(one, ay);
  Value im = scale(b, b.unary(Op::Log1p, b.div(scale(b, ay, 4), b.add(b.mul(x, x), b.mul(ym, ym)))), 0.25);
  Value a = b.unary(Op::Abs, z);
  Value half_pi = b.select(signbit_of(b, x), K(b, x, -M_PI / 2), K(b, x, M_PI / 2));
  Value far = cmp(b, a, Cmp::GT, K(b, a, 1e18));
  re = b.select(far, b.select(is_nan(b, x), x, half_pi), re);
  im = b.select(far, b.select(cmp(b, a, Cmp::EQ, K(b, a, INFINITY)), K(b, a, 0), b.div(b.div(ay, a), a)), im);
  return b.binary(Op::Complex, re, with_sign_of(b, im, y));
}
Values atan_(Ctx& c) {
  Value x = operand(c, 0);
  if (is_complex(x.type.dtype)) return {result(c, complex_atan(c.b, x))};
  return {result(c, c.b.binary(Op::Atan2, x, K(c.b, x, 1)))};
}
// k + z for a real k, keeping the sign of a zero imaginary part (which picks the side of a branch cut)
Value add_real(Builder& b, Value z, double k) {
  Value re = b.unary(Op::Real, z);
  return b.binary(Op::Complex, b.add(re, K(b, re, k)), b.unary(Op::Imag, z));
}
// Complex asinh as C's casinh, on the half plane of non-negative Re z (asinh is odd; the sign bit of a
// zero decides): log1p(z + z^2 / (1 + sqrt(1 + z^2))), exact near 0; ln 2 + log z once z^-2 is below
// rounding (and at infinity). asin(z) = -i asinh(iz).
Value complex_asinh(Builder& b, Value z) {
  Value flip = signbit_of(b, b.unary(Op::Real, z));
  Value w = b.select(flip, b.unary(Op::Neg, z), z);
  Value w2 = b.mul(w, w);
  Value near = b.unary(Op::Log1p, b.add(w, b.div(w2, add_real(b, sqrt_of(b, add_real(b, w2, 1)), 1))));
  Value far = b.add(b.unary(Op::Log, w), K(b, w, M_LN2));
  Value a = b.unary(Op::Abs, w);
  Value r = b.select(cmp(b, a, Cmp::GT, K(b, a, z.type.dtype == DType::C128 ? 1e8 : 1e4)), far, near);
  return b.select(flip, b.unary(Op::Neg, r), r);
}
Value times_i(Builder& b, Value z, bool minus) {  // i z or -i z
  Value re = b.unary(Op::Real, z), im = b.unary(Op::Imag, z);
  return minus ? b.binary(Op::Complex, im, b.unary(Op::Neg, re)) : b.binary(Op::Complex, b.unary(Op::Neg, im), re);
}
Value complex_asin(Builder& b, Value z) { return times_i(b, complex_asinh(b, times_i(b, z, false)), true); }
Values asin_(Ctx& c) {
  Value x = operand(c, 0);
  if (is_complex(x.type.dtype)) return {result(c, complex_asin(c.b, x))};
  return {result(c, c.b.binary(Op::Atan2, x, c.b.unary(Op::Sqrt, one_minus_sq(c.b, x))))};
}
Values acos_(Ctx& c) {
  Value x = operand(c, 0);
  if (is_complex(x.type.dtype)) {  // pi/2 - asin(z)
    Value a = complex_asin(c.b, x), re = c.b.unary(Op::Real, a);
    return {result(c, c.b.binary(Op::Complex, c.b.sub(K(c.b, re, M_PI / 2), re), c.b.unary(Op::Neg, c.b.unary(Op::Imag, a))))};
  }
  return {result(c, c.b.binary(Op::Atan2, c.b.unary(Op::Sqrt, one_minus_sq(c.b, x)), x))};
}
// sinh, cosh from e = exp(|x| / 2), so that e * e overflows only where the result does; expm1 near 0
// (e^z +- e^-z) / 2, halved part by part; where e^|Re z| overflows before the halving,
// e^(z - ln 2) +- e^(-z - ln 2) instead.
Value complex_sinh_cosh(Builder& b, Value z, bool cosh) {
  auto combine = [&](Value shift) {
    Value e = b.unary(Op::Exp, b.sub(z, shift)), f = b.unary(Op::Exp, b.sub(b.unary(Op::Neg, z), shift));
    return cosh ? b.add(e, f) : b.sub(e, f);
  };
  Value halved = scale(b, combine(K(b, z, 0)), 0.5);
  Value re = b.unary(Op::Real, z);
  double overflow = z.type.dtype == DType::C128 ? 709.0 : 88.0;
  Value large = cmp(b, b.unary(Op::Abs, re), Cmp::GT, K(b, re, overflow));
  return b.select(large, combine(K(b, z, M_LN2)), halved);
}
Values sinh_(Ctx& c) {
  Builder& b = c.b;
  if (is_complex(c.out[0].dtype)) return {complex_sinh_cosh(b, operand(c, 0), false)};
  Value x = operand(c, 0), ax = b.unary(Op::Abs, x);
  Value e = b.unary(Op::Exp, b.mul(ax, K(b, ax, 0.5)));
  Value big = b.sub(b.mul(b.mul(K(b, e, 0.5), e), e), b.div(b.div(K(b, e, 0.5), e), e));
  Value u = b.unary(Op::Expm1, ax);
  Value small = b.mul(K(b, u, 0.5), b.add(u, b.div(u, b.add(u, K(b, u, 1)))));
  Value s = b.select(cmp(b, ax, Cmp::LT, K(b, ax, 1)), small, big);
  return {result(c, with_sign_of(b, s, x))};
}
Values cosh_(Ctx& c) {
  Builder& b = c.b;
  if (is_complex(c.out[0].dtype)) return {complex_sinh_cosh(b, operand(c, 0), true)};
  Value x = operand(c, 0);
  Value e = b.unary(Op::Exp, b.mul(b.unary(Op::Abs, x), K(b, x, 0.5)));
  return {result(c, b.add(b.mul(b.mul(K(b, e, 0.5), e), e), b.div(b.div(K(b, e, 0.5), e), e)))};
}
Values asinh_(Ctx& c) {  // sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); log(2|x|) where x^2 overflows
  Builder& b = c.b;
  if (is_complex(c.out[0].dtype)) return {result(c, complex_asinh(b, operand(c, 0)))};
  Value x = operand(c, 0), ax = b.unary(Op::Abs, x);
  Value x2 = b.mul(ax, ax);
  Value r = b.unary(Op::Log1p, b.add(ax, b.div(x2, b.add(K(b, x, 1), b.unary(Op::Sqrt, b.add(K(b, x, 1), x2))))));
  Value big = b.add(b.unary(Op::Log, ax), K(b, x, M_LN2));
  r = b.select(cmp(b, ax, Cmp::GT, K(b, ax, 1e18)), big, r);
  return {result(c, with_sign_of(b, r, x))};
}
Values acosh_(Ctx& c) {  // log1p(y + sqrt(y (y + 2))), y = x - 1
  Builder& b = c.b;
  if (is_complex(c.out[0].dtype)) {  // log(z + sqrt(z + 1) sqrt(z - 1)); ln 2 + log z far out
    Value z = operand(c, 0);
    Value r = b.mul(sqrt_of(b, add_real(b, z, 1)), sqrt_of(b, add_real(b, z, -1)));
    Value a = b.unary(Op::Abs, z);
    Value far = cmp(b, a, Cmp::GT, K(b, a, z.type.dtype == DType::C128 ? 1e150 : 1e18));
    return {result(c, b.select(far, b.add(b.unary(Op::Log, z), K(b, z, M_LN2)), b.unary(Op::Log, b.add(z, r))))};
  }
  Value x = operand(c, 0), y = b.sub(x, K(b, x, 1));
  Value r = b.unary(Op::Log1p, b.add(y, b.unary(Op::Sqrt, b.mul(y, b.add(y, K(b, y, 2))))));
  Value big = b.add(b.unary(Op::Log, x), K(b, x, M_LN2));
  return {result(c, b.select(cmp(b, x, Cmp::GT, K(b, x, 1e18)), big, r))};
}
Values atanh_(Ctx& c) {  // sign(x) log1p(2|x| / (1 - |x|)) / 2: near -1, 1 + 2x / (1 - x) would cancel
  Builder& b = c.b;
  Value x = operand(c, 0);
  if (is_complex(x.type.dtype)) {  // -i atan(iz)
    Value re = b.unary(Op::Real, x), im = b.unary(Op::Imag, x);
    Value t = complex_atan(b, b.binary(Op::Complex, b.unary(Op::Neg, im), re));
    return {result(c, b.binary(Op::Complex, b.unary(Op::Imag, t), b.unary(Op::Neg, b.unary(Op::Real, t))))};
  }
  Value a = b.unary(Op::Abs, x);
  Value r = b.mul(K(b, a, 0.5), b.unary(Op::Log1p, b.div(b.add(a, a), b.sub(K(b, a, 1), a))));
  return {result(c, with_sign_of(b, r, x))};
}
Values exp2_(Ctx& c) {  // complex: e^(z ln 2)
  Value x = operand(c, 0);
  if (is_complex(x.type.dtype)) return {result(c, exp_of(c.b, scale(c.b, x, M_LN2)))};
  return {result(c, c.b.binary(Op::Power, K(c.b, x, 2), x))};
}
Values log_scaled(Ctx& c, double base) {
  Value x = operand(c, 0);
  return {result(c, scale(c.b, log_of(c.b, x), 1 / std::log(base)))};
}
Values log2_(Ctx& c) { return log_scaled(c, 2); }
Values log10_(Ctx& c) { return log_scaled(c, 10); }
Values logit(Ctx& c) {  // log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps >= 0
  Builder& b = c.b;
  Value x = operand(c, 0);
  if (c.has(1)) {
    Value eps = operand(c, 1);
    Value z = b.clamp(eps, x, b.sub(K(b, x, 1), eps));
    x = b.select(cmp(b, eps, Cmp::LT, K(b, eps, 0)), x, z);
  }
  return {result(c, b.unary(Op::Log, b.div(x, b.sub(K(b, x, 1), x))))};
}
Values sinc(Ctx& c) {  // sin(pi x) / (pi x), 1 at 0
  Value x = operand(c, 0);
  Value px = c.b.mul(x, K(c.b, x, M_PI));
  Value s = c.b.div(c.b.unary(Op::Sine, px), px);
  return {result(c, c.b.select(cmp(c.b, x, Cmp::EQ, K(c.b, x, 0)), K(c.b, x, 1), s))};
}

// ---- binary: alpha-scaled add/sub: self + alpha * other
Values add(Ctx& c) {
  Value x = operand(c, 0), y = operand(c, 1);
  if (c.has(2)) y = c.b.mul(y, operand(c, 2));
  if (c.out[0].dtype == DType::Pred) return {result(c, c.b.or_(x, y))};
  return {result(c, c.b.add(x, y))};
}
Values sub(Ctx& c) {
  Value x = operand(c, 0), y = operand(c, 1);
  if (c.has(2)) y = c.b.mul(y, operand(c, 2));
  return {result(c, c.b.sub(x, y))};
}
Values rsub(Ctx& c) {  // other - alpha * self
  Value x = operand(c, 0), y = operand(c, 1);
  if (c.has(2)) x = c.b.mul(x, operand(c, 2));
  return {result(c, c.b.sub(y, x))};
}
Values mul(Ctx& c) {
  if (c.out[0].dtype == DType::Pred) return {result(c, c.b.and_(operand(c, 0), operand(c, 1)))};
  return binary(c, Op::Multiply);
}
// x mod y with the divisor's sign (Python's %), from the dividend-signed stablehlo.remainder
Value py_mod(Builder& b, Value x, Value y) {
  Value r = b.binary(Op::Remainder, x, y);
  Value z = zeros(b, r.type);
  Value fix = b.and_(cmp(b, r, Cmp::NE, z), cmp(b, cmp(b, r, Cmp::LT, z), Cmp::NE, cmp(b, y, Cmp::LT, z)));
  return b.select(fix, b.add(r, y), r);
}
// floor(x / y) as Python computes it: from the exact remainder, so that 1 // 0.1 == 9
Value floor_div(Builder& b, Value x, Value y) {
  Value z = zeros(b, x.type);
  if (is_integral(x.type.dtype)) {  // integer division rounds toward zero; step down on a negative remainder
    Value r = b.binary(Op::Remainder, x, y), q = b.div(x, y);
    Value fix = b.and_(cmp(b, r, Cmp::NE, z), cmp(b, cmp(b, r, Cmp::LT, z), Cmp::NE, cmp(b, y, Cmp::LT, z)));
    return b.select(fix, b.sub(q, K(b, q, 1)), q);
  }
  Value mod = b.binary(Op::Remainder, x, y);
  Value div = b.div(b.sub(x, mod), y);
  Value fix = b.and_(cmp(b, mod, Cmp::NE, z), cmp(b, cmp(b, y, Cmp::LT, z), Cmp::NE, cmp(b, mod, Cmp::LT, z)));
  div = b.select(fix, b.sub(div, K(b, div, 1)), div);
  Value fl = b.unary(Op::Floor, div);
  fl = b.select(cmp(b, b.sub(div, fl), Cmp::GT, K(b, div, 0.5)), b.add(fl, K(b, fl, 1)), fl);
  Value q = b.div(x, y);  // a zero quotient takes the sign of x / y
  fl = b.select(cmp(b, div, Cmp::EQ, z), b.select(signbit_of(b, q), K(b, q, -0.0), K(b, q, 0.0)), fl);
  return b.select(cmp(b, y, Cmp::EQ, z), q, fl);
}
// Integer division by zero: CPU raises, XLA would return a value (checked on the device).
Value divisor(Builder& b, Value y) {
  if (is_integral(y.type.dtype) && y.type.dtype != DType::Pred)
    check(b, b.compare(y, zeros(b, y.type), Cmp::EQ), zeros(b, {DType::S64, y.type.dims}), "ZeroDivisionError", false);
  return y;
}

Values div(Ctx& c) {
  Value x = operand(c, 0), y = operand(c, 1);
  std::string mode = c.has(2) ? c.s(2) : "";
  if (!mode.empty()) divisor(c.b, y);
  if (mode == "floor") return {result(c, floor_div(c.b, x, y))};
  Value q = c.b.div(x, y);
  if (mode == "trunc" && !is_integral(x.type.dtype)) q = trunc_of(c.b, rounded(c, q));  // CPU truncates a half
  return {result(c, q)};
}
Values floor_divide(Ctx& c) { return {result(c, floor_div(c.b, operand(c, 0), divisor(c.b, operand(c, 1))))}; }
Values remainder(Ctx& c) {
  return {result(c, py_mod(c.b, rounded_operand(c, 0), divisor(c.b, rounded_operand(c, 1))))};
}
Values fmod(Ctx& c) {
  Value y = divisor(c.b, rounded_operand(c, 1));
  return {result(c, c.b.binary(Op::Remainder, rounded_operand(c, 0), y))};
}
// (a + bi)(c + di) as C99's Annex G: where the product is NaN + NaN i only because an infinite factor
// met a zero, the infinite one counts as +-1 per part, times inf (so (inf + inf i)(i pi/2) is -inf + inf i).
Value c99_mul(Builder& b, Value u, Value v) {
  Value a = b.unary(Op::Real, u), bb = b.unary(Op::Imag, u), c = b.unary(Op::Real, v), d = b.unary(Op::Imag, v);
  Value ac = b.mul(a, c), bd = b.mul(bb, d), ad = b.mul(a, d), bc = b.mul(bb, c);
  Value re = b.sub(ac, bd), im = b.add(ad, bc);
  Value inf = K(b, a, INFINITY), zero = K(b, a, 0), one = K(b, a, 1);
  auto is_inf = [&](Value t) { return cmp(b, b.unary(Op::Abs, t), Cmp::EQ, inf); };
  auto unit = [&](Value t) { return with_sign_of(b, b.select(is_inf(t), one, zero), t); };  // +-1 if infinite, else +-0
  auto nan_to_zero = [&](Value t) { return b.select(is_nan(b, t), with_sign_of(b, zero, t), t); };
  Value u_inf = b.or_(is_inf(a), is_inf(bb)), v_inf = b.or_(is_inf(c), is_inf(d));
  Value a2 = b.select(u_inf, unit(a), b.select(v_inf, nan_to_zero(a), a));
  Value b2 = b.select(u_inf, unit(bb), b.select(v_inf, nan_to_zero(bb), bb));
  Value c2 = b.select(v_inf, unit(c), b.select(u_inf, nan_to_zero(c), c));
  Value d2 = b.select(v_inf, unit(d), b.select(u_inf, nan_to_zero(d), d));
  Value recover = b.and_(b.and_(is_nan(b, re), is_nan(b, im)), b.or_(u_inf, v_inf));
  Value re2 = b.mul(inf, b.sub(b.mul(a2, c2), b.mul(b2, d2))), im2 = b.mul(inf, b.add(b.mul(a2, d2), b.mul(b2, c2)));
  return b.binary(Op::Complex, b.select(recover, re2, re), b.select(recover, im2, im));
}
Values pow_(Ctx& c) {
  if (c.out[0].dtype == DType::Pred) {  // x ** y for bools: x or not y
    Value x = operand(c, 0), y = operand(c, 1);
    return {c.b.or_(x, c.b.unary(Op::Not, y))};
  }
  if (is_complex(c.out[0].dtype)) {  // CPU's e^(y log x): 0^y is 0, NaN or inf + i NaN
    Builder& b = c.b;
    Value x = operand(c, 0), y = operand(c, 1), r = exp_of(b, c99_mul(b, y, log_of(b, x)));
    const Arg& exponent = c.arg(1);
    if (exponent.kind != Arg::Scalar && !(exponent.kind == Arg::Tensor && exponent.i < 0)) return {result(c, r)};
    // a Python scalar exponent takes CPU's shortcuts (products, sqrt, reciprocals), which differ at infinities
    Value re = b.unary(Op::Real, y), real = cmp(b, b.unary(Op::Imag, y), Cmp::EQ, K(b, re, 0));
    auto is = [&](double v) { return b.and_(real, cmp(b, re, Cmp::EQ, K(b, re, v))); };
    Value square = b.mul(x, x), root = sqrt_of(b, x);
    std::pair<double, Value> shortcuts[] = {{2, square}, {3, b.mul(square, x)}, {-2, complex_reciprocal(b, square)},
                                            {0.5, root}, {-0.5, complex_reciprocal(b, root)},
                                            {-1, complex_reciprocal(b, x)}};
    for (auto& [v, shortcut] : shortcuts) r = b.select(is(v), shortcut, r);
    return {result(c, r)};
  }
  const auto& t = info(c.out[0].dtype);
  if (!t.is_int) return binary(c, Op::Power);
  // Integers: square-and-multiply over the exponent's bits, wrapping as CPU's kernel (XLA's integer power
  // is wrong for exponents from 70 on). To negative powers, as PyTorch: 1 and -1 keep their magnitude,
  // every other base truncates to 0.
  Builder& b = c.b;
  Value x = operand(c, 0), y = operand(c, 1), zero = K(b, y, 0), one = K(b, x, 1);
  Value e = t.is_unsigned ? y : b.select(cmp(b, y, Cmp::LT, zero), zero, y), r = one, base = x;
  for (int bit = 0; bit < t.bytes * 8 - !t.is_unsigned; ++bit) {
    r = b.select(cmp(b, b.and_(e, K(b, e, 1)), Cmp::NE, zero), b.mul(r, base), r);
    base = b.mul(base, base);
    e = b.binary(Op::ShiftRightLogical, e, K(b, e, 1));
  }
  if (t.is_unsigned) return {result(c, r)};
  Value odd = cmp(b, b.and_(y, K(b, y, 1)), Cmp::NE, zero);
  Value unit = b.select(cmp(b, x, Cmp::EQ, one), one,
                        b.select(cmp(b, x, Cmp::EQ, K(b, x, -1)), b.select(odd, K(b, x, -1), one), K(b, x, 0)));
  return {result(c, b.select(cmp(b, y, Cmp::LT, zero), unit, r))};
}
Values maximum(Ctx& c) { return {result(c, max_of(c.b, operand(c, 0), operand(c, 1)))}; }
Values minimum(Ctx& c) { return {result(c, max_of(c.b, operand(c, 0), operand(c, 1), false))}; }
Values fmax_min(Ctx& c, bool is_max) {  // NaN only where both are NaN
  Value x = operand(c, 0), y = operand(c, 1);
  Value m = is_max ? c.b.max(x, y) : c.b.min(x, y);
  if (is_float(x.type.dtype))
    m = c.b.select(is_nan(c.b, x), y, c.b.select(is_nan(c.b, y), x, m));
  return {result(c, m)};
}
Values fmax(Ctx& c) { return fmax_min(c, true); }
Values fmin(Ctx& c) { return fmax_min(c, false); }
Values atan2_(Ctx& c) { return binary(c, Op::Atan2); }
Values bitwise_and(Ctx& c) { return binary(c, Op::And); }
Values bitwise_or(Ctx& c) { return binary(c, Op::Or); }
Values bitwise_xor(Ctx& c) { return binary(c, Op::Xor); }
// shifts past the width give 0 (left) or the sign (right), in both PyTorch and StableHLO
Values shift_left(Ctx& c) { return binary(c, Op::ShiftLeft); }
Values shift_right(Ctx& c) {
  return binary(c, info(c.out[0].dtype).is_unsigned ? Op::ShiftRightLogical : Op::ShiftRightArithmetic);
}
Values xlogy(Ctx& c) {  // 0 where x == 0 (unless y is NaN)
  Builder& b = c.b;
  Value x = operand(c, 0), y = operand(c, 1);
  Value r = b.select(cmp(b, x, Cmp::EQ, K(b, x, 0)), K(b, x, 0), b.mul(x, b.unary(Op::Log, y)));
  return {result(c, b.select(is_nan(b, y), y, r))};
}
// self * 2^other. An integer exponent scales exactly, by 2^(other/2) twice in the compute type: a power of
// two beyond the type's range (inf * 2^-160, 2^-10 * 2^20 in half) is never formed, as in CPU's ldexp.
// A floating or complex exponent gives self * pow(2, other) with the power rounded to the result type, as CPU.
Values ldexp(Ctx& c) {
  Builder& b = c.b;
  Value x = operand(c, 0);
  if (!is_integral(c.v(1).type.dtype)) {
    Value e = operand(c, 1);
    Value p = is_complex(e.type.dtype) ? exp_of(b, scale(b, e, M_LN2)) : b.binary(Op::Power, K(b, e, 2), e);
    return {result(c, b.mul(x, rounded(c, p)))};
  }
  bool cplx = is_complex(x.type.dtype);
  Value e = operand(c, 1, cplx ? real_part(x.type.dtype) : x.type.dtype, c.out[0].dims);
  Value half = b.unary(Op::Floor, b.mul(e, K(b, e, 0.5)));
  Value p = b.binary(Op::Power, K(b, e, 2), half), q = b.binary(Op::Power, K(b, e, 2), b.sub(e, half));
  auto scaled = [&](Value v) { return b.mul(b.mul(v, p), q); };
  if (!cplx) return {result(c, scaled(x))};
  return {result(c, b.binary(Op::Complex, scaled(b.unary(Op::Real, x)), scaled(b.unary(Op::Imag, x))))};
}
Values hypot(Ctx& c) {  // m sqrt(1 + (n/m)^2) with m = max(|x|, |y|): no overflow in the squares
  Builder& b = c.b;
  Value ax = b.unary(Op::Abs, operand(c, 0)), ay = b.unary(Op::Abs, operand(c, 1));
  Value m = max_of(b, ax, ay), n = max_of(b, ax, ay, false);
  Value r = b.div(n, m);
  Value h = b.mul(m, b.unary(Op::Sqrt, b.add(K(b, r, 1), b.mul(r, r))));
  h = b.select(cmp(b, m, Cmp::EQ, K(b, m, 0)), K(b, m, 0), h);
  Value inf = K(b, m, INFINITY);
  return {result(c, b.select(b.or_(cmp(b, ax, Cmp::EQ, inf), cmp(b, ay, Cmp::EQ, inf)), inf, h))};
}
Values copysign(Ctx& c) {
  Value x = c.b.unary(Op::Abs, operand(c, 0)), y = operand(c, 1);
  return {result(c, with_sign_of(c.b, x, y))};
}
Values heaviside(Ctx& c) {  // x == 0 ? values : x > 0
  Value x = operand(c, 0), v = operand(c, 1);
  Value pos = convert(c.b, cmp(c.b, x, Cmp::GT, K(c.b, x, 0)), x.type.dtype);
  return {result(c, c.b.select(cmp(c.b, x, Cmp::EQ, K(c.b, x, 0)), v, pos))};
}
Values nextafter(Ctx& c) {  // one step of the bit pattern toward y, in the result dtype itself
  Builder& b = c.b;
  const TensorType& o = c.out[0];
  Value x = operand(c, 0, o.dtype, o.dims), y = operand(c, 1, o.dtype, o.dims);
  DType it = int_of_width(o.dtype);
  Value bits = b.bitcast_convert(x, it);
  Value away = cmp(b, cmp(b, y, Cmp::GT, x), Cmp::EQ, cmp(b, x, Cmp::GT, K(b, x, 0)));
  Value step = b.bitcast_convert(b.select(away, b.add(bits, K(b, bits, 1)), b.sub(bits, K(b, bits, 1))), o.dtype);
  Value tiny = b.bitcast_convert(K(b, bits, 1), o.dtype);
  Value from_zero = b.select(cmp(b, y, Cmp::GT, K(b, y, 0)), tiny, b.unary(Op::Neg, tiny));
  Value r = b.select(cmp(b, x, Cmp::EQ, K(b, x, 0)), from_zero, step);
  r = b.select(cmp(b, x, Cmp::EQ, y), y, r);
  return {b.select(b.or_(is_nan(b, x), is_nan(b, y)), b.add(x, y), r)};
}
Values logaddexp_base(Ctx& c, bool base2) {  // max + log1p(exp(-|x - y|)); equal infinities give themselves
  Builder& b = c.b;
  Value x = operand(c, 0), y = operand(c, 1);
  if (is_complex(c.out[0].dtype) && !base2) {  // m + log1p(exp(n - m)), m the one with the larger real part (CPU:
    Value first = cmp(b, b.unary(Op::Real, x), Cmp::GT, b.unary(Op::Real, y));  // y on a tie)
    Value m = b.select(first, x, y), n = b.select(first, y, x);
    Value r = b.add(m, b.unary(Op::Log1p, b.unary(Op::Exp, b.sub(n, m))));
    // equal infinite real parts: -inf stays m; +inf is log(exp(n) + exp(m)) = inf + i arg(e^(i Im n) + e^(i Im m))
    Value mr = b.unary(Op::Real, m), nr = b.unary(Op::Real, n), mi = b.unary(Op::Imag, m), ni = b.unary(Op::Imag, n);
    Value both_inf = b.and_(cmp(b, mr, Cmp::EQ, nr), cmp(b, b.unary(Op::Abs, mr), Cmp::EQ, K(b, mr, INFINITY)));
    Value angle = b.binary(Op::Atan2, b.add(b.unary(Op::Sine, mi), b.unary(Op::Sine, ni)),
                           b.add(b.unary(Op::Cosine, mi), b.unary(Op::Cosine, ni)));
    Value at_inf = b.select(cmp(b, mr, Cmp::LT, K(b, mr, 0)), m, b.binary(Op::Complex, mr, angle));
    Value nan = b.or_(is_nan(b, nr), is_nan(b, ni));  // CPU: a NaN in the smaller one is infectious
    Value nans = b.binary(Op::Complex, K(b, mr, NAN), K(b, mr, NAN));
    return {result(c, b.select(nan, nans, b.select(both_inf, at_inf, r)))};
  }
  Value m = max_of(b, x, y);
  Value d = b.select(cmp(b, x, Cmp::EQ, y), K(b, x, 0), b.unary(Op::Abs, b.sub(x, y)));
  if (!base2) return {result(c, b.add(m, b.unary(Op::Log1p, b.unary(Op::Exp, b.unary(Op::Neg, d)))))};
  Value e = b.binary(Op::Power, K(b, d, 2), b.unary(Op::Neg, d));
  return {result(c, b.add(m, b.mul(b.unary(Op::Log1p, e), K(b, e, 1 / M_LN2))))};
}
Values logaddexp(Ctx& c) { return logaddexp_base(c, false); }
Values logaddexp2(Ctx& c) { return logaddexp_base(c, true); }

Values logical(Ctx& c, Op op) {
  const Dims& shape = c.out[0].dims;
  Value a = broadcast_to(c.b, convert(c.b, c.v(0), DType::Pred), shape);
  Value b = broadcast_to(c.b, convert(c.b, c.v(1), DType::Pred), shape);
  return {convert(c.b, c.b.binary(op, a, b), c.out[0].dtype)};
}
Values logical_and(Ctx& c) { return logical(c, Op::And); }
Values logical_or(Ctx& c) { return logical(c, Op::Or); }
Values logical_xor(Ctx& c) { return logical(c, Op::Xor); }

// Comparisons happen in the operands' promoted type (the result is bool).
Values compare(Ctx& c, Cmp dir) {
  DType t = result_type(c, {0, 1});
  Value a = operand(c, 0, t, c.out[0].dims), b = operand(c, 1, t, c.out[0].dims);
  return {convert(c.b, c.b.compare(a, b, dir), c.out[0].dtype)};
}
Values eq(Ctx& c) { return compare(c, Cmp::EQ); }
Values ne(Ctx& c) { return compare(c, Cmp::NE); }
Values lt(Ctx& c) { return compare(c, Cmp::LT); }
Values le(Ctx& c) { return compare(c, Cmp::LE); }
Values gt(Ctx& c) { return compare(c, Cmp::GT); }
Values ge(Ctx& c) { return compare(c, Cmp::GE); }

Values where(Ctx& c) {
  const TensorType& o = c.out[0];
  Value p = broadcast_to(c.b, convert(c.b, c.v(0), DType::Pred), o.dims);
  return {c.b.select(p, operand(c, 1, o.dtype, o.dims), operand(c, 2, o.dtype, o.dims))};
}

Values clamp(Ctx& c) {  // max then min: when min > max, max wins
  Value x = operand(c, 0);
  if (c.has(1)) x = max_of(c.b, x, operand(c, 1));
  if (c.has(2)) x = max_of(c.b, x, operand(c, 2), false);
  return {result(c, x)};
}
Values clamp_min(Ctx& c) { return {result(c, max_of(c.b, operand(c, 0), operand(c, 1)))}; }
Values clamp_max(Ctx& c) { return {result(c, max_of(c.b, operand(c, 0), operand(c, 1), false))}; }

Values lerp(Ctx& c) {  // as CPU: from the nearer end, so that weight 1 gives end exactly
  Builder& b = c.b;
  Value s = operand(c, 0), e = operand(c, 1), w = operand(c, 2);
  Value d = b.sub(e, s);
  Value lo = b.add(s, b.mul(w, d)), hi = b.sub(e, b.mul(d, b.sub(K(b, w, 1), w)));
  Value aw = b.unary(Op::Abs, w);  // real for a complex weight too
  return {result(c, b.select(cmp(b, aw, Cmp::LT, K(b, aw, 0.5)), lo, hi))};
}
Values addcmul(Ctx& c) {  // self + value * t1 * t2
  Value s = operand(c, 0), t1 = operand(c, 1), t2 = operand(c, 2), v = operand(c, 3);
  return {result(c, c.b.add(s, c.b.mul(c.b.mul(v, t1), t2)))};
}
Values addcdiv(Ctx& c) {
  Value s = operand(c, 0), t1 = operand(c, 1), t2 = operand(c, 2), v = operand(c, 3);
  return {result(c, c.b.add(s, c.b.div(c.b.mul(v, t1), t2)))};
}
Values isnan(Ctx& c) {
  Value x = c.v(0);
  if (!is_float(x.type.dtype) && !is_complex(x.type.dtype)) return {convert(c.b, zeros(c.b, x.type), DType::Pred)};
  return {c.b.compare(x, x, Cmp::NE)};
}
Values isinf(Ctx& c) {
  Value x = c.v(0);
  if (is_complex(x.type.dtype)) {
    Value re = c.b.unary(Op::Abs, c.b.unary(Op::Real, x)), im = c.b.unary(Op::Abs, c.b.unary(Op::Imag, x));
    return {c.b.or_(c.b.compare(re, K(c.b, re, INFINITY), Cmp::EQ), c.b.compare(im, K(c.b, im, INFINITY), Cmp::EQ))};
  }
  if (!is_float(x.type.dtype)) return {convert(c.b, zeros(c.b, x.type), DType::Pred)};
  Value a = c.b.unary(Op::Abs, x);
  return {c.b.compare(a, K(c.b, a, INFINITY), Cmp::EQ)};
}
Values is_signed_inf(Ctx& c, double inf) {
  Value x = c.v(0);
  if (!is_float(x.type.dtype)) return {convert(c.b, zeros(c.b, x.type), DType::Pred)};
  return {c.b.compare(x, K(c.b, x, inf), Cmp::EQ)};
}
Values isposinf(Ctx& c) { return is_signed_inf(c, INFINITY); }
Values isneginf(Ctx& c) { return is_signed_inf(c, -INFINITY); }
Values isfinite(Ctx& c) {
  Value x = c.v(0);
  if (!is_float(x.type.dtype)) return {c.b.compare(x, x, Cmp::EQ)};
  return {c.b.unary(Op::IsFinite, x)};
}
// A complex value has its real and imaginary parts replaced separately, by values of the part type (as CPU).
Values nan_to_num(Ctx& c) {
  const TensorType& o = c.out[0];
  bool cplx = is_complex(o.dtype);
  if (!is_float(o.dtype) && !cplx) return {convert(c.b, c.v(0), o.dtype)};
  DType part = cplx ? real_part(o.dtype) : o.dtype, t = compute_type(part);
  double big = part == DType::F16 ? 65504.0 : part == DType::BF16 ? 3.3895313892515355e38
             : part == DType::F64 ? 1.79769313486231570e308 : 3.4028234663852886e38;
  auto k = [&](size_t i, double d) { return c.has(i) ? operand(c, i, t, o.dims) : c.b.splat({t, o.dims}, d); };
  Value nan = k(1, 0), pos = k(2, big), neg = k(3, -big), inf = c.b.splat({t, o.dims}, INFINITY);
  auto replace = [&](Value x) {
    Value y = c.b.select(is_nan(c.b, x), nan, x);
    y = c.b.select(cmp(c.b, x, Cmp::EQ, inf), pos, y);
    return c.b.select(cmp(c.b, x, Cmp::EQ, c.b.unary(Op::Neg, inf)), neg, y);
  };
  Value x = operand(c, 0);
  if (!cplx) return {result(c, replace(x))};
  Value re = replace(c.b.unary(Op::Real, x)), im = replace(c.b.unary(Op::Imag, x));
  return {result(c, c.b.binary(Op::Complex, re, im))};
}

Register r({
    {"abs|abs.out", abs_}, {"neg|neg.out", neg}, {"exp|exp.out", exp_}, {"expm1|expm1.out", expm1_},
    {"log|log.out", log_}, {"log1p|log1p.out", log1p_}, {"sqrt|sqrt.out", sqrt_}, {"rsqrt|rsqrt.out", rsqrt},
    {"tanh|tanh.out", tanh_}, {"sigmoid|sigmoid.out", sigmoid}, {"sin|sin.out", sin_}, {"cos|cos.out", cos_},
    {"tan|tan.out", tan_}, {"floor|floor.out", floor_}, {"ceil|ceil.out", ceil_}, {"round|round.out", round_},
    {"round.decimals|round.decimals_out", round_decimals},
    {"trunc|trunc.out|fix|fix.out", trunc_}, {"frac|frac.out", frac}, {"sign|sign.out", sign_},
    {"sgn|sgn.out", sign_}, {"signbit|signbit.out", signbit},
    {"bitwise_not|bitwise_not.out", bitwise_not}, {"logical_not|logical_not.out", logical_not},
    {"reciprocal|reciprocal.out", reciprocal}, {"square|square.out", square}, {"erf|erf.out", erf_},
    {"erfc|erfc.out", erfc_}, {"erfinv|erfinv.out", erfinv},
    {"atan|atan.out|arctan|arctan.out", atan_}, {"asin|asin.out|arcsin|arcsin.out", asin_},
    {"acos|acos.out|arccos|arccos.out", acos_}, {"sinh|sinh.out", sinh_}, {"cosh|cosh.out", cosh_},
    {"asinh|asinh.out|arcsinh|arcsinh.out", asinh_}, {"acosh|acosh.out|arccosh|arccosh.out", acosh_},
    {"atanh|atanh.out|arctanh|arctanh.out", atanh_}, {"exp2|exp2.out", exp2_}, {"log2|log2.out", log2_},
    {"log10|log10.out", log10_}, {"logit|logit.out", logit}, {"sinc|sinc.out", sinc},
    {"add.Tensor|add.Scalar|add.out|add.Scalar_out", add}, {"sub.Tensor|sub.Scalar|sub.out|sub.Scalar_out", sub},
    {"rsub.Tensor|rsub.Scalar|rsub.Tensor_out|rsub.Scalar_out", rsub},
    {"mul.Tensor|mul.Scalar|mul.out|mul.Scalar_out", mul},
    {"div.Tensor|div.Scalar|div.out|div.Tensor_mode|div.Scalar_mode|div.out_mode|div.Scalar_out|div.Scalar_mode_out",
     div},
    {"floor_divide|floor_divide.Scalar|floor_divide.out|floor_divide.Scalar_out", floor_divide},
    {"remainder.Tensor|remainder.Scalar|remainder.Scalar_Tensor|remainder.Tensor_out|remainder.Scalar_out|"
     "remainder.Scalar_Tensor_out", remainder},
    {"fmod.Tensor|fmod.Scalar|fmod.Tensor_out|fmod.Scalar_out", fmod},
    {"pow.Tensor_Tensor|pow.Tensor_Scalar|pow.Scalar|pow.Tensor_Tensor_out|pow.Tensor_Scalar_out|pow.Scalar_out",
     pow_},
    {"maximum|maximum.out|max.other|max.out", maximum}, {"minimum|minimum.out|min.other|min.out", minimum},
    {"fmax|fmax.out", fmax}, {"fmin|fmin.out", fmin},
    {"atan2|atan2.out|arctan2|arctan2.out", atan2_},
    {"bitwise_and.Tensor|bitwise_and.Scalar|bitwise_and.Tensor_out|bitwise_and.Scalar_out|bitwise_and.Scalar_Tensor|"
     "__and__.Tensor|__and__.Scalar", bitwise_and},
    {"bitwise_or.Tensor|bitwise_or.Scalar|bitwise_or.Tensor_out|bitwise_or.Scalar_out|bitwise_or.Scalar_Tensor|"
     "__or__.Tensor|__or__.Scalar", bitwise_or},
    {"bitwise_xor.Tensor|bitwise_xor.Scalar|bitwise_xor.Tensor_out|bitwise_xor.Scalar_out|bitwise_xor.Scalar_Tensor|"
     "__xor__.Tensor|__xor__.Scalar", bitwise_xor},
    {"bitwise_left_shift.Tensor|bitwise_left_shift.Tensor_Scalar|bitwise_left_shift.Scalar_Tensor|"
     "bitwise_left_shift.Tensor_out|bitwise_left_shift.Tensor_Scalar_out|bitwise_left_shift.Scalar_Tensor_out|"
     "__lshift__.Tensor|__lshift__.Scalar|__ilshift__.Tensor|__ilshift__.Scalar", shift_left},
    {"bitwise_right_shift.Tensor|bitwise_right_shift.Tensor_Scalar|bitwise_right_shift.Scalar_Tensor|"
     "bitwise_right_shift.Tensor_out|bitwise_right_shift.Tensor_Scalar_out|bitwise_right_shift.Scalar_Tensor_out|"
     "__rshift__.Tensor|__rshift__.Scalar|__irshift__.Tensor|__irshift__.Scalar", shift_right},
    {"xlogy.Tensor|xlogy.Scalar_Self|xlogy.Scalar_Other|xlogy.OutTensor|xlogy.OutScalar_Self|xlogy.OutScalar_Other",
     xlogy},
    {"ldexp.Tensor|ldexp.out", ldexp}, {"hypot|hypot.out", hypot},
    {"copysign.Tensor|copysign.Scalar|copysign.out|copysign.Scalar_out", copysign},
    {"heaviside|heaviside.out", heaviside}, {"nextafter|nextafter.out", nextafter},
    {"logaddexp|logaddexp.out", logaddexp}, {"logaddexp2|logaddexp2.out", logaddexp2},
    {"logical_and|logical_and.out", logical_and}, {"logical_or|logical_or.out", logical_or},
    {"logical_xor|logical_xor.out", logical_xor},
    {"eq.Tensor|eq.Scalar|eq.Tensor_out|eq.Scalar_out", eq}, {"ne.Tensor|ne.Scalar|ne.Tensor_out|ne.Scalar_out", ne},
    {"lt.Tensor|lt.Scalar|lt.Tensor_out|lt.Scalar_out", lt}, {"le.Tensor|le.Scalar|le.Tensor_out|le.Scalar_out", le},
    {"gt.Tensor|gt.Scalar|gt.Tensor_out|gt.Scalar_out", gt}, {"ge.Tensor|ge.Scalar|ge.Tensor_out|ge.Scalar_out", ge},
    {"where.self|where.self_out|where.ScalarSelf|where.ScalarOther|where.Scalar", where},
    {"clamp|clamp.Tensor|clamp.out|clamp.Tensor_out", clamp},
    {"clamp_min|clamp_min.Tensor|clamp_min.out|clamp_min.Tensor_out", clamp_min},
    {"clamp_max|clamp_max.Tensor|clamp_max.out|clamp_max.Tensor_out", clamp_max},
    {"lerp.Scalar|lerp.Tensor|lerp.Scalar_out|lerp.Tensor_out", lerp},
    {"addcmul|addcmul.out", addcmul}, {"addcdiv|addcdiv.out", addcdiv},
    {"isnan|isnan.out", isnan}, {"isinf|isinf.out", isinf},
    {"isposinf|isposinf.out", isposinf}, {"isneginf|isneginf.out", isneginf}, {"isfinite", isfinite},
    {"nan_to_num|nan_to_num.out", nan_to_num},
});

}  // namespace

// erf: a Taylor series for |x| < 1 (where 1 - erfc would lose the relative accuracy of small results),
// 1 - erfc(|x|) above, with x's sign.
Value erf_of(Builder& b, Value x) {
  Value x2 = b.mul(x, x);
  double term = 2 / std::sqrt(M_PI);  // 2/sqrt(pi) (-1)^n / (n! (2n + 1))
  std::vector<double> coef;
  int terms = x.type.dtype == DType::F64 ? 19 : 13;  // the first omitted term is below 2e-19 (7e-12) for |x| < 1
  for (int n = 0; n < terms; ++n, term *= -1.0 / n) coef.push_back(term / (2 * n + 1));
  Value poly = K(b, x, coef.back());
  for (int n = terms - 2; n >= 0; --n) poly = b.add(K(b, x, coef[n]), b.mul(x2, poly));
  Value small = b.mul(x, poly);
  Value ax = b.unary(Op::Abs, x);
  Value large = b.sub(K(b, x, 1), erfc_abs(b, ax));
  large = with_sign_of(b, large, x);
  return b.select(cmp(b, ax, Cmp::LT, K(b, x, 1)), small, large);
}

// M. Giles, "Approximating the erfinv function" (GPU Computing Gems): single-precision polynomials in w.
Value erfinv_giles(Builder& b, Value x, Value w) {
  auto horner = [&](Value t, std::initializer_list<double> coef) {
    Value p = K(b, t, *coef.begin());
    for (auto it = coef.begin() + 1; it != coef.end(); ++it) p = b.add(K(b, t, *it), b.mul(p, t));
    return p;
  };
  Value central = horner(b.sub(w, K(b, w, 2.5)), {2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                                                  0.00021858087, -0.00125372503, -0.00417768164, 0.246640727,
                                                  1.50140941});
  Value tail = horner(b.sub(b.unary(Op::Sqrt, w), K(b, w, 3)),
                      {-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                       -0.0076224613, 0.00943887047, 1.00167406, 2.83297682});
  return b.mul(b.select(cmp(b, w, Cmp::LT, K(b, w, 5)), central, tail), x);
}
Value erfinv_central(Builder& b, Value x) {
  Value y = erfinv_giles(b, x, b.unary(Op::Neg, b.unary(Op::Log, b.mul(b.sub(K(b, x, 1), x), b.add(K(b, x, 1), x)))));
  if (x.type.dtype != DType::F64) return y;
  for (int i = 0; i < 2; ++i) {  // y -= (erf(y) - x) / erf'(y): from 1e-7 to float64 accuracy
    Value slope = b.mul(K(b, y, 2 / std::sqrt(M_PI)), b.unary(Op::Exp, b.unary(Op::Neg, b.mul(y, y))));
    y = b.sub(y, b.div(b.sub(erf_of(b, y), x), slope));
  }
  return y;
}

Value gelu_of(Builder& b, Value x, bool tanh_approx) {
  if (tanh_approx) {  // 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
    Value u2 = b.mul(K(b, x, 2 * 0.7978845608028654), b.add(x, b.mul(K(b, x, 0.044715), b.mul(x, b.mul(x, x)))));
    return b.mul(x, b.unary(Op::Logistic, u2));
  }
  // 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2): no cancellation for negative x
  return b.mul(b.mul(K(b, x, 0.5), x), erfc_of(b, b.mul(x, K(b, x, -0.7071067811865476))));
}

}  // namespace tpu::lower

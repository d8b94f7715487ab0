// Special functions of torch.special: Bessel J/Y/K of order 0 and 1, Airy Ai, spherical j0, the orthogonal
// polynomials (Chebyshev T/U/V/W and shifted, Hermite H/He, Laguerre, Legendre), Hurwitz zeta and the regularized
// incomplete gamma functions. The transcendental ones are evaluated in float64 (power series for small |x|,
// Hankel-type asymptotic expansions for large |x|) and rounded to the result type; the polynomials mirror
// PyTorch's recurrences in the result's compute type, with a stablehlo.while up to max(n).
#include <cmath>
#include <vector>

#include "lower/helpers.h"
#include "lower/special.h"

namespace tpu::lower {
using hlo::Cmp;
using hlo::Op;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kEuler = 0.57721566490153286061;

Value cmpk(Builder& b, Value x, Cmp dir, double v) { return b.compare(x, K(b, x, v), dir); }
Value un(Builder& b, Op op, Value x) { return b.unary(op, x); }
Value mulk(Builder& b, Value x, double v) { return b.mul(x, K(b, x, v)); }
// c[0] + c[1] t + c[2] t^2 + ...
Value poly(Builder& b, Value t, const std::vector<double>& c) {
  Value p = K(b, t, c.back());
  for (size_t i = c.size() - 1; i-- > 0;) p = b.add(K(b, t, c[i]), b.mul(p, t));
  return p;
}
// a_k(nu) = prod_{j<=k} (4 nu^2 - (2j - 1)^2) / (8 j), the coefficients of the Hankel expansions
std::vector<double> hankel_coef(int nu, int n) {
  std::vector<double> a{1};
  for (int j = 1; j < n; ++j) a.push_back(a.back() * (4.0 * nu * nu - (2.0 * j - 1) * (2.0 * j - 1)) / (8.0 * j));
  return a;
}

// ---- Bessel functions of the first and second kind, x > 0 (float64)
constexpr double kBig = 17;  // power series below, Hankel's expansion above
// J_nu(x) = (x/2)^nu sum_k (-x^2/4)^k / (k! (k+nu)!)
Value j_series(Builder& b, Value x, int nu) {
  Value y = mulk(b, b.mul(x, x), 0.25), p = K(b, x, 1);
  for (int k = 50; k >= 1; --k) p = b.sub(K(b, x, 1), b.mul(p, b.div(y, K(b, x, double(k) * (k + nu)))));
  return nu ? b.mul(p, mulk(b, x, 0.5)) : p;
}
// Y_nu from DLMF 10.8.1: (2/pi)(ln(x/2) + gamma) J_nu - [nu == 1] 2/(pi x) - (x/2)^nu/pi sum_k (H_k + H_{k+nu})
// (-x^2/4)^k / (k! (k+nu)!)
Value y_series(Builder& b, Value x, int nu) {
  Value y = mulk(b, b.mul(x, x), 0.25), t = K(b, x, 1), sj = t, sh = K(b, x, nu);
  double h = 0;
  for (int k = 1; k <= 50; ++k) {
    t = b.mul(t, b.div(y, K(b, x, -double(k) * (k + nu))));
    h += 1.0 / k;
    sj = b.add(sj, t);
    sh = b.add(sh, mulk(b, t, nu ? 2 * h + 1.0 / (k + 1) : h));
  }
  Value half = mulk(b, x, 0.5), lg = b.add(un(b, Op::Log, half), K(b, x, kEuler));
  if (nu == 0) return mulk(b, b.sub(b.mul(lg, sj), sh), 2 / kPi);
  Value r = b.mul(mulk(b, lg, 2 / kPi), b.mul(sj, half));
  r = b.sub(r, b.div(K(b, x, 2 / kPi), x));
  return b.sub(r, b.mul(mulk(b, half, 1 / kPi), sh));
}
// Hankel: sqrt(2/(pi x)) (P cos w - Q sin w) for J, (P sin w + Q cos w) for Y, w = x - (2 nu + 1) pi / 4
Value hankel(Builder& b, Value x, int nu, bool second) {
  std::vector<double> a = hankel_coef(nu, 34), pc, qc;
  for (size_t k = 0; k < a.size(); ++k) (k % 2 ? qc : pc).push_back(((k / 2) % 2 ? -1 : 1) * a[k]);
  Value ix = b.div(K(b, x, 1), x), ix2 = b.mul(ix, ix);
  Value P = poly(b, ix2, pc), Q = b.mul(ix, poly(b, ix2, qc));
  Value w = b.sub(x, K(b, x, (2 * nu + 1) * kPi / 4)), c = un(b, Op::Cosine, w), s = un(b, Op::Sine, w);
  Value r = second ? b.add(b.mul(P, s), b.mul(Q, c)) : b.sub(b.mul(P, c), b.mul(Q, s));
  return b.mul(r, un(b, Op::Sqrt, b.div(K(b, x, 2 / kPi), x)));
}
Value bessel_j(Builder& b, Value x, int nu) {
  Value ax = un(b, Op::Abs, x), small = cmpk(b, ax, Cmp::LT, kBig);
  Value r = b.select(small, j_series(b, b.min(ax, K(b, x, kBig)), nu), hankel(b, b.max(ax, K(b, x, kBig)), nu, false));
  return nu ? b.select(cmpk(b, x, Cmp::LT, 0), un(b, Op::Neg, r), r) : r;
}
Value bessel_y(Builder& b, Value x, int nu) {
  Value xs = b.clamp(K(b, x, 1e-300), x, K(b, x, kBig));
  Value r = b.select(cmpk(b, x, Cmp::LT, kBig), y_series(b, xs, nu), hankel(b, b.max(x, K(b, x, kBig)), nu, true));
  r = b.select(cmpk(b, x, Cmp::EQ, 0), K(b, x, -INFINITY), r);
  return b.select(cmpk(b, x, Cmp::LT, 0), K(b, x, NAN), r);
}
Value j0_of(Builder& b, Value x) { return bessel_j(b, x, 0); }
Value j1_of(Builder& b, Value x) { return bessel_j(b, x, 1); }
Value y0_of(Builder& b, Value x) { return bessel_y(b, x, 0); }
Value y1_of(Builder& b, Value x) { return bessel_y(b, x, 1); }

// ---- modified Bessel functions: I from special.cpp; K_nu (x > 0) by DLMF 10.31.1 up to 2, above from the
// Chebyshev series of e^x sqrt(x) K_nu(x) on [2, inf] (tools/fit_chebyshev.py), float64-accurate for both.
Value k_series(Builder& b, Value x, int nu) {  // K_nu(x) for 0 < x <= 2
  Value y = mulk(b, b.mul(x, x), 0.25), t = K(b, x, 1), si = t, sh = K(b, x, nu);
  double h = 0;
  for (int k = 1; k <= 20; ++k) {
    t = b.mul(t, b.div(y, K(b, x, double(k) * (k + nu))));
    h += 1.0 / k;
    si = b.add(si, t);
    sh = b.add(sh, mulk(b, t, nu ? 2 * h + 1.0 / (k + 1) : h));
  }
  Value half = mulk(b, x, 0.5), lg = b.add(un(b, Op::Log, half), K(b, x, kEuler));
  if (nu == 0) return b.sub(sh, b.mul(lg, si));
  Value r = b.add(b.div(K(b, x, 1), x), b.mul(lg, b.mul(si, half)));
  return b.sub(r, b.mul(mulk(b, half, 0.5), sh));
}
Value bessel_k(Builder& b, Value x, int nu, bool scaled) {
  static const std::vector<double> k0{
      1.2255940566146994,     0.03105649190551231,    -0.003784919417257749,  0.0005113125678337753,
      -7.189525579138798e-05, 1.0434125738297965e-05, -1.5452130225537265e-06, 2.3274330995694076e-07,
      -3.5491296094809786e-08, 5.471129237314204e-09, -8.504459500077728e-10, 1.3321150704430565e-10,
      -2.099066453786161e-11, 3.3267671324797083e-12, -5.295836652698641e-13, 8.469506013921286e-14,
      -1.3589478093188167e-14, 2.189106405540525e-15, -3.534493817124484e-16, 5.727976263049948e-17};
  static const std::vector<double> k1{
      1.3423974715696634,     -0.10183340995335989,   0.014681817458689177,   -0.0022316161417841405,
      0.0003472410833929212,  -5.4935045076069994e-05, 8.788569713237713e-06, -1.418289230582868e-06,
      2.303926051648555e-07,  -3.762944962451323e-08, 6.1726505753020516e-09, -1.016324850883765e-09,
      1.6785241633502153e-10, -2.7797510042966163e-11, 4.613969378656507e-12, -7.674531285850401e-13,
      1.2787559142879475e-13, -2.134273793868645e-14, 3.566994924351279e-15, -5.969832169746947e-16,
      1.0001741048103362e-16, -1.6777525572966787e-17};
  Value xs = b.clamp(K(b, x, 1e-300), x, K(b, x, 2)), xl = b.max(x, K(b, x, 2));
  Value small = k_series(b, xs, nu);
  if (scaled) small = b.mul(small, un(b, Op::Exp, xs));
  Value large = b.mul(chebyshev_half_line(b, xl, 2, 4, nu ? k1 : k0), un(b, Op::Rsqrt, xl));
  if (!scaled) large = b.mul(large, un(b, Op::Exp, un(b, Op::Neg, xl)));
  Value r = b.select(cmpk(b, x, Cmp::LE, 2), small, large);
  r = b.select(cmpk(b, x, Cmp::EQ, 0), K(b, x, INFINITY), r);
  return b.select(cmpk(b, x, Cmp::LT, 0), K(b, x, NAN), r);
}
Value i0_of(Builder& b, Value x) { return special_bessel_i(b, x, 0, false); }
Value i1_of(Builder& b, Value x) { return special_bessel_i(b, x, 1, false); }
Value k0_of(Builder& b, Value x) { return bessel_k(b, x, 0, false); }
Value k1_of(Builder& b, Value x) { return bessel_k(b, x, 1, false); }
Value k0e_of(Builder& b, Value x) { return bessel_k(b, x, 0, true); }
Value k1e_of(Builder& b, Value x) { return bessel_k(b, x, 1, true); }

// ---- Airy Ai: Maclaurin series Ai(0) f - |Ai'(0)| g for -8 <= x <= 5, asymptotic expansions (DLMF 9.7.5, 9.7.9)
// in zeta = 2/3 |x|^(3/2) with u_k = u_(k-1) (6k-5)(6k-3)(6k-1) / ((2k-1) 216 k) outside.
Value airy_ai_of(Builder& b, Value x) {
  Value xs = b.clamp(K(b, x, -8), x, K(b, x, 5)), z = b.mul(b.mul(xs, xs), xs), f = K(b, x, 1), g = f;
  for (int k = 30; k >= 1; --k) {
    f = b.add(K(b, x, 1), b.mul(f, b.div(z, K(b, x, (3.0 * k - 1) * (3.0 * k)))));
    g = b.add(K(b, x, 1), b.mul(g, b.div(z, K(b, x, (3.0 * k) * (3.0 * k + 1)))));
  }
  Value series = b.sub(mulk(b, f, 0.355028053887817239), mulk(b, b.mul(g, xs), 0.258819403792806798));
  std::vector<double> u{1}, even, odd, alt;
  for (int k = 1; k < 32; ++k) u.push_back(u.back() * (6.0 * k - 5) * (6.0 * k - 3) * (6.0 * k - 1) / ((2.0 * k - 1) * 216 * k));
  for (size_t k = 0; k < u.size(); ++k) {  // the smallest terms: k ~ 16 for x > 5, k ~ 31 for x < -8
    if (k < 17) alt.push_back(k % 2 ? -u[k] : u[k]);
    (k % 2 ? odd : even).push_back(((k / 2) % 2 ? -1 : 1) * u[k]);
  }
  Value ax = b.max(un(b, Op::Abs, x), K(b, x, 5)), q = un(b, Op::Sqrt, un(b, Op::Sqrt, ax));  // |x|^(1/4)
  Value zeta = mulk(b, b.mul(ax, un(b, Op::Sqrt, ax)), 2.0 / 3), iz = b.div(K(b, x, 1), zeta), iz2 = b.mul(iz, iz);
  Value pos = b.div(b.mul(poly(b, iz, alt), un(b, Op::Exp, un(b, Op::Neg, zeta))), mulk(b, q, 2 * std::sqrt(kPi)));
  Value w = b.sub(zeta, K(b, x, kPi / 4));
  Value neg = b.add(b.mul(un(b, Op::Cosine, w), poly(b, iz2, even)), b.mul(b.mul(un(b, Op::Sine, w), iz), poly(b, iz2, odd)));
  neg = b.div(neg, mulk(b, q, std::sqrt(kPi)));
  Value r = b.select(cmpk(b, x, Cmp::GT, 5), pos, b.select(cmpk(b, x, Cmp::LT, -8), neg, series));
  return b.select(cmpk(b, un(b, Op::Abs, x), Cmp::EQ, INFINITY), K(b, x, NAN), r);
}

// spherical j0 = sin(x) / x, 1 at 0, 0 at +-inf
Value sph_j0_of(Builder& b, Value x) {
  Value r = b.select(cmpk(b, x, Cmp::EQ, 0), K(b, x, 1), b.div(un(b, Op::Sine, x), x));
  return b.select(cmpk(b, un(b, Op::Abs, x), Cmp::EQ, INFINITY), K(b, x, 0), r);
}

// ---- orthogonal polynomials of degree n (a tensor, truncated to an integer per element), as PyTorch: closed
// forms for some ranges, else the three-term recurrence q_j = step(x, j - 1, q_(j-2), q_(j-1)) for j = 2 .. n from
// q_0 = 1, q_1; n < 0 gives 0.
using Step = Value (*)(Builder&, Value x, Value k, Value p, Value q);
struct Poly {
  Builder& b;
  Value x, n, nf;  // x in the compute type, n as s64, nf = n in the compute type
  Value k(double v) const { return K(b, x, v); }
  Value all() const { return is(n, Cmp::GE, 0); }
  Value is(Value a, Cmp d, double v) const { return b.compare(a, K(b, a, v), d); }
  Value even() const { return is(b.binary(Op::Remainder, n, K(b, n, 2)), Cmp::EQ, 0); }
  // q_n of the recurrence in y (default x) run for the lanes in `loop` (others may stop early); q_0, q_1 for n = 0, 1
  Value recur(Value q1, Step step, Value loop) const { return recur(x, q1, step, loop); }
  Value recur(Value y, Value q1, Step step, Value loop) const {
    Dims all;
    for (int64_t d = 0; d < n.type.rank(); ++d) all.push_back(d);
    Value nl = b.select(loop, n, K(b, n, 0));
    Value top = all.empty() ? nl : reduce(b, nl, all, Op::Maximum, 0);
    Value j0 = b.splat(hlo::scalar(DType::S64), 2), one = b.splat(hlo::scalar(DType::S64), 1);
    Values r = b.while_({j0, K(b, x, 1), q1}, [&](Builder& w, const Values& v) {
      return Values{w.compare(v[0], top, Cmp::LE)};
    }, [&](Builder& w, const Values& v) {
      Value jb = w.broadcast_in_dim(v[0], n.type.dims, {});
      Value kf = convert(w, w.sub(jb, w.broadcast_in_dim(one, n.type.dims, {})), x.type.dtype);
      Value on = w.compare(jb, n, Cmp::LE), r = step(w, y, kf, v[1], v[2]);
      return Values{w.add(v[0], one), w.select(on, v[2], v[1]), w.select(on, r, v[2])};
    });
    Value out = b.select(is(n, Cmp::EQ, 1), q1, r[2]);
    return b.select(is(n, Cmp::EQ, 0), k(1), out);
  }
  Value acos(Value t) const {  // in float64, rounded like std::acos
    Value d = convert(b, t, DType::F64);
    Value s = un(b, Op::Sqrt, b.mul(b.sub(K(b, d, 1), d), b.add(K(b, d, 1), d)));
    return convert(b, b.binary(Op::Atan2, s, d), x.type.dtype);
  }
  Value finish(Value r) const { return b.select(is(n, Cmp::LT, 0), k(0), r); }
};
Value two_x_step(Builder& b, Value x, Value, Value p, Value q) { return b.sub(b.mul(b.add(x, x), q), p); }

// Chebyshev T, U, V, W of y (y = x, or 2x - 1 for the shifted ones); cutoff: n above which |y| < 1 uses the
// trigonometric form; x1 / x0: the x where y = 1 / y = -1.
Value cheb_t(const Poly& P, Value y, int cutoff, Value at1, Value atm1) {
  Builder& b = P.b;
  Value trig = b.and_(P.is(P.n, Cmp::GT, cutoff), P.is(un(b, Op::Abs, y), Cmp::LT, 1));
  Value r = P.recur(y, y, two_x_step, un(b, Op::Not, trig));
  r = b.select(trig, un(b, Op::Cosine, b.mul(P.nf, P.acos(y))), r);
  r = b.select(atm1, b.select(P.even(), P.k(1), P.k(-1)), r);
  return P.finish(b.select(at1, P.k(1), r));
}
Value cheb_u(const Poly& P, Value y, int cutoff, Value at1, Value atm1) {
  Builder& b = P.b;
  Value trig = b.and_(P.is(P.n, Cmp::GT, cutoff), P.is(un(b, Op::Abs, y), Cmp::LT, 1));
  Value r = P.recur(y, b.add(y, y), two_x_step, un(b, Op::Not, trig));
  Value a = P.acos(y), s = un(b, Op::Sine, a), n1 = b.add(P.nf, P.k(1)), na = b.mul(n1, a);
  Value t = b.select(P.is(s, Cmp::NE, 0), b.div(un(b, Op::Sine, na), s), b.div(b.mul(n1, un(b, Op::Cosine, na)), y));
  r = b.select(trig, t, r);
  r = b.select(atm1, b.select(P.even(), n1, un(b, Op::Neg, n1)), r);
  return P.finish(b.select(at1, n1, r));
}
// V (w = false) and W (w = true): q_1 = 2y -+ 1; (co)sine of (n + 1/2) acos y over (co)sine of acos(y) / 2
Value cheb_vw(const Poly& P, Value y, int cutoff, Value at1, Value atm1, bool w) {
  Builder& b = P.b;
  Value trig = b.and_(P.is(P.n, Cmp::GT, cutoff), P.is(un(b, Op::Abs, y), Cmp::LT, 1));
  Value r = P.recur(y, b.add(b.add(y, y), P.k(w ? 1 : -1)), two_x_step, un(b, Op::Not, trig));
  Value a = P.acos(y), h = b.div(a, P.k(2)), na = b.mul(b.add(P.nf, P.k(0.5)), a);
  Value n21 = b.add(b.add(P.nf, P.nf), P.k(1)), alt = b.select(P.even(), n21, un(b, Op::Neg, n21));
  Value pm1 = b.select(P.even(), P.k(1), P.k(-1));
  Value t = w ? b.div(un(b, Op::Sine, na), un(b, Op::Sine, h)) : b.div(un(b, Op::Cosine, na), un(b, Op::Cosine, h));
  Value deg = w ? P.is(un(b, Op::Cosine, h), Cmp::EQ, 1) : P.is(un(b, Op::Sine, h), Cmp::EQ, 1);
  t = b.select(deg, w ? b.select(P.is(y, Cmp::GT, 0), n21, pm1) : alt, t);
  r = b.select(trig, t, r);
  r = b.select(atm1, w ? pm1 : alt, r);
  return P.finish(b.select(at1, w ? n21 : P.k(1), r));
}

template <int Kind, bool Shifted>
Value chebyshev(const Poly& P) {
  Builder& b = P.b;
  Value y = Shifted ? b.sub(b.add(P.x, P.x), P.k(1)) : P.x;
  Value at1 = P.is(P.x, Cmp::EQ, 1);
  Value atm1 = Shifted ? P.is(P.x, Cmp::EQ, 0) : P.is(P.x, Cmp::EQ, -1);
  int cutoff = Shifted || Kind == 0 ? 6 : 8;
  if (Kind == 0) return cheb_t(P, y, cutoff, at1, atm1);
  if (Kind == 1) return cheb_u(P, y, cutoff, at1, atm1);
  return cheb_vw(P, y, cutoff, at1, atm1, Kind == 3);
}
Value hermite_h(const Poly& P) {  // H_j = 2x H_(j-1) - 2(j-1) H_(j-2)
  Step s = [](Builder& b, Value x, Value k, Value p, Value q) { return b.sub(b.mul(b.add(x, x), q), b.mul(b.add(k, k), p)); };
  return P.finish(P.recur(P.b.add(P.x, P.x), s, P.all()));
}
Value hermite_he(const Poly& P) {  // He_j = x He_(j-1) - (j-1) He_(j-2)
  Step s = [](Builder& b, Value x, Value k, Value p, Value q) { return b.sub(b.mul(x, q), b.mul(k, p)); };
  return P.finish(P.recur(P.x, s, P.all()));
}
Value laguerre(const Poly& P) {  // L_j = ((2k + 1 - x) L_(j-1) - k L_(j-2)) / (k + 1), k = j - 1; 1 at x = 0
  Step s = [](Builder& b, Value x, Value k, Value p, Value q) {
    Value c = b.add(b.add(k, k), b.sub(K(b, x, 1), x));
    return b.div(b.sub(b.mul(c, q), b.mul(k, p)), b.add(k, K(b, x, 1)));
  };
  Value r = P.recur(P.b.sub(P.k(1), P.x), s, P.all());
  return P.finish(P.b.select(P.is(P.x, Cmp::EQ, 0), P.k(1), r));
}
Value legendre(const Poly& P) {  // P_j = ((2k + 1) x P_(j-1) - k P_(j-2)) / (k + 1); (+-1)^n at x = +-1
  Step s = [](Builder& b, Value x, Value k, Value p, Value q) {
    Value c = b.mul(b.add(b.add(k, k), K(b, x, 1)), x);
    return b.div(b.sub(b.mul(c, q), b.mul(k, p)), b.add(k, K(b, x, 1)));
  };
  Value r = P.recur(P.x, s, P.all());
  Builder& b = P.b;
  r = b.select(P.is(P.x, Cmp::EQ, 1), P.k(1), r);
  r = b.select(P.is(P.x, Cmp::EQ, -1), b.select(P.even(), P.k(1), P.k(-1)), r);
  return P.finish(r);
}

// polynomial(x, n): both broadcast in the compute type, n truncated toward zero like PyTorch's int64 cast
template <Value (*F)(const Poly&)>
Values polynomial(Ctx& c) {
  const TensorType& o = c.out[0];
  if (o.numel() == 0) return {zeros(c.b, o)};
  DType t = compute_type(o.dtype);
  Value x = operand(c, 0, t, o.dims), nt = operand(c, 1, t, o.dims), n = convert(c.b, nt, DType::S64);
  // NaN and n outside int64 convert to INT64_MIN on CPU (x86), so give 0; here they would saturate instead
  n = c.b.select(cmpk(c.b, un(c.b, Op::Abs, nt), Cmp::LT, 9.2e18), n, K(c.b, n, -1));
  return {result(c, F(Poly{c.b, x, n, convert(c.b, n, t)}))};
}

// ---- Hurwitz zeta(x, q) = sum_k (q + k)^-x, in float64 like PyTorch's CPU kernel: direct terms until k >= 9 and
// q + k > 9 (a while loop), then Euler-Maclaurin with 12 Bernoulli terms B_2j / (2j)!.
Value any_of(Builder& b, Value p) {
  Dims all;
  for (int64_t d = 0; d < p.type.rank(); ++d) all.push_back(d);
  return all.empty() ? p : reduce(b, p, all, Op::Or, 0);
}
Value scalar_s64(Builder& b, double v) { return b.splat(hlo::scalar(DType::S64), v); }
Value zeta_of(Builder& b, Value x, Value q) {
  Value xint = b.compare(x, un(b, Op::Floor, x), Cmp::EQ), qint = b.compare(q, un(b, Op::Floor, q), Cmp::EQ);
  Value qneg = cmpk(b, q, Cmp::LE, 0);
  Value pole = b.or_(cmpk(b, x, Cmp::EQ, 1), b.and_(qneg, qint)), undef = b.or_(cmpk(b, x, Cmp::LT, 1), b.and_(qneg, un(b, Op::Not, xint)));
  Value odd = cmpk(b, un(b, Op::Abs, b.binary(Op::Remainder, x, K(b, x, 2))), Cmp::EQ, 1);
  q = b.select(b.or_(pole, undef), K(b, q, 1), q);  // those lanes are set below; keep them out of the loop
  auto pw = [&](Builder& w, Value a) {  // a^-x, x an integer where a < 0
    Value r = w.binary(Op::Power, un(w, Op::Abs, a), un(w, Op::Neg, x));
    return w.select(w.and_(w.compare(a, K(w, a, 0), Cmp::LT), odd), un(w, Op::Neg, r), r);
  };
  Value b0 = pw(b, q);
  Value i0 = scalar_s64(b, 0), nine = scalar_s64(b, 9), cap = scalar_s64(b, 100000), one = scalar_s64(b, 1);
  Values v = b.while_({i0, q, b0, b0}, [&](Builder& w, const Values& v) {
    Value more = w.and_(any_of(w, w.compare(v[1], K(w, v[1], 9), Cmp::LE)), w.compare(v[0], cap, Cmp::LT));
    return Values{w.or_(w.compare(v[0], nine, Cmp::LT), more)};
  }, [&](Builder& w, const Values& v) {
    Value act = w.or_(w.broadcast_in_dim(w.compare(v[0], nine, Cmp::LT), x.type.dims, {}),
                      w.compare(v[1], K(w, v[1], 9), Cmp::LE));
    Value a = w.add(v[1], K(w, v[1], 1)), t = pw(w, a);
    return Values{w.add(v[0], one), w.select(act, a, v[1]), w.select(act, t, v[2]), w.select(act, w.add(v[3], t), v[3])};
  });
  Value wa = v[1], bt = v[2], sum = v[3], direct = sum;
  Value tol = mulk(b, sum, 1.11022302462515654042e-16);  // PyTorch returns once a term is below it (x = inf)
  Value converged = b.and_(b.compare(un(b, Op::Neg, tol), bt, Cmp::LT), b.compare(bt, tol, Cmp::LT));
  sum = b.add(sum, b.div(b.mul(bt, wa), b.sub(x, K(b, x, 1))));
  sum = b.sub(sum, mulk(b, bt, 0.5));
  static const double bern[] = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6,
                                -3617.0 / 510, 43867.0 / 798, -174611.0 / 330, 854513.0 / 138, -236364091.0 / 2730};
  Value fa = K(b, x, 1);
  double fact = 1;
  for (int j = 0; j < 12; ++j) {  // + B_2j+2 / (2j+2)! x (x+1)...(x+2j) w^-(x+2j+1)
    fact *= (2.0 * j + 1) * (2.0 * j + 2);
    fa = b.mul(fa, b.add(x, K(b, x, 2.0 * j)));
    bt = b.div(bt, wa);
    sum = b.add(sum, mulk(b, b.mul(fa, bt), bern[j] / fact));
    fa = b.mul(fa, b.add(x, K(b, x, 2.0 * j + 1)));
    bt = b.div(bt, wa);
  }
  sum = b.select(converged, direct, sum);
  sum = b.select(pole, K(b, x, INFINITY), sum);
  return b.select(undef, K(b, x, NAN), sum);
}

// ---- regularized incomplete gamma P(a, x) (upper: Q = 1 - P), float64: the power series of P where x <= 1 or
// x <= a, else Legendre's continued fraction for Q by the modified Lentz method; each a while loop that runs until
// every lane has converged.
Value igamma_of(Builder& b, Value a, Value x, bool upper) {
  const double inf = INFINITY, eps = 1e-16, tiny = 1e-300;
  Value reg = b.and_(b.and_(cmpk(b, a, Cmp::GT, 0), cmpk(b, a, Cmp::LT, inf)),
                     b.and_(cmpk(b, x, Cmp::GT, 0), cmpk(b, x, Cmp::LT, inf)));
  Value a_in = a;  // the edges below look at the arguments
  a = b.select(reg, a, K(b, a, 1));
  Value xs = b.select(reg, x, K(b, x, 1));
  Value cf = b.and_(cmpk(b, xs, Cmp::GT, 1), b.compare(xs, a, Cmp::GT));
  Value pre = un(b, Op::Exp, b.sub(b.sub(b.mul(a, un(b, Op::Log, xs)), xs), special_lgamma(b, a)));
  Value i0 = scalar_s64(b, 0), cap = scalar_s64(b, 10000), one = scalar_s64(b, 1);
  auto going = [&](Builder& w, const Values& v) {
    return Values{w.and_(w.compare(v[0], cap, Cmp::LT), any_of(w, un(w, Op::Not, v[1])))};
  };
  // series: sum_n x^n / (a (a+1) ... (a+n)); loop values i, done, a + n, term, sum
  Value t0 = b.div(K(b, a, 1), a);
  Values sv = b.while_({i0, cf, a, t0, t0}, going, [&](Builder& w, const Values& v) {
    Value ap = w.add(v[2], K(w, a, 1)), t = w.mul(v[3], w.div(xs, ap)), sum = w.add(v[4], t);
    Value done = w.or_(v[1], w.compare(un(w, Op::Abs, t), mulk(w, un(w, Op::Abs, sum), eps), Cmp::LE));
    return Values{w.add(v[0], one), done, w.select(v[1], v[2], ap), w.select(v[1], v[3], t), w.select(v[1], v[4], sum)};
  });
  Value p = b.mul(pre, sv[4]);
  // continued fraction: Q = pre / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / ...)); values i, done, bb, c, d, h
  auto fix = [&](Builder& w, Value v) { return w.select(w.compare(un(w, Op::Abs, v), K(w, v, tiny), Cmp::LT), K(w, v, tiny), v); };
  Value bb0 = b.add(b.sub(xs, a), K(b, a, 1)), d0 = b.div(K(b, a, 1), fix(b, bb0));
  Values cv = b.while_({i0, un(b, Op::Not, cf), bb0, K(b, a, 1 / tiny), d0, d0}, going, [&](Builder& w, const Values& v) {
    Value i = convert(w, w.broadcast_in_dim(w.add(v[0], one), a.type.dims, {}), DType::F64);
    Value an = w.mul(un(w, Op::Neg, i), w.sub(i, a)), bb = w.add(v[2], K(w, a, 2));
    Value d = w.div(K(w, a, 1), fix(w, w.add(w.mul(an, v[4]), bb))), c = fix(w, w.add(bb, w.div(an, v[3])));
    Value del = w.mul(d, c), h = w.mul(v[5], del);
    Value done = w.or_(v[1], w.compare(un(w, Op::Abs, w.sub(del, K(w, del, 1))), K(w, del, eps), Cmp::LE));
    auto keep = [&](int k, Value nv) { return w.select(v[1], v[k], nv); };
    return Values{w.add(v[0], one), done, keep(2, bb), keep(3, c), keep(4, d), keep(5, h)};
  });
  Value q = b.mul(pre, cv[5]);
  Value r = upper ? b.select(cf, q, b.sub(K(b, q, 1), p)) : b.select(cf, b.sub(K(b, p, 1), q), p);
  // edges, checked in PyTorch's order (last select first): NaN for a or x negative; P(0, x) = 1 for x > 0, else NaN;
  // P(a, 0) = 0; P(inf, x) = 0 for finite x, NaN for x = inf; P(a, inf) = 1 (Q = 1 - P throughout)
  a = a_in;
  double lo = upper ? 1 : 0, hi = 1 - lo;
  Value xinf = cmpk(b, x, Cmp::EQ, inf);
  r = b.select(b.or_(is_nan(b, a), is_nan(b, x)), K(b, r, NAN), r);
  r = b.select(xinf, K(b, r, hi), r);
  r = b.select(cmpk(b, a, Cmp::EQ, inf), b.select(xinf, K(b, r, NAN), K(b, r, lo)), r);
  r = b.select(cmpk(b, x, Cmp::EQ, 0), K(b, r, lo), r);
  r = b.select(cmpk(b, a, Cmp::EQ, 0), b.select(cmpk(b, x, Cmp::GT, 0), K(b, r, hi), K(b, r, NAN)), r);
  return b.select(b.or_(cmpk(b, a, Cmp::LT, 0), cmpk(b, x, Cmp::LT, 0)), K(b, r, NAN), r);
}
// ---- rules
// f(x) evaluated in float64, rounded to the result type
template <Value (*F)(Builder&, Value)>
Values f64_unary(Ctx& c) {
  return {result(c, F(c.b, operand(c, 0, DType::F64, c.out[0].dims)))};
}

// f(x, y) with both arguments broadcast in float64, rounded to the result type
template <Value (*F)(Builder&, Value, Value)>
Values f64_binary(Ctx& c) {
  const TensorType& o = c.out[0];
  if (o.numel() == 0) return {zeros(c.b, o)};
  return {result(c, F(c.b, operand(c, 0, DType::F64, o.dims), operand(c, 1, DType::F64, o.dims)))};
}
Value igamma_lower(Builder& b, Value a, Value x) { return igamma_of(b, a, x, false); }
Value igamma_upper(Builder& b, Value a, Value x) { return igamma_of(b, a, x, true); }
// CPU has no igamma / igammac kernel for integer inputs (the meta kernel would promote them)
template <bool Upper>
Values igamma(Ctx& c) {
  if (!is_float(c.v(0).type.dtype) && !is_float(c.v(1).type.dtype)) c.fail_dtype(Upper ? "\"igammac_cpu\" not implemented for this dtype" : "\"igamma_cpu\" not implemented for this dtype");
  return f64_binary<Upper ? igamma_upper : igamma_lower>(c);
}

#define UNARY(name, fn) {"special_" name "|special_" name ".out", f64_unary<fn>}
#define BINARY(name, ...)                                                                                      \
  {"special_" name "|special_" name ".x_scalar|special_" name ".n_scalar|special_" name ".out|special_" name      \
   ".x_scalar_out|special_" name ".n_scalar_out",                                                                \
   __VA_ARGS__}
static Register r({
    UNARY("airy_ai", airy_ai_of),
    UNARY("bessel_j0", j0_of),
    UNARY("bessel_j1", j1_of),
    UNARY("bessel_y0", y0_of),
    UNARY("bessel_y1", y1_of),
    UNARY("modified_bessel_i0", i0_of),
    UNARY("modified_bessel_i1", i1_of),
    UNARY("modified_bessel_k0", k0_of),
    UNARY("modified_bessel_k1", k1_of),
    UNARY("scaled_modified_bessel_k0", k0e_of),
    UNARY("scaled_modified_bessel_k1", k1e_of),
    UNARY("spherical_bessel_j0", sph_j0_of),
    BINARY("chebyshev_polynomial_t", polynomial<chebyshev<0, false>>),
    BINARY("chebyshev_polynomial_u", polynomial<chebyshev<1, false>>),
    BINARY("chebyshev_polynomial_v", polynomial<chebyshev<2, false>>),
    BINARY("chebyshev_polynomial_w", polynomial<chebyshev<3, false>>),
    BINARY("shifted_chebyshev_polynomial_t", polynomial<chebyshev<0, true>>),
    BINARY("shifted_chebyshev_polynomial_u", polynomial<chebyshev<1, true>>),
    BINARY("shifted_chebyshev_polynomial_v", polynomial<chebyshev<2, true>>),
    BINARY("shifted_chebyshev_polynomial_w", polynomial<chebyshev<3, true>>),
    BINARY("hermite_polynomial_h", polynomial<hermite_h>),
    BINARY("hermite_polynomial_he", polynomial<hermite_he>),
    BINARY("laguerre_polynomial_l", polynomial<laguerre>),
    BINARY("legendre_polynomial_p", polynomial<legendre>),
    {"special_zeta|special_zeta.self_scalar|special_zeta.other_scalar|special_zeta.out|special_zeta.self_scalar_out|"
     "special_zeta.other_scalar_out",
     f64_binary<zeta_of>},
    {"igamma|igamma.out", igamma<false>},
    {"igammac|igammac.out", igamma<true>},
});
#undef UNARY
#undef BINARY

}  // namespace
}  // namespace tpu::lower

// Spectral linear algebra: Householder QR with LAPACK's conventions (linalg_qr, geqrf, householder_product,
// ormqr), Hermitian eigendecomposition by parallel cyclic Jacobi (_linalg_eigh), SVD by one-sided Jacobi
// (_linalg_svd) and least squares through it (linalg_lstsq); real and complex. Matrices are worked on as
// (B, m, n) with the batch dims flattened; QR in single precision (double for double inputs), the Jacobi
// methods always in double.
// geqrf and linalg_lstsq take their result types from the Meta kernels in torch_tpu/_linalg_meta.py.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lower/helpers.h"

namespace tpu::lower {
namespace {
using hlo::Cmp;
using hlo::Op;
using hlo::Precision;

Value K(Builder& b, DType t, double v, const Dims& d = {}) { return b.splat({t, d}, v); }
Value I64(Builder& b, int64_t v) { return b.splat(hlo::scalar(DType::S64), static_cast<double>(v)); }
Value bcast(Builder& b, Value x, const Dims& d, const Dims& bd) { return b.broadcast_in_dim(x, d, bd); }

// (..., r, c) -> (B, r, c) in the working type (f32 / c64, or the input's f64 / c128).
Value flat3(Ctx& c, Value x) {
  const Dims& d = x.type.dims;
  DType t = x.type.dtype;
  if (!is_complex(t) && !is_float(t)) c.fail_dtype("linalg: only floating inputs are lowered");
  int64_t n = static_cast<int64_t>(d.size()), B = 1;
  for (int64_t i = 0; i + 2 < n; ++i) B *= d[i];
  DType w = is_complex(t) ? (t == DType::C128 ? t : DType::C64) : t == DType::F64 ? t : DType::F32;
  return convert(c.b, c.b.reshape(x, {B, d[n - 2], d[n - 1]}), w);
}
// Complex support: the algorithms are written once, with conjugates that are no-ops for real types.
bool cx(const Value& x) { return is_complex(x.type.dtype); }
Value re(Builder& b, Value x) { return cx(x) ? b.unary(Op::Real, x) : x; }
Value conj(Builder& b, Value x) {
  return cx(x) ? b.binary(Op::Complex, b.unary(Op::Real, x), b.unary(Op::Neg, b.unary(Op::Imag, x))) : x;
}
Value abs2(Builder& b, Value x) {
  Value r = re(b, x), s = b.mul(r, r);
  if (!cx(x)) return s;
  Value i = b.unary(Op::Imag, x);
  return b.add(s, b.mul(i, i));
}
// The k-th result from a (B, ...) value: reshaped and rounded to out[k].
Value fin(Ctx& c, Value x, size_t k) { return convert(c.b, c.b.reshape(x, c.out[k].dims), c.out[k].dtype); }

// x . y over (B, ., .) with optional transposes, at full precision.
Value mm(Builder& b, Value x, Value y, bool tx = false, bool ty = false) {
  return b.dot_general(x, y, {{0}, {0}, {tx ? 1 : 2}, {ty ? 2 : 1}}, Precision::Highest, Precision::Highest);
}
Value tr(Builder& b, Value x) { return b.transpose(x, {0, 2, 1}); }
Value ct(Builder& b, Value x) { return conj(b, tr(b, x)); }  // conjugate transpose
Value mmH(Builder& b, Value x, Value y) { return mm(b, conj(b, x), y, true); }  // x^H y
Value cmp_iota(Builder& b, const Dims& d, int64_t d0, Cmp dir, int64_t d1) {
  return b.compare(b.iota({DType::S64, d}, d0), b.iota({DType::S64, d}, d1), dir);
}
Value eye(Builder& b, DType t, int64_t B, int64_t r, int64_t c) { return b.convert(cmp_iota(b, {B, r, c}, 1, Cmp::EQ, 2), t); }
Value sum(Builder& b, Value x, const Dims& dims) { return reduce(b, x, dims, Op::Add, 0); }
Value diag(Builder& b, Value x) {  // (B, n, n) -> (B, n)
  return sum(b, b.select(cmp_iota(b, x.type.dims, 1, Cmp::EQ, 2), x, zeros(b, x.type)), {2});
}
// Column k (a runtime s64) of (B, m, n) as (B, m, 1).
Value column(Builder& b, Value x, Value k) {
  Value z = I64(b, 0);
  return b.dynamic_slice(x, {z, z, k}, {x.type.dims[0], x.type.dims[1], 1});
}
// ---- Householder QR ----

// One geqrf step on column k of the packed (B, m, n) matrix: LAPACK's dlarfg reflector H = I - tau v v^T
// (v[k] = 1) with H x = beta e_k, beta = -sign(alpha) |x|, tau = 0 when x below the diagonal is zero. Applies H
// to the columns right of k and stores beta and v below it in column k. Returns (packed, tau (B, 1, 1)).
Values householder_step(Builder& b, Value a, Value k) {
  DType t = a.type.dtype;
  int64_t B = a.type.dims[0], m = a.type.dims[1];
  Value col = column(b, a, k), z = zeros(b, col.type);
  Value row = b.iota({DType::S64, {B, m, 1}}, 1), kk = bcast(b, k, {B, m, 1}, {});
  Value below = b.compare(row, kk, Cmp::GT), at = b.compare(row, kk, Cmp::EQ);
  Value tail = b.select(below, col, z);
  Dims s3{B, 1, 1};
  DType rt = real_part(t);
  Value alpha = b.reshape(sum(b, b.select(at, col, z), {1, 2}), s3), xn2 = b.reshape(sum(b, abs2(b, tail), {1, 2}), s3);
  Value a2 = abs2(b, alpha), ar = re(b, alpha), rz = K(b, rt, 0, s3);
  Value norm = b.unary(Op::Sqrt, b.add(a2, xn2));
  Value ai2 = cx(alpha) ? abs2(b, b.unary(Op::Imag, alpha)) : rz;
  Value skip = b.compare(b.add(xn2, ai2), rz, Cmp::EQ), one = K(b, t, 1, s3);  // zlarfg: x = 0 and alpha real
  Value beta = b.convert(b.select(b.compare(ar, rz, Cmp::GE), b.unary(Op::Neg, norm), norm), t);
  beta = b.select(skip, alpha, beta);
  Value tau = b.select(skip, K(b, t, 0, s3), b.div(b.sub(beta, alpha), b.select(skip, one, beta)));
  Value scale = b.div(one, b.select(skip, one, b.sub(alpha, beta)));
  Value v = b.add(b.mul(tail, bcast(b, scale, {B, m, 1}, {0, 1, 2})), b.convert(at, t));
  // a - conj(tau) v (v^H a) on the columns right of k
  Value w = mmH(b, v, a);  // (B, 1, n)
  Value right = b.compare(b.iota({DType::S64, w.type.dims}, 2), bcast(b, k, w.type.dims, {}), Cmp::GT);
  w = b.mul(b.select(right, w, zeros(b, w.type)), bcast(b, conj(b, tau), w.type.dims, {0, 1, 2}));
  a = b.sub(a, mm(b, v, w));
  Value newcol = b.select(below, v, b.select(at, bcast(b, beta, {B, m, 1}, {0, 1, 2}), col));
  return {b.dynamic_update_slice(a, newcol, {I64(b, 0), I64(b, 0), k}), tau};
}

// geqrf of (B, m, n): the packed reflectors and R, and tau (B, min(m, n)).
std::pair<Value, Value> geqrf_of(Builder& b, Value a) {
  int64_t B = a.type.dims[0], k = std::min(a.type.dims[1], a.type.dims[2]);
  Values r = loop(b, k, {a, zeros(b, {a.type.dtype, {B, k}})}, [](Builder& w, Value i, const Values& s) {
    Values h = householder_step(w, s[0], i);
    Value tau = w.reshape(h[1], {s[1].type.dims[0], 1});
    return Values{h[0], w.dynamic_update_slice(s[1], tau, {I64(w, 0), i})};
  }, DType::S64);
  return {r[0], r[1]};
}

// Q = H_0 H_1 ... H_{k-1} (B, m, m) from packed reflectors (B, m, n) and tau (B, k).
Value householder_q(Builder& b, Value a, Value tau) {
  int64_t B = a.type.dims[0], m = a.type.dims[1], k = tau.type.dims[1];
  DType t = a.type.dtype;
  Value q0 = eye(b, t, B, m, m);
  return loop(b, k, {q0}, [&](Builder& w, Value i, const Values& s) {
    Value row = w.iota({DType::S64, {B, m, 1}}, 1), ii = bcast(w, i, {B, m, 1}, {});
    Value col = column(w, a, i);
    Value v = w.select(w.compare(row, ii, Cmp::GT), col, w.convert(w.compare(row, ii, Cmp::EQ), t));
    Value ti = w.reshape(w.dynamic_slice(tau, {I64(w, 0), i}, {B, 1}), {B, 1, 1});
    Value qv = w.mul(mm(w, s[0], v), bcast(w, ti, {B, m, 1}, {0, 1, 2}));
    return Values{w.sub(s[0], mm(w, qv, conj(w, v), false, true))};
  }, DType::S64)[0];
}

Value triu(Builder& b, Value x) { return b.select(cmp_iota(b, x.type.dims, 1, Cmp::LE, 2), x, zeros(b, x.type)); }
Value cols(Builder& b, Value x, int64_t n) {
  const Dims& d = x.type.dims;
  return b.slice(x, {0, 0, 0}, {d[0], d[1], n});
}
Value rows(Builder& b, Value x, int64_t n) {
  const Dims& d = x.type.dims;
  return b.slice(x, {0, 0, 0}, {d[0], n, d[2]});
}

Values linalg_qr(Ctx& c) {
  Value a = flat3(c, c.v(0));
  std::string mode = c.has(1) ? c.s(1) : "reduced";
  int64_t m = a.type.dims[1], n = a.type.dims[2], k = std::min(m, n);
  auto [p, tau] = geqrf_of(c.b, a);
  Value r = triu(c.b, mode == "complete" ? p : rows(c.b, p, k));
  if (mode == "r") return {zeros(c.b, c.out[0]), fin(c, r, 1)};
  Value q = householder_q(c.b, p, tau);
  return {fin(c, mode == "complete" ? q : cols(c.b, q, k), 0), fin(c, r, 1)};
}

Values geqrf(Ctx& c) {
  auto [p, tau] = geqrf_of(c.b, flat3(c, c.v(0)));
  return {fin(c, p, 0), fin(c, tau, 1)};
}

Value tau_of(Ctx& c, size_t i) {
  Value t = c.v(i);
  const Dims& d = t.type.dims;
  int64_t B = 1;
  for (size_t j = 0; j + 1 < d.size(); ++j) B *= d[j];
  DType o = c.out[0].dtype, w = is_complex(o) ? (o == DType::C128 ? o : DType::C64) : o == DType::F64 ? o : DType::F32;
  return convert(c.b, c.b.reshape(t, {B, d.empty() ? 1 : d.back()}), w);
}

Values householder_product(Ctx& c) {
  Value a = flat3(c, c.v(0));
  return {fin(c, cols(c.b, householder_q(c.b, a, tau_of(c, 1)), a.type.dims[2]), 0)};
}

Values ormqr(Ctx& c) {
  Value q = householder_q(c.b, flat3(c, c.v(0)), tau_of(c, 1)), x = flat3(c, c.v(2));
  bool left = c.flag(3, true), trans = c.flag(4, false);
  if (trans) q = ct(c.b, q);
  return {fin(c, left ? mm(c.b, q, x) : mm(c.b, x, q), 0)};
}

// ---- Jacobi ----

// The round-robin schedule of n indices: for round r, partner[r][j] (j itself when j sits out, for odd n).
Value schedule(Builder& b, int64_t n) {
  int64_t p = n + (n & 1), rounds = std::max<int64_t>(p - 1, 1);
  std::vector<int64_t> t(rounds * n);
  for (int64_t j = 0; j < n; ++j) t[j] = j;
  for (int64_t r = 0; r < p - 1; ++r) {
    auto set = [&](int64_t x, int64_t y) {
      if (x < n) t[r * n + x] = y < n ? y : x;
      if (y < n) t[r * n + y] = x < n ? x : y;
    };
    set(p - 1, r);
    for (int64_t i = 1; i < p / 2; ++i) set((r + i) % (p - 1), (r - i + p - 1) % (p - 1));
  }
  return b.constant({DType::S64, {rounds, n}}, t.data(), t.size() * 8);
}

// The rotations (B, n, n) of one round that zero M[p, q] for every pair (p < q) of `partner` (n): J[p,p] =
// J[q,q] = c, J[p,q] = s e^(i phi), J[q,p] = -s e^(-i phi), t = s/c = sign(theta) / (|theta| + sqrt(theta^2 + 1)),
// theta = (M_qq - M_pp) / (2 |M_pq|), e^(i phi) = M_pq / |M_pq| (the sign of M_pq for real M).
Value rotation(Builder& b, Value M, Value partner) {
  DType ct_ = M.type.dtype, t = real_part(ct_);
  int64_t B = M.type.dims[0], n = M.type.dims[1];
  Dims bn{B, n}, bnn{B, n, n};
  Value self = b.iota({DType::S64, {n}}, 0);
  Value P = b.compare(bcast(b, partner, bnn, {1}), b.iota({DType::S64, bnn}, 2), Cmp::EQ);  // P[j, partner(j)]
  Value d = re(b, diag(b, M));
  Value dp = sum(b, b.select(P, bcast(b, d, bnn, {0, 2}), K(b, t, 0, bnn)), {2});
  Value off = sum(b, b.select(P, M, zeros(b, M.type)), {2}), aoff = b.unary(Op::Sqrt, abs2(b, off));
  Value low = bcast(b, b.compare(self, partner, Cmp::LT), bn, {1});
  Value lone = bcast(b, b.compare(self, partner, Cmp::EQ), bn, {1});
  Value app = b.select(low, d, dp), aqq = b.select(low, dp, d), z = K(b, t, 0, bn), one = K(b, t, 1, bn);
  Value none = b.or_(lone, b.compare(aoff, z, Cmp::EQ));
  Value safe = b.select(none, one, aoff);
  Value phase = b.div(off, b.convert(safe, ct_));
  Value theta = b.div(b.sub(aqq, app), b.mul(K(b, t, 2, bn), safe));
  Value at = b.unary(Op::Abs, theta);
  Value tn = b.div(b.select(b.compare(theta, z, Cmp::GE), one, b.unary(Op::Neg, one)),
                   b.add(at, b.unary(Op::Sqrt, b.add(b.mul(at, at), one))));
  tn = b.select(b.or_(none, b.compare(at, K(b, t, 1e30, bn), Cmp::GT)), z, tn);
  Value cs = b.unary(Op::Rsqrt, b.add(b.mul(tn, tn), one)), sn = b.mul(tn, cs);
  sn = b.mul(b.convert(b.select(low, sn, b.unary(Op::Neg, sn)), ct_), phase);
  Value J = b.select(P, bcast(b, sn, bnn, {0, 1}), zeros(b, M.type));
  return b.select(cmp_iota(b, bnn, 1, Cmp::EQ, 2), bcast(b, b.convert(cs, ct_), bnn, {0, 1}), J);
}

double eps_of(DType t) { return t == DType::F64 ? 2.220446049250313e-16 : 1.1920928955078125e-07; }
// Jacobi runs in float64 for every input (float32 rotations lose 10-100x the accuracy of LAPACK's float32
// results) until the off-diagonal part is below eps times the norm: float64's eps, or 1e-10 for narrower types.
Value f64(Ctx& c, Value x) { return convert(c.b, x, cx(x) ? DType::C128 : DType::F64); }
double jacobi_eps(const Value& a) { return real_part(a.type.dtype) == DType::F64 ? eps_of(DType::F64) : 1e-10; }

// Jacobi sweeps over (B, n, n) M until `measure` of the state is <= 0, at most 30 sweeps. `step`
// receives the round's rotations and the state and returns the new state; state[0] is the matrix the
// rotations are computed from (M itself, or the Gram matrix for one-sided Jacobi, via gram()).
Values jacobi(Builder& b, int64_t n, const Values& state, const std::function<Value(Builder&, const Values&)>& gram,
              const std::function<Values(Builder&, Value, const Values&)>& step,
              const std::function<Value(Builder&, Value)>& measure) {
  if (n < 2) return state;
  DType t = real_part(state[0].type.dtype);
  int64_t rounds = n - 1 + (n & 1), limit = rounds * 30;
  Value table = schedule(b, n);
  Values init{I64(b, 0), K(b, t, 1)};
  init.insert(init.end(), state.begin(), state.end());
  Values r = b.while_(
      init,
      [&](Builder& w, const Values& s) {
        Value more = w.compare(s[1], K(w, t, 0), Cmp::GT);
        return Values{w.and_(w.compare(s[0], I64(w, limit), Cmp::LT), more)};
      },
      [&](Builder& w, const Values& s) {
        Values st(s.begin() + 2, s.end());
        Value round = w.binary(Op::Remainder, s[0], I64(w, rounds));
        Value partner = w.reshape(w.dynamic_slice(table, {round, I64(w, 0)}, {1, n}), {n});
        Value M = gram(w, st);
        Values out{w.add(s[0], I64(w, 1)), measure(w, M)};
        Values next = step(w, rotation(w, M, partner), st);
        out.insert(out.end(), next.begin(), next.end());
        return out;
      });
  return Values(r.begin() + 2, r.end());
}

// Sorts the (B, n) keys (ascending, or descending) and returns them with the permutation matrix Pm (B, n, n),
// x Pm reordering the columns of x the same way.
std::pair<Value, Value> sort_perm(Builder& b, Value key, bool descending) {
  int64_t B = key.type.dims[0], n = key.type.dims[1];
  Value idx = b.iota({DType::S64, {B, n}}, 1);
  Values s = b.sort({key, idx}, 1, true, [descending](Builder& r, const Values& a) {
    return Values{r.compare(a[0], a[1], descending ? Cmp::GT : Cmp::LT)};
  });
  Dims bnn{B, n, n};
  Value pm = b.compare(bcast(b, s[1], bnn, {0, 2}), b.iota({DType::S64, bnn}, 1), Cmp::EQ);
  return {s[0], pm};
}

// Eigenvalues ascending (B, n) and eigenvectors (B, n, n) of the Hermitian matrix whose `lower` (or upper)
// triangle a holds.
std::pair<Value, Value> eigh_of(Builder& b, Value a, bool lower, double eps) {
  int64_t B = a.type.dims[0], n = a.type.dims[1];
  DType t = a.type.dtype;
  Value tri = cmp_iota(b, a.type.dims, 1, lower ? Cmp::GT : Cmp::LT, 2);
  Value strict = b.select(tri, a, zeros(b, a.type));
  Value dg = b.convert(re(b, b.select(cmp_iota(b, a.type.dims, 1, Cmp::EQ, 2), a, zeros(b, a.type))), t);
  a = b.add(b.add(strict, ct(b, strict)), dg);
  Value norm2 = sum(b, abs2(b, a), {0, 1, 2}), tol = b.mul(norm2, K(b, real_part(t), eps * eps));
  Values r = jacobi(
      b, n, {a, eye(b, t, B, n, n)}, [](Builder&, const Values& s) { return s[0]; },
      [](Builder& w, Value J, const Values& s) { return Values{mm(w, mmH(w, J, s[0]), J), mm(w, s[1], J)}; },
      [&](Builder& w, Value M) {
        Value off = w.select(cmp_iota(w, M.type.dims, 1, Cmp::NE, 2), M, zeros(w, M.type));
        return w.sub(sum(w, abs2(w, off), {0, 1, 2}), tol);
      });
  auto [ev, pm] = sort_perm(b, re(b, diag(b, r[0])), false);
  return {ev, mm(b, r[1], b.convert(pm, t))};
}

Values linalg_eigh(Ctx& c) {
  Value a = flat3(c, c.v(0));
  std::string uplo = c.has(1) ? c.s(1) : "L";
  auto [ev, v] = eigh_of(c.b, f64(c, a), uplo == "L" || uplo == "l", jacobi_eps(a));
  bool compute_v = c.flag(2, true);
  return {fin(c, ev, 0), compute_v ? fin(c, v, 1) : zeros(c.b, c.out[1])};
}

// SVD of (B, m, n), m >= n, by one-sided Jacobi: W = A V with orthogonal columns, S = |W_j| descending, U from
// the QR of W (so U is exactly orthonormal and completes to m x m). Returns U (B, m, full ? m : n), S, V.
std::tuple<Value, Value, Value> svd_of(Builder& b, Value a, bool full, bool uv, double eps) {
  int64_t B = a.type.dims[0], m = a.type.dims[1], n = a.type.dims[2];
  DType t = a.type.dtype;
  DType rt = real_part(t);
  Value tiny = K(b, rt, 1e-30);
  Values r = jacobi(
      b, n, {a, eye(b, t, B, n, n)}, [](Builder& w, const Values& s) { return mmH(w, s[0], s[0]); },
      [](Builder& w, Value J, const Values& s) { return Values{mm(w, s[0], J), mm(w, s[1], J)}; },
      [&](Builder& w, Value M) {  // max over pairs of M_pq^2 / (M_pp M_qq) - eps^2
        Value d = re(w, diag(w, M));
        Value dd = w.mul(bcast(w, d, M.type.dims, {0, 1}), bcast(w, d, M.type.dims, {0, 2}));
        Value off = w.select(cmp_iota(w, M.type.dims, 1, Cmp::NE, 2), M, zeros(w, M.type));
        Value rel = w.div(abs2(w, off), w.max(dd, bcast(w, tiny, M.type.dims, {})));
        return w.sub(reduce(w, rel, {0, 1, 2}, Op::Maximum, 0), K(w, rt, eps * eps));
      });
  Value s = b.unary(Op::Sqrt, sum(b, abs2(b, r[0]), {1}));
  auto [sv, pm_] = sort_perm(b, s, true);
  if (!uv) return {Value{}, sv, Value{}};
  Value pm = b.convert(pm_, t);
  Value w = mm(b, r[0], pm), v = mm(b, r[1], pm);
  auto [p, tau] = geqrf_of(b, w);
  Value q = householder_q(b, p, tau);
  // scale column j by the phase of R_jj (its sign for real types), so that U_j = W_j / S_j
  Value rd = diag(b, rows(b, p, n)), ar = b.unary(Op::Sqrt, abs2(b, rd));  // (B, n)
  Value zero = b.compare(ar, zeros(b, ar.type), Cmp::EQ);
  Value sg = b.select(zero, K(b, t, 1, rd.type.dims), b.div(rd, b.convert(b.select(zero, K(b, real_part(t), 1, ar.type.dims), ar), t)));
  sg = b.pad(sg, K(b, t, 1), {0, 0}, {0, m - n});
  q = b.mul(q, bcast(b, sg, {B, m, m}, {0, 2}));
  return {full ? q : cols(b, q, n), sv, v};
}

Values linalg_svd(Ctx& c) {
  Value a = flat3(c, c.v(0));
  bool full = c.flag(1, false), uv = c.flag(2, true);
  bool wide = a.type.dims[1] < a.type.dims[2];
  auto [u, s, v] = svd_of(c.b, f64(c, wide ? ct(c.b, a) : a), full, uv, jacobi_eps(a));
  if (!uv) return {zeros(c.b, c.out[0]), fin(c, s, 1), zeros(c.b, c.out[2])};
  if (wide) return {fin(c, v, 0), fin(c, s, 1), fin(c, ct(c.b, u), 2)};  // A^H = U' S V'^H
  return {fin(c, u, 0), fin(c, s, 1), fin(c, ct(c.b, v), 2)};
}

// Least squares by the SVD (minimum-norm solution, singular values below rcond * S_max dropped). Residuals,
// rank and singular values are filled where the result types ask for them (they depend on the driver).
Values linalg_lstsq(Ctx& c) {
  Value a = c.v(0), y = c.v(1);
  double eps = jacobi_eps(a);
  const Dims &ad = a.type.dims, &od = c.out[0].dims;
  int64_t r = a.type.rank(), m = ad[r - 2], n = ad[r - 1];
  bool vec = y.type.rank() == 1 || (y.type.rank() == r - 1 && y.type.dims == Dims(ad.begin(), ad.end() - 1));
  Dims batch(od.begin(), od.end() - (vec ? 1 : 2)), as = batch, ys = batch;
  int64_t k = vec ? 1 : od.back();
  as.insert(as.end(), {m, n});
  ys.insert(ys.end(), {m, k});
  if (vec) {
    Dims d = y.type.dims;
    d.push_back(1);
    y = c.b.reshape(y, d);
  }
  a = f64(c, flat3(c, broadcast_to(c.b, a, as)));
  y = convert(c.b, flat3(c, broadcast_to(c.b, y, ys)), a.type.dtype);
  DType ct_ = a.type.dtype, t = real_part(ct_);
  int64_t B = a.type.dims[0], p = std::min(m, n);
  bool wide = m < n;
  auto [u, s, v] = svd_of(c.b, wide ? ct(c.b, a) : a, false, true, eps);
  if (wide) std::swap(u, v);
  Value rc = c.has(2) ? c.b.reshape(convert(c.b, c.v(2), t), {}) : K(c.b, t, eps_of(real_part(c.out[0].dtype)) * std::max(m, n));
  Value smax = p ? c.b.reshape(c.b.slice(s, {0, 0}, {B, 1}), {B}) : K(c.b, t, 0, {B});
  Value thr = c.b.mul(bcast(c.b, rc, {B, p}, {}), bcast(c.b, smax, {B, p}, {0}));
  Value keep = c.b.compare(s, thr, Cmp::GT);
  Value inv = c.b.select(keep, c.b.div(K(c.b, t, 1, {B, p}), s), K(c.b, t, 0, {B, p}));
  Value x = mm(c.b, v, c.b.mul(mmH(c.b, u, y), bcast(c.b, c.b.convert(inv, ct_), {B, p, k}, {0, 1})));
  Value res = sum(c.b, abs2(c.b, c.b.sub(mm(c.b, a, x), y)), {1});
  Value rank = sum(c.b, c.b.convert(keep, DType::S64), {1});
  auto opt = [&](Value val, size_t i) { return c.out[i].numel() ? fin(c, val, i) : zeros(c.b, c.out[i]); };
  return {fin(c, x, 0), opt(res, 1), opt(rank, 2), opt(s, 3)};
}

Register r({
    {"linalg_qr|linalg_qr.out", linalg_qr},
    {"geqrf|geqrf.a", geqrf},
    {"linalg_householder_product|linalg_householder_product.out", householder_product},
    {"ormqr|ormqr.out", ormqr},
    {"_linalg_eigh|_linalg_eigh.eigenvalues", linalg_eigh},
    {"_linalg_svd|_linalg_svd.U", linalg_svd},
    {"linalg_lstsq.out", linalg_lstsq},
});

}  // namespace
}  // namespace tpu::lower

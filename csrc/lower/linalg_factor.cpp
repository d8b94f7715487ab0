// Factorizations and solves: Cholesky, LU with partial pivoting (LAPACK's pivot choice: max |a| (|re| + |im|
// for complex), first on ties; 1-based int32 pivots), triangular solves, and what is built on them (inverse,
// solve, det, slogdet, lu_unpack, cholesky_solve/inverse), LDL^T (Bunch-Kaufman, sytrf/hetrf) and matrix_exp.
// Matrices are flattened to (B, m, n) and factored by stablehlo.while loops over the column index with iota
// masks over the whole batch. Computed in float32 (float64, complex64/128 as given); info, pivots and the
// factors follow LAPACK's unblocked algorithms, so they match CPU's.
#include <cmath>
#include <functional>

#include "lower/helpers.h"

namespace tpu::lower {
namespace {
using hlo::Cmp;
using hlo::Op;

const TensorType kI32{DType::S32, {}};
DType ct(Ctx&, DType t) { return is_complex(t) || t == DType::F64 ? t : DType::F32; }
Value bc(Builder& b, Value x, const Dims& to) {  // x's dims are a prefix-aligned subset: (B,m) -> (B,m,n) etc.
  Dims d;
  for (int64_t i = 0; i < x.type.rank(); ++i) d.push_back(i);
  return b.broadcast_in_dim(x, to, d);
}
Value iota(Builder& b, const Dims& d, int64_t dim) { return b.iota({DType::S32, d}, dim); }
Value cmpk(Builder& b, Value x, Cmp dir, Value k) { return b.compare(x, b.broadcast_in_dim(k, x.type.dims, {}), dir); }
Value cmpv(Builder& b, Value x, Cmp dir, Value y) { return b.compare(x, bc(b, y, x.type.dims), dir); }
Value mT(Builder& b, Value x) { return b.transpose(x, {0, 2, 1}); }
Value conj(Builder& b, Value x) {
  if (!is_complex(x.type.dtype)) return x;
  return b.binary(Op::Complex, b.unary(Op::Real, x), b.unary(Op::Neg, b.unary(Op::Imag, x)));
}
Value mH(Builder& b, Value x) { return conj(b, mT(b, x)); }
Value re(Builder& b, Value x) { return is_complex(x.type.dtype) ? b.unary(Op::Real, x) : x; }
Value cabs1(Builder& b, Value x) {  // LAPACK's |re| + |im| (i?amax's measure)
  if (!is_complex(x.type.dtype)) return b.unary(Op::Abs, x);
  return b.add(b.unary(Op::Abs, b.unary(Op::Real, x)), b.unary(Op::Abs, b.unary(Op::Imag, x)));
}
Value of_pred(Builder& b, Value p, DType t) { return b.select(p, b.splat({t, p.type.dims}, 1), b.splat({t, p.type.dims}, 0)); }
Value bmm(Builder& b, Value x, Value y) {
  return b.dot_general(x, y, {{0}, {0}, {2}, {1}}, hlo::Precision::Highest, hlo::Precision::Highest);
}
int64_t prod(const Dims& d) {
  int64_t p = 1;
  for (auto x : d) p *= x;
  return p;
}
Dims head(const Dims& d, size_t drop) { return Dims(d.begin(), d.end() - drop); }
Dims cat(Dims a, const Dims& b) { a.insert(a.end(), b.begin(), b.end()); return a; }
// x (..., m, n) broadcast to batch + (m, n), as (B, m, n) in dtype t; `keep` trailing dims are matrix dims.
Value flat(Builder& b, Value x, const Dims& batch, DType t, size_t keep = 2) {
  Dims tail(x.type.dims.end() - keep, x.type.dims.end());
  x = broadcast_to(b, convert(b, x, t), cat(batch, tail));
  return b.reshape(x, cat({prod(batch)}, tail));
}
Value out(Ctx& c, Value x, size_t k) { return convert(c.b, c.b.reshape(x, c.out[k].dims), c.out[k].dtype); }
Value eye(Builder& b, DType t, int64_t B, int64_t n) {
  Dims d{B, n, n};
  return of_pred(b, b.compare(iota(b, d, 1), iota(b, d, 2), Cmp::EQ), t);
}

// Solves T x = rhs for triangular T (B, n, n), rhs (B, n, r), reading only T's triangle.
Value trsolve(Builder& b, Value T, Value rhs, bool upper, bool unit) {
  int64_t B = T.type.dims[0], n = T.type.dims[1], r = rhs.type.dims[2];
  Value z = b.splat(kI32, 0);
  return loop(b, n, {zeros(b, rhs.type)}, [&](Builder& w, Value t, const Values& s) {
    Value i = upper ? w.sub(w.splat(kI32, double(n - 1)), t) : t;
    Value row = w.dynamic_slice(T, {z, i, z}, {B, 1, n});
    row = w.select(cmpk(w, iota(w, {B, 1, n}, 2), upper ? Cmp::GT : Cmp::LT, i), row, K(w, row, 0));
    Value y = w.sub(w.dynamic_slice(rhs, {z, i, z}, {B, 1, r}), bmm(w, row, s[0]));
    if (!unit) y = w.div(y, bc(w, w.dynamic_slice(T, {z, i, i}, {B, 1, 1}), {B, 1, r}));
    return Values{w.dynamic_update_slice(s[0], y, {z, i, z})};
  })[0];
}

// Lower Cholesky factor of (B, n, n) from its lower triangle, LAPACK's info (first non-positive pivot, 1-based;
// the factorization stops there).
std::pair<Value, Value> cholesky(Builder& b, Value a) {
  int64_t B = a.type.dims[0], n = a.type.dims[1];
  Dims d{B, n, n};
  Value z = b.splat(kI32, 0);
  Values r = loop(b, n, {a, b.splat({DType::S32, {B}}, 0)}, [&](Builder& w, Value j, const Values& s) {
    Value a = s[0], info = s[1];
    Value R = iota(w, d, 1), C = iota(w, d, 2);
    Value col = w.dynamic_slice(a, {z, z, j}, {B, n, 1}), dj = w.dynamic_slice(a, {z, j, j}, {B, 1, 1});
    Value rj = re(w, dj);
    Value ok = w.and_(w.compare(rj, K(w, rj, 0), Cmp::GT), w.compare(w.reshape(info, {B, 1, 1}), w.splat({DType::S32, {B, 1, 1}}, 0), Cmp::EQ));
    Value sq = convert(w, w.unary(Op::Sqrt, rj), dj.type.dtype);
    Value l = w.div(col, bc(w, sq, {B, n, 1}));
    Value lt = conj(w, w.reshape(l, {B, 1, n}));
    Value upd = w.sub(a, w.mul(bc(w, l, d), w.broadcast_in_dim(lt, d, {0, 1, 2})));
    Value na = w.select(w.and_(cmpk(w, R, Cmp::GT, j), cmpk(w, C, Cmp::GT, j)), upd, a);
    Value lcol = w.select(cmpk(w, iota(w, {B, n, 1}, 1), Cmp::EQ, j), bc(w, sq, {B, n, 1}), l);
    na = w.select(w.and_(cmpk(w, C, Cmp::EQ, j), cmpk(w, R, Cmp::GE, j)), w.broadcast_in_dim(lcol, d, {0, 1, 2}), na);
    Value okb = w.broadcast_in_dim(w.reshape(ok, {B}), d, {0});
    Value bad = w.and_(w.compare(info, w.splat(info.type, 0), Cmp::EQ), w.unary(Op::Not, w.reshape(ok, {B})));
    return Values{w.select(okb, na, a), w.select(bad, w.broadcast_in_dim(w.add(j, w.splat(kI32, 1)), {B}, {}), info)};
  });
  Value L = b.select(b.compare(iota(b, d, 2), iota(b, d, 1), Cmp::LE), r[0], K(b, r[0], 0));
  return {L, r[1]};
}

// LU with partial pivoting of (B, m, n): {LU, pivots (B, k) 1-based i32, info (B) i32}.
struct Lu { Value lu, piv, info; };
Lu lu_factor(Builder& b, Value a) {
  int64_t B = a.type.dims[0], m = a.type.dims[1], n = a.type.dims[2], k = std::min(m, n);
  Dims d{B, m, n};
  Value z = b.splat(kI32, 0);
  Values init{a, b.splat({DType::S32, {B, k}}, 0), b.splat({DType::S32, {B}}, 0)};
  Values r = loop(b, k, init, [&](Builder& w, Value j, const Values& s) {
    Value a = s[0], piv = s[1], info = s[2];
    Value Rm = iota(w, {B, m}, 1);
    Value col = w.reshape(w.dynamic_slice(a, {z, z, j}, {B, m, 1}), {B, m});
    Value below = cmpk(w, Rm, Cmp::GE, j);
    Value ab = cabs1(w, col);
    Value av = w.select(below, ab, K(w, ab, -1));
    Value mx = reduce(w, av, {1}, Op::Maximum, -1);
    Value cand = w.select(w.and_(below, cmpv(w, av, Cmp::EQ, mx)), Rm, w.splat(Rm.type, double(m)));
    Value p = reduce(w, cand, {1}, Op::Minimum, double(m));
    Value jb = w.broadcast_in_dim(j, {B}, {});
    p = w.select(w.compare(p, w.splat(p.type, double(m)), Cmp::EQ), jb, p);  // all NaN: no swap
    piv = w.dynamic_update_slice(piv, w.reshape(w.add(p, w.splat(p.type, 1)), {B, 1}), {z, j});
    Value R = iota(w, d, 1), C = iota(w, d, 2);
    Value rj = w.dynamic_slice(a, {z, j, z}, {B, 1, n});
    Value isp = cmpv(w, R, Cmp::EQ, p);
    Value rp = w.reshape(reduce(w, w.select(isp, a, K(w, a, 0)), {1}, Op::Add, 0), {B, 1, n});
    a = w.select(cmpk(w, R, Cmp::EQ, j), w.broadcast_in_dim(rp, d, {0, 1, 2}),
                 w.select(isp, w.broadcast_in_dim(rj, d, {0, 1, 2}), a));
    Value pv = w.dynamic_slice(a, {z, j, j}, {B, 1, 1});
    Value nz = w.compare(pv, K(w, pv, 0), Cmp::NE);
    Value c2 = w.dynamic_slice(a, {z, z, j}, {B, m, 1});
    Value l = w.select(bc(w, nz, {B, m, 1}), w.div(c2, bc(w, pv, {B, m, 1})), c2);
    Value upd = w.sub(a, w.mul(w.broadcast_in_dim(l, d, {0, 1, 2}), w.broadcast_in_dim(rp, d, {0, 1, 2})));
    Value Rg = cmpk(w, R, Cmp::GT, j);
    a = w.select(w.and_(Rg, cmpk(w, C, Cmp::GT, j)), upd, a);
    a = w.select(w.and_(Rg, cmpk(w, C, Cmp::EQ, j)), w.broadcast_in_dim(l, d, {0, 1, 2}), a);
    Value bad = w.and_(w.compare(info, w.splat(info.type, 0), Cmp::EQ), w.unary(Op::Not, w.reshape(nz, {B})));
    info = w.select(bad, w.add(jb, w.splat(jb.type, 1)), info);
    return Values{a, piv, info};
  });
  return {r[0], r[1], r[2]};
}

// The row permutation of pivots (B, k) over m rows: row i of P^T A is row perm[i] of A (perm 0-based).
Value perm_of(Builder& b, Value piv, int64_t m) {
  int64_t B = piv.type.dims[0], k = piv.type.dims[1];
  Value z = b.splat(kI32, 0);
  return loop(b, k, {iota(b, {B, m}, 1)}, [&](Builder& w, Value i, const Values& s) {
    Value perm = s[0], Rm = iota(w, {B, m}, 1);
    Value p = w.sub(w.reshape(w.dynamic_slice(piv, {z, i}, {B, 1}), {B}), w.splat({DType::S32, {B}}, 1));
    Value isp = cmpv(w, Rm, Cmp::EQ, p);
    Value vi = w.dynamic_slice(perm, {z, i}, {B, 1});
    Value vp = reduce(w, w.select(isp, perm, w.splat(perm.type, 0)), {1}, Op::Add, 0);
    return Values{w.select(cmpk(w, Rm, Cmp::EQ, i), bc(w, vp, {B, m}), w.select(isp, w.broadcast_in_dim(vi, {B, m}, {0, 1}), perm))};
  })[0];
}
// One-hot (B, m, m): onehot[b, i, j] = perm[b, i] == j, in t.
Value onehot(Builder& b, Value perm, DType t) {
  int64_t B = perm.type.dims[0], m = perm.type.dims[1];
  return of_pred(b, cmpv(b, iota(b, {B, m, m}, 2), Cmp::EQ, perm), t);
}

// Solves op(A) x = rhs, op = none / transpose / conjugate transpose (LAPACK's trans), from A's LU (B, n, n)
// and perm (B, n); rhs (B, n, r).
enum Trans { N, T, C };
Value lu_solve(Builder& b, Value lu, Value perm, Value rhs, Trans tr) {
  Value P = onehot(b, perm, lu.type.dtype);
  if (tr == N) return trsolve(b, lu, trsolve(b, lu, bmm(b, P, rhs), false, true), true, false);
  Value t = tr == C ? mH(b, lu) : mT(b, lu);
  return bmm(b, mT(b, P), trsolve(b, t, trsolve(b, t, rhs, false, false), true, true));
}
Value lu_solve_side(Builder& b, Value lu, Value perm, Value rhs, bool left, bool adjoint) {
  if (left) return lu_solve(b, lu, perm, rhs, adjoint ? C : N);
  if (!adjoint) return mT(b, lu_solve(b, lu, perm, mT(b, rhs), T));  // x A = rhs <=> A^T x^T = rhs^T
  return mH(b, lu_solve(b, lu, perm, mH(b, rhs), N));                // x A^H = rhs <=> A x^H = rhs^H
}
Value diag(Builder& b, Value x) {  // (B, n, n) -> (B, n)
  Value on = b.compare(iota(b, x.type.dims, 1), iota(b, x.type.dims, 2), Cmp::EQ);
  return reduce(b, b.select(on, x, K(b, x, 0)), {2}, Op::Add, 0);
}
Value perm_sign(Builder& b, Value piv, DType t) {  // (-1)^(number of pivots that swap), (B)
  Value sw = b.compare(piv, b.add(iota(b, piv.type.dims, 1), b.splat(piv.type, 1)), Cmp::NE);
  Value cnt = reduce(b, convert(b, sw, DType::S32), {1}, Op::Add, 0);
  Value odd = b.compare(b.and_(cnt, b.splat(cnt.type, 1)), b.splat(cnt.type, 1), Cmp::EQ);
  return b.select(odd, b.splat({t, cnt.type.dims}, -1), b.splat({t, cnt.type.dims}, 1));
}

// ---- rules
Values linalg_cholesky_ex(Ctx& c) {  // also cholesky (self, upper) -> L
  Value a = flat(c.b, c.v(0), head(c.out[0].dims, 2), ct(c, c.v(0).type.dtype));
  bool upper = c.flag(1);
  if (upper) a = mH(c.b, a);
  auto [L, info] = cholesky(c.b, a);
  Values r{out(c, upper ? mH(c.b, L) : L, 0)};
  if (c.out.size() > 1) r.push_back(out(c, info, 1));
  return r;
}

Values linalg_solve_triangular(Ctx& c) {
  Dims batch = head(c.out[0].dims, 2);
  DType t = ct(c, c.out[0].dtype);
  Value A = flat(c.b, c.v(0), batch, t), B = flat(c.b, c.v(1), batch, t);
  bool upper = c.flag(2), left = c.flag(3, true), unit = c.flag(4);
  if (left) return {out(c, trsolve(c.b, A, B, upper, unit), 0)};
  return {out(c, mT(c.b, trsolve(c.b, mT(c.b, A), mT(c.b, B), !upper, unit)), 0)};
}
Values triangular_solve(Ctx& c) {  // (B, A, upper, transpose, unitriangular) -> (X, A)
  Dims batch = head(c.out[0].dims, 2);
  DType t = ct(c, c.out[0].dtype);
  Value B = flat(c.b, c.v(0), batch, t), A = flat(c.b, c.v(1), batch, t);
  bool upper = c.flag(2, true), tr = c.flag(3), unit = c.flag(4);
  Value X = tr ? trsolve(c.b, mT(c.b, A), B, !upper, unit) : trsolve(c.b, A, B, upper, unit);
  return {out(c, X, 0), out(c, A, 1)};
}
// Solves (L L^H) x = rhs, or (U^H U) x = rhs when upper.
Value chol_solve(Builder& b, Value F, Value rhs, bool upper) {
  if (upper) return trsolve(b, F, trsolve(b, mH(b, F), rhs, false, false), true, false);
  return trsolve(b, mH(b, F), trsolve(b, F, rhs, false, false), true, false);
}
Values cholesky_solve_helper(Ctx& c) {
  Dims batch = head(c.out[0].dims, 2);
  DType t = ct(c, c.out[0].dtype);
  return {out(c, chol_solve(c.b, flat(c.b, c.v(1), batch, t), flat(c.b, c.v(0), batch, t), c.flag(2)), 0)};
}
Values cholesky_inverse(Ctx& c) {
  Dims batch = head(c.out[0].dims, 2);
  DType t = ct(c, c.out[0].dtype);
  Value F = flat(c.b, c.v(0), batch, t);
  return {out(c, chol_solve(c.b, F, eye(c.b, t, F.type.dims[0], F.type.dims[1]), c.flag(1)), 0)};
}

Values linalg_lu_factor_ex(Ctx& c) {
  if (!c.flag(1, true)) c.fail("LU without pivoting is not implemented");
  Lu f = lu_factor(c.b, flat(c.b, c.v(0), head(c.out[0].dims, 2), ct(c, c.v(0).type.dtype)));
  return {out(c, f.lu, 0), out(c, f.piv, 1), out(c, f.info, 2)};
}
// P, L, U of an LU (B, m, n) and its pivots, into outputs k0.. (an empty output stays zeros).
Values unpack(Ctx& c, Value lu, Value piv) {
  Builder& b = c.b;
  int64_t B = lu.type.dims[0], m = lu.type.dims[1], n = lu.type.dims[2], k = std::min(m, n);
  Values r;
  if (c.out[0].numel() > 0) r.push_back(out(c, mT(b, onehot(b, perm_of(b, piv, m), lu.type.dtype)), 0));
  else r.push_back(zeros(b, c.out[0]));
  if (c.out[1].numel() == 0) return {r[0], zeros(b, c.out[1]), zeros(b, c.out[2])};
  Value L = b.slice(lu, {0, 0, 0}, {B, m, k}), U = b.slice(lu, {0, 0, 0}, {B, k, n});
  Value Li = iota(b, L.type.dims, 1), Lj = iota(b, L.type.dims, 2);
  L = b.select(b.compare(Li, Lj, Cmp::GT), L, of_pred(b, b.compare(Li, Lj, Cmp::EQ), L.type.dtype));
  U = b.select(b.compare(iota(b, U.type.dims, 1), iota(b, U.type.dims, 2), Cmp::LE), U, K(b, U, 0));
  return {r[0], out(c, L, 1), out(c, U, 2)};
}
Values lu_unpack(Ctx& c) {
  Dims batch = head(c.v(0).type.dims, 2);
  Value lu = flat(c.b, c.v(0), batch, ct(c, c.v(0).type.dtype));
  return unpack(c, lu, flat(c.b, c.v(1), batch, DType::S32, 1));
}
Values linalg_lu(Ctx& c) {
  if (!c.flag(1, true)) c.fail("LU without pivoting is not implemented");
  Lu f = lu_factor(c.b, flat(c.b, c.v(0), head(c.v(0).type.dims, 2), ct(c, c.v(0).type.dtype)));
  return unpack(c, f.lu, f.piv);
}
Values linalg_lu_solve(Ctx& c) {
  Dims batch = head(c.out[0].dims, 2);
  DType t = ct(c, c.out[0].dtype);
  Value lu = flat(c.b, c.v(0), batch, t), piv = flat(c.b, c.v(1), batch, DType::S32, 1);
  Value perm = perm_of(c.b, piv, lu.type.dims[1]);
  return {out(c, lu_solve_side(c.b, lu, perm, flat(c.b, c.v(2), batch, t), c.flag(3, true), c.flag(4)), 0)};
}
Values linalg_inv_ex(Ctx& c) {
  Value a = flat(c.b, c.v(0), head(c.out[0].dims, 2), ct(c, c.v(0).type.dtype));
  Lu f = lu_factor(c.b, a);
  Value I = eye(c.b, a.type.dtype, a.type.dims[0], a.type.dims[1]);
  return {out(c, lu_solve(c.b, f.lu, perm_of(c.b, f.piv, a.type.dims[1]), I, N), 0), out(c, f.info, 1)};
}
Values linalg_solve_ex(Ctx& c) {  // (A, B, left) -> (result, LU, pivots, info)
  Value A = c.v(0), B = c.v(1);
  DType t = ct(c, A.type.dtype);
  bool left = c.flag(2, true);
  bool vec = B.type.rank() == 1 || (B.type.rank() == A.type.rank() - 1 && B.type.dims == head(A.type.dims, 1));
  if (vec) B = c.b.reshape(B, cat(B.type.dims, {1}));
  Dims batch = head(c.out[0].dims, vec ? 1 : 2);
  Lu f = lu_factor(c.b, flat(c.b, A, head(c.out[1].dims, 2), t));
  Dims n{A.type.dims.back()};
  Value lu = flat(c.b, c.b.reshape(f.lu, c.out[1].dims), batch, t);
  Value piv = flat(c.b, c.b.reshape(f.piv, c.out[2].dims), batch, DType::S32, 1);
  Value x = lu_solve_side(c.b, lu, perm_of(c.b, piv, n[0]), flat(c.b, B, batch, t), left, false);
  return {out(c, x, 0), out(c, f.lu, 1), out(c, f.piv, 2), out(c, f.info, 3)};
}
// det and slogdet factor A^T when A is contiguous and real, like CPU: their backward solves with
// adjoint = !(contiguous and real).
Lu lu_of_transpose(Ctx& c) {
  Value a = flat(c.b, c.v(0), head(c.v(0).type.dims, 2), ct(c, c.v(0).type.dtype));
  bool contiguous = !c.contiguous || c.v(0).type.numel() == 0 || (*c.contiguous)[c.arg(0).ints[0]];
  return lu_factor(c.b, contiguous && !is_complex(a.type.dtype) ? mT(c.b, a) : a);
}
Values linalg_det(Ctx& c) {
  Lu f = lu_of_transpose(c);
  Value d = reduce(c.b, diag(c.b, f.lu), {1}, Op::Multiply, 1);
  d = c.b.mul(d, perm_sign(c.b, f.piv, d.type.dtype));
  return {out(c, d, 0), out(c, f.lu, 1), out(c, f.piv, 2)};
}
Values linalg_slogdet(Ctx& c) {
  Lu f = lu_of_transpose(c);
  Value dg = diag(c.b, f.lu);
  Value sg = reduce(c.b, c.b.unary(Op::Sign, dg), {1}, Op::Multiply, 1);
  sg = c.b.mul(sg, perm_sign(c.b, f.piv, sg.type.dtype));
  Value la = reduce(c.b, c.b.unary(Op::Log, c.b.unary(Op::Abs, dg)), {1}, Op::Add, 0);
  return {out(c, sg, 0), out(c, la, 1), out(c, f.lu, 2), out(c, f.piv, 3)};
}

// exp(A): scaling by 2^-s (s from the 1-norm, per matrix), a degree-18 Taylor series, s squarings.
Values linalg_matrix_exp(Ctx& c) {
  Builder& b = c.b;
  DType t = ct(c, c.out[0].dtype);
  Value a = flat(b, c.v(0), head(c.out[0].dims, 2), t);
  int64_t B = a.type.dims[0], n = a.type.dims[1];
  if (B * n == 0) return {zeros(b, c.out[0])};
  Dims d{B, n, n};
  Value nrm = reduce(b, reduce(b, b.unary(Op::Abs, a), {1}, Op::Add, 0), {1}, Op::Maximum, 0);
  Value s = b.unary(Op::Ceil, b.div(b.unary(Op::Log, nrm), K(b, nrm, 0.6931471805599453)));
  s = b.select(is_nan(b, s), K(b, s, 0), s);  // NaN: no scaling (the result is NaN anyway)
  s = convert(b, b.clamp(K(b, s, 0), s, K(b, s, 100)), DType::S32);
  bool f64 = nrm.type.dtype == DType::F64;
  DType it = f64 ? DType::S64 : DType::S32;
  Value e = convert(b, s, it);
  Value bits = b.binary(Op::ShiftLeft, b.sub(b.splat(e.type, f64 ? 1023 : 127), e), b.splat(e.type, f64 ? 52 : 23));
  Value scale = convert(b, b.bitcast_convert(bits, nrm.type.dtype), t);
  a = b.mul(a, b.broadcast_in_dim(scale, d, {0}));
  Value I = eye(b, t, B, n), E = I;
  for (int k = 18; k >= 1; --k) E = b.add(I, b.div(bmm(b, a, E), K(b, a, k)));
  Value smax = reduce(b, s, {0}, Op::Maximum, 0);
  Values r = b.while_(
      {b.splat(kI32, 0), E}, [&](Builder& w, const Values& v) { return Values{w.compare(v[0], smax, Cmp::LT)}; },
      [&](Builder& w, const Values& v) {
        Value go = w.broadcast_in_dim(cmpk(w, s, Cmp::GT, v[0]), d, {0});
        return Values{w.add(v[0], w.splat(kI32, 1)), w.select(go, bmm(w, v[1], v[1]), v[1])};
      });
  return {out(c, r[1], 0)};
}

// ---- LDL^T with Bunch-Kaufman pivoting (LAPACK sytf2/sytrs, lower), one matrix at a time: the 1x1 or 2x2
// pivot choice differs per matrix, so the step is a runtime value.
Value at(Builder& w, Value M, Value i, Value j) { return w.reshape(w.dynamic_slice(M, {i, j}, {1, 1}), {}); }
Value row_of(Builder& w, Value X, Value i) { return w.dynamic_slice(X, {i, w.splat(kI32, 0)}, {1, X.type.dims[1]}); }
Value col_of(Builder& w, Value X, Value j) { return w.dynamic_slice(X, {w.splat(kI32, 0), j}, {X.type.dims[0], 1}); }
Value full(Builder& w, Value x, const Dims& d) { return w.broadcast_in_dim(x, d, {0, 1}); }  // (1,r)/(m,1) -> d
Value set_row(Builder& w, Value X, Value r, Value i) { return w.dynamic_update_slice(X, r, {i, w.splat(kI32, 0)}); }
Value swap_rows(Builder& w, Value X, Value i, Value j) {
  Value R = iota(w, X.type.dims, 0), xi = full(w, row_of(w, X, i), X.type.dims), xj = full(w, row_of(w, X, j), X.type.dims);
  return w.select(cmpk(w, R, Cmp::EQ, i), xj, w.select(cmpk(w, R, Cmp::EQ, j), xi, X));
}
Value I32(Builder& w, double v) { return w.splat(kI32, v); }

// (n, n) symmetric -> {LD (lower), pivots (n), info}.
Values sytf2(Builder& b, Value M, bool herm) {  // herm: hetf2 (complex Hermitian)
  int64_t n = M.type.dims[0];
  DType t = M.type.dtype;
  const double alpha = (1 + std::sqrt(17.0)) / 8;
  Dims d{n, n};
  Values init{I32(b, 0), M, b.splat({DType::S32, {n}}, 0), I32(b, 0)};
  Values r = b.while_(
      init, [n](Builder& w, const Values& s) { return Values{w.compare(s[0], I32(w, double(n)), Cmp::LT)}; },
      [&](Builder& w, const Values& s) {
        Value k = s[0], W = s[1], piv = s[2], info = s[3], k1 = w.add(k, I32(w, 1)), k2 = w.add(k, I32(w, 2));
        auto F = [&](double x) { return w.splat({t, {}}, x); };
        auto FR = [&](double x) { return w.splat({real_part(t), {}}, x); };
        Value R1 = iota(w, {n}, 0), R = iota(w, d, 0), C = iota(w, d, 1);
        Value col = w.reshape(col_of(w, W, k), {n});
        auto mag = [&](Value v) { return herm ? w.unary(Op::Abs, re(w, v)) : cabs1(w, v); };
        auto cv = [&](Value v) { return convert(w, v, t); };
        Value akk = mag(at(w, W, k, k));
        Value below = cmpk(w, R1, Cmp::GT, k);
        Value cab = cabs1(w, col);
        Value ca = w.select(below, cab, K(w, cab, -1));
        Value colmax = w.max(reduce(w, ca, {0}, Op::Maximum, -1), FR(0));
        Value imax = reduce(w, w.select(w.and_(below, cmpk(w, ca, Cmp::EQ, colmax)), R1, K(w, R1, n)), {0}, Op::Minimum, n);
        imax = w.select(w.compare(imax, I32(w, n), Cmp::EQ), k, imax);
        Value zero = w.or_(w.compare(w.max(akk, colmax), FR(0), Cmp::EQ), is_nan(w, akk));
        Value rowi = cabs1(w, w.reshape(row_of(w, W, imax), {n}));
        Value inrow = w.and_(cmpk(w, R1, Cmp::GE, k), cmpk(w, R1, Cmp::NE, imax));
        Value rowmax = reduce(w, w.select(inrow, rowi, K(w, rowi, -1)), {0}, Op::Maximum, -1);
        Value ac = w.mul(FR(alpha), colmax);
        Value one = w.or_(zero, w.or_(w.compare(akk, ac, Cmp::GE), w.compare(akk, w.mul(ac, w.div(colmax, rowmax)), Cmp::GE)));
        Value two = w.and_(w.unary(Op::Not, one),
                           w.compare(mag(at(w, W, imax, imax)), w.mul(FR(alpha), rowmax), Cmp::LT));
        Value kp = w.select(one, k, imax), kk = w.select(two, k1, k);
        Value Ws = w.transpose(swap_rows(w, w.transpose(swap_rows(w, W, kk, kp), {1, 0}), kk, kp), {1, 0});
        Ws = w.select(w.and_(cmpk(w, R, Cmp::GE, k), cmpk(w, C, Cmp::GE, k)), Ws, W);
        // 1x1 pivot
        Value r1 = herm ? cv(w.div(FR(1), re(w, at(w, Ws, k, k)))) : w.div(F(1), at(w, Ws, k, k));
        Value x = w.select(below, w.reshape(col_of(w, Ws, k), {n}), K(w, col, 0));
        Value xr = w.mul(x, w.broadcast_in_dim(r1, {n}, {}));
        Value U1 = w.sub(Ws, w.mul(w.broadcast_in_dim(x, d, {0}), w.broadcast_in_dim(herm ? conj(w, xr) : xr, d, {1})));
        U1 = w.select(w.and_(cmpk(w, R, Cmp::GT, k), cmpk(w, C, Cmp::GT, k)), U1, Ws);
        U1 = w.select(w.and_(cmpk(w, R, Cmp::GT, k), cmpk(w, C, Cmp::EQ, k)), w.broadcast_in_dim(xr, d, {0}), U1);
        // 2x2 pivot
        Value ck = w.reshape(col_of(w, Ws, k), {n}), ck1 = w.reshape(col_of(w, Ws, k1), {n});
        auto sc = [&](Value v) { return w.broadcast_in_dim(v, {n}, {}); };
        auto outer = [&](Value a, Value c) { return w.mul(w.broadcast_in_dim(a, d, {0}), w.broadcast_in_dim(c, d, {1})); };
        Value wk, wk1, U2;
        if (!herm) {
          Value d21 = at(w, Ws, k1, k), d11 = w.div(at(w, Ws, k1, k1), d21), d22 = w.div(at(w, Ws, k, k), d21);
          Value d21b = w.div(w.div(F(1), w.sub(w.mul(d11, d22), F(1))), d21);
          wk = w.mul(sc(d21b), w.sub(w.mul(sc(d11), ck), ck1)), wk1 = w.mul(sc(d21b), w.sub(w.mul(sc(d22), ck1), ck));
          U2 = w.sub(w.sub(Ws, outer(ck, wk)), outer(ck1, wk1));
        } else {
          Value a21 = at(w, Ws, k1, k), D = w.unary(Op::Abs, a21);
          Value d11 = cv(w.div(re(w, at(w, Ws, k1, k1)), D)), d22 = cv(w.div(re(w, at(w, Ws, k, k)), D));
          Value tt = w.div(F(1), w.sub(w.mul(d11, d22), F(1)));
          Value d21 = w.div(a21, cv(D)), Db = w.div(tt, cv(D));
          wk = w.mul(sc(Db), w.sub(w.mul(sc(d11), ck), w.mul(sc(d21), ck1)));
          wk1 = w.mul(sc(Db), w.sub(w.mul(sc(d22), ck1), w.mul(sc(conj(w, d21)), ck)));
          U2 = w.sub(w.sub(Ws, outer(ck, conj(w, wk))), outer(ck1, conj(w, wk1)));
        }
        Value Rb = cmpk(w, R, Cmp::GE, k2);
        U2 = w.select(w.and_(Rb, cmpk(w, C, Cmp::GE, k2)), U2, Ws);
        U2 = w.select(w.and_(Rb, cmpk(w, C, Cmp::EQ, k)), w.broadcast_in_dim(wk, d, {0}), U2);
        U2 = w.select(w.and_(Rb, cmpk(w, C, Cmp::EQ, k1)), w.broadcast_in_dim(wk1, d, {0}), U2);
        Value Wn = w.select(w.broadcast_in_dim(zero, d, {}), W, w.select(w.broadcast_in_dim(two, d, {}), U2, U1));
        if (herm) Wn = w.select(w.compare(R, C, Cmp::EQ), cv(re(w, Wn)), Wn);
        info = w.select(w.and_(zero, w.compare(info, I32(w, 0), Cmp::EQ)), k1, info);
        Value kp1 = w.add(kp, I32(w, 1));
        Value pv = w.select(two, w.sub(I32(w, 0), kp1), kp1);
        Value at_k = w.or_(cmpk(w, R1, Cmp::EQ, k), w.and_(w.broadcast_in_dim(two, {n}, {}), cmpk(w, R1, Cmp::EQ, k1)));
        piv = w.select(at_k, w.broadcast_in_dim(pv, {n}, {}), piv);
        return Values{w.select(two, k2, k1), Wn, piv, info};
      });
  Value LD = b.select(b.compare(iota(b, d, 1), iota(b, d, 0), Cmp::LE), r[1], K(b, r[1], 0));
  return {LD, r[2], r[3]};
}

// Solves A x = X from sytf2's LD (n, n) and pivots (n); X (n, r).
Value sytrs(Builder& b, Value L, Value piv, Value X, bool herm) {
  int64_t n = L.type.dims[0];
  DType t = L.type.dtype;
  const Dims& xd = X.type.dims;
  auto pv = [&](Builder& w, Value k) { return w.reshape(w.dynamic_slice(piv, {k}, {1}), {}); };
  auto lcol = [&](Builder& w, Value j, Value from) {  // column j of L, rows >= from, as (n, r)
    Value c = col_of(w, L, j);
    return full(w, w.select(cmpk(w, iota(w, c.type.dims, 0), Cmp::GE, from), c, K(w, c, 0)), xd);
  };
  auto F = [&](Builder& w, Value s) { return w.broadcast_in_dim(s, {1, xd[1]}, {}); };
  Values fw = b.while_(
      {I32(b, 0), X}, [n](Builder& w, const Values& s) { return Values{w.compare(s[0], I32(w, double(n)), Cmp::LT)}; },
      [&](Builder& w, const Values& s) {
        Value k = s[0], X = s[1], k1 = w.add(k, I32(w, 1)), k2 = w.add(k, I32(w, 2)), p = pv(w, k);
        Value pos = w.compare(p, I32(w, 0), Cmp::GT);
        Value X1 = swap_rows(w, X, k, w.sub(p, I32(w, 1)));
        Value xk = row_of(w, X1, k);
        X1 = w.sub(X1, w.mul(lcol(w, k, k1), full(w, xk, xd)));
        Value lkk = at(w, L, k, k);
        Value inv = herm ? convert(w, w.div(K(w, re(w, lkk), 1), re(w, lkk)), t) : w.div(w.splat({t, {}}, 1), lkk);
        X1 = set_row(w, X1, w.mul(xk, F(w, inv)), k);
        Value X2 = swap_rows(w, X, k1, w.sub(I32(w, -1), p));
        Value a = row_of(w, X2, k), c = row_of(w, X2, k1);
        X2 = w.sub(w.sub(X2, w.mul(lcol(w, k, k2), full(w, a, xd))), w.mul(lcol(w, k1, k2), full(w, c, xd)));
        Value e = at(w, L, k1, k), ec = herm ? conj(w, e) : e;
        Value em1 = w.div(at(w, L, k, k), ec), ek = w.div(at(w, L, k1, k1), e);
        Value den = F(w, w.sub(w.mul(em1, ek), w.splat({t, {}}, 1)));
        Value bkm1 = w.div(a, F(w, ec)), bk = w.div(c, F(w, e));
        X2 = set_row(w, X2, w.div(w.sub(w.mul(F(w, ek), bkm1), bk), den), k);
        X2 = set_row(w, X2, w.div(w.sub(w.mul(F(w, em1), bk), bkm1), den), k1);
        return Values{w.select(pos, k1, k2), w.select(w.broadcast_in_dim(pos, xd, {}), X1, X2)};
      });
  Values bw = b.while_(
      {I32(b, double(n - 1)), fw[1]}, [](Builder& w, const Values& s) { return Values{w.compare(s[0], I32(w, 0), Cmp::GE)}; },
      [&](Builder& w, const Values& s) {
        Value k = s[0], X = s[1], km1 = w.sub(k, I32(w, 1)), k1 = w.add(k, I32(w, 1)), p = pv(w, k);
        Value pos = w.compare(p, I32(w, 0), Cmp::GT);
        auto dotc = [&](Value j) {
          Value l = lcol(w, j, k1);
          return w.reshape(reduce(w, w.mul(herm ? conj(w, l) : l, X), {0}, Op::Add, 0), {1, xd[1]});
        };
        Value Xk = set_row(w, X, w.sub(row_of(w, X, k), dotc(k)), k);
        Value X1 = swap_rows(w, Xk, k, w.sub(p, I32(w, 1)));
        Value X2 = set_row(w, Xk, w.sub(row_of(w, X, km1), dotc(km1)), km1);
        X2 = swap_rows(w, X2, k, w.sub(I32(w, -1), p));
        return Values{w.select(pos, km1, w.sub(k, I32(w, 2))), w.select(w.broadcast_in_dim(pos, xd, {}), X1, X2)};
      });
  return bw[1];
}

Values linalg_ldl_factor_ex(Ctx& c) {
  Value a = flat(c.b, c.v(0), head(c.out[0].dims, 2), ct(c, c.v(0).type.dtype));
  bool herm = c.flag(1) && is_complex(a.type.dtype);
  int64_t B = a.type.dims[0], n = a.type.dims[1];
  if (B * n == 0) return {zeros(c.b, c.out[0]), zeros(c.b, c.out[1]), zeros(c.b, c.out[2])};
  Value z = c.b.splat(kI32, 0);
  Values init{zeros(c.b, a.type), c.b.splat({DType::S32, {B, n}}, 0), c.b.splat({DType::S32, {B}}, 0)};
  Values r = loop(c.b, B, init, [&](Builder& w, Value i, const Values& s) {
    Value M = w.reshape(w.dynamic_slice(a, {i, z, z}, {1, n, n}), {n, n});
    Value R = iota(w, {n, n}, 0), C = iota(w, {n, n}, 1);
    Value Mt = w.transpose(M, {1, 0});
    M = w.select(w.compare(R, C, Cmp::GE), M, herm ? conj(w, Mt) : Mt);
    if (herm) M = w.select(w.compare(R, C, Cmp::EQ), convert(w, re(w, M), M.type.dtype), M);
    Values f = sytf2(w, M, herm);
    return Values{w.dynamic_update_slice(s[0], w.reshape(f[0], {1, n, n}), {i, z, z}),
                  w.dynamic_update_slice(s[1], w.reshape(f[1], {1, n}), {i, z}),
                  w.dynamic_update_slice(s[2], w.reshape(f[2], {1}), {i})};
  });
  return {out(c, r[0], 0), out(c, r[1], 1), out(c, r[2], 2)};
}
Values linalg_ldl_solve(Ctx& c) {
  Dims batch = head(c.out[0].dims, 2);
  DType t = ct(c, c.out[0].dtype);
  if (c.out[0].numel() == 0) return {zeros(c.b, c.out[0])};
  Value L = flat(c.b, c.v(0), batch, t), piv = flat(c.b, c.v(1), batch, DType::S32, 1), X = flat(c.b, c.v(2), batch, t);
  int64_t B = L.type.dims[0], n = L.type.dims[1], r = X.type.dims[2];
  bool herm = c.flag(3) && is_complex(t);
  Value z = c.b.splat(kI32, 0);
  Values res = loop(c.b, B, {X}, [&](Builder& w, Value i, const Values& s) {
    Value Li = w.reshape(w.dynamic_slice(L, {i, z, z}, {1, n, n}), {n, n});
    Value pi = w.reshape(w.dynamic_slice(piv, {i, z}, {1, n}), {n});
    Value Xi = w.reshape(w.dynamic_slice(X, {i, z, z}, {1, n, r}), {n, r});
    return Values{w.dynamic_update_slice(s[0], w.reshape(sytrs(w, Li, pi, Xi, herm), {1, n, r}), {i, z, z})};
  });
  return {out(c, res[0], 0)};
}

Register r({
    {"linalg_cholesky_ex|linalg_cholesky_ex.L", linalg_cholesky_ex},
    {"cholesky|cholesky.out", linalg_cholesky_ex},
    {"linalg_solve_triangular|linalg_solve_triangular.out", linalg_solve_triangular},
    {"triangular_solve|triangular_solve.X", triangular_solve},
    {"_cholesky_solve_helper|_cholesky_solve_helper.out", cholesky_solve_helper},
    {"cholesky_inverse|cholesky_inverse.out", cholesky_inverse},
    {"linalg_lu_factor_ex|linalg_lu_factor_ex.out", linalg_lu_factor_ex},
    {"lu_unpack|lu_unpack.out", lu_unpack},
    {"linalg_lu|linalg_lu.out", linalg_lu},
    {"linalg_lu_solve|linalg_lu_solve.out", linalg_lu_solve},
    {"linalg_inv_ex|linalg_inv_ex.inverse", linalg_inv_ex},
    {"_linalg_solve_ex|_linalg_solve_ex.result", linalg_solve_ex},
    {"_linalg_det|_linalg_det.result", linalg_det},
    {"_linalg_slogdet|_linalg_slogdet.sign", linalg_slogdet},
    {"linalg_matrix_exp|linalg_matrix_exp.out", linalg_matrix_exp},
    {"linalg_ldl_factor_ex|linalg_ldl_factor_ex.out", linalg_ldl_factor_ex},
    {"linalg_ldl_solve|linalg_ldl_solve.out", linalg_ldl_solve},
});

}  // namespace
}  // namespace tpu::lower

// Ops the OpInfo sweep found missing: reflection / replication padding (and their backward), vdot,
// linalg_cross, trace, addbmm, angle, the cummax / cummin helpers.
#include <cmath>
#include <vector>

#include "lower/helpers.h"

namespace tpu::lower {
using hlo::Cmp;
using hlo::Op;

namespace {

// ---- padding: the source index of each output position along one dim, as runs of step -1, 0 or +1
struct Run { int64_t start, len, step; };

std::vector<Run> pad_runs(int64_t n, int64_t lo, int64_t hi, bool reflect) {
  std::vector<Run> runs;
  for (int64_t o = 0; o < n + lo + hi; ++o) {
    int64_t i = o - lo;
    if (reflect) i = i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i;
    else i = i < 0 ? 0 : i >= n ? n - 1 : i;
    if (!runs.empty()) {
      Run& r = runs.back();
      int64_t step = i - (r.start + (r.len - 1) * r.step);
      if (step >= -1 && step <= 1 && (r.len == 1 || step == r.step)) {
        r.step = step;
        ++r.len;
        continue;
      }
    }
    runs.push_back({i, 1, 0});
  }
  return runs;
}

Value slice_dim(Builder& b, Value x, int64_t d, int64_t lo, int64_t hi) {
  Dims start(x.type.rank(), 0), limit = x.type.dims;
  start[d] = lo;
  limit[d] = hi;
  return b.slice(x, start, limit);
}

// padding = (left, right, top, bottom, front, back) over the last dims, last dim first
Values pad_fwd(Ctx& c, bool reflect) {
  Value x = c.v(0);
  const auto& p = c.ints(1);
  int64_t r = x.type.rank();
  for (size_t j = 0; j < p.size() / 2; ++j) {
    int64_t d = r - 1 - static_cast<int64_t>(j);
    Values parts;
    for (const Run& run : pad_runs(x.type.dims[d], p[2 * j], p[2 * j + 1], reflect)) {
      int64_t first = run.step < 0 ? run.start - run.len + 1 : run.start;
      Value s = slice_dim(c.b, x, d, first, first + (run.step == 0 ? 1 : run.len));
      if (run.step < 0) s = c.b.reverse(s, {d});
      if (run.step == 0 && run.len > 1) {
        Dims shape = s.type.dims, keep;
        shape[d] = run.len;
        for (int64_t k = 0; k < r; ++k) keep.push_back(k);
        s = c.b.broadcast_in_dim(c.b.reshape(s, s.type.dims), shape, keep);
      }
      parts.push_back(s);
    }
    x = parts.size() == 1 ? parts[0] : c.b.concatenate(parts, d);
  }
  return {x};
}

// backward(grad_output, self, padding): each run's gradient summed back into its source positions
Values pad_bwd(Ctx& c, bool reflect) {
  Value g = convert(c.b, c.v(0), compute_type(c.v(0).type.dtype));
  const Dims& in = c.v(1).type.dims;
  const auto& p = c.ints(2);
  int64_t r = g.type.rank();
  for (size_t j = 0; j < p.size() / 2; ++j) {
    int64_t d = r - 1 - static_cast<int64_t>(j), n = in[d], o = 0;
    Dims shape = g.type.dims;
    shape[d] = n;
    Value acc = zeros(c.b, {g.type.dtype, shape});
    for (const Run& run : pad_runs(n, p[2 * j], p[2 * j + 1], reflect)) {
      Value s = slice_dim(c.b, g, d, o, o + run.len);
      o += run.len;
      int64_t first = run.step < 0 ? run.start - run.len + 1 : run.start;
      if (run.step < 0) s = c.b.reverse(s, {d});
      if (run.step == 0) s = keep_dims(c.b, reduce(c.b, s, {d}, Op::Add, 0), {d}, s.type.dims);
      Dims lo(r, 0), hi(r, 0);
      lo[d] = first;
      hi[d] = n - first - s.type.dims[d];
      acc = c.b.add(acc, c.b.pad(s, zeros(c.b, hlo::scalar(g.type.dtype)), lo, hi));
    }
    g = acc;
  }
  return {result(c, g)};
}
Values reflection_pad(Ctx& c) { return pad_fwd(c, true); }
Values replication_pad(Ctx& c) { return pad_fwd(c, false); }
Values reflection_pad_backward(Ctx& c) { return pad_bwd(c, true); }
Values replication_pad_backward(Ctx& c) { return pad_bwd(c, false); }

// ---- linear algebra
Values vdot(Ctx& c) {  // conj(x) . y
  if (c.v(0).type.dtype != c.v(1).type.dtype) c.fail("vdot expected both vectors to have same dtype");
  Value x = c.v(0);
  if (is_complex(x.type.dtype)) x = conj_of(c.b, x);
  return {result(c, contract(c, x, c.v(1), {{}, {}, {0}, {0}}))};
}

// linalg_cross(self, other, dim): both broadcast to the result, components along dim
Values linalg_cross(Ctx& c) {
  const TensorType& o = c.out[0];
  int64_t d = wrap_dim(c.i(2), o.rank());
  Value a = operand(c, 0, o.dtype, o.dims), b = operand(c, 1, o.dtype, o.dims);
  auto at = [&](Value x, int64_t k) { return slice_dim(c.b, x, d, k, k + 1); };
  auto comp = [&](int64_t i, int64_t j) { return c.b.sub(c.b.mul(at(a, i), at(b, j)), c.b.mul(at(a, j), at(b, i))); };
  return {c.b.concatenate({comp(1, 2), comp(2, 0), comp(0, 1)}, d)};
}

Values trace(Ctx& c) {
  Value x = convert(c.b, c.v(0), compute_type(c.out[0].dtype));
  TensorType it{DType::S64, x.type.dims};
  Value diag = c.b.compare(c.b.iota(it, 0), c.b.iota(it, 1), Cmp::EQ);
  return {result(c, reduce(c.b, c.b.select(diag, x, zeros(c.b, x.type)), {0, 1}, Op::Add, 0))};
}

// addbmm(self, batch1, batch2, beta, alpha): beta * self + alpha * sum_b batch1[b] . batch2[b]
Values addbmm(Ctx& c) {
  DType t = c.out[0].dtype;
  if (c.v(1).type.dtype != c.v(2).type.dtype) c.fail("expected m1 and m2 to have the same dtype");
  Value p = contract(c, convert(c.b, c.v(1), t), convert(c.b, c.v(2), t), {{}, {}, {0, 2}, {0, 1}});
  DType ct = p.type.dtype;
  Value alpha = operand(c, 4, ct, p.type.dims), beta = operand(c, 3, ct, p.type.dims);
  Value self = c.b.mul(beta, operand(c, 0, ct, p.type.dims));
  self = c.b.select(c.b.compare(beta, zeros(c.b, beta.type), Cmp::EQ), zeros(c.b, p.type), self);
  return {result(c, c.b.add(self, c.b.mul(alpha, p)))};
}

// angle of a real tensor: pi for negatives, 0 otherwise, nan for nan
Values angle(Ctx& c) {
  if (is_complex(c.v(0).type.dtype)) {
    Value z = c.v(0);
    return {result(c, c.b.binary(Op::Atan2, c.b.unary(Op::Imag, z), c.b.unary(Op::Real, z)))};
  }
  Value x = operand(c, 0);
  Value z = zeros(c.b, x.type);
  Value a = c.b.select(c.b.compare(x, z, Cmp::LT), scalar_like(c.b, M_PI, x.type), z);
  return {result(c, c.b.select(is_nan(c.b, x), x, a))};
}

// ---- _cummax_helper(self, values!, indices!, dim): an inclusive scan by doubling steps (Hillis-Steele) over
// (value, index) pairs that takes nan over numbers, the larger (smaller) value, and the later index among
// equals; index -1 is padding. (A variadic reduce_window of mixed types crashes XLA CPU's rewriter from n = 100.)
Values cum_extreme(Ctx& c, bool is_max) {
  Builder& b = c.b;
  Value v = c.v(0);
  int64_t r = v.type.rank();
  if (r == 0) return {v, zeros(b, c.out[1])};
  int64_t d = wrap_dim(c.i(3), r), n = v.type.dims[d];
  Value i = b.iota({DType::S64, v.type.dims}, d);
  Value v_pad = b.splat(hlo::scalar(v.type.dtype), 0), i_pad = b.splat(hlo::scalar(DType::S64), -1);
  for (int64_t s = 1; s < n; s *= 2) {
    Dims lo(r, 0), hi(r, 0), start(r, 0);
    lo[d] = s;
    Value av = b.slice(b.pad(v, v_pad, lo, hi), start, v.type.dims), ai = b.slice(b.pad(i, i_pad, lo, hi), start, i.type.dims);
    Value a_nan = b.compare(av, av, Cmp::NE), v_nan = b.compare(v, v, Cmp::NE);
    Value better = b.or_(b.compare(av, v, is_max ? Cmp::GT : Cmp::LT), b.and_(a_nan, b.unary(Op::Not, v_nan)));
    // the earlier pair (never padding) wins only when strictly better: among equals the later index stays
    Value take_a = b.and_(b.compare(ai, b.splat(ai.type, -1), Cmp::NE), better);
    v = b.select(take_a, av, v);
    i = b.select(take_a, ai, i);
  }
  return {convert(b, v, c.out[0].dtype), convert(b, i, c.out[1].dtype)};
}
Values cummax_helper(Ctx& c) { return cum_extreme(c, true); }
Values cummin_helper(Ctx& c) { return cum_extreme(c, false); }

// mode(self, dim, keepdim): the most frequent value (the smallest among equally frequent ones) and its last
// index; each element's count and last index come from an n x n comparison along dim.
Values mode(Ctx& c) {
  Value x = c.v(0);
  int64_t r = x.type.rank();
  if (r == 0) return {x, zeros(c.b, c.out[1])};
  int64_t d = wrap_dim(c.i(1), r), n = x.type.dims[d];
  Dims perm;
  for (int64_t k = 0; k < r; ++k) if (k != d) perm.push_back(k);
  perm.push_back(d);
  x = c.b.transpose(x, perm);  // [..., n]
  Dims pair = x.type.dims, rows, cols;
  pair.push_back(n);  // [..., n (i), n (j)]
  for (int64_t k = 0; k < r; ++k) rows.push_back(k), cols.push_back(k == r - 1 ? r : k);
  Value eq = c.b.compare(c.b.broadcast_in_dim(x, pair, rows), c.b.broadcast_in_dim(x, pair, cols), Cmp::EQ);
  Value j = c.b.iota({DType::S64, pair}, r);
  Value count = reduce(c.b, convert(c.b, eq, DType::S64), {r}, Op::Add, 0);
  Value last = reduce(c.b, c.b.select(eq, j, scalar_like(c.b, -1, j.type)), {r}, Op::Maximum, -1);
  Values init = {c.b.splat(hlo::scalar(DType::S64), -1), c.b.splat(hlo::scalar(x.type.dtype), 0),
                 c.b.splat(hlo::scalar(DType::S64), -1)};
  Values res = c.b.reduce({count, x, last}, init, {r - 1}, [](Builder& b, const Values& a) {
    Value take_b = b.or_(b.compare(a[3], a[0], Cmp::GT),
                         b.and_(b.compare(a[3], a[0], Cmp::EQ), b.compare(a[4], a[1], Cmp::LT)));
    return Values{b.select(take_b, a[3], a[0]), b.select(take_b, a[4], a[1]), b.select(take_b, a[5], a[2])};
  });
  return {c.b.reshape(res[1], c.out[0].dims), c.b.reshape(convert(c.b, res[2], c.out[1].dtype), c.out[1].dims)};
}

Register r({
    {"reflection_pad1d|reflection_pad1d.out|reflection_pad2d|reflection_pad2d.out|reflection_pad3d|"
     "reflection_pad3d.out", reflection_pad},
    {"replication_pad1d|replication_pad1d.out|replication_pad2d|replication_pad2d.out|replication_pad3d|"
     "replication_pad3d.out", replication_pad},
    {"reflection_pad1d_backward|reflection_pad1d_backward.grad_input|reflection_pad2d_backward|"
     "reflection_pad2d_backward.grad_input|reflection_pad3d_backward|reflection_pad3d_backward.grad_input",
     reflection_pad_backward},
    {"replication_pad1d_backward|replication_pad1d_backward.grad_input|replication_pad2d_backward|"
     "replication_pad2d_backward.grad_input|replication_pad3d_backward|replication_pad3d_backward.grad_input",
     replication_pad_backward},
    {"vdot|vdot.out", vdot},
    {"linalg_cross|linalg_cross.out", linalg_cross},
    {"trace|trace.out", trace},
    {"addbmm|addbmm.out", addbmm},
    {"angle|angle.out", angle},
    {"_cummax_helper", cummax_helper},
    {"_cummin_helper", cummin_helper},
    {"mode|mode.values", mode},
});

}  // namespace
}  // namespace tpu::lower

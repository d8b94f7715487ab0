// Losses and their gradients: nll (1-d and 2-d, class weights, ignore_index), mse, smooth L1, Huber,
// binary cross entropy. reduction: 0 none, 1 mean, 2 sum. cross_entropy, l1 and kl_div decompose.
#include <algorithm>

#include "lower/helpers.h"

namespace tpu::lower {
namespace {

using hlo::Cmp;
using hlo::Op;

Dims all_dims(int64_t rank) {
  Dims d;
  for (int64_t i = 0; i < rank; ++i) d.push_back(i);
  return d;
}

// The loss reduced as asked, rounded to out[0].
Value reduced(Ctx& c, Value l, int64_t reduction) {
  if (reduction == 0) return result(c, l);
  Value s = reduce(c.b, l, all_dims(l.type.rank()), Op::Add, 0);
  if (reduction == 1) s = c.b.div(s, scalar_like(c.b, static_cast<double>(l.type.numel()), s.type));
  return result(c, s);
}

// The broadcast shape of arguments a and b.
Dims broadcast_shape(const Dims& a, const Dims& b) {
  Dims out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1, db = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[out.size() - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

// Elementwise loss inputs: self and target (arguments i, i + 1) in the computation type, broadcast.
std::pair<Value, Value> pair_of(Ctx& c, size_t i) {
  DType t = compute_type(c.v(i).type.dtype);
  Dims shape = broadcast_shape(c.v(i).type.dims, c.v(i + 1).type.dims);
  return {operand(c, i, t, shape), operand(c, i + 1, t, shape)};
}

// grad_output (argument 0) over `shape`, divided by the element count for mean reduction.
Value grad_scale(Ctx& c, const TensorType& like, int64_t reduction) {
  Value g = operand(c, 0, like.dtype, like.dims);
  if (reduction == 1) g = c.b.div(g, scalar_like(c.b, static_cast<double>(like.numel()), like));
  return g;
}

Value k(Builder& b, double v, const TensorType& t) { return scalar_like(b, v, t); }

// mse_loss(self, target, reduction)
Values mse_loss(Ctx& c) {
  auto [x, y] = pair_of(c, 0);
  Value d = c.b.sub(x, y);
  return {reduced(c, c.b.mul(d, d), c.i(2))};
}
// mse_loss_backward(grad_output, self, target, reduction): 2 (x - y) g
Values mse_loss_backward(Ctx& c) {
  auto [x, y] = pair_of(c, 1);
  Value d = c.b.sub(x, y);
  Value g = grad_scale(c, d.type, c.i(3));
  return {result(c, c.b.mul(k(c.b, 2, d.type), c.b.mul(d, g)))};
}

// smooth_l1_loss(self, target, reduction, beta): |d| < beta ? d^2 / (2 beta) : |d| - beta / 2
Values smooth_l1_loss(Ctx& c) {
  auto [x, y] = pair_of(c, 0);
  Value z = c.b.unary(Op::Abs, c.b.sub(x, y)), beta = operand(c, 3, z.type.dtype, z.type.dims);
  Value half = k(c.b, 0.5, z.type);
  Value quad = c.b.div(c.b.mul(half, c.b.mul(z, z)), beta), lin = c.b.sub(z, c.b.mul(half, beta));
  return {reduced(c, c.b.select(c.b.compare(z, beta, Cmp::LT), quad, lin), c.i(2))};
}
// smooth_l1_loss_backward(grad_output, self, target, reduction, beta): clamp(d / beta, -1, 1) g
Values smooth_l1_loss_backward(Ctx& c) {
  auto [x, y] = pair_of(c, 1);
  Value d = c.b.sub(x, y), beta = operand(c, 4, d.type.dtype, d.type.dims);
  Value one = k(c.b, 1, d.type);
  Value s = c.b.select(c.b.compare(d, c.b.unary(Op::Neg, beta), Cmp::LE), c.b.unary(Op::Neg, one),
                       c.b.select(c.b.compare(d, beta, Cmp::GE), one, c.b.div(d, beta)));
  return {result(c, c.b.mul(s, grad_scale(c, d.type, c.i(3))))};
}

// huber_loss(self, target, reduction, delta): |d| < delta ? d^2 / 2 : delta (|d| - delta / 2)
Values huber_loss(Ctx& c) {
  auto [x, y] = pair_of(c, 0);
  Value z = c.b.unary(Op::Abs, c.b.sub(x, y)), delta = operand(c, 3, z.type.dtype, z.type.dims);
  Value half = k(c.b, 0.5, z.type);
  Value quad = c.b.mul(half, c.b.mul(z, z)), lin = c.b.mul(delta, c.b.sub(z, c.b.mul(half, delta)));
  return {reduced(c, c.b.select(c.b.compare(z, delta, Cmp::LT), quad, lin), c.i(2))};
}
// huber_loss_backward(grad_output, self, target, reduction, delta): clamp(d, -delta, delta) g
Values huber_loss_backward(Ctx& c) {
  auto [x, y] = pair_of(c, 1);
  Value d = c.b.sub(x, y), delta = operand(c, 4, d.type.dtype, d.type.dims);
  Value s = c.b.select(c.b.compare(d, c.b.unary(Op::Neg, delta), Cmp::LE), c.b.unary(Op::Neg, delta),
                       c.b.select(c.b.compare(d, delta, Cmp::GE), delta, d));
  return {result(c, c.b.mul(s, grad_scale(c, d.type, c.i(3))))};
}

// binary_cross_entropy(self, target, weight?, reduction): -w (y log x + (1 - y) log(1 - x)), logs >= -100
Values binary_cross_entropy(Ctx& c) {
  auto [x, y] = pair_of(c, 0);
  Value floor = k(c.b, -100, x.type), one = k(c.b, 1, x.type);
  Value lx = c.b.max(c.b.unary(Op::Log, x), floor), l1x = c.b.max(c.b.unary(Op::Log1p, c.b.unary(Op::Neg, x)), floor);
  Value l = c.b.sub(c.b.mul(c.b.sub(y, one), l1x), c.b.mul(y, lx));
  if (c.has(2)) l = c.b.mul(l, operand(c, 2, x.type.dtype, x.type.dims));
  return {reduced(c, l, c.i(3))};
}
// binary_cross_entropy_backward(grad_output, self, target, weight?, reduction): w g (x - y) / max(x (1 - x), 1e-12)
Values binary_cross_entropy_backward(Ctx& c) {
  auto [x, y] = pair_of(c, 1);
  Value den = c.b.max(c.b.mul(x, c.b.sub(k(c.b, 1, x.type), x)), k(c.b, 1e-12, x.type));
  Value g = c.b.mul(grad_scale(c, x.type, c.i(4)), c.b.div(c.b.sub(x, y), den));
  if (c.has(3)) g = c.b.mul(g, operand(c, 3, x.type.dtype, x.type.dims));
  return {result(c, g)};
}

// nll: self (C) or (N, C, d...) with targets () or (N, d...). Per target: whether it picks class j
// (a one-hot mask over self's shape, false for ignore_index) and its class weight.
struct Picks {
  Value hit;     // pred, self's shape
  Value weight;  // computation type, the target's shape; 0 where ignored
  int64_t class_dim;
};
Picks picks(Ctx& c, size_t self, size_t target, size_t weight, size_t ignore) {
  Value x = c.v(self), t = convert(c.b, c.v(target), DType::S64);
  const Dims& shape = x.type.dims;
  int64_t cd = x.type.rank() == 1 ? 0 : 1;
  Dims others;
  for (int64_t i = 0; i < x.type.rank(); ++i)
    if (i != cd) others.push_back(i);
  Value valid = c.b.compare(t, c.b.splat(t.type, static_cast<double>(c.i(ignore))), Cmp::NE);
  Value hit = c.b.compare(c.b.iota({DType::S64, shape}, cd), c.b.broadcast_in_dim(t, shape, others), Cmp::EQ);
  hit = c.b.and_(hit, c.b.broadcast_in_dim(valid, shape, others));
  DType ct = compute_type(x.type.dtype);
  TensorType wt{ct, t.type.dims};
  Value w;
  if (c.has(weight)) {
    Value wb = c.b.broadcast_in_dim(convert(c.b, c.v(weight), ct), shape, {cd});
    w = reduce(c.b, c.b.select(hit, wb, zeros(c.b, wb.type)), {cd}, Op::Add, 0);
  } else {
    w = c.b.select(valid, k(c.b, 1, wt), zeros(c.b, wt));
  }
  return {hit, w, cd};
}

// nll_loss_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight)
Values nll_loss(Ctx& c) {
  {  // targets must be classes or ignore_index (XLA would give them a zero loss silently)
    Value t = convert(c.b, c.v(1), DType::S64);
    int64_t classes = c.v(0).type.rank() == 1 ? c.v(0).type.dims[0] : c.v(0).type.dims[1];
    Value bad = c.b.or_(c.b.compare(t, zeros(c.b, t.type), Cmp::LT),
                        c.b.compare(t, c.b.splat(t.type, static_cast<double>(classes)), Cmp::GE));
    bad = c.b.and_(bad, c.b.compare(t, c.b.splat(t.type, static_cast<double>(c.i(4))), Cmp::NE));
    check(c.b, bad, t, "Target {} is out of bounds.");
  }
  Picks p = picks(c, 0, 1, 2, 4);
  Value x = convert(c.b, c.v(0), p.weight.type.dtype);
  Value picked = reduce(c.b, c.b.select(p.hit, x, zeros(c.b, x.type)), {p.class_dim}, Op::Add, 0);
  Value l = c.b.mul(c.b.unary(Op::Neg, picked), p.weight);
  int64_t reduction = c.i(3);
  if (reduction == 0) return {result(c, l, 0), zeros(c.b, c.out[1])};
  Dims dims = all_dims(l.type.rank());
  Value total = reduce(c.b, p.weight, dims, Op::Add, 0), s = reduce(c.b, l, dims, Op::Add, 0);
  if (reduction == 1) s = c.b.div(s, total);
  return {result(c, s, 0), result(c, total, 1)};
}

// nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight)
Values nll_loss_backward(Ctx& c) {
  Picks p = picks(c, 1, 2, 3, 5);
  DType t = p.weight.type.dtype;
  const Dims& shape = c.v(1).type.dims;
  Value g = c.b.unary(Op::Neg, convert(c.b, c.v(0), t));  // target-shaped (none) or 0-d
  if (c.i(4) == 1) g = c.b.div(g, convert(c.b, c.v(6), t));
  g = c.b.mul(g.type.rank() == 0 ? broadcast_to(c.b, g, p.weight.type.dims) : g, p.weight);
  Dims others;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
    if (i != p.class_dim) others.push_back(i);
  Value full = c.b.broadcast_in_dim(g, shape, others);
  return {result(c, c.b.select(p.hit, full, zeros(c.b, full.type)))};
}

Register r({
    {"mse_loss|mse_loss.out", mse_loss}, {"mse_loss_backward|mse_loss_backward.grad_input", mse_loss_backward},
    {"smooth_l1_loss|smooth_l1_loss.out", smooth_l1_loss},
    {"smooth_l1_loss_backward|smooth_l1_loss_backward.grad_input", smooth_l1_loss_backward},
    {"huber_loss|huber_loss.out", huber_loss}, {"huber_loss_backward|huber_loss_backward.out", huber_loss_backward},
    {"binary_cross_entropy|binary_cross_entropy.out", binary_cross_entropy},
    {"binary_cross_entropy_backward|binary_cross_entropy_backward.grad_input", binary_cross_entropy_backward},
    {"nll_loss_forward|nll_loss_forward.output|nll_loss2d_forward|nll_loss2d_forward.output", nll_loss},
    {"nll_loss_backward|nll_loss_backward.grad_input|nll_loss2d_backward|nll_loss2d_backward.grad_input",
     nll_loss_backward},
});

}  // namespace
}  // namespace tpu::lower

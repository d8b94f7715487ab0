// Normalizations: layer norm, group norm, batch norm (training, eval, running-statistics update), weight norm
// and their backward ops. Statistics are computed in float32 for half types (two passes: mean, then the
// biased variance of the centered values).
#include <algorithm>

#include "lower/helpers.h"

namespace tpu::lower {
namespace {

using hlo::Op;

Dims range(int64_t from, int64_t to) {
  Dims d;
  for (int64_t i = from; i < to; ++i) d.push_back(i);
  return d;
}
Dims all_but(int64_t dim, int64_t rank) {
  Dims d = range(0, rank);
  d.erase(d.begin() + dim);
  return d;
}
int64_t count(const Dims& shape, const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[d];
  return n;
}

Value sum(Builder& b, Value x, const Dims& dims) { return reduce(b, x, dims, Op::Add, 0); }
// v (x's shape with `dims` reduced away) back over x's shape.
Value expand(Builder& b, Value v, const Dims& shape, const Dims& reduced) {
  Dims kept;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
    if (std::find(reduced.begin(), reduced.end(), i) == reduced.end()) kept.push_back(i);
  return b.broadcast_in_dim(v, shape, kept);
}
Value mean(Builder& b, Value x, const Dims& dims) {
  Value s = sum(b, x, dims);
  return b.div(s, scalar_like(b, static_cast<double>(count(x.type.dims, dims)), s.type));
}
// Argument i (a tensor or scalar) in type t, shaped like `like`; tensors lie along `along`.
Value arg_as(Ctx& c, size_t i, DType t, const Dims& shape, const Dims& along) {
  Value v = convert(c.b, c.v(i), t);
  return v.type.rank() == 0 ? broadcast_to(c.b, v, shape) : c.b.broadcast_in_dim(v, shape, along);
}

struct Stats {
  Value mean, rstd, var;  // over the reduced dims; var is biased
};
Stats stats(Ctx& c, Value x, const Dims& dims, size_t eps) {
  Value m = mean(c.b, x, dims);
  Value xc = c.b.sub(x, expand(c.b, m, x.type.dims, dims));
  Value var = mean(c.b, c.b.mul(xc, xc), dims);
  Value rstd = c.b.unary(Op::Rsqrt, c.b.add(var, arg_as(c, eps, var.type.dtype, var.type.dims, {})));
  return {m, rstd, var};
}

// (x - mean) * rstd [* weight] [+ bias]; weight and bias lie along `along`.
Value normalize(Ctx& c, Value x, Value m, Value r, const Dims& dims, size_t w, size_t b, const Dims& along) {
  const Dims& s = x.type.dims;
  Value y = c.b.mul(c.b.sub(x, expand(c.b, m, s, dims)), expand(c.b, r, s, dims));
  if (c.has(w)) y = c.b.mul(y, arg_as(c, w, y.type.dtype, s, along));
  if (c.has(b)) y = c.b.add(y, arg_as(c, b, y.type.dtype, s, along));
  return y;
}

// Gradient of x through (x - mean) * rstd with mean and rstd taken over dims: given
// g = dL/dxhat and xhat, rstd * (g - mean(g) - xhat * mean(g * xhat)).
Value normalize_grad(Builder& b, Value g, Value xhat, Value r, const Dims& dims) {
  const Dims& s = g.type.dims;
  Value a = expand(b, mean(b, g, dims), s, dims), gx = expand(b, mean(b, b.mul(g, xhat), dims), s, dims);
  return b.mul(expand(b, r, s, dims), b.sub(b.sub(g, a), b.mul(xhat, gx)));
}

// The results a backward rule was asked for: candidates[k] where present[k], in out's dtypes.
Values pick(Ctx& c, const std::vector<Value>& candidates, const std::vector<bool>& present) {
  Values out;
  for (size_t k = 0; k < candidates.size(); ++k)
    if (present[k]) out.push_back(candidates[k]);
  if (out.size() != c.out.size()) c.fail("output_mask does not match the results");
  for (size_t k = 0; k < out.size(); ++k) out[k] = result(c, out[k], k);
  return out;
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd)
Values layer_norm(Ctx& c) {
  Value x = convert(c.b, c.v(0), compute_type(c.v(0).type.dtype));
  int64_t rank = x.type.rank(), axis = rank - static_cast<int64_t>(c.ints(1).size());
  Dims dims = range(axis, rank);
  Stats s = stats(c, x, dims, 4);
  Value y = normalize(c, x, s.mean, s.rstd, dims, 2, 3, dims);
  return {result(c, y, 0), result(c, c.b.reshape(s.mean, c.out[1].dims), 1),
          result(c, c.b.reshape(s.rstd, c.out[2].dims), 2)};
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?, output_mask)
Values layer_norm_backward(Ctx& c) {
  DType t = compute_type(c.v(1).type.dtype);
  Value go = convert(c.b, c.v(0), t), x = convert(c.b, c.v(1), t);
  const Dims& shape = x.type.dims;
  int64_t rank = x.type.rank(), axis = rank - static_cast<int64_t>(c.ints(2).size());
  Dims dims = range(axis, rank), outer = range(0, axis);
  Dims outer_shape(shape.begin(), shape.begin() + axis);
  Value m = c.b.reshape(convert(c.b, c.v(3), t), outer_shape), r = c.b.reshape(convert(c.b, c.v(4), t), outer_shape);
  Value xhat = c.b.mul(c.b.sub(x, expand(c.b, m, shape, dims)), expand(c.b, r, shape, dims));
  Value g = c.has(5) ? c.b.mul(go, arg_as(c, 5, t, shape, dims)) : go;
  const std::vector<int64_t>& mask = c.ints(7);
  return pick(c, {normalize_grad(c.b, g, xhat, r, dims), sum(c.b, c.b.mul(go, xhat), outer), sum(c.b, go, outer)},
              {mask[0] != 0, mask[1] && c.has(5), mask[2] && c.has(6)});
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd), stats (N, group)
Values group_norm(Ctx& c) {
  Value x = convert(c.b, c.v(0), compute_type(c.v(0).type.dtype));
  int64_t n = c.i(3), ch = c.i(4), hw = c.i(5), g = c.i(6);
  Value xg = c.b.reshape(x, {n, g, ch / g * hw});
  Stats s = stats(c, xg, {2}, 7);
  Value xhat = c.b.mul(c.b.sub(xg, expand(c.b, s.mean, xg.type.dims, {2})), expand(c.b, s.rstd, xg.type.dims, {2}));
  Value y = c.b.reshape(xhat, {n, ch, hw});
  if (c.has(1)) y = c.b.mul(y, arg_as(c, 1, y.type.dtype, y.type.dims, {1}));
  if (c.has(2)) y = c.b.add(y, arg_as(c, 2, y.type.dtype, y.type.dims, {1}));
  return {result(c, c.b.reshape(y, x.type.dims), 0), result(c, s.mean, 1), result(c, s.rstd, 2)};
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group, output_mask)
Values group_norm_backward(Ctx& c) {
  DType t = compute_type(c.v(1).type.dtype);
  int64_t n = c.i(5), ch = c.i(6), hw = c.i(7), g = c.i(8);
  Dims grouped = {n, g, ch / g * hw}, flat = {n, ch, hw};
  Value go = c.b.reshape(convert(c.b, c.v(0), t), flat), x = c.b.reshape(convert(c.b, c.v(1), t), grouped);
  Value m = convert(c.b, c.v(2), t), r = convert(c.b, c.v(3), t);
  Value xhat = c.b.mul(c.b.sub(x, expand(c.b, m, grouped, {2})), expand(c.b, r, grouped, {2}));
  Value gw = c.has(4) ? c.b.mul(go, arg_as(c, 4, t, flat, {1})) : go;
  Value dx = c.b.reshape(normalize_grad(c.b, c.b.reshape(gw, grouped), xhat, r, {2}), c.v(1).type.dims);
  Value xhat_flat = c.b.reshape(xhat, flat);
  const std::vector<int64_t>& mask = c.ints(9);
  return pick(c, {dx, sum(c.b, c.b.mul(go, xhat_flat), {0, 2}), sum(c.b, go, {0, 2})},
              {mask[0] != 0, mask[1] != 0, mask[2] != 0});
}

// Batch norm over every dim but 1. (native_batch_norm and _native_batch_norm_legit, which update running
// statistics in place, run as these pure forms: see csrc/aten/nn_kernels.cpp.) Arguments by position;
// stats_at < 0: no running statistics; momentum < 0: no update of them.
struct BatchNorm {
  Value y, mean, invstd, running_mean, running_var;
};
BatchNorm batch_norm(Ctx& c, bool training, int stats_at, size_t eps, int momentum) {
  Value x = convert(c.b, c.v(0), compute_type(c.v(0).type.dtype));
  DType t = x.type.dtype;
  int64_t rank = x.type.rank();
  Dims dims = all_but(1, rank);
  BatchNorm bn;
  if (training) {
    Stats s = stats(c, x, dims, eps);
    bn.mean = s.mean;
    bn.invstd = s.rstd;
    if (stats_at >= 0 && momentum >= 0) {  // running = (1 - momentum) running + momentum batch (unbiased var)
      int64_t n = count(x.type.dims, dims);
      Value mo = arg_as(c, momentum, t, s.mean.type.dims, {});
      Value keep = c.b.sub(scalar_like(c.b, 1, mo.type), mo);
      Value rm = convert(c.b, c.v(stats_at), t), rv = convert(c.b, c.v(stats_at + 1), t);
      double bessel = static_cast<double>(n) / static_cast<double>(n - 1);
      Value unbiased = c.b.mul(s.var, scalar_like(c.b, bessel, s.var.type));
      bn.running_mean = c.b.add(c.b.mul(keep, rm), c.b.mul(mo, s.mean));
      bn.running_var = c.b.add(c.b.mul(keep, rv), c.b.mul(mo, unbiased));
    }
  } else {
    bn.mean = convert(c.b, c.v(stats_at), t);
    Value var = convert(c.b, c.v(stats_at + 1), t);
    bn.invstd = c.b.unary(Op::Rsqrt, c.b.add(var, arg_as(c, eps, t, var.type.dims, {})));
    bn.running_mean = bn.mean;
    bn.running_var = var;
  }
  bn.y = normalize(c, x, bn.mean, bn.invstd, dims, 1, 2, {1});
  return bn;
}
// A saved statistic: empty when PyTorch's shape rule says so (eval mode of some ops).
Value saved(Ctx& c, Value v, size_t k) {
  return c.out[k].numel() == v.type.numel() ? result(c, v, k) : zeros(c.b, c.out[k]);
}

// _native_batch_norm_legit_functional(input, weight?, bias?, running_mean, running_var, training, momentum, eps)
// -> (out, save_mean, save_invstd, running_mean_out, running_var_out)
Values batch_norm_functional(Ctx& c) {
  BatchNorm bn = batch_norm(c, c.flag(5), 3, 7, 6);
  return {result(c, bn.y, 0), saved(c, bn.mean, 1), saved(c, bn.invstd, 2), result(c, bn.running_mean, 3),
          result(c, bn.running_var, 4)};
}
// _native_batch_norm_legit.no_stats(input, weight?, bias?, training, momentum, eps)
Values batch_norm_no_stats(Ctx& c) {
  BatchNorm bn = batch_norm(c, true, -1, 5, -1);
  return {result(c, bn.y, 0), saved(c, bn.mean, 1), saved(c, bn.invstd, 2)};
}
// _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean, running_var, momentum, eps)
Values batch_norm_eval(Ctx& c) {
  BatchNorm bn = batch_norm(c, false, 3, 6, -1);
  return {result(c, bn.y, 0), saved(c, bn.mean, 1), saved(c, bn.invstd, 2)};
}

// native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?, save_mean?,
// save_invstd?, train, eps, output_mask); batch_norm_backward has the same leading arguments.
Values batch_norm_backward(Ctx& c) {
  DType t = compute_type(c.v(1).type.dtype);
  Value go = convert(c.b, c.v(0), t), x = convert(c.b, c.v(1), t);
  const Dims& shape = x.type.dims;
  Dims dims = all_but(1, x.type.rank());
  bool train = c.flag(7);
  Value m = convert(c.b, c.v(train ? 5 : 3), t), r = convert(c.b, c.v(train ? 6 : 4), t);
  if (!train) r = c.b.unary(Op::Rsqrt, c.b.add(r, arg_as(c, 8, t, r.type.dims, {})));
  Value xhat = c.b.mul(c.b.sub(x, expand(c.b, m, shape, dims)), expand(c.b, r, shape, dims));
  Value g = c.has(2) ? c.b.mul(go, arg_as(c, 2, t, shape, {1})) : go;
  Value dx = train ? normalize_grad(c.b, g, xhat, r, dims) : c.b.mul(g, expand(c.b, r, shape, dims));
  const std::vector<int64_t>& mask = c.ints(9);
  return pick(c, {dx, sum(c.b, c.b.mul(go, xhat), dims), sum(c.b, go, dims)},
              {mask[0] != 0, mask[1] != 0, mask[2] != 0});
}

// ---- weight norm: w = v * (g / ||v||), the norm over every dim but `dim` (CPU's fused kernels: the first or the
// last dim), accumulated in float32 for half types; the norms come out shaped and typed as the meta kernel says
// (float32 for a bfloat16 g).

// argument `arg`, the dim, after CPU's check
int64_t weight_norm_dim(Ctx& c, const Value& v, size_t arg) {
  int64_t r = v.type.rank(), dim = c.i(arg, 0);
  if (r == 0 || (dim != 0 && dim != r - 1)) c.fail("fused kernels can only be applied for first or last dim");
  return dim;
}
// a [k] tensor (g, norms) broadcast along `dim` of shape
Value along(Builder& b, Value x, int64_t dim, const Dims& shape) {
  return b.broadcast_in_dim(b.reshape(x, {shape[dim]}), shape, {dim});
}

// _weight_norm_interface(v, g, dim) -> (w, norms)
Values weight_norm(Ctx& c) {
  Value v0 = c.v(0);
  int64_t dim = weight_norm_dim(c, v0, 2);
  DType t = compute_type(v0.type.dtype);
  const Dims& shape = v0.type.dims;
  Value v = convert(c.b, v0, t), g = c.b.reshape(convert(c.b, c.v(1), t), {shape[dim]});
  Dims dims = all_but(dim, v.type.rank());
  Value norm = c.b.unary(Op::Sqrt, sum(c.b, c.b.mul(v, v), dims));  // [k]
  Value w = c.b.mul(v, along(c.b, c.b.div(g, norm), dim, shape));
  return {result(c, w, 0), result(c, c.b.reshape(norm, c.out[1].dims), 1)};
}

// _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim) -> (grad_v, grad_g), as CPU:
// s = sum(grad_w * v), grad_g = s / norm, grad_v = (g / norm) * grad_w - (g / norm) * grad_g / norm * v
Values weight_norm_backward(Ctx& c) {
  Value v0 = c.v(1);
  int64_t dim = weight_norm_dim(c, v0, 4);
  DType t = compute_type(v0.type.dtype);
  const Dims& shape = v0.type.dims;
  int64_t k = shape[dim];
  Value gw = convert(c.b, c.v(0), t), v = convert(c.b, v0, t);
  Value g = c.b.reshape(convert(c.b, c.v(2), t), {k}), norm = c.b.reshape(convert(c.b, c.v(3), t), {k});
  Value s = sum(c.b, c.b.mul(gw, v), all_but(dim, v.type.rank()));
  Value grad_g = c.b.div(s, norm);
  Value a = c.b.div(g, norm), bb = c.b.div(c.b.mul(a, grad_g), norm);
  Value grad_v = c.b.sub(c.b.mul(along(c.b, a, dim, shape), gw), c.b.mul(along(c.b, bb, dim, shape), v));
  return {result(c, grad_v, 0), result(c, c.b.reshape(grad_g, c.out[1].dims), 1)};
}

Register r({
    {"native_layer_norm|native_layer_norm.out", layer_norm},
    {"native_layer_norm_backward|native_layer_norm_backward.out", layer_norm_backward},
    {"native_group_norm|native_group_norm.out", group_norm},
    {"native_group_norm_backward|native_group_norm_backward.out", group_norm_backward},
    {"_native_batch_norm_legit_functional", batch_norm_functional},
    {"_native_batch_norm_legit.no_stats|_native_batch_norm_legit.no_stats_out", batch_norm_no_stats},
    {"_native_batch_norm_legit_no_training|_native_batch_norm_legit_no_training.out", batch_norm_eval},
    {"native_batch_norm_backward|native_batch_norm_backward.out|batch_norm_backward", batch_norm_backward},
    {"_weight_norm_interface", weight_norm},  // .out: its composite (PyTorch's Meta kernel of .out is broken)
    {"_weight_norm_interface_backward", weight_norm_backward},
});

}  // namespace
}  // namespace tpu::lower

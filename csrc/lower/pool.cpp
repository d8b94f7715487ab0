// Pooling and resampling over the trailing spatial dims: max pool (with indices), avg pool, adaptive
// avg / max pool, nearest and (bi/tri)linear upsampling, and their gradients. Window geometry is
// static, so index tables and divisors are computed here, in PyTorch's float arithmetic.
#include <algorithm>
#include <cmath>

#include "lower/helpers.h"

namespace tpu::lower {
namespace {

using hlo::Cmp;
using hlo::Op;

Dims per_dim(const std::vector<int64_t>& v, size_t n, int64_t fallback) {
  if (v.empty()) return Dims(n, fallback);
  if (v.size() == 1) return Dims(n, v[0]);
  return Dims(v.begin(), v.end());
}

Value vec_s64(Builder& b, const std::vector<int64_t>& v) {
  return b.constant({DType::S64, {static_cast<int64_t>(v.size())}}, v.data(), v.size() * 8);
}
Value vec_f(Builder& b, const std::vector<double>& v, DType t) {
  return convert(b, b.constant({DType::F64, {static_cast<int64_t>(v.size())}}, v.data(), v.size() * 8), t);
}

// x with dim `d` replaced by x[..., idx[j], ...] for each j.
Value take(Builder& b, Value x, int64_t d, const std::vector<int64_t>& idx) {
  hlo::GatherDims g;
  for (int64_t i = 0; i < x.type.rank(); ++i)
    if (i != d) g.offset_dims.push_back(i);
  g.collapsed_slice_dims = {d};
  g.start_index_map = {d};
  g.index_vector_dim = 1;
  Dims sizes = x.type.dims;
  sizes[d] = 1;
  Value ix = b.reshape(vec_s64(b, idx), {static_cast<int64_t>(idx.size()), 1});
  return b.gather(x, ix, g, sizes);
}

// g with dim d contracted against A (out, in) on out: dim d becomes `in`, in place.
Value apply_axis(Ctx& c, Value g, int64_t d, Value a) {
  Value y = c.b.dot_general(g, a, {{}, {}, {d}, {0}}, hlo::Precision::Highest, hlo::Precision::Highest);
  Dims perm;
  int64_t r = y.type.rank();
  for (int64_t i = 0; i < r - 1; ++i) perm.push_back(i);
  perm.insert(perm.begin() + d, r - 1);
  return c.b.transpose(y, perm);
}

// The (out, in) matrix with w0[o] at (o, i0[o]) plus w1[o] at (o, i1[o]).
Value axis_matrix(Builder& b, const std::vector<int64_t>& i0, const std::vector<double>& w0,
                  const std::vector<int64_t>& i1, const std::vector<double>& w1, int64_t in, DType t) {
  int64_t out = static_cast<int64_t>(i0.size());
  TensorType it{DType::S64, {out, in}}, ft{t, {out, in}};
  Value col = b.iota(it, 1), z = zeros(b, ft);
  auto part = [&](const std::vector<int64_t>& i, const std::vector<double>& w) {
    Value hit = b.compare(col, b.broadcast_in_dim(vec_s64(b, i), it.dims, {0}), Cmp::EQ);
    return b.select(hit, b.broadcast_in_dim(vec_f(b, w, t), ft.dims, {0}), z);
  };
  return b.add(part(i0, w0), part(i1, w1));
}


// Flat index h * W + w (over the trailing n dims) of every element of shape.
Value plane_index(Builder& b, const Dims& shape, int64_t n) {
  TensorType t{DType::S64, shape};
  int64_t r = static_cast<int64_t>(shape.size());
  Value idx = zeros(b, t);
  for (int64_t d = r - n; d < r; ++d)
    idx = b.add(b.mul(idx, scalar_like(b, static_cast<double>(shape[d]), t)), b.iota(t, d));
  return idx;
}

// grad_output scattered (added) into self's shape at the flat plane indices `indices`.
Value scatter_plane(Ctx& c, Value grad, Value indices, const Dims& self_shape, int64_t n) {
  DType t = compute_type(grad.type.dtype);
  int64_t r = static_cast<int64_t>(self_shape.size()), rows = 1, plane = 1, taken = 1;
  for (int64_t d = 0; d < r - n; ++d) rows *= self_shape[d];
  for (int64_t d = r - n; d < r; ++d) {
    plane *= self_shape[d];
    taken *= grad.type.dims[d];
  }
  Value g = c.b.reshape(convert(c.b, grad, t), {rows, taken});
  Value ix = c.b.reshape(convert(c.b, indices, DType::S64), {rows, taken, 1});
  Value row = c.b.iota({DType::S64, {rows, taken, 1}}, 0);
  hlo::ScatterDims sd;
  sd.inserted_window_dims = {0, 1};
  sd.scatter_dims_to_operand_dims = {0, 1};
  sd.index_vector_dim = 2;
  Value out = c.b.scatter({zeros(c.b, {t, {rows, plane}})}, c.b.concatenate({row, ix}, 2), {g}, sd,
                          [](Builder& s, const Values& a) { return Values{s.add(a[0], a[1])}; })[0];
  return c.b.reshape(out, self_shape);
}

struct Pool {
  Dims kernel, stride, padding, dilation;
};
Pool pool_args(Ctx& c, size_t first, bool has_dilation, size_t n) {
  Pool p;
  p.kernel = per_dim(c.ints(first), n, 1);
  p.stride = c.ints(first + 1).empty() ? p.kernel : per_dim(c.ints(first + 1), n, 1);
  p.padding = per_dim(c.ints(first + 2), n, 0);
  p.dilation = has_dilation ? per_dim(c.ints(first + 3), n, 1) : Dims(n, 1);
  return p;
}

// A window sweep over the trailing n dims producing out_dims; high padding grows to fit ceil_mode.
hlo::Window sweep(const Pool& p, const Dims& in, const Dims& out) {
  size_t r = in.size(), n = p.kernel.size();
  hlo::Window w{Dims(r, 1), Dims(r, 1), {}, Dims(r, 1), hlo::Padding(r, {0, 0})};
  for (size_t i = 0; i < n; ++i) {
    size_t d = r - n + i;
    int64_t eff = (p.kernel[i] - 1) * p.dilation[i] + 1;
    w.dims[d] = p.kernel[i];
    w.strides[d] = p.stride[i];
    w.window_dilations[d] = p.dilation[i];
    w.padding[d] = {p.padding[i], std::max<int64_t>(0, (out[d] - 1) * p.stride[i] + eff - in[d] - p.padding[i])};
  }
  return w;
}

// max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) -> (out, indices)
Values max_pool_n(Ctx& c, size_t n) {  // n spatial dims (also max_pool3d_with_indices)
  Value x = c.v(0);
  Pool p = pool_args(c, 1, true, n);
  hlo::Window w = sweep(p, x.type.dims, c.out[0].dims);
  Value idx = plane_index(c.b, x.type.dims, n);
  Value lo = c.b.splat(hlo::scalar(x.type.dtype), lowest(x.type.dtype));
  Value big = c.b.splat(hlo::scalar(DType::S64), 1e18);
  Values r = c.b.reduce_window({x, idx}, {lo, big}, w, argmax_pair_body);
  return {result(c, r[0], 0), result(c, r[1], 1)};
}
Values max_pool(Ctx& c) { return max_pool_n(c, 2); }
Values max_pool3d(Ctx& c) { return max_pool_n(c, 3); }

// max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices)
Values max_pool_backward(Ctx& c) { return {result(c, scatter_plane(c, c.v(0), c.v(7), c.v(1).type.dims, 2))}; }
Values max_pool3d_backward(Ctx& c) { return {result(c, scatter_plane(c, c.v(0), c.v(7), c.v(1).type.dims, 3))}; }

// avg pool divisors along one dim, per output position (PyTorch's rule: the window clipped to the
// padded input counts when count_include_pad, else the window clipped to the input).
std::vector<double> divisors(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, bool include_pad) {
  std::vector<double> d;
  for (int64_t o = 0; o < out; ++o) {
    int64_t start = o * s - p, end = std::min(start + k, in + p), pool = end - start;
    start = std::max<int64_t>(start, 0);
    end = std::min(end, in);
    d.push_back(static_cast<double>(include_pad ? pool : end - start));
  }
  return d;
}
// The divisor of every output element, in type t over out_dims (trailing two dims pooled).
Value avg_divisor(Ctx& c, const Pool& p, const Dims& in, const Dims& out, bool include_pad, size_t override_at,
                  DType t) {
  TensorType ot{t, out};
  if (c.has(override_at)) return scalar_like(c.b, static_cast<double>(c.i(override_at)), ot);
  int64_t r = static_cast<int64_t>(out.size());
  Value div = scalar_like(c.b, 1, ot);
  for (int64_t i = 0; i < 2; ++i) {
    int64_t d = r - 2 + i;
    Value v = vec_f(c.b, divisors(in[d], out[d], p.kernel[i], p.stride[i], p.padding[i], include_pad), t);
    div = c.b.mul(div, c.b.broadcast_in_dim(v, out, {d}));
  }
  return div;
}

// avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override?)
Values avg_pool(Ctx& c) {
  Value x = convert(c.b, c.v(0), compute_type(c.v(0).type.dtype));
  Pool p = pool_args(c, 1, false, 2);
  hlo::Window w = sweep(p, x.type.dims, c.out[0].dims);
  Value s = c.b.reduce_window({x}, {zeros(c.b, hlo::scalar(x.type.dtype))}, w,
                              [](Builder& r, const Values& a) { return Values{r.add(a[0], a[1])}; })[0];
  return {result(c, c.b.div(s, avg_divisor(c, p, x.type.dims, c.out[0].dims, c.flag(5), 6, x.type.dtype)))};
}

// avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override?)
// Each input element sums grad / divisor over the windows covering it: a stride-1 window sum over
// the gradient dilated by the stride.
Values avg_pool_backward(Ctx& c) {
  DType t = compute_type(c.v(0).type.dtype);
  const Dims& in = c.v(1).type.dims;
  Value go = convert(c.b, c.v(0), t);
  Pool p = pool_args(c, 2, false, 2);
  Value g = c.b.div(go, avg_divisor(c, p, in, go.type.dims, c.flag(6), 7, t));
  size_t r = in.size();
  hlo::Window w{Dims(r, 1), Dims(r, 1), Dims(r, 1), {}, hlo::Padding(r, {0, 0})};
  for (size_t i = 0; i < 2; ++i) {
    size_t d = r - 2 + i;
    int64_t lo = p.kernel[i] - 1 - p.padding[i];
    int64_t hi = in[d] + p.kernel[i] - 1 - lo - (go.type.dims[d] - 1) * p.stride[i] - 1;
    w.dims[d] = p.kernel[i];
    w.base_dilations[d] = p.stride[i];
    w.padding[d] = {lo, std::max<int64_t>(hi, 0)};
  }
  Value s = c.b.reduce_window({g}, {zeros(c.b, hlo::scalar(t))}, w,
                              [](Builder& rb, const Values& a) { return Values{rb.add(a[0], a[1])}; })[0];
  return {result(c, c.b.slice(s, Dims(r, 0), in))};
}

// Adaptive pooling bins along one dim: [floor(o in / out), ceil((o + 1) in / out)).
struct Bins {
  std::vector<int64_t> start, end;
  int64_t widest = 0;
};
Bins bins(int64_t in, int64_t out) {
  Bins b;
  for (int64_t o = 0; o < out; ++o) {
    b.start.push_back(o * in / out);
    b.end.push_back(((o + 1) * in + out - 1) / out);
    b.widest = std::max(b.widest, b.end.back() - b.start.back());
  }
  return b;
}
// x with dim d (size in) replaced by (out, widest): the elements of each bin, the last one repeated.
Value bin_elements(Builder& b, Value x, int64_t d, const Bins& bn) {
  std::vector<int64_t> idx;
  for (size_t o = 0; o < bn.start.size(); ++o)
    for (int64_t j = 0; j < bn.widest; ++j) idx.push_back(std::min(bn.start[o] + j, bn.end[o] - 1));
  Value y = take(b, x, d, idx);
  Dims shape = x.type.dims;
  shape[d] = bn.widest;
  shape.insert(shape.begin() + d, static_cast<int64_t>(bn.start.size()));
  return b.reshape(y, shape);
}
// Pred over shape: whether the element at (dim d = bin o, dim d + 1 = j) lies inside the bin.
Value bin_mask(Builder& b, const Bins& bn, const Dims& shape, int64_t d) {
  std::vector<int64_t> len;
  for (size_t o = 0; o < bn.start.size(); ++o) len.push_back(bn.end[o] - bn.start[o]);
  TensorType it{DType::S64, shape};
  return b.compare(b.iota(it, d + 1), b.broadcast_in_dim(vec_s64(b, len), shape, {d}), Cmp::LT);
}

// _adaptive_avg_pool2d(self, output_size)
Values adaptive_avg_pool(Ctx& c) {
  Value x = convert(c.b, c.v(0), compute_type(c.v(0).type.dtype));
  const Dims& out = c.out[0].dims;
  int64_t r = x.type.rank();
  Value count = scalar_like(c.b, 1, {x.type.dtype, out});
  for (int64_t d = r - 1; d >= r - static_cast<int64_t>(c.ints(1).size()); --d) {  // last dim first, like PyTorch's loops
    Bins bn = bins(x.type.dims[d], out[d]);
    Value e = bin_elements(c.b, x, d, bn);
    e = c.b.select(bin_mask(c.b, bn, e.type.dims, d), e, zeros(c.b, e.type));
    x = reduce(c.b, e, {d + 1}, Op::Add, 0);
    std::vector<double> len;
    for (size_t o = 0; o < bn.start.size(); ++o) len.push_back(static_cast<double>(bn.end[o] - bn.start[o]));
    count = c.b.mul(count, c.b.broadcast_in_dim(vec_f(c.b, len, x.type.dtype), out, {d}));
  }
  return {result(c, c.b.div(x, count))};
}

// _adaptive_avg_pool2d_backward(grad_output, self): each bin's gradient / its size, spread over it.
Values adaptive_avg_pool_backward_n(Ctx& c, int64_t n) {  // n spatial dims
  Value g = convert(c.b, c.v(0), compute_type(c.v(0).type.dtype));
  const Dims& in = c.v(1).type.dims;
  int64_t r = g.type.rank();
  for (int64_t d = r - n; d < r; ++d) {
    Bins bn = bins(in[d], g.type.dims[d]);
    int64_t out = static_cast<int64_t>(bn.start.size());
    TensorType it{DType::S64, {out, in[d]}};
    Value col = c.b.iota(it, 1);
    Value inside = c.b.and_(c.b.compare(col, c.b.broadcast_in_dim(vec_s64(c.b, bn.start), it.dims, {0}), Cmp::GE),
                            c.b.compare(col, c.b.broadcast_in_dim(vec_s64(c.b, bn.end), it.dims, {0}), Cmp::LT));
    std::vector<double> inv;
    for (int64_t o = 0; o < out; ++o) inv.push_back(1.0 / static_cast<double>(bn.end[o] - bn.start[o]));
    TensorType ft{g.type.dtype, it.dims};
    Value a = c.b.select(inside, c.b.broadcast_in_dim(vec_f(c.b, inv, g.type.dtype), ft.dims, {0}), zeros(c.b, ft));
    g = apply_axis(c, g, d, a);
  }
  return {result(c, g)};
}
Values adaptive_avg_pool_backward(Ctx& c) { return adaptive_avg_pool_backward_n(c, 2); }
Values adaptive_avg_pool3d_backward(Ctx& c) { return adaptive_avg_pool_backward_n(c, 3); }

// adaptive_max_pool2d(self, output_size) -> (out, indices)
Values adaptive_max_pool(Ctx& c) {
  Value x = c.v(0), idx = plane_index(c.b, x.type.dims, 2);
  const Dims& out = c.out[0].dims;
  int64_t r = x.type.rank();
  for (int64_t d = r - 1; d >= r - 2; --d) {
    Bins bn = bins(x.type.dims[d], out[d]);
    Value xe = bin_elements(c.b, x, d, bn), ie = bin_elements(c.b, idx, d, bn);
    Value lo = c.b.splat(hlo::scalar(x.type.dtype), lowest(x.type.dtype));
    Value big = c.b.splat(hlo::scalar(DType::S64), 1e18);
    Values m = c.b.reduce({xe, ie}, {lo, big}, {d + 1}, argmax_pair_body);
    x = m[0];
    idx = m[1];
  }
  return {result(c, x, 0), result(c, idx, 1)};
}

// adaptive_max_pool2d_backward(grad_output, self, indices)
Values adaptive_max_pool_backward(Ctx& c) {
  return {result(c, scatter_plane(c, c.v(0), c.v(2), c.v(1).type.dims, 2))};
}

// Upsampling: per spatial dim, each output position reads (i0, w0) and (i1, w1) of the input.
struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<double> w0, w1;
};
// PyTorch's compute_scales_value: 1 / scale when given, else in / out (in T: float, double for float64).
template <typename T>
T scale_of(Ctx& c, size_t at, int64_t in, int64_t out) {
  if (c.has(at) && c.f(at) > 0) return static_cast<T>(1.0 / c.f(at));
  return static_cast<T>(in) / static_cast<T>(out);
}
Taps nearest_taps(Ctx& c, size_t at, int64_t in, int64_t out, bool exact) {
  Taps t;
  float s = scale_of<float>(c, at, in, out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i;
    if (exact) i = std::min(static_cast<int64_t>(std::floor((static_cast<float>(o) + 0.5f) * s)), in - 1);
    else if (out == in) i = o;
    else if (out == 2 * in) i = o >> 1;
    else i = std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * s)), in - 1);
    t.i0.push_back(i);
    t.i1.push_back(i);
    t.w0.push_back(1);
    t.w1.push_back(0);
  }
  return t;
}
// Source positions and weights in T, PyTorch's accumulation type (double for float64 inputs).
template <typename T>
Taps linear_taps(Ctx& c, size_t at, int64_t in, int64_t out, bool align_corners) {
  Taps t;
  T s = align_corners ? (out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0))
                      : scale_of<T>(c, at, in, out);
  for (int64_t o = 0; o < out; ++o) {
    T src = align_corners ? s * static_cast<T>(o) : std::max(s * (static_cast<T>(o) + T(0.5)) - T(0.5), T(0));
    int64_t i = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    T l = std::min(std::max(src - static_cast<T>(i), T(0)), T(1));
    t.i0.push_back(i);
    t.i1.push_back(i + (i < in - 1 ? 1 : 0));
    t.w0.push_back(T(1) - l);
    t.w1.push_back(l);
  }
  return t;
}

enum class Mode { Nearest, NearestExact, Linear };
// Taps of spatial dim i (of n) for a call whose scales start at argument `scales`.
Taps taps(Ctx& c, Mode m, size_t scales, size_t i, int64_t in, int64_t out, bool align_corners) {
  if (m == Mode::Linear)
    return c.v(0).type.dtype == DType::F64 ? linear_taps<double>(c, scales + i, in, out, align_corners)
                                           : linear_taps<float>(c, scales + i, in, out, align_corners);
  return nearest_taps(c, scales + i, in, out, m == Mode::NearestExact);
}

// upsample_*(self, output_size, [align_corners], scales...): last dim first, like PyTorch's loops.
Values upsample(Ctx& c, Mode m) {
  DType t0 = c.v(0).type.dtype;
  DType work = resample_type(t0);  // nearest modes copy uint8 values as they are
  Value x = convert(c.b, c.v(0), m == Mode::Linear ? work : compute_type(t0));
  size_t n = c.ints(1).size(), scales = m == Mode::Linear ? 3 : 2;
  bool align = m == Mode::Linear && c.flag(2);
  int64_t r = x.type.rank();
  for (size_t i = n; i-- > 0;) {
    int64_t d = r - static_cast<int64_t>(n) + static_cast<int64_t>(i);
    Taps t = taps(c, m, scales, i, x.type.dims[d], c.out[0].dims[d], align);
    if (m != Mode::Linear) {
      x = take(c.b, x, d, t.i0);
      continue;
    }
    const Dims& od = c.out[0].dims;
    Dims shape = x.type.dims;
    shape[d] = od[d];
    Value w0 = c.b.broadcast_in_dim(vec_f(c.b, t.w0, x.type.dtype), shape, {d});
    Value w1 = c.b.broadcast_in_dim(vec_f(c.b, t.w1, x.type.dtype), shape, {d});
    x = resample_round(c.b, c.b.add(c.b.mul(w0, take(c.b, x, d, t.i0)), c.b.mul(w1, take(c.b, x, d, t.i1))), t0);
  }
  return {result(c, x)};
}
Values upsample_nearest(Ctx& c) { return upsample(c, Mode::Nearest); }
Values upsample_nearest_exact(Ctx& c) { return upsample(c, Mode::NearestExact); }
Values upsample_linear(Ctx& c) { return upsample(c, Mode::Linear); }

// upsample_*_backward(grad_output, output_size, input_size, [align_corners], scales...): the
// transposed tap matrices applied along each dim.
Values upsample_backward(Ctx& c, Mode m) {
  Value g = convert(c.b, c.v(0), compute_type(c.v(0).type.dtype));
  const std::vector<int64_t>& in = c.ints(2);
  size_t n = c.ints(1).size(), scales = m == Mode::Linear ? 4 : 3;
  bool align = m == Mode::Linear && c.flag(3);
  int64_t r = g.type.rank();
  for (size_t i = 0; i < n; ++i) {
    int64_t d = r - static_cast<int64_t>(n) + static_cast<int64_t>(i);
    Taps t = taps(c, m, scales, i, in[d], g.type.dims[d], align);
    g = apply_axis(c, g, d, axis_matrix(c.b, t.i0, t.w0, t.i1, t.w1, in[d], g.type.dtype));
  }
  return {result(c, g)};
}
Values upsample_nearest_backward(Ctx& c) { return upsample_backward(c, Mode::Nearest); }
Values upsample_nearest_exact_backward(Ctx& c) { return upsample_backward(c, Mode::NearestExact); }
Values upsample_linear_backward(Ctx& c) { return upsample_backward(c, Mode::Linear); }

constexpr uint32_t bits(int from, int n) { return ((1u << n) - 1) << from; }

Register r({
    {"max_pool2d_with_indices|max_pool2d_with_indices.out", max_pool},
    {"max_pool3d_with_indices|max_pool3d_with_indices.out", max_pool3d},
    {"max_pool3d_with_indices_backward|max_pool3d_with_indices_backward.grad_input", max_pool3d_backward},
    {"_adaptive_avg_pool3d|_adaptive_avg_pool3d.out", adaptive_avg_pool},
    {"_adaptive_avg_pool3d_backward|_adaptive_avg_pool3d_backward.out", adaptive_avg_pool3d_backward},
    {"max_pool2d_with_indices_backward|max_pool2d_with_indices_backward.grad_input", max_pool_backward},
    {"avg_pool2d|avg_pool2d.out", avg_pool}, {"avg_pool2d_backward|avg_pool2d_backward.grad_input", avg_pool_backward},
    {"_adaptive_avg_pool2d|_adaptive_avg_pool2d.out", adaptive_avg_pool},
    {"_adaptive_avg_pool2d_backward|_adaptive_avg_pool2d_backward.out", adaptive_avg_pool_backward},
    {"adaptive_max_pool2d|adaptive_max_pool2d.out", adaptive_max_pool},
    {"adaptive_max_pool2d_backward|adaptive_max_pool2d_backward.grad_input", adaptive_max_pool_backward},
    {"upsample_nearest1d|upsample_nearest1d.out|upsample_nearest2d|upsample_nearest2d.out|upsample_nearest3d|"
     "upsample_nearest3d.out", upsample_nearest, bits(2, 3)},
    {"_upsample_nearest_exact1d|_upsample_nearest_exact1d.out|_upsample_nearest_exact2d|_upsample_nearest_exact2d.out|"
     "_upsample_nearest_exact3d|_upsample_nearest_exact3d.out", upsample_nearest_exact, bits(2, 3)},
    {"upsample_linear1d|upsample_linear1d.out|upsample_bilinear2d|upsample_bilinear2d.out|upsample_trilinear3d|"
     "upsample_trilinear3d.out", upsample_linear, bits(3, 3)},
    {"upsample_nearest1d_backward|upsample_nearest1d_backward.grad_input|upsample_nearest2d_backward|"
     "upsample_nearest2d_backward.grad_input|upsample_nearest3d_backward|upsample_nearest3d_backward.grad_input",
     upsample_nearest_backward, bits(3, 3)},
    {"_upsample_nearest_exact1d_backward|_upsample_nearest_exact1d_backward.grad_input|"
     "_upsample_nearest_exact2d_backward|_upsample_nearest_exact2d_backward.grad_input|"
     "_upsample_nearest_exact3d_backward|_upsample_nearest_exact3d_backward.grad_input",
     upsample_nearest_exact_backward, bits(3, 3)},
    {"upsample_linear1d_backward|upsample_linear1d_backward.grad_input|upsample_bilinear2d_backward|"
     "upsample_bilinear2d_backward.grad_input|upsample_trilinear3d_backward|upsample_trilinear3d_backward.grad_input",
     upsample_linear_backward, bits(4, 3)},
});

}  // namespace

Values argmax_pair_body(Builder& r, const Values& a) {
  Value av = a[0], ai = a[1], bv = a[2], bi = a[3];
  Value a_nan = r.compare(av, av, Cmp::NE), b_nan = r.compare(bv, bv, Cmp::NE);
  Value same = r.or_(r.compare(av, bv, Cmp::EQ), r.and_(a_nan, b_nan));
  Value take_b = r.or_(r.or_(r.compare(bv, av, Cmp::GT), r.and_(b_nan, r.unary(Op::Not, a_nan))),
                       r.and_(same, r.compare(bi, ai, Cmp::LT)));
  return {r.select(take_b, bv, av), r.select(take_b, bi, ai)};
}

}  // namespace tpu::lower

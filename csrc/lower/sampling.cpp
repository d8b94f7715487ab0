// Sampling and pooling beyond pool.cpp: max unpooling, channel shuffle, im2col / col2im, avg pool 3d,
// adaptive max pool 3d, fractional max pool, bicubic and antialiased bilinear / bicubic upsampling (static
// (out, in) weight matrices per axis), grid sampling (gathers of corner taps, scatter-add backward).
#include <algorithm>
#include <cmath>

#include "lower/helpers.h"

namespace tpu::lower {
namespace {

using hlo::Cmp;
using hlo::Op;

int64_t prod(const Dims& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}
Dims per_dim(const std::vector<int64_t>& v, size_t n, int64_t fallback) {
  if (v.empty()) return Dims(n, fallback);
  if (v.size() == 1) return Dims(n, v[0]);
  return Dims(v.begin(), v.end());
}
Values add_body(Builder& s, const Values& a) { return {s.add(a[0], a[1])}; }

// (rows, m) gathered from x2 (rows, plane) at flat plane indices idx (rows, m).
Value gather_rows(Builder& b, Value x2, Value idx) {
  int64_t rows = idx.type.dims[0], m = idx.type.dims[1];
  Value row = b.iota({DType::S64, {rows, m, 1}}, 0);
  Value ix = b.concatenate({row, b.reshape(convert(b, idx, DType::S64), {rows, m, 1})}, 2);
  hlo::GatherDims g;
  g.collapsed_slice_dims = {0, 1};
  g.start_index_map = {0, 1};
  g.index_vector_dim = 2;
  return b.gather(x2, ix, g, {1, 1});
}
// init (rows, plane) with upd (rows, m) scattered at flat plane indices idx (rows, m): added, or replacing.
Value scatter_rows(Builder& b, Value init, Value idx, Value upd, bool add) {
  int64_t rows = idx.type.dims[0], m = idx.type.dims[1];
  Value row = b.iota({DType::S64, {rows, m, 1}}, 0);
  Value ix = b.concatenate({row, b.reshape(convert(b, idx, DType::S64), {rows, m, 1})}, 2);
  hlo::ScatterDims sd;
  sd.inserted_window_dims = {0, 1};
  sd.scatter_dims_to_operand_dims = {0, 1};
  sd.index_vector_dim = 2;
  return b.scatter({init}, ix, {upd}, sd, add ? hlo::Body(add_body) : [](Builder&, const Values& a) {
    return Values{a[1]};
  })[0];
}
// grad (.., spatial) added into a zero tensor of shape `self` (n trailing dims) at flat plane indices.
Value scatter_plane(Builder& b, Value grad, Value indices, const Dims& self, size_t n) {
  DType t = compute_type(grad.type.dtype);
  size_t r = self.size();
  int64_t rows = prod(self, 0, r - n), m = grad.type.numel() / std::max<int64_t>(rows, 1);
  Value init = zeros(b, {t, {rows, prod(self, r - n, r)}});
  Value g = b.reshape(convert(b, grad, t), {rows, m}), ix = b.reshape(indices, {rows, m});
  return b.reshape(scatter_rows(b, init, ix, g, true), self);
}

// max_unpool2d(self, indices, output_size) / max_unpool3d(self, indices, output_size, stride, padding)
Values max_unpool_n(Ctx& c, size_t n) {
  Value x = c.v(0);
  const Dims& out = c.out[0].dims;
  size_t r = out.size();
  int64_t rows = prod(out, 0, r - n), m = x.type.numel() / std::max<int64_t>(rows, 1);
  Value init = zeros(c.b, {x.type.dtype, {rows, prod(out, r - n, r)}});
  Value y = scatter_rows(c.b, init, c.b.reshape(c.v(1), {rows, m}), c.b.reshape(x, {rows, m}), false);
  return {c.b.reshape(y, out)};
}
Values max_unpool2d(Ctx& c) { return max_unpool_n(c, 2); }
Values max_unpool3d(Ctx& c) { return max_unpool_n(c, 3); }

// channel_shuffle(self, groups): (N, g, C / g, *) transposed to (N, C / g, g, *).
Values channel_shuffle(Ctx& c) {
  Value x = c.v(0);
  Dims d = x.type.dims, perm;
  int64_t g = c.i(1);
  d[1] /= g;
  d.insert(d.begin() + 1, g);
  for (int64_t i = 0; i < static_cast<int64_t>(d.size()); ++i) perm.push_back(i);
  std::swap(perm[1], perm[2]);
  return {c.b.reshape(c.b.transpose(c.b.reshape(x, d), perm), c.out[0].dims)};
}

// im2col(self, kernel_size, dilation, padding, stride) -> (N, C * kh * kw, L): one strided slice per tap.
Values im2col(Ctx& c) {
  Value x = c.v(0);
  if (x.type.rank() == 3) x = c.b.reshape(x, {1, x.type.dims[0], x.type.dims[1], x.type.dims[2]});
  Dims k = c.ints(1), dil = c.ints(2), pad = c.ints(3), st = c.ints(4);
  x = c.b.pad(x, zeros(c.b, hlo::scalar(x.type.dtype)), {0, 0, pad[0], pad[1]}, {0, 0, pad[0], pad[1]});
  int64_t n = x.type.dims[0], ch = x.type.dims[1];
  int64_t oh = (x.type.dims[2] - dil[0] * (k[0] - 1) - 1) / st[0] + 1;
  int64_t ow = (x.type.dims[3] - dil[1] * (k[1] - 1) - 1) / st[1] + 1;
  Values taps;
  for (int64_t i = 0; i < k[0]; ++i)
    for (int64_t j = 0; j < k[1]; ++j) {
      Value s = c.b.slice(x, {0, 0, i * dil[0], j * dil[1]},
                          {n, ch, i * dil[0] + (oh - 1) * st[0] + 1, j * dil[1] + (ow - 1) * st[1] + 1},
                          {1, 1, st[0], st[1]});
      taps.push_back(c.b.reshape(s, {n, ch, 1, oh * ow}));
    }
  return {c.b.reshape(c.b.concatenate(taps, 2), c.out[0].dims)};
}

// col2im(self, output_size, kernel_size, dilation, padding, stride): each tap's columns placed back
// with interior padding and summed.
Values col2im(Ctx& c) {
  Value x = convert(c.b, c.v(0), compute_type(c.v(0).type.dtype));
  Dims out = c.ints(1), k = c.ints(2), dil = c.ints(3), pad = c.ints(4), st = c.ints(5);
  int64_t n = x.type.rank() == 3 ? x.type.dims[0] : 1, ch = x.type.dims[x.type.rank() - 2] / (k[0] * k[1]);
  int64_t hp = out[0] + 2 * pad[0], wp = out[1] + 2 * pad[1];
  int64_t oh = (hp - dil[0] * (k[0] - 1) - 1) / st[0] + 1, ow = (wp - dil[1] * (k[1] - 1) - 1) / st[1] + 1;
  x = c.b.reshape(x, {n, ch, k[0] * k[1], oh, ow});
  Value zero = zeros(c.b, hlo::scalar(x.type.dtype)), sum = zeros(c.b, {x.type.dtype, {n, ch, hp, wp}});
  for (int64_t i = 0; i < k[0]; ++i)
    for (int64_t j = 0; j < k[1]; ++j) {
      int64_t t = i * k[1] + j, h0 = i * dil[0], w0 = j * dil[1];
      Value s = c.b.reshape(c.b.slice(x, {0, 0, t, 0, 0}, {n, ch, t + 1, oh, ow}), {n, ch, oh, ow});
      s = c.b.pad(s, zero, {0, 0, h0, w0}, {0, 0, hp - h0 - (oh - 1) * st[0] - 1, wp - w0 - (ow - 1) * st[1] - 1},
                  {0, 0, st[0] - 1, st[1] - 1});
      sum = c.b.add(sum, s);
    }
  sum = c.b.slice(sum, {0, 0, pad[0], pad[1]}, {n, ch, pad[0] + out[0], pad[1] + out[1]});
  return {result(c, c.b.reshape(sum, c.out[0].dims))};
}

// avg_pool3d: PyTorch's divisor factors per dim (window clipped to the padded input, or to the input).
struct Pool {
  Dims k, s, p;
};
Pool pool_args(Ctx& c, size_t first, size_t n) {
  Pool p{per_dim(c.ints(first), n, 1), {}, per_dim(c.ints(first + 2), n, 0)};
  p.s = c.ints(first + 1).empty() ? p.k : per_dim(c.ints(first + 1), n, 1);
  return p;
}
Value avg_divisor(Ctx& c, const Pool& p, const Dims& in, const Dims& out, bool include_pad, size_t override_at,
                  DType t) {
  TensorType ot{t, out};
  if (c.has(override_at)) return scalar_like(c.b, static_cast<double>(c.i(override_at)), ot);
  size_t r = out.size(), n = p.k.size();
  Value div = scalar_like(c.b, 1, ot);
  for (size_t i = 0; i < n; ++i) {
    size_t d = r - n + i;
    std::vector<double> v;
    for (int64_t o = 0; o < out[d]; ++o) {
      int64_t start = o * p.s[i] - p.p[i], end = std::min(start + p.k[i], in[d] + p.p[i]);
      v.push_back(static_cast<double>(include_pad ? end - start : std::min(end, in[d]) - std::max<int64_t>(start, 0)));
    }
    Value vv = convert(c.b, c.b.constant({DType::F64, {out[d]}}, v.data(), v.size() * 8), t);
    div = c.b.mul(div, c.b.broadcast_in_dim(vv, out, {static_cast<int64_t>(d)}));
  }
  return div;
}
// avg_pool3d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override?)
Values avg_pool3d(Ctx& c) {
  Value x = convert(c.b, c.v(0), compute_type(c.v(0).type.dtype));
  Pool p = pool_args(c, 1, 3);
  const Dims &in = x.type.dims, &out = c.out[0].dims;
  size_t r = in.size();
  hlo::Window w{Dims(r, 1), Dims(r, 1), {}, Dims(r, 1), hlo::Padding(r, {0, 0})};
  for (size_t i = 0; i < 3; ++i) {
    size_t d = r - 3 + i;
    w.dims[d] = p.k[i];
    w.strides[d] = p.s[i];
    w.padding[d] = {p.p[i], std::max<int64_t>(0, (out[d] - 1) * p.s[i] + p.k[i] - in[d] - p.p[i])};
  }
  Value s = c.b.reduce_window({x}, {zeros(c.b, hlo::scalar(x.type.dtype))}, w, add_body)[0];
  return {result(c, c.b.div(s, avg_divisor(c, p, in, out, c.flag(5), 6, x.type.dtype)))};
}
// avg_pool3d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override?)
Values avg_pool3d_backward(Ctx& c) {
  DType t = compute_type(c.v(0).type.dtype);
  const Dims& in = c.v(1).type.dims;
  Value go = convert(c.b, c.v(0), t);
  Pool p = pool_args(c, 2, 3);
  Value g = c.b.div(go, avg_divisor(c, p, in, go.type.dims, c.flag(6), 7, t));
  size_t r = in.size();
  hlo::Window w{Dims(r, 1), Dims(r, 1), Dims(r, 1), {}, hlo::Padding(r, {0, 0})};
  for (size_t i = 0; i < 3; ++i) {
    size_t d = r - 3 + i;
    int64_t lo = p.k[i] - 1 - p.p[i], hi = in[d] + p.k[i] - 1 - lo - (go.type.dims[d] - 1) * p.s[i] - 1;
    w.dims[d] = p.k[i];
    w.base_dilations[d] = p.s[i];
    w.padding[d] = {lo, std::max<int64_t>(hi, 0)};
  }
  Value s = c.b.reduce_window({g}, {zeros(c.b, hlo::scalar(t))}, w, add_body)[0];
  return {result(c, c.b.slice(s, Dims(r, 0), in))};
}

// (max, flat plane index) of x (rows, m) gathered windows: x2 (rows, plane), idx (rows, out, k) -> (rows, out) each.
Values window_max(Builder& b, Value x2, Value idx) {
  int64_t rows = idx.type.dims[0], o = idx.type.dims[1], k = idx.type.dims[2];
  Value flat = b.reshape(idx, {rows, o * k});
  Value v = b.reshape(gather_rows(b, x2, flat), {rows, o, k});
  DType t = x2.type.dtype;
  Values init{b.splat(hlo::scalar(t), lowest(t)), b.splat(hlo::scalar(DType::S64), 1e18)};
  return b.reduce({v, idx}, init, {2}, argmax_pair_body);
}
Value vec_s64(Builder& b, const std::vector<int64_t>& v) {
  return b.constant({DType::S64, {static_cast<int64_t>(v.size())}}, v.data(), v.size() * 8);
}

// adaptive_max_pool3d(self, output_size): each output's bin [floor(o in / out), ceil((o + 1) in / out))
// per dim, the flat plane indices of its elements (the last one repeated to the widest bin).
Values adaptive_max_pool3d(Ctx& c) {
  Value x = c.v(0);
  const Dims &in = x.type.dims, &out = c.out[0].dims;
  size_t r = in.size();
  std::vector<std::vector<int64_t>> idx{{0}};  // per output position, the window's flat indices
  for (size_t d = r - 3; d < r; ++d) {
    std::vector<std::vector<int64_t>> next;
    int64_t widest = 0;
    for (int64_t o = 0; o < out[d]; ++o)
      widest = std::max(widest, ((o + 1) * in[d] + out[d] - 1) / out[d] - o * in[d] / out[d]);
    for (const auto& w : idx)
      for (int64_t o = 0; o < out[d]; ++o) {
        int64_t s = o * in[d] / out[d], e = ((o + 1) * in[d] + out[d] - 1) / out[d];
        std::vector<int64_t> nw;
        for (int64_t f : w)
          for (int64_t j = 0; j < widest; ++j) nw.push_back(f * in[d] + std::min(s + j, e - 1));
        next.push_back(nw);
      }
    idx = next;
  }
  int64_t rows = prod(in, 0, r - 3), o = static_cast<int64_t>(idx.size()), k = static_cast<int64_t>(idx[0].size());
  std::vector<int64_t> all;
  for (const auto& w : idx) all.insert(all.end(), w.begin(), w.end());
  Value ix = c.b.broadcast_in_dim(c.b.reshape(vec_s64(c.b, all), {o, k}), {rows, o, k}, {1, 2});
  Values m = window_max(c.b, c.b.reshape(x, {rows, prod(in, r - 3, r)}), ix);
  return {c.b.reshape(m[0], out), c.b.reshape(m[1], c.out[1].dims)};
}
// adaptive_max_pool3d_backward(grad_output, self, indices)
Values adaptive_max_pool3d_backward(Ctx& c) {
  return {result(c, scatter_plane(c.b, c.v(0), c.v(2), c.v(1).type.dims, 3))};
}

// Upsampling with static per-axis (out, in) weight matrices, computed in PyTorch's float arithmetic.
// T: PyTorch's opmath type (double for float64, else float).
template <typename T>
T src_scale(Ctx& c, size_t at, int64_t in, int64_t out, bool align) {
  if (align) return out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  if (c.has(at) && c.f(at) > 0) return static_cast<T>(1.0 / c.f(at));
  return static_cast<T>(in) / static_cast<T>(out);
}
// Keys' cubic convolution kernel of parameter A at distance |x| (PyTorch's A = -0.75, PIL's -0.5).
template <typename T>
T cubic_kernel(T A, T x) {
  x = std::fabs(x);
  if (x < 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  return 0;
}
template <typename T>
std::vector<double> cubic_matrix(T sc, int64_t in, int64_t out, bool align) {
  std::vector<double> m(out * in, 0.0);
  const T A = -0.75;
  for (int64_t o = 0; o < out; ++o) {
    T src = align ? sc * static_cast<T>(o) : sc * (static_cast<T>(o) + T(0.5)) - T(0.5);
    int64_t i = static_cast<int64_t>(std::floor(src));
    T t = src - static_cast<T>(i);
    T w[4] = {cubic_kernel(A, t + 1), cubic_kernel(A, t), cubic_kernel(A, 1 - t), cubic_kernel(A, 2 - t)};
    for (int64_t j = 0; j < 4; ++j) m[o * in + std::min(std::max<int64_t>(i - 1 + j, 0), in - 1)] += w[j];
  }
  return m;
}
// Antialiased resampling: each output averages the inputs under a filter stretched by the scale when
// downsampling (the triangle for bilinear; for bicubic the cubic of a = -0.5, PIL's).
template <typename T>
T aa_filter(bool cubic, T x) {
  if (cubic) return cubic_kernel(T(-0.5), x);
  x = std::fabs(x);
  return x < 1 ? 1 - x : T(0);
}
template <typename T>
std::vector<double> aa_matrix(bool cubic, T sc, int64_t in, int64_t out) {
  std::vector<double> m(out * in, 0.0);
  T half_width = cubic ? 2 : 1;
  T support = sc >= 1 ? half_width * sc : half_width, inv = sc >= 1 ? 1 / sc : T(1);
  for (int64_t o = 0; o < out; ++o) {
    T center = sc * (static_cast<T>(o) + T(0.5));
    int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + T(0.5)), 0);
    int64_t size = std::min<int64_t>(static_cast<int64_t>(center + support + T(0.5)), in) - lo;
    std::vector<T> w;
    T total = 0;
    for (int64_t j = 0; j < size; ++j) {
      w.push_back(aa_filter(cubic, (static_cast<T>(j + lo) - center + T(0.5)) * inv));
      total += w.back();
    }
    for (int64_t j = 0; j < size; ++j) m[o * in + lo + j] = total != 0 ? w[j] / total : w[j];
  }
  return m;
}
// x's dim d contracted with the (out, in) matrix on `in` (forward) or on `out` (backward), kept in place.
Value apply_matrix(Builder& b, Value x, int64_t d, const std::vector<double>& m, int64_t out, int64_t in,
                   bool backward) {
  Value a = convert(b, b.constant({DType::F64, {out, in}}, m.data(), m.size() * 8), x.type.dtype);
  Value y = b.dot_general(x, a, {{}, {}, {d}, {backward ? 0 : 1}}, hlo::Precision::Highest, hlo::Precision::Highest);
  Dims perm;
  int64_t r = y.type.rank();
  for (int64_t i = 0; i < r - 1; ++i) perm.push_back(i);
  perm.insert(perm.begin() + d, r - 1);
  return b.transpose(y, perm);
}
template <typename T>
std::vector<double> weights(Ctx& c, bool cubic, bool aa, size_t at, int64_t in, int64_t out, bool align) {
  T sc = src_scale<T>(c, at, in, out, align);
  return aa ? aa_matrix<T>(cubic, sc, in, out) : cubic_matrix<T>(sc, in, out, align);
}
// upsample_bicubic2d(self, output_size, align_corners, scales_h?, scales_w?) and its backward
// (grad_output, output_size, input_size, align_corners, scales_h?, scales_w?); also the antialiased
// bilinear and bicubic ones (_upsample_*2d_aa).
Values resample(Ctx& c, bool cubic, bool aa, bool backward) {
  Value x = convert(c.b, c.v(0), resample_type(c.v(0).type.dtype));
  size_t a = backward ? 3 : 2;
  bool align = c.flag(a), f64 = x.type.dtype == DType::F64;
  int64_t r = x.type.rank();
  const Dims& in = backward ? c.out[0].dims : x.type.dims;
  const Dims& out = backward ? x.type.dims : c.out[0].dims;
  for (int64_t d = r - 1; d >= r - 2; --d) {  // width first, as CPU's separable kernels
    int64_t i = d - (r - 2);
    std::vector<double> m = f64 ? weights<double>(c, cubic, aa, a + 1 + i, in[d], out[d], align)
                                : weights<float>(c, cubic, aa, a + 1 + i, in[d], out[d], align);
    x = resample_round(c.b, apply_matrix(c.b, x, d, m, out[d], in[d], backward), c.out[0].dtype);
  }
  return {result(c, x)};
}
Values upsample_bicubic(Ctx& c) { return resample(c, true, false, false); }
Values upsample_bicubic_backward(Ctx& c) { return resample(c, true, false, true); }
Values upsample_aa(Ctx& c) { return resample(c, false, true, false); }
Values upsample_aa_backward(Ctx& c) { return resample(c, false, true, true); }
Values upsample_bicubic_aa(Ctx& c) { return resample(c, true, true, false); }
Values upsample_bicubic_aa_backward(Ctx& c) { return resample(c, true, true, true); }

// Fractional max pool window starts along one dim for samples u (rows, 1) of dtype t: (rows, out) s64,
// int((i + u) alpha) - int(u alpha) with alpha = (in - k) / (out - 1), the last in - k; computed in the
// input dtype like PyTorch.
Value window_starts(Builder& b, Value u, int64_t in, int64_t k, int64_t out) {
  TensorType st{u.type.dtype, {u.type.dims[0], out}}, it{DType::S64, st.dims};
  Value alpha = b.div(scalar_like(b, static_cast<double>(in - k), st),
                      scalar_like(b, static_cast<double>(std::max<int64_t>(out - 1, 1)), st));
  Value ub = b.broadcast_in_dim(u, st.dims, {0, 1}), i = b.iota(it, 1);
  Value a = b.convert(b.mul(b.add(b.convert(i, st.dtype), ub), alpha), DType::S64);
  Value start = b.sub(a, b.convert(b.mul(ub, alpha), DType::S64));
  Value last = b.compare(i, scalar_like(b, static_cast<double>(out - 1), it), Cmp::EQ);
  return b.select(last, scalar_like(b, static_cast<double>(in - k), it), start);
}
// fractional_max_pool2d(self, kernel_size, output_size, random_samples (N, C, n)) -> (out, indices); the
// dims take sample columns W, H (2d) or T, H, W (3d).
Values fractional_max_pool_n(Ctx& c, size_t n) {
  Value x = c.v(0);
  const Dims &in = x.type.dims, &out = c.out[0].dims;
  Dims k = per_dim(c.ints(1), n, 1);
  size_t r = in.size();
  int64_t rows = prod(in, 0, r - n), plane = prod(in, r - n, r);
  Value u = c.b.reshape(c.v(3), {rows, static_cast<int64_t>(n)});
  Dims full{rows};  // (rows, out..., k...): the flat plane index of every window element
  for (size_t i = 0; i < n; ++i) full.push_back(out[r - n + i]);
  for (size_t i = 0; i < n; ++i) full.push_back(k[i]);
  TensorType ft{DType::S64, full};
  Value flat = zeros(c.b, ft);
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) {
    int64_t d = static_cast<int64_t>(r - n) + i, col = n == 2 ? 1 - i : i;
    Value start = window_starts(c.b, c.b.slice(u, {0, col}, {rows, col + 1}), in[d], k[i], out[d]);
    Value pos = c.b.add(c.b.broadcast_in_dim(start, full, {0, 1 + i}), c.b.iota(ft, 1 + static_cast<int64_t>(n) + i));
    flat = c.b.add(c.b.mul(flat, scalar_like(c.b, static_cast<double>(in[d]), ft)), pos);
  }
  int64_t no = prod(full, 1, 1 + n), nk = prod(full, 1 + n, 1 + 2 * n);
  Values m = window_max(c.b, c.b.reshape(x, {rows, plane}), c.b.reshape(flat, {rows, no, nk}));
  return {c.b.reshape(m[0], out), c.b.reshape(m[1], c.out[1].dims)};
}
Values fractional_max_pool2d(Ctx& c) { return fractional_max_pool_n(c, 2); }
Values fractional_max_pool3d(Ctx& c) { return fractional_max_pool_n(c, 3); }
// fractional_max_pool2d_backward(grad_output, self, kernel_size, output_size, indices)
Values fractional_max_pool_backward_n(Ctx& c, size_t n) {
  return {result(c, scatter_plane(c.b, c.v(0), c.v(4), c.v(1).type.dims, n))};
}
Values fractional_max_pool2d_backward(Ctx& c) { return fractional_max_pool_backward_n(c, 2); }
Values fractional_max_pool3d_backward(Ctx& c) { return fractional_max_pool_backward_n(c, 3); }

// Grid sampling: per spatial dim, taps along a trailing axis (index, weight, d weight / d grid, in
// bounds), combined over dims into (N, P, T) flat taps. Modes: interpolation 0 bilinear, 1 nearest,
// 2 bicubic; padding 0 zeros, 1 border, 2 reflection.
struct GS {
  Builder& b;
  int64_t interp, padding;
  bool align;
  Value k(double v, Value like) { return scalar_like(b, v, like.type); }
  Value clip(Value s, int64_t size, Value* d) {
    if (d) *d = b.select(b.and_(b.compare(s, k(0, s), Cmp::GT), b.compare(s, k(size - 1, s), Cmp::LT)), *d, k(0, s));
    return b.min(k(size - 1, s), b.max(s, k(0, s)));
  }
  Value reflect(Value s, int64_t lo2, int64_t hi2, Value* d) {
    if (lo2 == hi2) {
      if (d) *d = k(0, s);
      return k(0, s);
    }
    double mn = lo2 / 2.0, span = (hi2 - lo2) / 2.0;
    Value in = b.sub(s, k(mn, s));
    if (d) *d = b.select(b.compare(in, k(0, s), Cmp::LT), b.unary(Op::Neg, *d), *d);
    in = b.unary(Op::Abs, in);
    Value extra = b.binary(Op::Remainder, in, k(span, s)), flips = b.unary(Op::Floor, b.div(in, k(span, s)));
    Value even = b.compare(b.binary(Op::Remainder, flips, k(2, s)), k(0, s), Cmp::EQ);
    if (d) *d = b.select(even, *d, b.unary(Op::Neg, *d));
    return b.select(even, b.add(extra, k(mn, s)), b.add(b.sub(k(span, s), extra), k(mn, s)));
  }
  Value pad(Value s, int64_t size, Value* d) {
    if (padding == 1) return clip(s, size, d);
    if (padding == 2) return clip(align ? reflect(s, 0, 2 * (size - 1), d) : reflect(s, -1, 2 * size - 1, d), size, d);
    return s;
  }
  bool scalar_form = false;  // 3d: PyTorch's scalar kernel's arithmetic, else its vectorized 2d kernel's
  Value unnorm(Value g, int64_t size) {
    Value g1 = b.add(g, k(1, g));
    if (scalar_form) {
      // the selects (no-ops: NaN stays NaN) keep LLVM from contracting a product and the next add into
      // an FMA, which PyTorch's scalar kernel rounds twice
      auto rounded = [&](Value p) { return b.select(b.compare(g, g, Cmp::EQ), p, g); };
      if (align) return rounded(b.mul(b.div(g1, k(2, g)), k(size - 1, g)));
      return b.div(b.sub(rounded(b.mul(g1, k(size, g))), k(1, g)), k(2, g));
    }
    Value s = b.mul(g1, k(align ? (size - 1) / 2.0 : size / 2.0, g));
    return align ? s : b.sub(s, k(0.5, g));
  }
  // Taps of one dim for grid coordinates g (N, P): {index, weight, dweight} (N, P, T) each, and in-bounds.
  Values taps(Value g, int64_t size) {
    Dims sh = g.type.dims;
    double m = align ? (size - 1) / 2.0 : size / 2.0;
    Values pos, w, dw;
    auto push = [&](Value p, Value wt, Value dwt) {
      for (auto [dst, v] : {std::pair{&pos, p}, {&w, wt}, {&dw, dwt}}) dst->push_back(b.reshape(v, {sh[0], sh[1], 1}));
    };
    if (interp == 2) {
      Value u = unnorm(g, size), x0 = b.unary(Op::Floor, u), t = b.sub(u, x0);
      const double A = -0.75;
      auto c1 = [&](Value x) { return b.add(b.mul(b.mul(b.sub(b.mul(k(A + 2, x), x), k(A + 3, x)), x), x), k(1, x)); };
      auto c2 = [&](Value x) {
        return b.sub(b.mul(b.add(b.mul(b.sub(b.mul(k(A, x), x), k(5 * A, x)), x), k(8 * A, x)), x), k(4 * A, x));
      };
      auto d1 = [&](Value x) { return b.mul(b.sub(b.mul(k(3 * (A + 2), x), x), k(2 * (A + 3), x)), x); };
      auto d2 = [&](Value x) { return b.add(b.mul(b.sub(b.mul(k(3 * A, x), x), k(10 * A, x)), x), k(8 * A, x)); };
      Value t1 = b.add(t, k(1, t)), s1 = b.sub(k(1, t), t), s2 = b.sub(k(2, t), t);
      Value ws[4] = {c2(t1), c1(t), c1(s1), c2(s2)};
      Value ds[4] = {d2(t1), d1(t), b.unary(Op::Neg, d1(s1)), b.unary(Op::Neg, d2(s2))};
      for (int j = 0; j < 4; ++j) push(pad(b.add(x0, k(j - 1, x0)), size, nullptr), ws[j], b.mul(ds[j], k(m, t)));
    } else {
      Value d = k(m, g), s = pad(unnorm(g, size), size, &d);
      if (interp == 1) {
        push(b.unary(Op::RoundNearestEven, s), k(1, s), k(0, s));
      } else {
        Value x0 = b.unary(Op::Floor, s), x1 = b.add(x0, k(1, s));
        push(x0, b.sub(x1, s), b.unary(Op::Neg, d));
        push(x1, b.sub(s, x0), d);
      }
    }
    Value p = b.concatenate(pos, 2);
    Value ok = b.and_(b.compare(p, k(0, p), Cmp::GE), b.compare(p, k(size - 1, p), Cmp::LE));
    return {b.convert(p, DType::S64), b.concatenate(w, 2), b.concatenate(dw, 2), ok};
  }
};
// The flat taps of every output point: {flat index (clamped to 0 off bounds), weight (0 off bounds),
// in-bounds, dweight per grid component} each (N, P, T).
Values grid_taps(GS& s, Value grid, const Dims& sp) {
  Builder& b = s.b;
  int64_t n = static_cast<int64_t>(sp.size()), nb = grid.type.dims[0], p = grid.type.numel() / (nb * n);
  Value g = b.reshape(grid, {nb, p, n});
  std::vector<Values> per;
  Dims full{nb, p};
  s.scalar_form = n == 3;
  for (int64_t i = 0; i < n; ++i) {  // spatial dim i reads grid component n - 1 - i
    Value gi = b.reshape(b.slice(g, {0, 0, n - 1 - i}, {nb, p, n - i}), {nb, p});
    per.push_back(s.taps(gi, sp[i]));
    full.push_back(per.back()[0].type.dims[2]);
  }
  auto bc = [&](Value v, int64_t i) { return b.broadcast_in_dim(v, full, {0, 1, 2 + i}); };
  Value flat = bc(per[0][0], 0), w = bc(per[0][1], 0), ok = bc(per[0][3], 0);
  for (int64_t i = 1; i < n; ++i) {
    flat = b.add(b.mul(flat, scalar_like(b, static_cast<double>(sp[i]), flat.type)), bc(per[i][0], i));
    w = b.mul(w, bc(per[i][1], i));
    ok = b.and_(ok, bc(per[i][3], i));
  }
  int64_t t = prod(full, 2, full.size());
  Values res{b.reshape(b.select(ok, flat, zeros(b, flat.type)), {nb, p, t}),
             b.reshape(b.select(ok, w, zeros(b, w.type)), {nb, p, t}),
             b.reshape(ok, {nb, p, t})};
  for (int64_t j = 0; j < n; ++j) {  // grid component j: spatial dim n - 1 - j
    int64_t i = n - 1 - j;
    Value dw = bc(per[i][2], i);
    for (int64_t q = 0; q < n; ++q)
      if (q != i) dw = b.mul(dw, bc(per[q][1], q));
    res.push_back(b.reshape(dw, {nb, p, t}));
  }
  return res;
}
// x (N, C, *S) as (N, S, C).
Value channels_last(Builder& b, Value x) {
  Dims perm{0};
  int64_t r = x.type.rank();
  for (int64_t i = 2; i < r; ++i) perm.push_back(i);
  perm.push_back(1);
  return b.reshape(b.transpose(x, perm), {x.type.dims[0], prod(x.type.dims, 2, r), x.type.dims[1]});
}
Value tap_indices(Builder& b, Value flat) {
  Dims d = flat.type.dims;
  d.push_back(1);
  return b.concatenate({b.iota({DType::S64, d}, 0), b.reshape(flat, d)}, 3);
}
// xl (N, S, C) read at the taps: (N, P, T, C).
Value gather_taps(Builder& b, Value xl, Value flat) {
  hlo::GatherDims g;
  g.offset_dims = {3};
  g.collapsed_slice_dims = {0, 1};
  g.start_index_map = {0, 1};
  g.index_vector_dim = 3;
  return b.gather(xl, tap_indices(b, flat), g, {1, 1, xl.type.dims[2]});
}
Value bcast_c(Builder& b, Value v, int64_t ch) {  // (N, P, T) -> (N, P, T, C)
  Dims d = v.type.dims;
  d.push_back(ch);
  return b.broadcast_in_dim(v, d, {0, 1, 2});
}
Dims spatial(const Dims& d) { return Dims(d.begin() + 2, d.end()); }

// grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners) (also 3d)
Values grid_sampler(Ctx& c) {
  DType t = compute_type(c.v(0).type.dtype);
  Value x = convert(c.b, c.v(0), t), grid = convert(c.b, c.v(1), t);
  GS s{c.b, c.i(2), c.i(3), c.flag(4)};
  Values tp = grid_taps(s, grid, spatial(x.type.dims));
  int64_t ch = x.type.dims[1];
  Value v = gather_taps(c.b, channels_last(c.b, x), tp[0]);
  v = c.b.select(bcast_c(c.b, tp[2], ch), c.b.mul(v, bcast_c(c.b, tp[1], ch)), zeros(c.b, v.type));
  Value y = reduce(c.b, v, {2}, Op::Add, 0);  // (N, P, C)
  Dims od = c.out[0].dims;
  return {result(c, c.b.reshape(c.b.transpose(y, {0, 2, 1}), od))};
}
// grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners,
// output_mask) -> the masked-in of (grad_input, grad_grid)
Values grid_sampler_backward(Ctx& c) {
  DType t = compute_type(c.v(1).type.dtype);
  Value go = convert(c.b, c.v(0), t), x = convert(c.b, c.v(1), t), grid = convert(c.b, c.v(2), t);
  GS s{c.b, c.i(3), c.i(4), c.flag(5)};
  const Dims& xd = x.type.dims;
  Values tp = grid_taps(s, grid, spatial(xd));
  int64_t nb = xd[0], ch = xd[1], p = tp[0].type.dims[1];
  Value g = c.b.transpose(c.b.reshape(go, {nb, ch, p}), {0, 2, 1});  // (N, P, C)
  Value gt = c.b.broadcast_in_dim(g, {nb, p, tp[0].type.dims[2], ch}, {0, 1, 3}), ok = bcast_c(c.b, tp[2], ch);
  const std::vector<int64_t>& mask = c.ints(6);
  Values out;
  if (mask[0]) {
    Value upd = c.b.select(ok, c.b.mul(gt, bcast_c(c.b, tp[1], ch)), zeros(c.b, gt.type));
    hlo::ScatterDims sd;
    sd.update_window_dims = {3};
    sd.inserted_window_dims = {0, 1};
    sd.scatter_dims_to_operand_dims = {0, 1};
    sd.index_vector_dim = 3;
    Value init = zeros(c.b, {t, {nb, prod(xd, 2, xd.size()), ch}});
    Value gi = c.b.scatter({init}, tap_indices(c.b, tp[0]), {upd}, sd, add_body)[0];
    Dims cl{nb}, perm{0, static_cast<int64_t>(xd.size()) - 1};
    for (size_t i = 2; i < xd.size(); ++i) {
      cl.push_back(xd[i]);
      perm.push_back(static_cast<int64_t>(i) - 1);
    }
    cl.push_back(ch);
    out.push_back(c.b.transpose(c.b.reshape(gi, cl), perm));
  }
  if (mask[1] || c.out.size() > out.size()) {  // the meta kernel may return grad_grid unasked (left zero)
    const Dims& gd = grid.type.dims;
    if (s.interp == 1 || !mask[1]) {
      out.push_back(zeros(c.b, {t, gd}));
    } else {
      // coordinates in t like PyTorch, the sums over channels and taps (which cancel) in float64
      Value v = convert(c.b, gather_taps(c.b, channels_last(c.b, x), tp[0]), DType::F64);
      Value vg = c.b.select(ok, c.b.mul(v, convert(c.b, gt, DType::F64)), zeros(c.b, v.type));
      vg = reduce(c.b, vg, {3}, Op::Add, 0);  // (N, P, T)
      Values comps;
      for (size_t j = 3; j < tp.size(); ++j)
        comps.push_back(
            c.b.reshape(reduce(c.b, c.b.mul(vg, convert(c.b, tp[j], DType::F64)), {2}, Op::Add, 0), {nb, p, 1}));
      out.push_back(c.b.reshape(c.b.concatenate(comps, 2), gd));
    }
  }
  if (out.size() != c.out.size()) c.fail("output_mask does not match the results");
  for (size_t k = 0; k < out.size(); ++k) out[k] = result(c, out[k], k);
  return out;
}

constexpr uint32_t bits(int from, int n) { return ((1u << n) - 1) << from; }
// Gathers and scatters cannot index empty tensors: with an empty input or result, the results are zeros.
template <RuleFn F>
Values nonempty(Ctx& c) {
  bool empty = false;
  for (const Value& v : c.inputs) empty |= v.type.numel() == 0;
  for (const TensorType& t : c.out) empty |= t.numel() == 0;
  if (!empty) return F(c);
  Values z;
  for (const TensorType& t : c.out) z.push_back(zeros(c.b, t));
  return z;
}

Register r({
    {"max_unpool2d|max_unpool2d.out", nonempty<max_unpool2d>},
    {"max_unpool3d|max_unpool3d.out", nonempty<max_unpool3d>},
    {"channel_shuffle|channel_shuffle.out|native_channel_shuffle", channel_shuffle},
    {"im2col|im2col.out", im2col},
    {"col2im|col2im.out", col2im},
    {"avg_pool3d|avg_pool3d.out", avg_pool3d},
    {"avg_pool3d_backward|avg_pool3d_backward.grad_input", avg_pool3d_backward},
    {"adaptive_max_pool3d|adaptive_max_pool3d.out", nonempty<adaptive_max_pool3d>},
    {"adaptive_max_pool3d_backward|adaptive_max_pool3d_backward.grad_input", nonempty<adaptive_max_pool3d_backward>},
    {"upsample_bicubic2d|upsample_bicubic2d.out", upsample_bicubic, bits(3, 2)},
    {"upsample_bicubic2d_backward|upsample_bicubic2d_backward.grad_input", upsample_bicubic_backward, bits(4, 2)},
    {"_upsample_bilinear2d_aa|_upsample_bilinear2d_aa.out", upsample_aa, bits(3, 2)},
    {"_upsample_bilinear2d_aa_backward|_upsample_bilinear2d_aa_backward.grad_input", upsample_aa_backward, bits(4, 2)},
    {"_upsample_bicubic2d_aa|_upsample_bicubic2d_aa.out", upsample_bicubic_aa, bits(3, 2)},
    {"_upsample_bicubic2d_aa_backward|_upsample_bicubic2d_aa_backward.grad_input", upsample_bicubic_aa_backward,
     bits(4, 2)},
    {"fractional_max_pool2d|fractional_max_pool2d.output", nonempty<fractional_max_pool2d>},
    {"fractional_max_pool3d|fractional_max_pool3d.output", nonempty<fractional_max_pool3d>},
    {"fractional_max_pool2d_backward|fractional_max_pool2d_backward.grad_input",
     nonempty<fractional_max_pool2d_backward>},
    {"fractional_max_pool3d_backward|fractional_max_pool3d_backward.grad_input",
     nonempty<fractional_max_pool3d_backward>},
    {"grid_sampler_2d|grid_sampler_2d.out|grid_sampler_3d|grid_sampler_3d.out", nonempty<grid_sampler>},
    {"grid_sampler_2d_backward|grid_sampler_2d_backward.out|grid_sampler_3d_backward|grid_sampler_3d_backward.out",
     nonempty<grid_sampler_backward>},
});

}  // namespace
}  // namespace tpu::lower

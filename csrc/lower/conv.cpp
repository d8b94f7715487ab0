// Convolutions (any number of spatial dims; strides, padding, dilation, groups, transposed) and their
// gradients, in PyTorch's layouts: input (N, C, spatial...), weight (C_out, C_in / groups, kernel...),
// or (C_in, C_out / groups, kernel...) when transposed.
#include <algorithm>

#include "lower/helpers.h"

namespace tpu::lower {
namespace {

struct Geometry {
  Dims stride, padding, dilation;
  int64_t groups = 1;
};

// An int list of one entry repeated to n spatial dims (C++ callers may pass the short form).
Dims per_dim(const std::vector<int64_t>& v, size_t n, int64_t fallback) {
  if (v.empty()) return Dims(n, fallback);
  if (v.size() == 1) return Dims(n, v[0]);
  return Dims(v.begin(), v.end());
}

Geometry geometry(Ctx& c, size_t first, int64_t spatial, size_t groups) {
  size_t n = static_cast<size_t>(spatial);
  return {per_dim(c.ints(first), n, 1), per_dim(c.ints(first + 1), n, 0), per_dim(c.ints(first + 2), n, 1),
          c.i(groups)};
}

Dims iota_from(int64_t start, int64_t n) {
  Dims d;
  for (int64_t i = 0; i < n; ++i) d.push_back(start + i);
  return d;
}

// NC(spatial) / OI(spatial) / NC(spatial), at torch's matmul precision; half types give float32.
hlo::ConvConfig config(Ctx& c, DType t, int64_t spatial) {
  hlo::ConvConfig cfg;
  cfg.dims.in_spatial = cfg.dims.k_spatial = cfg.dims.out_spatial = iota_from(2, spatial);
  if (t == DType::F32) cfg.lhs_precision = cfg.rhs_precision = c.precision;
  if (t == DType::F64) cfg.lhs_precision = cfg.rhs_precision = hlo::Precision::Highest;
  if (compute_type(t) != t) cfg.result_dtype = compute_type(t);
  return cfg;
}

// Keeps the first `sizes` elements of each spatial dim (outputs that came out longer).
Value crop(Builder& b, Value y, const Dims& sizes) {
  Dims limit = y.type.dims;
  for (size_t i = 0; i < sizes.size(); ++i) limit[i + 2] = sizes[i];
  return limit == y.type.dims ? y : b.slice(y, Dims(limit.size(), 0), limit);
}

// y = conv(x, w): x (N, Cx, ...), w (Cy, Cx / groups, k...); y cropped to `sizes` when given.
Value conv(Ctx& c, Value x, Value w, const Geometry& g, const Dims& sizes = {}) {
  int64_t n = x.type.rank() - 2;
  hlo::ConvConfig cfg = config(c, x.type.dtype, n);
  cfg.window_strides = g.stride;
  cfg.rhs_dilation = g.dilation;
  for (int64_t i = 0; i < n; ++i) cfg.padding.push_back({g.padding[i], g.padding[i]});
  cfg.feature_group_count = g.groups;
  Value y = c.b.convolution(x, w, cfg);
  return sizes.empty() ? y : crop(c.b, y, sizes);
}

// The transpose of conv with the same w: x (N, Cx, ...), w (Cx, Cy / groups, k...) -> y (N, Cy, sizes...).
// A stride-1 conv of x dilated by the stride, with the kernel flipped and its in/out features swapped.
Value conv_t(Ctx& c, Value x, Value w, const Geometry& g, const Dims& sizes) {
  int64_t n = x.type.rank() - 2, G = g.groups;
  const Dims& wd = w.type.dims;
  Dims k(wd.begin() + 2, wd.end());
  Dims split = {G, wd[0] / G, wd[1]}, perm = {0, 2, 1}, merged = {wd[1] * G, wd[0] / G};
  for (int64_t i = 0; i < n; ++i) {
    split.push_back(k[i]);
    perm.push_back(3 + i);
    merged.push_back(k[i]);
  }
  Value wt = c.b.reshape(c.b.transpose(c.b.reshape(w, split), perm), merged);
  wt = c.b.reverse(wt, iota_from(2, n));

  hlo::ConvConfig cfg = config(c, x.type.dtype, n);
  cfg.lhs_dilation = g.stride;
  cfg.rhs_dilation = g.dilation;
  cfg.feature_group_count = G;
  bool negative = false;
  for (int64_t i = 0; i < n; ++i) {
    int64_t reach = g.dilation[i] * (k[i] - 1);
    int64_t lo = reach - g.padding[i];
    int64_t hi = sizes[i] - ((x.type.dims[i + 2] - 1) * g.stride[i] + 1) - lo + reach;
    cfg.padding.push_back({lo, hi});
    negative |= lo < 0 || hi < 0;
  }
  if (negative) {  // cut into the dilated input explicitly: pad takes negative edges
    Dims lo(2, 0), hi(2, 0), interior(2, 0);
    for (int64_t i = 0; i < n; ++i) {
      lo.push_back(cfg.padding[i].first);
      hi.push_back(cfg.padding[i].second);
      interior.push_back(g.stride[i] - 1);
    }
    x = c.b.pad(x, c.b.splat(hlo::scalar(x.type.dtype), 0), lo, hi, interior);
    cfg.lhs_dilation.clear();
    cfg.padding.clear();
  }
  return c.b.convolution(x, wt, cfg);
}

// dL/dw of y = conv(x, w) given dy: x (N, Cx, ...), dy (N, Cy, ...) -> (Cy, Cx / groups, k...).
// A conv over the batch: x's channels act as its batch, N as the contracted features, dy as kernel.
Value conv_weight_grad(Ctx& c, Value x, Value dy, const Geometry& g, const Dims& k) {
  int64_t n = x.type.rank() - 2;
  hlo::ConvConfig cfg = config(c, x.type.dtype, n);
  cfg.dims.in_batch = 1;
  cfg.dims.in_feature = 0;
  cfg.dims.k_in = 0;
  cfg.dims.k_out = 1;
  cfg.dims.out_batch = 1;
  cfg.dims.out_feature = 0;
  cfg.window_strides = g.dilation;
  cfg.rhs_dilation = g.stride;
  for (int64_t i = 0; i < n; ++i) {
    int64_t need = (k[i] - 1) * g.dilation[i] + (dy.type.dims[i + 2] - 1) * g.stride[i] + 1 - x.type.dims[i + 2] -
                   g.padding[i];
    cfg.padding.push_back({g.padding[i], std::max<int64_t>(need, 0)});
  }
  cfg.batch_group_count = g.groups;
  return crop(c.b, c.b.convolution(x, dy, cfg), k);
}

Dims spatial(const Dims& d) { return Dims(d.begin() + 2, d.end()); }

// convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
Values convolution(Ctx& c) {
  DType t = c.out[0].dtype;
  for (size_t i : {1, 2})  // CPU's checks (the meta kernel skips them)
    if (c.has(i) && c.v(i).type.dtype != c.v(0).type.dtype)
      c.fail(std::string("Input type (") + std::string(info(c.v(0).type.dtype).name) + ") and " +
             (i == 1 ? "weight" : "bias") + " type (" + std::string(info(c.v(i).type.dtype).name) +
             ") should be the same");
  if (c.out[0].numel() == 0) return {zeros(c.b, c.out[0])};  // e.g. no input channels: PyTorch gives no output ones
  Value x = convert(c.b, c.v(0), t), w = convert(c.b, c.v(1), t);
  Geometry g = geometry(c, 3, x.type.rank() - 2, 8);
  Value y = c.flag(6) ? conv_t(c, x, w, g, spatial(c.out[0].dims)) : conv(c, x, w, g);
  if (c.has(2)) {
    Value bias = convert(c.b, c.v(2), y.type.dtype);
    y = c.b.add(y, c.b.broadcast_in_dim(bias, y.type.dims, {1}));
  }
  return {result(c, y)};
}

// convolution_backward(grad_output, input, weight, bias_sizes?, stride, padding, dilation, transposed,
// output_padding, groups, output_mask) -> the masked-in of (grad_input, grad_weight, grad_bias)
Values convolution_backward(Ctx& c) {
  DType t = c.v(1).type.dtype;
  Value dy = convert(c.b, c.v(0), t), x = c.v(1), w = convert(c.b, c.v(2), t);
  Geometry g = geometry(c, 4, x.type.rank() - 2, 9);
  bool transposed = c.flag(7);
  const std::vector<int64_t>& mask = c.ints(10);
  // an empty input, weight or gradient (no channels, no batch): every product is empty, the gradients zero
  bool empty = dy.type.numel() == 0 || x.type.numel() == 0 || w.type.numel() == 0;
  Values out;
  if (mask[0])
    out.push_back(empty        ? zeros(c.b, {t, x.type.dims})
                  : transposed ? conv(c, dy, w, g, spatial(x.type.dims))
                               : conv_t(c, dy, w, g, spatial(x.type.dims)));
  if (mask[1]) {
    Dims k = spatial(w.type.dims);
    out.push_back(empty        ? zeros(c.b, w.type)
                  : transposed ? conv_weight_grad(c, dy, x, g, k)
                               : conv_weight_grad(c, x, dy, g, k));
  }
  if (mask[2] && empty) {
    out.push_back(zeros(c.b, c.out[out.size()]));  // bias_sizes: PyTorch gives no output channels for no input ones
  } else if (mask[2]) {
    Dims dims = iota_from(0, dy.type.rank());
    dims.erase(dims.begin() + 1);
    out.push_back(reduce(c.b, convert(c.b, dy, compute_type(t)), dims, hlo::Op::Add, 0));
  }
  if (out.size() != c.out.size()) c.fail("output_mask does not match the results");
  for (size_t k = 0; k < out.size(); ++k) out[k] = result(c, out[k], k);
  return out;
}

Register r({
    {"convolution|convolution.out|convolution_overrideable|convolution_overrideable.out", convolution},
    {"convolution_backward|convolution_backward.out", convolution_backward},
});

}  // namespace
}  // namespace tpu::lower

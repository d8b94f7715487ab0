// Miscellaneous nn ops: embedding_bag, cdist / pdist, prelu, rrelu, renorm, embedding_renorm_,
// multi-margin losses, segment_reduce, ctc_loss. Bags, segments and pairs become masks over
// iotas (static shapes); ctc's alpha / beta recursions run as stablehlo.while loops over time.
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "lower/helpers.h"

namespace tpu::lower {
namespace {
using hlo::Cmp;
using hlo::Op;

Value iota(Builder& b, DType t, const Dims& dims, int64_t d) { return b.iota({t, dims}, d); }
Value s64(Builder& b, Value x) { return convert(b, x, DType::S64); }
Value as(Builder& b, Value x, DType t) { return convert(b, x, t); }
Value bcast(Builder& b, Value x, const Dims& dims, const Dims& map) { return b.broadcast_in_dim(x, dims, map); }
Value sum(Builder& b, Value x, const Dims& dims) { return reduce(b, x, dims, Op::Add, 0); }
Value where(Builder& b, Value p, Value x, double other) { return b.select(p, x, K(b, x, other)); }
Value b_div(Builder& b, Value x, int64_t n) { return b.div(x, K(b, x, static_cast<double>(n))); }
Value vec_s64(Builder& b, const std::vector<int64_t>& v, const Dims& dims) {
  return b.constant({DType::S64, dims}, v.data(), v.size() * 8);
}
Dims iota_dims(int64_t n, int64_t from = 0) {
  Dims d;
  for (int64_t i = 0; i < n; ++i) d.push_back(from + i);
  return d;
}

// x[idx] along dim 0: idx's dims followed by x's trailing dims.
Value take0(Builder& b, Value x, Value idx) {
  int64_t r = x.type.rank(), m = idx.type.rank();
  hlo::GatherDims g;
  g.collapsed_slice_dims = {0};
  g.start_index_map = {0};
  g.index_vector_dim = m;
  for (int64_t d = 1; d < r; ++d) g.offset_dims.push_back(d + m - 1);
  Dims sizes = x.type.dims, idims = idx.type.dims;
  sizes[0] = 1;
  idims.push_back(1);
  return b.gather(x, b.reshape(s64(b, idx), idims), g, sizes);
}

// The value as out[k]: converted; padded with zeros (or empty) where PyTorch's shape rule gives a longer
// (or empty) result there.
Value fit(Ctx& c, Value v, size_t k) {
  const Dims& want = c.out[k].dims;
  if (want == v.type.dims) return convert(c.b, v, c.out[k].dtype);
  if (c.out[k].numel() == 0 || want.size() != v.type.dims.size()) return zeros(c.b, c.out[k]);
  Dims hi(want.size());
  for (size_t d = 0; d < want.size(); ++d) hi[d] = std::max<int64_t>(want[d] - v.type.dims[d], 0);
  Value p = c.b.pad(v, K(c.b, c.b.reshape(c.b.slice(v, Dims(want.size(), 0), Dims(want.size(), 1)), {}), 0),
                    Dims(want.size(), 0), hi);
  return convert(c.b, c.b.slice(p, Dims(want.size(), 0), want), c.out[k].dtype);
}

// ---- embedding_bag ----

// `into` with updates [N, ...] combined (op) into its rows idx [N] (out-of-range rows dropped).
Value scatter0(Builder& b, Value into, Value idx, Value updates, Op op) {
  hlo::ScatterDims d;
  for (int64_t k = 1; k < into.type.rank(); ++k) d.update_window_dims.push_back(k);
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  Value ix = b.reshape(s64(b, idx), {idx.type.numel(), 1});
  return b.scatter({into}, ix, {updates}, d, [op](Builder& r, const Values& a) { return Values{r.binary(op, a[0], a[1])}; })[0];
}
// Inclusive prefix sum of a 1-D tensor (log2(n) shifted adds).
Value prefix_sum(Builder& b, Value x) {
  int64_t n = x.type.dims[0];
  for (int64_t k = 1; k < n; k *= 2)
    x = b.add(x, b.pad(b.slice(x, {0}, {n - k}), b.splat(hlo::scalar(x.type.dtype), 0), {k}, {0}));
  return x;
}

// Bags of an embedding_bag call: offset2bag [N], whether each index counts (in its bag's range, not
// padding) [N], and each bag's count [B].
struct Bags {
  Value bag, valid, count;
};
Bags bags(Builder& b, Value idx, Value offsets, int64_t nb, bool last_offset, int64_t padding_idx) {
  int64_t n = idx.type.dims[0];
  Value off = s64(b, offsets), one = b.splat({DType::S64, {nb}}, 1);
  Value starts = b.slice(off, {0}, {nb});
  Value ends = last_offset ? b.slice(off, {1}, {nb + 1})
                           : b.concatenate({b.slice(off, {1}, {nb}), b.splat({DType::S64, {1}}, static_cast<double>(n))}, 0);
  Bags r;
  Value marks = scatter0(b, b.splat({DType::S64, {n}}, 0), starts, one, Op::Add);
  r.bag = b.max(b.sub(prefix_sum(b, marks), b.splat({DType::S64, {n}}, 1)), b.splat({DType::S64, {n}}, 0));
  Value pos = iota(b, DType::S64, {n}, 0);
  r.valid = b.and_(b.compare(pos, take0(b, starts, r.bag), Cmp::GE), b.compare(pos, take0(b, ends, r.bag), Cmp::LT));
  if (padding_idx >= 0) r.valid = b.and_(r.valid, b.compare(idx, b.splat(idx.type, static_cast<double>(padding_idx)), Cmp::NE));
  r.count = scatter0(b, b.splat({DType::S64, {nb}}, 0), r.bag, as(b, r.valid, DType::S64), Op::Add);
  return r;
}

// _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights?,
// include_last_offset, padding_idx) -> (output, offset2bag, bag_size, max_indices)
Values embedding_bag(Ctx& c) {
  Builder& b = c.b;
  DType t = compute_type(c.out[0].dtype);
  Value idx = s64(b, c.v(1));
  int64_t mode = c.i(4), nb = c.out[0].dims[0], d = c.out[0].dims[1];
  int64_t rows_n = c.v(0).type.dims[0];
  check_bounds(b, idx, rows_n, "an index of input takes value {} which is not in the valid range [0, " +
                                   std::to_string(rows_n) + ")", false, /*negative=*/false);
  Bags g = bags(b, idx, c.v(2), nb, c.flag(7), c.i(8, -1));
  Value rows = take0(b, as(b, c.v(0), t), idx);  // [N, D]
  if (c.has(6)) rows = b.mul(rows, bcast(b, as(b, c.v(6), t), rows.type.dims, {0}));
  Value in = bcast(b, g.valid, rows.type.dims, {0});
  Value out, maxi = g.count;
  Value nonempty = bcast(b, b.compare(g.count, b.splat(g.count.type, 0), Cmp::GT), {nb, d}, {0});
  if (mode == 2) {
    out = scatter0(b, b.splat({t, {nb, d}}, -INFINITY), g.bag, where(b, in, rows, -INFINITY), Op::Maximum);
    Value hit = b.and_(in, b.compare(rows, take0(b, out, g.bag), Cmp::EQ));
    Value ids = bcast(b, idx, rows.type.dims, {0});
    maxi = scatter0(b, b.splat({DType::S64, {nb, d}}, 0x1p62), g.bag, where(b, hit, ids, 0x1p62), Op::Minimum);
    maxi = where(b, nonempty, maxi, 0);
    out = where(b, nonempty, out, 0);
  } else {
    out = scatter0(b, b.splat({t, {nb, d}}, 0), g.bag, where(b, in, rows, 0), Op::Add);
    if (mode == 1) out = b.div(out, bcast(b, as(b, b.max(g.count, b.splat(g.count.type, 1)), t), {nb, d}, {0}));
  }
  Value size = mode == 0 ? b.splat(g.count.type, 0) : g.count;
  if (mode == 0) maxi = size;
  return {result(c, out, 0), fit(c, g.bag, 1), fit(c, size, 2), fit(c, maxi, 3)};
}

// The weight gradient of embedding_bag: (grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
// scale_grad_by_freq, mode, per_sample_weights?, padding_idx) at argument positions `a`.
Value embedding_bag_grad(Ctx& c, const size_t (&a)[10]) {
  Builder& b = c.b;
  DType t = compute_type(c.out[0].dtype);
  Value grad = as(b, c.v(a[0]), t), idx = s64(b, c.v(a[1]));
  int64_t v = c.out[0].dims[0], d = c.out[0].dims[1], n = idx.type.dims[0], mode = c.i(a[7]), pad = c.i(a[9], -1);
  Value zero = b.splat({t, {v, d}}, 0);
  if (mode == 2) {  // each non-empty bag's gradient goes to its max row, per column
    int64_t nb = grad.type.dims[0];
    Dims bd = {nb, d};
    Value nonempty = b.compare(b.slice(s64(b, c.v(a[3])), {0}, {nb}), b.splat({DType::S64, {nb}}, 0), Cmp::GT);
    Value mi = b.select(bcast(b, nonempty, bd, {0}), s64(b, c.v(a[4])), b.splat({DType::S64, bd}, static_cast<double>(v)));
    hlo::ScatterDims sd;
    sd.inserted_window_dims = {0, 1};
    sd.scatter_dims_to_operand_dims = {0, 1};
    sd.index_vector_dim = 2;
    Value ix = b.concatenate({b.reshape(mi, {nb, d, 1}), b.reshape(iota(b, DType::S64, bd, 1), {nb, d, 1})}, 2);
    return b.scatter({zero}, ix, {grad}, sd, [](Builder& r, const Values& x) { return Values{r.add(x[0], x[1])}; })[0];
  }
  Value bag = s64(b, c.v(a[2]));
  Value scale = b.splat({t, {n}}, 1);
  if (mode == 1) scale = b.div(scale, as(b, b.max(take0(b, s64(b, c.v(a[3])), bag), b.splat({DType::S64, {n}}, 1)), t));
  if (mode == 0 && c.has(a[8])) scale = b.mul(scale, as(b, c.v(a[8]), t));
  if (c.flag(a[6])) {
    Value freq = scatter0(b, b.splat({t, {v}}, 0), idx, b.splat({t, {n}}, 1), Op::Add);
    scale = b.div(scale, take0(b, freq, idx));
  }
  if (pad >= 0) scale = where(b, b.compare(idx, b.splat(idx.type, static_cast<double>(pad)), Cmp::NE), scale, 0);
  Value g = b.mul(take0(b, grad, bag), bcast(b, scale, {n, d}, {0}));
  return scatter0(b, zero, idx, g, Op::Add);
}
// _embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
// scale_grad_by_freq, mode, per_sample_weights?, padding_idx)
Values embedding_bag_dense_backward(Ctx& c) { return {result(c, embedding_bag_grad(c, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}))}; }
// _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode, padding_idx):
// each index's weight row dotted with its bag's gradient.
Values embedding_bag_psw_backward(Ctx& c) {
  Builder& b = c.b;
  DType t = compute_type(c.out[0].dtype);
  Value idx = s64(b, c.v(2));
  Value g = take0(b, as(b, c.v(0), t), c.v(4)), w = take0(b, as(b, c.v(1), t), idx);
  Value out = sum(b, b.mul(g, w), {1});
  int64_t pad = c.i(6, -1);
  if (pad >= 0) out = where(b, b.compare(idx, b.splat(idx.type, pad), Cmp::NE), out, 0);
  return {result(c, out)};
}

// ---- cdist / pdist ----

// The p-norm of `diff` over dim `dim`, PyTorch's way: p = 0 counts nonzeros, p = inf takes the max (which
// drops NaN where CPU's does: cdist).
Value pnorm(Builder& b, Value diff, double p, int64_t dim, bool max_drops_nan = false) {
  Value a = b.unary(Op::Abs, diff);
  if (p == 0) return sum(b, as(b, b.compare(a, K(b, a, 0), Cmp::NE), a.type.dtype), {dim});
  if (p == 1) return sum(b, a, {dim});
  if (p == 2) return b.unary(Op::Sqrt, sum(b, b.mul(a, a), {dim}));
  if (std::isinf(p)) return reduce(b, max_drops_nan ? where(b, b.compare(a, a, Cmp::EQ), a, 0) : a, {dim}, Op::Maximum, 0);
  Value s = sum(b, b.binary(Op::Power, a, K(b, a, p)), {dim});
  return b.binary(Op::Power, s, K(b, s, 1 / p));
}
// d dist / d diff, for `dist` = pnorm(diff) broadcast to diff's shape (0 where dist is 0).
Value pnorm_grad(Builder& b, Value diff, Value dist, double p) {
  if (p == 0) return K(b, diff, 0);
  Value a = b.unary(Op::Abs, diff), sg = b.unary(Op::Sign, diff), g;
  if (p == 1) g = sg;
  else if (p == 2) g = b.div(diff, dist);
  else if (std::isinf(p)) g = b.mul(sg, as(b, b.compare(a, dist, Cmp::EQ), diff.type.dtype));
  else if (p < 2) {
    g = b.div(b.mul(sg, b.binary(Op::Power, a, K(b, a, p - 1))), b.binary(Op::Power, dist, K(b, dist, p - 1)));
    if (p < 1) g = where(b, b.compare(diff, K(b, diff, 0), Cmp::NE), g, 0);
  } else {
    g = b.div(b.mul(diff, b.binary(Op::Power, a, K(b, a, p - 2))), b.binary(Op::Power, dist, K(b, dist, p - 1)));
  }
  return where(b, b.compare(dist, K(b, dist, 0), Cmp::NE), g, 0);
}

// x1 [*, P, M] and x2 [*, R, M] broadcast to [batch..., P, R, M] and subtracted.
Value pair_diff(Builder& b, Value x1, Value x2, const Dims& batch, DType t) {
  int64_t k = batch.size(), p = x1.type.dims[x1.type.rank() - 2], r = x2.type.dims[x2.type.rank() - 2],
          m = x1.type.dims.back();
  Dims d1 = batch, d2 = batch, full = batch;
  d1.insert(d1.end(), {p, m});
  d2.insert(d2.end(), {r, m});
  full.insert(full.end(), {p, r, m});
  Dims m1 = iota_dims(k), m2 = iota_dims(k);
  m1.insert(m1.end(), {k, k + 2});
  m2.insert(m2.end(), {k + 1, k + 2});
  Value a = bcast(b, broadcast_to(b, as(b, x1, t), d1), full, m1);
  Value c = bcast(b, broadcast_to(b, as(b, x2, t), d2), full, m2);
  return b.sub(a, c);
}
Dims batch_of(const Dims& out) { return Dims(out.begin(), out.end() - 2); }

// _cdist_forward(x1, x2, p, compute_mode)
Values cdist_forward(Ctx& c) {
  DType t = compute_type(c.out[0].dtype);
  Value diff = pair_diff(c.b, c.v(0), c.v(1), batch_of(c.out[0].dims), t);
  return {result(c, pnorm(c.b, diff, c.f(2), diff.type.rank() - 1, true))};
}
// Sums x down to `dims` (right-aligned, like autograd's sum_to_size).
Value sum_to(Builder& b, Value x, const Dims& dims) {
  int64_t lead = x.type.rank() - static_cast<int64_t>(dims.size());
  Dims red = iota_dims(lead);
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] == 1 && x.type.dims[lead + d] != 1) red.push_back(lead + d);
  return red.empty() ? x : b.reshape(sum(b, x, red), dims);
}
// _cdist_backward(grad, x1, x2, p, cdist): the gradient for x1.
Values cdist_backward(Ctx& c) {
  Builder& b = c.b;
  DType t = compute_type(c.out[0].dtype);
  Value grad = as(b, c.v(0), t), dist = as(b, c.v(4), t);
  Value diff = pair_diff(b, c.v(1), c.v(2), batch_of(grad.type.dims), t);
  int64_t r = diff.type.rank();
  Dims keep = iota_dims(r - 1);
  Value g = pnorm_grad(b, diff, bcast(b, dist, diff.type.dims, keep), c.f(3));
  Value gx = sum(b, b.mul(g, bcast(b, grad, diff.type.dims, keep)), {r - 2});
  return {result(c, sum_to(b, gx, c.out[0].dims))};
}

// The condensed index of pair (i, j), i < j, of n rows; diagonal (i = j) entries map to 0.
std::vector<int64_t> pair_index(int64_t n) {
  std::vector<int64_t> k(n * n, 0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) k[i * n + j] = k[j * n + i] = n * i - i * (i + 1) / 2 + j - i - 1;
  return k;
}
// _pdist_forward(self, p)
Values pdist_forward(Ctx& c) {
  Builder& b = c.b;
  int64_t n = c.v(0).type.dims[0];
  if (c.out[0].numel() == 0) return {zeros(b, c.out[0])};
  Value diff = pair_diff(b, c.v(0), c.v(0), {}, compute_type(c.out[0].dtype));
  Value dist = b.reshape(pnorm(b, diff, c.f(1), 2), {n * n});
  std::vector<int64_t> flat;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) flat.push_back(i * n + j);
  return {result(c, take0(b, dist, vec_s64(b, flat, {static_cast<int64_t>(flat.size())})))};
}
// _pdist_backward(grad, self, p, pdist)
Values pdist_backward(Ctx& c) {
  Builder& b = c.b;
  int64_t n = c.v(1).type.dims[0];
  DType t = compute_type(c.out[0].dtype);
  if (c.v(0).type.numel() == 0) return {zeros(b, c.out[0])};
  Value k = vec_s64(b, pair_index(n), {n, n});
  Value off_diag = b.compare(iota(b, DType::S64, {n, n}, 0), iota(b, DType::S64, {n, n}, 1), Cmp::NE);
  Value g = where(b, off_diag, take0(b, as(b, c.v(0), t), k), 0), dist = take0(b, as(b, c.v(3), t), k);
  Value diff = pair_diff(b, c.v(1), c.v(1), {}, t);
  Value pg = pnorm_grad(b, diff, bcast(b, dist, diff.type.dims, {0, 1}), c.f(2));
  return {result(c, sum(b, b.mul(pg, bcast(b, g, diff.type.dims, {0, 1})), {1}))};
}

// ---- prelu, renorm, embedding_renorm ----

// _prelu_kernel(self, weight): x > 0 ? x : w x (weight already shaped to broadcast)
Values prelu(Ctx& c) {
  Value x = operand(c, 0), w = operand(c, 1);
  return {result(c, c.b.select(c.b.compare(x, K(c.b, x, 0), Cmp::GT), x, c.b.mul(w, x)))};
}
// _prelu_kernel_backward(grad_output, self, weight) -> (grad_self, grad_weight)
Values prelu_backward(Ctx& c) {
  Builder& b = c.b;
  DType t = compute_type(c.out[0].dtype);
  Value x = c.v(1), w = c.v(2);
  Dims full = x.type.rank() >= w.type.rank() ? x.type.dims : w.type.dims;  // the broadcast shape
  const Dims& other = x.type.rank() >= w.type.rank() ? w.type.dims : x.type.dims;
  for (size_t d = 0; d < other.size(); ++d) {
    int64_t& f = full[full.size() - other.size() + d];
    if (f == 1) f = other[d];
  }
  Value g = broadcast_to(b, as(b, c.v(0), t), full), xf = broadcast_to(b, as(b, x, t), full);
  Value wf = broadcast_to(b, as(b, w, t), full);
  Value pos = b.compare(xf, K(b, xf, 0), Cmp::GT);
  Value gx = b.select(pos, g, b.mul(wf, g)), gw = b.select(pos, K(b, g, 0), b.mul(xf, g));
  return {result(c, sum_to(b, gx, c.out[0].dims), 0), result(c, sum_to(b, gw, c.out[1].dims), 1)};
}

// Rows (slices along `dim`) of x whose p-norm exceeds maxnorm scaled to maxnorm / (norm + 1e-7).
Value renorm_of(Builder& b, Value x, double p, int64_t dim, Value maxnorm, Value selected = {}) {
  Dims others;
  for (int64_t d = 0; d < x.type.rank(); ++d)
    if (d != dim) others.push_back(d);
  Value flat = b.transpose(x, [&] { Dims perm = {dim}; perm.insert(perm.end(), others.begin(), others.end()); return perm; }());
  int64_t n = x.type.dims.empty() ? 1 : x.type.dims[dim];
  flat = b.reshape(flat, {n, x.type.numel() / std::max<int64_t>(n, 1)});
  Value norm = pnorm(b, flat, p, 1);
  Value mx = broadcast_to(b, convert(b, maxnorm, norm.type.dtype), norm.type.dims);  // real, also for complex x
  Value over = b.compare(norm, mx, Cmp::GT);
  if (selected.type.rank() > 0) over = b.and_(over, selected);
  Value scale = b.select(over, b.div(mx, b.add(norm, K(b, norm, 1e-7))), K(b, norm, 1));
  return b.mul(x, bcast(b, convert(b, scale, x.type.dtype), x.type.dims, {dim}));
}
// renorm(self, p, dim, maxnorm)
Values renorm(Ctx& c) {
  DType t = compute_type(c.out[0].dtype);
  Value x = as(c.b, c.v(0), t);
  if (x.type.rank() == 0) x = c.b.reshape(x, {1});
  Value y = renorm_of(c.b, x, c.f(1), wrap_dim(c.i(2), x.type.rank()), c.v(3));
  return {result(c, c.b.reshape(y, c.out[0].dims))};
}
// embedding_renorm_(self, indices, max_norm, norm_type): the rows named by indices renormed; returns the weight.
Values embedding_renorm(Ctx& c) {
  Builder& b = c.b;
  DType t = compute_type(c.out[0].dtype);
  Value w = as(b, c.v(0), t), idx = b.reshape(s64(b, c.v(1)), {c.v(1).type.numel()});
  int64_t v = w.type.dims[0], n = idx.type.dims[0];
  Value hits = scatter0(b, b.splat({DType::S64, {v}}, 0), idx, b.splat({DType::S64, {n}}, 1), Op::Add);
  Value selected = b.compare(hits, b.splat(hits.type, 0), Cmp::GT);
  return {result(c, renorm_of(b, w, c.f(3), 0, as(b, c.v(2), t), selected))};
}

// ---- margin losses ----

// A per-sample loss [N] reduced as `reduction` asks (0 none, 1 mean, 2 sum), shaped like out[0].
Value reduced(Ctx& c, Value per_sample, int64_t reduction) {
  Builder& b = c.b;
  Value r = per_sample;
  if (reduction != 0) r = sum(b, per_sample, {0});
  if (reduction == 1) r = b.div(r, K(b, r, static_cast<double>(per_sample.type.dims[0])));
  return b.reshape(r, c.out[0].dims);
}
// The per-sample upstream gradient [N] of a loss reduced by `reduction`.
Value upstream(Builder& b, Value g, int64_t n, int64_t reduction, DType t) {
  g = as(b, g, t);
  if (reduction == 0) return b.reshape(g, {n});
  g = b.reshape(g, {});
  if (reduction == 1) g = b.div(g, K(b, g, static_cast<double>(n)));
  return bcast(b, g, {n}, {});
}
// x as [N, C] (a 1-D input is one sample), target as s64 [N] (or [N, C] when `per_class`).
Value rows2(Builder& b, Value x, DType t) {
  x = as(b, x, t);
  return x.type.rank() == 2 ? x : b.reshape(x, {1, x.type.numel()});
}

// multi_margin_loss terms: h[n, j] = w[y] max(0, margin - x[y] + x[j])^p / C (0 at j = y), and dh/dx[j].
struct Margin {
  Value h, dh;
};
Margin multi_margin(Ctx& c, size_t self, size_t target, size_t p_at, size_t margin_at, size_t weight_at, DType t) {
  Builder& b = c.b;
  Value x = rows2(b, c.v(self), t);
  int64_t n = x.type.dims[0], k = x.type.dims[1];
  Value y = b.reshape(s64(b, c.v(target)), {n});
  Value is_y = b.compare(bcast(b, y, {n, k}, {0}), iota(b, DType::S64, {n, k}, 1), Cmp::EQ);
  Value xy = sum(b, where(b, is_y, x, 0), {1});
  Value z = b.add(b.sub(broadcast_to(b, as(b, c.v(margin_at), t), {n, k}), bcast(b, xy, {n, k}, {0})), x);
  Value on = b.and_(b.compare(z, K(b, z, 0), Cmp::GT), b.unary(Op::Not, is_y));
  double p = c.f(p_at);
  Value scale = K(b, z, 1.0 / k);
  if (c.has(weight_at)) scale = b.mul(scale, bcast(b, take0(b, as(b, c.v(weight_at), t), y), {n, k}, {0}));
  Margin m;
  m.h = where(b, on, b.mul(p == 1 ? z : b.mul(z, z), scale), 0);
  m.dh = where(b, on, b.mul(p == 1 ? K(b, z, 1) : b.mul(K(b, z, 2), z), scale), 0);
  Value dy = sum(b, m.dh, {1});  // x[y] enters every term with the opposite sign
  m.dh = b.select(is_y, bcast(b, b.unary(Op::Neg, dy), {n, k}, {0}), m.dh);
  return m;
}
// multi_margin_loss(self, target, p, margin, weight?, reduction)
Values multi_margin_loss(Ctx& c) {
  if (c.f(2) != 1 && c.f(2) != 2) c.fail("only p == 1 and p == 2 supported");
  Margin m = multi_margin(c, 0, 1, 2, 3, 4, compute_type(c.out[0].dtype));
  return {result(c, reduced(c, sum(c.b, m.h, {1}), c.i(5)))};
}
// multi_margin_loss_backward(grad_output, self, target, p, margin, weight?, reduction)
Values multi_margin_loss_backward(Ctx& c) {
  DType t = compute_type(c.out[0].dtype);
  Margin m = multi_margin(c, 1, 2, 3, 4, 5, t);
  Dims nk = m.dh.type.dims;
  Value g = upstream(c.b, c.v(0), nk[0], c.i(6), t);
  return {result(c, c.b.reshape(c.b.mul(m.dh, bcast(c.b, g, nk, {0})), c.out[0].dims))};
}

// multilabel_margin_loss: targets of a row are its labels before the first -1. For each target k and
// non-target j, max(0, 1 - (x[y_k] - x[j])) / C. Returns terms [N, K, C], their indicator, is_target [N, C],
// the target one-hot [N, K, C] and the valid-target mask [N, K].
struct Multilabel {
  Value z, on, is_target, onehot, valid;
};
Multilabel multilabel(Ctx& c, size_t self, size_t target, DType t) {
  Builder& b = c.b;
  Value x = rows2(b, c.v(self), t), y = c.v(target);
  int64_t n = x.type.dims[0], k = x.type.dims[1];
  y = b.reshape(s64(b, y), {n, k});
  Dims nkk = {n, k, k};
  Value neg = b.compare(y, b.splat(y.type, -1), Cmp::EQ);
  Value upto = b.compare(iota(b, DType::S64, nkk, 2), iota(b, DType::S64, nkk, 1), Cmp::LE);  // [n, k, k'<=k]
  Multilabel m;
  m.valid = b.unary(Op::Not, reduce(b, b.and_(upto, bcast(b, neg, nkk, {0, 2})), {2}, Op::Or, 0));
  m.onehot = b.and_(b.compare(bcast(b, y, nkk, {0, 1}), iota(b, DType::S64, nkk, 2), Cmp::EQ), bcast(b, m.valid, nkk, {0, 1}));
  m.is_target = reduce(b, m.onehot, {1}, Op::Or, 0);
  Value xy = sum(b, where(b, m.onehot, bcast(b, x, nkk, {0, 2}), 0), {2});  // [n, k]
  m.z = b.add(b.sub(K(b, bcast(b, x, nkk, {0, 2}), 1), bcast(b, xy, nkk, {0, 1})), bcast(b, x, nkk, {0, 2}));
  m.on = b.and_(b.and_(b.compare(m.z, K(b, m.z, 0), Cmp::GT), bcast(b, m.valid, nkk, {0, 1})),
                bcast(b, b.unary(Op::Not, m.is_target), nkk, {0, 2}));
  return m;
}
// multilabel_margin_loss_forward(self, target, reduction) -> (output, is_target)
Values multilabel_margin_loss(Ctx& c) {
  DType t = compute_type(c.out[0].dtype);
  Multilabel m = multilabel(c, 0, 1, t);
  int64_t k = m.z.type.dims[2];
  Value per = b_div(c.b, sum(c.b, where(c.b, m.on, m.z, 0), {1, 2}), k);
  return {result(c, reduced(c, per, c.i(2)), 0), result(c, c.b.reshape(as(c.b, m.is_target, t), c.out[1].dims), 1)};
}
// multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target)
Values multilabel_margin_loss_backward(Ctx& c) {
  Builder& b = c.b;
  DType t = compute_type(c.out[0].dtype);
  Multilabel m = multilabel(c, 1, 2, t);
  int64_t n = m.z.type.dims[0], k = m.z.type.dims[2];
  Value on = as(b, m.on, t);                                      // [n, k, j]
  Value per_k = sum(b, on, {2});                                  // each target's active count
  Value gy = sum(b, b.mul(as(b, m.onehot, t), bcast(b, per_k, m.z.type.dims, {0, 1})), {1});
  Value gx = b_div(b, b.sub(sum(b, on, {1}), gy), k);
  Value g = upstream(b, c.v(0), n, c.i(3), t);
  return {result(c, b.reshape(b.mul(gx, bcast(b, g, {n, k}, {0})), c.out[0].dims))};
}

// ---- segment_reduce ----

// Segments of data's `axis` (A long): lengths [pre..., S] or offsets [pre..., S + 1]. Gives each
// segment's [start, end) as s64 [pre..., S] and the membership mask [pre..., S, A].
struct Segments {
  Value start, end, member;
};
Segments segments(Ctx& c, size_t lengths_at, size_t offsets_at, int64_t a) {
  Builder& b = c.b;
  Segments g;
  if (c.has(offsets_at)) {
    Value off = s64(b, c.v(offsets_at));
    Dims lo(off.type.rank(), 0), hi = off.type.dims;
    hi.back() -= 1;
    g.start = b.slice(off, lo, hi);
    lo.back() = 1, hi.back() += 1;
    g.end = b.slice(off, lo, hi);
  } else {
    Value len = s64(b, c.v(lengths_at));
    int64_t r = len.type.rank(), n = len.type.dims.back();
    Dims ss = len.type.dims;
    ss.push_back(n);
    Value upto = b.compare(iota(b, DType::S64, ss, r), iota(b, DType::S64, ss, r - 1), Cmp::LE);
    g.end = sum(b, where(b, upto, bcast(b, len, ss, [&] { Dims d = iota_dims(r - 1); d.push_back(r); return d; }()), 0), {r});
    g.start = b.sub(g.end, len);
  }
  int64_t r = g.start.type.rank();
  Dims sa = g.start.type.dims;
  sa.push_back(a);
  Value pos = iota(b, DType::S64, sa, r);
  g.member = b.and_(b.compare(pos, bcast(b, g.start, sa, iota_dims(r)), Cmp::GE),
                    b.compare(pos, bcast(b, g.end, sa, iota_dims(r)), Cmp::LT));
  return g;
}
// Dims of [pre..., S, A, post...] (data [pre..., A, post...], axis k) and the maps into it.
struct SegDims {
  Dims full, data_map, seg_map, out_map;  // data / mask [pre..., S, A] / out [pre..., S, post...]
};
SegDims seg_dims(const Dims& data, int64_t k, int64_t segs) {
  SegDims d;
  int64_t r = data.size();
  d.full = Dims(data.begin(), data.begin() + k);
  d.full.push_back(segs);
  d.full.insert(d.full.end(), data.begin() + k, data.end());
  for (int64_t i = 0; i < r; ++i) d.data_map.push_back(i < k ? i : i + 1);
  d.seg_map = iota_dims(k + 2);
  for (int64_t i = 0; i < r; ++i) d.out_map.push_back(i <= k ? i : i + 1);
  return d;
}
// The reduction named by argument i: PyTorch takes "amax" / "amin" for "max" / "min".
std::string reduction(Ctx& c, size_t i) {
  const std::string& red = c.s(i);
  return red == "amax" ? "max" : red == "amin" ? "min" : red;
}
// segment_reduce(data, reduce, lengths?, indices?, offsets?, axis, unsafe, initial?)
Values segment_reduce(Ctx& c) {
  Builder& b = c.b;
  DType t = compute_type(c.out[0].dtype);
  Value x = as(b, c.v(0), t);
  int64_t k = wrap_dim(c.i(5), x.type.rank());
  Segments g = segments(c, 2, 4, x.type.dims[k]);
  SegDims d = seg_dims(x.type.dims, k, g.start.type.dims.back());
  Value in = bcast(b, g.member, d.full, d.seg_map), xf = bcast(b, x, d.full, d.data_map);
  std::string red = reduction(c, 1);
  bool init = c.has(7);
  Value iv = init ? broadcast_to(b, as(b, c.v(7), t), c.out[0].dims) : Value{};
  Value len = bcast(b, as(b, b.sub(g.end, g.start), t), c.out[0].dims, iota_dims(k + 1));
  Value r;
  if (red == "max" || red == "min") {
    bool mx = red == "max";
    r = reduce(b, where(b, in, xf, mx ? -INFINITY : INFINITY), {k + 1}, mx ? Op::Maximum : Op::Minimum,
               mx ? -INFINITY : INFINITY);
    if (init) r = mx ? b.max(r, iv) : b.min(r, iv);
  } else if (red == "prod") {
    r = reduce(b, where(b, in, xf, 1), {k + 1}, Op::Multiply, 1);
    if (init) r = b.mul(r, iv);
  } else if (red == "sum" || red == "mean") {
    r = sum(b, where(b, in, xf, 0), {k + 1});
    if (init) r = b.add(r, iv);
    if (red == "mean") {
      Value empty = b.compare(len, K(b, len, 0), Cmp::EQ);
      r = b.select(empty, init ? iv : K(b, r, NAN), b.div(r, len));
    }
  } else {
    c.fail("unknown reduction " + red);
  }
  return {result(c, r)};
}
// _segment_reduce_backward(grad, output, data, reduce, lengths?, offsets?, axis, initial?)
Values segment_reduce_backward(Ctx& c) {
  Builder& b = c.b;
  DType t = compute_type(c.out[0].dtype);
  Value x = as(b, c.v(2), t);
  int64_t k = wrap_dim(c.i(6), x.type.rank());
  Segments g = segments(c, 4, 5, x.type.dims[k]);
  SegDims d = seg_dims(x.type.dims, k, g.start.type.dims.back());
  Value in = bcast(b, g.member, d.full, d.seg_map), xf = bcast(b, x, d.full, d.data_map);
  Value gr = bcast(b, as(b, c.v(0), t), d.full, d.out_map), out = bcast(b, as(b, c.v(1), t), d.full, d.out_map);
  std::string red = reduction(c, 3);
  Value gf;  // each member's share of its segment's gradient, [pre..., S, A, post...]
  if (red == "sum") {
    gf = gr;
  } else if (red == "mean") {
    Value len = as(b, b.sub(g.end, g.start), t);
    gf = b.div(gr, bcast(b, b.max(len, K(b, len, 1)), d.full, iota_dims(k + 1)));
  } else if (red == "max" || red == "min") {  // split among ties (and NaNs)
    in = b.and_(in, b.or_(b.compare(xf, out, Cmp::EQ), is_nan(b, xf)));
    Value n = sum(b, as(b, in, t), {k + 1});
    gf = b.div(gr, bcast(b, b.max(n, K(b, n, 1)), d.full, d.out_map));
  } else if (red == "prod") {  // the product of the other members (and the initial value)
    int64_t r = d.full.size();
    Dims big = d.full;
    big.insert(big.begin() + k + 2, x.type.dims[k]);  // [pre..., S, A, A', post...]
    Dims m2 = iota_dims(k + 1);  // the full dims with A as A'
    m2.push_back(k + 2);
    for (int64_t i = k + 2; i < r; ++i) m2.push_back(i + 1);
    Value others = b.and_(bcast(b, in, big, m2),
                          b.compare(iota(b, DType::S64, big, k + 1), iota(b, DType::S64, big, k + 2), Cmp::NE));
    gf = reduce(b, where(b, others, bcast(b, xf, big, m2), 1), {k + 2}, Op::Multiply, 1);
    if (c.has(7)) gf = b.mul(gf, broadcast_to(b, as(b, c.v(7), t), d.full));
    gf = b.mul(gf, gr);
  } else {
    c.fail("unknown reduction " + red);
  }
  return {result(c, sum(b, where(b, in, gf, 0), {k}))};
}

// ---- ctc_loss ----

const TensorType kI32{DType::S32, {}};
// log(sum(exp(x))) over `dims`; -inf where everything is -inf.
Value logsumexp(Builder& b, Value x, const Dims& dims) {
  Value m = reduce(b, x, dims, Op::Maximum, -INFINITY);
  Value finite = b.compare(m, K(b, m, -INFINITY), Cmp::NE);
  Value ms = where(b, finite, m, 0);
  Dims keep;
  for (int64_t d = 0; d < x.type.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) keep.push_back(d);
  Value s = sum(b, b.unary(Op::Exp, b.sub(x, bcast(b, ms, x.type.dims, keep))), dims);
  return where(b, finite, b.add(ms, b.unary(Op::Log, s)), -INFINITY);
}
// log(exp(a) + exp(b) + exp(c)), elementwise.
Value lse3(Builder& b, Value x, Value y, Value z) {
  Dims d = x.type.dims;
  d.push_back(1);
  Value st = b.concatenate({b.reshape(x, d), b.reshape(y, d), b.reshape(z, d)}, x.type.rank());
  return logsumexp(b, st, {x.type.rank()});
}
// x shifted along its last dim by `k` (positive: toward higher indices), filled with -inf.
Value shift(Builder& b, Value x, int64_t k) {
  int64_t r = x.type.rank(), n = x.type.dims.back();
  if (std::abs(k) >= n) return b.splat(x.type, -INFINITY);
  Dims lo(r, 0), hi(r, 0), start(r, 0), limit = x.type.dims;
  if (k > 0) lo.back() = k, limit.back() = n - k;
  else hi.back() = -k, start.back() = -k;
  return b.pad(b.slice(x, start, limit), b.splat(hlo::scalar(x.type.dtype), -INFINITY), lo, hi);
}

// The extended label sequences of a ctc call (blank, l1, blank, l2, ..., blank) and their log-probs.
struct Ctc {
  int64_t t, n, s;                           // time steps, batch, extended length
  Value tn;                                  // [N] s32 input lengths
  Value lpe;                                 // [T, N, S']: log_probs at each extended label
  Value valid, skip, last;                   // [N, S'] pred: s < 2 L + 1; s - 2 -> s allowed; s is a final state
  Value ext;                                 // [N, S'] s64 labels
};
// Lengths given as int[] (constants) or as a tensor: s64 [N].
Value lengths(Ctx& c, size_t i) {
  if (c.arg(i).kind == Arg::IntList) return vec_s64(c.b, c.ints(i), {static_cast<int64_t>(c.ints(i).size())});
  return c.b.reshape(s64(c.b, c.v(i)), {c.v(i).type.numel()});
}
Ctc ctc(Ctx& c, size_t lp_at, size_t tg_at, size_t il_at, size_t tl_at, size_t blank_at, int64_t s, DType t) {
  Builder& b = c.b;
  Ctc g;
  Value lp = as(b, c.v(lp_at), t), tg = c.v(tg_at);
  g.t = lp.type.dims[0], g.n = lp.type.dims[1], g.s = s;
  int64_t cls = lp.type.dims[2], blank = c.i(blank_at);
  g.tn = b.convert(lengths(c, il_at), DType::S32);
  Value ln = lengths(c, tl_at);
  Dims ns = {g.n, s};
  auto k = [&](double v) { return b.splat({DType::S64, ns}, v); };
  Value pos = iota(b, DType::S64, ns, 1), l2 = b.mul(bcast(b, ln, ns, {0}), k(2));
  g.valid = b.compare(pos, b.add(l2, k(1)), Cmp::LT);
  g.last = b.or_(b.compare(pos, l2, Cmp::EQ), b.compare(pos, b.sub(l2, k(1)), Cmp::EQ));
  Value base;  // each sample's first target in the flat targets
  if (tg.type.rank() == 2) {
    base = b.mul(iota(b, DType::S64, {g.n}, 0), b.splat({DType::S64, {g.n}}, static_cast<double>(tg.type.dims[1])));
  } else {
    Value before = b.compare(iota(b, DType::S64, {g.n, g.n}, 1), iota(b, DType::S64, {g.n, g.n}, 0), Cmp::LT);
    base = sum(b, where(b, before, bcast(b, ln, {g.n, g.n}, {1}), 0), {1});
  }
  Value odd = b.and_(g.valid, b.compare(b.binary(Op::Remainder, pos, k(2)), k(1), Cmp::EQ));
  Value at = b.add(bcast(b, base, ns, {0}), b.div(pos, k(2)));
  Value blanks = k(blank);
  g.ext = blanks;
  if (tg.type.numel() > 0) {
    at = b.clamp(b.splat({DType::S64, {}}, 0), at, b.splat({DType::S64, {}}, static_cast<double>(tg.type.numel() - 1)));
    g.ext = b.select(odd, take0(b, b.reshape(s64(b, tg), {tg.type.numel()}), at), blanks);
  }
  g.ext = b.clamp(b.splat({DType::S64, {}}, 0), g.ext, b.splat({DType::S64, {}}, static_cast<double>(cls - 1)));
  Value two = b.compare(pos, k(2), Cmp::GE);
  Value prev2 = b.concatenate({b.slice(blanks, {0, 0}, {g.n, std::min<int64_t>(2, s)}),
                               b.slice(g.ext, {0, 0}, {g.n, std::max<int64_t>(s - 2, 0)})}, 1);
  g.skip = b.and_(two, b.and_(b.compare(g.ext, blanks, Cmp::NE), b.compare(g.ext, prev2, Cmp::NE)));
  // lpe[t, n, s] = lp[t, n, ext[n, s]]
  hlo::GatherDims gd;
  gd.offset_dims = {2};
  gd.collapsed_slice_dims = {0, 1};
  gd.start_index_map = {0, 1};
  gd.index_vector_dim = 2;
  Dims ns1 = {g.n, s, 1};
  Value idx = b.concatenate({iota(b, DType::S64, ns1, 0), b.reshape(g.ext, ns1)}, 2);
  g.lpe = b.transpose(b.gather(b.transpose(lp, {1, 2, 0}), idx, gd, {1, 1, g.t}), {2, 0, 1});
  return g;
}
Value at_time(Builder& b, Value x, Value t) {  // x[t] of a [T, ...] tensor
  Dims sizes = x.type.dims;
  sizes[0] = 1;
  Values starts(x.type.rank(), b.splat(kI32, 0));
  starts[0] = t;
  return b.reshape(b.dynamic_slice(x, starts, sizes), Dims(sizes.begin() + 1, sizes.end()));
}
// The loop counter against each sample's input length (+ k), as [N, S'] (or any [N, ...]) preds.
Value vs_time(Builder& b, Value t, Value tn, int64_t k, Cmp cmp, const Dims& ns) {
  Value lim = bcast(b, b.add(tn, b.splat(tn.type, static_cast<double>(k))), ns, {0});
  return b.compare(bcast(b, t, ns, {}), lim, cmp);
}

// _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity) -> (nll, log_alpha)
Values ctc_loss(Ctx& c) {
  Builder& b = c.b;
  DType t = compute_type(c.out[0].dtype);
  Ctc g = ctc(c, 0, 1, 2, 3, 4, c.out[1].dims[2], t);
  Dims ns = {g.n, g.s}, nts = {g.n, g.t, g.s};
  Value ninf = b.splat({t, ns}, -INFINITY);
  Value first = b.compare(iota(b, DType::S64, ns, 1), b.splat({DType::S64, ns}, 1), Cmp::LE);
  Value a0 = b.select(b.and_(first, g.valid), at_time(b, g.lpe, b.splat(kI32, 0)), ninf);
  Value zero = b.splat(kI32, 0);
  Value la = b.dynamic_update_slice(b.splat({t, nts}, -INFINITY), b.reshape(a0, {g.n, 1, g.s}), {zero, zero, zero});
  Values r = loop(b, 1, g.t, 1, {a0, la}, [&](Builder& w, Value ti, const Values& st) {
    Value a = st[0];
    Value nx = lse3(w, a, shift(w, a, 1), w.select(g.skip, shift(w, a, 2), w.splat(a.type, -INFINITY)));
    nx = w.select(g.valid, w.add(nx, at_time(w, g.lpe, ti)), w.splat(a.type, -INFINITY));
    Value live = vs_time(w, ti, g.tn, 0, Cmp::LT, ns);
    Value z = w.splat(kI32, 0);
    Value row = w.reshape(w.select(live, nx, w.splat(a.type, -INFINITY)), {g.n, 1, g.s});
    return Values{w.select(live, nx, a), w.dynamic_update_slice(st[1], row, {z, ti, z})};
  });
  Value nll = b.unary(Op::Neg, logsumexp(b, b.select(g.last, r[0], ninf), {1}));
  // zero_infinity: the caller (ctc_loss) zeroes infinite losses; the backward zeroes their gradients
  return {result(c, nll, 0), result(c, r[1], 1)};
}

// _ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, nll, log_alpha, blank, zero_infinity)
Values ctc_loss_backward(Ctx& c) {
  Builder& b = c.b;
  DType t = compute_type(c.out[0].dtype);
  Value la = as(b, c.v(6), t);
  Ctc g = ctc(c, 1, 2, 3, 4, 7, la.type.dims[2], t);
  int64_t cls = c.v(1).type.dims[2];
  Dims ns = {g.n, g.s}, nsc = {g.n, g.s, cls}, nc = {g.n, cls};
  Value lp = as(b, c.v(1), t), nll = as(b, c.v(5), t), gr = as(b, c.v(0), t);
  Value ninf = b.splat({t, ns}, -INFINITY);
  Value is_c = b.compare(bcast(b, g.ext, nsc, {0, 1}), iota(b, DType::S64, nsc, 2), Cmp::EQ);
  Value skip_next = shift(b, as(b, g.skip, t), -2);  // s -> s + 2 allowed, as 0 / 1 (pad: -inf -> false)
  Value can_skip = b.compare(skip_next, K(b, skip_next, 1), Cmp::EQ);
  Value bad = c.flag(8) ? b.compare(nll, K(b, nll, INFINITY), Cmp::EQ) : b.splat({DType::Pred, {g.n}}, 0);
  Value zero = b.splat(kI32, 0);
  Values r = loop(b, g.t - 1, -1, -1, {ninf, b.splat({t, {g.t, g.n, cls}}, 0)}, [&](Builder& w, Value ti, const Values& st) {
    Value beta = st[0], e = at_time(w, g.lpe, ti);
    Value nx = lse3(w, beta, shift(w, beta, -1), w.select(can_skip, shift(w, beta, -2), w.splat(beta.type, -INFINITY)));
    nx = w.select(vs_time(w, ti, g.tn, -1, Cmp::EQ, ns), w.select(g.last, e, w.splat(e.type, -INFINITY)), w.add(nx, e));
    nx = w.select(w.and_(g.valid, vs_time(w, ti, g.tn, 0, Cmp::LT, ns)), nx, w.splat(e.type, -INFINITY));
    // grad[t, n, c] = exp(lp) - exp(logsumexp_{s: ext = c}(alpha + beta) + nll - lp), scaled
    Value ab = w.add(w.reshape(w.dynamic_slice(la, {zero, ti, zero}, {g.n, 1, g.s}), ns), nx);
    Value lcab = logsumexp(w, w.select(is_c, bcast(w, ab, nsc, {0, 1}), w.splat({t, nsc}, -INFINITY)), {1});
    Value lpt = at_time(w, lp, ti);
    Value gt = w.sub(w.unary(Op::Exp, lpt), w.unary(Op::Exp, w.sub(w.add(lcab, bcast(w, nll, nc, {0})), lpt)));
    Value live = w.and_(vs_time(w, ti, g.tn, 0, Cmp::LT, nc), bcast(w, w.unary(Op::Not, bad), nc, {0}));
    gt = w.select(live, w.mul(gt, bcast(w, gr, nc, {0})), w.splat(gt.type, 0));
    return Values{nx, w.dynamic_update_slice(st[1], w.reshape(gt, {1, g.n, cls}), {ti, zero, zero})};
  });
  return {result(c, r[1])};
}

// ---- rrelu ----

// Uniform [0, 1) float32 samples of `shape` for this call (ThreeFry keyed by the generator's seed and counter).
Value uniform01(Ctx& c, const Dims& shape) {
  Builder& b = c.b;
  auto word = [&](Value s) { return b.reshape(b.bitcast_convert(b.reshape(s, {}), DType::U64), {1}); };
  Value key = b.rng_bit_generator(b.concatenate({word(c.rng_seed()), word(c.rng_counter())}, 0),
                                  hlo::RngAlgorithm::ThreeFry, {DType::U64, {1}}).second;
  Value state = b.concatenate({key, b.splat({DType::U64, {1}}, 0)}, 0);
  Value bits = b.rng_bit_generator(state, hlo::RngAlgorithm::ThreeFry, {DType::U32, shape}).second;
  bits = b.binary(Op::ShiftRightLogical, bits, b.splat({DType::U32, shape}, 8));
  return b.mul(b.convert(bits, DType::F32), b.splat({DType::F32, shape}, std::ldexp(1.0, -24)));
}
// rrelu_with_noise_(self, noise, lower, upper, training, generator) -> (self, noise): training draws
// each slope of x <= 0 from U(lower, upper) and records it (1 elsewhere) in noise; eval uses the mean slope.
Values rrelu_with_noise_(Ctx& c) {
  Builder& b = c.b;
  DType t = compute_type(c.out[0].dtype);
  Value x = as(b, c.v(0), t), lo = broadcast_to(b, as(b, c.v(2), t), x.type.dims);
  Value hi = broadcast_to(b, as(b, c.v(3), t), x.type.dims);
  if (!c.flag(4)) {
    Value slope = b.mul(b.add(lo, hi), K(b, x, 0.5));
    return {result(c, b.select(b.compare(x, K(b, x, 0), Cmp::GT), x, b.mul(x, slope)), 0), c.v(1)};
  }
  Value r = b.add(lo, b.mul(as(b, uniform01(c, x.type.dims), t), b.sub(hi, lo)));
  Value neg = b.compare(x, K(b, x, 0), Cmp::LE);
  return {result(c, b.select(neg, b.mul(x, r), x), 0), result(c, b.select(neg, r, K(b, r, 1)), 1)};
}

Register r({
    {"_embedding_bag|_embedding_bag.out|_embedding_bag_forward_only|_embedding_bag_forward_only.out", embedding_bag},
    {"_embedding_bag_dense_backward|_embedding_bag_dense_backward.out", embedding_bag_dense_backward},
    {"_embedding_bag_per_sample_weights_backward|_embedding_bag_per_sample_weights_backward.out",
     embedding_bag_psw_backward},
    {"_cdist_forward|_cdist_forward.out", cdist_forward, 1u << 2},
    {"_cdist_backward|_cdist_backward.out", cdist_backward, 1u << 3},
    {"_pdist_forward|_pdist_forward.out", pdist_forward, 1u << 1},
    {"_pdist_backward|_pdist_backward.out", pdist_backward, 1u << 2},
    {"_prelu_kernel", prelu},
    {"rrelu_with_noise_", rrelu_with_noise_, 0, true},  // rrelu_with_noise: csrc/aten/nn_kernels.cpp
    {"_ctc_loss|_ctc_loss.out", ctc_loss},  // .Tensor overloads: csrc/aten/nn_kernels.cpp
    {"_ctc_loss_backward|_ctc_loss_backward.out", ctc_loss_backward},
    {"segment_reduce|segment_reduce.out", segment_reduce},
    {"_segment_reduce_backward|_segment_reduce_backward.out", segment_reduce_backward},
    {"_prelu_kernel_backward", prelu_backward},
    {"renorm|renorm.out", renorm, 1u << 1},
    {"embedding_renorm", embedding_renorm, 1u << 3},
    {"multi_margin_loss|multi_margin_loss.out", multi_margin_loss, 1u << 2},
    {"multi_margin_loss_backward|multi_margin_loss_backward.grad_input", multi_margin_loss_backward, 1u << 3},
    {"multilabel_margin_loss_forward|multilabel_margin_loss_forward.output", multilabel_margin_loss},
    {"multilabel_margin_loss_backward|multilabel_margin_loss_backward.grad_input", multilabel_margin_loss_backward},
});

}  // namespace
}  // namespace tpu::lower

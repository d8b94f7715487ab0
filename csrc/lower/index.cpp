// Indexing: advanced indexing (index, index_put), gather/scatter along a dim, index_* along a dim,
// masked ops, embedding's backward, take. Indices count from the end when negative. XLA would clamp
// out-of-range indices (gather) or drop them (scatter): every forward op checks its indices on the
// device (lower::check_bounds) with CPU's message, raised at the next host sync.
#include "lower/helpers.h"

namespace tpu::lower {
namespace {
using hlo::Cmp;
using hlo::Op;

Dims with(Dims d, int64_t last) {
  d.push_back(last);
  return d;
}

// CPU's messages for an index out of range ("{}": the index).
std::string out_of_bounds(int64_t dim, int64_t n) {
  return "index {} is out of bounds for dimension " + std::to_string(dim) + " with size " + std::to_string(n);
}
const char* kOutOfRangeInSelf = "index out of range in self";

// `idx` as s64 with negative entries wrapped for a dim of size n; checked on the device against
// [-n, n) (or [0, n) when !negative) with `message` unless it is empty (backward ops: their forward
// checked the same indices; a tensor without elements: CPU checks nothing then).
Value wrap_index(Builder& b, Value idx, int64_t n, const std::string& message = "", bool index_error = true,
                 bool negative = true) {
  idx = convert(b, idx, DType::S64);
  if (!message.empty()) check_bounds(b, idx, n, message, index_error, negative);
  Value neg = b.compare(idx, zeros(b, idx.type), Cmp::LT);
  return b.select(neg, b.add(idx, scalar_like(b, static_cast<double>(n), idx.type)), idx);
}

// Argument i, an index tensor: int32 or int64, as PyTorch checks (some meta kernels do not).
Value int_index(Ctx& c, size_t i) {
  Value v = c.v(i);
  if (!info(v.type.dtype).is_int)
    c.fail("Expected dtype int32/int64 for index, got " + std::string(info(v.type.dtype).name));
  return v;
}

Value at_least_1d(Builder& b, Value x) { return x.type.rank() ? x : b.reshape(x, {1}); }

enum class Combine { Replace, Add, Mul, Max, Min };

hlo::Body body(Combine k) {
  return [k](Builder& r, const Values& a) -> Values {
    bool pred = a[0].type.dtype == DType::Pred;
    switch (k) {
      case Combine::Add: return {pred ? r.or_(a[0], a[1]) : r.add(a[0], a[1])};
      case Combine::Mul: return {pred ? r.and_(a[0], a[1]) : r.mul(a[0], a[1])};
      case Combine::Max: return {nan_max(r, a[0], a[1], true)};
      case Combine::Min: return {nan_max(r, a[0], a[1], false)};
      default: return {a[1]};
    }
  };
}

// Scatter `updates` into `x` (in the computation type for sums and products).
Value scatter_(Builder& b, Value x, Value indices, Value updates, const hlo::ScatterDims& s, Combine k) {
  if (updates.type.numel() == 0) return x;
  DType t = x.type.dtype, ct = k == Combine::Add || k == Combine::Mul ? compute_type(t) : t;
  Value r = b.scatter({convert(b, x, ct)}, indices, {convert(b, updates, ct)}, s, body(k))[0];
  return convert(b, r, t);
}

// ---- along one dim, with a full coordinate per element (gather, scatter) ----

// Coordinates of every element of `index` (shape I, rank = x's) into x: shape I + [rank], the
// component `dim` being the index value and the others the element's own position.
Value coords_along(Builder& b, Value index, int64_t dim, const Dims& x_dims) {
  int64_t r = index.type.rank();
  if (hlo::TensorType{DType::F32, x_dims}.numel())
    check_bounds(b, index, x_dims[dim], out_of_bounds(dim, x_dims[dim]), false, /*negative=*/false);
  TensorType t{DType::S64, index.type.dims};
  Values parts;
  for (int64_t d = 0; d < r; ++d)
    parts.push_back(b.reshape(d == dim ? wrap_index(b, index, x_dims[d]) : b.iota(t, d), with(t.dims, 1)));
  return r == 1 ? parts[0] : b.concatenate(parts, r);
}

hlo::ScatterDims point_dims(int64_t rank) {
  hlo::ScatterDims s;
  for (int64_t d = 0; d < rank; ++d) s.inserted_window_dims.push_back(d);
  s.scatter_dims_to_operand_dims = s.inserted_window_dims;
  s.index_vector_dim = rank;
  return s;
}

// gather(self, dim, index)
Values gather(Ctx& c) {
  Value x = at_least_1d(c.b, c.v(0)), idx = at_least_1d(c.b, c.v(2));
  int64_t r = x.type.rank(), dim = wrap_dim(c.i(1), r);
  if (x.type.numel() == 0)  // CPU still checks the indices against the dim's size
    check_bounds(c.b, idx, x.type.dims[dim], out_of_bounds(dim, x.type.dims[dim]), false, false);
  if (idx.type.numel() == 0 || x.type.numel() == 0) return {zeros(c.b, c.out[0])};
  hlo::GatherDims g;
  g.collapsed_slice_dims = point_dims(r).inserted_window_dims;
  g.start_index_map = g.collapsed_slice_dims;
  g.index_vector_dim = r;
  Value out = c.b.gather(x, coords_along(c.b, idx, dim, x.type.dims), g, Dims(r, 1));
  return {c.b.reshape(out, c.out[0].dims)};
}

Combine combine_of(Ctx& c, const std::string& s) {
  if (s == "add" || s == "sum") return Combine::Add;
  if (s == "multiply" || s == "prod") return Combine::Mul;
  if (s == "amax") return Combine::Max;
  if (s == "amin") return Combine::Min;
  c.fail("unknown reduce '" + s + "'");
}

// Argument i (a src tensor, or a value) as the updates of `index`'s elements, of dtype t.
Value updates_for(Ctx& c, size_t i, Value index, DType t) {
  Value src = c.v(i);
  if (c.arg(i).kind == Arg::Scalar) return broadcast_to(c.b, convert(c.b, src, t), index.type.dims);
  src = at_least_1d(c.b, src);
  if (src.type.dims != index.type.dims)  // src may be larger than index: its leading corner
    src = c.b.slice(src, Dims(src.type.rank(), 0), index.type.dims);
  return convert(c.b, src, t);
}

// scatter.src / .value / .reduce / .value_reduce(self, dim, index, src|value[, reduce]), scatter_add
Values scatter_with(Ctx& c, Combine k) {
  Value x = at_least_1d(c.b, c.v(0)), idx = at_least_1d(c.b, c.v(2));
  if (idx.type.numel() == 0) return {c.b.reshape(x, c.out[0].dims)};
  int64_t r = x.type.rank(), dim = wrap_dim(c.i(1), r);
  Value pts = coords_along(c.b, idx, dim, x.type.dims);
  Value out = scatter_(c.b, x, pts, updates_for(c, 3, idx, x.type.dtype), point_dims(r), k);
  return {c.b.reshape(out, c.out[0].dims)};
}
Values scatter(Ctx& c) { return scatter_with(c, c.has(4) ? combine_of(c, c.s(4)) : Combine::Replace); }
Values scatter_add(Ctx& c) { return scatter_with(c, Combine::Add); }

// sum / count, rounding down for integers (counts are positive)
Value mean_of(Builder& b, Value sum, Value count) {
  Value q = b.div(sum, count);
  if (!is_integral(sum.type.dtype)) return q;
  Value zero = zeros(b, sum.type);
  Value fix = b.and_(b.compare(b.binary(hlo::Op::Remainder, sum, count), zero, Cmp::NE),
                     b.compare(sum, zero, Cmp::LT));
  return b.select(fix, b.sub(q, scalar_like(b, 1, q.type)), q);
}

// scatter_reduce.two(self, dim, index, src, reduce, include_self)
Values scatter_reduce(Ctx& c) {
  Value x = at_least_1d(c.b, c.v(0)), idx = at_least_1d(c.b, c.v(2));
  const std::string& red = c.s(4);
  if (idx.type.numel() == 0) return {c.b.reshape(x, c.out[0].dims)};
  int64_t r = x.type.rank(), dim = wrap_dim(c.i(1), r);
  DType t = x.type.dtype;
  Value pts = coords_along(c.b, idx, dim, x.type.dims);
  Value upd = updates_for(c, 3, idx, t);
  hlo::ScatterDims s = point_dims(r);
  bool include_self = c.flag(5, true);
  if (!include_self) {  // the positions written start from the identity (amax/amin: from one of their values)
    bool extreme = red == "amax" || red == "amin";
    x = scatter_(c.b, x, pts, extreme ? upd : c.b.splat({t, idx.type.dims}, red == "prod" ? 1 : 0), s,
                 Combine::Replace);
  }
  if (red != "mean") return {c.b.reshape(scatter_(c.b, x, pts, upd, s, combine_of(c, red)), c.out[0].dims)};
  DType ct = compute_type(t);
  Value sum = c.b.scatter({convert(c.b, x, ct)}, pts, {convert(c.b, upd, ct)}, s, body(Combine::Add))[0];
  DType nt = is_complex(ct) ? real_part(ct) : ct;  // the count's type: a complex one has no max
  TensorType count_t{nt, x.type.dims};
  Value count = include_self ? scalar_like(c.b, 1, count_t) : zeros(c.b, count_t);
  count = c.b.scatter({count}, pts, {c.b.splat({nt, idx.type.dims}, 1)}, s, body(Combine::Add))[0];
  count = convert(c.b, c.b.max(count, scalar_like(c.b, 1, count_t)), ct);
  return {c.b.reshape(convert(c.b, mean_of(c.b, sum, count), t), c.out[0].dims)};
}

// ---- along one dim, with one index per slice (index_select, index_add, ...) ----

// x indexed along `dim` by the s64 tensor `idx` (any shape I): x's dims with `dim` replaced by I's.
Value take_dim(Builder& b, Value x, int64_t dim, Value idx) {
  int64_t r = x.type.rank(), m = idx.type.rank();
  hlo::GatherDims g;
  g.collapsed_slice_dims = {dim};
  g.start_index_map = {dim};
  g.index_vector_dim = m;
  for (int64_t d = 0; d < r; ++d)
    if (d != dim) g.offset_dims.push_back(d < dim ? d : d + m - 1);
  Dims sizes = x.type.dims;
  sizes[dim] = 1;
  return b.gather(x, b.reshape(idx, with(idx.type.dims, 1)), g, sizes);
}

// x with the slices `idx` (s64, 1-D) of `dim` combined with `updates` (x's shape, dim sized like idx).
Value scatter_dim(Builder& b, Value x, int64_t dim, Value idx, Value updates, Combine k) {
  hlo::ScatterDims s;
  for (int64_t d = 0; d < x.type.rank(); ++d)
    if (d != dim) s.update_window_dims.push_back(d);
  s.inserted_window_dims = {dim};
  s.scatter_dims_to_operand_dims = {dim};
  s.index_vector_dim = 1;
  return scatter_(b, x, b.reshape(idx, {idx.type.numel(), 1}), updates, s, k);
}

// index_select(self, dim, index)
Values index_select(Ctx& c) {
  Value x = at_least_1d(c.b, c.v(0)), idx = int_index(c, 2);
  int64_t dim = wrap_dim(c.i(1), x.type.rank());
  if (c.out[0].numel() == 0 || x.type.dims[dim] == 0) {  // CPU still checks the indices
    check_bounds(c.b, idx, x.type.dims[dim], kOutOfRangeInSelf, true, false);
    return {zeros(c.b, c.out[0])};
  }
  idx = wrap_index(c.b, c.b.reshape(idx, {idx.type.numel()}), x.type.dims[dim], kOutOfRangeInSelf, true, false);
  return {c.b.reshape(take_dim(c.b, x, dim, idx), c.out[0].dims)};
}

// take(self, index): self flattened, indexed by index (any shape)
Values take(Ctx& c) {
  Value x = c.v(0), idx = c.v(1);
  if (c.out[0].numel() == 0 || x.type.numel() == 0) return {zeros(c.b, c.out[0])};
  std::string message = "out of range: tried to access index {} on a tensor of " + std::to_string(x.type.numel()) + " elements.";
  return {take_dim(c.b, c.b.reshape(x, {x.type.numel()}), 0, wrap_index(c.b, idx, x.type.numel(), message))};
}

// put(self, index, source, accumulate): self flattened, source's elements written (or added) at index
Values put(Ctx& c) {
  Value x = c.v(0), idx = int_index(c, 1), src = c.v(2);
  int64_t n = x.type.numel(), k = idx.type.numel();
  if (k == 0 || n == 0) return {x};
  idx = wrap_index(c.b, c.b.reshape(idx, {k}), n,
                   "out of range: tried to access index {} on a tensor of " + std::to_string(n) + " elements.");
  Value flat = scatter_dim(c.b, c.b.reshape(x, {n}), 0, idx, c.b.reshape(convert(c.b, src, x.type.dtype), {k}),
                           c.flag(3) ? Combine::Add : Combine::Replace);
  return {c.b.reshape(flat, x.type.dims)};
}

// index_add(self, dim, index, source, alpha) / index_copy(self, dim, index, source)
Values index_combine(Ctx& c, Combine k) {
  Value x = at_least_1d(c.b, c.v(0)), idx = int_index(c, 2);
  int64_t dim = wrap_dim(c.i(1), x.type.rank()), n = idx.type.numel();
  if (n == 0) return {c.b.reshape(x, c.out[0].dims)};
  Dims src_shape = x.type.dims;
  src_shape[dim] = n;
  DType t = k == Combine::Add ? compute_type(x.type.dtype) : x.type.dtype;
  Value src = convert(c.b, c.b.reshape(c.v(3), src_shape), t);
  if (k == Combine::Add && c.has(4)) src = c.b.mul(src, operand(c, 4, t, src_shape));
  // CPU's messages: index_add of a vector, of a matrix or more, index_copy
  bool vector = c.v(0).type.rank() <= 1;
  std::string message = k == Combine::Replace ? "index_copy_(): " + out_of_bounds(dim, x.type.dims[dim])
                        : vector              ? std::string(kOutOfRangeInSelf)
                                              : out_of_bounds(dim, x.type.dims[dim]);
  if (!x.type.numel()) message.clear();
  idx = wrap_index(c.b, c.b.reshape(idx, {n}), x.type.dims[dim], message, k == Combine::Replace || vector, false);
  return {c.b.reshape(scatter_dim(c.b, x, dim, idx, src, k), c.out[0].dims)};
}
Values index_add(Ctx& c) { return index_combine(c, Combine::Add); }

// index_reduce(self, dim, index, source, reduce, include_self): prod, mean, amax, amin of the slices
Values index_reduce(Ctx& c) {
  Value x = at_least_1d(c.b, c.v(0)), idx = int_index(c, 2);
  const std::string& red = c.s(4);
  int64_t dim = wrap_dim(c.i(1), x.type.rank()), n = idx.type.numel(), len = x.type.dims[dim];
  {  // CPU's shape checks (PyTorch's Meta kernel of the functional form has none)
    Dims self_sizes = c.v(0).type.dims, source_sizes = c.v(3).type.dims;
    if (source_sizes.empty() && n != 1) c.fail("index_reduce_(): Number of indices should be equal to source.size(dim)");
    if (!self_sizes.empty() && !source_sizes.empty()) {
      if (dim >= static_cast<int64_t>(source_sizes.size())) c.fail("index_reduce_(): Indexing dim is out of bounds");
      if (source_sizes[dim] != n) c.fail("index_reduce_(): Number of indices should be equal to source.size(dim)");
      self_sizes.erase(self_sizes.begin() + dim);
      source_sizes.erase(source_sizes.begin() + dim);
    }
    if (self_sizes != source_sizes)
      c.fail("source tensor shape must match self tensor shape, excluding the specified dimension");
  }
  if (n == 0) return {c.b.reshape(x, c.out[0].dims)};
  DType t = x.type.dtype;
  Dims src_shape = x.type.dims;
  src_shape[dim] = n;
  Value src = convert(c.b, c.b.reshape(c.v(3), src_shape), t);
  idx = wrap_index(c.b, c.b.reshape(idx, {n}), len, x.type.numel() ? kOutOfRangeInSelf : "", true, false);
  bool include_self = c.flag(5, true);
  if (!include_self) {  // the slices written start from the identity (amax/amin: from one of their values)
    bool extreme = red == "amax" || red == "amin";
    x = scatter_dim(c.b, x, dim, idx, extreme ? src : c.b.splat({t, src_shape}, red == "prod" ? 1 : 0),
                    Combine::Replace);
  }
  // CPU and CUDA reduce in self's dtype, one slice after another: a half-precision sum or product rounds at
  // each step, where one scatter would compute in float32 (XLA CPU) and round once
  bool stepwise = t == DType::F16 || t == DType::BF16;
  auto reduce_into = [&](Value into, Combine k) {
    if (!stepwise) return scatter_dim(c.b, into, dim, idx, src, k);
    return loop(c.b, n, {into}, [&](Builder& w, Value i, const Values& s) {
      Dims one = src_shape;
      one[dim] = 1;
      Values starts(one.size(), w.splat({DType::S32, {}}, 0));
      starts[dim] = i;
      return Values{scatter_dim(w, s[0], dim, w.dynamic_slice(idx, {i}, {1}), w.dynamic_slice(src, starts, one), k)};
    })[0];
  };
  if (red != "mean") return {c.b.reshape(reduce_into(x, combine_of(c, red)), c.out[0].dims)};
  DType ct = t;
  Value sum = reduce_into(x, Combine::Add);
  TensorType count_t{ct, {len}};
  Value count = include_self ? scalar_like(c.b, 1, count_t) : zeros(c.b, count_t);
  count = scatter_dim(c.b, count, 0, idx, c.b.splat({ct, {n}}, 1), Combine::Add);
  count = c.b.broadcast_in_dim(c.b.max(count, scalar_like(c.b, 1, count_t)), x.type.dims, {dim});
  return {c.b.reshape(convert(c.b, mean_of(c.b, sum, count), t), c.out[0].dims)};
}
Values index_copy(Ctx& c) { return index_combine(c, Combine::Replace); }

// index_fill(self, dim, index, value)
Values index_fill(Ctx& c) {
  Value x = at_least_1d(c.b, c.v(0)), idx = int_index(c, 2);
  int64_t dim = wrap_dim(c.i(1), x.type.rank()), n = x.type.dims[dim], k = idx.type.numel();
  if (k == 0 || n == 0) return {c.b.reshape(x, c.out[0].dims)};
  idx = wrap_index(c.b, c.b.reshape(idx, {k}), n, x.type.numel() ? out_of_bounds(dim, n) : "");
  Value hit = scatter_dim(c.b, zeros(c.b, {DType::Pred, {n}}), 0, idx, c.b.splat({DType::Pred, {k}}, 1),
                          Combine::Replace);
  Value mask = c.b.broadcast_in_dim(hit, x.type.dims, {dim});
  Value out = c.b.select(mask, operand(c, 3, x.type.dtype, x.type.dims), x);
  return {c.b.reshape(out, c.out[0].dims)};
}

// ---- masks ----

// masked_fill(self, mask, value)
Values masked_fill(Ctx& c) {
  const TensorType& o = c.out[0];
  Value mask = broadcast_to(c.b, convert(c.b, c.v(1), DType::Pred), o.dims);
  return {c.b.select(mask, operand(c, 2, o.dtype, o.dims), operand(c, 0, o.dtype, o.dims))};
}

// Inclusive prefix sum of a 1-D tensor, in log2(n) shifted adds.
Value prefix_sum(Builder& b, Value x) {
  int64_t n = x.type.dims[0];
  Value zero = zeros(b, hlo::scalar(x.type.dtype));
  for (int64_t k = 1; k < n; k *= 2) x = b.add(x, b.pad(b.slice(x, {0}, {n - k}), zero, {k}, {0}));
  return x;
}

// For each element of `mask` (pred), the number of true elements before it in row-major order,
// clamped to [0, limit).
Value mask_positions(Builder& b, Value mask, int64_t limit) {
  int64_t n = mask.type.numel();
  Value count = prefix_sum(b, convert(b, b.reshape(mask, {n}), DType::S64));
  TensorType t = count.type;
  Value pos = b.clamp(zeros(b, t), b.sub(count, scalar_like(b, 1, t)), scalar_like(b, double(limit - 1), t));
  return b.reshape(pos, mask.type.dims);
}

// masked_scatter(self, mask, source): the k-th true position of mask takes source's k-th element.
Values masked_scatter(Ctx& c) {
  if (c.v(1).type.dtype != DType::Pred) c.fail("masked_scatter_ only supports boolean masks");  // as CPU
  Value x = broadcast_to(c.b, c.v(0), c.out[0].dims), src = c.v(2);  // self broadcasts with mask
  int64_t s = src.type.numel();
  if (x.type.numel() == 0) return {x};
  Value mask = broadcast_to(c.b, c.v(1), x.type.dims);
  // a device-side check, raised at the next sync (as index bounds): CPU raises at the call
  Value ones = reduce(c.b, convert(c.b, mask, DType::S64), reduce_dims({}, x.type.rank()), Op::Add, 0);
  check(c.b, c.b.compare(ones, scalar_like(c.b, double(s), ones.type), Cmp::GT), ones,
        "Number of elements of source < number of ones in mask", false);
  if (s == 0) return {x};
  Value pos = mask_positions(c.b, mask, s);
  Value picked = take_dim(c.b, c.b.reshape(convert(c.b, src, x.type.dtype), {s}), 0, pos);
  return {c.b.select(mask, picked, x)};
}

// masked_scatter_backward(grad_output, mask, sizes): source's gradient, grad at the k-th true position
// going to element k (zeros past the number of true positions)
Values masked_scatter_backward(Ctx& c) {
  const TensorType& o = c.out[0];
  Value g = c.v(0);
  int64_t s = o.numel(), n = g.type.numel();
  if (s == 0 || n == 0) return {zeros(c.b, o)};
  DType ct = compute_type(o.dtype);
  Value mask = broadcast_to(c.b, convert(c.b, c.v(1), DType::Pred), g.type.dims);
  Value vals = c.b.select(mask, convert(c.b, g, ct), zeros(c.b, {ct, g.type.dims}));
  Value pos = c.b.reshape(mask_positions(c.b, mask, s), {n});
  Value flat = scatter_dim(c.b, zeros(c.b, {ct, {s}}), 0, pos, c.b.reshape(vals, {n}), Combine::Add);
  return {convert(c.b, c.b.reshape(flat, o.dims), o.dtype)};
}

// ---- advanced indexing ----

Dims broadcast_shape(const Dims& a, const Dims& b) {
  Dims out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    int64_t x = k < out.size() - a.size() ? 1 : a[k - (out.size() - a.size())];
    int64_t y = k < out.size() - b.size() ? 1 : b[k - (out.size() - b.size())];
    out[k] = x == 1 ? y : x;
  }
  return out;
}

bool broadcasts_to(const Dims& from, const Dims& to) {
  if (from.size() > to.size()) return false;
  for (size_t k = 0; k < from.size(); ++k) {
    int64_t f = from[from.size() - 1 - k], t = to[to.size() - 1 - k];
    if (f != 1 && f != t) return false;
  }
  return true;
}

std::string dims_str(const Dims& d, const std::string& at = "", size_t where = SIZE_MAX) {  // "[4, 2]", as torch prints
  std::string s = "[";
  for (size_t k = 0; k <= d.size(); ++k) {
    if (k == where) s += (s.size() > 1 ? ", " : "") + at;
    if (k < d.size()) s += (s.size() > 1 ? ", " : "") + std::to_string(d[k]);
  }
  return s + "]";
}

// The indices of self[indices] (no masks): the indexed dims, their broadcast index tensors stacked
// as coordinates (shape B + [K]), and where the result puts B's dims and the other dims.
struct Plan {
  Dims dims, batch, others;  // indexed dims; B; result positions of the non-indexed dims
  Value coords;
};

// `checked`: out-of-range indices raise CPU's IndexError (the _unsafe_masked ops mask them out instead).
Plan plan(Ctx& c, size_t list, const Dims& x_dims, bool checked = true) {
  Plan p;
  const auto& ids = c.arg(list).ints;
  if (ids.size() > x_dims.size())  // PyTorch's check (index_put's meta kernel lacks it)
    throw IndexError("too many indices for tensor of dimension " + std::to_string(x_dims.size()) + " (got " +
                     std::to_string(ids.size()) + ")");
  Values all = c.vs(list), used;
  for (size_t k = 0; k < ids.size(); ++k)
    if (ids[k] >= 0) {
      if (all[k].type.dtype == DType::Pred || all[k].type.dtype == DType::U8)
        c.fail("boolean mask indices are lowered only alone (index_put) or after nonzero (index)");
      p.dims.push_back(static_cast<int64_t>(k));
      used.push_back(all[k]);
    }
  if (used.empty()) return p;
  for (Value v : used) p.batch = broadcast_shape(p.batch, v.type.dims);
  for (Value v : used)
    if (!broadcasts_to(v.type.dims, p.batch)) {
      std::string shapes;
      for (Value u : used) shapes += (shapes.empty() ? "" : ", ") + dims_str(u.type.dims);
      throw IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes " + shapes);
    }
  // no index is valid for a dim of size 0: unless there are no indices, CPU raises (AdvancedIndex's check)
  bool no_indices = std::find(p.batch.begin(), p.batch.end(), 0) != p.batch.end();
  for (int64_t d : p.dims)
    if (x_dims[d] == 0 && !no_indices) throw IndexError("index is out of bounds for dimension with size 0");
  Values parts;
  for (size_t j = 0; j < used.size(); ++j) {
    Value v = broadcast_to(c.b, convert(c.b, used[j], DType::S64), p.batch);
    int64_t d = p.dims[j];
    bool empty = hlo::TensorType{DType::F32, x_dims}.numel() == 0;  // CPU checks nothing then
    std::string message = empty || !checked ? "" : out_of_bounds(d, x_dims[d]);
    parts.push_back(c.b.reshape(wrap_index(c.b, v, x_dims[d], message), with(p.batch, 1)));
  }
  int64_t nb = static_cast<int64_t>(p.batch.size());
  p.coords = parts.size() == 1 ? parts[0] : c.b.concatenate(parts, nb);
  // adjacent indexed dims keep their place in the result; otherwise B's dims come first
  bool adjacent = p.dims.back() - p.dims.front() + 1 == static_cast<int64_t>(p.dims.size());
  int64_t pos = adjacent ? p.dims.front() : 0, j = 0;
  for (int64_t d = 0; d < static_cast<int64_t>(x_dims.size()); ++d)
    if (std::find(p.dims.begin(), p.dims.end(), d) == p.dims.end()) p.others.push_back(j < pos ? j++ : nb + j++);
  return p;
}

// x[indices] for the index list at argument `list`, shaped like out[0].
Value gather_indexed(Ctx& c, Value x, size_t list, bool checked = true) {
  const TensorType& o = c.out[0];
  if (o.numel() == 0) return zeros(c.b, {x.type.dtype, o.dims});
  Plan p = plan(c, list, x.type.dims, checked);
  if (p.dims.empty()) return x;
  hlo::GatherDims g;
  g.offset_dims = p.others;
  g.collapsed_slice_dims = p.dims;
  g.start_index_map = p.dims;
  g.index_vector_dim = static_cast<int64_t>(p.batch.size());
  Dims sizes = x.type.dims;
  for (int64_t d : p.dims) sizes[d] = 1;
  return c.b.gather(x, p.coords, g, sizes);
}

// index.Tensor(self, indices), _unsafe_index
Values index(Ctx& c) { return {gather_indexed(c, c.v(0), 1)}; }

// _unsafe_masked_index(self, mask, indices, fill): x[indices] where mask, else fill
Values masked_index(Ctx& c) {
  const TensorType& o = c.out[0];
  if (c.v(0).type.numel() == 0) return {operand(c, 3, o.dtype, o.dims)};  // as CPU: nothing to read, all fill
  Value mask = broadcast_to(c.b, convert(c.b, c.v(1), DType::Pred), o.dims);
  // XLA's gather clamps the indices the mask leaves out
  return {c.b.select(mask, gather_indexed(c, c.v(0), 2, /*checked=*/false), operand(c, 3, o.dtype, o.dims))};
}

// x[mask] = values (+= with accumulate) for one boolean mask covering dims [p, p + mask.rank):
// the k-th true position takes row k of values along the mask's result dim (or its only row).
Value mask_put(Builder& b, Value x, int64_t p, Value mask, Value values, bool acc) {
  int64_t m = mask.type.rank(), r = x.type.rank();
  mask = convert(b, mask, DType::Pred);
  Dims pre(x.type.dims.begin(), x.type.dims.begin() + p), post(x.type.dims.begin() + p + m, x.type.dims.end());
  Dims mask_dims, other_dims;  // positions in x
  for (int64_t d = 0; d < r; ++d) (d >= p && d < p + m ? mask_dims : other_dims).push_back(d);
  int64_t q = p - (p + 1 + static_cast<int64_t>(post.size()) - values.type.rank());  // values' row dim
  int64_t rows = q >= 0 && values.type.dims[q] != 1 ? values.type.dims[q] : 1;
  if (x.type.numel() == 0) return x;
  // Values with other than one row need the mask to select exactly that many, which only the device knows.
  auto check_rows = [&] {
    Dims rest = pre;
    rest.insert(rest.end(), post.begin(), post.end());
    Value selected = reduce(b, convert(b, b.reshape(mask, {mask.type.numel()}), DType::S64), {0}, hlo::Op::Add, 0);
    selected = b.reshape(selected, {1});
    check(b, b.compare(selected, scalar_like(b, double(rows), selected.type), Cmp::NE), selected,
          "shape mismatch: value tensor of shape " + dims_str(values.type.dims) +
              " cannot be broadcast to indexing result of shape " + dims_str(rest, "{}", pre.size()),
          false);
  };
  if (rows == 0) check_rows();  // nothing to write, if the mask selects nothing
  if (rows == 0 || values.type.numel() == 0) return x;
  DType ct = acc ? compute_type(x.type.dtype) : x.type.dtype;
  Dims vshape = pre;
  vshape.push_back(rows);
  vshape.insert(vshape.end(), post.begin(), post.end());
  Value v = broadcast_to(b, convert(b, values, ct), vshape);
  Value picked;
  if (rows == 1) {
    Dims squeezed = pre;
    squeezed.insert(squeezed.end(), post.begin(), post.end());
    picked = b.broadcast_in_dim(b.reshape(v, squeezed), x.type.dims, other_dims);
  } else {
    check_rows();
    picked = take_dim(b, v, p, mask_positions(b, mask, rows));
  }
  Value base = convert(b, x, ct);
  Value mask_b = b.broadcast_in_dim(mask, x.type.dims, mask_dims);
  return convert(b, b.select(mask_b, acc ? b.add(base, picked) : picked, base), x.type.dtype);
}

// x[indices] = values (or +=) for the index list at argument `list`.
Value put_indexed(Ctx& c, Value x, size_t list, Value values, bool acc, bool checked = true) {
  DType t = x.type.dtype, ct = acc ? compute_type(t) : t;
  const auto& ids = c.arg(list).ints;
  int64_t used = 0, first = -1;
  for (size_t k = 0; k < ids.size(); ++k)
    if (ids[k] >= 0 && used++ == 0) first = static_cast<int64_t>(k);
  if (used == 1) {
    Value mask = c.vs(list)[first];
    if (mask.type.dtype == DType::Pred || mask.type.dtype == DType::U8)
      return mask_put(c.b, x, first, mask, values, acc);
  }
  Plan p = plan(c, list, x.type.dims, checked);
  if (p.dims.empty()) {
    Value v = broadcast_to(c.b, convert(c.b, values, ct), x.type.dims);
    return convert(c.b, acc ? c.b.add(convert(c.b, x, ct), v) : v, t);
  }
  // the shape of x[indices]: B's dims plus the others at their result positions
  int64_t nb = static_cast<int64_t>(p.batch.size());
  Dims shape(p.others.size() + nb, -1);
  for (size_t j = 0, k = 0; j < x.type.dims.size(); ++j)
    if (std::find(p.dims.begin(), p.dims.end(), static_cast<int64_t>(j)) == p.dims.end())
      shape[p.others[k++]] = x.type.dims[j];
  for (int64_t j = 0, k = 0; j < static_cast<int64_t>(shape.size()); ++j)
    if (shape[j] < 0) shape[j] = p.batch[k++];
  hlo::ScatterDims s;
  s.update_window_dims = p.others;
  s.inserted_window_dims = p.dims;
  s.scatter_dims_to_operand_dims = p.dims;
  s.index_vector_dim = nb;
  if (!broadcasts_to(values.type.dims, shape))
    throw ArgumentError("shape mismatch: value tensor of shape " + dims_str(values.type.dims) +
                     " cannot be broadcast to indexing result of shape " + dims_str(shape));
  Value upd = broadcast_to(c.b, convert(c.b, values, ct), shape);
  return scatter_(c.b, x, p.coords, upd, s, acc ? Combine::Add : Combine::Replace);
}

// index_put / _index_put_impl / _unsafe_index_put(self, indices, values, accumulate[, unsafe])
Values index_put(Ctx& c) { return {put_indexed(c, c.v(0), 1, c.v(2), c.flag(3))}; }

// _unsafe_masked_index_put_accumulate(self, mask, indices, values): x[indices] += values where mask
Values masked_index_put_accumulate(Ctx& c) {
  Value values = c.v(3);
  if (c.v(0).type.numel() == 0) return {c.v(0)};  // as CPU
  Value mask = broadcast_to(c.b, convert(c.b, c.v(1), DType::Pred), values.type.dims);
  // the indices it leaves out add zeros, or nothing where XLA's scatter drops them as out of range
  return {put_indexed(c, c.v(0), 2, c.b.select(mask, values, zeros(c.b, values.type)), true, /*checked=*/false)};
}

// ---- embedding ----

// embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
Values embedding(Ctx& c) {
  Value w = c.v(0), idx = c.v(1);
  check_bounds(c.b, idx, w.type.dims[0], kOutOfRangeInSelf, true, /*negative=*/false);
  if (c.out[0].numel() == 0) return {zeros(c.b, c.out[0])};
  return {take_dim(c.b, w, 0, wrap_index(c.b, idx, w.type.dims[0]))};
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
Values embedding_dense_backward(Ctx& c) {
  const TensorType& o = c.out[0];
  Value g = c.v(0), idx = c.v(1);
  int64_t rows = c.i(2), pad = c.i(3), n = idx.type.numel(), width = o.dims[1];
  if (n == 0 || o.numel() == 0) return {zeros(c.b, o)};
  DType ct = compute_type(o.dtype);
  idx = wrap_index(c.b, c.b.reshape(idx, {n}), rows);
  Value grad = convert(c.b, c.b.reshape(g, {n, width}), ct);
  if (pad >= 0) {
    Value is_pad = c.b.compare(idx, scalar_like(c.b, double(pad), idx.type), Cmp::EQ);
    grad = c.b.select(c.b.broadcast_in_dim(is_pad, {n, width}, {0}), zeros(c.b, grad.type), grad);
  }
  if (c.flag(4)) {  // each row's gradient divided by how often its index occurs
    Value count = scatter_dim(c.b, zeros(c.b, {ct, {rows}}), 0, idx, c.b.splat({ct, {n}}, 1), Combine::Add);
    grad = c.b.div(grad, c.b.broadcast_in_dim(take_dim(c.b, count, 0, idx), {n, width}, {0}));
  }
  return {convert(c.b, scatter_dim(c.b, zeros(c.b, {ct, o.dims}), 0, idx, grad, Combine::Add), o.dtype)};
}

// nonzero_static(self, size, fill_value) -> (size, rank) s64: the coordinates of the first `size` nonzero
// elements in row-major order (a stable sort puts them first), fill_value in rows past the last one.
Values nonzero_static(Ctx& c) {
  Builder& b = c.b;
  Value x = c.v(0);
  const Dims& shape = x.type.dims;
  int64_t n = x.type.numel(), rank = x.type.rank(), size = c.out[0].dims[0];
  TensorType flat{DType::S64, {n}};
  Value zero = b.unary(Op::Not, b.reshape(convert(b, x, DType::Pred), {n}));  // sorts nonzeros first
  Values sorted = b.sort({zero, b.iota(flat, 0)}, 0, true, [](Builder& r, const Values& a) {
    return Values{r.and_(r.unary(Op::Not, a[0]), a[1])};  // false < true
  });
  Value found = b.unary(Op::Not, sorted[0]), at = sorted[1];
  int64_t k = std::min(n, size);
  found = b.slice(found, {0}, {k}), at = b.slice(at, {0}, {k});
  Value fill = scalar_like(b, static_cast<double>(c.i(2, -1)), TensorType{DType::S64, {k}});
  int64_t stride = 1;
  std::vector<Value> cols(static_cast<size_t>(rank));
  for (int64_t d = rank - 1; d >= 0; --d) {  // coordinate d = (flat / stride) % size_d
    Value q = b.div(at, scalar_like(b, static_cast<double>(stride), at.type));
    Value coord = b.binary(Op::Remainder, q, scalar_like(b, static_cast<double>(shape[d]), at.type));
    cols[d] = b.reshape(b.select(found, coord, fill), {k, 1});
    stride *= shape[d];
  }
  Value out = rank ? b.concatenate(cols, 1) : zeros(b, TensorType{DType::S64, {k, 0}});
  if (size > k)
    out = b.pad(out, scalar_like(b, static_cast<double>(c.i(2, -1)), hlo::scalar(DType::S64)), {0, 0}, {size - k, 0});
  return {out};
}

Register r({
    {"nonzero_static|nonzero_static.out", nonzero_static},
    {"gather|gather.out", gather},
    {"scatter.src|scatter.value|scatter.reduce|scatter.value_reduce|scatter.src_out|scatter.value_out|"
     "scatter.reduce_out|scatter.value_reduce_out",
     scatter},
    {"scatter_add|scatter_add.out", scatter_add}, {"scatter_reduce.two|scatter_reduce.two_out", scatter_reduce},
    {"index_select|index_select.out", index_select}, {"take|take.out", take}, {"put|put.out", put},
    {"index_add|index_add.out", index_add}, {"index_copy|index_copy.out", index_copy},
    {"index_fill.int_Scalar|index_fill.int_Tensor|index_fill.int_Scalar_out|index_fill.int_Tensor_out", index_fill},
    {"masked_fill.Scalar|masked_fill.Tensor|masked_fill.Scalar_out|masked_fill.Tensor_out", masked_fill},
    {"masked_scatter|masked_scatter.out", masked_scatter},
    {"masked_scatter_backward", masked_scatter_backward},
    {"index.Tensor|index.Tensor_out|_unsafe_index.Tensor", index}, {"_unsafe_masked_index", masked_index},
    {"index_put|index_put.out|_index_put_impl|_index_put_impl.out|_unsafe_index_put", index_put},
    {"_unsafe_masked_index_put_accumulate", masked_index_put_accumulate},
    {"index_reduce|index_reduce.out", index_reduce},
    {"embedding|embedding.out", embedding},
    {"embedding_dense_backward|embedding_dense_backward.out", embedding_dense_backward},
});

}  // namespace
}  // namespace tpu::lower

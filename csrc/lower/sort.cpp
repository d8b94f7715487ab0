// Sorting and order statistics: sort, topk, kthvalue, median, nanmedian.
#include <cmath>

#include "lower/helpers.h"

namespace tpu::lower {
using hlo::Cmp;
using hlo::Op;

namespace {


// x sorted along dim with its s64 source positions. Stable; NaN sorts above every number, as in PyTorch.
std::pair<Value, Value> sort_of(Builder& b, Value x, int64_t dim, bool descending) {
  if (x.type.rank() == 0) return {x, b.splat(hlo::scalar(DType::S64), 0)};
  DType t = x.type.dtype;
  Value idx = b.iota({DType::S64, x.type.dims}, dim);
  Values r = b.sort({x, idx}, dim, true, [t, descending](Builder& r, const Values& a) {
    Value l = a[0], h = a[1];
    Value before = r.compare(l, h, descending ? Cmp::GT : Cmp::LT);
    if (is_float(t)) {
      Value ln = is_nan(r, l), hn = is_nan(r, h);
      Value nan_order = descending ? r.and_(ln, r.unary(Op::Not, hn)) : r.and_(r.unary(Op::Not, ln), hn);
      before = r.or_(before, nan_order);
    }
    return Values{before};
  });
  return {r[0], r[1]};
}

// Elements [lo, hi) of x along dim.
Value take(Builder& b, Value x, int64_t dim, int64_t lo, int64_t hi) {
  if (x.type.rank() == 0) return x;
  Dims start(x.type.rank(), 0), limit = x.type.dims;
  start[dim] = lo;
  limit[dim] = hi;
  return b.slice(x, start, limit);
}

Value as_out(Ctx& c, Value x, size_t k) {
  x = convert(c.b, x, c.out[k].dtype);
  return x.type.dims == c.out[k].dims ? x : c.b.reshape(x, c.out[k].dims);
}

int64_t dim_of(Ctx& c, size_t i) { return wrap_dim(c.i(i), c.v(0).type.rank()); }

// sort(self, dim, descending) and sort.stable(self, *, stable?, dim, descending): always stable.
Values sort(Ctx& c) {
  bool with_stable = c.args.size() == 4;
  auto [v, i] = sort_of(c.b, c.v(0), dim_of(c, with_stable ? 2 : 1), c.flag(with_stable ? 3 : 2));
  return {v, i};
}

// topk(self, k, dim, largest, sorted): the first k of a sort, NaN counting as the largest.
Values topk(Ctx& c) {
  int64_t dim = dim_of(c, 2), k = c.i(1);
  auto [v, i] = sort_of(c.b, c.v(0), dim, c.flag(3, true));
  return {as_out(c, take(c.b, v, dim, 0, k), 0), as_out(c, take(c.b, i, dim, 0, k), 1)};
}

// kthvalue(self, k, dim, keepdim): the k-th smallest (1-based).
Values kthvalue(Ctx& c) {
  int64_t dim = dim_of(c, 2), k = c.i(1);
  auto [v, i] = sort_of(c.b, c.v(0), dim, false);
  return {as_out(c, take(c.b, v, dim, k - 1, k), 0), as_out(c, take(c.b, i, dim, k - 1, k), 1)};
}

// The element at a per-row position `pos` (x's shape without dim) along dim of x: a reduction
// keeping the one element whose position matches.
Value pick(Builder& b, Value x, Value pos, int64_t dim) {
  Dims keep;
  for (int64_t d = 0; d < x.type.rank(); ++d)
    if (d != dim) keep.push_back(d);
  Value iota = b.iota({DType::S64, x.type.dims}, dim);
  Value at = b.compare(iota, b.broadcast_in_dim(pos, x.type.dims, keep), Cmp::EQ);
  Value no = b.splat(hlo::scalar(DType::Pred), 0), zero = b.splat(hlo::scalar(x.type.dtype), 0);
  return b.reduce({at, x}, {no, zero}, {dim}, [](Builder& r, const Values& a) {
    return Values{r.or_(a[0], a[2]), r.select(a[0], a[1], a[3])};
  })[1];
}

// The lower median along dim with its index. With NaNs, median gives the first NaN; nanmedian
// skips them (an all-NaN row gives its first NaN).
std::pair<Value, Value> median_of(Builder& b, Value x, int64_t dim, bool skip_nan) {
  if (x.type.rank() == 0) return {x, b.splat(hlo::scalar(DType::S64), 0)};
  int64_t n = x.type.dims[dim];
  auto [v, i] = sort_of(b, x, dim, false);
  if (!is_float(x.type.dtype)) return {take(b, v, dim, (n - 1) / 2, (n - 1) / 2 + 1), take(b, i, dim, (n - 1) / 2, (n - 1) / 2 + 1)};
  Value ok = convert(b, b.unary(Op::Not, is_nan(b, x)), DType::S64);
  Value cnt = reduce(b, ok, {dim}, Op::Add, 0);  // numbers per row; NaNs sort after them
  auto s64 = [&](double d) { return b.splat({DType::S64, cnt.type.dims}, d); };
  Value pos = skip_nan ? b.div(b.sub(b.max(cnt, s64(1)), s64(1)), s64(2))
                       : b.select(b.compare(cnt, s64(n), Cmp::LT), cnt, s64((n - 1) / 2));
  return {pick(b, v, pos, dim), pick(b, i, pos, dim)};
}
Values median_all(Ctx& c, bool skip_nan) {  // median(self): the value only
  Value x = c.v(0);
  if (x.type.numel() == 0 && is_float(c.out[0].dtype))  // the median of nothing: NaN, as on CPU
    return {c.b.splat(c.out[0], std::numeric_limits<double>::quiet_NaN())};
  if (x.type.rank() != 1) x = c.b.reshape(x, {x.type.numel()});
  return {as_out(c, median_of(c.b, x, 0, skip_nan).first, 0)};
}
Values median_dim(Ctx& c, bool skip_nan) {  // median.dim(self, dim, keepdim) -> (values, indices)
  int64_t dim = dim_of(c, 1);
  if (c.v(0).type.rank() > 0 && c.v(0).type.dims[dim] == 0)
    throw IndexError(std::string(skip_nan ? "nanmedian" : "median") + "(): Expected reduction dim " +
                     std::to_string(dim) + " to have non-zero size.");
  auto [v, i] = median_of(c.b, c.v(0), dim, skip_nan);
  return {as_out(c, v, 0), as_out(c, i, 1)};
}
Values median(Ctx& c) { return median_all(c, false); }
Values nanmedian(Ctx& c) { return median_all(c, true); }
Values median_d(Ctx& c) { return median_dim(c, false); }
Values nanmedian_d(Ctx& c) { return median_dim(c, true); }

Register r({
    {"sort|sort.values|sort.stable|sort.values_stable", sort},
    {"topk|topk.values", topk},
    {"kthvalue|kthvalue.values", kthvalue},
    {"median|median.out", median},
    {"nanmedian|nanmedian.out", nanmedian},
    {"median.dim|median.dim_values", median_d},
    {"nanmedian.dim|nanmedian.dim_values", nanmedian_d},
});

}  // namespace
}  // namespace tpu::lower

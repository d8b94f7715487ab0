// Reductions: sum / mean / prod, min / max and their indices, var / std, vector norms, any / all,
// scans (cumsum, cumprod, logcumsumexp), softmax and its backward.
#include <cmath>
#include <cstdint>

#include "lower/helpers.h"

namespace tpu::lower {
using hlo::Cmp;
using hlo::Op;

namespace {

Dims all_dims(int64_t rank) { return reduce_dims({}, rank); }

// The dims argument i names: an int list (empty: all dims, or none for any/all.dims), one int, or
// None (all dims).
Dims dims_arg(Ctx& c, size_t i, int64_t rank, bool empty_means_all = true) {
  if (!c.has(i)) return all_dims(rank);
  if (c.arg(i).kind == Arg::IntList) return reduce_dims(c.ints(i), rank, empty_means_all);
  return rank == 0 ? Dims{} : Dims{wrap_dim(c.i(i), rank)};
}

// A reduced value as out[k]: its dtype, and its shape (keepdim's 1s or the reduced shape).
Value finish(Ctx& c, Value x, size_t k = 0) {
  x = convert(c.b, x, c.out[k].dtype);
  return x.type.dims == c.out[k].dims ? x : c.b.reshape(x, c.out[k].dims);
}

int64_t count(const Value& x, const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= x.type.dims[d];
  return n;
}

Value k(Builder& b, double v, const Value& like) { return scalar_like(b, v, like.type); }

// Argument i in the computation type of out[r] (sum of bool -> s64, bf16 -> f32, dtype= applied).
Value input(Ctx& c, size_t i = 0, size_t r = 0) { return convert(c.b, c.v(i), compute_type(c.out[r].dtype)); }

// `r`, reduced over `dims` of `shape`, broadcast back to `shape`.
Value expand(Builder& b, Value r, const Dims& dims, const Dims& shape) {
  return broadcast_to(b, keep_dims(b, r, dims, shape), shape);
}


// ---- sum, mean, prod

Values sum_all(Ctx& c) {  // sum(self, *, dtype)
  Value x = input(c);
  return {finish(c, reduce(c.b, x, all_dims(x.type.rank()), Op::Add, 0))};
}
Values sum_dim(Ctx& c) {  // sum.dim_IntList(self, dim, keepdim, *, dtype)
  Value x = input(c);
  return {finish(c, reduce(c.b, x, dims_arg(c, 1, x.type.rank()), Op::Add, 0))};
}
Values nansum(Ctx& c) {
  Value x = input(c);
  if (is_float(x.type.dtype)) x = c.b.select(is_nan(c.b, x), zeros(c.b, x.type), x);
  return {finish(c, reduce(c.b, x, dims_arg(c, 1, x.type.rank()), Op::Add, 0))};
}
Value mean_of(Builder& b, Value x, const Dims& dims) {
  Value s = reduce(b, x, dims, Op::Add, 0);
  return b.div(s, k(b, static_cast<double>(count(x, dims)), s));
}
Values mean_all(Ctx& c) {
  Value x = input(c);
  return {finish(c, mean_of(c.b, x, all_dims(x.type.rank())))};
}
Values mean_dim(Ctx& c) {  // mean.dim(self, dim, keepdim, *, dtype)
  Value x = input(c);
  return {finish(c, mean_of(c.b, x, dims_arg(c, 1, x.type.rank())))};
}
Values prod_all(Ctx& c) {
  Value x = input(c);
  return {finish(c, reduce(c.b, x, all_dims(x.type.rank()), Op::Multiply, 1))};
}
Values prod_dim(Ctx& c) {  // prod.dim_int(self, dim, keepdim, *, dtype)
  Value x = input(c);
  return {finish(c, reduce(c.b, x, dims_arg(c, 1, x.type.rank()), Op::Multiply, 1))};
}
Values count_nonzero(Ctx& c) {
  Value x = c.v(0);
  Value nz = convert(c.b, convert(c.b, x, DType::Pred), DType::S64);
  return {finish(c, reduce(c.b, nz, dims_arg(c, 1, x.type.rank()), Op::Add, 0))};
}

// ---- min / max

// The identity of max (the lowest value) or min (the highest) in t; 64-bit bounds are not doubles.
Value extreme_init(Builder& b, DType t, bool is_max) {
  if (!is_max && (t == DType::S64 || t == DType::U64)) {
    uint64_t v = t == DType::S64 ? uint64_t(INT64_MAX) : UINT64_MAX;
    return b.constant(hlo::scalar(t), &v, sizeof v);
  }
  return b.splat(hlo::scalar(t), is_max ? lowest(t) : highest(t));
}
Value extreme(Builder& b, Value x, const Dims& dims, bool is_max) {
  return b.reduce({x}, {extreme_init(b, x.type.dtype, is_max)}, dims, [is_max](Builder& r, const Values& a) {
    return Values{nan_max(r, a[0], a[1], is_max)};
  })[0];
}
Values amax(Ctx& c) { return {finish(c, extreme(c.b, c.v(0), dims_arg(c, 1, c.v(0).type.rank()), true))}; }
Values amin(Ctx& c) { return {finish(c, extreme(c.b, c.v(0), dims_arg(c, 1, c.v(0).type.rank()), false))}; }
Values max_all(Ctx& c, bool is_max) {  // max(self): an empty input has no max
  if (c.v(0).type.numel() == 0)
    c.fail(std::string(is_max ? "max" : "min") + "(): Expected reduction dim to be specified for input.numel() == 0.");
  return {finish(c, extreme(c.b, c.v(0), all_dims(c.v(0).type.rank()), is_max))};
}
Values max_all(Ctx& c) { return max_all(c, true); }
Values min_all(Ctx& c) { return max_all(c, false); }
Values aminmax(Ctx& c) {  // aminmax(self, *, dim, keepdim) -> (min, max)
  Dims d = dims_arg(c, 1, c.v(0).type.rank());
  return {finish(c, extreme(c.b, c.v(0), d, false), 0), finish(c, extreme(c.b, c.v(0), d, true), 1)};
}

// (values, s64 indices) of the max or min of x along dim: NaN wins, ties go to the first index.
std::pair<Value, Value> arg_extreme(Builder& b, Value x, int64_t dim, bool is_max) {
  DType t = x.type.dtype;
  if (x.type.rank() == 0) return {x, b.splat(hlo::scalar(DType::S64), 0)};
  Value idx = b.iota({DType::S64, x.type.dims}, dim);
  Value v0 = extreme_init(b, t, is_max);
  Value i0 = b.splat(hlo::scalar(DType::S64), static_cast<double>(x.type.dims[dim]));
  Values r = b.reduce({x, idx}, {v0, i0}, {dim}, [t, is_max](Builder& r, const Values& a) {
    Value av = a[0], ai = a[1], bv = a[2], bi = a[3];
    Value better = r.compare(av, bv, is_max ? Cmp::GT : Cmp::LT);
    Value same = r.compare(av, bv, Cmp::EQ);
    if (is_float(t)) {
      Value an = is_nan(r, av), bn = is_nan(r, bv);
      better = r.or_(better, r.and_(an, r.unary(Op::Not, bn)));
      same = r.or_(same, r.and_(an, bn));
    }
    Value take_a = r.or_(better, r.and_(same, r.compare(ai, bi, Cmp::LT)));
    return Values{r.select(take_a, av, bv), r.select(take_a, ai, bi)};
  });
  return {r[0], r[1]};
}
// PyTorch's checks that its meta kernels leave to the CPU kernels.
int64_t nonempty_dim(Ctx& c, const Value& x, int64_t dim, const char* op) {
  dim = wrap_dim(dim, x.type.rank());
  if (x.type.rank() > 0 && x.type.dims[dim] == 0)
    throw IndexError(std::string(op) + "(): Expected reduction dim " + std::to_string(dim) + " to have non-zero size.");
  return dim;
}
Values max_dim(Ctx& c, bool is_max) {  // max.dim(self, dim, keepdim) -> (values, indices)
  Value x = c.v(0);
  auto [v, i] = arg_extreme(c.b, x, nonempty_dim(c, x, c.i(1), is_max ? "max" : "min"), is_max);
  return {finish(c, v, 0), finish(c, i, 1)};
}
Values max_dim(Ctx& c) { return max_dim(c, true); }
Values min_dim(Ctx& c) { return max_dim(c, false); }
Values argmax(Ctx& c, bool is_max) {  // argmax(self, dim?, keepdim)
  Value x = c.v(0);
  const char* op = is_max ? "argmax" : "argmin";
  if (x.type.dtype == DType::Pred) c.fail(std::string(op) + "(): does not support bool input");
  if (!c.has(1) && x.type.numel() == 0)
    throw IndexError(std::string(op) + "(): Expected reduction dim to be specified for input.numel() == 0.");
  int64_t dim = c.has(1) ? nonempty_dim(c, x, c.i(1), op) : 0;
  if (!c.has(1) && x.type.rank() != 1) x = c.b.reshape(x, {x.type.numel()});
  return {finish(c, arg_extreme(c.b, x, dim, is_max).second)};
}
Values argmax(Ctx& c) { return argmax(c, true); }
Values argmin(Ctx& c) { return argmax(c, false); }

// ---- any / all

Values any_all(Ctx& c, bool any) {  // any(self), any.dim(self, dim, keepdim), any.dims(self, dim?, keepdim)
  Value x = convert(c.b, c.v(0), DType::Pred);
  Dims d = dims_arg(c, 1, x.type.rank(), false);
  return {finish(c, reduce(c.b, x, d, any ? Op::Or : Op::And, any ? 0 : 1))};
}
Values any_(Ctx& c) { return any_all(c, true); }
Values all_(Ctx& c) { return any_all(c, false); }

// ---- var / std

// (var, mean) of x over dims; argument `ci` is the correction (default 1). The divisor is
// max(N - correction, 0), as in PyTorch.
std::pair<Value, Value> var_mean_of(Ctx& c, Value x, const Dims& dims, size_t ci) {
  Builder& b = c.b;
  Value mean = mean_of(b, x, dims);
  Value d = b.sub(x, expand(b, mean, dims, x.type.dims));
  if (is_complex(d.type.dtype)) d = b.unary(Op::Abs, d);  // |d|^2 for complex inputs
  Value ss = reduce(b, b.mul(d, d), dims, Op::Add, 0);
  hlo::TensorType s = hlo::scalar(ss.type.dtype);
  Value corr = c.has(ci) ? convert(b, c.v(ci), s.dtype) : b.splat(s, 1);
  Value denom = b.max(b.sub(b.splat(s, static_cast<double>(count(x, dims))), corr), b.splat(s, 0));
  return {b.div(ss, broadcast_to(b, denom, ss.type.dims)), mean};
}
// var.correction(self, dim?, *, correction?, keepdim), and std / var_mean / std_mean alike
Values var_(Ctx& c, bool sqrt, bool with_mean) {
  Value x = convert(c.b, c.v(0), compute_type(c.v(0).type.dtype));  // complex stays complex here
  auto [var, mean] = var_mean_of(c, x, dims_arg(c, 1, x.type.rank()), 2);
  if (sqrt) var = c.b.unary(Op::Sqrt, var);
  if (!with_mean) return {finish(c, var)};
  return {finish(c, var, 0), finish(c, mean, 1)};
}
Values var(Ctx& c) { return var_(c, false, false); }
Values std_(Ctx& c) { return var_(c, true, false); }
Values var_mean(Ctx& c) { return var_(c, false, true); }
Values std_mean(Ctx& c) { return var_(c, true, true); }

// ---- norms

// linalg_vector_norm(self, ord (structural), dim?, keepdim, *, dtype)
Values vector_norm(Ctx& c) {
  Builder& b = c.b;
  double p = c.has(1) ? c.f(1) : 2;  // norm's p=None: 2
  Value x = c.v(0);
  x = convert(b, b.unary(Op::Abs, x), compute_type(c.out[0].dtype));
  Dims d = dims_arg(c, 2, x.type.rank());
  if (std::isinf(p)) return {finish(c, extreme(b, x, d, p > 0))};
  if (p == 0) return {finish(c, reduce(b, convert(b, convert(b, x, DType::Pred), x.type.dtype), d, Op::Add, 0))};
  if (p == 1) return {finish(c, reduce(b, x, d, Op::Add, 0))};
  if (p == 2) return {finish(c, b.unary(Op::Sqrt, reduce(b, b.mul(x, x), d, Op::Add, 0)))};
  Value s = reduce(b, b.binary(Op::Power, x, k(b, p, x)), d, Op::Add, 0);
  return {finish(c, b.binary(Op::Power, s, k(b, 1 / p, s)))};
}

// logsumexp(self, dim, keepdim): max + log(sum(exp(x - max))), with an infinite max kept as is
Values logsumexp(Ctx& c) {
  Builder& b = c.b;
  Value x = input(c);
  Dims d = dims_arg(c, 1, x.type.rank());
  bool cplx = is_complex(x.type.dtype);  // CPU shifts complex inputs by the largest real part
  Value m = extreme(b, cplx ? b.unary(Op::Real, x) : x, d, true);
  m = b.select(b.compare(b.unary(Op::Abs, m), k(b, INFINITY, m), Cmp::EQ), zeros(b, m.type), m);
  if (cplx) m = b.convert(m, x.type.dtype);
  Value s = reduce(b, b.unary(Op::Exp, b.sub(x, expand(b, m, d, x.type.dims))), d, Op::Add, 0);
  return {finish(c, b.add(b.unary(Op::Log, s), m))};
}

// ---- scans

// Inclusive scan of x along dim by doubling steps (Hillis-Steele): log2(n) shifted combines.
Value scan(Builder& b, Value x, int64_t dim, const std::function<Value(Value, Value)>& op, double init) {
  int64_t n = x.type.dims[dim], rank = x.type.rank();
  Value fill = b.splat(hlo::scalar(x.type.dtype), init);
  for (int64_t s = 1; s < n; s *= 2) {
    Dims lo(rank, 0), hi(rank, 0), start(rank, 0);
    lo[dim] = s;
    Value shifted = b.slice(b.pad(x, fill, lo, hi), start, x.type.dims);
    x = op(shifted, x);
  }
  return x;
}
Values cum(Ctx& c, Op op, double init) {  // cumsum(self, dim, *, dtype)
  Value x = input(c);
  if (x.type.rank() == 0) return {finish(c, x)};
  Builder& b = c.b;
  auto f = [&b, op](Value l, Value r) { return b.binary(op, l, r); };
  return {finish(c, scan(b, x, wrap_dim(c.i(1), x.type.rank()), f, init))};
}
Values cumsum(Ctx& c) { return cum(c, Op::Add, 0); }
Values cumprod(Ctx& c) { return cum(c, Op::Multiply, 1); }
// log(exp(l) + exp(r)) = max + log1p(exp(min - max)), the larger (real part) first, as CPU
Value log_add_exp(Builder& b, Value l, Value r) {
  if (is_complex(l.type.dtype)) {
    Value first = b.compare(b.unary(Op::Real, l), b.unary(Op::Real, r), Cmp::GE);
    Value hi = b.select(first, l, r), lo = b.select(first, r, l);
    Value v = b.add(hi, b.unary(Op::Log1p, b.unary(Op::Exp, b.sub(lo, hi))));
    Value lo_re = b.unary(Op::Real, lo);
    return b.select(b.compare(lo_re, k(b, -INFINITY, lo_re), Cmp::EQ), hi, v);
  }
  Value hi = nan_max(b, l, r, true), lo = nan_max(b, l, r, false);
  Value v = b.add(hi, b.unary(Op::Log1p, b.unary(Op::Exp, b.sub(lo, hi))));
  Value infinite = b.or_(b.compare(lo, k(b, -INFINITY, lo), Cmp::EQ), b.compare(hi, k(b, INFINITY, hi), Cmp::EQ));
  return b.select(infinite, hi, v);  // -inf + x, and inf + inf (whose difference is NaN)
}
Values logcumsumexp(Ctx& c) {
  Value x = input(c);
  if (x.type.rank() == 0) return {finish(c, x)};
  Builder& b = c.b;
  int64_t dim = wrap_dim(c.i(1), x.type.rank());
  if (!is_complex(x.type.dtype) || x.type.dims[dim] < 2)
    return {finish(c, scan(b, x, dim, [&b](Value l, Value r) { return log_add_exp(b, l, r); }, -INFINITY))};
  // Complex: the angle of each partial result depends on the order of combination (it is not wrapped
  // to (-pi, pi]), so the running value goes left to right as in CPU's loop.
  Dims one = x.type.dims;
  one[dim] = 1;
  return {finish(c, loop(b, 1, x.type.dims[dim], 1, {x}, [&](Builder& w, Value i, const Values& s) {
    Values at(one.size(), w.splat(hlo::scalar(DType::S32), 0)), before = at;
    at[dim] = i;
    before[dim] = w.sub(i, w.splat(hlo::scalar(DType::S32), 1));
    Value v = log_add_exp(w, w.dynamic_slice(s[0], before, one), w.dynamic_slice(s[0], at, one));
    return Values{w.dynamic_update_slice(s[0], v, at)};
  })[0])};
}

// ---- softmax

Dims softmax_dims(Ctx& c, const Value& x, size_t i) {
  return x.type.rank() == 0 ? Dims{} : Dims{wrap_dim(c.i(i), x.type.rank())};
}
Values softmax(Ctx& c, bool log) {  // _softmax(self, dim, half_to_float)
  Builder& b = c.b;
  Value x = input(c);
  Dims d = softmax_dims(c, x, 1);
  const Dims& shape = x.type.dims;
  Value z = b.sub(x, expand(b, extreme(b, x, d, true), d, shape));
  Value e = b.unary(Op::Exp, z);
  Value s = expand(b, reduce(b, e, d, Op::Add, 0), d, shape);
  return {finish(c, log ? b.sub(z, b.unary(Op::Log, s)) : b.div(e, s))};
}
Values softmax(Ctx& c) { return softmax(c, false); }
Values log_softmax(Ctx& c) { return softmax(c, true); }
// _softmax_backward_data(grad_output, output, dim, input_dtype)
Values softmax_backward(Ctx& c, bool log) {
  Builder& b = c.b;
  Value g = input(c, 0), y = input(c, 1);
  Dims d = softmax_dims(c, g, 2);
  const Dims& shape = g.type.dims;
  if (log) return {finish(c, b.sub(g, b.mul(b.unary(Op::Exp, y), expand(b, reduce(b, g, d, Op::Add, 0), d, shape))))};
  Value s = expand(b, reduce(b, b.mul(g, y), d, Op::Add, 0), d, shape);
  return {finish(c, b.mul(y, b.sub(g, s)))};
}
Values softmax_backward(Ctx& c) { return softmax_backward(c, false); }
Values log_softmax_backward(Ctx& c) { return softmax_backward(c, true); }

Register r({
    {"sum|sum.out", sum_all},
    {"sum.dim_IntList|sum.IntList_out", sum_dim},
    {"nansum|nansum.out", nansum},
    {"mean|mean.dtype_out", mean_all},
    {"mean.dim|mean.out", mean_dim},
    {"prod|prod.out", prod_all},
    {"prod.dim_int|prod.int_out", prod_dim},
    {"count_nonzero|count_nonzero.dim_IntList|count_nonzero.out|count_nonzero.dim_IntList_out", count_nonzero},
    {"amax|amax.out", amax},
    {"amin|amin.out", amin},
    {"max|max.unary_out", max_all},
    {"min|min.unary_out", min_all},
    {"aminmax|aminmax.out", aminmax},
    {"max.dim|max.dim_max", max_dim},
    {"min.dim|min.dim_min", min_dim},
    {"argmax|argmax.out", argmax},
    {"argmin|argmin.out", argmin},
    {"any|any.all_out|any.dim|any.out|any.dims|any.dims_out", any_},
    {"all|all.all_out|all.dim|all.out|all.dims|all.dims_out", all_},
    {"var.correction|var.correction_out", var},
    {"std.correction|std.correction_out", std_},
    {"var_mean.correction|var_mean.correction_out", var_mean},
    {"std_mean.correction|std_mean.correction_out", std_mean},
    {"linalg_vector_norm|linalg_vector_norm.out", vector_norm, 1u << 1},
    {"norm.Scalar|norm.Scalar_out|norm.ScalarOpt_dim|norm.out|norm.ScalarOpt_dim_dtype|norm.dtype_out", vector_norm,
     1u << 1},  // norm's layout matches linalg_vector_norm's
    {"logsumexp|logsumexp.out", logsumexp},
    {"cumsum|cumsum.out", cumsum},
    {"cumprod|cumprod.out", cumprod},
    {"logcumsumexp|logcumsumexp.out|_logcumsumexp|_logcumsumexp.out", logcumsumexp},
    {"_softmax|_softmax.out", softmax},
    {"_log_softmax|_log_softmax.out", log_softmax},
    {"_softmax_backward_data|_softmax_backward_data.out", softmax_backward},
    {"_log_softmax_backward_data|_log_softmax_backward_data.out", log_softmax_backward},
});

}  // namespace
}  // namespace tpu::lower

#include "lower/helpers.h"

#include <cmath>
#include <cstdlib>

#include <algorithm>
#include <limits>

namespace tpu::lower {

bool is_float(DType t) { return info(t).is_float; }
bool is_complex(DType t) { return info(t).is_complex; }
bool is_integral(DType t) { return info(t).is_int || t == DType::Pred; }

DType compute_type(DType t) {
  return (t == DType::F16 || t == DType::BF16 || (info(t).is_float && byte_size(t) == 1)) ? DType::F32 : t;
}

Value convert(Builder& b, Value x, DType t) {
  if (x.type.dtype == t) return x;
  if (t == DType::Pred)  // torch: nonzero -> true (complex: either part)
    return b.compare(x, zeros(b, x.type), hlo::Cmp::NE);
  return b.convert(x, t);
}

Value broadcast_to(Builder& b, Value x, const Dims& shape) {
  if (x.type.dims == shape) return x;
  int64_t offset = static_cast<int64_t>(shape.size()) - x.type.rank();
  if (offset < 0) throw hlo::Error("broadcast: rank " + std::to_string(x.type.rank()) + " into " +
                                   std::to_string(shape.size()));
  // size-1 dims that grow must be dropped first: broadcast_in_dim maps each kept dim 1:1
  Dims keep_shape, keep_map;
  for (int64_t d = 0; d < x.type.rank(); ++d)
    if (x.type.dims[d] == shape[d + offset]) {
      keep_shape.push_back(x.type.dims[d]);
      keep_map.push_back(d + offset);
    }
  if (static_cast<int64_t>(keep_shape.size()) != x.type.rank()) x = b.reshape(x, keep_shape);
  return b.broadcast_in_dim(x, shape, keep_map);
}

Value scalar_like(Builder& b, double v, const TensorType& t) { return b.splat(t, v); }
Value zeros(Builder& b, const TensorType& t) { return b.splat(t, 0); }
Value is_nan(Builder& b, Value x) { return b.compare(x, x, hlo::Cmp::NE); }
Value chebyshev_half_line(Builder& b, Value x, double x0, double L, const std::vector<double>& c) {
  Value u = b.sub(x, scalar_like(b, x0, x.type));
  Value s = b.div(b.sub(u, scalar_like(b, L, x.type)), b.add(u, scalar_like(b, L, x.type)));
  s = b.select(b.compare(x, scalar_like(b, INFINITY, x.type), hlo::Cmp::EQ), scalar_like(b, 1, x.type), s);
  Value s2 = b.add(s, s), b1 = zeros(b, x.type), b2 = zeros(b, x.type);
  for (size_t k = c.size() - 1; k >= 1; --k) {
    Value b0 = b.add(b.sub(b.mul(s2, b1), b2), scalar_like(b, c[k], x.type));
    b2 = b1;
    b1 = b0;
  }
  return b.add(b.sub(b.mul(s, b1), b2), scalar_like(b, c[0], x.type));
}

Values loop(Builder& b, int64_t from, int64_t to, int64_t step, Values state, const LoopFn& f, DType counter) {
  if (step > 0 ? from >= to : from <= to) return state;
  TensorType k{counter, {}};
  state.insert(state.begin(), b.splat(k, static_cast<double>(from)));
  Values r = b.while_(
      state,
      [&](Builder& w, const Values& a) {
        return Values{w.compare(a[0], w.splat(k, static_cast<double>(to)), step > 0 ? hlo::Cmp::LT : hlo::Cmp::GT)};
      },
      [&](Builder& w, const Values& a) {
        Values next = f(w, a[0], Values(a.begin() + 1, a.end()));
        next.insert(next.begin(), w.add(a[0], w.splat(k, static_cast<double>(step))));
        return next;
      });
  r.erase(r.begin());
  return r;
}

Value operand(Ctx& c, size_t i, DType t, const Dims& shape) {
  return broadcast_to(c.b, convert(c.b, c.v(i), t), shape);
}

Value operand(Ctx& c, size_t i) { return operand(c, i, compute_type(c.out[0].dtype), c.out[0].dims); }

Value result(Ctx& c, Value x, size_t k) {
  if (k >= c.out.size()) throw hlo::Error("the rule gives more results than the op returns");
  return convert(c.b, x, c.out[k].dtype);
}

Value rounded(Ctx& c, Value x, size_t k) { return convert(c.b, convert(c.b, x, c.out[k].dtype), x.type.dtype); }
Value rounded_operand(Ctx& c, size_t i) {
  const TensorType& o = c.out[0];
  return broadcast_to(c.b, convert(c.b, convert(c.b, c.v(i), o.dtype), compute_type(o.dtype)), o.dims);
}

DType resample_type(DType t) {
  if (t == DType::U8) return DType::F32;
  if (!is_float(t)) throw hlo::DTypeError("resampling takes floating point or uint8 images");
  return compute_type(t);
}
Value resample_round(Builder& b, Value x, DType out) {
  if (out != DType::U8 || x.type.dtype == DType::U8) return x;
  Value r = b.unary(hlo::Op::Floor, b.add(x, scalar_like(b, 0.5, x.type)));
  return b.binary(hlo::Op::Minimum, b.binary(hlo::Op::Maximum, r, scalar_like(b, 0, r.type)), scalar_like(b, 255, r.type));
}

Values unary(Ctx& c, hlo::Op op) { return {result(c, c.b.unary(op, operand(c, 0)))}; }

Values binary(Ctx& c, hlo::Op op) { return {result(c, c.b.binary(op, operand(c, 0), operand(c, 1)))}; }

Value nan_max(Builder& b, Value x, Value y, bool is_max) {
  Value m = b.binary(is_max ? hlo::Op::Maximum : hlo::Op::Minimum, x, y);
  if (!is_float(x.type.dtype)) return m;
  return b.select(is_nan(b, x), x, b.select(is_nan(b, y), y, m));
}

Value reduce(Builder& b, Value x, const Dims& dims, hlo::Op op, double init) {
  Value init_v = b.splat(hlo::scalar(x.type.dtype), init);
  bool extreme = op == hlo::Op::Maximum || op == hlo::Op::Minimum;
  return b.reduce({x}, {init_v}, dims, [op, extreme](Builder& r, const Values& a) {
    return Values{extreme ? nan_max(r, a[0], a[1], op == hlo::Op::Maximum) : r.binary(op, a[0], a[1])};
  })[0];
}

// TORCH_TPU_DEVICE_CHECKS=0 leaves them out (XLA's clamping, for measuring their cost). Process-wide:
// programs with and without checks differ in text, so the disk cache keeps them apart.
bool checks_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TORCH_TPU_DEVICE_CHECKS");
    return !v || std::string(v) != "0";
  }();
  return on;
}

void check(Builder& b, Value bad, Value value, std::string message, bool index_error) {
  if (!bad.type.numel() || !checks_enabled()) return;
  Dims all(bad.type.rank());
  for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
  value = convert(b, value, DType::S64);
  Value failed = convert(b, reduce(b, convert(b, bad, DType::S64), all, hlo::Op::Maximum, 0), DType::S64);
  Value lowest = b.splat(value.type, -9223372036854775808.0);
  Value worst = reduce(b, b.select(bad, value, lowest), all, hlo::Op::Maximum, -9223372036854775808.0);
  b.checks.push_back({b.concatenate({b.reshape(failed, {1}), b.reshape(worst, {1})}, 0), std::move(message), index_error});
}

void check_bounds(Builder& b, Value idx, int64_t n, std::string message, bool index_error, bool negative) {
  idx = convert(b, idx, DType::S64);
  Value lo = scalar_like(b, negative ? -static_cast<double>(n) : 0.0, idx.type);
  Value hi = scalar_like(b, static_cast<double>(n), idx.type);
  Value bad = b.or_(b.compare(idx, lo, hlo::Cmp::LT), b.compare(idx, hi, hlo::Cmp::GE));
  check(b, bad, idx, std::move(message), index_error);
}

int64_t wrap_dim(int64_t d, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (d < -r || d >= r)  // PyTorch's message and exception type
    throw IndexError("Dimension out of range (expected to be in range of [" + std::to_string(-r) + ", " +
                     std::to_string(r - 1) + "], but got " + std::to_string(d) + ")");
  return d < 0 ? d + r : d;
}

Dims reduce_dims(const std::vector<int64_t>& dims, int64_t rank, bool empty_means_all) {
  Dims out;
  if (dims.empty() && empty_means_all)
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
  for (int64_t d : dims)
    if (rank > 0) out.push_back(wrap_dim(d, rank));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Value keep_dims(Builder& b, Value x, const Dims& dims, const Dims& full_shape) {
  Dims shape = full_shape;
  for (int64_t d : dims) shape[d] = 1;
  return b.reshape(x, shape);
}

double lowest(DType t) {
  switch (t) {
    case DType::Pred: return 0;
    case DType::S8: return -128;
    case DType::S16: return -32768;
    case DType::S32: return std::numeric_limits<int32_t>::min();
    case DType::S64: return static_cast<double>(std::numeric_limits<int64_t>::min());
    case DType::U8: case DType::U16: case DType::U32: case DType::U64: return 0;
    default: return -std::numeric_limits<double>::infinity();
  }
}

double highest(DType t) {
  switch (t) {
    case DType::Pred: return 1;
    case DType::S8: return 127;
    case DType::S16: return 32767;
    case DType::S32: return std::numeric_limits<int32_t>::max();
    case DType::S64: return static_cast<double>(std::numeric_limits<int64_t>::max());
    case DType::U8: return 255;
    case DType::U16: return 65535;
    case DType::U32: return std::numeric_limits<uint32_t>::max();
    case DType::U64: return static_cast<double>(std::numeric_limits<uint64_t>::max());
    default: return std::numeric_limits<double>::infinity();
  }
}

Value conj_of(Builder& b, Value x) {
  if (!is_complex(x.type.dtype)) return x;
  return b.binary(hlo::Op::Complex, b.unary(hlo::Op::Real, x), b.unary(hlo::Op::Neg, b.unary(hlo::Op::Imag, x)));
}

}  // namespace tpu::lower

// Searching and counting (bucketize, searchsorted, isin, histograms, histc, hash_tensor) and number-building ops
// (complex, polar, frexp, gcd, lcm).
#include <cmath>

#include "lower/helpers.h"

namespace tpu::lower {
namespace {
using hlo::Cmp;
using hlo::Op;

// an integer constant of x's (32- or 64-bit) type, exact beyond double's 53 bits
Value IK(Builder& b, const Value& x, int64_t v) {
  if (byte_size(x.type.dtype) == 8) return b.constant(x.type, &v, sizeof v);
  int32_t w = static_cast<int32_t>(v);
  return b.constant(x.type, &w, sizeof w);
}

// The dtype two operands are compared in (PyTorch's result_type, simplified): a Python scalar or a 0-d tensor
// beside a dimensioned tensor only raises the category (an int tensor with a float scalar compares in float32).
DType common(Value a, bool a_weak, Value b, bool b_weak) {
  DType x = a.type.dtype, y = b.type.dtype;
  auto cat = [](DType t) { return is_float(t) ? 2 : t == DType::Pred ? 0 : 1; };
  if (a_weak != b_weak) {
    DType strong = a_weak ? y : x, weak = a_weak ? x : y;
    if (cat(weak) <= cat(strong)) return strong;
    return cat(weak) == 2 ? DType::F32 : DType::S64;
  }
  if (x == y) return x;
  if (cat(x) != cat(y)) return cat(x) > cat(y) ? x : y;
  if (cat(x) == 2) return byte_size(x) == byte_size(y) ? DType::F32 : byte_size(x) > byte_size(y) ? x : y;
  return DType::S64;
}
bool weak(Ctx& c, size_t i, size_t other) {
  return c.arg(i).kind == Arg::Scalar || (c.v(i).type.rank() == 0 && c.v(other).type.rank() > 0);
}

// ---- number builders

// complex(real, imag) / polar(abs, angle)
Values complex_(Ctx& c) {
  DType rt = real_part(c.out[0].dtype);  // CPU: both parts and an out= tensor agree in dtype
  if (c.v(0).type.dtype != c.v(1).type.dtype || c.v(0).type.dtype != real_part(c.stored_dtype(0)))
    c.fail("complex: dtypes of real, imag and out differ");
  return {c.b.binary(Op::Complex, operand(c, 0, rt, c.out[0].dims), operand(c, 1, rt, c.out[0].dims))};
}
Values polar(Ctx& c) {
  DType rt = real_part(c.out[0].dtype);
  Value r = operand(c, 0, rt, c.out[0].dims), t = operand(c, 1, rt, c.out[0].dims);
  return {c.b.binary(Op::Complex, c.b.mul(r, c.b.unary(Op::Cosine, t)), c.b.mul(r, c.b.unary(Op::Sine, t)))};
}

// frexp(x) = (m, e), x = m * 2^e, 0.5 <= |m| < 1; zeros, infinities and NaN keep x with e = 0. Read from the bits
// (subnormals normalized by their leading zeros, no float math that could flush them); half types go through float32.
Values frexp(Ctx& c) {
  Builder& b = c.b;
  bool wide = c.out[0].dtype == DType::F64;
  DType t = c.out[0].dtype, ct = wide ? DType::F64 : DType::F32, it = wide ? DType::S64 : DType::S32;
  int64_t mant = wide ? 52 : 23, bias = wide ? 1022 : 126, width = wide ? 64 : 32, top = wide ? 0x7ff : 0xff;
  Value bits = b.bitcast_convert(convert(b, c.v(0), ct), it);
  Value sign = b.and_(bits, IK(b, bits, int64_t(1) << (width - 1)));
  Value a = b.and_(bits, IK(b, bits, ~(int64_t(1) << (width - 1))));
  Value field = b.binary(Op::ShiftRightLogical, a, IK(b, a, mant));
  Value sub = cmp(b, field, Cmp::EQ, IK(b, a, 0));
  Value p = b.sub(IK(b, a, width - 1), b.unary(Op::CountLeadingZeros, a));  // top set bit of a subnormal
  Value na = b.select(sub, b.binary(Op::ShiftLeft, a, b.sub(IK(b, a, mant), p)), a);
  Value e = b.select(sub, b.sub(p, IK(b, p, bias + mant - 1)), b.sub(field, IK(b, field, bias)));
  Value m = b.or_(b.or_(sign, b.and_(na, IK(b, na, (int64_t(1) << mant) - 1))), IK(b, na, bias << mant));
  Value special = b.or_(cmp(b, a, Cmp::EQ, IK(b, a, 0)), cmp(b, field, Cmp::EQ, IK(b, field, top)));
  m = b.select(special, bits, m);
  e = b.select(special, IK(b, e, 0), e);
  return {convert(b, b.bitcast_convert(m, ct), t), convert(b, e, c.out[1].dtype)};
}

// gcd by Euclid's algorithm on |a|, |b| (every lane steps until all are done); lcm = |a / gcd * b|
Value abs_of(Builder& b, Value x) { return info(x.type.dtype).is_unsigned ? x : b.unary(Op::Abs, x); }
Value gcd_of(Builder& b, Value x, Value y) {
  Values r = b.while_(
      {abs_of(b, x), abs_of(b, y)},
      [&](Builder& w, const Values& v) {
        Value nz = w.compare(v[0], zeros(w, v[0].type), Cmp::NE);
        Dims all;
        for (int64_t d = 0; d < nz.type.rank(); ++d) all.push_back(d);
        return Values{all.empty() ? nz : reduce(w, nz, all, Op::Or, 0)};
      },
      [&](Builder& w, const Values& v) {
        Value nz = w.compare(v[0], zeros(w, v[0].type), Cmp::NE);
        Value safe = w.select(nz, v[0], w.splat(v[0].type, 1));
        return Values{w.select(nz, w.binary(Op::Remainder, v[1], safe), v[0]), w.select(nz, v[0], v[1])};
      });
  return r[1];
}
Values gcd(Ctx& c) {
  const TensorType& o = c.out[0];
  if (!is_integral(o.dtype) || o.dtype == DType::Pred) c.fail_dtype("gcd is defined for integers only");  // as CPU
  if (o.numel() == 0) return {zeros(c.b, o)};
  return {gcd_of(c.b, operand(c, 0), operand(c, 1))};
}
Values lcm(Ctx& c) {
  const TensorType& o = c.out[0];
  if (!is_integral(o.dtype) || o.dtype == DType::Pred) c.fail_dtype("lcm is defined for integers only");  // as CPU
  if (o.numel() == 0) return {zeros(c.b, o)};
  // C++ promotes 8- and 16-bit integers to int: |x / g * y| is taken there, then wraps to the result type
  DType t = byte_size(o.dtype) < 4 ? DType::S32 : o.dtype;
  Value x = operand(c, 0, t, o.dims), y = operand(c, 1, t, o.dims), g = gcd_of(c.b, x, y);
  Value zero = cmp(c.b, g, Cmp::EQ, zeros(c.b, g.type));
  Value l = abs_of(c.b, c.b.mul(c.b.div(x, c.b.select(zero, K(c.b, g, 1), g)), y));
  return {result(c, c.b.select(zero, zeros(c.b, g.type), l))};
}

// ---- searching

// flat[idx]: a 1-D `flat` read at s64 indices of any shape
Value take_flat(Builder& b, Value flat, Value idx) {
  hlo::GatherDims g;
  g.collapsed_slice_dims = {0};
  g.start_index_map = {0};
  g.index_vector_dim = idx.type.rank();
  Dims with_one = idx.type.dims;
  with_one.push_back(1);
  return b.gather(flat, b.reshape(idx, with_one), g, {1});
}

// Where each value would be inserted into seq's last dim, by CPU's own binary search (same probes, so unsorted
// data gives CPU's answer too): the left side moves right while !(s >= v), the right side while !(s > v), so NaN
// values land at the end (Side::Less moves while s < v: NaN entries of seq count as greater, as sorted last).
// `seq` is 1-D or matches `vals` in all but the last dim; `sorter` (or null) orders it.
enum class Side { Left, Right, Less };
Value search(Builder& b, Value seq, Value vals, const Value* sorter, Side side, DType out) {
  int64_t r = vals.type.rank(), m = seq.type.dims.back();
  TensorType it{DType::S64, vals.type.dims};
  if (m == 0 || it.numel() == 0) return zeros(b, {out, it.dims});
  Value base = zeros(b, it);  // where each value's own sequence starts in the flat seq
  if (seq.type.rank() > 1)
    for (int64_t d = 0, stride = m; d + 1 < r; ++d, stride = m) {
      for (int64_t e = d + 1; e + 1 < r; ++e) stride *= vals.type.dims[e];
      base = b.add(base, b.mul(b.iota(it, d), b.splat(it, double(stride))));
    }
  Value flat = b.reshape(seq, {seq.type.numel()});
  Value order = sorter ? b.reshape(convert(b, *sorter, DType::S64), {seq.type.numel()}) : Value{};
  Value start = zeros(b, it), end = b.splat(it, double(m)), one = b.splat(it, 1);
  for (int64_t k = m; k > 0; k >>= 1) {  // at most floor(log2 m) + 1 probes
    Value live = cmp(b, start, Cmp::LT, end);
    Value mid = b.add(start, b.binary(Op::ShiftRightLogical, b.sub(end, start), one));
    mid = b.min(mid, b.splat(it, double(m - 1)));
    Value at = b.add(base, sorter ? take_flat(b, order, b.add(base, mid)) : mid);
    Value s = take_flat(b, flat, at);
    Value go = side == Side::Less ? cmp(b, s, Cmp::LT, vals)
                                  : b.unary(Op::Not, cmp(b, s, side == Side::Right ? Cmp::GT : Cmp::GE, vals));
    go = b.and_(live, go);
    Value stop = b.and_(live, b.unary(Op::Not, go));
    start = b.select(go, b.add(mid, one), start);
    end = b.select(stop, mid, end);
  }
  return convert(b, start, out);
}

// isin(elements, test_elements): elements[..., None] == test_elements.flatten() for a few test elements; past
// that, each element's lower bound in the sorted test elements (NaN last) is compared (negated by invert)
Values isin(Ctx& c) {
  Builder& b = c.b;
  const TensorType& o = c.out[0];
  DType ct = common(c.v(0), weak(c, 0, 1), c.v(1), weak(c, 1, 0));
  Value x = convert(b, c.v(0), ct), t = convert(b, c.v(1), ct);
  int64_t m = t.type.numel(), r = o.rank();
  Value found;
  if (m == 0 || o.numel() == 0) {
    found = convert(b, zeros(b, o), DType::Pred);
  } else if (m <= 32) {
    Dims big = o.dims, xd;
    big.push_back(m);
    for (int64_t d = 0; d < r; ++d) xd.push_back(d);
    Value eq = cmp(b, b.broadcast_in_dim(x, big, xd), Cmp::EQ, b.broadcast_in_dim(b.reshape(t, {m}), big, {r}));
    found = reduce(b, eq, {r}, Op::Or, 0);
  } else {
    Value sorted = b.sort({b.reshape(t, {m})}, 0, false, [](Builder& s, const Values& a) {
      Value lt = s.compare(a[0], a[1], Cmp::LT);
      if (!is_float(a[0].type.dtype)) return Values{lt};
      return Values{s.or_(lt, s.and_(s.unary(Op::Not, is_nan(s, a[0])), is_nan(s, a[1])))};
    })[0];
    TensorType it{DType::S64, o.dims};
    Value at = search(b, sorted, x, nullptr, Side::Less, DType::S64);
    Value s = take_flat(b, sorted, b.min(at, b.splat(it, double(m - 1))));
    found = b.and_(cmp(b, at, Cmp::LT, b.splat(it, double(m))), cmp(b, s, Cmp::EQ, x));
  }
  if (c.flag(3)) found = b.unary(Op::Not, found);
  return {convert(b, found, o.dtype)};
}

// bucketize(self, boundaries, out_int32, right)
Values bucketize(Ctx& c) {
  if (c.v(1).type.rank() != 1) c.fail("boundaries tensor must be 1 dimension");  // as CPU
  DType ct = common(c.v(0), weak(c, 0, 1), c.v(1), weak(c, 1, 0));
  Side side = c.flag(3) ? Side::Right : Side::Left;
  return {search(c.b, convert(c.b, c.v(1), ct), convert(c.b, c.v(0), ct), nullptr, side, c.out[0].dtype)};
}
// searchsorted(sorted_sequence, self, out_int32, right, side, sorter)
Values searchsorted(Ctx& c) {
  DType ct = common(c.v(0), weak(c, 0, 1), c.v(1), weak(c, 1, 0));
  Side side = c.flag(3) || (c.has(4) && c.s(4) == "right") ? Side::Right : Side::Left;
  Value sorter = c.has(5) ? c.v(5) : Value{};
  return {search(c.b, convert(c.b, c.v(0), ct), convert(c.b, c.v(1), ct), c.has(5) ? &sorter : nullptr, side,
                 c.out[0].dtype)};
}

// hash_tensor(self, dim, keepdim, mode=0): xor of the elements widened to 64 bits (floats to double) as uint64
Values hash_tensor(Ctx& c) {
  Value x = c.v(0);
  DType t = x.type.dtype;
  x = is_float(t) ? c.b.bitcast_convert(convert(c.b, x, DType::F64), DType::U64)
                  : c.b.bitcast_convert(c.b.convert(x, info(t).is_unsigned ? DType::U64 : DType::S64), DType::U64);
  Dims dims = reduce_dims(c.ints(1), x.type.rank());
  Value h = reduce(c.b, x, dims, Op::Xor, 0);
  return {c.b.reshape(h, c.out[0].dims)};
}

// ---- histograms: rows of x [N, D], one bin-edge sequence per column

// CPU's bin edges for column d: linspace(lo, hi, bins + 1) in x's dtype, where (lo, hi) is `range` or the
// column's min and max (0 and 1 when empty, each widened by 0.5 when equal)
Value auto_edges(Ctx& c, Value x, int64_t d, int64_t bins, size_t range_arg) {
  Builder& b = c.b;
  DType t = x.type.dtype;
  int64_t n = x.type.dims[0], m = bins + 1;
  TensorType f64{DType::F64, {}};
  Value lo, hi;
  if (c.has(range_arg)) {
    lo = b.splat(f64, c.floats(range_arg)[2 * d]);
    hi = b.splat(f64, c.floats(range_arg)[2 * d + 1]);
  } else if (n == 0) {
    lo = b.splat(f64, 0);
    hi = b.splat(f64, 1);
  } else {
    Value col = convert(b, b.reshape(b.slice(x, {0, d}, {n, d + 1}), {n}), DType::F64);
    lo = reduce(b, col, {0}, Op::Minimum, INFINITY);
    hi = reduce(b, col, {0}, Op::Maximum, -INFINITY);
  }
  Value eq = cmp(b, lo, Cmp::EQ, hi);
  lo = b.select(eq, b.sub(lo, K(b, lo, 0.5)), lo);
  hi = b.select(eq, b.add(hi, K(b, hi, 0.5)), hi);
  // linspace as CPU computes it in float types: the first half from the start, the second from the end
  TensorType et{t, {m}};
  Value start = b.broadcast_in_dim(convert(b, lo, t), {m}, {}), end = b.broadcast_in_dim(convert(b, hi, t), {m}, {});
  Value count = b.optimization_barrier({b.splat(et, double(bins))})[0];  // no inexact reciprocal
  Value step = b.div(b.sub(end, start), count), i = b.iota(et, 0);
  Value first = cmp(b, b.iota({DType::S64, {m}}, 0), Cmp::LT, b.splat({DType::S64, {m}}, double(m / 2)));
  return b.select(first, b.add(start, b.mul(step, i)), b.sub(end, b.mul(step, b.sub(K(b, i, double(bins)), i))));
}

// The bin of each value v [N] among edges e [M], as CPU finds it: std::upper_bound (its exact probe sequence, so
// unsorted edges agree too) minus 1, the last edge counting into the last bin; valid: e[0] <= v <= e[M-1].
std::pair<Value, Value> bin_of(Builder& b, Value v, Value e) {
  int64_t n = v.type.dims[0], m = e.type.dims[0];
  TensorType it{DType::S64, {n}};
  Value first = b.splat(it, 0), len = b.splat(it, double(m)), one = b.splat(it, 1);
  for (int64_t k = m; k > 0; k >>= 1) {  // floor(log2 m) + 1 probes
    Value half = b.binary(Op::ShiftRightLogical, len, one), mid = b.add(first, half);
    Value go_left = cmp(b, v, Cmp::LT, take_flat(b, e, b.min(mid, b.splat(it, double(m - 1)))));
    Value live = cmp(b, len, Cmp::GT, zeros(b, it));
    first = b.select(b.and_(live, b.unary(Op::Not, go_left)), b.add(mid, one), first);
    len = b.select(live, b.select(go_left, half, b.sub(b.sub(len, half), one)), len);
  }
  Value pos = b.sub(first, K(b, first, 1));
  pos = b.select(cmp(b, pos, Cmp::EQ, K(b, pos, double(m - 1))), b.sub(pos, K(b, pos, 1)), pos);
  Value e0 = b.broadcast_in_dim(b.reshape(b.slice(e, {0}, {1}), {}), {n}, {});
  Value e1 = b.broadcast_in_dim(b.reshape(b.slice(e, {m - 1}, {m}), {}), {n}, {});
  Value valid = b.and_(cmp(b, v, Cmp::GE, e0), cmp(b, v, Cmp::LE, e1));
  return {pos, valid};
}

// hist[bins...] = sum of weights (or 1) of the rows of x [N, D] falling in each cell; density divides by the
// total and each cell's widths
Value histogram_of(Ctx& c, Value x, const Values& edges, size_t weight_arg, bool density, const TensorType& o) {
  Builder& b = c.b;
  int64_t n = x.type.dims[0], dn = static_cast<int64_t>(edges.size()), total = 1;
  Dims shape;
  for (const Value& e : edges) shape.push_back(e.type.dims[0] - 1);
  for (int64_t s : shape) total *= s;
  DType t = o.dtype;
  Value hist;
  if (n == 0 || total == 0) {
    hist = zeros(b, {t, {total}});
  } else {
    TensorType it{DType::S64, {n}};
    Value idx = zeros(b, it), valid = convert(b, b.splat(it, 1), DType::Pred);
    for (int64_t d = 0; d < dn; ++d) {
      auto [pos, ok] = bin_of(b, b.reshape(b.slice(x, {0, d}, {n, d + 1}), {n}), edges[d]);
      idx = b.add(b.mul(idx, K(b, idx, double(shape[d]))), pos);
      valid = b.and_(valid, ok);
    }
    Value w = c.has(weight_arg) ? convert(b, b.reshape(c.v(weight_arg), {n}), t) : b.splat({t, {n}}, 1);
    // scatter-add into total + 1 cells, the last one collecting what falls outside
    idx = b.reshape(b.select(valid, idx, b.splat(it, double(total))), {n, 1});
    hlo::ScatterDims sd;
    sd.inserted_window_dims = {0};
    sd.scatter_dims_to_operand_dims = {0};
    sd.index_vector_dim = 1;
    hist = b.scatter({zeros(b, {t, {total + 1}})}, idx, {w}, sd, [](Builder& r, const Values& a) {
      return Values{r.add(a[0], a[1])};
    })[0];
    hist = b.slice(hist, {0}, {total});
  }
  hist = b.reshape(hist, shape);
  if (density) {
    Dims all;
    for (int64_t d = 0; d < dn; ++d) all.push_back(d);
    hist = b.div(hist, b.broadcast_in_dim(reduce(b, hist, all, Op::Add, 0), shape, {}));
    for (int64_t d = 0; d < dn; ++d) {
      Value e = convert(b, edges[d], t);
      Value width = b.sub(b.slice(e, {1}, {shape[d] + 1}), b.slice(e, {0}, {shape[d]}));
      hist = b.div(hist, b.broadcast_in_dim(width, shape, {d}));
    }
  }
  return b.reshape(hist, o.dims);
}

// counts[k] = how many of the s64 bins `pos` [N] (valid where `ok`) equal k, for k < bins, accumulated in ct
Value count_bins(Builder& b, Value pos, Value ok, int64_t bins, DType ct) {
  int64_t n = pos.type.dims[0];
  TensorType it{DType::S64, {n}};
  Value idx = b.reshape(b.select(ok, pos, b.splat(it, double(bins))), {n, 1});  // the last cell: outside
  hlo::ScatterDims sd;
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  Value hist = b.scatter({zeros(b, {ct, {bins + 1}})}, idx, {b.splat({ct, {n}}, 1)}, sd, [](Builder& r, const Values& a) {
    return Values{r.add(a[0], a[1])};
  })[0];
  return b.slice(hist, {0}, {bins});
}

// histc(self, bins, min, max): `bins` equal bins over [min, max], or over the data's [min, max] when min == max
// (computed on the device), widened by 1 on each side while still equal; values outside (and NaN) are not counted.
// Floats bin as CPU does: pos = int((v - lo) * bins / (hi - lo)) in self's dtype, lo and hi rounded to it, the top
// edge going to the last bin. Integers (which CPU rejects) bin as CUDA does: min and max in self's dtype, the
// position by int64 arithmetic, the counts in self's dtype. A non-finite range is refused before the op runs
// (checks.cpp reads the data's range on the host, as CUDA does).
Values histc(Ctx& c) {
  Builder& b = c.b;
  const TensorType& o = c.out[0];
  DType t = c.v(0).type.dtype;
  if (t == DType::Pred || is_complex(t))  // as CUDA (CPU takes floats only)
    c.fail_dtype("\"histc\" not implemented for '" + std::string(info(t).name) + "'");
  int64_t bins = o.dims.empty() ? 1 : o.dims[0], n = c.v(0).type.numel();
  if (n == 0 || bins == 0) return {zeros(b, o)};
  Value x = b.reshape(c.v(0), {n});
  bool fl = is_float(t);
  DType st = fl ? DType::F64 : DType::S64;  // the range's type (CPU: double; CUDA: the accumulate type)
  auto bound = [&](size_t i) { return fl ? convert(b, c.v(i), DType::F64) : convert(b, convert(b, c.v(i), t), st); };
  Value lo = bound(2), hi = bound(3), xs = convert(b, x, st);
  int64_t top = INT64_MAX, bottom = INT64_MIN;
  Value lo_init = fl ? b.splat(hlo::scalar(st), INFINITY) : b.constant(hlo::scalar(st), &top, sizeof top);
  Value hi_init = fl ? b.splat(hlo::scalar(st), -INFINITY) : b.constant(hlo::scalar(st), &bottom, sizeof bottom);
  auto extreme = [&](Value init, Op op) {
    return b.reduce({xs}, {init}, {0}, [op](Builder& r, const Values& a) { return Values{r.binary(op, a[0], a[1])}; })[0];
  };
  Value same = cmp(b, lo, Cmp::EQ, hi);
  lo = b.select(same, extreme(lo_init, Op::Minimum), lo);
  hi = b.select(same, extreme(hi_init, Op::Maximum), hi);
  same = cmp(b, lo, Cmp::EQ, hi);
  lo = b.select(same, b.sub(lo, K(b, lo, 1)), lo);
  hi = b.select(same, b.add(hi, K(b, hi, 1)), hi);
  TensorType it{DType::S64, {n}};
  Value pos, ok;
  if (fl) {
    // CPU's edges are linspace(lo, hi) in self's dtype: double -> float -> half types, as c10 converts
    DType ct = compute_type(t);
    auto in_t = [&](Value v) { return convert(b, convert(b, v, t), ct); };  // rounded to t, computed in ct
    Value l = in_t(convert(b, lo, ct == DType::F64 ? DType::F64 : DType::F32));
    Value h = in_t(convert(b, hi, ct == DType::F64 ? DType::F64 : DType::F32));
    Value v = convert(b, x, ct), lb = b.broadcast_in_dim(l, {n}, {}), hb = b.broadcast_in_dim(h, {n}, {});
    ok = b.and_(cmp(b, v, Cmp::GE, lb), cmp(b, v, Cmp::LE, hb));
    Value scaled = in_t(b.mul(in_t(b.sub(v, lb)), in_t(b.splat({ct, {n}}, double(bins)))));
    Value q = in_t(b.div(scaled, b.broadcast_in_dim(in_t(b.sub(h, l)), {n}, {})));
    pos = b.convert(b.select(ok, q, zeros(b, q.type)), DType::S64);
  } else {
    Value lb = b.broadcast_in_dim(lo, {n}, {}), hb = b.broadcast_in_dim(hi, {n}, {});
    ok = b.and_(cmp(b, xs, Cmp::GE, lb), cmp(b, xs, Cmp::LE, hb));
    Value width = b.max(b.sub(hb, lb), b.splat(it, 1));
    pos = b.div(b.mul(b.sub(xs, lb), b.splat(it, double(bins))), width);
  }
  pos = b.clamp(b.splat(it, 0), pos, b.splat(it, double(bins - 1)));  // the top edge: the last bin
  DType acc = fl ? compute_type(t) : DType::S64;
  return {convert(b, b.reshape(count_bins(b, pos, ok, bins, acc), o.dims), o.dtype)};
}

Value rows(Ctx& c, int64_t d) {  // self as [N, d]
  Value x = c.v(0);
  return c.b.reshape(x, {d == 0 ? 0 : x.type.numel() / d, d});
}

// histogram.bin_ct(self, bins, range, weight, density) -> (hist, bin_edges)
Values histogram_bin_ct(Ctx& c) {
  Value x = rows(c, 1), e = auto_edges(c, x, 0, c.i(1), 2);
  return {histogram_of(c, x, {e}, 3, c.flag(4), c.out[0]), e};
}
// histogram.bins_tensor(self, bins, weight, density) -> (hist, bin_edges)
Values histogram_bins(Ctx& c) {
  Value x = rows(c, 1), e = convert(c.b, c.v(1), x.type.dtype);
  return {histogram_of(c, x, {e}, 2, c.flag(3), c.out[0]), convert(c.b, c.v(1), c.out[1].dtype)};
}
// _histogramdd_bin_edges(self, bins, range, weight, density) -> Tensor[]
Values histogramdd_bin_edges(Ctx& c) {
  int64_t dn = static_cast<int64_t>(c.ints(1).size());
  Value x = rows(c, c.v(0).type.dims.back());
  Values out;
  for (int64_t d = 0; d < dn; ++d) out.push_back(auto_edges(c, x, d, c.ints(1)[d], 2));
  return out;
}
// _histogramdd_from_bin_cts(self, bins, range, weight, density)
Values histogramdd_cts(Ctx& c) {
  Value x = rows(c, c.v(0).type.dims.back());
  return {histogram_of(c, x, histogramdd_bin_edges(c), 3, c.flag(4), c.out[0])};
}
// _histogramdd_from_bin_tensors(self, bins, weight, density)
Values histogramdd_tensors(Ctx& c) {
  Value x = rows(c, c.v(0).type.dims.back());
  Values edges;
  for (const Value& e : c.vs(1)) edges.push_back(convert(c.b, e, x.type.dtype));
  return {histogram_of(c, x, edges, 2, c.flag(3), c.out[0])};
}

Register r({
    {"complex|complex.out", complex_}, {"polar|polar.out", polar},
    {"frexp.Tensor|frexp.Tensor_out", frexp},
    {"gcd|gcd.out", gcd}, {"lcm|lcm.out", lcm},
    {"isin.Tensor_Tensor|isin.Tensor_Tensor_out|isin.Tensor_Scalar|isin.Tensor_Scalar_out|isin.Scalar_Tensor|"
     "isin.Scalar_Tensor_out",
     isin},
    {"bucketize.Tensor|bucketize.Tensor_out|bucketize.Scalar|bucketize.Scalar_out", bucketize},
    {"searchsorted.Tensor|searchsorted.Tensor_out|searchsorted.Scalar|searchsorted.Scalar_out", searchsorted},
    {"hash_tensor|hash_tensor.out", hash_tensor},
    {"histc|histc.out", histc},
    {"histogram.bin_ct|histogram.bin_ct_out", histogram_bin_ct},
    {"histogram.bins_tensor|histogram.bins_tensor_out", histogram_bins},
    {"_histogramdd_bin_edges", histogramdd_bin_edges},
    {"_histogramdd_from_bin_cts|_histogramdd_from_bin_cts.out", histogramdd_cts},
    {"_histogramdd_from_bin_tensors|_histogramdd_from_bin_tensors.out", histogramdd_tensors},
});

}  // namespace
}  // namespace tpu::lower

// Random ops. Each call gets its generator's seed and a fresh counter as two trailing s64 operands
// (Rule::random); ThreeFry(seed) at the counter gives the op its own key, so the streams of
// different ops never overlap and reseeding never recompiles. Bits become distributions here.
#include <cmath>
#include <limits>

#include "lower/helpers.h"

namespace tpu::lower {
namespace {
using hlo::Op;
using hlo::RngAlgorithm;

// Random bits (u32 or u64) of `shape` for this op.
Value bits(Ctx& c, const Dims& shape, DType t) {
  Builder& b = c.b;
  auto word = [&](Value s) { return b.reshape(b.bitcast_convert(b.reshape(s, {}), DType::U64), {1}); };
  Value state = b.concatenate({word(c.rng_seed()), word(c.rng_counter())}, 0);
  Value key = b.rng_bit_generator(state, RngAlgorithm::ThreeFry, {DType::U64, {1}}).second;
  Value fresh = b.concatenate({key, b.splat({DType::U64, {1}}, 0)}, 0);
  return b.rng_bit_generator(fresh, RngAlgorithm::ThreeFry, {t, shape}).second;
}

// Significand bits of a float type (what PyTorch's uniform draws keep).
int digits(DType t) {
  switch (t) {
    case DType::F64: return 53;
    case DType::F16: return 11;
    case DType::BF16: return 8;
    default: return 24;
  }
}

// Uniform in [0, 1) with `d` random bits, as f32 (d <= 24) or f64; `open`: in (0, 1) instead.
Value unit(Ctx& c, const Dims& shape, int d, bool open = false) {
  Builder& b = c.b;
  DType bt = d > 24 ? DType::U64 : DType::U32, ft = d > 24 ? DType::F64 : DType::F32;
  Value r = bits(c, shape, bt);
  r = b.binary(Op::ShiftRightLogical, r, b.splat({bt, shape}, (bt == DType::U64 ? 64 : 32) - d));
  Value u = b.convert(r, ft);
  if (open) u = b.add(u, b.splat(u.type, 0.5));
  return b.mul(u, b.splat(u.type, std::ldexp(1.0, -d)));
}

// Standard normal samples in the compute type `t` (Box-Muller on two 24- or 53-bit uniforms). They are
// drawn flat, in a multiple of 256: XLA CPU compiles the log/cos loop of other lengths several times slower.
Value standard_normal(Ctx& c, const Dims& shape, DType t) {
  Builder& b = c.b;
  int d = t == DType::F64 ? 52 : 23;
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  int64_t padded = (n + 255) / 256 * 256;
  Value u = convert(b, unit(c, {2, padded}, d, true), t);
  Value u1 = b.reshape(b.slice(u, {0, 0}, {1, padded}), {padded});
  Value u2 = b.reshape(b.slice(u, {1, 0}, {2, padded}), {padded});
  Value radius = b.unary(Op::Sqrt, b.mul(scalar_like(b, -2, u1.type), b.unary(Op::Log, u1)));
  Value z = b.mul(radius, b.unary(Op::Cosine, b.mul(scalar_like(b, 2 * M_PI, u2.type), u2)));
  return b.reshape(n == padded ? z : b.slice(z, {0}, {n}), shape);
}

// Complex results draw their real and imaginary parts independently, as CPU draws view_as_real(self):
// the samples of `shape` get a leading dim of 2 (the parts), which `parts_to_complex` pairs up.
Dims sample_shape(const TensorType& o) {
  Dims shape = o.dims;
  if (is_complex(o.dtype)) shape.insert(shape.begin(), 2);
  return shape;
}
Value parts_to_complex(Builder& b, Value parts) {
  Dims lo(parts.type.dims.size(), 0), hi = parts.type.dims, shape(hi.begin() + 1, hi.end());
  auto part = [&](int64_t k) {
    lo[0] = k, hi[0] = k + 1;
    return b.reshape(b.slice(parts, lo, hi), shape);
  };
  Value re = part(0);
  return b.binary(Op::Complex, re, part(1));
}

// `x` (from <= x < to, computed wider) as `narrow` holds it, rounded toward `from` as CPU's draws are
// (to-nearest could give `to` itself).
Value round_down_to(Builder& b, Value x, DType narrow) {
  DType bits_t = byte_size(narrow) == 2 ? DType::S16 : DType::S8;
  Value y = b.convert(x, narrow), bits = b.bitcast_convert(y, bits_t);
  auto k = [&](double v) { return b.splat(bits.type, v); };
  Value zero = b.splat(y.type, 0);
  // one step toward -inf: positive values lose a unit of their bits, negative ones gain one, zero
  // becomes the smallest negative subnormal
  Value down = b.select(b.compare(y, zero, hlo::Cmp::GT), b.sub(bits, k(1)),
                        b.select(b.compare(y, zero, hlo::Cmp::LT), b.add(bits, k(1)), k(bits_t == DType::S16 ? -32767 : -127)));
  Value rounded_up = b.compare(b.convert(y, x.type.dtype), x, hlo::Cmp::GT);
  return b.convert(b.select(rounded_up, b.bitcast_convert(down, narrow), y), x.type.dtype);
}

// uniform_(self, from, to): from + u * (to - from), u with the result type's significand bits.
Values uniform(Ctx& c) {
  const TensorType& o = c.out[0];
  DType part = real_part(o.dtype), t = compute_type(part), stored = real_part(c.stored_dtype(0));
  Dims shape = sample_shape(o);
  Value u = convert(c.b, unit(c, shape, digits(stored)), t);
  Value from = operand(c, 1, t, shape), to = operand(c, 2, t, shape);
  bool narrow = byte_size(stored) < byte_size(t);
  if (narrow) {  // CPU's bounds are of the result type
    from = c.b.convert(c.b.convert(from, stored), t);
    to = c.b.convert(c.b.convert(to, stored), t);
  }
  Value x = c.b.add(c.b.mul(u, c.b.sub(to, from)), from);
  if (narrow) x = round_down_to(c.b, x, stored);
  return {result(c, is_complex(o.dtype) ? parts_to_complex(c.b, x) : x)};
}

// normal_(self, mean, std), normal.Tensor_float / float_Tensor / Tensor_Tensor (mean, std). A complex
// sample has parts of variance 1/2; a real mean is added to both parts (CPU's normal_ of view_as_real).
Value normal_of(Ctx& c, size_t mean, size_t std) {
  const TensorType& o = c.out[0];
  if (o.numel() == 0) return zeros(c.b, o);  // of any dtype, as CPU (whose kernel takes floats only)
  DType t = compute_type(o.dtype);
  Value z = standard_normal(c, sample_shape(o), compute_type(real_part(o.dtype)));
  if (!is_complex(o.dtype)) return result(c, c.b.add(operand(c, mean), c.b.mul(operand(c, std), z)));
  z = parts_to_complex(c.b, c.b.mul(z, scalar_like(c.b, M_SQRT1_2, z.type)));
  Value m = c.v(mean);
  if (!is_complex(m.type.dtype)) {
    Value r = convert(c.b, m, real_part(t));
    m = c.b.binary(Op::Complex, r, r);
  }
  Value sd = operand(c, std);
  return result(c, c.b.add(broadcast_to(c.b, convert(c.b, m, t), o.dims), c.b.mul(sd, z)));
}
Values normal_(Ctx& c) { return {normal_of(c, 1, 2)}; }
Values normal(Ctx& c) { return {normal_of(c, 0, 1)}; }
Values log_normal(Ctx& c) {
  Value x = normal_of(c, 1, 2);
  return {result(c, c.b.unary(Op::Exp, convert(c.b, x, compute_type(c.out[0].dtype))))};
}

// 1 where u < p, else 0, in the result type. p: argument `i` (a float or a tensor of probabilities).
Value coin(Ctx& c, size_t i) {
  const TensorType& o = c.out[0];
  Value u = convert(c.b, unit(c, o.dims, 24), DType::F64);
  Value p = operand(c, i, DType::F64, o.dims);
  return convert(c.b, c.b.compare(u, p, hlo::Cmp::LT), o.dtype);
}
Values bernoulli_p(Ctx& c) { return {coin(c, 1)}; }    // bernoulli_(self, p), bernoulli.p(self, p)
Values bernoulli_out(Ctx& c) { return {coin(c, 0)}; }  // bernoulli(self = p, out=)

Values exponential(Ctx& c) {  // -log(1 - u) / lambd
  const TensorType& o = c.out[0];
  DType t = compute_type(o.dtype);
  Value u = convert(c.b, unit(c, o.dims, t == DType::F64 ? 53 : 24), t);
  Value e = c.b.unary(Op::Neg, c.b.unary(Op::Log1p, c.b.unary(Op::Neg, u)));
  return {result(c, c.b.div(e, operand(c, 1)))};
}
Values cauchy(Ctx& c) {  // median + sigma * tan(pi (u - 1/2))
  const TensorType& o = c.out[0];
  DType t = compute_type(o.dtype);
  Value u = convert(c.b, unit(c, o.dims, t == DType::F64 ? 53 : 23, true), t);
  Value x = c.b.unary(Op::Tan, c.b.mul(scalar_like(c.b, M_PI, u.type), c.b.sub(u, scalar_like(c.b, 0.5, u.type))));
  return {result(c, c.b.add(operand(c, 1), c.b.mul(operand(c, 2), x)))};
}
Values geometric(Ctx& c) {  // ceil(log(u) / log(1 - p)), u in (0, 1)
  const TensorType& o = c.out[0];
  Value u = unit(c, o.dims, 53, true);
  Value p = operand(c, 1, DType::F64, o.dims);
  Value x = c.b.div(c.b.unary(Op::Log, u), c.b.unary(Op::Log1p, c.b.unary(Op::Neg, p)));
  return {convert(c.b, c.b.unary(Op::Ceil, x), o.dtype)};
}

// Integers uniform in [from, from + range) (range 0: all 2^64), in the result type.
Value integers(Ctx& c, int64_t from, uint64_t range) {
  Builder& b = c.b;
  const TensorType& o = c.out[0];
  auto k = [&](uint64_t v) { return b.constant({DType::U64, o.dims}, &v, sizeof v); };  // exact, unlike splat
  Value r = bits(c, o.dims, DType::U64);
  if (range) r = b.binary(Op::Remainder, r, k(range));
  r = b.add(r, k(static_cast<uint64_t>(from)));
  return convert(b, b.bitcast_convert(r, DType::S64), o.dtype);
}
// The largest value random_ draws for a dtype: 2^digits for floats, the maximum for integers.
int64_t top(DType t) {
  if (is_float(t)) return int64_t{1} << digits(t);
  if (t == DType::U64 || t == DType::S64) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(highest(t));
}
Values random_all(Ctx& c) {  // random_(self): [0, top]
  uint64_t range = static_cast<uint64_t>(top(c.out[0].dtype)) + 1;
  return {integers(c, 0, range)};
}
Values random_to(Ctx& c) {  // random_.to(self, to): [0, to)
  int64_t to = c.i(1);
  if (to <= 0) c.fail("random_ expects 'from' to be less than 'to', but got from=0 >= to=" + std::to_string(to));
  return {integers(c, 0, static_cast<uint64_t>(to))};
}
Values random_from(Ctx& c) {  // random_.from(self, from, to): [from, to), to = None: [from, top]
  int64_t from = c.i(1);
  if (!c.has(2)) {
    int64_t hi = top(c.out[0].dtype);
    if (from > hi) c.fail("random_ expects 'from' to be at most " + std::to_string(hi));
    return {integers(c, from, static_cast<uint64_t>(hi) - static_cast<uint64_t>(from) + 1)};
  }
  int64_t to = c.i(2);
  if (from >= to)
    c.fail("random_ expects 'from' to be less than 'to', but got from=" + std::to_string(from) + " >= to=" +
           std::to_string(to));
  return {integers(c, from, static_cast<uint64_t>(to) - static_cast<uint64_t>(from))};
}

// Index of the largest key along the last dim (first on ties), as s64.
Value argmax_last(Builder& b, Value keys) {
  int64_t last = keys.type.rank() - 1;
  Value idx = b.iota({DType::S64, keys.type.dims}, last);
  Value lo = b.splat(hlo::scalar(keys.type.dtype), -INFINITY), zero = b.splat(hlo::scalar(DType::S64), 0);
  return b.reduce({keys, idx}, {lo, zero}, {last}, [](Builder& r, const Values& a) {
    Value gt = r.compare(a[2], a[0], hlo::Cmp::GT);
    Value tie = r.and_(r.compare(a[2], a[0], hlo::Cmp::EQ), r.compare(a[3], a[1], hlo::Cmp::LT));
    Value take = r.or_(gt, tie);
    return Values{r.select(take, a[2], a[0]), r.select(take, a[3], a[1])};
  })[1];
}

// multinomial(self, num_samples, replacement): Gumbel-max. log p + Gumbel noise picks category j with
// probability p_j; with replacement each sample takes the argmax of its own noise, without it the
// top num_samples keys of one noise draw are a sample without replacement.
Values multinomial(Ctx& c) {
  Builder& b = c.b;
  Value p = c.v(0);
  DType t = p.type.dtype == DType::F64 ? DType::F64 : DType::F32;
  p = convert(b, p, t);
  {  // CPU's checks of the distribution, on the device
    Value invalid = b.or_(is_nan(b, p), b.or_(b.compare(p, zeros(b, p.type), hlo::Cmp::LT),
                                                b.compare(p, b.splat(p.type, INFINITY), hlo::Cmp::EQ)));
    check(b, invalid, zeros(b, {DType::S64, p.type.dims}),
          "probability tensor contains either `inf`, `nan` or element < 0", false);
    Dims last{p.type.rank() - 1};
    Value sums = reduce(b, p, last, hlo::Op::Add, 0);
    check(b, b.compare(sums, zeros(b, sums.type), hlo::Cmp::LE), zeros(b, {DType::S64, sums.type.dims}),
          "invalid multinomial distribution (sum of probabilities <= 0)", false);
  }
  int64_t n = p.type.dims.back(), s = c.i(1);
  Dims batch(p.type.dims.begin(), p.type.dims.end() - 1);
  auto gumbel = [&](const Dims& shape) {
    Value u = convert(b, unit(c, shape, t == DType::F64 ? 53 : 23, true), t);
    return b.unary(Op::Neg, b.unary(Op::Log, b.unary(Op::Neg, b.unary(Op::Log, u))));
  };
  Value logp = b.unary(Op::Log, p);
  if (c.flag(2)) {
    Dims shape = batch, pdims;
    shape.push_back(s);
    shape.push_back(n);
    for (size_t d = 0; d < p.type.dims.size(); ++d) pdims.push_back(d < batch.size() ? d : d + 1);
    Value keys = b.add(b.broadcast_in_dim(logp, shape, pdims), gumbel(shape));
    return {convert(b, argmax_last(b, keys), c.out[0].dtype)};
  }
  Value keys = b.add(logp, gumbel(p.type.dims));
  int64_t last = p.type.rank() - 1;
  Value idx = b.iota({DType::S64, p.type.dims}, last);
  Values sorted = b.sort({keys, idx}, last, true, [](Builder& r, const Values& a) {
    return Values{r.compare(a[0], a[1], hlo::Cmp::GT)};
  });
  Dims lo(p.type.rank(), 0), hi = p.type.dims;
  hi.back() = s;
  return {convert(b, b.slice(sorted[1], lo, hi), c.out[0].dtype)};
}

// randperm(n): sort random keys, carrying the indices.
Values randperm(Ctx& c) {
  const TensorType& o = c.out[0];
  Value keys = bits(c, o.dims, DType::U64);
  Value idx = c.b.iota({DType::S64, o.dims}, 0);
  Values sorted = c.b.sort({keys, idx}, 0, true, [](Builder& r, const Values& a) {
    return Values{r.compare(a[0], a[1], hlo::Cmp::LT)};
  });
  return {convert(c.b, sorted[1], o.dtype)};
}

// native_dropout(input, p, train) -> (input * mask * scale, mask): mask ~ Bernoulli(1 - p),
// scale = 1 / (1 - p) (0 when p = 1). Not training: (input, ones).
Values native_dropout(Ctx& c) {
  Builder& b = c.b;
  const TensorType& o = c.out[0];
  if (!c.flag(2, true)) return {c.v(0), convert(b, b.splat({DType::Pred, o.dims}, 1), c.out[1].dtype)};
  DType t = compute_type(o.dtype);
  Value keep_p = b.sub(b.splat(hlo::scalar(DType::F64), 1), convert(b, c.v(1), DType::F64));
  Value zero = b.splat(hlo::scalar(DType::F64), 0);
  Value scale = b.select(b.compare(keep_p, zero, hlo::Cmp::EQ), zero,
                         b.div(b.splat(hlo::scalar(DType::F64), 1), keep_p));
  Value u = convert(b, unit(c, o.dims, 24), DType::F64);
  Value keep = b.compare(u, broadcast_to(b, keep_p, o.dims), hlo::Cmp::LT);
  Value x = b.mul(convert(b, c.v(0), t), convert(b, keep, t));
  x = b.mul(x, broadcast_to(b, convert(b, scale, t), o.dims));
  return {result(c, x), convert(b, keep, c.out[1].dtype)};
}
// native_dropout_backward(grad, mask, scale): grad * (mask * scale), rounded like PyTorch.
Values native_dropout_backward(Ctx& c) {
  Builder& b = c.b;
  const TensorType& o = c.out[0];
  DType t = compute_type(o.dtype);
  Value m = convert(b, convert(b, broadcast_to(b, c.v(1), o.dims), o.dtype), t);
  Value ms = convert(b, convert(b, b.mul(m, operand(c, 2)), o.dtype), t);
  return {result(c, b.mul(operand(c, 0), ms))};
}

Register r({
    {"uniform_|uniform.out", uniform, 0, true},
    {"normal_", normal_, 0, true},
    {"normal.Tensor_float|normal.float_Tensor|normal.Tensor_Tensor|normal.Tensor_float_out|normal.float_Tensor_out|"
     "normal.Tensor_Tensor_out",
     normal, 0, true},
    {"log_normal_", log_normal, 0, true},
    {"bernoulli_.float|bernoulli.p|bernoulli_.Tensor|bernoulli.Tensor_out|bernoulli.float_out", bernoulli_p, 0, true},
    {"bernoulli.out", bernoulli_out, 0, true},
    {"random_", random_all, 0, true}, {"random_.to", random_to, 0, true}, {"random_.from", random_from, 0, true},
    {"exponential_", exponential, 0, true}, {"cauchy_", cauchy, 0, true}, {"geometric_", geometric, 0, true},
    {"multinomial|multinomial.out", multinomial, 0, true},
    {"randperm.generator_out|randperm.out", randperm, 0, true},
    {"native_dropout", native_dropout, 0, true},
    {"native_dropout_backward|native_dropout_backward.out", native_dropout_backward},
});

}  // namespace
}  // namespace tpu::lower

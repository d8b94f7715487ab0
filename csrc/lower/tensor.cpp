// Filling, copying and converting whole tensors; ranges and other factories.
#include <cmath>

#include "lower/helpers.h"

namespace tpu::lower {
namespace {

// PyTorch's dtype conversion: complex to real keeps the real part (to bool: nonzero); double narrows to half types through
// float (as c10::Half / c10::BFloat16 do), so results round the way CPU's do.
Value cast(Builder& b, Value x, DType t) {
  DType from = x.type.dtype;
  if (is_complex(from) && t == DType::Pred) return b.compare(x, zeros(b, x.type), hlo::Cmp::NE);
  if (is_complex(from) && !is_complex(t)) {
    x = b.unary(hlo::Op::Real, x);
    from = x.type.dtype;
  }
  if (from == DType::F64 && (t == DType::F16 || t == DType::BF16)) x = convert(b, x, DType::F32);
  return convert(b, x, t);
}

Values clone(Ctx& c) { return {cast(c.b, c.v(0), c.out[0].dtype)}; }
// copy_(self, src): src converted to self's dtype, broadcast to its shape
Values copy(Ctx& c) { return {broadcast_to(c.b, cast(c.b, c.v(1), c.out[0].dtype), c.out[0].dims)}; }
Values fill(Ctx& c) { return {broadcast_to(c.b, cast(c.b, c.v(1), c.out[0].dtype), c.out[0].dims)}; }
Values zero(Ctx& c) { return {zeros(c.b, c.out[0])}; }
Values to_copy(Ctx& c) { return {cast(c.b, c.v(0), c.out[0].dtype)}; }

// arange.start_out(start, end, step): out[i] = start + i * step, in double (int64 for integer results) as CPU's
// accumulate type. The bounds are structural: they decide the length, and a cached program's result shape.
Values arange(Ctx& c) {
  const TensorType& o = c.out[0];
  TensorType wide{is_integral(o.dtype) ? DType::S64 : DType::F64, o.dims};
  Value start = broadcast_to(c.b, cast(c.b, c.v(0), wide.dtype), o.dims);
  Value step = broadcast_to(c.b, cast(c.b, c.v(2), wide.dtype), o.dims);
  return {cast(c.b, c.b.add(start, c.b.mul(c.b.iota(wide, 0), step)), o.dtype)};
}
// range.out(start, end, step): arange including end
Values range(Ctx& c) { return arange(c); }

// linspace(start, end, steps): start + i * (end - start) / (steps - 1), runtime bounds
Value linspace_of(Ctx& c, const TensorType& o) {
  TensorType wide{is_complex(o.dtype) ? o.dtype : DType::F64, o.dims};
  int64_t n = o.dims[0];
  // CPU first rounds the bounds to the result dtype
  auto bound = [&](size_t i) { return broadcast_to(c.b, convert(c.b, cast(c.b, c.v(i), o.dtype), wide.dtype), o.dims); };
  Value start = bound(0), end = bound(1);
  // the barrier keeps XLA from turning the division by a constant into a multiplication by its inexact reciprocal
  Value count = c.b.optimization_barrier({scalar_like(c.b, n > 1 ? double(n - 1) : 1.0, wide)})[0];
  Value step = c.b.div(c.b.sub(end, start), count);
  if (n == 1) return start;
  Value i = c.b.iota(wide, 0);
  // PyTorch fills the second half from the end, for symmetry
  Value lo = c.b.add(start, c.b.mul(step, i));
  Value hi = c.b.sub(end, c.b.mul(step, c.b.sub(scalar_like(c.b, double(n - 1), wide), i)));
  TensorType idx{DType::S64, o.dims};
  Value first_half = c.b.compare(c.b.iota(idx, 0), scalar_like(c.b, double(n / 2), idx), hlo::Cmp::LT);
  return c.b.select(first_half, lo, hi);
}
// integer results truncate toward zero, as CPU's conversion from its double steps does
Values linspace(Ctx& c) { return {cast(c.b, linspace_of(c, c.out[0]), c.out[0].dtype)}; }
// logspace(start, end, steps, base): base ** linspace(start, end, steps)
Values logspace(Ctx& c) {
  const TensorType& o = c.out[0];
  // one step: CPU takes base ** start with start unrounded
  Value e = o.dims[0] == 1 && !is_complex(o.dtype) ? broadcast_to(c.b, convert(c.b, c.v(0), DType::F64), o.dims)
                                                    : linspace_of(c, o);
  Value base = broadcast_to(c.b, convert(c.b, c.v(3), e.type.dtype), o.dims);
  return {cast(c.b, c.b.binary(hlo::Op::Power, base, e), o.dtype)};
}

Values eye(Ctx& c) {
  const TensorType& o = c.out[0];
  TensorType idx{DType::S64, o.dims};
  Value diag = c.b.compare(c.b.iota(idx, 0), c.b.iota(idx, 1), hlo::Cmp::EQ);
  return {convert(c.b, diag, o.dtype)};
}

// tril_indices / triu_indices(row, col, offset): every argument is a constant, so is the result
Values tri_indices(Ctx& c, bool lower) {
  int64_t rows = c.i(0), cols = c.i(1), offset = c.i(2);
  std::vector<int64_t> r, k;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (lower ? j - i <= offset : j - i >= offset) {
        r.push_back(i);
        k.push_back(j);
      }
  r.insert(r.end(), k.begin(), k.end());
  TensorType t{DType::S64, {2, static_cast<int64_t>(k.size())}};
  if (k.empty()) return {convert(c.b, zeros(c.b, t), c.out[0].dtype)};
  return {convert(c.b, c.b.constant(t, r.data(), r.size() * sizeof(int64_t)), c.out[0].dtype)};
}
Values tril_indices(Ctx& c) { return tri_indices(c, true); }
Values triu_indices(Ctx& c) { return tri_indices(c, false); }

Register r({
    {"clone|clone.out", clone}, {"copy_|copy|copy.out", copy},
    {"fill_.Scalar|fill_.Tensor|fill.Scalar|fill.Tensor|fill.Scalar_out|fill.Tensor_out", fill},
    {"zero_|zero|zero.out", zero}, {"_to_copy|_to_copy.out", to_copy},
    {"_efficientzerotensor|_efficientzerotensor.out", zero},
    {"arange.start_out", arange, 0b111}, {"range.out", range, 0b111},
    {"linspace.out|linspace", linspace}, {"logspace.out|logspace", logspace},
    {"eye.out|eye.m_out", eye},
    {"tril_indices|tril_indices.out", tril_indices}, {"triu_indices|triu_indices.out", triu_indices},
});

}  // namespace
}  // namespace tpu::lower

// Filling, copying and converting whole tensors; ranges.
#include "lower/helpers.h"

namespace tpu::lower {
namespace {

Values clone(Ctx& c) { return {convert(c.b, c.v(0), c.out[0].dtype)}; }
// copy_(self, src): src converted to self's dtype, broadcast to its shape
Values copy(Ctx& c) { return {operand(c, 1, c.out[0].dtype, c.out[0].dims)}; }
Values fill(Ctx& c) { return {operand(c, 1, c.out[0].dtype, c.out[0].dims)}; }
Values zero(Ctx& c) { return {zeros(c.b, c.out[0])}; }
Values to_copy(Ctx& c) { return {convert(c.b, c.v(0), c.out[0].dtype)}; }

// arange.start_out(start, end, step): out[i] = start + i * step (bounds are structural)
Values arange(Ctx& c) {
  const TensorType& o = c.out[0];
  DType t = is_integral(o.dtype) ? DType::S64 : DType::F64;
  TensorType wide{t, o.dims};
  Value i = c.b.iota(wide, 0);
  Value v = c.b.add(scalar_like(c.b, c.f(0), wide), c.b.mul(i, scalar_like(c.b, c.f(2), wide)));
  return {convert(c.b, v, o.dtype)};
}

// linspace(start, end, steps): start + i * (end - start) / (steps - 1), runtime bounds
Values linspace(Ctx& c) {
  const TensorType& o = c.out[0];
  TensorType wide{is_complex(o.dtype) ? o.dtype : DType::F64, o.dims};
  int64_t n = o.dims[0];
  Value start = broadcast_to(c.b, convert(c.b, c.v(0), wide.dtype), o.dims);
  Value end = broadcast_to(c.b, convert(c.b, c.v(1), wide.dtype), o.dims);
  Value step = c.b.div(c.b.sub(end, start), scalar_like(c.b, n > 1 ? double(n - 1) : 1.0, wide));
  Value i = c.b.iota(wide, 0);
  // PyTorch fills the second half from the end, for symmetry
  Value lo = c.b.add(start, c.b.mul(step, i));
  Value hi = c.b.sub(end, c.b.mul(step, c.b.sub(scalar_like(c.b, double(n - 1), wide), i)));
  Value first_half = c.b.compare(i, scalar_like(c.b, double(n / 2), wide), hlo::Cmp::LT);
  Value v = c.b.select(first_half, lo, hi);
  if (is_integral(o.dtype)) v = c.b.unary(hlo::Op::Floor, v);
  return {convert(c.b, v, o.dtype)};
}

Values eye(Ctx& c) {
  const TensorType& o = c.out[0];
  TensorType idx{DType::S64, o.dims};
  Value diag = c.b.compare(c.b.iota(idx, 0), c.b.iota(idx, 1), hlo::Cmp::EQ);
  return {convert(c.b, diag, o.dtype)};
}

Register r({
    {"clone|clone.out", clone}, {"copy_|copy", copy}, {"fill_.Scalar|fill_.Tensor|fill.Scalar|fill.Tensor", fill},
    {"zero_|zero", zero}, {"_to_copy|_to_copy.out", to_copy},
    {"arange.start_out", arange, 0b111}, {"linspace.out|linspace", linspace},
    {"eye.out|eye.m_out", eye},
});

}  // namespace
}  // namespace tpu::lower

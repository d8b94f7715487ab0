// Matrix products: mm, bmm, dot, mv, their beta/alpha-scaled add forms and addr. matmul, linear and einsum
// decompose into these.
#include "lower/helpers.h"

namespace tpu::lower {

Value contract(Ctx& c, Value a, Value b, const hlo::DotDims& d) {
  // A batch of one is a plain product: XLA CPU cannot run some bfloat16 ones (a transposed lhs) batched.
  if (d.lhs_batch == hlo::Dims{0} && d.rhs_batch == hlo::Dims{0} && a.type.dims[0] == 1 && a.type.rank() == 3) {
    auto drop = [&](Value v) { return c.b.reshape(v, hlo::Dims(v.type.dims.begin() + 1, v.type.dims.end())); };
    Value p = contract(c, drop(a), drop(b), {{}, {}, {d.lhs_contracting[0] - 1}, {d.rhs_contracting[0] - 1}});
    hlo::Dims dims = p.type.dims;
    dims.insert(dims.begin(), 1);
    return c.b.reshape(p, dims);
  }
  DType t = a.type.dtype;
  if (t == DType::F32) return c.b.dot_general(a, b, d, c.precision, c.precision);
  if (t == DType::F64) return c.b.dot_general(a, b, d, hlo::Precision::Highest, hlo::Precision::Highest);
  if (compute_type(t) != t)
    return c.b.dot_general(a, b, d, hlo::Precision::Default, hlo::Precision::Default, compute_type(t));
  return c.b.dot_general(a, b, d);
}

namespace {

const hlo::DotDims kMM{{}, {}, {1}, {0}};     // (m, k) . (k, n); also (m, k) . (k)
const hlo::DotDims kDot{{}, {}, {0}, {0}};    // (k) . (k)
const hlo::DotDims kBMM{{0}, {0}, {2}, {1}};  // (b, m, k) . (b, k, n)

// Arguments a and b of the call in the result's dtype, contracted.
Value product(Ctx& c, size_t a, size_t b, const hlo::DotDims& d) {
  DType t = c.out[0].dtype;
  if (c.v(a).type.dtype != c.v(b).type.dtype)  // CPU's check (the meta kernels skip it)
    c.fail("expected m1 and m2 to have the same dtype, but got: " + std::string(info(c.v(a).type.dtype).name) +
           " != " + std::string(info(c.v(b).type.dtype).name));
  return contract(c, convert(c.b, c.v(a), t), convert(c.b, c.v(b), t), d);
}

Values plain(Ctx& c, const hlo::DotDims& d) { return {result(c, product(c, 0, 1, d))}; }
Values mm(Ctx& c) { return plain(c, kMM); }
Values bmm(Ctx& c) { return plain(c, kBMM); }
Values mv(Ctx& c) { return plain(c, kMM); }
Values dot(Ctx& c) { return plain(c, kDot); }

// beta * self + alpha * (a . b); beta == 0 ignores self (its nan and inf too), like PyTorch.
Values scaled(Ctx& c, const hlo::DotDims& d) {
  Value p = product(c, 1, 2, d);
  DType t = p.type.dtype;
  Value alpha = operand(c, 4, t, p.type.dims), beta = operand(c, 3, t, p.type.dims);
  Value self = c.b.mul(beta, operand(c, 0, t, p.type.dims));
  self = c.b.select(c.b.compare(beta, zeros(c.b, beta.type), hlo::Cmp::EQ), zeros(c.b, p.type), self);
  return {result(c, c.b.add(self, c.b.mul(alpha, p)))};
}
// addr(self, vec1, vec2, beta, alpha): beta * self + alpha * outer(vec1, vec2), computed as CUDA does (half
// types in float32, rounded once); for bool, (beta and self) or (alpha and vec1 and vec2).
Values addr(Ctx& c) {
  DType t = compute_type(c.out[0].dtype);
  const Dims& shape = c.out[0].dims;
  Dims col = {shape[0], 1};
  Value v1 = broadcast_to(c.b, c.b.reshape(convert(c.b, c.v(1), t), col), shape);
  Value outer = c.b.mul(v1, operand(c, 2, t, shape));
  Value self = operand(c, 0, t, shape), beta = operand(c, 3, t, shape), alpha = operand(c, 4, t, shape);
  if (t == DType::Pred) return {result(c, c.b.binary(hlo::Op::Or, c.b.binary(hlo::Op::And, beta, self),
                                                          c.b.binary(hlo::Op::And, alpha, outer)))};
  self = c.b.select(c.b.compare(beta, zeros(c.b, beta.type), hlo::Cmp::EQ), zeros(c.b, self.type), c.b.mul(beta, self));
  return {result(c, c.b.add(self, c.b.mul(alpha, outer)))};
}
Values addmm(Ctx& c) { return scaled(c, kMM); }
Values baddbmm(Ctx& c) { return scaled(c, kBMM); }
Values addmv(Ctx& c) { return scaled(c, kMM); }

Register r({
    {"mm|mm.out", mm}, {"bmm|bmm.out", bmm}, {"dot|dot.out", dot}, {"mv|mv.out", mv},
    {"addr|addr.out", addr}, {"addmm|addmm.out", addmm}, {"baddbmm|baddbmm.out", baddbmm}, {"addmv|addmv.out", addmv},
});

}  // namespace
}  // namespace tpu::lower

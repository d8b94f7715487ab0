// Foreach ops (torch.optim's multi-tensor kernels): one program for the whole list, one result per
// element (c.out holds them all). Elementwise ones reuse the per-tensor op's own lowering rule on
// each element's arguments; reductions (norm, max) are written here.
#include <cmath>
#include <string>

#include "lower/helpers.h"

namespace tpu::lower {
namespace {
using hlo::Op;

// The rule `base` once per list element: TensorList / ScalarList arguments become element i.
Values each(Ctx& c, const char* base) {
  const Rule* r = find(base);
  if (!r) c.fail(std::string("no lowering for aten::") + base);
  Values outs;
  for (size_t i = 0; i < c.out.size(); ++i) {
    std::vector<Arg> args = c.args;
    for (Arg& a : args)
      if (a.kind == Arg::TensorList || a.kind == Arg::ScalarList) {
        a.kind = a.kind == Arg::TensorList ? Arg::Tensor : Arg::Scalar;
        a.ints = {a.ints.at(i)};
      }
    std::vector<TensorType> out = {c.out[i]};
    Ctx e{c.b, args, c.inputs, out, c.precision};
    outs.push_back(r->fn(e).at(0));
  }
  return outs;
}
#define EACH(base) [](Ctx& c) { return each(c, base); }

// sum(|x|^p) (root = false) or the vector p-norm of all of x, in the compute type of `out`.
Value pnorm(Builder& b, Value x, double p, DType out, bool root) {
  DType t = compute_type(out);
  Value a = is_complex(x.type.dtype) ? convert(b, b.unary(Op::Abs, x), t) : b.unary(Op::Abs, convert(b, x, t));
  Dims all;
  for (int64_t d = 0; d < a.type.rank(); ++d) all.push_back(d);
  Value r;
  if (std::isinf(p)) r = reduce(b, a, all, p > 0 ? Op::Maximum : Op::Minimum, p > 0 ? 0 : INFINITY);
  else if (p == 0) r = reduce(b, convert(b, convert(b, a, DType::Pred), t), all, Op::Add, 0);
  else if (p == 1) r = reduce(b, a, all, Op::Add, 0);
  else if (p == 2) r = reduce(b, b.mul(a, a), all, Op::Add, 0);
  else r = reduce(b, b.binary(Op::Power, a, scalar_like(b, p, a.type)), all, Op::Add, 0);
  if (root && p == 2) r = b.unary(Op::Sqrt, r);
  else if (root && p != 0 && p != 1 && !std::isinf(p)) r = b.binary(Op::Power, r, scalar_like(b, 1 / p, r.type));
  return convert(b, r, out);
}
Values norms(Ctx& c, bool root) {
  Values xs = c.vs(0), outs;
  for (size_t i = 0; i < xs.size(); ++i) outs.push_back(pnorm(c.b, xs[i], c.has(1) ? c.f(1) : 2, c.out[i].dtype, root));
  return outs;
}
Values norm(Ctx& c) { return norms(c, true); }
Values powsum(Ctx& c) { return norms(c, false); }

Values max_(Ctx& c) {
  Values xs = c.vs(0), outs;
  for (const Value& x : xs) {
    Dims all;
    for (int64_t d = 0; d < x.type.rank(); ++d) all.push_back(d);
    outs.push_back(reduce(c.b, x, all, Op::Maximum, lowest(x.type.dtype)));
  }
  return outs;
}

Register r({
    // unary
    {"_foreach_abs", EACH("abs")}, {"_foreach_acos", EACH("acos")}, {"_foreach_asin", EACH("asin")},
    {"_foreach_atan", EACH("atan")}, {"_foreach_ceil", EACH("ceil")}, {"_foreach_cos", EACH("cos")},
    {"_foreach_cosh", EACH("cosh")}, {"_foreach_erf", EACH("erf")}, {"_foreach_erfc", EACH("erfc")},
    {"_foreach_exp", EACH("exp")}, {"_foreach_expm1", EACH("expm1")}, {"_foreach_floor", EACH("floor")},
    {"_foreach_frac", EACH("frac")}, {"_foreach_lgamma", EACH("lgamma")}, {"_foreach_log", EACH("log")},
    {"_foreach_log10", EACH("log10")}, {"_foreach_log1p", EACH("log1p")}, {"_foreach_log2", EACH("log2")},
    {"_foreach_neg", EACH("neg")}, {"_foreach_reciprocal", EACH("reciprocal")}, {"_foreach_round", EACH("round")},
    {"_foreach_rsqrt", EACH("rsqrt")}, {"_foreach_sigmoid", EACH("sigmoid")}, {"_foreach_sign", EACH("sign")},
    {"_foreach_sin", EACH("sin")}, {"_foreach_sinh", EACH("sinh")}, {"_foreach_sqrt", EACH("sqrt")},
    {"_foreach_tan", EACH("tan")}, {"_foreach_tanh", EACH("tanh")}, {"_foreach_trunc", EACH("trunc")},
    {"_foreach_zero", EACH("zero")}, {"_foreach_clone", EACH("clone")}, {"_foreach_copy", EACH("copy")},
    // binary: List (element-wise pairs), Scalar, ScalarList, Tensor (one tensor for all)
    {"_foreach_add.List|_foreach_add.Scalar|_foreach_add.ScalarList|_foreach_add.Tensor", EACH("add.Tensor")},
    {"_foreach_sub.List|_foreach_sub.Scalar|_foreach_sub.ScalarList", EACH("sub.Tensor")},
    {"_foreach_mul.List|_foreach_mul.Scalar|_foreach_mul.ScalarList|_foreach_mul.Tensor", EACH("mul.Tensor")},
    {"_foreach_div.List|_foreach_div.Scalar|_foreach_div.ScalarList|_foreach_div.Tensor", EACH("div.Tensor")},
    {"_foreach_clamp_min.List|_foreach_clamp_min.Scalar|_foreach_clamp_min.ScalarList", EACH("clamp_min.Tensor")},
    {"_foreach_clamp_max.List|_foreach_clamp_max.Scalar|_foreach_clamp_max.ScalarList", EACH("clamp_max.Tensor")},
    {"_foreach_maximum.List|_foreach_maximum.Scalar|_foreach_maximum.ScalarList", EACH("maximum")},
    {"_foreach_minimum.List|_foreach_minimum.Scalar|_foreach_minimum.ScalarList", EACH("minimum")},
    {"_foreach_pow.List", EACH("pow.Tensor_Tensor")},
    {"_foreach_pow.Scalar|_foreach_pow.ScalarList", EACH("pow.Tensor_Scalar")},
    {"_foreach_pow.ScalarAndTensor", EACH("pow.Scalar")},
    // ternary
    {"_foreach_addcmul.Scalar|_foreach_addcmul.ScalarList", EACH("addcmul")},
    {"_foreach_addcdiv.Scalar|_foreach_addcdiv.ScalarList", EACH("addcdiv")},
    {"_foreach_lerp.List", EACH("lerp.Tensor")},
    {"_foreach_lerp.Scalar|_foreach_lerp.ScalarList", EACH("lerp.Scalar")},
    // reductions: ord shapes the program
    {"_foreach_norm.Scalar", norm, 0b10}, {"_foreach_powsum.Scalar", powsum, 0b10}, {"_foreach_max", max_},
});

}  // namespace
}  // namespace tpu::lower

// Elementwise math: unary, binary, comparison, logical, select/clamp, activations.
#include <cmath>

#include "lower/helpers.h"

namespace tpu::lower {
using hlo::Op;

// erf by the Numerical Recipes erfc rational approximation (|error| < 1.2e-7): StableHLO has no erf.
Value erf_of(Builder& b, Value x) {
  auto k = [&](double v) { return scalar_like(b, v, x.type); };
  Value ax = b.unary(Op::Abs, x);
  Value t = b.div(k(1), b.add(k(1), b.mul(k(0.5), ax)));
  const double coef[] = {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                         0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277};
  Value poly = k(coef[9]);
  for (int i = 8; i >= 0; --i) poly = b.add(k(coef[i]), b.mul(t, poly));
  Value erfc = b.mul(t, b.unary(Op::Exp, b.add(b.unary(Op::Neg, b.mul(ax, ax)), poly)));
  return b.mul(b.unary(Op::Sign, x), b.sub(k(1), erfc));
}

namespace {

Values abs_(Ctx& c) { return unary(c, Op::Abs); }
Values neg(Ctx& c) { return unary(c, Op::Neg); }
Values exp_(Ctx& c) { return unary(c, Op::Exp); }
Values expm1_(Ctx& c) { return unary(c, Op::Expm1); }
Values log_(Ctx& c) { return unary(c, Op::Log); }
Values log1p_(Ctx& c) { return unary(c, Op::Log1p); }
Values sqrt_(Ctx& c) { return unary(c, Op::Sqrt); }
Values rsqrt(Ctx& c) { return unary(c, Op::Rsqrt); }
Values tanh_(Ctx& c) { return unary(c, Op::Tanh); }
Values sigmoid(Ctx& c) { return unary(c, Op::Logistic); }
Values sin_(Ctx& c) { return unary(c, Op::Sine); }
Values cos_(Ctx& c) { return unary(c, Op::Cosine); }
Values tan_(Ctx& c) { return unary(c, Op::Tan); }
Values floor_(Ctx& c) { return is_integral(c.out[0].dtype) ? Values{c.v(0)} : unary(c, Op::Floor); }
Values ceil_(Ctx& c) { return is_integral(c.out[0].dtype) ? Values{c.v(0)} : unary(c, Op::Ceil); }
Values round_(Ctx& c) { return is_integral(c.out[0].dtype) ? Values{c.v(0)} : unary(c, Op::RoundNearestEven); }
Values trunc_(Ctx& c) {
  if (is_integral(c.out[0].dtype)) return {c.v(0)};
  Value x = operand(c, 0);
  return {result(c, c.b.select(c.b.compare(x, zeros(c.b, x.type), hlo::Cmp::LT), c.b.unary(Op::Ceil, x),
                               c.b.unary(Op::Floor, x)))};
}
Values sign_(Ctx& c) {
  if (c.out[0].dtype == DType::Pred) return {c.v(0)};
  return unary(c, Op::Sign);
}
Values bitwise_not(Ctx& c) { return unary(c, Op::Not); }
Values logical_not(Ctx& c) {
  Value x = convert(c.b, c.v(0), DType::Pred);
  return {convert(c.b, c.b.unary(Op::Not, broadcast_to(c.b, x, c.out[0].dims)), c.out[0].dtype)};
}
Values reciprocal(Ctx& c) {
  Value x = operand(c, 0);
  return {result(c, c.b.div(scalar_like(c.b, 1, x.type), x))};
}
Values square(Ctx& c) {
  Value x = operand(c, 0);
  return {result(c, c.b.mul(x, x))};
}
Values erf_(Ctx& c) { return {result(c, erf_of(c.b, operand(c, 0)))}; }

// alpha-scaled add/sub: self + alpha * other
Values add(Ctx& c) {
  Value x = operand(c, 0), y = operand(c, 1);
  if (c.has(2)) y = c.b.mul(y, operand(c, 2));
  if (c.out[0].dtype == DType::Pred) return {result(c, c.b.or_(x, y))};
  return {result(c, c.b.add(x, y))};
}
Values sub(Ctx& c) {
  Value x = operand(c, 0), y = operand(c, 1);
  if (c.has(2)) y = c.b.mul(y, operand(c, 2));
  return {result(c, c.b.sub(x, y))};
}
Values rsub(Ctx& c) {  // other - alpha * self
  Value x = operand(c, 0), y = operand(c, 1);
  if (c.has(2)) x = c.b.mul(x, operand(c, 2));
  return {result(c, c.b.sub(y, x))};
}
Values mul(Ctx& c) {
  if (c.out[0].dtype == DType::Pred) return {result(c, c.b.and_(operand(c, 0), operand(c, 1)))};
  return binary(c, Op::Multiply);
}
Values div(Ctx& c) {
  Value x = operand(c, 0), y = operand(c, 1);
  Value q = c.b.div(x, y);
  std::string mode = c.has(2) ? c.s(2) : "";
  if (mode == "trunc" && !is_integral(x.type.dtype)) {
    q = c.b.select(c.b.compare(q, zeros(c.b, q.type), hlo::Cmp::LT), c.b.unary(Op::Ceil, q), c.b.unary(Op::Floor, q));
  } else if (mode == "floor") {
    if (is_integral(x.type.dtype)) {  // integer division rounds toward zero; fix up negative remainders
      Value r = c.b.binary(Op::Remainder, x, y);
      Value z = zeros(c.b, x.type);
      Value fix = c.b.and_(c.b.compare(r, z, hlo::Cmp::NE),
                           c.b.compare(c.b.compare(r, z, hlo::Cmp::LT), c.b.compare(y, z, hlo::Cmp::LT), hlo::Cmp::NE));
      q = c.b.select(fix, c.b.sub(q, scalar_like(c.b, 1, q.type)), q);
    } else {
      q = c.b.unary(Op::Floor, q);
    }
  }
  return {result(c, q)};
}
Values remainder(Ctx& c) {  // Python-style: the result has the divisor's sign
  Value x = operand(c, 0), y = operand(c, 1);
  Value r = c.b.binary(Op::Remainder, x, y);
  Value z = zeros(c.b, r.type);
  Value fix = c.b.and_(c.b.compare(r, z, hlo::Cmp::NE),
                       c.b.compare(c.b.compare(r, z, hlo::Cmp::LT), c.b.compare(y, z, hlo::Cmp::LT), hlo::Cmp::NE));
  return {result(c, c.b.select(fix, c.b.add(r, y), r))};
}
Values fmod(Ctx& c) { return binary(c, Op::Remainder); }
Values pow_(Ctx& c) {
  if (is_integral(c.out[0].dtype) && c.out[0].dtype != DType::Pred) return binary(c, Op::Power);
  return binary(c, Op::Power);
}
Values maximum(Ctx& c) { return binary(c, Op::Maximum); }
Values minimum(Ctx& c) { return binary(c, Op::Minimum); }
Values atan2_(Ctx& c) { return binary(c, Op::Atan2); }
Values bitwise_and(Ctx& c) { return binary(c, Op::And); }
Values bitwise_or(Ctx& c) { return binary(c, Op::Or); }
Values bitwise_xor(Ctx& c) { return binary(c, Op::Xor); }

Values logical(Ctx& c, Op op) {
  const Dims& shape = c.out[0].dims;
  Value a = broadcast_to(c.b, convert(c.b, c.v(0), DType::Pred), shape);
  Value b = broadcast_to(c.b, convert(c.b, c.v(1), DType::Pred), shape);
  return {convert(c.b, c.b.binary(op, a, b), c.out[0].dtype)};
}
Values logical_and(Ctx& c) { return logical(c, Op::And); }
Values logical_or(Ctx& c) { return logical(c, Op::Or); }
Values logical_xor(Ctx& c) { return logical(c, Op::Xor); }

// Comparisons happen in the promoted type of the two operands.
DType promote(DType a, DType b) {
  if (a == b) return a;
  auto rank = [](DType t) { return is_complex(t) ? 3 : is_float(t) ? 2 : t == DType::Pred ? 0 : 1; };
  if (rank(a) != rank(b)) return rank(a) > rank(b) ? a : b;
  return byte_size(a) >= byte_size(b) ? a : b;
}
Values compare(Ctx& c, hlo::Cmp dir) {
  // a Python scalar (f64/s64) takes the tensor's type, as in PyTorch's wrapped-number rule
  bool scalar1 = c.arg(1).kind == Arg::Scalar;
  DType t = scalar1 ? c.v(0).type.dtype : promote(c.v(0).type.dtype, c.v(1).type.dtype);
  if (scalar1 && is_integral(t) && is_float(c.v(1).type.dtype)) t = DType::F32;
  Value a = operand(c, 0, t, c.out[0].dims), b = operand(c, 1, t, c.out[0].dims);
  return {convert(c.b, c.b.compare(a, b, dir), c.out[0].dtype)};
}
Values eq(Ctx& c) { return compare(c, hlo::Cmp::EQ); }
Values ne(Ctx& c) { return compare(c, hlo::Cmp::NE); }
Values lt(Ctx& c) { return compare(c, hlo::Cmp::LT); }
Values le(Ctx& c) { return compare(c, hlo::Cmp::LE); }
Values gt(Ctx& c) { return compare(c, hlo::Cmp::GT); }
Values ge(Ctx& c) { return compare(c, hlo::Cmp::GE); }

Values where(Ctx& c) {
  const TensorType& o = c.out[0];
  Value p = broadcast_to(c.b, convert(c.b, c.v(0), DType::Pred), o.dims);
  return {c.b.select(p, operand(c, 1, o.dtype, o.dims), operand(c, 2, o.dtype, o.dims))};
}

Values clamp(Ctx& c) {
  Value x = operand(c, 0);
  if (c.has(1)) x = c.b.max(x, operand(c, 1));
  if (c.has(2)) x = c.b.min(x, operand(c, 2));
  return {result(c, x)};
}
Values clamp_min(Ctx& c) { return {result(c, c.b.max(operand(c, 0), operand(c, 1)))}; }
Values clamp_max(Ctx& c) { return {result(c, c.b.min(operand(c, 0), operand(c, 1)))}; }

Values relu(Ctx& c) {
  Value x = operand(c, 0);
  return {result(c, c.b.max(x, zeros(c.b, x.type)))};
}
Values leaky_relu(Ctx& c) {
  Value x = operand(c, 0), slope = operand(c, 1);
  Value z = zeros(c.b, x.type);
  return {result(c, c.b.select(c.b.compare(x, z, hlo::Cmp::GT), x, c.b.mul(x, slope)))};
}
Values silu(Ctx& c) {
  Value x = operand(c, 0);
  return {result(c, c.b.mul(x, c.b.unary(Op::Logistic, x)))};
}
Values gelu(Ctx& c) { return {result(c, gelu_of(c.b, operand(c, 0), c.has(1) && c.s(1) == "tanh"))}; }

Values softplus(Ctx& c) {  // log(1 + exp(beta x)) / beta, linear above threshold
  Value x = operand(c, 0), beta = operand(c, 1), threshold = operand(c, 2);
  Value bx = c.b.mul(x, beta);
  Value soft = c.b.div(c.b.unary(Op::Log1p, c.b.unary(Op::Exp, bx)), beta);
  return {result(c, c.b.select(c.b.compare(bx, threshold, hlo::Cmp::GT), x, soft))};
}

Values lerp(Ctx& c) {  // self + weight * (end - self)
  Value s = operand(c, 0), e = operand(c, 1), w = operand(c, 2);
  return {result(c, c.b.add(s, c.b.mul(w, c.b.sub(e, s))))};
}
Values addcmul(Ctx& c) {  // self + value * t1 * t2
  Value s = operand(c, 0), t1 = operand(c, 1), t2 = operand(c, 2), v = operand(c, 3);
  return {result(c, c.b.add(s, c.b.mul(v, c.b.mul(t1, t2))))};
}
Values addcdiv(Ctx& c) {
  Value s = operand(c, 0), t1 = operand(c, 1), t2 = operand(c, 2), v = operand(c, 3);
  return {result(c, c.b.add(s, c.b.mul(v, c.b.div(t1, t2))))};
}
Values isnan(Ctx& c) {
  Value x = c.v(0);
  if (!is_float(x.type.dtype)) return {convert(c.b, zeros(c.b, x.type), DType::Pred)};
  return {c.b.compare(x, x, hlo::Cmp::NE)};
}
Values isinf(Ctx& c) {
  Value x = c.v(0);
  if (!is_float(x.type.dtype)) return {convert(c.b, zeros(c.b, x.type), DType::Pred)};
  Value a = c.b.unary(Op::Abs, x);
  return {c.b.compare(a, scalar_like(c.b, INFINITY, a.type), hlo::Cmp::EQ)};
}
Values isfinite(Ctx& c) {
  Value x = c.v(0);
  if (!is_float(x.type.dtype)) return {c.b.compare(x, x, hlo::Cmp::EQ)};
  return {c.b.unary(Op::IsFinite, x)};
}
Values nan_to_num(Ctx& c) {
  Value x = operand(c, 0);
  DType t = x.type.dtype;
  double big = t == DType::F16 ? 65504.0 : t == DType::F64 ? 1.79769313486231570e308 : 3.4028234663852886e38;
  if (c.out[0].dtype == DType::BF16) big = 3.3895313892515355e38;
  auto k = [&](size_t i, double d) { return c.has(i) ? operand(c, i) : scalar_like(c.b, d, x.type); };
  Value nan = k(1, 0), pos = k(2, big), neg = k(3, -big);
  Value inf = scalar_like(c.b, INFINITY, x.type);
  Value y = c.b.select(c.b.compare(x, x, hlo::Cmp::NE), nan, x);
  y = c.b.select(c.b.compare(x, inf, hlo::Cmp::EQ), pos, y);
  y = c.b.select(c.b.compare(x, c.b.unary(Op::Neg, inf), hlo::Cmp::EQ), neg, y);
  return {result(c, y)};
}

Register r({
    {"abs|abs.out", abs_}, {"neg|neg.out", neg}, {"exp|exp.out", exp_}, {"expm1|expm1.out", expm1_},
    {"log|log.out", log_}, {"log1p|log1p.out", log1p_}, {"sqrt|sqrt.out", sqrt_}, {"rsqrt|rsqrt.out", rsqrt},
    {"tanh|tanh.out", tanh_}, {"sigmoid|sigmoid.out", sigmoid}, {"sin|sin.out", sin_}, {"cos|cos.out", cos_},
    {"tan|tan.out", tan_}, {"floor|floor.out", floor_}, {"ceil|ceil.out", ceil_}, {"round|round.out", round_},
    {"trunc|trunc.out", trunc_}, {"sign|sign.out", sign_}, {"sgn|sgn.out", sign_},
    {"bitwise_not|bitwise_not.out", bitwise_not}, {"logical_not|logical_not.out", logical_not},
    {"reciprocal|reciprocal.out", reciprocal}, {"square", square}, {"erf|erf.out", erf_},
    {"add.Tensor|add.Scalar|add.out|add.Scalar_out", add}, {"sub.Tensor|sub.Scalar|sub.out|sub.Scalar_out", sub},
    {"rsub.Tensor|rsub.Scalar", rsub}, {"mul.Tensor|mul.Scalar|mul.out|mul.Scalar_out", mul},
    {"div.Tensor|div.Scalar|div.out|div.Tensor_mode|div.Scalar_mode|div.out_mode", div},
    {"remainder.Tensor|remainder.Scalar|remainder.Scalar_Tensor|remainder.Tensor_out", remainder},
    {"fmod.Tensor|fmod.Scalar|fmod.Tensor_out", fmod},
    {"pow.Tensor_Tensor|pow.Tensor_Scalar|pow.Scalar|pow.Tensor_Tensor_out|pow.Tensor_Scalar_out", pow_},
    {"maximum|maximum.out|max.other", maximum}, {"minimum|minimum.out|min.other", minimum},
    {"atan2|atan2.out", atan2_},
    {"bitwise_and.Tensor|bitwise_and.Scalar|bitwise_and.Tensor_out", bitwise_and},
    {"bitwise_or.Tensor|bitwise_or.Scalar|bitwise_or.Tensor_out", bitwise_or},
    {"bitwise_xor.Tensor|bitwise_xor.Scalar|bitwise_xor.Tensor_out", bitwise_xor},
    {"logical_and|logical_and.out", logical_and}, {"logical_or|logical_or.out", logical_or},
    {"logical_xor|logical_xor.out", logical_xor},
    {"eq.Tensor|eq.Scalar|eq.Tensor_out|eq.Scalar_out", eq}, {"ne.Tensor|ne.Scalar|ne.Tensor_out|ne.Scalar_out", ne},
    {"lt.Tensor|lt.Scalar|lt.Tensor_out|lt.Scalar_out", lt}, {"le.Tensor|le.Scalar|le.Tensor_out|le.Scalar_out", le},
    {"gt.Tensor|gt.Scalar|gt.Tensor_out|gt.Scalar_out", gt}, {"ge.Tensor|ge.Scalar|ge.Tensor_out|ge.Scalar_out", ge},
    {"where.self|where.self_out", where},
    {"clamp|clamp.Tensor|clamp.out|clamp.Tensor_out", clamp}, {"clamp_min|clamp_min.Tensor|clamp_min.out", clamp_min},
    {"clamp_max|clamp_max.Tensor|clamp_max.out", clamp_max},
    {"relu", relu}, {"leaky_relu|leaky_relu.out", leaky_relu}, {"silu|silu.out", silu},
    {"gelu|gelu.out", gelu}, {"softplus|softplus.out", softplus},
    {"lerp.Scalar|lerp.Tensor|lerp.Scalar_out|lerp.Tensor_out", lerp},
    {"addcmul|addcmul.out", addcmul}, {"addcdiv|addcdiv.out", addcdiv},
    {"isnan", isnan}, {"isinf", isinf}, {"isfinite", isfinite}, {"nan_to_num|nan_to_num.out", nan_to_num},
});

}  // namespace

Value gelu_of(Builder& b, Value x, bool tanh_approx) {
  auto k = [&](double v) { return scalar_like(b, v, x.type); };
  if (tanh_approx) {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    Value inner = b.mul(k(0.7978845608028654), b.add(x, b.mul(k(0.044715), b.mul(x, b.mul(x, x)))));
    return b.mul(b.mul(k(0.5), x), b.add(k(1), b.unary(Op::Tanh, inner)));
  }
  Value erf = erf_of(b, b.mul(x, k(0.7071067811865476)));  // 0.5 x (1 + erf(x / sqrt 2))
  return b.mul(b.mul(k(0.5), x), b.add(k(1), erf));
}

}  // namespace tpu::lower

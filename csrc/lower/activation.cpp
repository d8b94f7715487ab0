// Activation functions and the backward ops autograd dispatches for them (grad_output first, then the
// forward's input or result). Each backward follows the CPU kernel's formula, in the compute type.
#include <cmath>

#include "lower/helpers.h"

namespace tpu::lower {
namespace {
using hlo::Cmp;
using hlo::Op;

Value sel(Builder& b, Value p, Value t, Value f) { return b.select(p, t, f); }
Value sigmoid_of(Builder& b, Value x) { return b.unary(Op::Logistic, x); }
Value softplus_of(Builder& b, Value x) { return b.unary(Op::Log1p, b.unary(Op::Exp, x)); }
// hardtanh without NaN loss: comparisons with NaN are false, so NaN passes through
Value clip(Builder& b, Value x, Value lo, Value hi) {
  return sel(b, cmp(b, x, Cmp::LT, lo), lo, sel(b, cmp(b, x, Cmp::GT, hi), hi, x));
}

// ---- forward
Values relu(Ctx& c) {
  Value x = operand(c, 0);
  return {result(c, sel(c.b, cmp(c.b, x, Cmp::LT, K(c.b, x, 0)), K(c.b, x, 0), x))};
}
Values threshold(Ctx& c) {  // x <= threshold ? value : x
  Value x = operand(c, 0);
  return {result(c, sel(c.b, cmp(c.b, x, Cmp::LE, operand(c, 1)), operand(c, 2), x))};
}
Values leaky_relu(Ctx& c) {
  Value x = operand(c, 0);
  return {result(c, sel(c.b, cmp(c.b, x, Cmp::GT, K(c.b, x, 0)), x, c.b.mul(x, operand(c, 1))))};
}
Values silu(Ctx& c) {
  Value x = operand(c, 0);
  return {result(c, c.b.mul(x, sigmoid_of(c.b, x)))};
}
Values gelu(Ctx& c) { return {result(c, gelu_of(c.b, operand(c, 0), c.has(1) && c.s(1) == "tanh"))}; }
Values softplus(Ctx& c) {  // log(1 + exp(beta x)) / beta, linear above threshold
  Value x = operand(c, 0), beta = operand(c, 1), bx = c.b.mul(x, beta);
  return {result(c, sel(c.b, cmp(c.b, bx, Cmp::GT, operand(c, 2)), x, c.b.div(softplus_of(c.b, bx), beta)))};
}
Values elu(Ctx& c) {  // x > 0 ? scale x : alpha scale (exp(input_scale x) - 1)
  Builder& b = c.b;
  Value x = operand(c, 0), alpha = operand(c, 1), scale = operand(c, 2), in_scale = operand(c, 3);
  Value neg = b.mul(b.mul(alpha, scale), b.unary(Op::Expm1, b.mul(x, in_scale)));
  return {result(c, sel(b, cmp(b, x, Cmp::LE, K(b, x, 0)), neg, b.mul(x, scale)))};
}
Values hardtanh(Ctx& c) { return {result(c, clip(c.b, operand(c, 0), operand(c, 1), operand(c, 2)))}; }
Value relu6_of(Builder& b, Value x) { return clip(b, x, K(b, x, 0), K(b, x, 6)); }
Values hardsigmoid(Ctx& c) {  // relu6(x + 3) / 6
  Value x = operand(c, 0);
  return {result(c, c.b.div(relu6_of(c.b, c.b.add(x, K(c.b, x, 3))), K(c.b, x, 6)))};
}
Values hardswish(Ctx& c) {  // x relu6(x + 3) / 6
  Value x = operand(c, 0);
  return {result(c, c.b.div(c.b.mul(x, relu6_of(c.b, c.b.add(x, K(c.b, x, 3)))), K(c.b, x, 6)))};
}
Values mish(Ctx& c) {  // x tanh(softplus(x))
  Value x = operand(c, 0);
  return {result(c, c.b.mul(x, c.b.unary(Op::Tanh, softplus_of(c.b, x))))};
}
// (output, buffer): output = min(x, 0) - log1p(exp(-|x|)); the buffer is CPU's exp(-m) + exp(-x - m), m = max(0, -x)
Values log_sigmoid_forward(Ctx& c) {
  Builder& b = c.b;
  Value x = operand(c, 0);
  Value out = b.sub(b.min(x, K(b, x, 0)), b.unary(Op::Log1p, b.unary(Op::Exp, b.unary(Op::Neg, b.unary(Op::Abs, x)))));
  Value m = b.max(K(b, x, 0), b.unary(Op::Neg, x));
  Value z = b.add(b.unary(Op::Exp, b.unary(Op::Neg, m)), b.unary(Op::Exp, b.sub(b.unary(Op::Neg, x), m)));
  Value buffer = c.out[1].dims == x.type.dims ? result(c, z, 1) : zeros(b, c.out[1]);
  return {result(c, out), buffer};
}
Values shrink(Ctx& c, bool soft) {  // |x| > lambda ? x (- lambda sign(x) when soft) : 0
  Builder& b = c.b;
  Value x = operand(c, 0), l = operand(c, 1);
  Value inside = b.and_(cmp(b, x, Cmp::GE, b.unary(Op::Neg, l)), cmp(b, x, Cmp::LE, l));
  Value y = soft ? sel(b, cmp(b, x, Cmp::GT, l), b.sub(x, l), b.add(x, l)) : x;
  return {result(c, sel(b, inside, K(b, x, 0), y))};
}
Values hardshrink(Ctx& c) { return shrink(c, false); }
Values softshrink(Ctx& c) { return shrink(c, true); }
// glu(x, dim) = a sigmoid(b) for the two halves of x along dim
std::pair<Value, Value> halves(Builder& b, Value x, int64_t dim) {
  Dims start(x.type.rank(), 0), mid = x.type.dims, end = x.type.dims;
  mid[dim] /= 2;
  Dims start2 = start;
  start2[dim] = mid[dim];
  return {b.slice(x, start, mid), b.slice(x, start2, end)};
}
Values glu(Ctx& c) {
  Value x = convert(c.b, c.v(0), compute_type(c.out[0].dtype));
  auto [a, g] = halves(c.b, x, wrap_dim(c.i(1), x.type.rank()));
  return {result(c, c.b.mul(a, sigmoid_of(c.b, g)))};
}

// ---- backward
Values threshold_backward(Ctx& c) {  // self <= threshold ? 0 : grad
  Value g = operand(c, 0), x = operand(c, 1);
  return {result(c, sel(c.b, cmp(c.b, x, Cmp::LE, operand(c, 2)), K(c.b, g, 0), g))};
}
Values leaky_relu_backward(Ctx& c) {
  Value g = operand(c, 0), x = operand(c, 1);
  return {result(c, sel(c.b, cmp(c.b, x, Cmp::GT, K(c.b, x, 0)), g, c.b.mul(g, operand(c, 2))))};
}
Values silu_backward(Ctx& c) {  // grad s (1 + x (1 - s))
  Builder& b = c.b;
  Value g = operand(c, 0), x = operand(c, 1), s = sigmoid_of(b, x);
  return {result(c, b.mul(b.mul(g, s), b.add(K(b, x, 1), b.mul(x, b.sub(K(b, s, 1), s)))))};
}
// complex: the gradient is conjugated, grad conj(f'(x)), and f' is a function of y
Values sigmoid_backward(Ctx& c) {  // grad (1 - y) y
  Value g = operand(c, 0), y = conj_of(c.b, operand(c, 1));
  return {result(c, c.b.mul(c.b.mul(g, c.b.sub(K(c.b, y, 1), y)), y))};
}
Values tanh_backward(Ctx& c) {  // grad (1 - y^2)
  Value g = operand(c, 0), y = conj_of(c.b, operand(c, 1));
  return {result(c, c.b.mul(g, c.b.sub(K(c.b, y, 1), c.b.mul(y, y))))};
}
Values gelu_backward(Ctx& c) {
  Builder& b = c.b;
  Value g = operand(c, 0), x = operand(c, 1);
  if (c.has(2) && c.s(2) == "tanh") {
    const double beta = std::sqrt(2 / M_PI), kappa = 0.044715;
    Value x2 = b.mul(x, x);
    Value t = b.unary(Op::Tanh, b.mul(K(b, x, beta), b.add(x, b.mul(K(b, x, kappa), b.mul(x2, x)))));
    Value left = b.mul(K(b, t, 0.5), b.add(K(b, t, 1), t));
    Value right = b.mul(b.mul(b.mul(K(b, x, 0.5), x), b.sub(K(b, t, 1), b.mul(t, t))),
                        b.mul(K(b, x, beta), b.add(K(b, x, 1), b.mul(K(b, x, 3 * kappa), x2))));
    return {result(c, b.mul(g, b.add(left, right)))};
  }
  Value cdf = b.mul(K(b, x, 0.5), b.add(K(b, x, 1), erf_of(b, b.mul(x, K(b, x, M_SQRT1_2)))));
  Value pdf = b.mul(K(b, x, 0.5 * M_2_SQRTPI * M_SQRT1_2), b.unary(Op::Exp, b.mul(K(b, x, -0.5), b.mul(x, x))));
  return {result(c, b.mul(g, b.add(cdf, b.mul(x, pdf))))};
}
Values softplus_backward(Ctx& c) {  // grad z / (z + 1), z = exp(beta x); grad above threshold
  Builder& b = c.b;
  Value g = operand(c, 0), x = operand(c, 1), bx = b.mul(x, operand(c, 2));
  Value z = b.unary(Op::Exp, bx);
  return {result(c, sel(b, cmp(b, bx, Cmp::GT, operand(c, 3)), g, b.div(b.mul(g, z), b.add(z, K(b, z, 1)))))};
}
// elu_backward(grad, alpha, scale, input_scale, is_result, self_or_result)
Values elu_backward(Ctx& c) {
  Builder& b = c.b;
  Value g = operand(c, 0), alpha = operand(c, 1), scale = operand(c, 2), in_scale = operand(c, 3);
  Value x = operand(c, 5);
  Value neg_coef = b.mul(alpha, scale);
  Value neg = c.flag(4) ? b.mul(b.mul(g, in_scale), b.add(x, neg_coef))
                        : b.mul(b.mul(b.mul(g, in_scale), neg_coef), b.unary(Op::Exp, b.mul(x, in_scale)));
  return {result(c, sel(b, cmp(b, x, Cmp::LE, K(b, x, 0)), neg, b.mul(g, scale)))};
}
Values hardtanh_backward(Ctx& c) {  // 0 outside (min, max)
  Builder& b = c.b;
  Value g = operand(c, 0), x = operand(c, 1);
  Value out = b.or_(cmp(b, x, Cmp::LE, operand(c, 2)), cmp(b, x, Cmp::GE, operand(c, 3)));
  return {result(c, sel(b, out, K(b, g, 0), g))};
}
Values hardsigmoid_backward(Ctx& c) {  // grad / 6 inside (-3, 3)
  Builder& b = c.b;
  Value g = operand(c, 0), x = operand(c, 1);
  Value in = b.and_(cmp(b, x, Cmp::GT, K(b, x, -3)), cmp(b, x, Cmp::LT, K(b, x, 3)));
  return {result(c, sel(b, in, b.div(g, K(b, g, 6)), K(b, g, 0)))};
}
Values hardswish_backward(Ctx& c) {  // 0 up to -3, grad (x / 3 + 1/2) below 3, grad from 3 (CPU's ends)
  Builder& b = c.b;
  Value g = operand(c, 0), x = operand(c, 1);
  Value mid = b.mul(g, b.add(b.div(x, K(b, x, 3)), K(b, x, 0.5)));
  return {result(c, sel(b, cmp(b, x, Cmp::LE, K(b, x, -3)), K(b, g, 0), sel(b, cmp(b, x, Cmp::LT, K(b, x, 3)), mid, g)))};
}
Values log_sigmoid_backward(Ctx& c) {  // grad sigmoid(-x)
  Value g = operand(c, 0), x = operand(c, 1);
  return {result(c, c.b.mul(g, sigmoid_of(c.b, c.b.unary(Op::Neg, x))))};
}
Values mish_backward(Ctx& c) {  // grad (t + x sigmoid(x) (1 - t^2)), t = tanh(softplus(x))
  Builder& b = c.b;
  Value g = operand(c, 0), x = operand(c, 1);
  Value t = b.unary(Op::Tanh, softplus_of(b, x));
  Value d = b.add(t, b.mul(b.mul(x, sigmoid_of(b, x)), b.sub(K(b, t, 1), b.mul(t, t))));
  return {result(c, b.mul(g, d))};
}
Values shrink_backward(Ctx& c) {  // 0 inside [-lambda, lambda]
  Builder& b = c.b;
  Value g = operand(c, 0), x = operand(c, 1), l = operand(c, 2);
  Value inside = b.and_(cmp(b, x, Cmp::GE, b.unary(Op::Neg, l)), cmp(b, x, Cmp::LE, l));
  return {result(c, sel(b, inside, K(b, g, 0), g))};
}
Values logit_backward(Ctx& c) {  // grad / (x (1 - x)); NaN outside [0, 1] without eps, 0 outside [eps, 1 - eps] with
  Builder& b = c.b;
  Value g = operand(c, 0), x = operand(c, 1);
  Value d = b.div(g, b.mul(x, b.sub(K(b, x, 1), x)));
  auto outside = [&](Value lo, Value hi) { return b.or_(cmp(b, x, Cmp::LT, lo), cmp(b, x, Cmp::GT, hi)); };
  Value without = sel(b, outside(K(b, x, 0), K(b, x, 1)), K(b, x, NAN), d);
  if (!c.has(2)) return {result(c, without)};
  Value eps = operand(c, 2);
  Value with = sel(b, outside(eps, b.sub(K(b, eps, 1), eps)), K(b, x, 0), d);
  return {result(c, sel(b, cmp(b, eps, Cmp::LT, K(b, eps, 0)), without, with))};
}
Values glu_backward(Ctx& c) {  // d/da = grad sigmoid(b); d/db = grad a s (1 - s)
  Builder& b = c.b;
  DType t = compute_type(c.out[0].dtype);
  Value x = convert(b, c.v(1), t), g = convert(b, c.v(0), t);
  int64_t dim = wrap_dim(c.i(2), x.type.rank());
  auto [a, h] = halves(b, x, dim);
  Value s = sigmoid_of(b, h);
  Value ga = b.mul(g, s), gh = b.mul(b.mul(g, a), b.mul(s, b.sub(K(b, s, 1), s)));
  return {result(c, b.concatenate({ga, gh}, dim))};
}

Register r({
    {"relu", relu}, {"threshold|threshold.out", threshold}, {"leaky_relu|leaky_relu.out", leaky_relu},
    {"silu|silu.out", silu}, {"gelu|gelu.out", gelu}, {"softplus|softplus.out", softplus}, {"elu|elu.out", elu},
    {"hardtanh|hardtanh.out", hardtanh}, {"hardsigmoid|hardsigmoid.out", hardsigmoid},
    {"hardswish|hardswish.out", hardswish}, {"mish|mish.out", mish},
    {"log_sigmoid_forward|log_sigmoid_forward.output", log_sigmoid_forward},
    {"hardshrink|hardshrink.out", hardshrink}, {"softshrink|softshrink.out", softshrink}, {"glu|glu.out", glu},
    {"threshold_backward|threshold_backward.grad_input", threshold_backward},
    {"leaky_relu_backward|leaky_relu_backward.grad_input", leaky_relu_backward},
    {"silu_backward|silu_backward.grad_input", silu_backward},
    {"sigmoid_backward|sigmoid_backward.grad_input", sigmoid_backward},
    {"tanh_backward|tanh_backward.grad_input", tanh_backward},
    {"gelu_backward|gelu_backward.grad_input", gelu_backward},
    {"softplus_backward|softplus_backward.grad_input", softplus_backward},
    {"elu_backward|elu_backward.grad_input", elu_backward},
    {"hardtanh_backward|hardtanh_backward.grad_input", hardtanh_backward},
    {"hardsigmoid_backward|hardsigmoid_backward.grad_input", hardsigmoid_backward},
    {"hardswish_backward|hardswish_backward.out", hardswish_backward},
    {"log_sigmoid_backward|log_sigmoid_backward.grad_input", log_sigmoid_backward},
    {"mish_backward", mish_backward},
    {"hardshrink_backward|hardshrink_backward.grad_input|softshrink_backward|softshrink_backward.grad_input",
     shrink_backward},
    {"logit_backward|logit_backward.grad_input", logit_backward},
    {"glu_backward|glu_backward.grad_input", glu_backward},
});

}  // namespace
}  // namespace tpu::lower

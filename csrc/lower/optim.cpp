// Fused optimizer steps (torch.optim's fused=True): one program updates every parameter and its
// state, in place. Hyperparameters (lr, betas, ...) are runtime operands, so an LR schedule never
// recompiles. The arithmetic follows PyTorch's CPU kernels (opmath: float32 for half types).
#include "lower/helpers.h"

namespace tpu::lower {
namespace {
using hlo::Cmp;
using hlo::Op;

// Argument i (a Python float or a 0-d tensor) as an f64 scalar.
Value f64(Ctx& c, size_t i) { return convert(c.b, c.b.reshape(c.v(i), {}), DType::F64); }

// Per-tensor context: scalars broadcast in the tensor's compute type, and the skip-if-found_inf rule.
struct Step {
  Ctx& c;
  Builder& b;
  DType t;
  Dims shape;
  Value k(Value s) const { return broadcast_to(b, convert(b, s, t), shape); }
  Value in(Value x) const { return convert(b, x, t); }
  // new value, or the old one where found_inf == 1 (PyTorch skips the whole step then)
  Value out(Value old, Value x, size_t found_inf) const {
    x = convert(b, x, old.type.dtype);
    if (!c.has(found_inf)) return x;
    Value inf = b.compare(f64(c, found_inf), b.splat(hlo::scalar(DType::F64), 1), Cmp::EQ);
    return b.select(broadcast_to(b, inf, shape), old, x);
  }
};

// select(pred, a, b) for a scalar pred.
Value pick(Builder& b, Value pred, Value x, Value y) { return b.select(broadcast_to(b, pred, x.type.dims), x, y); }

// _fused_adam(w)_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1,
// beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf). Results: every list, in order.
Values adam(Ctx& c, bool adamw) {
  Builder& b = c.b;
  Values p = c.vs(0), g = c.vs(1), m = c.vs(2), v = c.vs(3), vmax = c.vs(4), steps = c.vs(5);
  bool amsgrad = c.flag(11) && vmax.size() == p.size(), maximize = c.flag(12);
  Value lr = f64(c, 6), beta1 = f64(c, 7), beta2 = f64(c, 8), wd = f64(c, 9), eps = f64(c, 10);
  Value one = b.splat(hlo::scalar(DType::F64), 1), zero = b.splat(hlo::scalar(DType::F64), 0);
  Value w = b.sub(one, beta1), w_small = b.compare(b.unary(Op::Abs, w), b.splat(w.type, 0.5), Cmp::LT);
  Value has_wd = b.compare(wd, zero, Cmp::NE);
  size_t n = p.size();
  Values outs(c.out.size());
  for (size_t i = 0; i < n; ++i) {
    Step s{c, b, compute_type(p[i].type.dtype), p[i].type.dims};
    Value step = convert(b, b.reshape(steps[i], {}), DType::F64);
    Value bc1 = b.sub(one, b.binary(Op::Power, beta1, step));
    Value bc2_sqrt = b.unary(Op::Sqrt, b.sub(one, b.binary(Op::Power, beta2, step)));
    Value param = s.in(p[i]), grad = s.in(g[i]), exp_avg = s.in(m[i]), exp_avg_sq = s.in(v[i]);
    if (c.has(13)) grad = b.div(grad, s.k(f64(c, 13)));
    Value unscaled = grad;
    if (maximize) grad = b.unary(Op::Neg, grad);
    if (adamw) param = pick(b, has_wd, b.sub(param, b.mul(s.k(b.mul(lr, wd)), param)), param);
    else grad = pick(b, has_wd, b.add(grad, b.mul(param, s.k(wd))), grad);
    // exp_avg.lerp_(grad, 1 - beta1), in PyTorch's two-sided form
    Value diff = b.sub(grad, exp_avg);
    exp_avg = pick(b, w_small, b.add(exp_avg, b.mul(s.k(w), diff)), b.add(grad, b.mul(s.k(b.sub(w, one)), diff)));
    exp_avg_sq = b.add(b.mul(exp_avg_sq, s.k(beta2)), b.mul(b.mul(s.k(b.sub(one, beta2)), grad), grad));
    Value second = exp_avg_sq, new_max;
    if (amsgrad) second = new_max = b.max(s.in(vmax[i]), exp_avg_sq);
    Value denom = b.add(b.div(b.unary(Op::Sqrt, second), s.k(bc2_sqrt)), s.k(eps));
    param = b.sub(param, b.div(b.mul(s.k(b.div(lr, bc1)), exp_avg), denom));
    outs[i] = s.out(p[i], param, 14);
    outs[n + i] = c.has(13) ? s.out(g[i], unscaled, 14) : g[i];
    outs[2 * n + i] = s.out(m[i], exp_avg, 14);
    outs[3 * n + i] = s.out(v[i], exp_avg_sq, 14);
    if (amsgrad) outs[4 * n + i] = s.out(vmax[i], new_max, 14);
  }
  for (size_t i = 4 * n; i < outs.size() && !amsgrad; ++i) outs[i] = vmax[i - 4 * n];
  return outs;
}
Values fused_adam(Ctx& c) { return adam(c, false); }
Values fused_adamw(Ctx& c) { return adam(c, true); }

// _fused_sgd_(params, grads, momentum_buffers, *, weight_decay, momentum, lr, dampening, nesterov,
// maximize, is_first_step, grad_scale, found_inf). No momentum buffers: plain SGD.
Values fused_sgd(Ctx& c) {
  Builder& b = c.b;
  Values p = c.vs(0), g = c.vs(1), buf = c.vs(2);
  bool nesterov = c.flag(7), maximize = c.flag(8), first = c.flag(9), momentum_on = !buf.empty();
  Value wd = f64(c, 3), mom = f64(c, 4), lr = f64(c, 5), damp = f64(c, 6);
  Value one = b.splat(hlo::scalar(DType::F64), 1);
  Value has_wd = b.compare(wd, b.splat(wd.type, 0), Cmp::NE);
  size_t n = p.size();
  Values outs(c.out.size());
  for (size_t i = 0; i < n; ++i) {
    Step s{c, b, compute_type(p[i].type.dtype), p[i].type.dims};
    Value param = s.in(p[i]), grad = s.in(g[i]);
    if (c.has(10)) grad = b.div(grad, s.k(f64(c, 10)));
    Value unscaled = grad;
    if (maximize) grad = b.unary(Op::Neg, grad);
    grad = pick(b, has_wd, b.add(grad, b.mul(param, s.k(wd))), grad);
    if (momentum_on) {
      Value m = first ? grad : b.add(b.mul(s.in(buf[i]), s.k(mom)), b.mul(grad, s.k(b.sub(one, damp))));
      outs[2 * n + i] = s.out(buf[i], m, 11);
      grad = nesterov ? b.add(grad, b.mul(m, s.k(mom))) : m;
    }
    outs[i] = s.out(p[i], b.sub(param, b.mul(s.k(lr), grad)), 11);
    outs[n + i] = c.has(10) ? s.out(g[i], unscaled, 11) : g[i];
  }
  return outs;
}

// _fused_adagrad_(params, grads, state_sums, state_steps, *, lr, lr_decay, weight_decay, eps, maximize,
// grad_scale, found_inf). The steps were already incremented; they come back unchanged.
Values fused_adagrad(Ctx& c) {
  Builder& b = c.b;
  Values p = c.vs(0), g = c.vs(1), sums = c.vs(2), steps = c.vs(3);
  Value lr = f64(c, 4), decay = f64(c, 5), wd = f64(c, 6), eps = f64(c, 7);
  Value one = b.splat(hlo::scalar(DType::F64), 1);
  Value has_wd = b.compare(wd, b.splat(wd.type, 0), Cmp::NE);
  size_t n = p.size();
  Values outs(c.out.size());
  for (size_t i = 0; i < n; ++i) {
    Step s{c, b, compute_type(p[i].type.dtype), p[i].type.dims};
    Value step = convert(b, b.reshape(steps[i], {}), DType::F64);
    Value clr = b.div(lr, b.add(one, b.mul(b.sub(step, one), decay)));
    Value param = s.in(p[i]), grad = s.in(g[i]);
    if (c.has(9)) grad = b.div(grad, s.k(f64(c, 9)));
    Value unscaled = grad;
    if (c.flag(8)) grad = b.unary(Op::Neg, grad);
    grad = pick(b, has_wd, b.add(grad, b.mul(param, s.k(wd))), grad);
    Value sum = b.add(s.in(sums[i]), b.mul(grad, grad));
    Value std = b.add(b.unary(Op::Sqrt, sum), s.k(eps));
    outs[i] = s.out(p[i], b.sub(param, b.mul(b.div(grad, std), s.k(clr))), 10);
    outs[n + i] = c.has(9) ? s.out(g[i], unscaled, 10) : g[i];
    outs[2 * n + i] = s.out(sums[i], sum, 10);
    if (outs.size() > 3 * n) outs[3 * n + i] = steps[i];  // .tensor_lr does not list them as written
  }
  return outs;
}

Register r({
    {"_fused_adagrad_|_fused_adagrad_.tensor_lr", fused_adagrad},
    {"_fused_adam_|_fused_adam_.tensor_lr", fused_adam},
    {"_fused_adamw_|_fused_adamw_.tensor_lr", fused_adamw},
    {"_fused_sgd_|_fused_sgd_.tensor_lr", fused_sgd},
});

}  // namespace
}  // namespace tpu::lower

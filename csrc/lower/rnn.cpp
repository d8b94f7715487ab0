// Recurrent cells: the fused LSTM and GRU cell kernels PyTorch calls on accelerators (nn.LSTM, nn.GRU,
// nn.LSTMCell, nn.GRUCell), forward and backward. The workspace holds what the backward needs, laid out
// as CUDA's kernels lay it out: the LSTM's activated gates [i, f, g, o], the GRU's [r, z, n, hx, hn].
#include "lower/helpers.h"

namespace tpu::lower {
namespace {

using hlo::Op;

// The k-th of n equal chunks of x's last dim.
Value chunk(Builder& b, Value x, int64_t k, int64_t n) {
  Dims start(x.type.rank(), 0), limit = x.type.dims;
  int64_t w = limit.back() / n;
  start.back() = k * w;
  limit.back() = (k + 1) * w;
  return b.slice(x, start, limit);
}
// Argument i (gates) plus, when given, argument `bias` (broadcast over the batch), in the compute type.
Value gates(Ctx& c, size_t i, size_t bias) {
  DType t = compute_type(c.v(i).type.dtype);
  Value g = convert(c.b, c.v(i), t);
  if (c.has(bias)) g = c.b.add(g, broadcast_to(c.b, convert(c.b, c.v(bias), t), g.type.dims));
  return g;
}
Value one_minus(Builder& b, Value x) { return b.sub(K(b, x, 1), x); }
Value sigmoid(Builder& b, Value x) { return b.unary(Op::Logistic, x); }
Value tanh(Builder& b, Value x) { return b.unary(Op::Tanh, x); }
Value column_sum(Builder& b, Value x) { return reduce(b, x, {0}, Op::Add, 0); }

// _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias?, hidden_bias?) -> (hy, cy, workspace)
Values lstm_cell(Ctx& c) {
  Builder& b = c.b;
  Value g = b.add(gates(c, 0, 3), gates(c, 1, 4));
  Value i = sigmoid(b, chunk(b, g, 0, 4)), f = sigmoid(b, chunk(b, g, 1, 4));
  Value cell = tanh(b, chunk(b, g, 2, 4)), o = sigmoid(b, chunk(b, g, 3, 4));
  Value cy = b.add(b.mul(f, convert(b, c.v(2), g.type.dtype)), b.mul(i, cell));
  Value hy = b.mul(o, tanh(b, cy));
  return {result(c, hy, 0), result(c, cy, 1), result(c, b.concatenate({i, f, cell, o}, 1), 2)};
}

// _thnn_fused_lstm_cell_backward_impl(grad_hy?, grad_cy?, cx, cy, workspace, has_bias)
//   -> (grad_gates, grad_cx, grad_bias if has_bias)
Values lstm_cell_backward(Ctx& c) {
  if (!c.has(0) && !c.has(1)) return {};  // no gradient reached the cell: every result is None
  Builder& b = c.b;
  DType t = compute_type(c.v(4).type.dtype);
  Value ws = convert(b, c.v(4), t), cx = convert(b, c.v(2), t), cy = convert(b, c.v(3), t);
  Value i = chunk(b, ws, 0, 4), f = chunk(b, ws, 1, 4), cell = chunk(b, ws, 2, 4), o = chunk(b, ws, 3, 4);
  Value ghy = c.has(0) ? convert(b, c.v(0), t) : zeros(b, cy.type);
  Value gcy = c.has(1) ? convert(b, c.v(1), t) : zeros(b, cy.type);
  Value tcy = tanh(b, cy);
  Value gc = b.add(b.mul(b.mul(ghy, o), one_minus(b, b.mul(tcy, tcy))), gcy);  // d cy
  Value gi = b.mul(b.mul(gc, cell), b.mul(i, one_minus(b, i)));
  Value gf = b.mul(b.mul(gc, cx), b.mul(f, one_minus(b, f)));
  Value gg = b.mul(b.mul(gc, i), one_minus(b, b.mul(cell, cell)));
  Value go = b.mul(b.mul(ghy, tcy), b.mul(o, one_minus(b, o)));
  Value grad_gates = b.concatenate({gi, gf, gg, go}, 1);
  Values out = {result(c, grad_gates, 0), result(c, b.mul(gc, f), 1)};
  if (c.flag(5)) out.push_back(result(c, column_sum(b, grad_gates), 2));
  return out;
}

// _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias?, hidden_bias?) -> (hy, workspace)
Values gru_cell(Ctx& c) {
  Builder& b = c.b;
  Value ig = gates(c, 0, 3), hg = gates(c, 1, 4), hx = convert(b, c.v(2), ig.type.dtype);
  Value r = sigmoid(b, b.add(chunk(b, ig, 0, 3), chunk(b, hg, 0, 3)));
  Value z = sigmoid(b, b.add(chunk(b, ig, 1, 3), chunk(b, hg, 1, 3)));
  Value hn = chunk(b, hg, 2, 3);
  Value n = tanh(b, b.add(chunk(b, ig, 2, 3), b.mul(r, hn)));
  Value hy = b.add(n, b.mul(z, b.sub(hx, n)));
  return {result(c, hy, 0), result(c, b.concatenate({r, z, n, hx, hn}, 1), 1)};
}

// _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias)
//   -> (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias: the last two if has_bias)
Values gru_cell_backward(Ctx& c) {
  Builder& b = c.b;
  DType t = compute_type(c.v(1).type.dtype);
  Value ws = convert(b, c.v(1), t), ghy = convert(b, c.v(0), t);
  Value r = chunk(b, ws, 0, 5), z = chunk(b, ws, 1, 5), n = chunk(b, ws, 2, 5), hx = chunk(b, ws, 3, 5),
        hn = chunk(b, ws, 4, 5);
  Value gz = b.mul(b.mul(ghy, b.sub(hx, n)), b.mul(z, one_minus(b, z)));
  Value gn = b.mul(b.mul(ghy, one_minus(b, z)), one_minus(b, b.mul(n, n)));
  Value gr = b.mul(b.mul(gn, hn), b.mul(r, one_minus(b, r)));
  Value g_input = b.concatenate({gr, gz, gn}, 1), g_hidden = b.concatenate({gr, gz, b.mul(gn, r)}, 1);
  Values out = {result(c, g_input, 0), result(c, g_hidden, 1), result(c, b.mul(ghy, z), 2)};
  if (c.flag(2)) {
    out.push_back(result(c, column_sum(b, g_input), 3));
    out.push_back(result(c, column_sum(b, g_hidden), 4));
  }
  return out;
}

Register r({
    {"_thnn_fused_lstm_cell|_thnn_fused_lstm_cell.out", lstm_cell},
    {"_thnn_fused_lstm_cell_backward_impl|_thnn_fused_lstm_cell_backward_impl.out", lstm_cell_backward},
    {"_thnn_fused_gru_cell|_thnn_fused_gru_cell.out", gru_cell},
    {"_thnn_fused_gru_cell_backward|_thnn_fused_gru_cell_backward.out", gru_cell_backward},
});

}  // namespace
}  // namespace tpu::lower

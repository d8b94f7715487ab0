// PrivateUse1 kernels for neural-network ops that the boxed `dispatch` cannot take as they are:
//  - _fused_sdp_choice returns an int (the SDPA backend): tpu picks the math backend, so
//    scaled_dot_product_attention decomposes into matmuls and softmax;
//  - batch norm updates its running statistics in place without declaring it in the schema
//    (native_batch_norm) or declares mutated arguments that are not its results
//    (_native_batch_norm_legit): both run as the pure batch norm lowerings, the new running
//    statistics coming from _native_batch_norm_legit_functional and copied back here (their out=
//    forms too, and _batch_norm_with_update);
//  - ctc_loss with tensor lengths, which shape the computation: read on the host;
//  - rrelu_with_noise writes its noise argument but returns a new tensor;
//  - _embedding_bag_backward runs PyTorch's device-generic kernel, which picks the sparse gradient (a
//    composite) or the dense one (lowered).
// (Convolution, layer and group norm have CompositeExplicitAutograd kernels, but as lowered ops
// they get `dispatch` as their PrivateUse1 kernel in register.cpp.) native_batch_norm and
// _native_batch_norm_legit must have no lowering rule of their own, or register.cpp would claim them.
#include <ATen/ATen.h>
#include <ATen/SDPBackend.h>
#include <ATen/ops/_embedding_bag_backward_native.h>
#include <torch/library.h>

#include "aten/dispatch.h"

namespace tpu::aten {
namespace {

int64_t fused_sdp_choice(const at::Tensor&, const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                         double, bool, std::optional<double>, bool) {
  return static_cast<int64_t>(at::SDPBackend::math);
}

using Tensors3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

Tensors3 tuple3(const std::vector<c10::IValue>& r) { return {r[0].toTensor(), r[1].toTensor(), r[2].toTensor()}; }

// Training batch norm with running statistics: one program computes the output, the saved
// statistics and the new running statistics, which replace the old ones.
Tensors3 batch_norm_update(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                           const std::optional<at::Tensor>& bias, const at::Tensor& running_mean,
                           const at::Tensor& running_var, double momentum, double eps) {
  auto r = call("_native_batch_norm_legit_functional", "",
                {input, weight, bias, running_mean, running_var, true, momentum, eps});
  const_cast<at::Tensor&>(running_mean).copy_(r[3].toTensor());
  const_cast<at::Tensor&>(running_var).copy_(r[4].toTensor());
  return tuple3(r);
}

// Batch norm without running-statistics updates: in training the batch statistics, else the running ones.
Tensors3 batch_norm_pure(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                         const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                         const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  if (training) return tuple3(call("_native_batch_norm_legit", "no_stats", {input, weight, bias, true, momentum, eps}));
  return tuple3(call("_native_batch_norm_legit_no_training", "",
                     {input, weight, bias, running_mean, running_var, momentum, eps}));
}

Tensors3 native_batch_norm(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                           const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                           const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  bool stats = running_mean && running_mean->defined() && running_var && running_var->defined();
  if (training && stats) return batch_norm_update(input, weight, bias, *running_mean, *running_var, momentum, eps);
  return batch_norm_pure(input, weight, bias, running_mean, running_var, training, momentum, eps);
}

Tensors3 native_batch_norm_legit(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                 const std::optional<at::Tensor>& bias, at::Tensor& running_mean,
                                 at::Tensor& running_var, bool training, double momentum, double eps) {
  if (training) return batch_norm_update(input, weight, bias, running_mean, running_var, momentum, eps);
  return batch_norm_pure(input, weight, bias, running_mean, running_var, false, momentum, eps);
}

// The out= forms: the functional batch norm, copied into the given tensors.
using TensorRefs3 = std::tuple<at::Tensor&, at::Tensor&, at::Tensor&>;
TensorRefs3 copy_into(const Tensors3& r, at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
  at::Tensor* dst[3] = {&out, &save_mean, &save_invstd};
  const at::Tensor src[3] = {std::get<0>(r), std::get<1>(r), std::get<2>(r)};
  for (int k = 0; k < 3; ++k) copy_out(*dst[k], src[k]);
  return {out, save_mean, save_invstd};
}
TensorRefs3 native_batch_norm_out(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                               const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                               const std::optional<at::Tensor>& running_var, bool training, double momentum,
                               double eps, at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
  Tensors3 r = tpu::aten::native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps);
  return copy_into(r, out, save_mean, save_invstd);
}
TensorRefs3 native_batch_norm_legit_out(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                     const std::optional<at::Tensor>& bias, at::Tensor& running_mean,
                                     at::Tensor& running_var, bool training, double momentum, double eps,
                                     at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
  return copy_into(native_batch_norm_legit(input, weight, bias, running_mean, running_var, training, momentum, eps),
                   out, save_mean, save_invstd);
}

// ctc_loss with tensor lengths: the lengths shape log_alpha, so they come to the host (as on CPU) and
// the int[] overloads (lowered in csrc/lower/nn_misc.cpp) run.
std::vector<int64_t> host_ints(const at::Tensor& t) {
  at::Tensor h = t.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(h.data_ptr<int64_t>(), h.data_ptr<int64_t>() + h.numel());
}
std::tuple<at::Tensor, at::Tensor> ctc_loss_tensor(const at::Tensor& lp, const at::Tensor& tg, const at::Tensor& il,
                                                   const at::Tensor& tl, int64_t blank, bool zero_infinity) {
  auto r = call("_ctc_loss", "", {lp, tg, host_ints(il), host_ints(tl), blank, zero_infinity});
  return {r[0].toTensor(), r[1].toTensor()};
}
at::Tensor ctc_loss_backward_tensor(const at::Tensor& grad, const at::Tensor& lp, const at::Tensor& tg,
                                    const at::Tensor& il, const at::Tensor& tl, const at::Tensor& nll,
                                    const at::Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  return call("_ctc_loss_backward", "",
              {grad, lp, tg, host_ints(il), host_ints(tl), nll, log_alpha, blank, zero_infinity})[0].toTensor();
}

// _batch_norm_with_update: the training batch norm above, with an empty reserve as on CPU.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_with_update(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, double momentum, double eps) {
  auto [y, mean, invstd] = batch_norm_update(input, weight, bias, running_mean, running_var, momentum, eps);
  return {y, mean, invstd, at::empty({0}, input.options().dtype(at::kByte))};
}

// rrelu_with_noise writes `noise` but returns a new tensor: it runs as rrelu_with_noise_ on a copy.
at::Tensor rrelu_with_noise(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower, const at::Scalar& upper,
                            bool training, std::optional<at::Generator> generator) {
  at::Tensor out = self.clone();
  return at::rrelu_with_noise_(out, noise, lower, upper, training, generator);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_batch_norm_with_update", batch_norm_with_update);
  m.impl("rrelu_with_noise", rrelu_with_noise);
  m.impl("_embedding_bag_backward", TORCH_FN(at::native::_embedding_bag_backward_symint));
  m.impl("_ctc_loss.Tensor", ctc_loss_tensor);
  m.impl("_ctc_loss_backward.Tensor", ctc_loss_backward_tensor);
  m.impl("_fused_sdp_choice", fused_sdp_choice);
  m.impl("native_batch_norm", native_batch_norm);
  m.impl("_native_batch_norm_legit", native_batch_norm_legit);
  m.impl("native_batch_norm.out", native_batch_norm_out);
  m.impl("_native_batch_norm_legit.out", native_batch_norm_legit_out);
}

}  // namespace tpu::aten

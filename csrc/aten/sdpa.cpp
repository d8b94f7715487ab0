// PrivateUse1 kernels for neural-network ops that the boxed fallback cannot take as they are:
//  - _fused_sdp_choice returns an int (the SDPA backend): tpu picks the math backend, so
//    scaled_dot_product_attention decomposes into matmuls and softmax;
//  - ops whose CompositeExplicitAutograd kernels would win over the fallback (convolution goes to
//    convolution_overrideable, layer/group norm to batch norm) get the boxed kernel by name;
//  - batch norm in training updates its running statistics in place without declaring it in the
//    schema: the lowering of _native_batch_norm_legit_functional computes them, copied back here.
#include <ATen/ATen.h>
#include <ATen/SDPBackend.h>
#include <torch/library.h>

#include "aten/dispatch.h"
#include "lower/rule.h"

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

Tensors3 native_batch_norm(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                           const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                           const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  bool stats = running_mean && running_mean->defined() && running_var && running_var->defined();
  if (training && stats) return batch_norm_update(input, weight, bias, *running_mean, *running_var, momentum, eps);
  return tuple3(call("native_batch_norm", "", {input, weight, bias, running_mean, running_var, training, momentum, eps}));
}

Tensors3 native_batch_norm_legit(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                 const std::optional<at::Tensor>& bias, at::Tensor& running_mean,
                                 at::Tensor& running_var, bool training, double momentum, double eps) {
  if (training) return batch_norm_update(input, weight, bias, running_mean, running_var, momentum, eps);
  return tuple3(call("_native_batch_norm_legit_no_training", "",
                     {input, weight, bias, running_mean, running_var, momentum, eps}));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", fused_sdp_choice);
  m.impl("native_batch_norm", native_batch_norm);
  m.impl("_native_batch_norm_legit", native_batch_norm_legit);
  for (const char* name : {"convolution", "convolution_backward", "native_layer_norm", "native_group_norm",
                           "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&dispatch>());
}

}  // namespace tpu::aten

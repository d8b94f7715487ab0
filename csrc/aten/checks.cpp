// Argument checks CPU (and CUDA) kernels make that PyTorch's Meta kernels lack: on Python-scalar
// arguments (distribution parameters, exponents, thresholds: runtime operands of the compiled programs,
// so their values are checked here, on every call, cached or not), and on dtypes.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <limits>

#include "aten/dispatch.h"

namespace tpu::aten {

void check_scalar_args(const std::string& name, c10::ArrayRef<c10::IValue> args) {
  auto num = [&](size_t i) { return args[i].toScalar().toDouble(); };
  if (name == "uniform_") {
    TORCH_CHECK(num(1) <= num(2), "uniform_ expects to return a [from, to) range, but found from=", num(1),
                " > to=", num(2));
  } else if (name == "cauchy_") {
    TORCH_CHECK(num(2) > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", num(2));
  } else if (name == "exponential_") {
    TORCH_CHECK(num(1) > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", num(1));
  } else if (name == "geometric_") {
    TORCH_CHECK(num(1) > 0.0 && num(1) < 1.0, "geometric_ expects p to be in (0, 1), but got p=", num(1));
  } else if (name == "log_normal_") {
    TORCH_CHECK(num(2) > 0.0, "log_normal_ expects std > 0.0, but found std=", num(2));
  } else if (name == "normal_") {
    TORCH_CHECK(num(2) >= 0.0, "normal expects std >= 0.0, but found std ", num(2));
  } else if (name == "bernoulli_.float" || name == "bernoulli.p") {
    TORCH_CHECK(num(1) >= 0.0 && num(1) <= 1.0, "bernoulli_ expects p to be in [0, 1], but got p=", num(1));
  } else if (name == "pow.Tensor_Scalar" || name == "pow_.Scalar" || name == "pow.Tensor_Scalar_out") {
    const c10::Scalar e = args[1].toScalar();
    TORCH_CHECK(!(at::isIntegralType(args[0].toTensor().scalar_type(), true) && e.isIntegral(true) && e.toLong() < 0),
                "Integers to negative integer powers are not allowed.");
  } else if (name == "softshrink" || name == "softshrink.out" || name == "softshrink_backward" ||
             name == "softshrink_backward.grad_input") {
    double lambd = num(name.rfind("softshrink_backward", 0) == 0 ? 2 : 1);
    at::ScalarType t = args[0].toTensor().scalar_type();
    double most = t == at::kDouble ? std::numeric_limits<double>::max()
                  : t == at::kHalf ? 65504.0
                  : t == at::kBFloat16 ? static_cast<double>(std::numeric_limits<c10::BFloat16>::max())
                                       : std::numeric_limits<float>::max();
    TORCH_CHECK(lambd >= 0 && lambd <= most, "lambda must be in range [0, ", most, "] for input dtype ", t,
                ", but found ", lambd);
  } else if (name.rfind("sub", 0) == 0 || name.rfind("rsub", 0) == 0) {
    auto is_bool = [&](size_t i) {
      return args[i].isTensor() ? args[i].toTensor().scalar_type() == at::kBool : args[i].isBool();
    };
    if (name.find('.') != std::string::npos && args.size() >= 2) {
      TORCH_CHECK(!is_bool(0) || !is_bool(1), "Subtraction, the `-` operator, with two bool tensors is not supported. "
                  "Use the `^` or `logical_xor()` operator instead.");
      TORCH_CHECK(!is_bool(0) && !is_bool(1), "Subtraction, the `-` operator, with a bool tensor is not supported. "
                  "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
    }
  } else if (name == "relu" || name == "relu_") {
    TORCH_CHECK(args[0].toTensor().scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  } else if (name.rfind("var", 0) == 0 || name.rfind("std", 0) == 0) {
    at::ScalarType t = args[0].toTensor().scalar_type();
    TORCH_CHECK(at::isFloatingType(t) || at::isComplexType(t), "std and var only support floating point and complex dtypes");
  } else if (name == "index_select" || name == "index_select.out") {
    const at::Tensor& self = args[0].toTensor();
    int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), std::max<int64_t>(self.dim(), 1));
    TORCH_CHECK(args[2].toTensor().numel() == 0 || self.dim() == 0 || self.size(dim) > 0,
                "index_select(): self indexing axis dim should be positive");
  } else if (name.rfind("index_add", 0) == 0) {
    at::ScalarType self = args[0].toTensor().scalar_type(), source = args[3].toTensor().scalar_type();
    TORCH_CHECK(self == source, "index_add_(): self (", self, ") and source (", source, ") must have the same scalar type");
  } else if (name.rfind("index_copy", 0) == 0) {
    at::ScalarType self = args[0].toTensor().scalar_type(), source = args[3].toTensor().scalar_type();
    TORCH_CHECK(self == source, "index_copy_(): self and source expected to have the same dtype, but got (self) ", self,
                " and (source) ", source);
  } else if (name == "multinomial" || name == "multinomial.out") {
    TORCH_CHECK(at::isFloatingType(args[0].toTensor().scalar_type()),
                "multinomial only supports floating-point dtypes for input, got: ", args[0].toTensor().scalar_type());
    int64_t n = args[1].toInt(), categories = args[0].toTensor().size(-1);
    TORCH_CHECK(n > 0, "cannot sample n_sample <= 0 samples");
    TORCH_CHECK(args[2].toBool() || n <= categories,
                "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
    TORCH_CHECK(categories <= (int64_t{1} << 24), "number of categories cannot exceed 2^24");
    if (name == "multinomial.out")
      TORCH_CHECK(args[4].toTensor().scalar_type() == at::kLong, "multinomial expects Long tensor out, got: ",
                  args[4].toTensor().scalar_type());
  }
}

}  // namespace tpu::aten

// Argument checks CPU kernels make on Python-scalar arguments (distribution parameters, exponents,
// thresholds). Scalars are runtime operands of the compiled programs, so their values are checked
// here, on the host, on every call, cached or not.
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

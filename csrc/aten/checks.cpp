// Where CPU (and CUDA) kernels differ from PyTorch's Meta kernels. Argument checks the Meta kernels lack:
// on Python-scalar arguments (distribution parameters, exponents, thresholds: runtime operands of the
// compiled programs, so their values are checked here, on every call, cached or not), and on dtypes;
// CPU's warnings; and result types or layouts CPU gives differently (result_fix_for).
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/DistributionTemplates.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/native/Padding.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/native/TypeProperties.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <limits>
#include <unordered_map>

#include "aten/dispatch.h"
#include "aten/tensor.h"

namespace tpu::aten {

namespace {

std::string base_of(const std::string& name) { return name.substr(0, name.find('.')); }

double num(c10::ArrayRef<c10::IValue> args, size_t i) { return args[i].toScalar().toDouble(); }

// The indexing result's shape, from the indices on the meta device (a mask's count: a host sync; only
// on this error path), and CPU's error when the values do not broadcast to it.
void check_values_fit_index_result(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                                   const at::Tensor& values) {
  c10::List<std::optional<at::Tensor>> meta;
  for (const at::Tensor& t : at::native::expandTensors(self, indices))
    meta.push_back(t.defined() ? std::optional<at::Tensor>(at::empty(t.sizes(), t.options().device(c10::kMeta))) : std::nullopt);
  at::Tensor result = at::index(at::empty(self.sizes(), self.options().device(c10::kMeta)), meta);
  TORCH_CHECK(at::is_expandable_to(values.sizes(), result.sizes()), "shape mismatch: value tensor of shape ",
              values.sizes(), " cannot be broadcast to indexing result of shape ", result.sizes());
}

// CPU's alpha rule of add / sub: checked on the inputs' result type, before any kernel runs.
void check_alpha(const std::string& base, c10::ArrayRef<c10::IValue> args) {
  if (args.size() < 3 || !args[2].isScalar() || !args[0].isTensor()) return;
  const c10::Scalar alpha = args[2].toScalar();
  at::ScalarType t = args[1].isTensor() ? at::result_type(args[0].toTensor(), args[1].toTensor())
                                        : at::result_type(args[0].toTensor(), args[1].toScalar());
  TORCH_CHECK(!alpha.isBoolean() || t == at::kBool, "Boolean alpha only supported for Boolean results.");
  TORCH_CHECK(at::isFloatingType(t) || at::isComplexType(t) || alpha.isIntegral(true),
              "For integral input tensors, argument alpha must not be a floating point number.");
}

// var / std with correction >= the number of reduced elements: NaN, and CPU's warning.
void warn_degrees_of_freedom(const std::string& base, c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& self = args[0].toTensor();
  if (args.size() < 3) return;
  int64_t n = 1;  // elements per output element; 0 for an empty input or output
  if (args[1].isNone() || args[1].toIntList().empty() || self.numel() == 0) n = self.numel();
  else
    for (int64_t d : args[1].toIntList()) {
      int64_t rank = std::max<int64_t>(self.dim(), 1);
      if (d < -rank || d >= rank) return;  // the meta kernel raises CPU's IndexError
      n *= self.dim() == 0 ? 1 : self.size(c10::maybe_wrap_dim(d, self.dim()));
    }
  double correction = args[2].isNone() ? 1.0 : args[2].toScalar().toDouble();
  if (n - correction <= 0)
    TORCH_WARN(base, "(): degrees of freedom is <= 0. Correction should be strictly less than the reduction factor "
               "(input numel divided by output numel).");
}

// CPU copies non-contiguous searchsorted / bucketize operands first and says so, once per process.
void warn_noncontiguous_search(bool searchsorted, c10::ArrayRef<c10::IValue> args) {
  static std::atomic<bool> warned[3];
  static const char* what[3] = {"input value", "boundary", "sorter"};
  const c10::IValue* operand[3] = {&args[searchsorted ? 1 : 0], &args[searchsorted ? 0 : 1],
                                   searchsorted && args.size() > 5 ? &args[5] : nullptr};
  for (int k = 0; k < 3; ++k) {
    if (!operand[k] || !operand[k]->isTensor() || !operand[k]->toTensor().defined() ||
        operand[k]->toTensor().is_contiguous() || warned[k].exchange(true))
      continue;
    TORCH_WARN("torch.searchsorted(): ", what[k], " tensor is non-contiguous, this will lower the performance due to "
               "extra data copy when converting non-contiguous tensor to contiguous, please use contiguous ", what[k],
               " tensor if possible. This message will only appear once per program.");
  }
}

// Element i of a Scalar[] argument (None past its end), or the Scalar argument itself.
c10::IValue scalar_for(const c10::IValue& v, size_t i) {
  if (!v.isList()) return v;
  return i < v.toListRef().size() ? v.toListRef()[i] : c10::IValue();
}

// PyTorch's own argument checks of the random fills (bounds, precision warnings), run on an empty meta tensor
// of self's dtype: the kernel they guard never runs.
template <typename RNG>
struct NoKernel {
  template <typename... A>
  void operator()(A&&...) const {}
};
at::Tensor empty_meta_like(const at::Tensor& self) { return at::empty({0}, self.options().device(at::kMeta)); }

// CPU's fills convert their value to the tensor's element type with an overflow check (300 into int8,
// 1j into float): "value cannot be converted to type int8_t without overflow".
void check_fits(at::ScalarType t, const c10::IValue& v) {
  if (!v.isScalar()) return;
  const c10::Scalar s = v.toScalar();
  try {
    AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND3(at::kBool, at::kHalf, at::kBFloat16, t, "fill_", [&] { (void)s.to<scalar_t>(); });
  } catch (const c10::NotImplementedError&) {  // float8 and wide unsigned types: no conversion check to make
  }
}
// lerp's weight and addcmul/addcdiv's value, which CPU's kernels convert to the opmath type (float for half)
void check_fits_opmath(at::ScalarType t, const c10::IValue& v) { check_fits(at::toOpMathType(t), v); }

template <int N>
void check_pad_input(const std::string&, c10::ArrayRef<c10::IValue> args) {
  at::native::padding::check_valid_input<N>(args[0].toTensor(), args[1].toIntVector());
}

// addcdiv's refusal of integer division (bool included, as CPU and CUDA; the meta kernel lets bool through)
void check_addcdiv_types(const at::Tensor& tensor1, const at::Tensor& tensor2) {
  TORCH_CHECK(!at::isIntegralType(tensor1.scalar_type(), true) || !at::isIntegralType(tensor2.scalar_type(), true),
              "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform "
              "a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as "
              "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
              "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter "
              "implementation: (input + value * tensor1 / tensor2), for all dtypes.");
}

// Normalization statistics: PyTorch's meta kernels say float32, CPU keeps the input's dtype unless its
// parameters are float32 (mixed precision), and batch norm in eval mode saves none (size 0).
void stat_types_like_cpu(c10::ArrayRef<c10::IValue> args, std::vector<hlo::TensorType>& types, bool layer, bool eval) {
  if (types.size() < 3) return;
  const at::Tensor& x = args[0].toTensor();
  DType param = to_dtype(x.scalar_type());
  for (size_t i = layer ? 2 : 1; i < (layer ? 4u : 5u) && i < args.size(); ++i)
    if (args[i].isTensor() && args[i].toTensor().defined()) {
      if (args[i].toTensor().scalar_type() == at::kFloat) param = DType::F32;
      break;
    }
  if (x.scalar_type() != at::kBFloat16 && x.scalar_type() != at::kHalf) param = types[1].dtype;
  for (size_t k : {1, 2}) {
    types[k].dtype = param;
    if (eval) types[k].dims = {0};
  }
}

// The op a complex rejection is looked up by: no in-place underscore or overload; a foreach op's per-tensor
// op (with Python scalars, maximum and minimum clamp); the binary max and min.
std::string complex_key(const std::string& name) {
  std::string op = base_of(name), overload = name.size() > op.size() ? name.substr(op.size() + 1) : "";
  if (!op.empty() && op.back() == '_') op.pop_back();
  if (op.rfind("_foreach_", 0) == 0) {
    op = op.substr(9);
    if (op == "maximum" || op == "minimum") op = "clamp";  // CUDA's per-tensor kernels are clamp_min and clamp_max
  }
  if ((op == "max" || op == "min") && overload == "other") op += "imum";
  if ((op == "max" || op == "min") && overload.rfind("dim", 0) == 0) op += ".dim";
  return op;
}

// The complex dtype a tensor, scalar or list argument holds (a Python complex: ComplexDouble), or Undefined.
at::ScalarType complex_in(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().defined() && v.toTensor().is_complex() ? v.toTensor().scalar_type()
                                                                                : at::ScalarType::Undefined;
  if (v.isScalar()) return v.toScalar().isComplex() ? at::kComplexDouble : at::ScalarType::Undefined;
  if (v.isList())
    for (const c10::IValue& e : v.toListRef())
      if (at::ScalarType t = complex_in(e); t != at::ScalarType::Undefined) return t;
  return at::ScalarType::Undefined;
}

}  // namespace

// Ops whose CPU and CUDA kernels reject complex inputs, where our lowering would compute something or fail
// with an emitter error. An empty message: the kernel-without-dtype form CPU gives.
const ComplexRejection* complex_rejection_for(const std::string& name) {
  static const std::unordered_map<std::string, ComplexRejection> table = [] {
    std::unordered_map<std::string, ComplexRejection> t;
    for (const char* op : {"clamp", "clamp_min", "clamp_max", "hardtanh", "relu"})
      t[op] = {"clamp is not supported for complex types", true};
    t["maximum"] = {"maximum not implemented for complex tensors.", false};
    t["minimum"] = {"minimum not implemented for complex tensors.", false};
    t["fmax"] = {"fmax not implemented for complex tensors.", false};
    t["fmin"] = {"fmin not implemented for complex tensors.", false};
    t["ceil"] = {"ceil is not supported for complex inputs", true};
    t["floor"] = {"floor is not supported for complex inputs", true};
    t["trunc"] = {"trunc is not supported for complex inputs", true};
    t["sign"] = {"Unlike NumPy, torch.sign is not intended to support complex numbers. Please use torch.sgn instead.",
                 true};
    t["signbit"] = {"signbit is not implemented for complex tensors.", true};
    t["argmax"] = {"argmax(): does not support complex input", false};
    t["argmin"] = {"argmin(): does not support complex input", false};
    t["max.dim"] = {"max(): does not support complex input", false};
    t["min.dim"] = {"min(): does not support complex input", false};
    t["sort"] = {"sort does not support complex dtypes", false};
    t["topk"] = {"topk does not support complex dtypes", false};
    for (const char* op :
         {"atan2", "hypot", "copysign", "nextafter", "logit", "xlogy", "i0", "erf", "erfc", "erfinv", "lgamma",
          "digamma", "polygamma", "igamma", "igammac", "gcd", "lcm", "frac", "round", "lt", "le", "gt", "ge", "cummax",
          "cummin", "median", "nanmedian", "kthvalue", "mode", "histc", "bernoulli", "glu", "mish", "elu", "gelu",
          "hardshrink", "softshrink", "hardsigmoid", "hardswish", "leaky_relu", "_prelu_kernel", "rrelu_with_noise",
          "softplus", "threshold", "mse_loss", "huber_loss", "smooth_l1_loss", "nll_loss", "nll_loss_forward",
          "nll_loss2d", "nll_loss2d_forward", "multi_margin_loss", "multilabel_margin_loss_forward", "native_batch_norm",
          "_native_batch_norm_legit", "_native_batch_norm_legit_functional", "_native_batch_norm_legit_no_training",
          "index_reduce", "_batch_norm_with_update", "native_group_norm", "avg_pool2d", "avg_pool3d",
          "_adaptive_avg_pool2d", "_adaptive_avg_pool3d", "adaptive_max_pool2d", "adaptive_max_pool3d",
          "max_pool2d_with_indices", "max_pool3d_with_indices", "fractional_max_pool2d", "fractional_max_pool3d"})
      t[op] = {"", true};
    return t;
  }();
  static const ComplexRejection real_only{"", true};
  std::string key = complex_key(name);
  auto it = table.find(key);
  if (it == table.end()) return key.rfind("special_", 0) == 0 ? &real_only : nullptr;  // special functions: real
  // foreach ops call the per-tensor kernels, not the ops with their RuntimeError checks
  bool foreach = name.rfind("_foreach_", 0) == 0;
  return foreach && !it->second.not_implemented ? &real_only : &it->second;
}

namespace {
[[noreturn]] void raise_complex(const ComplexRejection& r, const std::string& name, at::ScalarType type) {
  TORCH_CHECK_NOT_IMPLEMENTED(*r.message, "\"", complex_key(name), "\" not implemented for '", type, "'");
  if (r.not_implemented) TORCH_CHECK_NOT_IMPLEMENTED(false, r.message);
  TORCH_CHECK(false, r.message);
}
}  // namespace

void reject_complex(const ComplexRejection& r, const std::string& name, c10::ArrayRef<c10::IValue> inputs) {
  if (!inputs[0].isList()) {
    for (const c10::IValue& v : inputs)
      if (at::ScalarType t = complex_in(v); t != at::ScalarType::Undefined) raise_complex(r, name, t);
    return;
  }
  // a foreach op: lists of unequal lengths are the meta kernel's errors; then tensor by tensor, as CPU and
  // CUDA's per-tensor ops, the shapes before the dtypes
  size_t n = inputs[0].toListRef().size();
  for (const c10::IValue& v : inputs)
    if (v.isList() && v.toListRef().size() != n) return;
  for (size_t i = 0; i < n; ++i) {
    std::optional<at::DimVector> shape;
    for (const c10::IValue& v : inputs) {
      if (!v.isList() || !v.toListRef()[i].isTensor()) continue;
      at::IntArrayRef sizes = v.toListRef()[i].toTensor().sizes();
      shape = shape ? at::infer_size_dimvector(*shape, sizes) : at::DimVector(sizes);
    }
    for (const c10::IValue& v : inputs)
      if (at::ScalarType t = complex_in(v.isList() ? v.toListRef()[i] : v); t != at::ScalarType::Undefined)
        raise_complex(r, name, t);
  }
}

namespace {
// A foreach op's scalar given as a tensor: CUDA's checks (CPU's kernel also takes one from another device).
void check_scalar_tensor(c10::ArrayRef<c10::IValue> args, bool same_device) {
  const at::Tensor& scalar = args[1].toTensor();
  TORCH_CHECK(scalar.dim() == 0 && scalar.numel() == 1, "scalar tensor expected to be 0 dim but it has ",
              scalar.dim(), " dimensions and ", scalar.numel(), " elements.");
  std::vector<at::Tensor> self = args[0].toTensorVector();
  TORCH_CHECK(!same_device || self.empty() || self[0].device() == scalar.device(), "scalar tensor expected to be on ",
              self[0].device(), " but is on ", scalar.device());
}
}  // namespace

ArgCheck arg_check_for(const std::string& name) {
  using Args = c10::ArrayRef<c10::IValue>;
  const std::string base = base_of(name);
  if (base == "searchsorted" || base == "bucketize")
    return [](const std::string& name, Args args) {
      bool searchsorted = base_of(name) == "searchsorted";
      if (searchsorted && args.size() > 5) {  // CPU's pre-checks that the meta kernel lacks
        if (args[4].isString()) {
          std::string side(args[4].toStringView());
          TORCH_CHECK(side == "left" || side == "right", "torch.searchsorted(): side can only be 'left' or 'right' but "
                      "got ", side);
        }
        if (args[5].isTensor() && args[5].toTensor().defined())
          TORCH_CHECK(args[5].toTensor().scalar_type() == at::kLong, "torch.searchsorted(): sorter must be a tensor "
                      "of long dtype but got dtype ", args[5].toTensor().scalar_type());
      }
      warn_noncontiguous_search(searchsorted, args);
    };
  // Reductions along a dim: CPU's and CUDA's dim mask holds 64 dims (these ops' meta kernels skip the check)
  if (base == "argmax" || base == "argmin" || base == "nansum" || name.rfind("max.dim", 0) == 0 ||
      name.rfind("min.dim", 0) == 0)
    return [](const std::string&, Args args) {
      bool some_dim = args.size() > 1 && !args[1].isNone() && !(args[1].isIntList() && args[1].toIntList().empty());
      TORCH_CHECK(!some_dim || args[0].toTensor().dim() <= 64, "only tensors with up to 64 dims are supported");
    };
  if (base == "index_fill" || base == "index_fill_")
    return [](const std::string&, Args args) {
      const c10::IValue& v = args[3];
      bool complex_value = v.isTensor() ? v.toTensor().is_complex() : v.isScalar() && v.toScalar().isComplex();
      TORCH_CHECK(args[0].toTensor().is_complex() || !complex_value,
                  "index_fill_(): Converting complex Scalar to non-complex type is not supported");
      check_fits(args[0].toTensor().scalar_type(), args[3]);
    };
  if (base == "fill" || base == "fill_")
    return [](const std::string&, Args args) { check_fits(args[0].toTensor().scalar_type(), args[1]); };
  if (base == "index_put" || base == "index_put_" || base == "_index_put_impl" || base == "_index_put_impl_")
    return [](const std::string&, Args args) {
      const at::Tensor &self = args[0].toTensor(), &values = args[2].toTensor();
      if (self.scalar_type() == values.scalar_type()) return;
      check_values_fit_index_result(self, args[1].toOptionalTensorList(), values);  // CPU checks this first
      TORCH_CHECK(false, "Index put requires the source and destination dtypes match, got ", self.scalar_type(),
                  " for the destination and ", values.scalar_type(), " for the source.");
    };
  if (base == "mul_" || base == "addcmul_" || base == "addcdiv_")
    return [](const std::string& name, Args args) {
      // their meta kernels skip TensorIterator's check that the result type casts to self's
      const at::Tensor& self_arg = args[0].toTensor();
      size_t n = base_of(name) == "mul_" ? 2 : 3;
      // only a complex result fails to cast to a floating self, and nothing fails for a complex one
      auto complex_at = [&](size_t i) {
        return args[i].isTensor() ? args[i].toTensor().is_complex() : args[i].toScalar().isComplex();
      };
      if (base_of(name) == "addcdiv_") check_addcdiv_types(args[1].toTensor(), args[2].toTensor());
      if (n == 3) check_fits_opmath(self_arg.scalar_type(), args[3]);
      if (self_arg.is_complex() || (self_arg.is_floating_point() && !complex_at(1) && (n < 3 || !complex_at(2)))) return;
      at::native::ResultTypeState state;
      for (size_t i = 0; i < n; ++i)
        state = args[i].isTensor() ? at::native::update_result_type_state(args[i].toTensor(), state)
                                   : at::native::update_result_type_state(args[i].toScalar(), state);
      at::ScalarType result = at::native::result_type(state), self = self_arg.scalar_type();
      TORCH_CHECK(at::canCast(result, self), "result type ", result, " can't be cast to the desired output type ", self);
    };
  if (base == "masked_fill" || base == "masked_fill_")
    return [](const std::string&, Args args) { check_fits(args[0].toTensor().scalar_type(), args[2]); };
  if (name == "lerp.Scalar" || name == "lerp_.Scalar" || name == "lerp.Scalar_out")
    return [](const std::string&, Args args) { check_fits_opmath(args[0].toTensor().scalar_type(), args[2]); };
  if (base == "addcmul" || base == "addcdiv")
    return [](const std::string& name, Args args) {
      if (name.rfind("addcdiv", 0) == 0) check_addcdiv_types(args[1].toTensor(), args[2].toTensor());
      check_fits_opmath(args[0].toTensor().scalar_type(), args[3]);
    };
  bool scalar_overload = name.size() > base.size() && (name.substr(base.size()) == ".Scalar" ||
                                                       name.substr(base.size()) == ".ScalarList");
  bool tensor_overload = name.size() > base.size() && name.substr(base.size()) == ".Tensor";
  if ((scalar_overload && (base == "_foreach_lerp" || base == "_foreach_lerp_")) ||
      ((scalar_overload || tensor_overload) && (base == "_foreach_addcmul" || base == "_foreach_addcmul_" ||
                                                base == "_foreach_addcdiv" || base == "_foreach_addcdiv_")))
    return [](const std::string& name, Args args) {
      size_t k = base_of(name).rfind("_foreach_lerp", 0) == 0 ? 2 : 3;
      bool addcdiv = base_of(name).rfind("_foreach_addcdiv", 0) == 0;
      std::vector<at::Tensor> self = args[0].toTensorVector();
      // tensor by tensor, as CPU: addcdiv's dtypes, the shapes, then the value
      for (size_t i = 0; i < self.size(); ++i) {
        at::DimVector shape(self[i].sizes());
        if (addcdiv && i < args[1].toListRef().size() && i < args[2].toListRef().size())
          check_addcdiv_types(args[1].toTensorVector()[i], args[2].toTensorVector()[i]);
        for (size_t j = 1; j < k; ++j) {
          std::vector<at::Tensor> other = args[j].toTensorVector();
          if (i < other.size()) shape = at::infer_size_dimvector(shape, other[i].sizes());
        }
        check_fits_opmath(self[i].scalar_type(), scalar_for(args[k], i));
      }
    };
  // a scalar given as a tensor
  if (name.size() > 7 && name.substr(name.size() - 7) == ".Tensor" && name.rfind("_foreach_", 0) == 0 &&
      base.find("addc") == std::string::npos) {
    if (base.rfind("_foreach_add", 0) != 0)  // mul and div also take one from the CPU
      return [](const std::string&, Args args) { check_scalar_tensor(args, false); };
    return [](const std::string&, Args args) { check_scalar_tensor(args, true); };
  }
  // with Python scalars, CPU's per-tensor checks: sub's of bools, and in place, each tensor must hold its
  // result type
  if (scalar_overload && base == "_foreach_sub")
    return [](const std::string&, Args args) {
      std::vector<at::Tensor> self = args[0].toTensorVector();
      for (size_t i = 0; i < self.size(); ++i)
        if (c10::IValue v = scalar_for(args[1], i); v.isScalar()) at::native::sub_check(self[i], v.toScalar());
    };
  if (name == "_foreach_sub.List" || name == "_foreach_sub_.List")
    return [](const std::string&, Args args) {
      std::vector<at::Tensor> self = args[0].toTensorVector(), other = args[1].toTensorVector();
      for (size_t i = 0; i < std::min(self.size(), other.size()); ++i) at::native::sub_check(self[i], other[i]);
    };
  if (scalar_overload && (base == "_foreach_add_" || base == "_foreach_sub_" || base == "_foreach_mul_" ||
                          base == "_foreach_div_" || base == "_foreach_pow_"))
    return [](const std::string& name, Args args) {
      std::vector<at::Tensor> self = args[0].toTensorVector();
      for (size_t i = 0; i < self.size(); ++i) {
        c10::IValue v = scalar_for(args[1], i);
        if (!v.isScalar()) continue;
        if (base_of(name) == "_foreach_sub_") at::native::sub_check(self[i], v.toScalar());
        at::ScalarType result = at::result_type(self[i], v.toScalar()), type = self[i].scalar_type();
        TORCH_CHECK(at::canCast(result, type), "result type ", result, " can't be cast to the desired output type ", type);
      }
    };
  // CPU's and CUDA's kernels take floating inputs only (our lowering would give a truncated mean)
  if (base == "_adaptive_avg_pool2d" || base == "_adaptive_avg_pool3d" || base == "adaptive_max_pool2d" ||
      base == "adaptive_max_pool3d")
    return [](const std::string& name, Args args) {
      at::ScalarType t = args[0].toTensor().scalar_type();
      TORCH_CHECK_NOT_IMPLEMENTED(!at::isIntegralType(t, /*includeBool=*/true), "\"",
                                  base_of(name).substr(base_of(name)[0] == '_'), "\" not implemented for '", t, "'");
    };
  // the ranks CPU's pads take: N + 1 or N + 2 dims, only the batch dim may be empty
  if (base == "reflection_pad1d" || base == "replication_pad1d") return check_pad_input<1>;
  if (base == "reflection_pad2d" || base == "replication_pad2d") return check_pad_input<2>;
  if (base == "reflection_pad3d" || base == "replication_pad3d") return check_pad_input<3>;
  if (base == "fractional_max_pool3d")  // CPU's and CUDA's kernels check these; the meta kernel does not
    return [](const std::string&, Args args) {
      const at::Tensor &x = args[0].toTensor(), &samples = args[3].toTensor();
      TORCH_CHECK(samples.dim() == 3, "fractional_max_pool3d(): _random_samples must be 3-D");
      TORCH_CHECK(samples.size(0) >= (x.dim() == 5 ? x.size(0) : 1),
                  "Expect _random_samples.size(0) no less then input batch size.");
      TORCH_CHECK(samples.size(1) == x.size(x.dim() - 4), "Expect _random_samples.size(1) equals to input channel size.");
      TORCH_CHECK(samples.size(2) == 3, "Expect _random_samples.size(2) equals to 3; got ", samples.size(2), ".");
    };
  if (base == "_embedding_bag" || base == "_embedding_bag_forward_only")
    return [](const std::string&, Args args) {
      const at::Tensor &weight = args[0].toTensor(), &indices = args[1].toTensor(), &offsets = args[2].toTensor();
      TORCH_CHECK(indices.dim() == 1 || indices.dim() == 2, "input has to be a 1D or 2D Tensor, but got Tensor of "
                  "dimension ", indices.dim());
      TORCH_CHECK(indices.dim() == 2 || offsets.dim() == 1, "offsets has to be a 1D Tensor, but got Tensor of "
                  "dimension ", offsets.dim());
      TORCH_CHECK(weight.dim() == 2, "weight has to be a 2D Tensor, but got Tensor of dimension ", weight.dim());
    };
  if (base == "put_" || base == "put")  // CPU's and CUDA's alert (writes to one index race)
    return [](const std::string&, Args args) {
      if (!args[3].toBool()) at::globalContext().alertNotDeterministic("put_");
    };
  // unsafe=False: CPU and CUDA read the lengths on the host (a sync), as normal's std check
  if (base == "segment_reduce")
    return [](const std::string&, Args args) {
      if (args[6].toBool() || !args[2].isTensor() || !args[2].toTensor().defined()) return;
      const at::Tensor &data = args[0].toTensor(), &lengths = args[2].toTensor();
      TORCH_CHECK(lengths.numel() == 0 || lengths.min().item<int64_t>() >= 0, "lengths contains negative value!");
      int64_t axis = at::maybe_wrap_dim(args[5].toInt(), data.dim());
      TORCH_CHECK(lengths.numel() == 0 || lengths.sum(-1).eq(data.size(axis)).all().item<bool>(),
                  "segment_reduce(): Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) "
                  "when !unsafe.");
    };
  if (name == "uniform_")
    return [](const std::string&, Args args) {
      at::Tensor probe = empty_meta_like(args[0].toTensor());
      at::native::templates::uniform_impl_<NoKernel, at::CPUGeneratorImpl>(probe, num(args, 1), num(args, 2), std::nullopt);
    };
  if (name == "random_.from" || name == "random.from" || name == "random.from_out" || name == "random_.to" ||
      name == "random.to" || name == "random.to_out")
    return [](const std::string& name, Args args) {
      bool to_only = name.find(".to") != std::string::npos;
      int64_t from = to_only ? 0 : args[1].toInt();
      std::optional<int64_t> to = to_only ? args[1].toOptional<int64_t>() : args[2].toOptional<int64_t>();
      at::Tensor probe = empty_meta_like(args[0].toTensor());
      at::native::templates::random_from_to_impl<NoKernel, at::CPUGeneratorImpl>(probe, from, to, std::nullopt);
    };
  if (name == "randperm.out" || name == "randperm.generator_out")
    return [](const std::string&, Args args) {
      int64_t n = args[0].toInt();
      TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
      at::native::check_supported_max_int_with_precision(n, at::empty({0}, args.back().toTensor().options().device(at::kCPU)));
    };
  // CPU's check of a std tensor reads its minimum (a host sync, as on CUDA)
  if (name == "normal.Tensor_Tensor" || name == "normal.Tensor_Tensor_out" || name == "normal.float_Tensor" ||
      name == "normal.float_Tensor_out")
    return [](const std::string&, Args args) {
      const at::Tensor& std = args[1].toTensor();
      TORCH_CHECK(!std.is_complex(), "normal expects standard deviation to be non-complex");
      TORCH_CHECK(std.numel() == 0 || std.min().ge(0).item<bool>(), "normal expects all elements of std >= 0.0");
    };
  if (name == "cauchy_")
    return [](const std::string&, Args args) {
      TORCH_CHECK(num(args, 2) > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", num(args, 2));
    };
  if (name == "exponential_")
    return [](const std::string&, Args args) {
      TORCH_CHECK(num(args, 1) > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", num(args, 1));
    };
  if (name == "geometric_")
    return [](const std::string&, Args args) {
      TORCH_CHECK(num(args, 1) > 0.0 && num(args, 1) < 1.0, "geometric_ expects p to be in (0, 1), but got p=", num(args, 1));
    };
  if (name == "log_normal_")
    return [](const std::string&, Args args) {
      TORCH_CHECK(num(args, 2) > 0.0, "log_normal_ expects std > 0.0, but found std=", num(args, 2));
    };
  if (name == "normal_")
    return [](const std::string&, Args args) {
      TORCH_CHECK(num(args, 2) >= 0.0, "normal expects std >= 0.0, but found std ", num(args, 2));
    };
  // CPU and CUDA size normal(mean, float, out=) by broadcasting mean with out's shape before resizing out
  if (name == "normal.Tensor_float_out")
    return [](const std::string&, Args args) { at::infer_size(args[0].toTensor().sizes(), args[3].toTensor().sizes()); };
  if (name == "bernoulli_.float" || name == "bernoulli.p")
    return [](const std::string&, Args args) {
      TORCH_CHECK(num(args, 1) >= 0.0 && num(args, 1) <= 1.0, "bernoulli_ expects p to be in [0, 1], but got p=", num(args, 1));
    };
  if (name == "pow.Tensor_Scalar" || name == "pow_.Scalar" || name == "pow.Tensor_Scalar_out")
    return [](const std::string&, Args args) {
      const c10::Scalar e = args[1].toScalar();
      TORCH_CHECK(!(at::isIntegralType(args[0].toTensor().scalar_type(), true) && e.isIntegral(true) && e.toLong() < 0),
                  "Integers to negative integer powers are not allowed.");
    };
  if (name == "softshrink" || name == "softshrink.out" || name == "softshrink_backward" ||
      name == "softshrink_backward.grad_input")
    return [](const std::string& name, Args args) {
      double lambd = num(args, name.rfind("softshrink_backward", 0) == 0 ? 2 : 1);
      at::ScalarType t = args[0].toTensor().scalar_type();
      double most = t == at::kDouble ? std::numeric_limits<double>::max()
                    : t == at::kHalf ? 65504.0
                    : t == at::kBFloat16 ? static_cast<double>(std::numeric_limits<c10::BFloat16>::max())
                                         : std::numeric_limits<float>::max();
      TORCH_CHECK(lambd >= 0 && lambd <= most, "lambda must be in range [0, ", most, "] for input dtype ", t,
                  ", but found ", lambd);
    };
  // CPU's dtype checks first (sub's bool check precedes alpha's)
  if (name.rfind("sub", 0) == 0 || name.rfind("rsub", 0) == 0)
    return [](const std::string& name, Args args) {
      auto is_bool = [&](size_t i) {
        return args[i].isTensor() ? args[i].toTensor().scalar_type() == at::kBool : args[i].isBool();
      };
      if (name.find('.') != std::string::npos && args.size() >= 2) {
        TORCH_CHECK(!is_bool(0) || !is_bool(1), "Subtraction, the `-` operator, with two bool tensors is not supported. "
                    "Use the `^` or `logical_xor()` operator instead.");
        TORCH_CHECK(!is_bool(0) && !is_bool(1), "Subtraction, the `-` operator, with a bool tensor is not supported. "
                    "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
      }
      std::string base = base_of(name);
      if (base == "sub" || base == "sub_" || base == "rsub") check_alpha(base, args);
    };
  if (base == "add" || base == "add_") return [](const std::string& name, Args args) { check_alpha(base_of(name), args); };
  if (name == "relu" || name == "relu_")
    return [](const std::string&, Args args) {
      TORCH_CHECK(args[0].toTensor().scalar_type() != at::kBool, "Boolean inputs not supported for relu");
    };
  if (name.rfind("var", 0) == 0 || name.rfind("std", 0) == 0)  // then the warning, only for a call that runs
    return [](const std::string& name, Args args) {
      at::ScalarType t = args[0].toTensor().scalar_type();
      TORCH_CHECK(at::isFloatingType(t) || at::isComplexType(t), "std and var only support floating point and complex dtypes");
      std::string base = base_of(name);
      if (base == "var" || base == "std" || base == "var_mean" || base == "std_mean") warn_degrees_of_freedom(base, args);
    };
  if (name == "max" || name == "min")  // the full reductions (their meta kernels run only on a compile)
    return [](const std::string& name, Args args) {
      TORCH_CHECK(args[0].toTensor().numel() > 0, name, "(): Expected reduction dim to be specified for input.numel() == 0. "
                  "Specify the reduction dim with the 'dim' argument.");
    };
  if (name == "mode" || name == "mode.values")
    return [](const std::string&, Args args) {
      const at::Tensor& self = args[0].toTensor();
      if (self.dim() == 0) return;
      int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), self.dim());
      TORCH_CHECK_INDEX(self.size(dim) > 0, "mode(): Expected reduction dim ", dim, " to have non-zero size.");
    };
  if (name == "histc" || name == "histc.out")
    return [](const std::string&, Args args) {
      double lo = num(args, 2), hi = num(args, 3);
      TORCH_CHECK(lo <= hi, "torch.histc: max must be larger than min");
      const at::Tensor& self = args[0].toTensor();
      if (!at::isFloatingType(self.scalar_type())) return;
      if (lo == hi && self.numel() > 0) {  // the data's range: read on the host, as CUDA does
        auto [min, max] = at::aminmax(self);
        lo = min.item<double>();
        hi = max.item<double>();
      }
      TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histc: range of [", lo, ", ", hi, "] is not finite");
    };
  // an in-place forward saved its result, which a negative slope makes ambiguous to invert
  if (base == "elu_backward")
    return [](const std::string&, Args args) {
      TORCH_CHECK(!args[4].toBool() || num(args, 1) >= 0, "In-place elu backward calculation is triggered with a negative "
                  "slope which is not supported. This is caused by calling in-place forward function with a negative "
                  "slope, please call out-of-place version instead.");
    };
  if (base == "leaky_relu_backward")
    return [](const std::string&, Args args) {
      TORCH_CHECK(!args[3].toBool() || num(args, 2) >= 0, "In-place leakyReLu backward calculation is triggered with a "
                  "negative slope which is not supported. This is caused by calling in-place forward function with a "
                  "negative slope, please call out-of-place version instead. File an issue at "
                  "https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu backward calculation "
                  "with negative slope");
    };
  if (base == "_ctc_loss")
    return [](const std::string&, Args args) {
      TORCH_CHECK(args[0].toTensor().numel() > 0, "log_probs tensor must not be empty");
    };
  if (base == "heaviside" || base == "heaviside_")
    return [](const std::string&, Args args) {
      at::ScalarType a = args[0].toTensor().scalar_type(), b = args[1].toTensor().scalar_type();
      TORCH_CHECK(!at::isComplexType(a) && !at::isComplexType(b), "heaviside is not yet implemented for complex tensors.");
      TORCH_CHECK(a == b, "heaviside is not yet implemented for tensors with different dtypes.");
    };
  if (base == "polar" || base == "complex")  // CPU's TensorIterator check, before the result type is known
    return [](const std::string&, Args args) {
      at::ScalarType a = args[0].toTensor().scalar_type(), b = args[1].toTensor().scalar_type();
      TORCH_CHECK(a == b, "Expected object of scalar type ", a, " but got scalar type ", b, " for second argument");
    };
  if (name == "aminmax" || name == "aminmax.out")  // CPU's 0-dim reduction along a dim has its own check
    return [](const std::string&, Args args) {
      at::ScalarType t = args[0].toTensor().scalar_type();
      bool along_dim = args[0].toTensor().dim() == 0 && !args[1].isNone();
      TORCH_CHECK(!at::isComplexType(t) || !along_dim, "aminmax not implemented for ", t);
      TORCH_CHECK_NOT_IMPLEMENTED(!at::isComplexType(t), "\"aminmax\" not implemented for '", t, "'");
    };
  if (name == "as_strided_scatter" || name == "as_strided_scatter.out")  // CPU writes through as_strided of a clone
    return [](const std::string&, Args args) {
      const at::Tensor& self = args[0].toTensor();
      auto sizes = args[2].toDimVector(), strides = args[3].toDimVector();
      int64_t offset = args[4].isNone() ? 0 : args[4].toInt(), last = offset;  // of the clone
      bool empty = false;
      for (size_t d = 0; d < sizes.size() && d < strides.size(); ++d) {
        empty |= sizes[d] == 0;
        last += (sizes[d] - 1) * strides[d];
      }
      int64_t item = static_cast<int64_t>(self.element_size()), need = empty ? 0 : (last + 1) * item;
      TORCH_CHECK(need <= self.numel() * item, "setStorage: sizes ", at::IntArrayRef(sizes), ", strides ",
                  at::IntArrayRef(strides), ", storage offset ", offset, ", and itemsize ", item,
                  " requiring a storage size of ", need, " are out of bounds for storage of size ", self.numel() * item);
    };
  if (name == "convolution" || name == "convolution.out" || name == "_convolution")
    return [](const std::string&, Args args) {
      auto any = [&](size_t i, auto bad) {
        for (int64_t v : args[i].toDimVector())
          if (bad(v)) return true;
        return false;
      };
      TORCH_CHECK(!any(4, [](int64_t v) { return v < 0; }), "negative padding is not supported");
      TORCH_CHECK(!any(7, [](int64_t v) { return v < 0; }), "negative output_padding is not supported");
      TORCH_CHECK(!any(3, [](int64_t v) { return v <= 0; }), "non-positive stride is not supported");
      TORCH_CHECK(!any(5, [](int64_t v) { return v <= 0; }), "dilation should be greater than zero, but got ",
                  at::IntArrayRef(args[5].toDimVector()));
      // CPU's and CUDA's shape checks that the meta kernel lacks
      const at::Tensor &x = args[0].toTensor(), &w = args[1].toTensor();
      const at::Tensor bias = args[2].isTensor() ? args[2].toTensor() : at::Tensor();
      int64_t groups = args[8].toInt();
      bool transposed = args[6].toBool();
      if (x.dim() < 2 || w.dim() != x.dim()) return;
      TORCH_CHECK(w.size(0) >= groups, "Given groups=", groups, ", expected weight to be at least ", groups,
                  " at dimension 0, but got weight of size ", w.sizes(), " instead");
      TORCH_CHECK(w.size(0) % groups == 0, "Given groups=", groups, ", expected weight to be divisible by ", groups,
                  " at dimension 0, but got weight of size [", w.sizes(), "] instead");
      int64_t in_channels = transposed ? w.size(0) : w.size(1) * groups;
      int64_t out_channels = transposed ? w.size(1) * groups : w.size(0);
      if (transposed)
        TORCH_CHECK(x.size(1) == in_channels, "Given transposed=1, weight of size ", w.sizes(), ", expected input",
                    x.sizes(), " to have ", in_channels, " channels, but got ", x.size(1), " channels instead");
      TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == out_channels), "Given ",
                  transposed ? "transposed=1, weight" : "weight", " of size ", w.sizes(),
                  ", expected bias to be 1-dimensional with ", out_channels, " elements, but got bias of size ",
                  bias.sizes(), " instead");
    };
  if (name == "index_select" || name == "index_select.out")
    return [](const std::string&, Args args) {
      const at::Tensor& self = args[0].toTensor();
      int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), std::max<int64_t>(self.dim(), 1));
      TORCH_CHECK(args[2].toTensor().numel() == 0 || self.dim() == 0 || self.size(dim) > 0,
                  "index_select(): self indexing axis dim should be positive");
    };
  if (name.rfind("index_add", 0) == 0)
    return [](const std::string&, Args args) {
      at::ScalarType self = args[0].toTensor().scalar_type(), source = args[3].toTensor().scalar_type();
      TORCH_CHECK(self == source, "index_add_(): self (", self, ") and source (", source, ") must have the same scalar type");
    };
  if (name.rfind("index_copy", 0) == 0)
    return [](const std::string&, Args args) {
      at::ScalarType self = args[0].toTensor().scalar_type(), source = args[3].toTensor().scalar_type();
      TORCH_CHECK(self == source, "index_copy_(): self and source expected to have the same dtype, but got (self) ", self,
                  " and (source) ", source);
    };
  if (name == "multinomial" || name == "multinomial.out")
    return [](const std::string& name, Args args) {
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
    };
  return nullptr;
}

bool unbatched_channels_last_3d(const at::Tensor& t) {
  if (t.dim() != 4 || (t.size(0) != 1 && t.stride(0) != 1)) return false;  // the channels are innermost
  std::vector<int64_t> sizes{1}, strides{t.numel()};
  sizes.insert(sizes.end(), t.sizes().begin(), t.sizes().end());
  strides.insert(strides.end(), t.strides().begin(), t.strides().end());
  return c10::is_channels_last_strides_3d(c10::IntArrayRef(sizes), c10::IntArrayRef(strides));
}

ResultFix result_fix_for(const std::string& name) {
  using Args = c10::ArrayRef<c10::IValue>;
  using Metas = const std::vector<at::Tensor>&;
  using Types = std::vector<hlo::TensorType>&;
  using Strides = std::vector<hlo::Dims>&;
  if (name == "native_layer_norm")
    return [](Args args, Metas, Types types, Strides) { stat_types_like_cpu(args, types, true, false); };
  if (name == "_native_batch_norm_legit_no_training")
    return [](Args args, Metas, Types types, Strides) { stat_types_like_cpu(args, types, false, true); };
  if (name == "_native_batch_norm_legit_functional")
    return [](Args args, Metas, Types types, Strides) { stat_types_like_cpu(args, types, false, !args[5].toBool()); };
  if (name.rfind("_native_batch_norm_legit", 0) == 0)
    return [](Args args, Metas, Types types, Strides) { stat_types_like_cpu(args, types, false, false); };
  // the meta kernel lays convolutions out row-major; CPU and CUDA keep a channels_last input's or weight's layout
  if (name == "convolution")
    return [](Args args, Metas meta, Types, Strides strides) {
      const at::Tensor& out = meta[0];
      for (int i : {0, 1}) {
        c10::MemoryFormat f = args[i].toTensor().suggest_memory_format();
        if (out.dim() == 4 && f == c10::MemoryFormat::ChannelsLast) strides[0] = c10::get_channels_last_strides_2d(out.sizes());
        if (out.dim() == 5 && f == c10::MemoryFormat::ChannelsLast3d) strides[0] = c10::get_channels_last_strides_3d(out.sizes());
        if (!strides[0].empty()) return;
      }
    };
  // CPU and CUDA pool an unbatched (4-D) input as a batch of one, so a channels_last_3d layout carries over to
  // the results (the meta kernel lays them out row-major)
  if (name == "max_pool3d_with_indices")
    return [](Args args, Metas meta, Types, Strides strides) {
      if (!unbatched_channels_last_3d(args[0].toTensor())) return;
      for (size_t k = 0; k < meta.size(); ++k) {
        std::vector<int64_t> batched{1};
        batched.insert(batched.end(), meta[k].sizes().begin(), meta[k].sizes().end());
        std::vector<int64_t> s = c10::get_channels_last_strides_3d(batched);
        strides[k] = hlo::Dims(s.begin() + 1, s.end());
      }
    };
  // floor_divide into a wider out= computes in its own result type, as the pointwise ops (it lacks their tag)
  if (name == "floor_divide.out" || name == "floor_divide.Scalar_out")
    return [](Args args, Metas, Types types, Strides) {
      const at::Tensor& self = args[0].toTensor();
      types[0].dtype = to_dtype(args[1].isTensor() ? at::result_type(self, args[1].toTensor())
                                                   : at::result_type(self, args[1].toScalar()));
    };
  // margin losses of one 1-D sample, unreduced: CPU returns a 0-d loss, the meta kernels a [1] one
  if (name == "multi_margin_loss" || name == "multilabel_margin_loss_forward")
    return [](Args args, Metas, Types types, Strides strides) {
      if (args[0].toTensor().dim() != 1 || types[0].dims != hlo::Dims{1}) return;
      types[0].dims = {};
      strides[0] = {};
    };
  return nullptr;
}

bool keeps_out_shape(const std::string& name) {
  return name == "arange.start_out" || name == "range.out" || name == "linspace.out" || name == "logspace.out";
}

void fit_sequence_out(const std::string& name, at::Tensor& out, at::Tensor& result) {
  int64_t n = result.numel();
  if (out.numel() == n) {
    result = result.view(out.sizes());
    return;
  }
  if (name == "arange.start_out" && out.numel() > 0)
    TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ", out.numel(),
               " which does not match the computed number of elements ", n, ". Note that this may occur as a result "
               "of rounding error. The out tensor will be resized to a tensor of shape (", n, ",).");
  out.resize_({n});
}

bool grad_like_input(const std::string& name) {
  const std::string base = base_of(name);
  for (const char* b : {"multi_margin_loss_backward", "multilabel_margin_loss_backward", "_ctc_loss_backward",
                        "fractional_max_pool3d_backward"})
    if (base == b) return true;
  return false;
}

}  // namespace tpu::aten

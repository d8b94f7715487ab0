// The one kernel behind every lowered ATen op on tpu: a boxed PrivateUse1 fallback that turns the
// call into a tpu::OpCall (see runtime/op_call.h), launches it, and pushes the results.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "runtime/op_call.h"

namespace tpu::aten {

void dispatch(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// Launches (Strict, Debug) or records (Fuse) `call`; runtime and lowering errors become PyTorch's, naming
// the op (`args`: the ATen arguments, for "not implemented for <dtype>").
Launched run(OpCall& call, const InferResults& infer, c10::ArrayRef<c10::IValue> args = {});
// Runs aten::`name`.`overload` through `dispatch` on `args` (no autograd), returning its outputs.
std::vector<c10::IValue> call(const char* name, const char* overload, std::vector<c10::IValue> args);

// Quantized dtypes and sparse layouts (arguments, or what a dense -> sparse conversion makes): tpu has
// no kernels for them, and the CPU fallback could not help. NotImplementedError naming them.
void reject_unsupported_tensors(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args);

// Unlowered ops: NotImplementedError, or with CPU fallback on, run on the CPU (counted per op).
void set_cpu_fallback(bool on);
bool cpu_fallback();

// Debug eager: raises CPU's error for out-of-range indices of indexing ops (reads indices on the host).
void check_bounds(const std::string& name, c10::ArrayRef<c10::IValue> args);

// CPU's checks of an op's arguments that its Meta kernel lacks (Python-scalar operands such as
// distribution parameters, dtypes, warnings): null for an op without any. Looked up once per operator.
using ArgCheck = void (*)(const std::string& name, c10::ArrayRef<c10::IValue> args);
ArgCheck arg_check_for(const std::string& name);
// CPU's and CUDA's rejection of complex inputs, where our lowering takes them: null for most ops. Looked
// up once per operator; reject_complex raises it if an input (not an out= argument) holds a complex value.
struct ComplexRejection {
  const char* message;   // empty: `"op" not implemented for 'ComplexFloat'`
  bool not_implemented;  // NotImplementedError, as CPU (else RuntimeError)
};
const ComplexRejection* complex_rejection_for(const std::string& name);
void reject_complex(const ComplexRejection& r, const std::string& name, c10::ArrayRef<c10::IValue> inputs);
// Where CPU's results differ from the meta kernel's (normalization statistics, convolution layout, 1-D
// margin losses): fixes the inferred types and strides; null for most ops. Looked up once per operator.
using ResultFix = void (*)(c10::ArrayRef<c10::IValue> args, const std::vector<at::Tensor>& meta,
                           std::vector<hlo::TensorType>& types, std::vector<hlo::Dims>& strides);
ResultFix result_fix_for(const std::string& name);
// A 4-D tensor laid out as an unbatched channels_last_3d one (CPU and CUDA pool it as a batch of one, keeping
// that layout). Part of the compile key, as the memory format PyTorch suggests.
bool unbatched_channels_last_3d(const at::Tensor& t);
// Sequence factories (arange, range, linspace, logspace): an out= with the result's number of elements keeps
// its shape (and gets the sequence in its logical order), as on CPU and CUDA; another is resized to 1-D
// without resize_output's warning (arange gives its own). fit_sequence_out reshapes the result or resizes out.
bool keeps_out_shape(const std::string& name);
void fit_sequence_out(const std::string& name, at::Tensor& out, at::Tensor& result);
// Backwards without any meta kernel whose gradient is shaped and typed like argument 1 (the input).
bool grad_like_input(const std::string& name);

// An out= kernel's last step, as CPU's: out takes the result's shape (resized, with PyTorch's warning
// when it had another nonempty shape) and then its values.
at::Tensor& copy_out(at::Tensor& out, const at::Tensor& result);

// The user's Python file:line of the current call ("" when not called from Python).
std::string python_origin();

}  // namespace tpu::aten

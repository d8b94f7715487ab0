// Between at::Tensor and the torch-free runtime: a tpu tensor's storage holds a tpu::Storage
// (the DataPtr's context), and its sizes/strides/offset are a lower::View of it.
#pragma once
#include <ATen/Tensor.h>
#include <c10/core/Allocator.h>

#include "runtime/op_call.h"

namespace tpu::aten {

DType to_dtype(at::ScalarType t);  // throws TypeError-like c10::Error for types PJRT lacks
at::ScalarType to_scalar_type(DType t);

c10::Allocator* allocator();
Storage& storage_of(const at::Tensor& t);
lower::View view_of(const at::Tensor& t);
Input input_of(const at::Tensor& t);

// A new tpu tensor (`sizes`; row-major, or `strides` of a dense layout) whose storage holds `contents`
// (flat, `dtype`).
at::Tensor wrap(Contents contents, at::ScalarType dtype, c10::IntArrayRef sizes, int device, const std::string& origin,
                c10::IntArrayRef strides = {});

// The tensor's elements as a dense buffer of its dtype (the storage's own buffer when it is
// exactly that, else a program that reads the view).
std::shared_ptr<pjrt::Buffer> dense_buffer(const at::Tensor& t);

// Raises pjrt errors as PyTorch errors: out-of-memory as torch.OutOfMemoryError, others as
// RuntimeError, prefixed with `context`.
[[noreturn]] void rethrow(const pjrt::Error& e, const std::string& context);
// Raises a failed device-side check as PyTorch would on CPU: IndexError or RuntimeError.
[[noreturn]] void rethrow(const CheckFailed& e);
// raise_failed_checks(device), its failure raised as on CPU (at host syncs).
void raise_failed_checks_like_cpu(int device);

}  // namespace tpu::aten

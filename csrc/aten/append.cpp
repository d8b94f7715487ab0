// aten::cat of a growing sequence. Generation appends a token per step to input_ids, positions and the
// mask, and reads their last elements: with exact storages every length is a new program for the cat
// and for every read (a view's offset is a runtime operand, its storage's size is not). A small cat
// along its outermost non-unit dim, whose first input starts its storage contiguously, instead gets a
// storage with spare capacity (a power of two) and is built from that first input's whole storage plus
// the rest written at a runtime offset (lowering "tpu_cat_append"). Within a capacity, every length then
// reuses the same programs. Everything else goes to the ordinary kernel.
#include "aten/append.h"

#include <ATen/ATen.h>
#include <ATen/core/stack.h>

#include "aten/dispatch.h"
#include "aten/tensor.h"
#include "hlo/builder.h"

namespace tpu::aten {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 16;  // bookkeeping sizes: the spare capacity costs nothing
constexpr int64_t kMinCapacity = 64;

int64_t capacity_for(int64_t numel) {
  int64_t c = kMinCapacity;
  while (c < numel) c *= 2;
  return c;
}

// The result's sizes when `ts` concatenate as flat sequences: same dtype and device, every dim before
// `dim` of size 1, the first input contiguous at the start of its storage. Empty when they do not.
std::vector<int64_t> appended_sizes(const std::vector<at::Tensor>& ts, int64_t dim) {
  if (ts.size() < 2) return {};
  const at::Tensor& first = ts[0];
  if (first.dim() == 0 || first.numel() == 0 || first.storage_offset() != 0 || !first.is_contiguous()) return {};
  int64_t d = c10::maybe_wrap_dim(dim, first.dim());
  std::vector<int64_t> sizes = first.sizes().vec();
  for (int64_t k = 0; k < d; ++k)
    if (sizes[k] != 1) return {};
  for (size_t k = 1; k < ts.size(); ++k) {
    const at::Tensor& t = ts[k];
    if (!t.defined() || t.dim() != first.dim() || t.scalar_type() != first.scalar_type() ||
        t.device() != first.device())
      return {};
    for (int64_t j = 0; j < t.dim(); ++j)
      if (j != d && t.size(j) != sizes[j]) return {};
    sizes[d] += t.size(d);
  }
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel > kMaxElements) return {};
  return sizes;
}

}  // namespace

void cat(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 2);
  std::vector<at::Tensor> ts = args[0].toTensorVector();
  std::vector<int64_t> sizes = ts.empty() ? std::vector<int64_t>{} : appended_sizes(ts, args[1].toInt());
  if (sizes.empty() || ts[0].storage().nbytes() % ts[0].element_size() != 0) {
    dispatch(op, stack);
    return;
  }
  const at::Tensor& first = ts[0];
  at::ScalarType dtype = first.scalar_type();
  int64_t itemsize = static_cast<int64_t>(first.element_size());
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;

  OpCall call;
  call.name = "cat";
  call.rule = lower::find("tpu_cat_append");
  call.device = first.device().index();
  call.locate = &python_origin;
  if (launch_blocking()) call.where();
  Input base;
  base.storage = &storage_of(first);
  base.view = {to_dtype(dtype), {static_cast<int64_t>(first.storage().nbytes()) / itemsize}, {1}, 0};
  call.inputs.push_back(base);
  lower::Arg pieces{lower::Arg::TensorList};
  pieces.ints.push_back(0);
  for (size_t k = 1; k < ts.size(); ++k) {
    pieces.ints.push_back(static_cast<int64_t>(call.inputs.size()));
    call.inputs.push_back(input_of(ts[k]));
  }
  lower::Arg length{lower::Arg::Scalar};
  length.ints.push_back(static_cast<int64_t>(call.inputs.size()));
  call.inputs.push_back(Input::integer(first.numel()));
  int64_t capacity = capacity_for(numel);
  lower::Arg result_size{lower::Arg::Int};  // the result type: part of the key like any structural argument
  result_size.i = capacity;
  call.args = {pieces, length, result_size};

  auto infer = [&] { return std::vector<hlo::TensorType>{{to_dtype(dtype), {capacity}}}; };
  Launched res = run(call, infer);
  at::Tensor out = wrap(res.results[0], dtype, {capacity}, call.device, call.known_where());
  out.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  torch::jit::drop(*stack, 2);
  torch::jit::push(*stack, out);
}

}  // namespace tpu::aten

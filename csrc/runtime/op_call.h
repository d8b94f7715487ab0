// A dispatched ATen op as the runtime sees it (torch-free): the deferred op node. It names its
// lowering rule, holds its inputs (views of device storages, and Python scalars as runtime
// operands), its structural arguments, and where its results go. Launching one builds the
// program on a cache miss (view reads + rule + write-backs), compiles it through the compile
// cache, and executes it asynchronously.
#pragma once
#include <complex>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lower/rule.h"
#include "lower/view.h"
#include "pjrt/client.h"

namespace tpu {

// The contents of a tensor storage: `nbytes` on `device`, held as a flat buffer of `dtype`
// elements (the dtype of whatever last wrote all of it). All tensors that share the storage see
// the buffer installed here.
struct Storage {
  std::shared_ptr<pjrt::Buffer> buffer;  // null until first written: reads as zeros
  DType dtype = DType::U8;
  int64_t nbytes = 0;
  int device = 0;
  std::string origin;  // the op and Python line that produced `buffer`, for error messages

  int64_t numel() const { return nbytes / byte_size(dtype); }
  hlo::TensorType type() const { return {dtype, {numel()}}; }
  // A never-written storage takes the dtype it is first used as (it reads as zeros of it).
  void settle(DType as);
  // The buffer; a never-written storage becomes zeros of `as` first.
  const std::shared_ptr<pjrt::Buffer>& materialize(DType as);
  // Installs `b` (flat, of `t`) as the whole contents.
  void assign(std::shared_ptr<pjrt::Buffer> b, DType t, std::string from);
};

struct Input {
  // A tensor: a view of a storage. The storage must outlive the launch.
  Storage* storage = nullptr;
  lower::View view;
  // A scalar operand (when storage is null): its dtype (F64, S64, Pred or C128) and value. Integers
  // and bools are kept exactly in `scalar_int` (int64 beyond 2^53, RNG seeds); floats in `scalar`.
  DType scalar_dtype = DType::F64;
  std::complex<double> scalar;
  int64_t scalar_int = 0;

  static Input integer(int64_t v) {
    Input in;
    in.scalar_dtype = DType::S64;
    in.scalar_int = v;
    return in;
  }
};

// A result written into an existing view (in-place ops, out= arguments).
struct Write {
  size_t result;
  Storage* dest;
  lower::View view;
  // The view is all of the storage's bytes: the result replaces the buffer (and its dtype).
  bool covers() const { return view.contiguous() && view.offset == 0 && view.numel() * byte_size(view.dtype) == dest->nbytes; }
};

struct OpCall {
  std::string name;  // ATen "op.overload"
  const lower::Rule* rule = nullptr;
  std::vector<lower::Arg> args;
  std::vector<Input> inputs;
  std::vector<Write> writes;
  int device = 0;
  hlo::Precision precision = hlo::Precision::Default;
  std::string origin;  // Python file:line of the user's call
  // State outside the inputs that decides result types (out= dtypes, the default dtype): part of the cache key
  std::string context_key;
};

// Result buffers (flat, one per result not covered by `writes`, in result order) after launching
// `call`. `infer_results` gives the results' logical types; it is called only when the program
// is not cached. Written storages get their new buffers installed.
struct Launched {
  std::vector<std::shared_ptr<pjrt::Buffer>> buffers;
  std::vector<hlo::TensorType> types;  // logical type of every result
};
Launched launch(OpCall& call, const std::function<std::vector<hlo::TensorType>()>& infer_results);

// Debug eager: wait for every launch and report errors at the op (TORCH_TPU_LAUNCH_BLOCKING=1).
void set_launch_blocking(bool on);
bool launch_blocking();
// Waits for everything launched so far on `device` (-1: all devices).
void synchronize(int device = -1);

}  // namespace tpu

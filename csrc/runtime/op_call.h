// A dispatched ATen op as the runtime sees it (torch-free): the deferred op node. It names its
// lowering rule, holds its inputs (views of device storages, and Python scalars as runtime
// operands), its structural arguments, and where its results go. Strict eager launches one at once
// (`launch`: build on a cache miss, compile through the compile cache, execute asynchronously);
// DeferAndFuse records it into the device's open graph (runtime/graph.h) and runs many as one program.
#pragma once
#include <complex>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lower/rule.h"
#include "lower/view.h"
#include "pjrt/client.h"

namespace tpu {

// An output of an op recorded in a device's open graph and not computed yet (DeferAndFuse). The
// flush that computes it fills `buffer`; a failed flush fills `error`.
struct Pending {
  int device = 0;
  size_t node = 0, output = 0;  // the node of the open graph that computes it, and which of its outputs
  int graph_refs = 0;  // recorded inputs that read it: those alone do not make it a program output
  int donor = -1;      // the graph argument whose buffer it replaces in its storage (donated if unshared)
  std::shared_ptr<pjrt::Buffer> buffer;
  std::string error;
};

// What a storage holds: a device buffer, or a pending output, or (both null) nothing yet, which reads
// as zeros.
struct Contents {
  std::shared_ptr<pjrt::Buffer> buffer;
  std::shared_ptr<Pending> pending;
  explicit operator bool() const { return buffer || pending; }
};

// The contents of a tensor storage: `nbytes` on `device`, held as a flat buffer of `dtype`
// elements (the dtype of whatever last wrote all of it). All tensors that share the storage see
// the contents installed here.
struct Storage {
  std::shared_ptr<pjrt::Buffer> buffer;  // null until first written (reads as zeros), or while pending
  std::shared_ptr<Pending> pending;      // the recorded op output that will be the buffer
  DType dtype = DType::U8;
  int64_t nbytes = 0;
  int device = 0;
  std::string origin;  // the op and Python line that produced the contents, for error messages

  int64_t numel() const { return nbytes / byte_size(dtype); }
  hlo::TensorType type() const { return {dtype, {numel()}}; }
  bool written() const { return buffer || pending; }
  // A never-written storage takes the dtype it is first used as (it reads as zeros of it).
  void settle(DType as);
  // The one entry point for every direct reader of the buffer (copies, item, printing, save, the CPU
  // fallback): pending contents are computed first (a flush of the open graph). Null if never written.
  const std::shared_ptr<pjrt::Buffer>& ready();
  // Installs new contents (a buffer, or a pending output) of type `t` as the whole storage.
  void assign(Contents c, DType t, std::string from);
  // The contents now (a pending output already computed becomes the buffer itself); raises the error of
  // a failed flush that should have computed them.
  Contents contents();
};

struct Input {
  // A tensor: a view of a storage. The storage must outlive the launch (recording captures its contents).
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
  std::string_view name;  // ATen "op.overload": names live as long as the process
  const lower::Rule* rule = nullptr;
  std::vector<lower::Arg> args;
  std::vector<Input> inputs;
  std::vector<Write> writes;
  int device = 0;
  hlo::Precision precision = hlo::Precision::Default;
  // State outside the inputs that decides result types (out= dtypes, the default dtype): part of the cache key
  std::string context_key;
  // Finds the user's Python file:line. Walking Python frames costs more than a cached launch, so it
  // runs only when needed (a compile, an error, Debug mode), on the calling thread.
  std::string (*locate)() = nullptr;
  mutable std::string origin;
  mutable bool located = false;

  std::string where() const {  // "op at file:line"
    if (!located && locate) origin = locate();
    located = true;
    return std::string(name) + (origin.empty() ? "" : " at " + origin);
  }
  std::string known_where() const { return located ? where() : std::string(name); }  // without locating
};

// The results of an op not covered by its `writes`, in result order: a buffer each (Strict), or a
// pending output each (recorded). Written storages get their new contents installed.
struct Launched {
  std::vector<Contents> results;
  std::vector<hlo::TensorType> types;  // logical type of every result
  std::vector<hlo::Dims> strides;      // per result, its strides where they are not row-major, else empty
};
// An op's results as PyTorch lays them out: their logical types, and the strides of those that keep an
// input's dense layout (a pointwise op on a channels_last or transposed input); empty: row-major.
struct Results {
  std::vector<hlo::TensorType> types;
  std::vector<hlo::Dims> strides;
  Results(std::vector<hlo::TensorType> t = {}, std::vector<hlo::Dims> s = {}) : types(std::move(t)), strides(std::move(s)) {
    strides.resize(types.size());
  }
};
using InferResults = std::function<Results()>;
// Strict eager: runs `call` now. `infer_results` gives the results' logical types; it is called only
// when the program is not cached.
Launched launch(OpCall& call, const InferResults& infer_results);
// DeferAndFuse: records `call` into its device's open graph; `infer_results` is called only when the
// op's launch plan (its result types per signature) is not cached.
Launched record(OpCall& call, const InferResults& infer_results);

// Execution modes: Strict launches each op; Fuse records ops and runs them as one program at the next
// flush; Debug launches each op and waits for it (TORCH_TPU_LAUNCH_BLOCKING=1).
enum class Mode { Strict, Fuse, Debug };
void set_mode(Mode m);  // flushes what was recorded
Mode mode();
bool launch_blocking();
void set_launch_blocking(bool on);  // Debug when on, else Strict
// Runs everything recorded on `device` (-1: all devices).
void flush(int device = -1);
// A device-side check failed (an index out of range, an integer division by zero): raised at the next
// host sync, with CPU's message, the op and its Python line. `index_error`: PyTorch raises IndexError.
struct CheckFailed : std::runtime_error {
  CheckFailed(const std::string& what, bool index_error) : std::runtime_error(what), index_error(index_error) {}
  bool index_error;
};
// Reads the status of every check registered on `device` (-1: all) and throws CheckFailed for the
// first that failed. Called where the host waits anyway: copies to the host, item(), synchronize().
void raise_failed_checks(int device = -1);
// Flushes, then waits for everything launched so far on `device` (-1: all devices).
void synchronize(int device = -1);

}  // namespace tpu

// How an OpCall becomes StableHLO (shared by Strict launches and the DeferAndFuse graph; internal
// to the runtime): its parameters, its cache key, and the emission of its body.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/compile_cache.h"
#include "runtime/op_call.h"

namespace tpu {

// Program parameters of one op: one per distinct storage read (inputs, and views written in part),
// one per scalar input, and one s64 offset per view that is not its whole storage (offsets are
// runtime operands: a view at another position reuses the program). Filled when the op is launched
// or recorded; afterwards `storage` pointers serve only as identities (a storage may die before a
// recorded op runs: its contents were captured).
struct Params {
  std::vector<Storage*> storage;      // parameter -> storage, or null for a scalar
  std::vector<hlo::TensorType> type;  // parameter -> its type (a storage's flat buffer, or a scalar)
  std::vector<Contents> contents;     // parameter -> the storage's contents when captured (none: zeros)
  std::vector<Input> scalar;          // parameter -> its scalar (when storage is null)
  std::vector<int> of_input;          // input index -> parameter
  std::vector<int> input_offset;      // input index -> parameter of its view's offset, or -1
  std::vector<int> write_param;       // write index -> parameter of its storage, or -1
  std::vector<int> write_offset;      // write index -> parameter of its view's offset, or -1
  std::vector<bool> write_covers;     // write index -> it replaces the whole storage

  bool zero(size_t q) const { return storage[q] && !contents[q]; }  // never written: reads as zeros
  int find(const Storage* st) const;
};

Params assign_params(const OpCall& c);
// The op's signature: name, structural arguments, input types and view geometry (never a scalar's
// value or a view's offset), precision and context. Programs and launch plans are cached by it.
std::string cache_key(const OpCall& c, const Params& p);

// The storages an op writes, in order of first write, each with its type after the op.
std::vector<std::pair<Storage*, hlo::TensorType>> written_storages(const OpCall& c, const Params& p);

// The op's body: reads its inputs' views from `params` (one value per parameter), applies its rule
// (whose results must have the types `results`), and writes back. Returns the results not written
// anywhere (flat, laid out by their strides), then each written storage's new contents (flat), in
// order of first write, then the status of each device-side check the rule made (described in `checks`).
hlo::Values emit(hlo::Builder& b, const OpCall& c, const Params& p, const hlo::Values& params, const Results& results,
                 std::vector<DeviceCheck>& checks);

// The whole program of one op (Strict): its parameters, `emit`, its outputs (written storages' old
// buffers aliased to their new contents, for donation).
Program build(const OpCall& c, const Params& p, Results results);

// Held while ops read and replace storage contents (launch, record, flush), so that Python threads
// sharing tensors never race on a storage (recursive: a flush or a copy may run inside an op).
std::recursive_mutex& contents_mutex();

// A device buffer holding a scalar operand (pooled: the same values recur).
std::shared_ptr<pjrt::Buffer> scalar_buffer(const Input& in, int device);
// Remembers a launched program's completion event for synchronize(), which raises its error naming
// `what` (the op, or the graph) if it failed.
void track(int device, pjrt::Event done, std::string what);

// Registers the status (s64[2]: failed, value) of a device-side check made by `where` (an op and its
// Python line), to be read at the next host sync (raise_failed_checks). Debug mode reads it at once.
void expect(int device, Contents status, DeviceCheck check, std::string where);
// The check whose status `pd` is, if any (torch.compile captures keep checks).
const DeviceCheck* expected(const Pending* pd, std::string* where);

}  // namespace tpu

// torch.compile (torch-free part): an FX graph is run once on tpu tensors while its device records
// (a capture), its deferred-op graph becomes one program, and later calls replay that program on new
// inputs bound by position, with no tracing and no dispatch per op.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/compile_cache.h"
#include "runtime/op_call.h"

namespace tpu {

struct Captured {
  // Where each program argument comes from on a replay.
  enum class Source { Input, Constant, Seed, Counter };
  struct Arg {
    Source source = Source::Constant;
    int input = -1;                        // Input: the input whose storage's buffer it is
    std::shared_ptr<pjrt::Buffer> buffer;  // Constant: a buffer (null: the scalar)
    Input scalar;                          // Constant scalars (Python scalars, view offsets)
  };
  std::shared_ptr<const Compiled> program;
  int device = 0;
  std::string name;
  std::vector<Arg> args;
  std::vector<int> alias;                       // argument -> the program output it may be donated to, or -1
  std::vector<DType> dtypes;                    // program output -> the dtype of its flat buffer
  std::vector<int> output_storage;              // output storage -> program output, or -1 - i: input i's storage
  std::vector<std::vector<int>> written_inputs;  // program output -> inputs whose storage it replaces
  struct Check {
    int output;  // the program output that is its status
    DeviceCheck check;
    std::string where;
  };
  std::vector<Check> checks;  // device-side checks: registered again on every replay
};

// Starts recording on `device` (flushing what was recorded before), whatever the mode. Every op until
// end_capture is recorded into one graph.
void begin_capture(int device, const std::vector<Storage*>& inputs);
// Ends the capture and runs what was recorded. Returns how to replay it, or null with `why` set when
// it cannot be replayed (the graph was cut, or a value it computes is held by something that is not
// an input or an output).
std::shared_ptr<Captured> end_capture(int device, const std::vector<Storage*>& inputs,
                                      const std::vector<Storage*>& outputs, std::string& why);
// Ends a capture that failed: what was recorded still runs (at the next flush).
void abort_capture(int device);

// A fresh (seed, counter) pair for one random op of a replayed graph.
using DrawRandom = std::function<std::pair<uint64_t, uint64_t>()>;
// Runs the captured program on new inputs (storages with the captured geometry) and installs the
// contents of written inputs. Returns the contents of each output storage (null where it is an input's).
std::vector<std::shared_ptr<pjrt::Buffer>> replay(const Captured& c, const std::vector<Storage*>& inputs,
                                                  const DrawRandom& draw);

}  // namespace tpu

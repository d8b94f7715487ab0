// torch.compile on tpu tensors (torch_tpu/compiler.py drives it): an FX graph's call captured as one
// program, and replayed on inputs of the same geometry, which rebuilds its output tensors.
#pragma once
#include <ATen/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/capture.h"

namespace tpu::aten {

struct CompiledGraph {
  // What replaying assumes of each input: its view, its storage's size, whether that storage was ever
  // written (never-written storages read as zeros, not as arguments), and which earlier input shares it.
  struct Geometry {
    at::ScalarType dtype;
    std::vector<int64_t> sizes, strides;
    int64_t offset, nbytes;
    bool written;
    int shares;
  };
  struct Output {
    int storage;  // index into storages
    at::ScalarType dtype;
    std::vector<int64_t> sizes, strides;
    int64_t offset;
  };
  std::shared_ptr<Captured> captured;
  std::vector<Geometry> inputs;
  std::vector<Output> outputs;
  std::vector<int64_t> storage_nbytes;  // output storage -> its size

  // Why `inputs` cannot replay this graph ("" if they can).
  std::string mismatch(const std::vector<at::Tensor>& inputs) const;
};

// Records every op on the inputs' device until capture_end; the graph knows its inputs' geometry.
std::shared_ptr<CompiledGraph> capture_begin(const std::vector<at::Tensor>& inputs);
// Runs what was recorded; fills `g` with how to replay it, or returns why it cannot be replayed.
std::string capture_end(CompiledGraph& g, const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs);
void capture_abort(const std::vector<at::Tensor>& inputs);
// The graph's outputs for `inputs`, or nothing when their geometry differs from the captured call's.
std::optional<std::vector<at::Tensor>> replay(const CompiledGraph& g, const std::vector<at::Tensor>& inputs);

}  // namespace tpu::aten

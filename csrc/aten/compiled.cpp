#include "aten/compiled.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>

#include "aten/generator.h"
#include "aten/tensor.h"

namespace tpu::aten {
namespace {

int device_of(const std::vector<at::Tensor>& inputs) {
  for (const at::Tensor& t : inputs) {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "tpu: a compiled graph's inputs must be tpu tensors");
    return t.device().index();
  }
  return 0;
}

std::vector<Storage*> storages(const std::vector<at::Tensor>& ts) {
  std::vector<Storage*> out;
  for (const at::Tensor& t : ts) out.push_back(&storage_of(t));
  return out;
}

CompiledGraph::Geometry geometry(const std::vector<at::Tensor>& inputs, size_t i) {
  const at::Tensor& t = inputs[i];
  int shares = -1;
  for (size_t k = 0; k < i && shares < 0; ++k)
    if (inputs[k].storage().is_alias_of(t.storage())) shares = static_cast<int>(k);
  return {t.scalar_type(), t.sizes().vec(), t.strides().vec(), t.storage_offset(),
          static_cast<int64_t>(t.storage().nbytes()), storage_of(t).written(), shares};
}

}  // namespace

std::string CompiledGraph::mismatch(const std::vector<at::Tensor>& given) const {
  if (given.size() != inputs.size()) return "the number of inputs changed";
  for (size_t i = 0; i < given.size(); ++i) {
    const Geometry& was = inputs[i];
    Geometry now = geometry(given, i);
    auto name = "input " + std::to_string(i) + " ";
    if (now.dtype != was.dtype || now.sizes != was.sizes)
      return name + "changed from " + std::string(c10::toString(was.dtype)) + c10::str(at::IntArrayRef(was.sizes)) +
             " to " + std::string(c10::toString(now.dtype)) + c10::str(at::IntArrayRef(now.sizes));
    if (now.strides != was.strides || now.offset != was.offset || now.nbytes != was.nbytes)
      return name + "changed its layout (strides, storage offset or storage size)";
    if (now.written != was.written) return name + (now.written ? "was written since" : "was never written");
    if (now.shares != was.shares) return name + "shares storage with other inputs differently";
  }
  return "";
}

std::shared_ptr<CompiledGraph> capture_begin(const std::vector<at::Tensor>& inputs) {
  auto g = std::make_shared<CompiledGraph>();
  for (size_t i = 0; i < inputs.size(); ++i) g->inputs.push_back(geometry(inputs, i));
  begin_capture(device_of(inputs), storages(inputs));
  return g;
}

void capture_abort(const std::vector<at::Tensor>& inputs) { abort_capture(device_of(inputs)); }

std::string capture_end(CompiledGraph& g, const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs) {
  int device = device_of(inputs);
  std::vector<Storage*> output_storages;
  for (const at::Tensor& t : outputs) {
    if (t.device().type() != c10::DeviceType::PrivateUse1 || t.device().index() != device) {
      abort_capture(device);
      flush(device);
      return "an output is not on the inputs' tpu device";
    }
    Storage* st = &storage_of(t);
    int k = 0;
    while (k < static_cast<int>(output_storages.size()) && output_storages[k] != st) ++k;
    if (k == static_cast<int>(output_storages.size())) {
      output_storages.push_back(st);
      g.storage_nbytes.push_back(static_cast<int64_t>(t.storage().nbytes()));
    }
    g.outputs.push_back({k, t.scalar_type(), t.sizes().vec(), t.strides().vec(), t.storage_offset()});
  }
  std::string why;
  g.captured = end_capture(device, storages(inputs), output_storages, why);
  return why;
}

std::optional<std::vector<at::Tensor>> replay(const CompiledGraph& g, const std::vector<at::Tensor>& inputs) {
  if (!g.mismatch(inputs).empty()) return std::nullopt;
  int device = g.captured->device;
  auto contents = tpu::replay(*g.captured, storages(inputs), [device] { return next_random({}, device); });
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  std::vector<c10::Storage> made;
  for (size_t k = 0; k < contents.size(); ++k) {
    int slot = g.captured->output_storage[k];
    if (slot < 0) {
      made.push_back(inputs[-1 - slot].storage());
      continue;
    }
    size_t nbytes = static_cast<size_t>(g.storage_nbytes[k]);
    made.emplace_back(c10::Storage::use_byte_size_t(), nbytes, allocator()->allocate(nbytes), allocator(), true);
    static_cast<Storage*>(made.back().data_ptr().get_context())
        ->assign({contents[k], nullptr}, g.captured->dtypes[slot], g.captured->name);
  }
  std::vector<at::Tensor> out;
  for (const auto& o : g.outputs) {
    auto t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(made[o.storage]),
                                                       c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                       c10::scalarTypeToTypeMeta(o.dtype));
    t.unsafeGetTensorImpl()->set_sizes_and_strides(o.sizes, o.strides, o.offset);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace tpu::aten

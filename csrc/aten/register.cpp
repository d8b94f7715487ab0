// Every PrivateUse1 registration of torch_tpu. Lowered ops all go through the boxed `dispatch`
// (the fallback); the few ops here are storage and view plumbing PyTorch needs from any backend.
#include <ATen/EmptyTensor.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/ops/all.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/is_set_to_native.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/nonzero_static.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include "aten/append.h"
#include "aten/device.h"
#include "aten/dispatch.h"
#include "aten/tensor.h"
#include "lower/rule.h"

#include <set>

namespace tpu::aten {

at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool non_blocking);
at::Tensor copy_from_and_resize(const at::Tensor& src, const at::Tensor& dst);
at::Scalar local_scalar_dense(const at::Tensor& self);

namespace {

constexpr c10::DispatchKeySet kKeys{c10::DispatchKey::PrivateUse1};

void check_device(std::optional<c10::Device> device) {
  ensure_runtime();
  int d = device && device->has_index() ? device->index() : current_device();
  TORCH_CHECK(d >= 0 && d < device_count(), "tpu: invalid device tpu:", d, " (", device_count(), " devices)");
}

// As on CPU and CUDA: under torch.use_deterministic_algorithms(True), uninitialized memory reads as NaN
// (integers: their maximum), so results never depend on what a buffer happened to hold.
at::Tensor fill_if_deterministic(at::Tensor t) {
  if (at::globalContext().deterministicAlgorithms() && at::globalContext().deterministicFillUninitializedMemory())
    at::native::fill_empty_deterministic_(t);
  return t;
}

at::Tensor empty(c10::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                 std::optional<c10::Device> device, std::optional<bool>, std::optional<c10::MemoryFormat> format) {
  check_device(device);
  TORCH_CHECK(!layout || *layout == at::kStrided, "tpu: only strided tensors are supported");
  c10::DeviceGuard guard(device ? *device : c10::Device(c10::DeviceType::PrivateUse1, current_device()));
  return fill_if_deterministic(at::detail::empty_generic(size, allocator(), kKeys, c10::dtype_or_default(dtype), format));
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<c10::Device> device, std::optional<bool>) {
  check_device(device);
  TORCH_CHECK(!layout || *layout == at::kStrided, "tpu: only strided tensors are supported");
  c10::DeviceGuard guard(device ? *device : c10::Device(c10::DeviceType::PrivateUse1, current_device()));
  return fill_if_deterministic(at::detail::empty_strided_generic(size, stride, allocator(), kKeys, c10::dtype_or_default(dtype)));
}

const at::Tensor& resize(const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> format) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (format && *format != c10::MemoryFormat::Preserve) impl->empty_tensor_restride(*format);
  size_t nbytes = at::detail::computeStorageNbytes(size, impl->strides(), self.dtype().itemsize(),
                                                    impl->storage_offset());
  int64_t old_nbytes = static_cast<int64_t>(self.storage().nbytes());
  if (nbytes <= static_cast<size_t>(old_nbytes)) return self;
  at::detail::getPrivateUse1Hooks().resizePrivateUse1Bytes(self.storage(), nbytes);
  if (at::globalContext().deterministicAlgorithms() && at::globalContext().deterministicFillUninitializedMemory())
    at::native::fill_resize_deterministic_(self, old_nbytes);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(source));
  self.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride, offset);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {n}, {1});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& src) {
  return set_storage(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage s(c10::Storage::use_byte_size_t(), 0, allocator(), true);
  return set_storage(self, std::move(s), 0, {0}, {1});
}

// torch.equal returns a bool: same sizes and eq(a, b).all() (promoting dtypes, NaN unequal), read on the host.
bool equal(const at::Tensor& a, const at::Tensor& b) { return a.sizes() == b.sizes() && at::eq(a, b).all().item<bool>(); }
// nonzero's result shape is its count of nonzeros: counted on the device and read back (the one host
// sync, as on CUDA), then nonzero_static (lowered) of that size.
at::Tensor nonzero_counted(const at::Tensor& self) {
  return at::nonzero_static(self, at::ne(self, 0).sum().item<int64_t>(), -1);
}
// addr_ as CPU's kernel, not the composite (which resizes self): self is already the [n, m] result
at::Tensor& addr_in_place(at::Tensor& self, const at::Tensor& v1, const at::Tensor& v2, const at::Scalar& beta,
                          const at::Scalar& alpha) {
  TORCH_CHECK(self.dim() == 2, "2D tensor expected, got ", self.dim(), "D tensor for input");
  at::Tensor r = at::addr(self, v1, v2, beta, alpha);  // (its own argument errors)
  TORCH_CHECK(self.size(0) == v1.size(0) && self.size(1) == v2.size(0), "size mismatch, input: ", self.sizes(),
              ", v1: ", v1.sizes(), ", v2: ", v2.sizes());
  return self.copy_(r);
}
// addbmm_ as CPU's kernel: self takes the result's shape (resized, with PyTorch's warning) instead of
// having to be it
at::Tensor& addbmm_in_place(at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                            const at::Scalar& alpha) {
  at::Tensor r = at::addbmm(self, b1, b2, beta, alpha);
  return copy_out(self, r);
}
// narrow_copy.out as CPU's kernel: out keeps self's dtype (CPU's check) and takes the slice's shape
at::Tensor& narrow_copy_out(const at::Tensor& self, int64_t dim, int64_t start, int64_t length, at::Tensor& out) {
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "narrow_copy: expected out to have dtype ", self.scalar_type(),
              " but got ", out.scalar_type());
  at::Tensor r = at::narrow_copy(self, dim, start, length);
  return copy_out(out, r);
}
at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(out.device() == self.device(), "nonzero: expected self and out to be on the same device, but got out on ",
              out.device(), " and self on ", self.device());  // CUDA's words
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
  at::Tensor r = nonzero_counted(self);
  return copy_out(out, r);
}

// nn.Module._apply keeps each Parameter object (so tied weights stay tied) only when the old and new
// tensors may share a TensorImpl type; PyTorch's list of dense backends omits PrivateUse1, so
// `.to("tpu")` would make a new Parameter per use. A strided tpu tensor is as dense as a CPU or CUDA one.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && !t.is_quantized() &&
           (t.device().is_cpu() || t.device().is_cuda() || t.device().type() == c10::DeviceType::PrivateUse1);
  };
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) || (dense(self) && dense(from));
}

}  // namespace

// Runs before autograd's composite kernel whenever either tensor is on tpu.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("resize_", resize);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("equal", equal);
  m.impl("is_set_to", at::native::is_set_to);
  m.impl("nonzero", nonzero_counted);
  m.impl("cat", torch::CppFunction::makeFromBoxedFunction<&cat>());  // growing sequences: append.cpp
  m.impl("nonzero.out", nonzero_out);
  m.impl("addr_", addr_in_place);
  m.impl("addbmm_", addbmm_in_place);
  m.impl("narrow_copy.out", narrow_copy_out);
  // Lowered foreach ops (and their in-place forms): their CompositeExplicitAutograd kernels (loops of
  // per-tensor ops) would win over the fallback, so they get the boxed kernel by name.
  for (const std::string& name : lower::names()) {
    if (name.rfind("_foreach_", 0) != 0) continue;
    size_t dot = name.find('.');
    std::string base = name.substr(0, dot), ov = dot == std::string::npos ? "" : name.substr(dot + 1);
    for (const std::string& n : {base, base + "_"})
      if (c10::Dispatcher::singleton().findSchema({"aten::" + n, ov}))
        m.impl((ov.empty() ? n : n + "." + ov).c_str(), torch::CppFunction::makeFromBoxedFunction<&dispatch>());
  }
}

// copy_ hands device copies to _copy_from, whose `dst` has no write annotation: the conj / neg
// fallbacks would resolve it into a temporary and the write through a conj or neg view would be lost.
// copy_from handles both bits itself (only devices outside copy_'s own list reach _copy_from).
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

// Sparse and quantized tpu tensors (empty(layout=torch.sparse_csr), empty(dtype=torch.qint8)) dispatch to
// these keys: NotImplementedError naming the layout or dtype, instead of PyTorch's "Could not run"
// (sparse.cpp registers the COO ops tpu has).
void unsupported_tensors(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  reject_unsupported_tensors(op, torch::jit::last(*stack, op.schema().arguments().size()));
  TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: ", op.operator_name(), ": sparse and quantized tensors are not supported on tpu");
}
TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported_tensors>()); }
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported_tensors>()); }
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported_tensors>()); }

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&dispatch>()); }

// Lowered ops also get `dispatch` as their own PrivateUse1 kernel, so that a functional op reaches
// it directly instead of through a composite (e.g. mul.Tensor would otherwise become empty +
// mul.out). Skipped: composite-implicit ops (they must keep decomposing for autograd), ops with a
// kernel above, and the copies whose composites move data between devices.
static const bool lowered_ops_registered = [] {
  static const std::set<std::string> keep_composite = {"copy_", "_to_copy", "_to_copy.out"};
  auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  // Their in-place forms too (add_.Tensor): otherwise PyTorch runs them as the out= overload into self,
  // a fresh result copied back, instead of one program that updates (and donates) self's buffer.
  for (const std::string& lowered : lower::names()) {
    size_t dot = lowered.find('.');
    std::string base = lowered.substr(0, dot), ov = dot == std::string::npos ? "" : lowered.substr(dot + 1);
    for (const std::string& name : {base, base + "_"}) {
      if (base.back() == '_' || (name != base && ov == "out")) continue;
      auto op = c10::Dispatcher::singleton().findOp({"aten::" + name, ov});
      std::string full = ov.empty() ? name : name + "." + ov;
      if (!op || keep_composite.count(full) || op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
          op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1))
        continue;
      lib->impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&dispatch>());
    }
  }
  return true;
}();

}  // namespace tpu::aten

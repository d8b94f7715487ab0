#include "aten/tensor.h"

#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include "runtime/runtime.h"

namespace tpu::aten {
namespace {

constexpr std::pair<at::ScalarType, DType> kTypes[] = {
    {at::kBool, DType::Pred}, {at::kChar, DType::S8}, {at::kShort, DType::S16}, {at::kInt, DType::S32},
    {at::kLong, DType::S64}, {at::kByte, DType::U8}, {at::kUInt16, DType::U16}, {at::kUInt32, DType::U32},
    {at::kUInt64, DType::U64}, {at::kHalf, DType::F16}, {at::kBFloat16, DType::BF16}, {at::kFloat, DType::F32},
    {at::kDouble, DType::F64}, {at::kComplexFloat, DType::C64}, {at::kComplexDouble, DType::C128},
    {at::kFloat8_e5m2, DType::F8E5M2}, {at::kFloat8_e4m3fn, DType::F8E4M3FN},
    {at::kFloat8_e5m2fnuz, DType::F8E5M2FNUZ}, {at::kFloat8_e4m3fnuz, DType::F8E4M3FNUZ},
    {at::kFloat8_e8m0fnu, DType::F8E8M0FNU}, {at::kComplexHalf, DType::C32},
};

void delete_storage(void* ctx) { delete static_cast<Storage*>(ctx); }

// Device memory is PJRT's: a storage's DataPtr points at its tpu::Storage, never dereferenced by
// PyTorch. The buffer is made when first written (or read: zeros), so torch.empty is defined.
struct Allocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    int device = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index();
    auto* st = new Storage();
    st->nbytes = static_cast<int64_t>(nbytes);
    st->device = device;
    return {st, st, &delete_storage, c10::Device(c10::DeviceType::PrivateUse1, device)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "tpu storages cannot be copied as raw bytes");
  }
};

Allocator the_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &the_allocator);

}  // namespace

DType to_dtype(at::ScalarType t) {
  for (auto [theirs, ours] : kTypes)
    if (theirs == t) return ours;
  // A RuntimeError, not a TypeError: Python turns a TypeError inside a binary operator into
  // "unsupported operand type(s)", hiding this message.
  TORCH_CHECK(false, "tpu: dtype torch.", c10::getDtypeNames(t).first, " (", t, ") is not supported on tpu");
}

at::ScalarType to_scalar_type(DType t) {
  for (auto [theirs, ours] : kTypes)
    if (ours == t) return theirs;
  TORCH_CHECK(false, "tpu: no torch dtype for ", info(t).name);
}

c10::Allocator* allocator() { return &the_allocator; }

Storage& storage_of(const at::Tensor& t) {
  auto* st = static_cast<Storage*>(t.storage().data_ptr().get_context());
  TORCH_CHECK(st && t.storage().data_ptr().get_deleter() == &delete_storage,
              "tpu: tensor storage was not allocated by torch_tpu");
  st->nbytes = static_cast<int64_t>(t.storage().nbytes());
  return *st;
}

lower::View view_of(const at::Tensor& t) {
  return {to_dtype(t.scalar_type()), t.sizes().vec(), t.strides().vec(), t.storage_offset()};
}

Input input_of(const at::Tensor& t) {
  Input in;
  in.storage = &storage_of(t);
  in.view = view_of(t);
  return in;
}

at::Tensor wrap(Contents contents, at::ScalarType dtype, c10::IntArrayRef sizes, int device, const std::string& origin,
                c10::IntArrayRef strides) {
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  at::Tensor t = strides.empty() ? at::detail::empty_generic(sizes, &the_allocator, keys, dtype, std::nullopt)
                                 : at::detail::empty_strided_generic(sizes, strides, &the_allocator, keys, dtype);
  storage_of(t).assign(std::move(contents), to_dtype(dtype), origin);
  return t;
}

void rethrow(const pjrt::Error& e, const std::string& context) {
  std::string msg = context.empty() ? e.what() : context + ": " + e.what();
  if (e.code == pjrt::abi::ErrorCode::RESOURCE_EXHAUSTED) TORCH_CHECK_WITH(OutOfMemoryError, false, msg);
  TORCH_CHECK(false, msg);
}

void rethrow(const CheckFailed& e) {
  if (e.index_error) TORCH_CHECK_INDEX(false, e.what());
  TORCH_CHECK(false, e.what());
}

void raise_failed_checks_like_cpu(int device) {
  try {
    raise_failed_checks(device);
  } catch (const CheckFailed& e) {
    rethrow(e);
  }
}

}  // namespace tpu::aten

#include "aten/device.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <mutex>

#include "aten/generator.h"
#include "aten/tensor.h"
#include "runtime/op_call.h"
#include "runtime/runtime.h"

namespace tpu::aten {
namespace {

std::function<void()> initializer;
std::once_flag init_once;
std::string init_error;
thread_local int current = 0;

struct GuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(current)}; }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == c10::DeviceType::PrivateUse1, "tpu guard got ", d);
    if (d.has_index()) current = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.has_index()) current = d.index();
  }
  // One in-order stream per device: PJRT orders work on a device by data dependencies.
  c10::Stream getStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream getNewStream(c10::Device d, int) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return s; }
  c10::DeviceIndex deviceCount() const noexcept override {
    try { return static_cast<c10::DeviceIndex>(device_count()); } catch (...) { return 0; }
  }
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream& s) const override { synchronize(s.device_index()); }
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex d) const override { synchronize(d); }
};

struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override {
    return default_generator(d < 0 ? current_device() : d);
  }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    return make_generator(d < 0 ? current_device() : d);
  }
  at::Device getDeviceFromPtr(void*) const override {
    return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(current_device())};
  }
  bool isPinnedPtr(const void*) const override { return false; }
  c10::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(device_count()); }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(current_device()); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    int old = current_device();
    set_current_device(d);
    return static_cast<c10::DeviceIndex>(old);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override;
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

}  // namespace

void set_runtime_initializer(std::function<void()> init) { initializer = std::move(init); }

void ensure_runtime() {
  if (Runtime::initialized()) return;
  std::call_once(init_once, [] {
    try {
      if (initializer) initializer();
    } catch (const std::exception& e) {
      init_error = e.what();
    }
  });
  TORCH_CHECK(Runtime::initialized(), "tpu: no usable device: ",
              init_error.empty() ? "torch_tpu runtime was not initialized" : init_error);
}

int device_count() {
  try {
    ensure_runtime();
  } catch (const c10::Error&) {
    return 0;
  }
  return static_cast<int>(Runtime::get().client().devices().size());
}

int current_device() { return current; }

void set_current_device(int d) {
  TORCH_CHECK(d >= 0 && d < device_count(), "tpu: invalid device index ", d, " (", device_count(), " devices)");
  current = d;
}

static Hooks* hooks() {
  static Hooks* h = new Hooks();
  return h;
}

void Hooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const {
  auto* st = static_cast<Storage*>(storage.data_ptr().get_context());
  TORCH_CHECK(st, "tpu: resize of a storage torch_tpu did not allocate");
  if (st->buffer && static_cast<int64_t>(newsize) != st->nbytes) {
    // keep the old contents: copy through the host (resizing a written storage is rare)
    std::vector<char> host(std::max<int64_t>(st->nbytes, newsize), 0);
    st->buffer->to_host(host.data(), static_cast<size_t>(st->nbytes));
    int64_t item = byte_size(st->dtype);
    DType t = newsize % item == 0 ? st->dtype : DType::U8;
    Runtime& rt = Runtime::get();
    st->buffer = std::make_shared<pjrt::Buffer>(rt.client().to_device(
        host.data(), t, {static_cast<int64_t>(newsize) / byte_size(t)}, rt.device(st->device)));
    st->dtype = t;
  }
  st->nbytes = static_cast<int64_t>(newsize);
  const_cast<c10::Storage&>(storage).unsafeGetStorageImpl()->set_nbytes(newsize);
}

static const bool hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(hooks());
  return true;
}();

}  // namespace tpu::aten

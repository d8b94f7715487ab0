#include "aten/device.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <map>
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

// Pinned host memory (pin_memory=True, DDP's bookkeeping buffers, which it asserts are pinned). The
// plugins copy from any host memory, so it is ordinary CPU memory, remembered so that is_pinned() can
// answer for it.
class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* p = c10::alloc_cpu(std::max<size_t>(n, 1));
    std::lock_guard<std::mutex> lock(mu());
    blocks()[reinterpret_cast<uintptr_t>(p)] = std::max<size_t>(n, 1);
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
  static bool holds(const void* ptr) {
    auto at = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mu());
    auto it = blocks().upper_bound(at);
    return it != blocks().begin() && at < std::prev(it)->first + std::prev(it)->second;
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::map<uintptr_t, size_t>& blocks() {
    static auto* b = new std::map<uintptr_t, size_t>;  // never destroyed: tensors may die after exit begins
    return *b;
  }
  static void release(void* p) {
    {
      std::lock_guard<std::mutex> lock(mu());
      blocks().erase(reinterpret_cast<uintptr_t>(p));
    }
    c10::free_cpu(p);
  }
};
PinnedAllocator pinned_allocator;

struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override {
    device_count();  // start the runtime first: starting it may seed the generators (queued seeds)
    return default_generator(d < 0 ? current_device() : d);
  }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    return make_generator(d < 0 ? current_device() : d);
  }
  at::Device getDeviceFromPtr(void*) const override {
    return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(current_device())};
  }
  bool isPinnedPtr(const void* p) const override { return PinnedAllocator::holds(p); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &pinned_allocator; }
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

int device_arg(c10::DeviceIndex d) {
  ensure_runtime();
  int i = d < 0 ? current_device() : d;
  TORCH_CHECK(i < device_count(), "tpu: invalid device index ", i, " (", device_count(), " devices)");
  return i;
}

// torch.accelerator's memory API asks the device type's allocator, which must be a DeviceAllocator.
// This one allocates through torch_tpu's allocator (aten/tensor.cpp) and reports the bytes of the
// device buffers torch_tpu holds (counted by pjrt::Buffer per device) and the plugin's pool.
struct MemoryReportingAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override { return allocator()->allocate(nbytes); }
  c10::DeleterFnPtr raw_deleter() const override { return allocator()->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    allocator()->copy_data(dest, src, count);
  }
  bool initialized() override { return Runtime::initialized(); }
  void emptyCache(c10::MempoolId_t) override {}  // PJRT owns its pools; buffers die with their tensors
  void recordStream(const c10::DataPtr&, c10::Stream) override {}  // one ordered stream per device
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex d) override {
    int i = device_arg(d);
    DeviceMemory m = Runtime::get().memory(i);
    c10::CachingDeviceAllocator::DeviceStats s;
    auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    auto set = [&](c10::CachingAllocator::Stat& st, int64_t current, int64_t peak, int64_t allocated, int64_t freed) {
      st.current = current;
      st.peak = std::max(peak, current);
      st.allocated = allocated;
      st.freed = freed;
    };
    const pjrt::AllocationStats& b = m.buffers;
    set(s.allocation[all], b.buffers, b.peak_buffers, b.allocs, b.frees);
    set(s.active[all], b.buffers, b.peak_buffers, b.allocs, b.frees);
    set(s.segment[all], b.buffers, b.peak_buffers, b.allocs, b.frees);
    set(s.allocated_bytes[all], b.bytes, b.peak_bytes, b.bytes_allocated, b.bytes_freed);
    set(s.active_bytes[all], b.bytes, b.peak_bytes, b.bytes_allocated, b.bytes_freed);
    set(s.requested_bytes[all], b.bytes, b.peak_bytes, b.bytes_allocated, b.bytes_freed);
    set(s.reserved_bytes[all], m.reserved, m.peak_reserved, b.bytes_allocated, b.bytes_freed);
    return s;
  }
  void resetAccumulatedStats(c10::DeviceIndex d) override {
    Runtime::get().client().reset_accumulated_allocation(device_arg(d));
  }
  void resetPeakStats(c10::DeviceIndex d) override { Runtime::get().client().reset_peak_allocation(device_arg(d)); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex d) override {
    DeviceMemory m = Runtime::get().memory(device_arg(d));
    return {static_cast<size_t>(m.free), static_cast<size_t>(m.total)};
  }
};

MemoryReportingAllocator memory_reporting_allocator;

}  // namespace

void set_runtime_initializer(std::function<void()> init) { initializer = std::move(init); }

void ensure_runtime() {
  // As torch.cuda: a child forked after the runtime started cannot use it (the plugin's threads are
  // gone); the plugin is never called there.
  TORCH_CHECK(!Runtime::in_bad_fork(), pjrt::Plugin::kForkMessage);
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
  // known without the plugin once started (also in a forked child, which cannot use the devices)
  if (Runtime::initialized()) return static_cast<int>(Runtime::get().client().devices().size());
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
  if (st->written() && static_cast<int64_t>(newsize) != st->nbytes) {
    // keep the old contents: copy through the host (resizing a written storage is rare)
    std::vector<char> host(std::max<int64_t>(st->nbytes, newsize), 0);
    st->ready()->to_host(host.data(), static_cast<size_t>(st->nbytes));
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
  // above aten/tensor.cpp's REGISTER_ALLOCATOR (priority 0), whatever the static initialization order
  c10::SetAllocator(c10::DeviceType::PrivateUse1, &memory_reporting_allocator, 1);
  return true;
}();

}  // namespace tpu::aten

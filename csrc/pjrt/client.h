// RAII types over PJRT handles. Ownership: a Client owns nothing but the PJRT client; every
// Buffer and Executable holds a shared reference to its ClientState, so the PJRT client is
// destroyed only after the last buffer and executable (orderly teardown).
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "pjrt/kv_store.h"
#include "pjrt/plugin.h"

namespace tpu::pjrt {

// Bytes of the device buffers this process holds, per addressable device: every Buffer adds its
// on-device size when made and takes it away when destroyed (or donated), with atomics.
struct BufferCounters {
  std::atomic<int64_t> bytes{0}, peak_bytes{0}, buffers{0}, peak_buffers{0};
  std::atomic<int64_t> allocs{0}, frees{0}, bytes_allocated{0}, bytes_freed{0};  // cumulative
};

// A snapshot of one device's BufferCounters.
struct AllocationStats {
  int64_t bytes = 0, peak_bytes = 0, buffers = 0, peak_buffers = 0;
  int64_t allocs = 0, frees = 0, bytes_allocated = 0, bytes_freed = 0;
};

struct ClientState {
  const Plugin* plugin;
  abi::Client* client;
  std::vector<abi::Device*> devices;              // addressable devices, in index order
  std::unique_ptr<BufferCounters[]> counters;     // one per entry of `devices`
  KeyValueStoreRef kv_store;                      // a distributed client's store; outlives the client
  int device_index(abi::Device* device) const;    // -1 when not addressable
  ~ClientState();
};
using ClientRef = std::shared_ptr<ClientState>;

abi::BufferType to_buffer_type(DType t);
DType from_buffer_type(abi::BufferType t);  // throws for types torch_tpu does not model

class Event {
 public:
  Event(const Plugin* plugin, abi::Event* event) : plugin_(plugin), event_(event) {}
  Event(Event&& o) noexcept : plugin_(o.plugin_), event_(o.event_) { o.event_ = nullptr; }
  Event& operator=(Event&& o) noexcept;
  ~Event();
  void await();  // throws the event's error
  bool is_ready() const;
  // Calls `done(error_message)` (empty on success) once ready, possibly on a plugin thread.
  void on_ready(std::function<void(const std::string&)> done);
  explicit operator bool() const { return event_ != nullptr; }

 private:
  const Plugin* plugin_;
  abi::Event* event_;
};

struct DeviceInfo {
  int id;
  std::string kind, debug_string;
};

// What the plugin says about a device's memory (-1: not said; `reported` false: nothing said).
struct MemoryStats {
  int64_t bytes_in_use = 0, peak_bytes_in_use = -1, bytes_limit = -1;
  int64_t bytes_reserved = -1, peak_bytes_reserved = -1, pool_bytes = -1, peak_pool_bytes = -1;
  bool reported = false;
};

class Buffer {
 public:
  Buffer(ClientRef client, abi::Buffer* buffer);
  Buffer(Buffer&& o) noexcept
      : client_(std::move(o.client_)), buffer_(o.buffer_), device_index_(o.device_index_), counted_(o.counted_) {
    o.buffer_ = nullptr;
    o.device_index_ = -1;
    o.counted_ = 0;
  }
  Buffer& operator=(Buffer&&) = delete;
  ~Buffer();

  DType dtype() const;
  std::vector<int64_t> dims() const;
  size_t on_device_bytes() const;
  abi::Device* device() const;
  bool is_deleted() const;
  Event ready_event() const;
  // Starts a copy into `dst` (dense, row-major, `size` bytes); the returned event says when done.
  Event to_host_async(void* dst, size_t size) const;
  void to_host(void* dst, size_t size) const { to_host_async(dst, size).await(); }
  Buffer copy_to_device(abi::Device* device) const;
  abi::Buffer* get() const { return buffer_; }
  // Index of the device this buffer lives on (-1 if unknown) and the bytes it counts there.
  int device_index() const { return device_index_; }
  int64_t counted_bytes() const { return counted_; }
  // Stops counting this buffer's bytes (its memory went to another buffer: donation).
  void uncount() const;

 private:
  ClientRef client_;
  abi::Buffer* buffer_;
  mutable int device_index_ = -1;
  mutable int64_t counted_ = 0;
};

class Executable {
 public:
  Executable(ClientRef client, abi::LoadedExecutable* exe);
  Executable(const Executable&) = delete;
  ~Executable();

  size_t num_outputs() const { return num_outputs_; }
  std::string serialize() const;
  // Runs on `device`. Inputs listed in `donated` may be consumed by the program (when it aliases
  // them to outputs); the others are never donated. Returns outputs and a completion event.
  std::vector<Buffer> execute(const std::vector<const Buffer*>& args, abi::Device* device,
                              const std::vector<bool>& donated, Event* done = nullptr) const;

 private:
  ClientRef client_;
  abi::LoadedExecutable* exe_;
  size_t num_outputs_ = 0;
};

class Client {
 public:
  // A create option (PJRT_NamedValue): cpu_device_count, preallocate, node_id, num_nodes,
  // visible_devices (a list), memory_fraction (a float), allocator (a string), ...
  struct Option {
    std::string name;
    enum { Int, Bool, String, Int64List, Float } kind;
    int64_t i = 0;
    bool b = false;
    std::string s;
    std::vector<int64_t> list;
    float f = 0;
  };
  // The NamedValue array PJRT_Client_Create reads; it points into `options`, which must outlive it.
  static std::vector<abi::NamedValue> encode_options(const std::vector<Option>& options);

  // With `kv_store`, the client is created as a distributed client: the plugin gets the store's get,
  // try_get and put callbacks (node_id and num_nodes travel as options), and the client keeps the
  // store until after PJRT_Client_Destroy.
  Client(const Plugin& plugin, const std::vector<Option>& options, KeyValueStoreRef kv_store = nullptr);

  const Plugin& plugin() const { return *state_->plugin; }
  std::string platform_name() const;
  std::string platform_version() const;
  const std::vector<abi::Device*>& devices() const { return devices_; }
  DeviceInfo device_info(abi::Device* device) const;
  MemoryStats memory_stats(abi::Device* device) const;  // zeros where the plugin does not say
  // Device buffers this process holds on devices()[index] (no plugin call).
  AllocationStats allocation_stats(int index) const;
  void reset_peak_allocation(int index);         // peak := current
  void reset_accumulated_allocation(int index);  // cumulative counts := 0

  // Copies host data (row-major unless byte_strides given) to `device`; returns after the host
  // data may be reused.
  Buffer to_device(const void* data, DType dtype, const std::vector<int64_t>& dims,
                   abi::Device* device, const std::vector<int64_t>* byte_strides = nullptr) const;
  std::unique_ptr<Executable> compile(const std::string& mlir, const std::string& options) const;
  std::unique_ptr<Executable> deserialize(const std::string& bytes) const;

  // A serialized CompileOptionsProto asking for one replica and one partition.
  static std::string default_compile_options();
  // XLA option overrides (name -> a bool, int, double or string value) as CompileOptionsProto field 7
  // (env_option_overrides): appended to serialized options, they apply on top of XLA's defaults.
  using OptionValue = std::variant<bool, int64_t, double, std::string>;
  static std::string option_overrides(const std::vector<std::pair<std::string, OptionValue>>& overrides);

 private:
  ClientRef state_;
  std::vector<abi::Device*> devices_;
};

}  // namespace tpu::pjrt

// The process-wide runtime: one PJRT client on one plugin, its devices and the compile cache.
// Python discovers the plugin and calls Runtime::init; everything else asks Runtime::get().
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "pjrt/client.h"
#include "runtime/compile_cache.h"

namespace tpu {

struct RuntimeConfig {
  std::string plugin_path;
  std::string platform;  // "cpu", "cuda" or "tpu": what the user asked for
  std::vector<pjrt::Client::Option> client_options;
  std::string cache_dir;  // empty: no disk tier
  WarnFn warn;
  // Set: the client is a distributed client (one process of several), its key-value callbacks
  // backed by this store (torch_tpu/distributed.py: the process group's c10d Store).
  pjrt::KeyValueStoreRef kv_store;
};

// One device's memory: the buffers torch_tpu holds (counted by pjrt::Buffer), what the plugin says,
// and what follows from both.
struct DeviceMemory {
  pjrt::AllocationStats buffers;
  pjrt::MemoryStats plugin;
  int64_t reserved = 0, peak_reserved = 0;  // at least the buffers; the plugin's pool where it says
  int64_t total = 0, free = 0;              // the plugin's limit, else (cpu) the host's memory
};

class Runtime {
 public:
  static Runtime& init(const RuntimeConfig& config);  // idempotent for the same plugin
  static Runtime& get();                              // throws if init has not succeeded
  static bool initialized();
  // True in a child forked after the runtime (its plugin) started: nothing may call the plugin there.
  static bool in_bad_fork();
  // Drops cached executables, then the client (after its last buffer is gone).
  static void shutdown();

  const pjrt::Plugin& plugin() const { return client_.plugin(); }
  pjrt::Client& client() { return client_; }
  CompileCache& cache() { return cache_; }
  const RuntimeConfig& config() const { return config_; }
  pjrt::abi::Device* device(int index) const;
  DeviceMemory memory(int index) const;

  // Compiles `program` through the cache (keyed by its text) and runs it on `device`.
  std::vector<pjrt::Buffer> execute(const std::string& program,
                                    const std::vector<const pjrt::Buffer*>& args,
                                    const std::vector<bool>& donated, int device);

 private:
  explicit Runtime(const RuntimeConfig& config);
  RuntimeConfig config_;
  pjrt::Client client_;
  CompileCache cache_;
};

}  // namespace tpu

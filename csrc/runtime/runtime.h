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
};

class Runtime {
 public:
  static Runtime& init(const RuntimeConfig& config);  // idempotent for the same plugin
  static Runtime& get();                              // throws if init has not succeeded
  static bool initialized();
  // Drops cached executables, then the client (after its last buffer is gone).
  static void shutdown();

  const pjrt::Plugin& plugin() const { return client_.plugin(); }
  pjrt::Client& client() { return client_; }
  CompileCache& cache() { return cache_; }
  const RuntimeConfig& config() const { return config_; }
  pjrt::abi::Device* device(int index) const;

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

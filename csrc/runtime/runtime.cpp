#include "runtime/runtime.h"
#include "runtime/validate.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>

#include "runtime/metrics.h"
#include "runtime/signature.h"

#ifndef TORCH_TPU_VERSION
#define TORCH_TPU_VERSION "dev"
#endif

namespace tpu {
namespace {
std::mutex mu;
std::unique_ptr<Runtime> instance;

std::string fingerprint(const pjrt::Client& client) {
  const auto& attrs = client.plugin().attributes;
  auto xla = attrs.find("xla_version");
  return client.platform_name() + '\0' + client.platform_version() + '\0' +
         (xla == attrs.end() ? "" : xla->second) + '\0' + TORCH_TPU_VERSION;
}

// Host memory (for the CPU plugin, whose devices are host memory): total and available bytes.
std::pair<int64_t, int64_t> host_memory() {
  int64_t page = sysconf(_SC_PAGESIZE);
  int64_t total = sysconf(_SC_PHYS_PAGES) * page;
  int64_t avail = sysconf(_SC_AVPHYS_PAGES) * page;
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream in(line);
    std::string name;
    int64_t kb = 0;
    if (in >> name >> kb && name == "MemAvailable:") avail = kb * 1024;
  }
  return {std::max<int64_t>(total, 0), std::max<int64_t>(std::min(avail, total), 0)};
}
}  // namespace

Runtime::Runtime(const RuntimeConfig& config)
    : config_(config),
      client_(pjrt::Plugin::load(config.plugin_path), config.client_options, config.kv_store),
      cache_(client_, config.cache_dir, fingerprint(client_),
             config.warn ? config.warn : [](const std::string& m) { std::cerr << m << "\n"; }) {}

Runtime& Runtime::init(const RuntimeConfig& config) {
  std::lock_guard<std::mutex> lock(mu);
  if (instance) {
    if (instance->config_.plugin_path != config.plugin_path)
      throw pjrt::Error(pjrt::abi::ErrorCode::FAILED_PRECONDITION,
                        "torch_tpu runtime already uses " + instance->config_.plugin_path);
    return *instance;
  }
  instance.reset(new Runtime(config));
  return *instance;
}

Runtime& Runtime::get() {
  if (!instance)
    throw pjrt::Error(pjrt::abi::ErrorCode::FAILED_PRECONDITION, "torch_tpu runtime is not initialized");
  return *instance;
}

bool Runtime::initialized() { return instance != nullptr; }

bool Runtime::in_bad_fork() { return pjrt::Plugin::in_forked_child(); }

void Runtime::shutdown() {
  std::lock_guard<std::mutex> lock(mu);
  instance.reset();
}

pjrt::abi::Device* Runtime::device(int index) const {
  const auto& devs = client_.devices();
  if (index < 0 || index >= static_cast<int>(devs.size()))
    throw pjrt::Error(pjrt::abi::ErrorCode::INVALID_ARGUMENT,
                      "device index " + std::to_string(index) + " out of range (" +
                          std::to_string(devs.size()) + " devices)");
  return devs[index];
}

DeviceMemory Runtime::memory(int index) const {
  DeviceMemory m;
  pjrt::abi::Device* dev = device(index);
  m.buffers = client_.allocation_stats(index);
  m.plugin = client_.memory_stats(dev);
  m.reserved = m.buffers.bytes;
  m.peak_reserved = m.buffers.peak_bytes;
  if (m.plugin.reported) {
    // the plugin's allocator holds at least what it hands out; its pool where it says
    int64_t pool = m.plugin.pool_bytes >= 0 ? m.plugin.pool_bytes
                   : m.plugin.bytes_reserved >= 0 ? m.plugin.bytes_reserved : m.plugin.bytes_in_use;
    int64_t peak = std::max({m.plugin.peak_pool_bytes, m.plugin.peak_bytes_reserved, m.plugin.peak_bytes_in_use, pool});
    m.reserved = std::max(m.reserved, pool);
    m.peak_reserved = std::max(m.peak_reserved, peak);
  }
  m.peak_reserved = std::max(m.peak_reserved, m.reserved);
  if (m.plugin.bytes_limit > 0) {
    m.total = m.plugin.bytes_limit;
    m.free = std::max<int64_t>(m.total - std::max(m.plugin.bytes_in_use, m.buffers.bytes), 0);
  } else if (config_.platform == "cpu" || client_.platform_name() == "cpu") {
    auto [total, avail] = host_memory();
    m.total = total;
    m.free = avail;
  }
  return m;
}

std::vector<pjrt::Buffer> Runtime::execute(const std::string& program,
                                           const std::vector<const pjrt::Buffer*>& args,
                                           const std::vector<bool>& donated, int dev) {
  auto compiled = cache_.get(program, [&] {
    validate_program(program);  // text from outside: the plugin would crash on some programs
    return Program{program, {}};
  });
  if (compiled->params) {
    std::vector<hlo::TensorType> types;
    for (const pjrt::Buffer* a : args) types.push_back({a->dtype(), a->dims()});
    check_arguments(*compiled->params, types);
  }
  metrics::count(metrics::Executions);
  return compiled->exe->execute(args, device(dev), donated);
}

}  // namespace tpu

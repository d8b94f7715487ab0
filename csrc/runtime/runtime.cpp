#include "runtime/runtime.h"

#include <iostream>
#include <mutex>

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
}  // namespace

Runtime::Runtime(const RuntimeConfig& config)
    : config_(config),
      client_(pjrt::Plugin::load(config.plugin_path), config.client_options),
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

std::vector<pjrt::Buffer> Runtime::execute(const std::string& program,
                                           const std::vector<const pjrt::Buffer*>& args,
                                           const std::vector<bool>& donated, int dev) {
  auto compiled = cache_.get(program, [&] { return Program{program, {}}; });
  if (compiled->params) {
    std::vector<hlo::TensorType> types;
    for (const pjrt::Buffer* a : args) types.push_back({a->dtype(), a->dims()});
    check_arguments(*compiled->params, types);
  }
  metrics::add("executions");
  return compiled->exe->execute(args, device(dev), donated);
}

}  // namespace tpu

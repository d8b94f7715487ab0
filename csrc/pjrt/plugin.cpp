#include "pjrt/plugin.h"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <memory>
#include <mutex>

namespace tpu::pjrt {

const char* error_code_name(abi::ErrorCode code) {
  static const char* names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
      "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? names[i] : "UNKNOWN";
}

static const char* fn_name(abi::Fn fn) {
  static const char* names[] = {
#define TPU_PJRT_NAME(name) "PJRT_" #name,
      TPU_PJRT_FUNCTIONS(TPU_PJRT_NAME)
#undef TPU_PJRT_NAME
  };
  return names[static_cast<int>(fn)];
}

namespace {
std::atomic<bool> forked_child{false};

void on_fork_child() { forked_child.store(true, std::memory_order_relaxed); }

// Registered once, when the first plugin is about to start its threads.
void watch_forks() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, &on_fork_child);
    return true;
  }();
  (void)registered;
}
}  // namespace

const char* const Plugin::kForkMessage =
    "Cannot re-initialize tpu in forked subprocess. To use tpu with multiprocessing, you must use "
    "the 'spawn' start method";

bool Plugin::in_forked_child() { return forked_child.load(std::memory_order_relaxed); }

bool Plugin::has(abi::Fn fn) const {
  size_t end = abi::kFnTableOffset + (static_cast<size_t>(fn) + 1) * sizeof(void*);
  return end <= api_->struct_size && api_->fns[static_cast<int>(fn)] != nullptr;
}

void* Plugin::function(abi::Fn fn) const {
  if (in_forked_child()) throw Error(abi::ErrorCode::FAILED_PRECONDITION, kForkMessage);
  if (!has(fn))
    throw Error(abi::ErrorCode::UNIMPLEMENTED,
                "PJRT plugin " + path + " (API " + std::to_string(major) + "." +
                    std::to_string(minor) + ") lacks C API function " +
                    fn_name(fn) + "; install a newer plugin");
  return api_->fns[static_cast<int>(fn)];
}

std::string Plugin::take_message(abi::Error* err) const {
  if (!err) return {};
  abi::Error_Message_Args m{};
  m.h.struct_size = sizeof(m);
  m.error = err;
  reinterpret_cast<void (*)(abi::Error_Message_Args*)>(function(abi::Fn::Error_Message))(&m);
  std::string msg(m.message, m.message_size);
  abi::Error_Destroy_Args d{};
  d.h.struct_size = sizeof(d);
  d.error = err;
  reinterpret_cast<void (*)(abi::Error_Destroy_Args*)>(function(abi::Fn::Error_Destroy))(&d);
  return msg;
}

void Plugin::check(abi::Error* err) const {
  if (!err) return;
  abi::Error_GetCode_Args c{};
  c.h.struct_size = sizeof(c);
  c.error = err;
  auto get_code = reinterpret_cast<abi::Error* (*)(abi::Error_GetCode_Args*)>(
      function(abi::Fn::Error_GetCode));
  abi::ErrorCode code = get_code(&c) ? abi::ErrorCode::UNKNOWN : c.code;
  throw Error(code, take_message(err));
}

const Plugin& Plugin::load(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Plugin>> loaded;  // never unloaded: plugins keep threads
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(path); it != loaded.end()) return *it->second;

  if (in_forked_child()) throw Error(abi::ErrorCode::FAILED_PRECONDITION, kForkMessage);
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    throw Error(abi::ErrorCode::NOT_FOUND,
                std::string("cannot load PJRT plugin: ") + dlerror() +
                    ". Install the plugin package (pip install xla-cpu-pjrt for CPU) or point "
                    "TORCH_TPU_PJRT_PLUGIN at a plugin .so");
  auto get_api = reinterpret_cast<const abi::Api* (*)()>(dlsym(lib, "GetPjrtApi"));
  if (!get_api)
    throw Error(abi::ErrorCode::NOT_FOUND, path + " is not a PJRT plugin (no GetPjrtApi symbol)");
  auto p = std::make_unique<Plugin>();
  p->path = path;
  p->api_ = get_api();
  if (!p->api_)
    throw Error(abi::ErrorCode::FAILED_PRECONDITION,
                "PJRT plugin " + path + " is broken: GetPjrtApi() returned NULL. Reinstall the plugin "
                "package or point TORCH_TPU_PJRT_PLUGIN at a working plugin .so");
  if (p->api_->struct_size < abi::kFnTableOffset)
    throw Error(abi::ErrorCode::FAILED_PRECONDITION,
                "PJRT plugin " + path + " is broken: its PJRT_Api table is " +
                    std::to_string(p->api_->struct_size) + " bytes, shorter than its header");
  p->major = p->api_->version.major_version;
  p->minor = p->api_->version.minor_version;
  if (p->major != abi::kMajorVersion || p->minor < abi::kMinMinorVersion)
    throw Error(abi::ErrorCode::FAILED_PRECONDITION,
                "PJRT plugin " + path + " speaks C API " + std::to_string(p->major) + "." +
                    std::to_string(p->minor) + "; torch_tpu needs " +
                    std::to_string(abi::kMajorVersion) + ".x with x >= " +
                    std::to_string(abi::kMinMinorVersion));
  watch_forks();  // from here on the plugin may run threads of its own
  abi::Plugin_Initialize_Args init{};
  p->call(abi::Fn::Plugin_Initialize, init);
  if (p->has(abi::Fn::Plugin_Attributes)) {
    abi::Plugin_Attributes_Args a{};
    p->call(abi::Fn::Plugin_Attributes, a);
    for (size_t i = 0; i < a.num_attributes; ++i) {
      const abi::NamedValue& v = a.attributes[i];
      std::string name(v.name, v.name_size), value;
      switch (v.type) {
        case abi::NamedValueType::String: value.assign(v.string_value, v.value_size); break;
        case abi::NamedValueType::Int64: value = std::to_string(v.int64_value); break;
        case abi::NamedValueType::Int64List:
          for (size_t k = 0; k < v.value_size; ++k)
            value += (k ? "." : "") + std::to_string(v.int64_array_value[k]);
          break;
        case abi::NamedValueType::Float: value = std::to_string(v.float_value); break;
        case abi::NamedValueType::Bool: value = v.bool_value ? "true" : "false"; break;
      }
      p->attributes[name] = value;
    }
  }
  return *(loaded[path] = std::move(p));
}

}  // namespace tpu::pjrt

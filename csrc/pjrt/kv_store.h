// The key-value store a distributed PJRT client (CUDA, TPU: one client per process) uses to share
// its topology and collective ids with the other processes. torch_tpu backs it with the process
// group's c10d Store (torch_tpu/distributed.py); this layer only sees three functions.
//
// Ownership: the Client that was created with a store keeps it (ClientState::kv_store) until after
// PJRT_Client_Destroy, because a plugin may call the callbacks at any time in the client's life
// (e.g. when it first builds a NCCL communicator). The plugin gets the store's address as user_arg.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "pjrt/c_api.h"

namespace tpu::pjrt {

struct KeyValueStore {
  // Waits up to timeout_ms for `key`; nullopt when it did not appear in time.
  std::function<std::optional<std::string>(const std::string& key, int timeout_ms)> get;
  // nullopt at once when `key` is missing. Optional: without it the plugin gets no try_get callback.
  std::function<std::optional<std::string>(const std::string& key)> try_get;
  std::function<void(const std::string& key, const std::string& value)> put;
  // A store may throw pjrt::Error (its code reaches the plugin) or any std::exception (UNKNOWN).
};
using KeyValueStoreRef = std::shared_ptr<KeyValueStore>;

namespace kv {
// The C callbacks handed to PJRT_Client_Create; user_arg is the KeyValueStore*. A value is a
// new[]-allocated copy freed by the deleter the callback returns with it.
abi::Error* get_callback(abi::KeyValueGetCallback_Args* args);
abi::Error* try_get_callback(abi::KeyValueTryGetCallback_Args* args);
abi::Error* put_callback(abi::KeyValuePutCallback_Args* args);

// Values handed to a plugin and not yet freed by its call of the deleter (for tests and leaks).
int64_t values_outstanding();

// What a plugin does with the callbacks, for tests without a distributed plugin: call the C
// callback, copy the value, free it with the returned deleter; a returned error becomes pjrt::Error.
std::string plugin_get(KeyValueStore& store, const std::string& key, int timeout_ms);
std::string plugin_try_get(KeyValueStore& store, const std::string& key);
void plugin_put(KeyValueStore& store, const std::string& key, const std::string& value);
}  // namespace kv

}  // namespace tpu::pjrt

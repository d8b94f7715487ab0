#include "pjrt/kv_store.h"

#include <atomic>
#include <cstring>

#include "pjrt/plugin.h"

namespace tpu::pjrt::kv {
namespace {
std::atomic<int64_t> outstanding{0};

void delete_value(char* value) {
  if (!value) return;
  delete[] value;
  outstanding.fetch_sub(1, std::memory_order_relaxed);
}

// A copy of `s` the plugin owns until it calls delete_value (never null, even when empty).
char* new_value(const std::string& s) {
  char* p = new char[s.size() + 1];
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  outstanding.fetch_add(1, std::memory_order_relaxed);
  return p;
}

abi::Error* fail(abi::CallbackError* make, abi::ErrorCode code, const std::string& msg) {
  if (!make || !*make) return nullptr;  // a plugin that gives no way to report: nothing we can do
  return (*make)(code, msg.data(), msg.size());
}

KeyValueStore* store_of(void* user_arg) { return static_cast<KeyValueStore*>(user_arg); }

// Runs `body`, turning what the store throws into an error made by the plugin's callback_error.
template <class F>
abi::Error* guarded(abi::CallbackError* make, const char* what, const std::string& key, F&& body) {
  try {
    return body();
  } catch (const Error& e) {
    return fail(make, e.code, e.what());
  } catch (const std::exception& e) {
    return fail(make, abi::ErrorCode::UNKNOWN,
                std::string("torch_tpu key-value store: ") + what + " '" + key + "' failed: " + e.what());
  } catch (...) {
    return fail(make, abi::ErrorCode::UNKNOWN,
                std::string("torch_tpu key-value store: ") + what + " '" + key + "' failed");
  }
}
}  // namespace

int64_t values_outstanding() { return outstanding.load(std::memory_order_relaxed); }

abi::Error* get_callback(abi::KeyValueGetCallback_Args* a) {
  std::string key(a->key, a->key_size);
  return guarded(a->callback_error, "get", key, [&]() -> abi::Error* {
    KeyValueStore* s = store_of(a->user_arg);
    if (!s || !s->get) return fail(a->callback_error, abi::ErrorCode::FAILED_PRECONDITION, "no key-value store");
    std::optional<std::string> v = s->get(key, a->timeout_in_ms);
    if (!v)
      return fail(a->callback_error, abi::ErrorCode::DEADLINE_EXCEEDED,
                  "torch_tpu key-value store: key '" + key + "' not set within " +
                      std::to_string(a->timeout_in_ms) + " ms");
    a->value = new_value(*v);
    a->value_size = v->size();
    a->value_deleter = &delete_value;
    return nullptr;
  });
}

abi::Error* try_get_callback(abi::KeyValueTryGetCallback_Args* a) {
  std::string key(a->key, a->key_size);
  return guarded(a->callback_error, "try_get", key, [&]() -> abi::Error* {
    KeyValueStore* s = store_of(a->user_arg);
    if (!s || !s->try_get) return fail(a->callback_error, abi::ErrorCode::UNIMPLEMENTED, "no try_get");
    std::optional<std::string> v = s->try_get(key);
    if (!v) return fail(a->callback_error, abi::ErrorCode::NOT_FOUND, "torch_tpu key-value store: key '" + key + "' not found");
    a->value = new_value(*v);
    a->value_size = v->size();
    a->value_deleter = &delete_value;
    return nullptr;
  });
}

abi::Error* put_callback(abi::KeyValuePutCallback_Args* a) {
  std::string key(a->key, a->key_size);
  return guarded(a->callback_error, "put", key, [&]() -> abi::Error* {
    KeyValueStore* s = store_of(a->user_arg);
    if (!s || !s->put) return fail(a->callback_error, abi::ErrorCode::FAILED_PRECONDITION, "no key-value store");
    s->put(key, std::string(a->value ? a->value : "", a->value_size));
    return nullptr;
  });
}

// ---- the plugin's side, for tests

namespace {
// Stands in for a plugin's PJRT_Error: what callback_error makes, read back and freed by `raise`.
struct FakeError { abi::ErrorCode code; std::string message; };

abi::Error* make_fake(abi::ErrorCode code, const char* message, size_t size) {
  return reinterpret_cast<abi::Error*>(new FakeError{code, std::string(message, size)});
}

void raise(abi::Error* err) {
  if (!err) return;
  std::unique_ptr<FakeError> e(reinterpret_cast<FakeError*>(err));
  throw Error(e->code, e->message);
}

template <class Args>
std::string take_value(Args& a) {
  if (!a.value || !a.value_deleter)
    throw Error(abi::ErrorCode::INTERNAL, "key-value callback returned no value or no deleter");
  std::string v(a.value, a.value_size);
  a.value_deleter(a.value);
  return v;
}
}  // namespace

std::string plugin_get(KeyValueStore& store, const std::string& key, int timeout_ms) {
  abi::CallbackError make = &make_fake;
  abi::KeyValueGetCallback_Args a{};
  a.key = key.data();
  a.key_size = key.size();
  a.timeout_in_ms = timeout_ms;
  a.callback_error = &make;
  a.user_arg = &store;
  raise(get_callback(&a));
  return take_value(a);
}

std::string plugin_try_get(KeyValueStore& store, const std::string& key) {
  abi::CallbackError make = &make_fake;
  abi::KeyValueTryGetCallback_Args a{};
  a.key = key.data();
  a.key_size = key.size();
  a.callback_error = &make;
  a.user_arg = &store;
  raise(try_get_callback(&a));
  return take_value(a);
}

void plugin_put(KeyValueStore& store, const std::string& key, const std::string& value) {
  abi::CallbackError make = &make_fake;
  abi::KeyValuePutCallback_Args a{};
  a.key = key.data();
  a.key_size = key.size();
  a.value = value.data();
  a.value_size = value.size();
  a.callback_error = &make;
  a.user_arg = &store;
  raise(put_callback(&a));
}

}  // namespace tpu::pjrt::kv

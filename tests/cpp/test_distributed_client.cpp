// The distributed-client pieces that need no distributed plugin: create options as PJRT_NamedValues,
// and the key-value callbacks (called as a plugin calls them) over a map-backed store.
#include <map>
#include <mutex>
#include <string>

#include "check.h"
#include "pjrt/client.h"
#include "pjrt/kv_store.h"

using namespace tpu;
using pjrt::abi::ErrorCode;
using pjrt::abi::NamedValueType;

namespace {
pjrt::Client::Option opt(const std::string& name, int64_t i) {
  pjrt::Client::Option o; o.name = name; o.kind = pjrt::Client::Option::Int; o.i = i; return o;
}

ErrorCode code_of(const std::function<void()>& f) {
  try { f(); } catch (const pjrt::Error& e) { return e.code; }
  return ErrorCode::OK;
}
}  // namespace

int main() {
  // ---- options
  std::vector<pjrt::Client::Option> options{opt("node_id", 1), opt("num_nodes", 4)};
  pjrt::Client::Option devices; devices.name = "visible_devices"; devices.kind = pjrt::Client::Option::Int64List;
  devices.list = {3, 5};
  pjrt::Client::Option prealloc; prealloc.name = "preallocate"; prealloc.kind = pjrt::Client::Option::Bool;
  pjrt::Client::Option alloc; alloc.name = "allocator"; alloc.kind = pjrt::Client::Option::String; alloc.s = "platform";
  pjrt::Client::Option frac; frac.name = "memory_fraction"; frac.kind = pjrt::Client::Option::Float; frac.f = 0.5f;
  options.insert(options.end(), {devices, prealloc, alloc, frac});
  std::vector<pjrt::abi::NamedValue> v = pjrt::Client::encode_options(options);
  CHECK(v.size() == 6);
  for (const auto& x : v) CHECK(x.h.struct_size == sizeof(pjrt::abi::NamedValue) && !x.h.extension_start);
  CHECK(std::string(v[0].name, v[0].name_size) == "node_id");
  CHECK(v[0].type == NamedValueType::Int64 && v[0].int64_value == 1 && v[0].value_size == 1);
  CHECK(std::string(v[1].name, v[1].name_size) == "num_nodes" && v[1].int64_value == 4);
  CHECK(v[2].type == NamedValueType::Int64List && v[2].value_size == 2);
  CHECK(v[2].int64_array_value == options[2].list.data() && v[2].int64_array_value[1] == 5);
  CHECK(v[3].type == NamedValueType::Bool && !v[3].bool_value && v[3].value_size == 1);
  CHECK(v[4].type == NamedValueType::String && v[4].value_size == 8 &&
        std::string(v[4].string_value, v[4].value_size) == "platform");
  CHECK(v[5].type == NamedValueType::Float && v[5].float_value == 0.5f && v[5].value_size == 1);
  // The enum values are the ABI's.
  CHECK(static_cast<int>(NamedValueType::Int64List) == 2 && static_cast<int>(NamedValueType::Bool) == 4);

  // ---- key-value callbacks over a map
  std::map<std::string, std::string> map;
  std::mutex mu;
  int last_timeout = -1;
  pjrt::KeyValueStore store;
  store.get = [&](const std::string& k, int timeout_ms) -> std::optional<std::string> {
    std::lock_guard<std::mutex> l(mu);
    last_timeout = timeout_ms;
    auto it = map.find(k);
    if (it == map.end()) return std::nullopt;
    return it->second;
  };
  store.try_get = [&](const std::string& k) -> std::optional<std::string> {
    std::lock_guard<std::mutex> l(mu);
    auto it = map.find(k);
    if (it == map.end()) return std::nullopt;
    return it->second;
  };
  store.put = [&](const std::string& k, const std::string& val) {
    std::lock_guard<std::mutex> l(mu);
    if (k == "forbidden") throw pjrt::Error(ErrorCode::PERMISSION_DENIED, "no");
    if (k == "broken") throw std::runtime_error("disk full");
    map[k] = val;
  };

  int64_t before = pjrt::kv::values_outstanding();
  pjrt::kv::plugin_put(store, "gpu:topology/0", std::string("a\0b", 3));
  CHECK(map["gpu:topology/0"] == std::string("a\0b", 3));
  CHECK(pjrt::kv::plugin_get(store, "gpu:topology/0", 1234) == std::string("a\0b", 3));
  CHECK(last_timeout == 1234);
  CHECK(pjrt::kv::plugin_try_get(store, "gpu:topology/0") == std::string("a\0b", 3));
  pjrt::kv::plugin_put(store, "empty", "");
  CHECK(pjrt::kv::plugin_get(store, "empty", 10).empty());  // a non-null empty value
  CHECK(pjrt::kv::values_outstanding() == before);           // every value freed by its deleter

  CHECK(code_of([&] { pjrt::kv::plugin_get(store, "missing", 50); }) == ErrorCode::DEADLINE_EXCEEDED);
  CHECK_THROWS(pjrt::Error, pjrt::kv::plugin_get(store, "missing", 50), "key 'missing' not set within 50 ms");
  CHECK(code_of([&] { pjrt::kv::plugin_try_get(store, "missing"); }) == ErrorCode::NOT_FOUND);
  CHECK(code_of([&] { pjrt::kv::plugin_put(store, "forbidden", "x"); }) == ErrorCode::PERMISSION_DENIED);
  CHECK(code_of([&] { pjrt::kv::plugin_put(store, "broken", "x"); }) == ErrorCode::UNKNOWN);
  CHECK_THROWS(pjrt::Error, pjrt::kv::plugin_put(store, "broken", "x"), "put 'broken' failed: disk full");
  CHECK(pjrt::kv::values_outstanding() == before);  // errors hand out no value

  // A raw call, as a plugin makes it: the value and its deleter come back in the args.
  pjrt::abi::KeyValueGetCallback_Args a{};
  std::string key = "gpu:topology/0";
  a.key = key.data();
  a.key_size = key.size();
  a.timeout_in_ms = 1;
  a.user_arg = &store;
  CHECK(pjrt::kv::get_callback(&a) == nullptr);
  CHECK(a.value && a.value_size == 3 && a.value_deleter);
  CHECK(pjrt::kv::values_outstanding() == before + 1);
  a.value_deleter(a.value);
  CHECK(pjrt::kv::values_outstanding() == before);

  // Without try_get the store still serves get/put.
  pjrt::KeyValueStore no_try = store;
  no_try.try_get = nullptr;
  CHECK(code_of([&] { pjrt::kv::plugin_try_get(no_try, "gpu:topology/0"); }) == ErrorCode::UNIMPLEMENTED);
  return test::failures();
}

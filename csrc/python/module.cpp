// torch_tpu._C: the torch-free runtime seen from Python (plugin, devices, buffers, execute,
// metrics). Errors: pjrt::Error -> torch_tpu.runtime.PjrtError (a RuntimeError).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>

#include "runtime/metrics.h"
#include "runtime/runtime.h"

namespace py = pybind11;
using namespace tpu;

namespace {

DType dtype_arg(const std::string& name) {
  DType t;
  if (!dtype_from_name(name, &t)) throw py::value_error("unknown dtype '" + name + "'");
  return t;
}

std::vector<int64_t> contiguous_byte_strides(const std::vector<int64_t>& dims, int64_t item) {
  std::vector<int64_t> s(dims.size());
  int64_t acc = item;
  for (size_t i = dims.size(); i-- > 0;) { s[i] = acc; acc *= dims[i]; }
  return s;
}

// Host -> device from any buffer-protocol object (numpy array), honouring its strides.
std::shared_ptr<pjrt::Buffer> from_host(py::buffer data, const std::string& dtype, int device) {
  py::buffer_info info = data.request();
  DType t = dtype_arg(dtype);
  if (info.itemsize != byte_size(t))
    throw py::value_error("element size " + std::to_string(info.itemsize) + " does not match dtype " + dtype);
  std::vector<int64_t> dims(info.shape.begin(), info.shape.end());
  std::vector<int64_t> strides(info.strides.begin(), info.strides.end());
  Runtime& rt = Runtime::get();
  bool dense = strides == contiguous_byte_strides(dims, info.itemsize);
  py::gil_scoped_release release;
  return std::make_shared<pjrt::Buffer>(
      rt.client().to_device(info.ptr, t, dims, rt.device(device), dense ? nullptr : &strides));
}

py::bytes to_host(const pjrt::Buffer& b) {
  int64_t n = byte_size(b.dtype());
  for (int64_t d : b.dims()) n *= d;
  std::string out(n, '\0');
  {
    py::gil_scoped_release release;
    b.to_host(out.data(), out.size());
  }
  return py::bytes(out);
}

// A PJRT create option from a Python value: bool, int, float, a list/tuple of ints, else its str().
pjrt::Client::Option client_option(const std::string& name, py::handle v) {
  pjrt::Client::Option o;
  o.name = name;
  if (py::isinstance<py::bool_>(v)) { o.kind = pjrt::Client::Option::Bool; o.b = v.cast<bool>(); }
  else if (py::isinstance<py::int_>(v)) { o.kind = pjrt::Client::Option::Int; o.i = v.cast<int64_t>(); }
  else if (py::isinstance<py::float_>(v)) { o.kind = pjrt::Client::Option::Float; o.f = v.cast<float>(); }
  else if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    o.kind = pjrt::Client::Option::Int64List;
    o.list = v.cast<std::vector<int64_t>>();
  } else { o.kind = pjrt::Client::Option::String; o.s = py::str(v); }
  return o;
}

std::vector<pjrt::Client::Option> client_options(const py::dict& options) {
  std::vector<pjrt::Client::Option> out;
  for (auto [k, v] : options) out.push_back(client_option(py::str(k), v));
  return out;
}

// ---- The distributed client's key-value store, backed by Python callables
// get(key: str, timeout_ms: int) -> bytes | None (None: not set in time), try_get(key: str) -> bytes |
// None, put(key: str, value: bytes). The plugin calls them from its own threads: every call takes the
// GIL. A Python exception becomes pjrt::Error: TimeoutError -> DEADLINE_EXCEEDED, KeyError ->
// NOT_FOUND, anything else UNKNOWN, with the exception's text.
struct PyCallables {
  py::object get, put, try_get;
  ~PyCallables() {
    if (!Py_IsInitialized()) {  // after interpreter teardown: leak rather than touch Python
      get.release(); put.release(); try_get.release();
      return;
    }
    py::gil_scoped_acquire gil;
    get = py::object(); put = py::object(); try_get = py::object();
  }
};

[[noreturn]] void rethrow_python(py::error_already_set& e, const char* what, const std::string& key) {
  pjrt::abi::ErrorCode code = e.matches(PyExc_TimeoutError) ? pjrt::abi::ErrorCode::DEADLINE_EXCEEDED
                            : e.matches(PyExc_KeyError)     ? pjrt::abi::ErrorCode::NOT_FOUND
                                                            : pjrt::abi::ErrorCode::UNKNOWN;
  // The exception's type and text, without e.what()'s traceback.
  std::string text = py::str(e.type().attr("__name__")).cast<std::string>() + ": " +
                     py::str(e.value()).cast<std::string>();
  throw pjrt::Error(code, std::string("torch_tpu key-value store: ") + what + " '" + key + "': " + text);
}

std::optional<std::string> optional_bytes(py::handle r) {
  if (r.is_none()) return std::nullopt;
  return r.cast<std::string>();  // bytes (or str)
}

pjrt::KeyValueStoreRef python_store(py::object get, py::object put, py::object try_get) {
  if (get.is_none() || put.is_none()) throw py::value_error("a key-value store needs get and put callables");
  auto fns = std::make_shared<PyCallables>();
  fns->get = std::move(get);
  fns->put = std::move(put);
  fns->try_get = std::move(try_get);
  auto store = std::make_shared<pjrt::KeyValueStore>();
  store->get = [fns](const std::string& key, int timeout_ms) {
    py::gil_scoped_acquire gil;
    try { return optional_bytes(fns->get(key, timeout_ms)); }
    catch (py::error_already_set& e) { rethrow_python(e, "get", key); }
  };
  if (!fns->try_get.is_none())
    store->try_get = [fns](const std::string& key) {
      py::gil_scoped_acquire gil;
      try { return optional_bytes(fns->try_get(key)); }
      catch (py::error_already_set& e) { rethrow_python(e, "try_get", key); }
    };
  store->put = [fns](const std::string& key, const std::string& value) {
    py::gil_scoped_acquire gil;
    try { fns->put(key, py::bytes(value)); }
    catch (py::error_already_set& e) { rethrow_python(e, "put", key); }
  };
  return store;
}

// What configure_distributed_client asked for, applied when the runtime starts (never freed: the
// plugin may call the store until the process ends).
struct DistributedClient {
  std::vector<pjrt::Client::Option> options;
  pjrt::KeyValueStoreRef store;
};
std::optional<DistributedClient>& distributed_client() {
  static auto* d = new std::optional<DistributedClient>();
  return *d;
}

py::object option_value(const pjrt::abi::NamedValue& v) {
  using T = pjrt::abi::NamedValueType;
  switch (v.type) {
    case T::String: return py::str(std::string(v.string_value, v.value_size));
    case T::Int64: return py::int_(v.int64_value);
    case T::Int64List: return py::cast(std::vector<int64_t>(v.int64_array_value, v.int64_array_value + v.value_size));
    case T::Float: return py::float_(v.float_value);
    case T::Bool: return py::bool_(v.bool_value);
  }
  return py::none();
}

py::dict options_dict(const std::vector<pjrt::Client::Option>& options) {
  py::dict d;
  for (const auto& v : pjrt::Client::encode_options(options)) d[py::str(std::string(v.name, v.name_size))] = option_value(v);
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  static py::exception<pjrt::Error> pjrt_error(m, "PjrtError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const pjrt::Error& e) {
      py::set_error(pjrt_error, (std::string(pjrt::error_code_name(e.code)) + ": " + e.what()).c_str());
    }
  });

  m.def("init", [](const std::string& path, const std::string& platform, const py::dict& options,
                   const std::string& cache_dir) {
    RuntimeConfig c{path, platform, client_options(options), cache_dir, nullptr, nullptr};
    if (const auto& d = distributed_client()) {  // its options win over the platform's defaults
      for (const auto& o : d->options) {
        auto same = [&](const pjrt::Client::Option& x) { return x.name == o.name; };
        c.client_options.erase(std::remove_if(c.client_options.begin(), c.client_options.end(), same),
                               c.client_options.end());
        c.client_options.push_back(o);
      }
      c.kv_store = d->store;
    }
    c.warn = [](const std::string& msg) {
      py::gil_scoped_acquire gil;
      PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 2);
    };
    // Without the GIL: a distributed client calls the Python key-value store from plugin threads
    // while PJRT_Client_Create waits for the other processes.
    py::gil_scoped_release release;
    Runtime::init(c);
  });
  // Asks for a distributed PJRT client (CUDA, TPU): `options` (node_id, num_nodes, visible_devices,
  // ...) join the platform's create options and get/put/try_get back the key-value callbacks. Only
  // before the runtime starts; torch_tpu/distributed.py calls it from init_process_group.
  m.def("configure_distributed_client", [](const py::dict& options, py::object get, py::object put,
                                           py::object try_get) {
    if (Runtime::initialized())
      throw pjrt::Error(pjrt::abi::ErrorCode::FAILED_PRECONDITION,
                        "the tpu runtime has already started with a non-distributed client; create the "
                        "process group before the first use of a tpu tensor");
    distributed_client() = DistributedClient{client_options(options), python_store(get, put, try_get)};
  }, py::arg("options"), py::arg("get"), py::arg("put"), py::arg("try_get") = py::none());
  m.def("clear_distributed_client", [] {
    if (Runtime::initialized())
      throw pjrt::Error(pjrt::abi::ErrorCode::FAILED_PRECONDITION, "the tpu runtime has already started");
    distributed_client().reset();
  });
  // None, or {"options": ..., "try_get": bool, "active": whether the running client was made with it}.
  m.def("distributed_client", []() -> py::object {
    const auto& d = distributed_client();
    if (!d) return py::none();
    py::dict r;
    r["options"] = options_dict(d->options);
    r["try_get"] = static_cast<bool>(d->store->try_get);
    r["active"] = Runtime::initialized() && Runtime::get().config().kv_store == d->store;
    return r;
  });
  // Test hooks (no plugin needed): the NamedValue array a dict of options encodes to, as
  // (name, type, value, value_size) rows; and one key-value callback called as a plugin calls it.
  m.def("_encode_client_options", [](const py::dict& options) {
    std::vector<pjrt::Client::Option> opts = client_options(options);
    static const char* types[] = {"string", "int64", "int64_list", "float", "bool"};
    py::list rows;
    for (const auto& v : pjrt::Client::encode_options(opts)) {
      if (v.h.struct_size != sizeof(pjrt::abi::NamedValue)) throw std::logic_error("bad NamedValue struct_size");
      rows.append(py::make_tuple(std::string(v.name, v.name_size), types[static_cast<int>(v.type)],
                                 option_value(v), v.value_size));
    }
    return rows;
  });
  m.def("_kv_call", [](py::object get, py::object put, py::object try_get, const std::string& op,
                       const std::string& key, const py::bytes& value, int timeout_ms) -> py::object {
    pjrt::KeyValueStoreRef store = python_store(get, put, try_get);
    if (op != "get" && op != "try_get" && op != "put") throw py::value_error("op must be get, try_get or put");
    std::string v = value, out;
    {
      py::gil_scoped_release release;  // as on a plugin thread: the callables take the GIL back
      if (op == "get") out = pjrt::kv::plugin_get(*store, key, timeout_ms);
      else if (op == "try_get") out = pjrt::kv::plugin_try_get(*store, key);
      else pjrt::kv::plugin_put(*store, key, v);
    }
    if (op == "put") return py::none();
    return py::bytes(out);
  }, py::arg("get"), py::arg("put"), py::arg("try_get"), py::arg("op"), py::arg("key"),
     py::arg("value") = py::bytes(), py::arg("timeout_ms") = 0);
  m.def("_kv_values_outstanding", &pjrt::kv::values_outstanding);
  m.def("initialized", &Runtime::initialized);
  m.def("shutdown", [] { py::gil_scoped_release r; Runtime::shutdown(); });
  m.def("platform", [] { return Runtime::get().config().platform; });
  m.def("platform_name", [] { return Runtime::get().client().platform_name(); });
  m.def("platform_version", [] { return Runtime::get().client().platform_version(); });
  m.def("plugin_info", [] {
    const pjrt::Plugin& p = Runtime::get().plugin();
    py::dict d;
    d["path"] = p.path;
    d["api_version"] = std::to_string(p.major) + "." + std::to_string(p.minor);
    for (const auto& [k, v] : p.attributes) d[py::str(k)] = v;
    return d;
  });
  m.def("devices", [] {
    Runtime& rt = Runtime::get();
    py::list out;
    for (auto* dev : rt.client().devices()) {
      pjrt::DeviceInfo i = rt.client().device_info(dev);
      py::dict d;
      d["id"] = i.id;
      d["kind"] = i.kind;
      d["description"] = i.debug_string;
      out.append(d);
    }
    return out;
  });
  m.def("memory_stats", [](int device) {  // the plugin's own numbers (-1: not said)
    Runtime& rt = Runtime::get();
    pjrt::MemoryStats s = rt.client().memory_stats(rt.device(device));
    py::dict d;
    d["reported"] = s.reported;
    d["bytes_in_use"] = s.bytes_in_use;
    d["peak_bytes_in_use"] = s.peak_bytes_in_use;
    d["bytes_limit"] = s.bytes_limit;
    d["bytes_reserved"] = s.bytes_reserved;
    d["peak_bytes_reserved"] = s.peak_bytes_reserved;
    d["pool_bytes"] = s.pool_bytes;
    d["peak_pool_bytes"] = s.peak_pool_bytes;
    return d;
  });
  // Device memory as torch.tpu reports it: buffers torch_tpu holds (counted per device), reserved
  // (the plugin's pool where it says), free and total.
  m.def("device_memory", [](int device) {
    DeviceMemory mem;
    {
      py::gil_scoped_release r;
      mem = Runtime::get().memory(device);
    }
    const pjrt::AllocationStats& b = mem.buffers;
    py::dict d;
    d["allocated_bytes"] = b.bytes;
    d["peak_allocated_bytes"] = b.peak_bytes;
    d["buffers"] = b.buffers;
    d["peak_buffers"] = b.peak_buffers;
    d["allocs"] = b.allocs;
    d["frees"] = b.frees;
    d["bytes_allocated_total"] = b.bytes_allocated;
    d["bytes_freed_total"] = b.bytes_freed;
    d["reserved_bytes"] = mem.reserved;
    d["peak_reserved_bytes"] = mem.peak_reserved;
    d["free_bytes"] = mem.free;
    d["total_bytes"] = mem.total;
    d["plugin_reports"] = mem.plugin.reported;
    d["plugin_bytes_in_use"] = mem.plugin.bytes_in_use;
    d["plugin_bytes_limit"] = mem.plugin.bytes_limit;
    return d;
  });
  m.def("reset_peak_memory", [](int device) { Runtime::get().client().reset_peak_allocation(device); });
  m.def("reset_accumulated_memory", [](int device) { Runtime::get().client().reset_accumulated_allocation(device); });
  m.def("in_bad_fork", &Runtime::in_bad_fork);
  m.def("cache_info", [] {
    CompileCache& c = Runtime::get().cache();
    py::dict d;
    d["memory_entries"] = c.memory_entries();
    d["memory_capacity"] = c.memory_capacity();
    d["disk_dir"] = c.disk_dir();
    return d;
  });

  py::class_<pjrt::Buffer, std::shared_ptr<pjrt::Buffer>>(m, "DeviceBuffer")
      .def_property_readonly("dtype", [](const pjrt::Buffer& b) { return std::string(info(b.dtype()).name); })
      .def_property_readonly("shape", [](const pjrt::Buffer& b) { return b.dims(); })
      .def_property_readonly("on_device_bytes", &pjrt::Buffer::on_device_bytes)
      .def("is_deleted", &pjrt::Buffer::is_deleted)
      .def("block_until_ready", [](const pjrt::Buffer& b) { py::gil_scoped_release r; b.ready_event().await(); })
      .def("to_bytes", &to_host)
      .def("copy_to", [](const pjrt::Buffer& b, int device) {
        Runtime& rt = Runtime::get();
        return std::make_shared<pjrt::Buffer>(b.copy_to_device(rt.device(device)));
      });
  m.def("from_host", &from_host, py::arg("data"), py::arg("dtype"), py::arg("device") = 0);

  m.def("execute", [](const std::string& program, const std::vector<std::shared_ptr<pjrt::Buffer>>& args,
                      const std::vector<bool>& donated, int device) {
    std::vector<const pjrt::Buffer*> raw;
    for (const auto& a : args) raw.push_back(a.get());
    std::vector<pjrt::Buffer> outs;
    {
      py::gil_scoped_release release;
      outs = Runtime::get().execute(program, raw, donated, device);
    }
    std::vector<std::shared_ptr<pjrt::Buffer>> result;
    for (auto& o : outs) result.push_back(std::make_shared<pjrt::Buffer>(std::move(o)));
    return result;
  }, py::arg("program"), py::arg("args"), py::arg("donated") = std::vector<bool>{}, py::arg("device") = 0);

  m.def("set_compile_overrides", [](const std::vector<std::pair<std::string, pjrt::Client::OptionValue>>& overrides) {
    CompileCache::set_thread_overrides(pjrt::Client::option_overrides(overrides));
  });
  m.def("set_compiles_forbidden", &CompileCache::set_compiles_forbidden);
  m.def("metrics", [] {
    py::dict d;
    for (const auto& [k, v] : metrics::snapshot()) d[py::str(k)] = v;
    return d;
  });
  m.def("reset_metrics", &metrics::reset);
  m.def("clear_memory_cache", [] { Runtime::get().cache().clear_memory(); });
}

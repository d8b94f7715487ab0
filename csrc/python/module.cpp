// torch_tpu._C: the torch-free runtime seen from Python (plugin, devices, buffers, execute,
// metrics). Errors: pjrt::Error -> torch_tpu.runtime.PjrtError (a RuntimeError).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

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
    RuntimeConfig c{path, platform, {}, cache_dir, nullptr};
    for (auto [k, v] : options) {
      pjrt::Client::Option o;
      o.name = py::str(k);
      if (py::isinstance<py::bool_>(v)) { o.kind = pjrt::Client::Option::Bool; o.b = v.cast<bool>(); }
      else if (py::isinstance<py::int_>(v)) { o.kind = pjrt::Client::Option::Int; o.i = v.cast<int64_t>(); }
      else { o.kind = pjrt::Client::Option::String; o.s = py::str(v); }
      c.client_options.push_back(o);
    }
    c.warn = [](const std::string& msg) {
      py::gil_scoped_acquire gil;
      PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 2);
    };
    Runtime::init(c);
  });
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

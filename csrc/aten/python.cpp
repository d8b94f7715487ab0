// torch_tpu._aten: what torch.tpu and torch_tpu need from the ATen glue.
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/compiled.h"
#include "aten/device.h"
#include "aten/dispatch.h"
#include "aten/generator.h"
#include "aten/tensor.h"
#include "lower/rule.h"
#include "runtime/op_call.h"
#include "runtime/runtime.h"

namespace py = pybind11;
using namespace tpu;

PYBIND11_MODULE(_aten, m) {
  m.def("set_runtime_initializer", [](py::function init) {
    // leaked on purpose: it must not be released after the interpreter is gone
    auto* holder = new py::function(std::move(init));
    aten::set_runtime_initializer([holder] {
      py::gil_scoped_acquire gil;
      try {
        (*holder)();
      } catch (py::error_already_set& e) {
        // "Type: message", without pybind11's traceback lines: this text ends up in every later error
        std::string type = py::str(e.type().attr("__name__"));
        std::string msg = py::str(e.value());
        throw std::runtime_error(type + ": " + msg);
      }
    });
  });
  m.def("ensure_runtime", [] { py::gil_scoped_release r; aten::ensure_runtime(); });
  m.def("device_count", [] { py::gil_scoped_release r; return aten::device_count(); });
  m.def("current_device", &aten::current_device);
  m.def("set_device", &aten::set_current_device);
  m.def("synchronize", [](int device) {
    py::gil_scoped_release r;
    TORCH_CHECK(!Runtime::in_bad_fork(), pjrt::Plugin::kForkMessage);  // before any lock a dead thread may hold
    try {
      synchronize(device);
    } catch (const pjrt::Error& e) {
      aten::rethrow(e, "tpu: error in a launched op");
    } catch (const CheckFailed& e) {
      aten::rethrow(e);
    }
  }, py::arg("device") = -1);
  m.def("default_generator", [](int device) {
    {
      // start the runtime outside the generator table's lock: starting it applies queued seeds
      py::gil_scoped_release r;
      aten::device_count();
    }
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(aten::default_generator(device)));
  });
  m.def("set_launch_blocking", &set_launch_blocking);
  m.def("launch_blocking", &launch_blocking);
  m.def("set_mode", [](const std::string& name) {
    py::gil_scoped_release r;
    try {
      set_mode(name == "fuse" ? Mode::Fuse : name == "debug" ? Mode::Debug : Mode::Strict);
    } catch (const pjrt::Error& e) {
      aten::rethrow(e, "tpu: error in a recorded op");
    }
  });
  m.def("mode", [] { return mode() == Mode::Fuse ? "fuse" : mode() == Mode::Debug ? "debug" : "strict"; });
  m.def("flush", [] {
    py::gil_scoped_release r;
    try {
      flush();
    } catch (const pjrt::Error& e) {
      aten::rethrow(e, "tpu: error in a recorded op");
    }
  });
  m.def("in_bad_fork", &Runtime::in_bad_fork);
  m.def("set_cpu_fallback", &aten::set_cpu_fallback);
  m.def("cpu_fallback", &aten::cpu_fallback);
  m.def("lowered_ops", &lower::names);
  m.def("python_origin", &aten::python_origin);
  m.def("is_ready", [](const at::Tensor& t) {
    auto& st = aten::storage_of(t);
    if (st.pending && !st.contents().buffer) return false;  // recorded, not launched yet
    return !st.buffer || st.buffer->ready_event().is_ready();
  });
  // torch.compile (torch_tpu/compiler.py)
  py::class_<aten::CompiledGraph, std::shared_ptr<aten::CompiledGraph>>(m, "CompiledGraph")
      .def("mismatch", &aten::CompiledGraph::mismatch)
      .def_property_readonly("name", [](const aten::CompiledGraph& g) { return g.captured ? g.captured->name : ""; });
  m.def("capture_begin", [](const std::vector<at::Tensor>& inputs) {
    py::gil_scoped_release r;
    try {
      return aten::capture_begin(inputs);
    } catch (const pjrt::Error& e) {
      aten::rethrow(e, "tpu: error in a recorded op");
    }
  });
  m.def("capture_abort", &aten::capture_abort);
  m.def("capture_end", [](aten::CompiledGraph& g, const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs) {
    py::gil_scoped_release r;
    try {
      return aten::capture_end(g, inputs, outputs);
    } catch (const pjrt::Error& e) {
      aten::rethrow(e, "tpu: error in a compiled graph");
    }
  });
  m.def("replay", [](const aten::CompiledGraph& g, const std::vector<at::Tensor>& inputs) {
    py::gil_scoped_release r;
    try {
      return aten::replay(g, inputs);
    } catch (const pjrt::Error& e) {
      aten::rethrow(e, "tpu: error in " + g.captured->name);
    }
  });
  m.def("storage_origin", [](const at::Tensor& t) { return aten::storage_of(t).origin; });
}

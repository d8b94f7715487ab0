// Copies between tpu and the host or another tpu device, and the host syncs that read values.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "aten/dispatch.h"
#include "aten/tensor.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

namespace tpu::aten {
namespace {

bool dense(const at::Tensor& t) {
  Storage& st = storage_of(t);
  return st.written() && view_of(t).covers(st.type());
}

std::shared_ptr<pjrt::Buffer> upload(const at::Tensor& host, int device) {
  Runtime& rt = Runtime::get();
  return std::make_shared<pjrt::Buffer>(rt.client().to_device(
      host.data_ptr(), to_dtype(host.scalar_type()), {host.numel()}, rt.device(device)));
}

}  // namespace

std::shared_ptr<pjrt::Buffer> dense_buffer(const at::Tensor& t) {
  if (dense(t)) return storage_of(t).ready();
  at::Tensor c = call("clone", "", {t, c10::IValue()})[0].toTensor();
  return storage_of(c).ready();
}

at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool /*non_blocking*/) {
  if (dst.numel() == 0) return dst;
  try {
    if (dst.device().type() == c10::DeviceType::PrivateUse1) {
      at::Tensor source = src;
      int device = dst.device().index();
      if (src.device().type() != c10::DeviceType::PrivateUse1) {  // host -> device
        at::Tensor host = src.to(dst.scalar_type()).contiguous();
        Storage& st = storage_of(dst);
        if (host.sizes() == dst.sizes() && Write{0, &st, view_of(dst)}.covers()) {
          st.assign({upload(host, device), nullptr}, to_dtype(dst.scalar_type()), "host copy at " + python_origin());
          return dst;
        }
        source = wrap({upload(host, device), nullptr}, host.scalar_type(), host.sizes(), device, "host copy");
      } else if (src.device() != dst.device()) {  // device -> device
        source = wrap({std::make_shared<pjrt::Buffer>(dense_buffer(src)->copy_to_device(Runtime::get().device(device))), nullptr},
                      src.scalar_type(), src.sizes(), device, storage_of(src).origin);
      }
      call("copy_", "", {dst, source, false});
      return dst;
    }
    // device -> host: a dense buffer of src's dtype, then the host does strides and dtype
    std::shared_ptr<pjrt::Buffer> b = dense_buffer(src);
    at::Tensor host = at::empty(src.sizes(), src.options().device(c10::kCPU));
    metrics::count(metrics::HostSyncs);
    try {
      b->to_host(host.data_ptr(), host.nbytes());
    } catch (const pjrt::Error& e) {
      rethrow(e, "tpu: error in " + storage_of(src).origin);
    }
    raise_failed_checks_like_cpu(src.device().index());  // a host sync: device-side checks surface here
    dst.copy_(host);
    return dst;
  } catch (const pjrt::Error& e) {
    rethrow(e, "tpu copy");
  }
}

at::Tensor copy_from_and_resize(const at::Tensor& src, const at::Tensor& dst) {
  if (dst.sizes() != src.sizes()) dst.resize_(src.sizes());
  return copy_from(src, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  at::Tensor host = at::empty(self.sizes(), self.options().device(c10::kCPU));  // item() of a [1] tensor too
  copy_from(self, host, false);
  return host.item();
}

}  // namespace tpu::aten

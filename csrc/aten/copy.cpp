// Copies between tpu and the host or another tpu device, and the host syncs that read values.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <mutex>
#include <numeric>
#include <vector>

#include "aten/dispatch.h"
#include "aten/tensor.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

namespace tpu::aten {
namespace {

bool dense(const at::Tensor& t) {
  if (t.is_conj() || t.is_neg()) return false;  // the buffer holds the values before the lazy conj / neg
  Storage& st = storage_of(t);
  return st.written() && view_of(t).covers(st.type());
}

// How many reads of a few elements `b` has had (counted for the 16 buffers read so most recently).
int small_reads(const std::shared_ptr<pjrt::Buffer>& b) {
  static std::mutex mu;
  static std::vector<std::pair<std::weak_ptr<pjrt::Buffer>, int>> counts;
  std::lock_guard<std::mutex> lock(mu);
  for (auto& [buffer, n] : counts)
    if (buffer.lock() == b) return ++n;
  counts.insert(counts.begin(), {b, 1});
  if (counts.size() > 16) counts.pop_back();
  return 1;
}

// The whole storage's buffer when `src` is a part of it that a host read of all of it (kept, see host_copy)
// serves better than a program that reads the view: a small storage, or one of up to 8 MB whose elements a
// loop reads one by one (x[i].item(), all(x)), from its fourth read of a few elements. Else null.
std::shared_ptr<pjrt::Buffer> whole_storage_buffer(const at::Tensor& src) {
  constexpr int64_t kSmall = 1 << 16, kLooped = 8 << 20;
  Storage& st = storage_of(src);
  if (src.is_conj() || src.is_neg() || !st.written() || st.nbytes > kLooped || dense(src)) return nullptr;
  if (st.nbytes > kSmall && (src.numel() > 16 || small_reads(st.ready()) < 4)) return nullptr;
  std::shared_ptr<pjrt::Buffer> b = st.ready();
  int64_t bytes = static_cast<int64_t>(byte_size(b->dtype()));
  for (int64_t d : b->dims()) bytes *= d;
  return bytes == st.nbytes ? b : nullptr;
}

// The one device -> host read: a host sync, whose failure names the op that produced the buffer.
void read_to_host(const pjrt::Buffer& b, void* dst, size_t nbytes, const std::string& origin) {
  metrics::count(metrics::HostSyncs);
  try {
    b.to_host(dst, nbytes);
  } catch (const pjrt::Error& e) {
    rethrow(e, "tpu: error in " + origin);
  }
}

// Host copies of the small buffers read whole, most recent first. A buffer's contents never change (a
// write installs a new buffer), so a loop of x[i].item() reads the device once.
at::Tensor host_copy(const std::shared_ptr<pjrt::Buffer>& b, int64_t nbytes, const std::string& origin) {
  static std::mutex mu;
  static std::vector<std::pair<std::weak_ptr<pjrt::Buffer>, at::Tensor>> recent;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < recent.size(); ++i)
      if (recent[i].first.lock() == b) {
        std::rotate(recent.begin(), recent.begin() + static_cast<std::ptrdiff_t>(i), recent.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        return recent.front().second;
      }
  }
  at::Tensor bytes = at::empty({nbytes}, at::TensorOptions().dtype(at::kByte));
  read_to_host(*b, bytes.mutable_data_ptr(), static_cast<size_t>(nbytes), origin);
  std::lock_guard<std::mutex> lock(mu);
  recent.insert(recent.begin(), {b, bytes});
  if (recent.size() > 16) recent.pop_back();
  return bytes;
}

std::shared_ptr<pjrt::Buffer> upload(const at::Tensor& host, int device) {
  Runtime& rt = Runtime::get();
  return std::make_shared<pjrt::Buffer>(rt.client().to_device(
      host.data_ptr(), storage_dtype(to_dtype(host.scalar_type())), {host.numel()}, rt.device(device)));
}

}  // namespace

std::shared_ptr<pjrt::Buffer> dense_buffer(const at::Tensor& t) {
  if (dense(t)) return storage_of(t).ready();
  at::Tensor c = call("clone", "", {t, c10::MemoryFormat::Contiguous})[0].toTensor();
  return storage_of(c).ready();
}

at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst_view, bool /*non_blocking*/) {
  if (dst_view.numel() == 0) return dst_view;
  try {
    if (dst_view.device().type() == c10::DeviceType::PrivateUse1) {
      // A write through a conj / neg view (x.conj().add_(y) ends in one) stores conj / neg of the values
      // into the plain storage; the tpu source's own bits are materialized by the copy_ rule's inputs.
      at::Tensor source = src, dst = dst_view;
      if (dst.is_conj() || dst.is_neg()) {
        dst = at::alias(dst_view);
        dst._set_conj(false);
        dst._set_neg(false);
        if (dst_view.is_conj()) source = source.conj();
        if (dst_view.is_neg()) source = source._neg_view();
      }
      int device = dst.device().index();
      if (src.device().type() != c10::DeviceType::PrivateUse1) {  // host -> device
        at::Tensor host = source.resolve_conj().resolve_neg().to(dst.scalar_type()).contiguous();
        Storage& st = storage_of(dst);
        if (host.sizes() == dst.sizes() && Write{0, &st, view_of(dst)}.covers()) {
          st.assign({upload(host, device), nullptr}, to_dtype(dst.scalar_type()), "host copy at " + python_origin());
          return dst;
        }
        source = wrap({upload(host, device), nullptr}, host.scalar_type(), host.sizes(), device, "host copy");
      } else if (src.device() != dst.device()) {  // device -> device
        source = wrap({std::make_shared<pjrt::Buffer>(dense_buffer(source)->copy_to_device(Runtime::get().device(device))), nullptr},
                      src.scalar_type(), src.sizes(), device, storage_of(src).origin);
      }
      call("copy_", "", {dst, source, false});
      return dst_view;
    }
    const at::Tensor& dst = dst_view;
    // device -> host: a dense buffer of src's dtype, then the host does strides and dtype. A view of a
    // small storage (or of one a loop reads element by element) instead brings the whole storage and lets the
    // host pick the view's elements (x[i].item(), the tail of a growing sequence): no program runs, none
    // compiles per position.
    at::Tensor host;
    if (auto whole = whole_storage_buffer(src)) {
      at::Tensor bytes = host_copy(whole, storage_of(src).nbytes, storage_of(src).origin);
      host = at::empty({0}, src.options().device(c10::kCPU)).set_(bytes.storage(), src.storage_offset(), src.sizes(), src.strides());
    } else {
      host = at::empty(src.sizes(), src.options().device(c10::kCPU));
      read_to_host(*dense_buffer(src), host.storage().mutable_data(), host.storage().nbytes(), storage_of(src).origin);
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

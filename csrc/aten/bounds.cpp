// Debug eager (TORCH_TPU_LAUNCH_BLOCKING=1) bounds checks. XLA clamps out-of-range indices
// silently; in Debug mode the index tensors are read on the host first and a bad index raises
// the error CPU PyTorch raises for that op.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "aten/dispatch.h"

namespace tpu::aten {
namespace {

// Largest and smallest index values, on the host.
std::pair<int64_t, int64_t> extremes(const at::Tensor& index) {
  at::Tensor host = index.cpu().to(at::kLong);
  return {host.min().item<int64_t>(), host.max().item<int64_t>()};
}

// `index` must address [-size, size) (negative wraps) or [0, size) when !allow_negative.
void check(const at::Tensor& index, int64_t size, int64_t dim, bool index_error, bool allow_negative) {
  if (!index.defined() || index.numel() == 0 || index.scalar_type() == at::kBool || index.scalar_type() == at::kByte)
    return;
  auto [lo, hi] = extremes(index);
  int64_t bad = hi >= size ? hi : (lo < (allow_negative ? -size : 0) ? lo : 0);
  if (hi < size && lo >= (allow_negative ? -size : 0)) return;
  if (index_error)
    TORCH_CHECK_INDEX(false, "index ", bad, " is out of bounds for dimension ", dim, " with size ", size);
  TORCH_CHECK(false, "index ", bad, " is out of bounds for dimension ", dim, " with size ", size);
}

int64_t wrap(int64_t dim, int64_t rank) { return dim < 0 ? dim + std::max<int64_t>(rank, 1) : dim; }

}  // namespace

void check_bounds(const std::string& name, c10::ArrayRef<c10::IValue> args) {
  std::string base = name.substr(0, name.find('.'));
  if (base == "index" || base == "index_put_" || base == "index_put" || base == "_index_put_impl_") {
    const at::Tensor& self = args[0].toTensor();
    int64_t dim = 0;
    for (const c10::IValue& v : args[1].toListRef()) {
      if (!v.isNone()) {
        const at::Tensor& idx = v.toTensor();
        if (idx.scalar_type() == at::kBool || idx.scalar_type() == at::kByte) { dim += idx.dim(); continue; }
        check(idx, self.size(dim), dim, true, true);
      }
      ++dim;
    }
  } else if (base == "gather" || base == "scatter" || base == "scatter_add" || base == "scatter_reduce") {
    const at::Tensor& self = args[0].toTensor();
    int64_t dim = wrap(args[1].toInt(), self.dim());
    check(args[2].toTensor(), self.dim() ? self.size(dim) : 1, dim, false, false);
  } else if (base == "index_select" || base == "index_add" || base == "index_copy" || base == "index_fill") {
    const at::Tensor& self = args[0].toTensor();
    int64_t dim = wrap(args[1].toInt(), self.dim());
    const at::Tensor& idx = args[2].toTensor();
    int64_t size = self.dim() ? self.size(dim) : 1;
    if (idx.numel() == 0) return;
    auto [lo, hi] = extremes(idx);
    TORCH_CHECK_INDEX(lo >= -size && hi < size, "index out of range in self");
  } else if (base == "embedding") {
    const at::Tensor& weight = args[0].toTensor();
    const at::Tensor& idx = args[1].toTensor();
    if (idx.numel() == 0) return;
    auto [lo, hi] = extremes(idx);
    TORCH_CHECK_INDEX(lo >= 0 && hi < weight.size(0), "index out of range in self");
  }
}

}  // namespace tpu::aten

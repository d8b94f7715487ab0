// Tensors are views (dtype, sizes, strides, offset) of a flat device buffer (their storage).
// These two lowerings are how every program reads a view and writes into one.
#pragma once
#include "hlo/builder.h"

namespace tpu::lower {

struct View {
  DType dtype;
  hlo::Dims sizes, strides;
  int64_t offset = 0;
  int64_t numel() const;
  bool contiguous() const;
  // True when the view is its whole base: same dtype and element count, contiguous, offset 0.
  bool covers(const hlo::TensorType& base) const;
};

// The dims of a dense layout whose strides are a permutation of row-major ones (channels_last, a
// transpose), outermost first; empty when the layout is row-major or not dense. A result laid out so
// is its row-major value transposed by this order.
hlo::Dims dense_order(const hlo::Dims& sizes, const hlo::Dims& strides);

// The view's elements, shaped `sizes` and of its compute_dtype, read from the flat `base`. With `offset` (an s64 scalar) the
// view starts there instead of at v.offset, so one program serves every position of the view
// (x[i] in a loop, a KV-cache write at `pos`).
hlo::Value read_view(hlo::Builder& b, hlo::Value base, const View& v, const hlo::Value* offset = nullptr);
// `x` (of compute_dtype(dtype)) as a storage of `dtype` holds it (storage_dtype: complex32 as u32).
hlo::Value to_storage(hlo::Builder& b, hlo::Value x, DType dtype);
// `base` with the view's elements replaced by `update` (shaped `sizes`, of the view's compute dtype).
hlo::Value write_view(hlo::Builder& b, hlo::Value base, hlo::Value update, const View& v,
                      const hlo::Value* offset = nullptr);

}  // namespace tpu::lower

#include "lower/view.h"

#include <algorithm>
#include <numeric>

namespace tpu::lower {
using hlo::Dims;
using hlo::TensorType;
using hlo::Value;

int64_t View::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool View::contiguous() const {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] != 1 && strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

bool View::covers(const TensorType& base) const {
  return dtype == base.dtype && offset == 0 && numel() == base.numel() && contiguous();
}

Dims dense_order(const Dims& sizes, const Dims& strides) {
  // size-1 dims never step, so their strides say nothing: they keep their places, the others are
  // ordered by stride among the remaining places
  if (strides.size() != sizes.size() || std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return {};
  Dims stepping;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1) stepping.push_back(static_cast<int64_t>(d));
  std::stable_sort(stepping.begin(), stepping.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  Dims order(sizes.size());
  bool permuted = false;
  for (size_t d = 0, next = 0; d < sizes.size(); ++d) {
    order[d] = sizes[d] == 1 ? static_cast<int64_t>(d) : stepping[next++];
    permuted |= order[d] != static_cast<int64_t>(d);
  }
  int64_t expected = 1;
  for (size_t i = stepping.size(); i-- > 0;) {
    if (strides[stepping[i]] != expected) return {};
    expected *= sizes[stepping[i]];
  }
  return permuted ? order : Dims{};
}

namespace {

// The view's start: the runtime operand when there is one, else the constant v.offset.
Value start_of(hlo::Builder& b, const View& v, const Value* offset) {
  return offset ? *offset : b.splat(hlo::scalar(DType::S64), static_cast<double>(v.offset));
}

// The flat index of every element of the view, as an s64 tensor shaped `sizes`.
Value flat_indices(hlo::Builder& b, const View& v, const Value* offset) {
  TensorType t{DType::S64, v.sizes};
  Value idx = b.broadcast_in_dim(start_of(b, v, offset), v.sizes, {});
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] > 1 && v.strides[d] != 0)
      idx = b.add(idx, b.mul(b.iota(t, d), b.splat(t, static_cast<double>(v.strides[d]))));
  return b.reshape(idx, [&] { Dims d = v.sizes; d.push_back(1); return d; }());
}

// A dense permuted layout: the non-trivial dims, ordered by stride, tile [offset, offset+span).
// Returns the permutation (outer to inner) or empty when the view is not such a layout.
std::vector<size_t> dense_order(const View& v) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] > 1) {
      if (v.strides[d] <= 0) return {};
      dims.push_back(d);
    }
  std::sort(dims.begin(), dims.end(), [&](size_t a, size_t c) { return v.strides[a] > v.strides[c]; });
  int64_t expected = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    if (v.strides[dims[k]] != expected) return {};
    expected *= v.sizes[dims[k]];
  }
  return dims.empty() ? std::vector<size_t>{SIZE_MAX} : dims;
}

// The flat `base` reinterpreted as a flat array of `dtype` (same bytes, like Tensor.view(dtype)).
// StableHLO cannot bitcast complex or i1: complex goes through its component type (real and imaginary
// parts interleaved, as in memory), bool through u8.
Value as_view_dtype(hlo::Builder& b, Value base, DType dtype) {
  DType from = base.type.dtype;
  if (from == dtype) return base;
  if (dtype == DType::C32) {  // its u32 storage, each element's halves [real, imag] computed as c64
    Value halves = b.bitcast_convert(as_view_dtype(b, base, DType::U32), DType::F16);  // [n] -> [n, 2]
    int64_t n = halves.type.dims[0];
    auto part = [&](int64_t k) { return b.convert(b.reshape(b.slice(halves, {0, k}, {n, k + 1}), {n}), DType::F32); };
    return b.binary(hlo::Op::Complex, part(0), part(1));
  }
  if (info(from).is_complex) {  // [n] complex -> [2n] of its component type, then on from there
    int64_t len = base.type.dims[0];
    auto part = [&](hlo::Op op) { return b.reshape(b.unary(op, base), {len, 1}); };
    Value parts = b.reshape(b.concatenate({part(hlo::Op::Real), part(hlo::Op::Imag)}, 1), {2 * len});
    return as_view_dtype(b, parts, dtype);
  }
  if (info(dtype).is_complex) {  // the component type's [2m] elements, paired into [m] complex
    Value flat = as_view_dtype(b, base, real_part(dtype));
    int64_t len = flat.type.dims[0];
    if (len % 2) throw hlo::Error("view(dtype): an odd number of elements does not divide into complex elements");
    Value pairs = b.reshape(flat, {len / 2, 2});
    auto part = [&](int64_t k) { return b.reshape(b.slice(pairs, {0, k}, {len / 2, k + 1}), {len / 2}); };
    return b.binary(hlo::Op::Complex, part(0), part(1));
  }
  if (base.type.dtype == DType::Pred) base = b.convert(base, DType::U8);
  DType to = dtype == DType::Pred ? DType::U8 : dtype;
  int64_t from_size = byte_size(base.type.dtype), to_size = byte_size(to), n = base.type.dims[0];
  Value out;
  if (base.type.dtype == to) {
    out = base;
  } else if (from_size == to_size) {
    out = b.bitcast_convert(base, to);
  } else if (from_size > to_size) {  // each element becomes several: [n] -> [n, r] -> [n * r]
    out = b.reshape(b.bitcast_convert(base, to), {n * (from_size / to_size)});
  } else {  // several elements become one: [n] -> [n / r, r] -> [n / r]
    int64_t r = to_size / from_size;
    if (n % r) throw hlo::Error("view(dtype): " + std::to_string(n * from_size) + " bytes do not divide into " +
                                std::to_string(to_size) + "-byte elements");
    out = b.bitcast_convert(b.reshape(base, {n / r, r}), to);
  }
  return dtype == DType::Pred ? b.convert(out, DType::Pred) : out;
}

}  // namespace

Value to_storage(hlo::Builder& b, Value x, DType dtype) {
  if (dtype != DType::C32) return x;
  Dims pair = x.type.dims;
  pair.push_back(1);
  auto half = [&](hlo::Op op) { return b.reshape(b.convert(b.unary(op, x), DType::F16), pair); };
  return b.bitcast_convert(b.concatenate({half(hlo::Op::Real), half(hlo::Op::Imag)}, pair.size() - 1), DType::U32);
}

Value read_view(hlo::Builder& b, Value base, const View& v_in, const Value* offset) {
  base = as_view_dtype(b, base, v_in.dtype);
  View v = v_in;
  v.dtype = compute_dtype(v.dtype);
  if (v.numel() == 0) return b.splat({v.dtype, v.sizes}, 0);
  if (v.covers(base.type)) return b.reshape(base, v.sizes);
  // Stride-0 dims are broadcasts of the same elements: read without them, broadcast after.
  View inner = v;
  Dims kept;
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.strides[d] == 0 && v.sizes[d] > 1) inner.sizes[d] = 1; else kept.push_back(d);
  Value x;
  std::vector<size_t> order = dense_order(inner);
  if (!order.empty()) {
    int64_t span = inner.numel();
    x = offset ? b.dynamic_slice(base, {*offset}, {span}) : b.slice(base, {inner.offset}, {inner.offset + span});
    if (order[0] == SIZE_MAX) {
      x = b.reshape(x, inner.sizes);
    } else {
      Dims sorted_sizes, perm(order.size());
      for (size_t d : order) sorted_sizes.push_back(inner.sizes[d]);
      x = b.reshape(x, sorted_sizes);
      // position k of the result holds sorted dim order[k]; transpose back to increasing dims
      std::vector<size_t> by_dim(order);
      std::sort(by_dim.begin(), by_dim.end());
      for (size_t k = 0; k < by_dim.size(); ++k)
        perm[k] = std::find(order.begin(), order.end(), by_dim[k]) - order.begin();
      x = b.reshape(b.transpose(x, perm), inner.sizes);
    }
  } else {
    hlo::GatherDims g;
    g.collapsed_slice_dims = {0};
    g.start_index_map = {0};
    g.index_vector_dim = static_cast<int64_t>(inner.sizes.size());
    x = b.gather(base, flat_indices(b, inner, offset), g, {1});
  }
  if (inner.sizes == v.sizes) return x;
  Dims all(v.sizes.size());
  std::iota(all.begin(), all.end(), 0);
  return b.broadcast_in_dim(x, v.sizes, all);
}

Value write_view(hlo::Builder& b, Value base, Value update, const View& v_in, const Value* offset) {
  DType base_dtype = base.type.dtype;
  Value flat = as_view_dtype(b, base, v_in.dtype);
  if (v_in.numel() == 0) return base;
  View v = v_in;
  v.dtype = compute_dtype(v.dtype);
  Value result;
  if (v.covers(flat.type)) {
    result = b.reshape(update, flat.type.dims);
  } else if (v.contiguous()) {
    result = b.dynamic_update_slice(flat, b.reshape(update, {v.numel()}), {start_of(b, v, offset)});
  } else {
    hlo::ScatterDims s;
    s.inserted_window_dims = {0};
    s.scatter_dims_to_operand_dims = {0};
    s.index_vector_dim = static_cast<int64_t>(v.sizes.size());
    result = b.scatter({flat}, flat_indices(b, v, offset), {update}, s,
                       [](hlo::Builder&, const hlo::Values& a) { return hlo::Values{a[1]}; },
                       false, true)[0];
  }
  return as_view_dtype(b, to_storage(b, result, v_in.dtype), base_dtype);
}

}  // namespace tpu::lower

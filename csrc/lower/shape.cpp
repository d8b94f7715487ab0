// Shape ops that move elements without looking at their values: concatenation, flips and rolls,
// triangles, constant padding, and the *_scatter ops that write a view of a fresh tensor.
#include <algorithm>
#include <cstdint>

#include "lower/helpers.h"
#include "lower/view.h"

namespace tpu::lower {
namespace {
using hlo::Cmp;

Dims contiguous_strides(const Dims& sizes) {
  Dims s(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) s[d - 1] = s[d] * std::max<int64_t>(sizes[d], 1);
  return s;
}

// A view of a contiguous tensor shaped `sizes`, with dims `drop` removed (select, diagonal).
View sub_view(DType t, const Dims& sizes, std::initializer_list<int64_t> drop) {
  View v{t, {}, {}, 0};
  Dims st = contiguous_strides(sizes);
  for (size_t d = 0; d < sizes.size(); ++d)
    if (std::find(drop.begin(), drop.end(), static_cast<int64_t>(d)) == drop.end()) {
      v.sizes.push_back(sizes[d]);
      v.strides.push_back(st[d]);
    }
  return v;
}

// `self` (contiguous) with the elements of view `v` replaced by `src`.
Value write_into(Builder& b, Value self, Value src, const View& v) {
  Value flat = b.reshape(self, {self.type.numel()});
  return b.reshape(write_view(b, flat, convert(b, src, self.type.dtype), v), self.type.dims);
}

Values cat(Ctx& c) {
  const TensorType& o = c.out[0];
  Values xs;
  for (Value x : c.vs(0))  // empty tensors add nothing (and legacy 1-D empties have another rank)
    if (x.type.numel() > 0) xs.push_back(convert(c.b, x, o.dtype));
  if (xs.empty()) return {zeros(c.b, o)};  // only legacy empties: `dim` may be beyond their rank
  return {xs.size() == 1 ? xs[0] : c.b.concatenate(xs, wrap_dim(c.i(1, 0), o.rank()))};
}

// cat onto a sequence kept with spare capacity (aten/append.cpp), flat: (base storage, pieces..., its
// length) -> the base resized to the result's capacity, the pieces written after its first `length`
// elements. The length is a runtime operand, so one program serves every length of the sequence.
Values cat_append(Ctx& c) {
  const TensorType& o = c.out[0];
  Values xs = c.vs(0);
  Value base = convert(c.b, xs[0], o.dtype);
  int64_t have = base.type.dims[0], capacity = o.dims[0];
  base = have >= capacity ? c.b.slice(base, {0}, {capacity})
                          : c.b.pad(base, zeros(c.b, {o.dtype, {}}), {0}, {capacity - have});
  Values pieces;
  for (size_t k = 1; k < xs.size(); ++k)
    if (xs[k].type.numel() > 0) pieces.push_back(c.b.reshape(convert(c.b, xs[k], o.dtype), {xs[k].type.numel()}));
  if (pieces.empty()) return {base};
  return {c.b.dynamic_update_slice(base, pieces.size() == 1 ? pieces[0] : c.b.concatenate(pieces, 0), {c.v(1)})};
}

Values flip(Ctx& c) {
  Value x = c.v(0);
  return {c.b.reverse(x, reduce_dims(c.ints(1), x.type.rank(), false))};
}

Value roll_dim(Builder& b, Value x, int64_t d, int64_t shift) {
  int64_t n = x.type.dims[d];
  int64_t s = n ? ((shift % n) + n) % n : 0;
  if (s == 0) return x;
  Dims start(x.type.rank(), 0), mid = x.type.dims, end = x.type.dims;
  mid[d] = n - s;
  Value head = b.slice(x, start, mid);
  start[d] = n - s;
  return b.concatenate({b.slice(x, start, end), head}, d);
}

Values roll(Ctx& c) {
  Value x = c.v(0);
  const auto &shifts = c.ints(1), &dims = c.ints(2);
  if (dims.empty())  // roll the flattened tensor
    return {c.b.reshape(roll_dim(c.b, c.b.reshape(x, {x.type.numel()}), 0, shifts.at(0)), x.type.dims)};
  for (size_t k = 0; k < dims.size(); ++k) x = roll_dim(c.b, x, wrap_dim(dims[k], x.type.rank()), shifts.at(k));
  return {x};
}

// tril keeps col - row <= diagonal, triu keeps col - row >= diagonal (the last two dims).
Values triangle(Ctx& c, Cmp keep) {
  const TensorType& o = c.out[0];
  int64_t r = o.rank();
  TensorType t{DType::S64, {o.dims[r - 2], o.dims[r - 1]}};
  Value diff = c.b.sub(c.b.iota(t, 1), c.b.iota(t, 0));
  Value mask = c.b.compare(diff, c.b.splat(t, static_cast<double>(c.i(1, 0))), keep);
  mask = c.b.broadcast_in_dim(mask, o.dims, {r - 2, r - 1});
  return {c.b.select(mask, convert(c.b, c.v(0), o.dtype), zeros(c.b, o))};
}
Values tril(Ctx& c) { return triangle(c, Cmp::LE); }
Values triu(Ctx& c) { return triangle(c, Cmp::GE); }

// pad lists (low, high) pairs from the last dim backwards; negative entries crop.
Values constant_pad_nd(Ctx& c) {
  Value x = c.v(0);
  const auto& pad = c.ints(1);
  int64_t r = x.type.rank();
  Dims lo(r, 0), hi(r, 0);
  for (size_t k = 0; 2 * k + 1 < pad.size(); ++k) {
    lo[r - 1 - k] = pad[2 * k];
    hi[r - 1 - k] = pad[2 * k + 1];
  }
  Value value = c.has(2) ? convert(c.b, c.v(2), x.type.dtype) : zeros(c.b, hlo::scalar(x.type.dtype));
  return {c.b.pad(x, value, lo, hi)};
}

// The views that slice / select / diagonal take of a contiguous tensor of type t.
View slice_of(const TensorType& t, int64_t dim, int64_t start, int64_t end, int64_t step) {
  dim = wrap_dim(dim, t.rank());
  int64_t n = t.dims[dim];
  auto norm = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  start = norm(start);
  end = std::max(start, norm(end));
  View v{t.dtype, t.dims, contiguous_strides(t.dims), 0};
  v.sizes[dim] = (end - start + step - 1) / step;
  v.offset = start * v.strides[dim];
  v.strides[dim] *= step;
  return v;
}

View select_of(const TensorType& t, int64_t dim, int64_t index) {
  dim = wrap_dim(dim, t.rank());
  View v = sub_view(t.dtype, t.dims, {dim});
  v.offset = (index < 0 ? index + t.dims[dim] : index) * contiguous_strides(t.dims)[dim];
  return v;
}

View diagonal_of(const TensorType& t, int64_t off, int64_t d1, int64_t d2) {
  d1 = wrap_dim(d1, t.rank());
  d2 = wrap_dim(d2, t.rank());
  int64_t n1 = t.dims[d1], n2 = t.dims[d2];
  Dims st = contiguous_strides(t.dims);
  View v = sub_view(t.dtype, t.dims, {d1, d2});
  v.sizes.push_back(std::max<int64_t>(0, off >= 0 ? std::min(n1, n2 - off) : std::min(n1 + off, n2)));
  v.strides.push_back(st[d1] + st[d2]);
  v.offset = off >= 0 ? off * st[d2] : -off * st[d1];
  return v;
}

// slice_scatter(self, src, dim, start, end, step) and the others: self with the view's elements replaced by src
Values slice_scatter(Ctx& c) {
  Value x = c.v(0);
  return {write_into(c.b, x, c.v(1), slice_of(x.type, c.i(2, 0), c.i(3, 0), c.i(4, INT64_MAX), c.i(5, 1)))};
}
Values select_scatter(Ctx& c) {  // (self, src, dim, index)
  Value x = c.v(0);
  return {write_into(c.b, x, c.v(1), select_of(x.type, c.i(2), c.i(3)))};
}
Values diagonal_scatter(Ctx& c) {  // (self, src, offset, dim1, dim2)
  Value x = c.v(0);
  return {write_into(c.b, x, c.v(1), diagonal_of(x.type, c.i(2, 0), c.i(3, 0), c.i(4, 1)))};
}
// as_strided_scatter(self, src, size, stride, storage_offset), strides of self's contiguous layout
Values as_strided_scatter(Ctx& c) {
  Value x = c.v(0);
  return {write_into(c.b, x, c.v(1), View{x.type.dtype, c.ints(2), c.ints(3), c.i(4, 0)})};
}

// The view ops' backward: the gradient written into zeros of the input's shape.
Values slice_backward(Ctx& c) {  // (grad, input_sizes, dim, start, end, step)
  const TensorType& o = c.out[0];
  return {write_into(c.b, zeros(c.b, o), c.v(0), slice_of(o, c.i(2), c.i(3), c.i(4), c.i(5)))};
}
Values select_backward(Ctx& c) {  // (grad, input_sizes, dim, index)
  const TensorType& o = c.out[0];
  return {write_into(c.b, zeros(c.b, o), c.v(0), select_of(o, c.i(2), c.i(3)))};
}
Values diagonal_backward(Ctx& c) {  // (grad, input_sizes, offset, dim1, dim2)
  const TensorType& o = c.out[0];
  return {write_into(c.b, zeros(c.b, o), c.v(0), diagonal_of(o, c.i(2), c.i(3), c.i(4)))};
}

Values stack(Ctx& c) {
  const TensorType& o = c.out[0];
  if (o.numel() == 0) return {zeros(c.b, o)};
  int64_t dim = wrap_dim(c.i(1, 0), o.rank());
  Values xs;
  for (Value x : c.vs(0)) {
    Dims d = x.type.dims;
    d.insert(d.begin() + dim, 1);
    xs.push_back(c.b.reshape(convert(c.b, x, o.dtype), d));
  }
  return {xs.size() == 1 ? xs[0] : c.b.concatenate(xs, dim)};
}

// repeat(self, repeats): broadcast to [r0, d0, r1, d1, ...] (self's dims padded with leading 1s), then merge pairs
Values repeat(Ctx& c) {
  const TensorType& o = c.out[0];
  Value x = c.v(0);
  if (o.numel() == 0) return {zeros(c.b, o)};
  const auto& reps = c.ints(1);
  int64_t pad = static_cast<int64_t>(reps.size()) - x.type.rank();
  Dims pairs, map;
  for (size_t k = 0; k < reps.size(); ++k) {
    pairs.push_back(reps[k]);
    pairs.push_back(static_cast<int64_t>(k) < pad ? 1 : x.type.dims[k - pad]);
  }
  for (int64_t k = 0; k < x.type.rank(); ++k) map.push_back(2 * (k + pad) + 1);
  return {c.b.reshape(c.b.broadcast_in_dim(x, pairs, map), o.dims)};
}

// unfold_backward(grad_in, input_sizes, dim, size, step): the windows' gradients summed into place.
Values unfold_backward(Ctx& c) {
  const TensorType& o = c.out[0];
  int64_t r = o.rank(), dim = wrap_dim(c.i(2), r), step = c.i(4);
  Value g = c.v(0);
  if (g.type.numel() == 0) return {zeros(c.b, o)};
  if (r == 0) return {c.b.reshape(g, o.dims)};  // a 0-d input has one window of size 1
  Dims st = contiguous_strides(o.dims);
  // the flat input position of every element of grad_in (shaped sizes + [size])
  TensorType t{DType::S64, g.type.dims};
  Value idx = c.b.splat(t, 0);
  for (int64_t d = 0; d <= r; ++d) {
    int64_t stride = d == r ? st[dim] : d == dim ? st[dim] * step : st[d];
    idx = c.b.add(idx, c.b.mul(c.b.iota(t, d), c.b.splat(t, static_cast<double>(stride))));
  }
  Dims idx_shape = g.type.dims;
  idx_shape.push_back(1);
  hlo::ScatterDims s;
  s.inserted_window_dims = {0};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = r + 1;
  DType ct = compute_type(o.dtype);
  Value flat = zeros(c.b, {ct, {o.numel()}});
  Value sum = c.b.scatter({flat}, c.b.reshape(idx, idx_shape), {convert(c.b, g, ct)}, s,
                          [](Builder& rb, const Values& a) { return Values{rb.add(a[0], a[1])}; })[0];
  return {convert(c.b, c.b.reshape(sum, o.dims), o.dtype)};
}

Register r({
    {"cat|cat.out", cat}, {"tpu_cat_append", cat_append}, {"flip|flip.out", flip}, {"roll|roll.out", roll},
    {"tril|tril.out", tril}, {"triu|triu.out", triu}, {"constant_pad_nd|constant_pad_nd.out", constant_pad_nd},
    {"slice_scatter|slice_scatter.out", slice_scatter}, {"select_scatter|select_scatter.out", select_scatter},
    {"diagonal_scatter|diagonal_scatter.out", diagonal_scatter},
    {"as_strided_scatter|as_strided_scatter.out", as_strided_scatter},
    {"unfold_backward|unfold_backward.out", unfold_backward},
    {"slice_backward|slice_backward.out", slice_backward}, {"select_backward|select_backward.out", select_backward},
    {"diagonal_backward|diagonal_backward.out", diagonal_backward},
    {"stack|stack.out", stack}, {"repeat|repeat.out", repeat},
});

}  // namespace
}  // namespace tpu::lower

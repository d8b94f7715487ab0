// Sparse COO tensors on tpu (the SparsePrivateUse1 key): PyTorch's SparseTensorImpl holding dense tpu
// indices [sparse_dim, nnz] and values [nnz, dense dims...]. PyTorch's own device-independent kernels
// manage the metadata; coalesce, to_dense, add/sub, mul, division by a scalar, mm/addmm and sum are built
// from dense tpu ops.
// Unlisted sparse ops raise NotImplementedError naming the layout (register.cpp's fallback).
#include <ATen/ATen.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_to_sparse_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

namespace tpu::aten {
namespace {

// Row-major linear position of each nonzero's sparse index: [nnz] int64.
at::Tensor linear_index(const at::Tensor& self) {
  const at::Tensor& indices = self._indices();
  int64_t sd = self.sparse_dim();
  std::vector<int64_t> strides(sd, 1);
  for (int64_t i = sd - 2; i >= 0; --i) strides[i] = strides[i + 1] * self.size(i + 1);
  at::Tensor s = at::tensor(strides, at::kLong).to(indices.device()).unsqueeze(1);
  return (indices * s).sum(0);
}

std::vector<int64_t> sparse_sizes(const at::Tensor& self) {
  auto sizes = self.sizes();
  return {sizes.begin(), sizes.begin() + self.sparse_dim()};
}

at::Tensor make_sparse(const at::Tensor& like, const at::Tensor& indices, const at::Tensor& values, bool coalesced) {
  return at::_sparse_coo_tensor_with_dims_and_tensors(like.sparse_dim(), like.dense_dim(), like.sizes(), indices, values,
                                                      values.options().layout(at::kSparse), coalesced);
}

// Duplicates summed, indices sorted. The distinct positions are data-dependent: found on the host (a sync).
at::Tensor coalesce_sparse(const at::Tensor& self) {
  if (self._nnz() < 2 || self.is_coalesced()) return make_sparse(self, self._indices().clone(), self._values().clone(), true);
  at::Tensor linear = linear_index(self);
  auto [positions, inverse, counts] = at::_unique2(linear, /*sorted=*/true, /*return_inverse=*/true, false);
  std::vector<int64_t> vshape = self._values().sizes().vec();
  vshape[0] = positions.size(0);
  at::Tensor values = at::zeros(vshape, self._values().options()).index_add_(0, inverse, self._values());
  std::vector<at::Tensor> rows;
  at::Tensor rest = positions;
  auto sizes = sparse_sizes(self);
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    rows.insert(rows.begin(), at::remainder(rest, sizes[i]));
    rest = at::div(rest, sizes[i], "floor");
  }
  return make_sparse(self, at::stack(rows), values, true);
}

at::Tensor to_dense_sparse(const at::Tensor& self, std::optional<at::ScalarType> dtype, std::optional<bool>) {
  TORCH_CHECK(!dtype, "dtype argument is not supported by sparse_to_dense");
  const at::Tensor& values = self._values();
  std::vector<int64_t> flat = {1};
  for (int64_t s : sparse_sizes(self)) flat[0] *= s;
  for (int64_t i = self.sparse_dim(); i < self.dim(); ++i) flat.push_back(self.size(i));
  at::Tensor dense = at::zeros(flat, values.options());
  if (self._nnz() > 0) dense.index_add_(0, linear_index(self), values);
  return dense.reshape(self.sizes());
}

// self's values at mask's indices (to_sparse's backward): a sparse tensor with mask's indices, self's dtype.
at::Tensor sparse_mask_sparse(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.sizes().equals(self.sizes()), "sparse_mask(): operands have incompatible sizes; self has size ",
              self.sizes(), " but mask has size ", mask.sizes());
  std::vector<int64_t> flat = {1};
  for (int64_t s : sparse_sizes(mask)) flat[0] *= s;
  for (int64_t i = mask.sparse_dim(); i < mask.dim(); ++i) flat.push_back(mask.size(i));
  at::Tensor dense = (self.is_sparse() ? self.to_dense() : self).reshape(flat);
  return make_sparse(mask, mask._indices().clone(), dense.index_select(0, linear_index(mask)), mask.is_coalesced());
}

void check_same_sizes(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.sizes() == b.sizes(), "add: expected 'self' and 'other' to have same size, but self has size ", a.sizes(),
              " while other has size ", b.sizes(), " (FYI: dense-sparse addition does not currently support broadcasting)");
}

// dense += alpha * sparse, in place
at::Tensor& add_sparse_into_dense(at::Tensor& dense, const at::Tensor& sparse, const at::Scalar& alpha) {
  check_same_sizes(dense, sparse);
  at::ScalarType t = at::result_type(dense, sparse);
  TORCH_CHECK(at::canCast(t, dense.scalar_type()), "result type ", t, " can't be cast to the desired output type ",
              dense.scalar_type());
  if (sparse._nnz() == 0) return dense;
  std::vector<int64_t> flat = {-1};
  for (int64_t i = sparse.sparse_dim(); i < sparse.dim(); ++i) flat.push_back(sparse.size(i));
  at::Tensor values = sparse._values().to(dense.scalar_type());
  at::Tensor sum = dense.reshape(flat).index_add(0, linear_index(sparse), values, alpha);
  return dense.copy_(sum.reshape(dense.sizes()));
}

at::Tensor add_sparse(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!self.is_sparse()) {
    at::Tensor out = self.to(at::result_type(self, other), /*non_blocking=*/false, /*copy=*/true);
    return add_sparse_into_dense(out, other, alpha);
  }
  TORCH_CHECK(other.is_sparse(), "add(sparse, dense) is not supported. Use add(dense, sparse) instead.");
  check_same_sizes(self, other);
  TORCH_CHECK(self.sparse_dim() == other.sparse_dim() && self.dense_dim() == other.dense_dim(),
              "add: expected 'self' and 'other' to have the same sparse and dense dims");
  at::ScalarType t = at::result_type(self, other);
  at::Tensor indices = at::cat({self._indices(), other._indices()}, 1);
  at::Tensor values = at::cat({self._values().to(t), other._values().to(t).mul(alpha)}, 0);
  return make_sparse(self, indices, values, false);
}

// An in-place op's result `r` becomes self's contents, cast to self's dtype where CPU allows it.
at::Tensor& assign_sparse(at::Tensor& self, const at::Tensor& r) {
  TORCH_CHECK(at::canCast(r.scalar_type(), self.scalar_type()), "result type ", r.scalar_type(),
              " can't be cast to the desired output type ", self.scalar_type());
  at::native::sparse_resize_and_clear_(self, r.sizes(), r.sparse_dim(), r.dense_dim());
  static_cast<at::SparseTensorImpl*>(self.unsafeGetTensorImpl())
      ->set_indices_and_values_unsafe(r._indices(), r._values().to(self.scalar_type()));
  self._coalesced_(r.is_coalesced());
  return self;
}

at::Tensor& add_sparse_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!self.is_sparse()) return add_sparse_into_dense(self, other, alpha);
  return assign_sparse(self, add_sparse(self, other, alpha));
}

at::Tensor sub_sparse(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  at::native::sub_check(self, other);
  return add_sparse(self, other, -alpha);
}

at::Tensor& sub_sparse_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  at::native::sub_check(self, other);
  return add_sparse_(self, other, -alpha);
}

// sparse [n, k] @ dense [k, m]: each nonzero scales a row of the dense matrix into its output row.
at::Tensor mm_sparse(const at::Tensor& self, const at::Tensor& mat2) {
  TORCH_CHECK_NOT_IMPLEMENTED(self.is_sparse() && !mat2.is_sparse(), "tpu: aten::mm: tensors of layout torch.sparse_coo "
                              "are supported on tpu only as sparse @ dense");
  TORCH_CHECK(self.dim() == 2 && mat2.dim() == 2 && self.dense_dim() == 0, "mm: expected 2-D matrices, got ", self.dim(),
              "-D and ", mat2.dim(), "-D");
  TORCH_CHECK(self.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (", self.size(0), "x",
              self.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  at::ScalarType t = at::result_type(self, mat2);
  at::Tensor out = at::zeros({self.size(0), mat2.size(1)}, mat2.options().dtype(t));
  if (self._nnz() == 0) return out;
  const at::Tensor& indices = self._indices();
  at::Tensor rows = mat2.to(t).index_select(0, indices[1]) * self._values().to(t).unsqueeze(1);
  return out.index_add_(0, indices[0], rows);
}

at::Tensor addmm_sparse(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  at::Tensor product = mm_sparse(mat1, mat2).mul(alpha);
  if (beta.toComplexDouble() == 0.0) return product;  // self's NaNs ignored, as on CPU
  return product.add((self.is_sparse() ? self.to_dense() : self).mul(beta));
}

// `values` (op) a 0-d dense tensor or a Python number; a Python number stays one, so that it does not
// promote float32 values to its float64.
template <typename Op>
at::Tensor by_scalar(const at::Tensor& values, const at::Tensor& scale, Op op) {
  if (scale.unsafeGetTensorImpl()->is_wrapped_number()) return op(values, scale.item());
  return op(values, scale.device() == values.device() ? scale : scale.to(values.device()));
}

// sparse * scalar (a 0-d tensor or a Python number) scales the values and keeps the pattern; an
// elementwise product (sparse or dense other) is the dense product's nonzeros, the pattern's intersection.
at::Tensor mul_sparse(const at::Tensor& self, const at::Tensor& other) {
  const at::Tensor& sparse = self.is_sparse() ? self : other;
  const at::Tensor& scale = self.is_sparse() ? other : self;
  if (!scale.is_sparse() && scale.dim() == 0)
    return make_sparse(sparse, sparse._indices().clone(),
                       by_scalar(sparse._values(), scale, [](const at::Tensor& v, const auto& k) { return v.mul(k); }),
                       sparse.is_coalesced());
  at::Tensor product = (self.is_sparse() ? self.to_dense() : self).mul(other.is_sparse() ? other.to_dense() : other);
  return product.to_sparse(sparse.sparse_dim());
}

at::Tensor& mul_sparse_(at::Tensor& self, const at::Tensor& other) {
  if (!self.is_sparse()) return self.mul_(other.to_dense());
  return assign_sparse(self, mul_sparse(self, other));
}

at::Tensor mul_scalar_sparse(const at::Tensor& self, const at::Scalar& other) {
  return make_sparse(self, self._indices().clone(), self._values().mul(other), self.is_coalesced());
}

// Sparse division only by a scalar (a 0-d dense tensor or a Python number): the values divided.
at::Tensor div_sparse(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.is_sparse() && !other.is_sparse() && other.dim() == 0,
              "Sparse division requires a scalar or zero-dim dense tensor divisor (got shape ", other.sizes(),
              " for divisor)");
  return make_sparse(self, self._indices().clone(),
                     by_scalar(self._values(), other, [](const at::Tensor& v, const auto& k) { return v.div(k); }),
                     self.is_coalesced());
}

at::Tensor& div_sparse_(at::Tensor& self, const at::Tensor& other) { return assign_sparse(self, div_sparse(self, other)); }

at::Tensor sum_sparse(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return self._values().sum(dtype);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(at::native::new_with_dims_sparse));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse_symint));
  m.impl("sparse_resize_and_clear_", TORCH_FN(at::native::sparse_resize_and_clear_));
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
  m.impl("clone", TORCH_FN(at::native::clone_sparse));
  m.impl("zero_", TORCH_FN(at::native::zero_sparse_));
  m.impl("_coalesce", TORCH_FN(coalesce_sparse));
  m.impl("_to_dense", TORCH_FN(to_dense_sparse));
  m.impl("add.Tensor", TORCH_FN(add_sparse));
  m.impl("add_.Tensor", TORCH_FN(add_sparse_));
  m.impl("mm", TORCH_FN(mm_sparse));
  m.impl("addmm", TORCH_FN(addmm_sparse));
  m.impl("sum", TORCH_FN(sum_sparse));
  m.impl("sparse_mask", TORCH_FN(sparse_mask_sparse));
  m.impl("mul.Tensor", TORCH_FN(mul_sparse));
  m.impl("mul.Scalar", TORCH_FN(mul_scalar_sparse));
  m.impl("mul_.Tensor", TORCH_FN(mul_sparse_));
  m.impl("sub.Tensor", TORCH_FN(sub_sparse));
  m.impl("sub_.Tensor", TORCH_FN(sub_sparse_));
  m.impl("div.Tensor", TORCH_FN(div_sparse));
  m.impl("div_.Tensor", TORCH_FN(div_sparse_));
}

// dense tpu -> sparse: PyTorch's device-independent conversion (nonzero, then index), on dense tpu ops
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_to_sparse.sparse_dim", static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(at::native::dense_to_sparse));
  m.impl("_to_sparse", static_cast<at::Tensor (*)(const at::Tensor&, std::optional<at::Layout>, at::OptionalIntArrayRef,
                                                  std::optional<int64_t>)>(at::native::dense_to_sparse));
}

}  // namespace tpu::aten

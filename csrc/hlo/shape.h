// Shape rules: the result type(s) of each op from its operand types and attributes, per the StableHLO spec.
// Each throws hlo::Error naming the op when the operands are invalid. Nothing here prints; a lowering may call
// these to learn a result type without emitting.
#pragma once
#include "hlo/types.h"

namespace tpu::hlo::shape {

TensorType unary(Op op, const TensorType& x);
TensorType binary(Op op, const TensorType& a, const TensorType& b);
TensorType compare(const TensorType& a, const TensorType& b, Cmp dir, CmpType type);
CmpType compare_type(DType t);  // the type Auto picks: FLOAT, SIGNED or UNSIGNED
TensorType select(const TensorType& pred, const TensorType& on_true, const TensorType& on_false);
TensorType clamp(const TensorType& lo, const TensorType& x, const TensorType& hi);
TensorType convert(const TensorType& x, DType to);
TensorType bitcast_convert(const TensorType& x, DType to);
void constant(const TensorType& t, size_t nbytes);  // nbytes: all elements, or one (splat)
void iota(const TensorType& t, int64_t dim);

TensorType broadcast_in_dim(const TensorType& x, const Dims& out_dims, const Dims& broadcast_dims);
TensorType reshape(const TensorType& x, const Dims& dims);
TensorType transpose(const TensorType& x, const Dims& perm);
TensorType reverse(const TensorType& x, const Dims& dims);
TensorType slice(const TensorType& x, const Dims& start, const Dims& limit, const Dims& strides);
TensorType dynamic_slice(const TensorType& x, const std::vector<TensorType>& starts, const Dims& sizes);
TensorType dynamic_update_slice(const TensorType& x, const TensorType& update, const std::vector<TensorType>& starts);
TensorType concatenate(const std::vector<TensorType>& xs, int64_t dim);
TensorType pad(const TensorType& x, const TensorType& pad_value, const Dims& low, const Dims& high,
               const Dims& interior);

std::vector<TensorType> reduce(const std::vector<TensorType>& inputs, const std::vector<TensorType>& inits,
                               const Dims& dims);
std::vector<TensorType> reduce_window(const std::vector<TensorType>& inputs, const std::vector<TensorType>& inits,
                                      const Window& w);
TensorType select_and_scatter(const TensorType& operand, const TensorType& source, const TensorType& init,
                              const Window& w);
std::vector<TensorType> sort(const std::vector<TensorType>& inputs, int64_t dim);
TensorType dot_general(const TensorType& lhs, const TensorType& rhs, const DotDims& d,
                       std::optional<DType> result_dtype = {});
TensorType convolution(const TensorType& lhs, const TensorType& rhs, const ConvConfig& c);
TensorType gather(const TensorType& operand, const TensorType& indices, const GatherDims& d, const Dims& slice_sizes);
std::vector<TensorType> scatter(const std::vector<TensorType>& inputs, const TensorType& indices,
                                const std::vector<TensorType>& updates, const ScatterDims& d);
std::vector<TensorType> rng_bit_generator(const TensorType& state, RngAlgorithm alg, const TensorType& out);
// FFT over the trailing fft_length.size() (1 to 3) dims; RFFT: f32/f64 -> complex, IRFFT: complex -> real.
TensorType fft(const TensorType& x, FftType type, const Dims& fft_length);

// Region signatures: the scalar types a body receives for the given operand element types.
std::vector<TensorType> scalars(const std::vector<TensorType>& ts);  // tensor<E> for each
// Window with defaults filled in for a rank; throws (naming op) on wrong sizes or non-positive values.
Window full_window(Op op, const Window& w, int64_t rank);

}  // namespace tpu::hlo::shape

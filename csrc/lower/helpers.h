// Family helpers that keep lowering rules to a few lines: dtype conversion, numpy broadcasting,
// elementwise application in the result type, constants, reductions.
#pragma once
#include <functional>
#include <vector>

#include "lower/rule.h"

namespace tpu::lower {

bool is_float(DType t);
bool is_complex(DType t);
bool is_integral(DType t);  // ints and pred
// PyTorch computes half and bfloat16 math in float32 ("opmath") and rounds the result.
DType compute_type(DType t);

Value convert(Builder& b, Value x, DType t);             // no-op when already t
Value broadcast_to(Builder& b, Value x, const Dims& shape);  // right-aligned, like torch
Value scalar_like(Builder& b, double v, const TensorType& t);  // a constant of t's dtype and shape
Value zeros(Builder& b, const TensorType& t);
Value is_nan(Builder& b, Value x);  // x != x

// for (k = from; k != to; k += step) state = f(k, state): a while loop, k a scalar of `counter`.
using LoopFn = std::function<Values(Builder&, Value, const Values&)>;
Values loop(Builder& b, int64_t from, int64_t to, int64_t step, Values state, const LoopFn& f,
            DType counter = DType::S32);
inline Values loop(Builder& b, int64_t n, Values state, const LoopFn& f, DType counter = DType::S32) {
  return loop(b, 0, n, 1, std::move(state), f, counter);
}

// Argument `i` converted to `t` and broadcast to `shape`.
Value operand(Ctx& c, size_t i, DType t, const Dims& shape);
// Argument `i` in the computation type of out[0], broadcast to out[0]'s shape.
Value operand(Ctx& c, size_t i);
// Argument `i` rounded to out[0]'s dtype first, as CPU and CUDA kernels that compute in the tensor's own
// type take a Python scalar (fmod(half, 2.3) divides by 2.3 rounded to half).
Value rounded_operand(Ctx& c, size_t i);
// x (in the compute type) rounded to out[k]'s dtype and back, where a kernel rounds an intermediate.
Value rounded(Ctx& c, Value x, size_t k = 0);
// Rounds a value computed in compute_type back to out[k]'s dtype.
Value result(Ctx& c, Value x, size_t k = 0);

// f(x) for unary ops, f(a, b) for binary ops, over the broadcast arguments 0 (and 1) in the
// computation type of the result.
Values unary(Ctx& c, hlo::Op op);
Values binary(Ctx& c, hlo::Op op);

// max / min propagating NaN, as PyTorch does (XLA CPU's maximum / minimum may drop a NaN).
Value nan_max(Builder& b, Value x, Value y, bool is_max);
// Reduce `x` over `dims` with `op` (add / max / min / multiply / and / or) from `init`; max and min
// propagate NaN.
Value reduce(Builder& b, Value x, const Dims& dims, hlo::Op op, double init);

// Device-side checks (hlo::Check): `bad` (pred) marks failing elements and `value` (same shape, any
// integer type) what the message reports; the runtime raises at the next host sync.
void check(Builder& b, Value bad, Value value, std::string message, bool index_error = true);
// Index values must lie in [-n, n) (or [0, n) when !negative). `message` may say "{}" (the index).
void check_bounds(Builder& b, Value idx, int64_t n, std::string message, bool index_error = true, bool negative = true);
// Normalizes dim lists: negative dims, empty = all dims.
Dims reduce_dims(const std::vector<int64_t>& dims, int64_t rank, bool empty_means_all = true);
int64_t wrap_dim(int64_t d, int64_t rank);
// Reshape `x` (a reduction over `dims` of a rank-`rank` tensor) to keep the reduced dims as 1s.
Value keep_dims(Builder& b, Value x, const Dims& dims, const Dims& full_shape);

Value erf_of(Builder& b, Value x);                   // elementwise.cpp
// sum_k c[k] T_k(s), s = (x - x0 - L) / (x - x0 + L), which maps x in [x0, inf] onto [-1, 1] (Clenshaw's
// recurrence). tools/fit_chebyshev.py computes the coefficients.
Value chebyshev_half_line(Builder& b, Value x, double x0, double L, const std::vector<double>& c);
// erfcx(x) = exp(x^2) erfc(x) and its log for x >= 0, float64-accurate for float64 (elementwise.cpp)
Value erfcx_nonneg(Builder& b, Value ax);
Value log_erfcx_nonneg(Builder& b, Value ax);
// erfinv(x) = x P(w) given w = -log(1 - x^2), Giles's single-precision polynomials (elementwise.cpp)
Value erfinv_giles(Builder& b, Value x, Value w);
// erfinv(x) for |x| < 1/2, to the accuracy of x's type: float64 adds two Newton steps (elementwise.cpp)
Value erfinv_central(Builder& b, Value x);
Value gelu_of(Builder& b, Value x, bool tanh_approx);  // elementwise.cpp

// Image resampling (upsample_*, interpolate) computes in float: the working type for input dtype t.
// Integer inputs other than uint8 images are rejected (hlo::DTypeError), as on CPU and CUDA.
DType resample_type(DType t);
// One axis pass of resampling x (computed in resample_type) into out[0]'s dtype: uint8 images round half
// up and saturate after every pass, as CPU's separable uint8 kernels do; other types pass through.
Value resample_round(Builder& b, Value x, DType out);

double lowest(DType t);   // -inf for floats, the minimum for integers
double highest(DType t);

// a . b (dot_general dims d) with PyTorch's numerics: float32 at torch.set_float32_matmul_precision,
// half types accumulated and returned in float32 (compute_type). linalg.cpp
Value contract(Ctx& c, Value a, Value b, const hlo::DotDims& d);

// The complex conjugate (a real tensor is its own).
Value conj_of(Builder& b, Value x);

// Shorthands of rules: a constant shaped and typed like `like`; a comparison written infix-like.
inline Value K(Builder& b, const Value& like, double v) { return scalar_like(b, v, like.type); }
inline Value cmp(Builder& b, Value x, hlo::Cmp dir, Value y) { return b.compare(x, y, dir); }

// Reduction body over (value, index) pairs: the larger value, NaN first, then the lower index (max pooling,
// argmax-like windows). pool.cpp
Values argmax_pair_body(Builder& r, const Values& a);

}  // namespace tpu::lower

// Vocabulary of the StableHLO emitter: tensor types, SSA values, the op table's keys, enum attributes and the
// dimension-number structs. Torch-free; spellings of all of these live in printer.cpp, shape rules in shape.cpp.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace tpu::hlo {

// Thrown by every shape rule and builder call that would produce invalid StableHLO; the message names the op.
struct Error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
// An op given an element type it does not take (PyTorch's "not implemented for 'Float'").
struct DTypeError : Error {
  using Error::Error;
};

using Dims = std::vector<int64_t>;
using Padding = std::vector<std::pair<int64_t, int64_t>>;  // (low, high) per dimension

struct TensorType {
  DType dtype = DType::F32;
  Dims dims;  // static; empty = rank 0
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t numel() const;
  std::string str() const;  // tensor<2x3xf32>, tensor<f32>
  bool operator==(const TensorType& o) const { return dtype == o.dtype && dims == o.dims; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
};
inline TensorType scalar(DType t) { return {t, {}}; }

// An SSA handle. id < 0 names function argument -id-1 (%argN); scope is the builder (region) that defined it.
struct Value {
  int id = 0;
  int scope = -1;  // -1: not made by a builder
  TensorType type;
  std::string name() const;  // %3, %arg0
};

// Every op the emitter can print. The table in shape.cpp gives each one its name and, for elementwise ops, the
// element types it takes and its result rule.
enum class Op : uint8_t {
  // unary elementwise
  Abs, Neg, Exp, Expm1, Log, Log1p, Sqrt, Rsqrt, Cbrt, Tanh, Logistic, Sine, Cosine, Tan, Floor, Ceil,
  RoundNearestEven, RoundNearestAfz, Sign, Not, Popcnt, IsFinite, Real, Imag, CountLeadingZeros,
  // binary elementwise
  Add, Subtract, Multiply, Divide, Remainder, Power, Maximum, Minimum, Atan2, And, Or, Xor, ShiftLeft,
  ShiftRightArithmetic, ShiftRightLogical, Complex,
  // the rest
  Compare, Select, Clamp, Convert, BitcastConvert, Constant, Iota, BroadcastInDim, Reshape, Transpose, Reverse,
  Slice, DynamicSlice, DynamicUpdateSlice, Concatenate, Pad, Reduce, ReduceWindow, SelectAndScatter, DotGeneral,
  Convolution, Gather, Scatter, Sort, RngBitGenerator, Fft, While, Case, CustomCall, OptimizationBarrier, Return,
  kCount
};
std::string op_name(Op op);  // "stablehlo.add"
int op_arity(Op op);         // 1 or 2 for elementwise ops, 0 otherwise

enum class Cmp : uint8_t { EQ, NE, GE, GT, LE, LT };
enum class CmpType : uint8_t { Auto, Float, TotalOrder, Signed, Unsigned };  // Auto: chosen from the dtype
enum class Precision : uint8_t { Default, High, Highest };
enum class RngAlgorithm : uint8_t { Default, ThreeFry, Philox };
enum class FftType : uint8_t { FFT, IFFT, RFFT, IRFFT };

struct DotDims {
  Dims lhs_batch, rhs_batch, lhs_contracting, rhs_contracting;
};

// Which dimension of each tensor is batch / feature / spatial. parse("b01f", "01io", "b01f") builds NHWC/HWIO.
struct ConvDims {
  int64_t in_batch = 0, in_feature = 1;
  Dims in_spatial;
  int64_t k_in = 1, k_out = 0;
  Dims k_spatial;
  int64_t out_batch = 0, out_feature = 1;
  Dims out_spatial;
  static ConvDims parse(const std::string& lhs, const std::string& rhs, const std::string& out);
};

// Empty vectors mean the defaults: strides and dilations 1, padding 0.
struct ConvConfig {
  ConvDims dims;
  Dims window_strides, lhs_dilation, rhs_dilation;
  Padding padding;
  int64_t feature_group_count = 1, batch_group_count = 1;
  Precision lhs_precision = Precision::Default, rhs_precision = Precision::Default;
  std::optional<DType> result_dtype;  // preferred result element type; default: the operands'
};

// reduce_window / select_and_scatter window; empty vectors mean the defaults (1s, no padding).
struct Window {
  Dims dims, strides, base_dilations, window_dilations;
  Padding padding;
};

struct GatherDims {
  Dims offset_dims, collapsed_slice_dims, operand_batching_dims, start_indices_batching_dims, start_index_map;
  int64_t index_vector_dim = 0;
};

struct ScatterDims {
  Dims update_window_dims, inserted_window_dims, input_batching_dims, scatter_indices_batching_dims,
      scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
};

struct CustomCallOptions {
  std::string backend_config;
  bool has_side_effect = false;
  std::optional<int> api_version;                          // printed only when set
  std::vector<std::pair<std::string, std::string>> extra;  // raw extra attributes, e.g. {"mhlo.sharding", "\"{replicated}\""}
};

}  // namespace tpu::hlo

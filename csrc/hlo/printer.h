// Text spellings for the emitter: every StableHLO attribute, enum and literal is printed here, nowhere else.
// Internal to csrc/hlo.
#pragma once
#include <sstream>
#include <string>

#include "hlo/types.h"

namespace tpu::hlo::print {

template <class... A>
std::string cat(const A&... a) {
  std::ostringstream s;
  (s << ... << a);
  return s.str();
}

std::string list(const Dims& d);                     // [1, 2]
std::string array(const Dims& d);                    // array<i64: 1, 2>
std::string i64(int64_t v);                          // 3 : i64
std::string boolean(bool v);                         // true
std::string string(const std::string& s);            // "escaped"
std::string padding(const Padding& p);               // dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>
std::string cmp(Cmp dir);                            // #stablehlo<comparison_direction LT>
std::string cmp_type(CmpType t);                     // #stablehlo<comparison_type FLOAT>
std::string precision(Precision lhs, Precision rhs); // [#stablehlo<precision DEFAULT>, ...]
std::string rng(RngAlgorithm a);                     // #stablehlo<rng_algorithm THREE_FRY>
std::string fft(FftType t);                          // #stablehlo<fft_type RFFT>
std::string dot(const DotDims& d);                   // #stablehlo.dot<...>
std::string conv(const ConvDims& d);                 // #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>
std::string gather(const GatherDims& d);             // #stablehlo.gather<...>
std::string scatter(const ScatterDims& d);           // #stablehlo.scatter<...>
std::string splat(const TensorType& t, double re, double im);             // dense<1.0e+00> : tensor<2xf32>
std::string dense(const TensorType& t, const void* data, size_t nbytes);  // dense<"0x..."> : tensor<2xf32>

}  // namespace tpu::hlo::print

// Unit tests of the StableHLO emitter (csrc/hlo): printed text, shape rules, and the errors bad operands raise.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "check.h"
#include "hlo/builder.h"
#include "hlo/shape.h"

using namespace tpu;
using namespace tpu::hlo;
using D = DType;

namespace {

TensorType T(D t, Dims d = {}) { return {t, std::move(d)}; }
bool has(const std::string& text, const std::string& needle) {
  if (text.find(needle) != std::string::npos) return true;
  std::cout << "  missing: " << needle << "\n  in: " << text << "\n";
  return false;
}
Body sum = [](Builder& r, const Values& a) { return Values{r.add(a[0], a[1])}; };

// Builds one module: f(module, builder) returns the results; returns the text.
template <class F>
std::string program(F f) {
  Module m;
  m.ret(f(m, m.builder()));
  return m.str();
}

void test_types() {
  CHECK(T(D::F32, {2, 3}).str() == "tensor<2x3xf32>");
  CHECK(T(D::F32).str() == "tensor<f32>");
  CHECK(T(D::C64, {4}).str() == "tensor<4xcomplex<f32>>");
  CHECK(T(D::Pred, {0, 2}).str() == "tensor<0x2xi1>");
  CHECK(T(D::BF16, {1}).numel() == 1 && T(D::U8).numel() == 1 && T(D::U8, {2, 0}).numel() == 0);
  CHECK(op_name(Op::Exp) == "stablehlo.exponential" && op_arity(Op::Add) == 2 && op_arity(Op::Sort) == 0);
}

void test_module_text() {
  Module m;
  Value x = m.arg(T(D::F32, {4}), 0), y = m.arg(T(D::F32, {4}));
  Builder& b = m.builder();
  m.ret({b.add(x, y), b.compare(x, y, Cmp::LT)});
  CHECK(m.str() ==
        "module @main {\n"
        "  func.func public @main(%arg0: tensor<4xf32> {tf.aliasing_output = 0 : i32}, %arg1: tensor<4xf32>) -> "
        "(tensor<4xf32>, tensor<4xi1>) {\n"
        "    %0 = \"stablehlo.add\"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
        "    %1 = \"stablehlo.compare\"(%arg0, %arg1) {comparison_direction = #stablehlo<comparison_direction LT>, "
        "compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>\n"
        "    \"func.return\"(%0, %1) : (tensor<4xf32>, tensor<4xi1>) -> ()\n"
        "  }\n"
        "}\n");
  CHECK(m.arg_types().size() == 2 && m.result_types()[1] == T(D::Pred, {4}));
  CHECK(has(program([](Module&, Builder&) { return Values{}; }), "@main() -> () {"));
}

void test_op_text() {
  std::string s = program([](Module& m, Builder& b) {
    Value i = m.arg(T(D::S32, {3})), u = m.arg(T(D::U8, {3})), p = m.arg(T(D::Pred, {3}));
    return Values{b.compare(i, i, Cmp::GE), b.compare(u, u, Cmp::NE), b.compare(p, p, Cmp::EQ)};
  });
  CHECK(has(s, "comparison_direction GE>, compare_type = #stablehlo<comparison_type SIGNED>"));
  CHECK(has(s, "comparison_direction NE>, compare_type = #stablehlo<comparison_type UNSIGNED>"));
  CHECK(has(s, "comparison_direction EQ>, compare_type = #stablehlo<comparison_type UNSIGNED>"));

  s = program([](Module& m, Builder& b) {
    Value l = m.arg(T(D::BF16, {2, 3, 4})), r = m.arg(T(D::BF16, {2, 4, 5}));
    return Values{b.dot_general(l, r, {{0}, {0}, {2}, {1}}, Precision::High, Precision::Highest, D::F32)};
  });
  CHECK(has(s, "{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], "
               "lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>, precision_config = "
               "[#stablehlo<precision HIGH>, #stablehlo<precision HIGHEST>]} : (tensor<2x3x4xbf16>, "
               "tensor<2x4x5xbf16>) -> tensor<2x3x5xf32>"));

  s = program([](Module& m, Builder& b) {
    ConvConfig c;
    c.dims = ConvDims::parse("b01f", "01io", "b01f");
    c.window_strides = {2, 2};
    Value x = m.arg(T(D::F32, {1, 5, 5, 3})), w = m.arg(T(D::F32, {3, 3, 3, 8}));
    return Values{b.convolution(x, w, c)};
  });
  CHECK(has(s, "window_strides = array<i64: 2, 2>, padding = dense<[[0, 0], [0, 0]]> : tensor<2x2xi64>, "
               "lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, dimension_numbers = "
               "#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>, feature_group_count = 1 : i64, "
               "batch_group_count = 1 : i64"));
  CHECK(has(s, "-> tensor<1x2x2x8xf32>"));

  s = program([](Module& m, Builder& b) {
    GatherDims d{{1}, {0}, {}, {}, {0}, 1};
    Value x = m.arg(T(D::F32, {5, 3})), i = m.arg(T(D::S32, {4, 1}));
    return Values{b.gather(x, i, d, {1, 3}, true)};
  });
  CHECK(has(s, "{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], "
               "start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 3>, indices_are_sorted = "
               "true} : (tensor<5x3xf32>, tensor<4x1xi32>) -> tensor<4x3xf32>"));

  s = program([](Module& m, Builder& b) {
    Value x = m.arg(T(D::F32, {2, 3}));
    return b.reduce({x}, {b.splat(T(D::F32), 0)}, {1}, sum);
  });
  CHECK(has(s, "%4 = \"stablehlo.reduce\"(%arg0, %0) ({\n    ^bb0(%1: tensor<f32>, %2: tensor<f32>):\n"
               "      %3 = \"stablehlo.add\"(%1, %2) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
               "      \"stablehlo.return\"(%3) : (tensor<f32>) -> ()\n"
               "    }) {dimensions = array<i64: 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>"));

  s = program([](Module& m, Builder& b) {
    Value x = m.arg(T(D::S32, {4})), y = m.arg(T(D::F32, {4}));
    return b.sort({x, y}, 0, true, [](Builder& r, const Values& a) { return Values{r.compare(a[0], a[1], Cmp::LT)}; });
  });
  CHECK(has(s, "%5, %6 = \"stablehlo.sort\"(%arg0, %arg1)"));
  CHECK(has(s, "^bb0(%0: tensor<i32>, %1: tensor<i32>, %2: tensor<f32>, %3: tensor<f32>):"));
  CHECK(has(s, "{dimension = 0 : i64, is_stable = true} : (tensor<4xi32>, tensor<4xf32>) -> (tensor<4xi32>, tensor<4xf32>)"));

  s = program([](Module& m, Builder& b) {
    Value st = m.arg(T(D::U64, {2}));
    auto [ns, bits] = b.rng_bit_generator(st, RngAlgorithm::ThreeFry, T(D::U32, {3}));
    return Values{ns, bits};
  });
  CHECK(has(s, "{rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>} : (tensor<2xui64>) -> (tensor<2xui64>, tensor<3xui32>)"));

  s = program([](Module& m, Builder& b) {
    Value x = m.arg(T(D::F32, {2, 4, 6})), c = m.arg(T(D::C64, {2, 4, 4}));
    return Values{b.fft(x, FftType::RFFT, {4, 6}), b.fft(c, FftType::IRFFT, {6}), b.fft(c, FftType::IFFT, {4})};
  });
  CHECK(has(s, "\"stablehlo.fft\"(%arg0) {fft_type = #stablehlo<fft_type RFFT>, fft_length = array<i64: 4, 6>} : "
               "(tensor<2x4x6xf32>) -> tensor<2x4x4xcomplex<f32>>"));
  CHECK(has(s, "{fft_type = #stablehlo<fft_type IRFFT>, fft_length = array<i64: 6>} : (tensor<2x4x4xcomplex<f32>>) -> "
               "tensor<2x4x6xf32>"));
  CHECK(has(s, "{fft_type = #stablehlo<fft_type IFFT>, fft_length = array<i64: 4>} : (tensor<2x4x4xcomplex<f32>>) -> "
               "tensor<2x4x4xcomplex<f32>>"));
  CHECK_THROWS(Error, shape::fft(T(D::F32, {4}), FftType::FFT, {4}), "stablehlo.fft: element type f32 not supported");
  CHECK_THROWS(Error, shape::fft(T(D::C64, {4}), FftType::IRFFT, {4}), "must have last dimension 3");
  CHECK_THROWS(Error, shape::fft(T(D::F32, {5}), FftType::RFFT, {4}), "do not match fft_length");

  s = program([](Module& m, Builder& b) {
    CustomCallOptions o;
    o.backend_config = "{\"k\": \"v\\n\"}";
    o.has_side_effect = true;
    o.api_version = 2;
    return b.custom_call("my_target", {m.arg(T(D::F32))}, {T(D::F32), T(D::S32, {2})}, o);
  });
  CHECK(has(s, "\"stablehlo.custom_call\"(%arg0) {call_target_name = \"my_target\", has_side_effect = true, "
               "backend_config = \"{\\\"k\\\": \\\"v\\\\n\\\"}\", api_version = 2 : i32}"));

  s = program([](Module& m, Builder& b) {
    Value x = m.arg(T(D::F32, {2, 3})), v = m.arg(T(D::F32));
    return Values{b.pad(x, v, {1, -1}, {0, 2}, {1, 0}), b.slice(x, {0, 1}, {2, 3}), b.iota(T(D::S32, {3}), 0),
                  b.broadcast_in_dim(v, {2}, {}), b.transpose(x, {1, 0})};
  });
  CHECK(has(s, "{edge_padding_low = array<i64: 1, -1>, edge_padding_high = array<i64: 0, 2>, interior_padding = "
               "array<i64: 1, 0>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<4x4xf32>"));
  CHECK(has(s, "{start_indices = array<i64: 0, 1>, limit_indices = array<i64: 2, 3>, strides = array<i64: 1, 1>}"));
  CHECK(has(s, "{iota_dimension = 0 : i64} : () -> tensor<3xi32>"));
  CHECK(has(s, "{broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<2xf32>"));
  CHECK(has(s, "{permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>"));
}

void test_constants() {
  std::string s = program([](Module&, Builder& b) {
    float one = 1.0f;
    uint8_t bits[4] = {1, 0, 0, 1};
    uint16_t h[2] = {0x3C00, 0xC000};
    return Values{b.splat(T(D::F32, {2}), 1.5), b.splat(T(D::BF16), std::nan("")),
                  b.splat(T(D::F64), -std::numeric_limits<double>::infinity()), b.splat(T(D::S8), -3),
                  b.splat(T(D::C128), 1, -2), b.constant(T(D::F32), &one, 4), b.constant(T(D::Pred, {2, 2}), bits, 4),
                  b.constant(T(D::F16, {2}), h, 4), b.constant(T(D::S32, {0}), nullptr, 0)};
  });
  CHECK(has(s, "{value = dense<1.50000000000000000e+00> : tensor<2xf32>}"));
  CHECK(has(s, "{value = dense<0x7FC0> : tensor<bf16>}"));
  CHECK(has(s, "{value = dense<0xFFF0000000000000> : tensor<f64>}"));
  CHECK(has(s, "{value = dense<-3> : tensor<i8>}"));
  CHECK(has(s, "{value = dense<(1.00000000000000000e+00, -2.00000000000000000e+00)> : tensor<complex<f64>>}"));
  CHECK(has(s, "{value = dense<\"0x0000803F\"> : tensor<f32>}"));
  CHECK(has(s, "{value = dense<[[true, false], [false, true]]> : tensor<2x2xi1>}"));
  CHECK(has(s, "{value = dense<\"0x003C00C0\"> : tensor<2xf16>}"));
  CHECK(has(s, "{value = dense<> : tensor<0xi32>}"));
}

void test_shape_rules() {
  CHECK(shape::unary(Op::Abs, T(D::C64, {2})) == T(D::F32, {2}));
  CHECK(shape::unary(Op::IsFinite, T(D::BF16, {2})) == T(D::Pred, {2}));
  CHECK(shape::binary(Op::Complex, T(D::F64, {3}), T(D::F64, {3})) == T(D::C128, {3}));
  CHECK(shape::bitcast_convert(T(D::F32, {2}), D::U8) == T(D::U8, {2, 4}));
  CHECK(shape::bitcast_convert(T(D::U16, {3, 4}), D::F64) == T(D::F64, {3}));
  CHECK(shape::slice(T(D::F32, {10}), {1}, {8}, {3}) == T(D::F32, {3}));
  CHECK(shape::pad(T(D::F32, {3}), T(D::F32), {-1}, {2}, {2}) == T(D::F32, {8}));
  CHECK(shape::concatenate({T(D::S8, {2, 1}), T(D::S8, {2, 4})}, 1) == T(D::S8, {2, 5}));
  CHECK(shape::dot_general(T(D::F32, {7, 2, 3}), T(D::F32, {3, 7, 5}), {{0}, {1}, {2}, {0}}) == T(D::F32, {7, 2, 5}));
  CHECK(shape::reduce({T(D::F32, {2, 3, 4})}, {T(D::F32)}, {0, 2}) == std::vector{T(D::F32, {3})});
  CHECK(shape::reduce_window({T(D::F32, {1, 6})}, {T(D::F32)}, {{1, 3}, {1, 2}, {}, {}, {{0, 0}, {1, 1}}}) ==
        std::vector{T(D::F32, {1, 3})});
  ConvConfig c;
  c.dims = ConvDims::parse("bf01", "oi01", "bf01");
  c.padding = {{1, 1}, {1, 1}};
  c.lhs_dilation = {2, 1};
  c.feature_group_count = 2;
  CHECK(shape::convolution(T(D::F32, {3, 4, 5, 5}), T(D::F32, {6, 2, 3, 3}), c) == T(D::F32, {3, 6, 9, 5}));
  GatherDims g{{2}, {1}, {0}, {0}, {1}, 2};
  CHECK(shape::gather(T(D::F32, {2, 5, 3}), T(D::S32, {2, 4, 1}), g, {1, 1, 3}) == T(D::F32, {2, 4, 3}));
  ScatterDims sd{{1}, {0}, {}, {}, {0}, 1};
  CHECK(shape::scatter({T(D::F32, {5, 3})}, T(D::S32, {4, 1}), {T(D::F32, {4, 3})}, sd) == std::vector{T(D::F32, {5, 3})});
  CHECK(shape::compare_type(D::U16) == CmpType::Unsigned && shape::compare_type(D::C64) == CmpType::Float);
}

// Runs f on a fresh module's builder; used where only the throw matters.
template <class F>
void build(F f) {
  Module m;
  f(m, m.builder());
}

void test_errors() {
  using M = Module;
  using B = Builder;
  // the exact message for the commonest mistake
  try {
    build([](M& m, B& b) { b.add(m.arg(T(D::F32, {2})), m.arg(T(D::F32, {3}))); });
    CHECK(false);
  } catch (const std::invalid_argument& e) {  // hlo::Error is an invalid_argument
    CHECK(std::string(e.what()) == "stablehlo.add: operand shapes differ: tensor<2xf32> vs tensor<3xf32>");
  }
  CHECK_THROWS(Error, build([](M& m, B& b) { b.mul(m.arg(T(D::F32, {2})), m.arg(T(D::S32, {2}))); }),
               "stablehlo.multiply: operand element types differ");
  CHECK_THROWS(Error, build([](M& m, B& b) { b.unary(Op::Exp, m.arg(T(D::S32))); }),
               "stablehlo.exponential: element type i32 not supported (takes floating-point, complex)");
  CHECK_THROWS(Error, build([](M& m, B& b) { b.binary(Op::Exp, m.arg(T(D::F32)), m.arg(T(D::F32))); }),
               "not a binary elementwise op");
  CHECK_THROWS(Error, build([](M& m, B& b) { b.binary(Op::ShiftLeft, m.arg(T(D::F32)), m.arg(T(D::F32))); }),
               "stablehlo.shift_left: element type f32 not supported");
  CHECK_THROWS(DTypeError, build([](M& m, B& b) { b.compare(m.arg(T(D::C64)), m.arg(T(D::C64)), Cmp::LT); }),
               "stablehlo.compare: element type complex<f32> not supported (takes real operands, or complex for EQ or NE)");
  CHECK_THROWS(DTypeError, build([](M& m, B& b) { b.convert(m.arg(T(D::C64)), D::F32); }),
               "stablehlo.convert: element type complex<f32> not supported (takes real operands for a real result type f32)");
  CHECK_THROWS(Error, build([](M& m, B& b) { b.compare(m.arg(T(D::S32)), m.arg(T(D::S32)), Cmp::LT, CmpType::Float); }),
               "does not fit element type i32");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value p = m.arg(T(D::Pred, {3})), x = m.arg(T(D::F32, {2}));
                 b.select(p, x, x);
               }),
               "stablehlo.select: predicate tensor<3xi1> must be rank 0 or match tensor<2xf32>");
  CHECK_THROWS(Error, build([](M& m, B& b) { b.clamp(m.arg(T(D::F32, {2})), m.arg(T(D::F32, {3})), m.arg(T(D::F32))); }),
               "stablehlo.clamp: bound tensor<2xf32> must be rank 0 or match");
  CHECK_THROWS(Error, build([](M& m, B& b) { b.bitcast_convert(m.arg(T(D::U8, {3})), D::F32); }),
               "needs a last dimension of size 4");
  // broadcast_in_dim
  CHECK_THROWS(Error, build([](M& m, B& b) { b.broadcast_in_dim(m.arg(T(D::F32, {3})), {2, 4}, {1}); }),
               "stablehlo.broadcast_in_dim: operand dimension 0 (size 3) cannot broadcast to result dimension 1 (size 4)");
  CHECK_THROWS(Error, build([](M& m, B& b) { b.broadcast_in_dim(m.arg(T(D::F32, {3})), {3}, {1}); }),
               "broadcast dimension 1 out of range for rank 1");
  CHECK_THROWS(Error, build([](M& m, B& b) { b.broadcast_in_dim(m.arg(T(D::F32, {3, 1})), {3, 3}, {0}); }),
               "broadcast_dimensions [0] must have 2 entries");
  CHECK_THROWS(Error, build([](M& m, B& b) { b.broadcast_in_dim(m.arg(T(D::F32, {1, 1})), {3, 3}, {0, 0}); }),
               "repeat dimension 0");
  // shapes
  CHECK_THROWS(Error, build([](M& m, B& b) { b.reshape(m.arg(T(D::F32, {2, 3})), {4}); }),
               "stablehlo.reshape: cannot reshape tensor<2x3xf32> to tensor<4xf32>");
  CHECK_THROWS(Error, build([](M& m, B& b) { b.transpose(m.arg(T(D::F32, {2, 3})), {0, 0}); }), "repeat dimension 0");
  CHECK_THROWS(Error, build([](M& m, B& b) { b.slice(m.arg(T(D::F32, {4})), {2}, {5}); }),
               "stablehlo.slice: bounds [2, 5) invalid for dimension 0 of tensor<4xf32>");
  CHECK_THROWS(Error, build([](M& m, B& b) { b.slice(m.arg(T(D::F32, {4})), {3}, {2}); }), "bounds [3, 2) invalid");
  CHECK_THROWS(Error, build([](M& m, B& b) { b.slice(m.arg(T(D::F32, {4})), {0}, {4}, {0}); }), "stride 0 must be positive");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {4, 4})), i = m.arg(T(D::S32)), j = m.arg(T(D::S64));
                 b.dynamic_slice(x, {i, j}, {2, 2});
               }),
               "stablehlo.dynamic_slice: start indices differ in type");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {4})), i = m.arg(T(D::S32));
                 b.dynamic_slice(x, {i}, {5});
               }),
               "slice size 5 invalid for dimension 0");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {4})), u = m.arg(T(D::F32, {5})), i = m.arg(T(D::S32));
                 b.dynamic_update_slice(x, u, {i});
               }),
               "stablehlo.dynamic_update_slice: update tensor<5xf32> larger than operand tensor<4xf32>");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {2, 3})), y = m.arg(T(D::F32, {3, 3}));
                 b.concatenate({x, y}, 1);
               }),
               "stablehlo.concatenate: operands tensor<2x3xf32> and tensor<3x3xf32> differ outside dimension 1");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {2})), v = m.arg(T(D::F32));
                 b.pad(x, v, {-3}, {0});
               }),
               "stablehlo.pad: padding leaves dimension 0 of tensor<2xf32> with negative size -1");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {2})), v = m.arg(T(D::F32));
                 b.pad(x, v, {0}, {0}, {-1});
               }),
               "interior padding -1 must be non-negative");
  CHECK_THROWS(Error, build([](M&, B& b) { b.iota(T(D::F32, {3}), 1); }), "stablehlo.iota: iota_dimension 1 out of range");
  // dot_general
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value l = m.arg(T(D::F32, {2, 3})), r = m.arg(T(D::F32, {4, 5}));
                 b.dot_general(l, r, {{}, {}, {1}, {0}});
               }),
               "stablehlo.dot_general: contracting dimension sizes differ: lhs dim 1 of tensor<2x3xf32> vs rhs dim 0 of "
               "tensor<4x5xf32>");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value l = m.arg(T(D::F32, {2, 3})), r = m.arg(T(D::F32, {3, 5}));
                 b.dot_general(l, r, {{}, {}, {1}, {0, 1}});
               }),
               "contracting dimensions differ in count: [1] vs [0, 1]");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value l = m.arg(T(D::F32, {2, 3})), r = m.arg(T(D::F32, {3, 5}));
                 b.dot_general(l, r, {{1}, {0}, {1}, {0}});
               }),
               "lhs batching/contracting dimension [1, 1] repeat dimension 1");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value l = m.arg(T(D::F32, {2, 3})), r = m.arg(T(D::F32, {3, 5}));
                 b.dot_general(l, r, {{}, {}, {2}, {0}});
               }),
               "lhs batching/contracting dimension 2 out of range for rank 2");
  // convolution
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 ConvConfig c;
                 c.dims = ConvDims::parse("bf0", "oi0", "bf0");
                 Value x = m.arg(T(D::F32, {1, 4, 5})), w = m.arg(T(D::F32, {2, 3, 2}));
                 b.convolution(x, w, c);
               }),
               "stablehlo.convolution: input features 4 / feature_group_count 1 must equal kernel input features 3");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 ConvConfig c;
                 c.dims = ConvDims::parse("bf0", "oi0", "bf0");
                 c.window_strides = {1, 1};
                 Value x = m.arg(T(D::F32, {1, 3, 5})), w = m.arg(T(D::F32, {2, 3, 2}));
                 b.convolution(x, w, c);
               }),
               "window_strides [1, 1] must have 1 entries");
  CHECK_THROWS(Error, ConvDims::parse("bf0", "oo0", "bf0"), "ConvDims::parse: bad layout 'oo0'");
  // gather / scatter
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {5, 3})), i = m.arg(T(D::S32, {4, 1}));
                 b.gather(x, i, {{1}, {0}, {}, {}, {0}, 1}, {1, 4});
               }),
               "stablehlo.gather: slice size 4 invalid for dimension 1 of tensor<5x3xf32>");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {5, 3})), i = m.arg(T(D::S32, {4, 1}));
                 b.gather(x, i, {{1, 2}, {0}, {}, {}, {0}, 1}, {1, 3});
               }),
               "offset_dims [1, 2] must have 1 entries");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {5, 3})), i = m.arg(T(D::S32, {4, 2}));
                 b.gather(x, i, {{1}, {0}, {}, {}, {0}, 1}, {1, 3});
               }),
               "start_index_map [0] must have 2 entries");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {5, 3})), i = m.arg(T(D::S32, {4, 1})), u = m.arg(T(D::F32, {3, 3}));
                 b.scatter({x}, i, {u}, {{1}, {0}, {}, {}, {0}, 1}, sum);
               }),
               "stablehlo.scatter: update scatter dimension 0 of tensor<3x3xf32> does not match indices tensor<4x1xi32>");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {5, 3})), i = m.arg(T(D::S32, {4, 1})), u = m.arg(T(D::F32, {4, 4}));
                 b.scatter({x}, i, {u}, {{1}, {0}, {}, {}, {0}, 1}, sum);
               }),
               "update window dimension 1 (size 4) exceeds input dimension 1");
  // bodies
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {3})), z = b.splat(T(D::F32), 0);
                 b.reduce({x}, {z}, {0}, [](B& r, const Values& a) { return Values{r.add(a[0], a[1]), a[0]}; });
               }),
               "stablehlo.reduce: body returned 2 values, expected 1");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {3})), z = b.splat(T(D::F32), 0);
                 b.reduce({x}, {z}, {0}, [](B& r, const Values& a) { return Values{r.convert(a[0], D::S32)}; });
               }),
               "stablehlo.reduce: body result 0 is tensor<i32>, expected tensor<f32>");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {3})), z = b.splat(T(D::S32), 0);
                 b.reduce({x}, {z}, {0}, sum);
               }),
               "init tensor<i32> differs in element type from input tensor<3xf32>");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {3})), z = b.splat(T(D::F32), 0);
                 b.reduce({x}, {z}, {1}, sum);
               }),
               "stablehlo.reduce: dimension 1 out of range for rank 1");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {4})), z = b.splat(T(D::F32), 0);
                 b.reduce_window({x}, {z}, {{0}, {}, {}, {}, {}}, sum);
               }),
               "stablehlo.reduce_window: window_dimensions [0] must be positive");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {4, 4})), s = m.arg(T(D::F32, {3, 2})), z = b.splat(T(D::F32), 0);
                 b.select_and_scatter(x, s, z, {{2, 2}, {2, 2}, {}, {}, {}},
                                      [](B& r, const Values& a) { return Values{r.compare(a[0], a[1], Cmp::GE)}; }, sum);
               }),
               "source tensor<3x2xf32> must have the window sweep's shape tensor<2x2xf32>");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 b.sort({m.arg(T(D::F32, {3}))}, 0, false, [](B& r, const Values& a) { return Values{r.add(a[0], a[1])}; });
               }),
               "stablehlo.sort: comparator result 0 is tensor<f32>, expected tensor<i1>");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 b.while_({m.arg(T(D::S32))}, [](B&, const Values& a) { return Values{a[0]}; },
                          [](B&, const Values& a) { return Values{a[0]}; });
               }),
               "stablehlo.while: cond result 0 is tensor<i32>, expected tensor<i1>");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value i = m.arg(T(D::S32)), x = m.arg(T(D::F32)), y = m.arg(T(D::S32));
                 b.case_(i, {[x](B&, const Values&) { return Values{x}; }, [y](B&, const Values&) { return Values{y}; }});
               }),
               "stablehlo.case: branch result 0 is tensor<i32>, expected tensor<f32>");
  CHECK_THROWS(Error, build([](M& m, B& b) { b.case_(m.arg(T(D::S64)), {}); }), "index must be tensor<i32>");
  // visibility: isolated bodies cannot capture; region values do not leak; values stay in their module
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32, {3})), z = b.splat(T(D::F32), 0);
                 b.reduce({x}, {z}, {0}, [z](B& r, const Values& a) { return Values{r.add(a[0], z)}; });
               }),
               "stablehlo.add: operand %0 is not visible here");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value leaked;
                 Value x = m.arg(T(D::S32));
                 b.while_({x}, [&](B& r, const Values& a) { return Values{r.compare(a[0], a[0], Cmp::LT)}; },
                          [&](B& r, const Values& a) { return Values{leaked = r.add(a[0], a[0])}; });
                 b.add(leaked, leaked);
               }),
               "is not visible here");
  CHECK_THROWS(Error, build([](M&, B& b) {
                 Module other;
                 Value y = other.arg(T(D::F32));
                 b.add(y, y);
               }),
               "is not visible here");
  CHECK_THROWS(Error, build([](M&, B& b) { b.add(Value{}, Value{}); }), "stablehlo.add: operand is an uninitialized Value");
  // constants
  CHECK_THROWS(Error, build([](M&, B& b) {
                 float v[3] = {};
                 b.constant(T(D::F32, {2}), v, sizeof v);
               }),
               "stablehlo.constant: got 12 bytes for tensor<2xf32> (want 8, or one element)");
  CHECK_THROWS(Error, build([](M&, B& b) { b.splat(T(D::U8), 300); }), "stablehlo.constant: 300 is not representable in ui8");
  CHECK_THROWS(DTypeError, build([](M&, B& b) { b.splat(T(D::S32), 1.5); }), "1.5 is not representable in i32");
  CHECK_THROWS(Error, build([](M&, B& b) { b.splat(T(D::U64), 18446744073709551616.0); }), "not representable in ui64");
  CHECK_THROWS(Error, build([](M&, B& b) { b.splat(T(D::S8), 128); }), "128 is not representable in i8");
  build([](M&, B& b) { b.splat(T(D::S8), -128); });
  CHECK_THROWS(Error, build([](M&, B& b) { b.splat(T(D::F8E4M3FN), std::numeric_limits<double>::infinity()); }),
               "inf is not representable in f8E4M3FN");
  CHECK_THROWS(Error, build([](M&, B& b) { b.splat(T(D::F32, {-1}), 0); }), "dynamic or negative dimension");
  // rng, custom_call
  CHECK_THROWS(Error, build([](M& m, B& b) { b.rng_bit_generator(m.arg(T(D::U32, {2})), RngAlgorithm::Default, T(D::U32)); }),
               "stablehlo.rng_bit_generator: state must be a rank-1 ui64 tensor");
  CHECK_THROWS(Error, build([](M& m, B& b) { b.rng_bit_generator(m.arg(T(D::U64, {3})), RngAlgorithm::ThreeFry, T(D::U32)); }),
               "has the wrong size for #stablehlo<rng_algorithm THREE_FRY>");
  CHECK_THROWS(Error, build([](M&, B& b) { b.custom_call("", {}, {}); }), "stablehlo.custom_call: call_target_name is empty");
  // module
  CHECK_THROWS(Error, Module("bad name"), "module: bad name");
  CHECK_THROWS(Error, build([](M& m, B&) {
                 Value x = m.arg(T(D::F32), 1);
                 m.ret({x});
               }),
               "argument 0 aliases output 1, which is missing");
  CHECK_THROWS(Error, build([](M& m, B& b) {
                 Value x = m.arg(T(D::F32), 0);
                 m.ret({b.convert(x, D::S32)});
               }),
               "argument 0 tensor<f32> cannot alias output 0 tensor<i32>");
  CHECK_THROWS(Error, build([](M& m, B&) { m.str(); }), "str() before ret()");
  CHECK_THROWS(Error, build([](M& m, B&) {
                 m.ret({});
                 m.ret({});
               }),
               "ret() called twice");
}

}  // namespace

int main() {
  test_types();
  test_module_text();
  test_op_text();
  test_constants();
  test_shape_rules();
  test_errors();
  return tpu::test::failures();
}

// Prints a JSON list of sample StableHLO programs, one or more per op family:
//   [{"name": ..., "program": ..., "inputs": [{"dtype": "f32", "shape": [2, 3]}], "outputs": [...]}, ...]
// tests/test_hlo_families.py runs each on the XLA CPU plugin against a numpy reference of the same name.
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "hlo/builder.h"

using namespace tpu;
using namespace tpu::hlo;
using D = DType;

namespace {

TensorType T(D t, Dims d = {}) { return {t, std::move(d)}; }
// Arguments in order (C++ leaves the order of m.arg() calls inside one call's argument list unspecified).
Values A(Module& m, const std::vector<TensorType>& ts) {
  Values v;
  for (auto& t : ts) v.push_back(m.arg(t));
  return v;
}

struct Sample {
  std::string name;
  std::function<Values(Module&, Builder&)> build;
};

// Deterministic byte pattern shared with the Python reference (const_dense_*).
std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 37 + 11);
  return b;
}

Body sum_body = [](Builder& r, const Values& a) { return Values{r.add(a[0], a[1])}; };
Body max_body = [](Builder& r, const Values& a) { return Values{r.max(a[0], a[1])}; };

std::vector<Sample> samples() {
  std::vector<Sample> s;
  auto add = [&](std::string name, std::function<Values(Module&, Builder&)> f) { s.push_back({std::move(name), f}); };

  // ---- constants ----
  add("const_splat", [](Module&, Builder& b) {
    double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    return Values{b.splat(T(D::F32, {2}), 1.5),      b.splat(T(D::BF16, {3}), -2.25), b.splat(T(D::F16), 0.5),
                  b.splat(T(D::F64, {2}), -inf),     b.splat(T(D::F32), nan),         b.splat(T(D::S32, {2}), -7),
                  b.splat(T(D::U8, {2}), 200),       b.splat(T(D::S64), -123456789012), b.splat(T(D::Pred, {2}), 1),
                  b.splat(T(D::C64, {2}), 1, -2),    b.splat(T(D::U64), 4294967296.0), b.splat(T(D::BF16), inf)};
  });
  for (D t : {D::F32, D::F64, D::F16, D::BF16, D::S8, D::S16, D::S32, D::S64, D::U8, D::U16, D::U32, D::U64,
              D::C64, D::C128, D::F8E4M3FN, D::F8E5M2})
    add(std::string("const_dense_") + std::string(info(t).name), [t](Module&, Builder& b) {
      TensorType tt = T(t, {2, 3});
      auto bytes = pattern(tt.numel() * byte_size(t));
      return Values{b.constant(tt, bytes.data(), bytes.size())};
    });
  add("const_dense_pred", [](Module&, Builder& b) {
    uint8_t v[6] = {1, 0, 0, 1, 1, 0};
    return Values{b.constant(T(D::Pred, {2, 3}), v, 6), b.constant(T(D::Pred, {4}), v, 1)};
  });
  add("const_dense_splat_bytes", [](Module&, Builder& b) {
    float one = 3.25f;
    return Values{b.constant(T(D::F32, {2, 2}), &one, sizeof one)};
  });

  // ---- elementwise unary ----
  struct U {
    const char* name;
    Op op;
    D t;
  };
  for (U u : {U{"abs", Op::Abs, D::F32}, {"abs_s32", Op::Abs, D::S32}, {"abs_c64", Op::Abs, D::C64},
              {"neg", Op::Neg, D::F32}, {"neg_s32", Op::Neg, D::S32}, {"exp", Op::Exp, D::F32},
              {"exp_bf16", Op::Exp, D::BF16}, {"exp_c64", Op::Exp, D::C64}, {"expm1", Op::Expm1, D::F32},
              {"log", Op::Log, D::F32}, {"log1p", Op::Log1p, D::F32}, {"sqrt", Op::Sqrt, D::F32},
              {"sqrt_f64", Op::Sqrt, D::F64}, {"rsqrt", Op::Rsqrt, D::F32}, {"cbrt", Op::Cbrt, D::F32},
              {"tanh", Op::Tanh, D::F32}, {"tanh_f16", Op::Tanh, D::F16}, {"logistic", Op::Logistic, D::F32},
              {"sine", Op::Sine, D::F32}, {"cosine", Op::Cosine, D::F32}, {"tan", Op::Tan, D::F32},
              {"floor", Op::Floor, D::F32}, {"ceil", Op::Ceil, D::F32},
              {"round_nearest_even", Op::RoundNearestEven, D::F32}, {"round_nearest_afz", Op::RoundNearestAfz, D::F32},
              {"sign", Op::Sign, D::F32}, {"sign_s32", Op::Sign, D::S32}, {"not_s32", Op::Not, D::S32},
              {"not_pred", Op::Not, D::Pred}, {"popcnt", Op::Popcnt, D::S32}, {"popcnt_u8", Op::Popcnt, D::U8},
              {"count_leading_zeros", Op::CountLeadingZeros, D::U32}, {"is_finite", Op::IsFinite, D::F32},
              {"real", Op::Real, D::C64}, {"imag", Op::Imag, D::C64}})
    add(std::string("unary_") + u.name, [u](Module& m, Builder& b) { return Values{b.unary(u.op, m.arg(T(u.t, {2, 3})))}; });
  add("unary_is_finite_special", [](Module&, Builder& b) {
    float v[6] = {1.f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), 0.f, -2.f};
    return Values{b.unary(Op::IsFinite, b.constant(T(D::F32, {6}), v, sizeof v))};
  });

  // ---- elementwise binary ----
  for (U u : {U{"add", Op::Add, D::F32}, {"add_bf16", Op::Add, D::BF16}, {"add_f16", Op::Add, D::F16},
              {"add_s32", Op::Add, D::S32}, {"add_c64", Op::Add, D::C64}, {"subtract", Op::Subtract, D::F32},
              {"multiply", Op::Multiply, D::F32}, {"multiply_u8", Op::Multiply, D::U8},
              {"multiply_c128", Op::Multiply, D::C128}, {"divide", Op::Divide, D::F32},
              {"divide_s32", Op::Divide, D::S32}, {"remainder", Op::Remainder, D::F32},
              {"remainder_s32", Op::Remainder, D::S32}, {"power", Op::Power, D::F32}, {"power_s32", Op::Power, D::S32},
              {"maximum", Op::Maximum, D::F32}, {"minimum_s32", Op::Minimum, D::S32}, {"atan2", Op::Atan2, D::F32},
              {"and_s32", Op::And, D::S32}, {"or_pred", Op::Or, D::Pred}, {"xor_u8", Op::Xor, D::U8},
              {"shift_left", Op::ShiftLeft, D::U32}, {"shift_right_arithmetic", Op::ShiftRightArithmetic, D::S32},
              {"shift_right_logical", Op::ShiftRightLogical, D::S32}, {"complex", Op::Complex, D::F32}})
    add(std::string("binary_") + u.name, [u](Module& m, Builder& b) {
      auto a = A(m, {T(u.t, {2, 3}), T(u.t, {2, 3})});
      return Values{b.binary(u.op, a[0], a[1])};
    });

  // ---- compare, select, clamp, convert ----
  add("compare", [](Module& m, Builder& b) {
    Value f0 = m.arg(T(D::F32, {6})), f1 = m.arg(T(D::F32, {6})), i0 = m.arg(T(D::S32, {6})),
          i1 = m.arg(T(D::S32, {6})), u0 = m.arg(T(D::U32, {6})), u1 = m.arg(T(D::U32, {6})),
          c0 = m.arg(T(D::C64, {6})), p0 = m.arg(T(D::Pred, {6})), p1 = m.arg(T(D::Pred, {6}));
    return Values{b.compare(f0, f1, Cmp::LT), b.compare(f0, f1, Cmp::GE, CmpType::TotalOrder),
                  b.compare(i0, i1, Cmp::LE), b.compare(i0, i1, Cmp::NE), b.compare(u0, u1, Cmp::GT),
                  b.compare(u0, u1, Cmp::EQ), b.compare(c0, c0, Cmp::EQ), b.compare(p0, p1, Cmp::GT)};
  });
  add("select", [](Module& m, Builder& b) {
    Value p = m.arg(T(D::Pred, {2, 3})), x = m.arg(T(D::F32, {2, 3})), y = m.arg(T(D::F32, {2, 3})),
          q = m.arg(T(D::Pred));
    return Values{b.select(p, x, y), b.select(q, x, y)};
  });
  add("clamp", [](Module& m, Builder& b) {
    Value lo = m.arg(T(D::F32)), x = m.arg(T(D::F32, {2, 3})), hi = m.arg(T(D::F32)), los = m.arg(T(D::S32, {4})),
          xs = m.arg(T(D::S32, {4})), his = m.arg(T(D::S32, {4}));
    return Values{b.clamp(lo, x, hi), b.clamp(los, xs, his)};
  });
  add("convert", [](Module& m, Builder& b) {
    Value f = m.arg(T(D::F32, {2, 3})), i = m.arg(T(D::S32, {2, 3})), p = m.arg(T(D::Pred, {2, 3})),
          u = m.arg(T(D::U8, {2, 3}));
    return Values{b.convert(f, D::S32), b.convert(i, D::F32), b.convert(f, D::BF16), b.convert(f, D::Pred),
                  b.convert(p, D::F32),  b.convert(f, D::C64), b.convert(u, D::S32),  b.convert(f, D::F16)};
  });
  add("bitcast_convert", [](Module& m, Builder& b) {
    Value f = m.arg(T(D::F32, {2, 3})), h = m.arg(T(D::U16, {2, 3, 2}));
    return Values{b.bitcast_convert(f, D::S32), b.bitcast_convert(f, D::U8), b.bitcast_convert(h, D::F32)};
  });

  // ---- shape manipulation ----
  add("broadcast_in_dim", [](Module& m, Builder& b) {
    Value v = m.arg(T(D::F32, {3})), c = m.arg(T(D::F32, {2, 1})), s = m.arg(T(D::S32));
    return Values{b.broadcast_in_dim(v, {2, 3}, {1}), b.broadcast_in_dim(c, {2, 3}, {0, 1}),
                  b.broadcast_in_dim(s, {2, 3}, {}), b.broadcast_in_dim(c, {3, 4, 2}, {2, 0})};
  });
  add("reshape", [](Module& m, Builder& b) {
    Value x = m.arg(T(D::F32, {2, 3}));
    return Values{b.reshape(x, {3, 2}), b.reshape(x, {6}), b.reshape(b.reshape(x, {6, 1, 1}), {1, 2, 3})};
  });
  add("transpose", [](Module& m, Builder& b) { return Values{b.transpose(m.arg(T(D::F32, {2, 3, 4})), {2, 0, 1})}; });
  add("reverse", [](Module& m, Builder& b) { return Values{b.reverse(m.arg(T(D::F32, {2, 3})), {1})}; });
  add("slice", [](Module& m, Builder& b) {
    Value x = m.arg(T(D::F32, {4, 6}));
    return Values{b.slice(x, {1, 0}, {3, 6}, {1, 2}), b.slice(x, {0, 5}, {4, 6})};
  });
  add("dynamic_slice", [](Module& m, Builder& b) {
    Value x = m.arg(T(D::F32, {4, 6})), i = m.arg(T(D::S32)), j = m.arg(T(D::S32));
    return Values{b.dynamic_slice(x, {i, j}, {2, 3})};
  });
  add("dynamic_update_slice", [](Module& m, Builder& b) {
    Value x = m.arg(T(D::F32, {4, 6})), u = m.arg(T(D::F32, {2, 3})), i = m.arg(T(D::S32)), j = m.arg(T(D::S32));
    return Values{b.dynamic_update_slice(x, u, {i, j})};
  });
  add("concatenate", [](Module& m, Builder& b) {
    Value x = m.arg(T(D::F32, {2, 1})), y = m.arg(T(D::F32, {2, 3})), z = m.arg(T(D::F32, {2, 2}));
    return Values{b.concatenate({x, y, z}, 1), b.concatenate({y}, 0)};
  });
  add("pad", [](Module& m, Builder& b) {
    Value x = m.arg(T(D::F32, {2, 3})), v = m.arg(T(D::F32));
    return Values{b.pad(x, v, {1, -1}, {0, 2}, {1, 0}), b.pad(x, v, {0, 0}, {0, 0})};
  });
  add("iota", [](Module&, Builder& b) {
    return Values{b.iota(T(D::S32, {2, 3}), 1), b.iota(T(D::F32, {4}), 0), b.iota(T(D::U8, {3, 2}), 0)};
  });

  // ---- reductions ----
  add("reduce_sum", [](Module& m, Builder& b) {
    Value x = m.arg(T(D::F32, {3, 4}));
    Value zero = b.splat(T(D::F32), 0);
    return Values{b.reduce({x}, {zero}, {1}, sum_body)[0], b.reduce({x}, {zero}, {0, 1}, sum_body)[0]};
  });
  add("reduce_max_bf16", [](Module& m, Builder& b) {
    Value x = m.arg(T(D::BF16, {3, 4}));
    return b.reduce({x}, {b.splat(T(D::BF16), -std::numeric_limits<double>::infinity())}, {0}, max_body);
  });
  add("reduce_and", [](Module& m, Builder& b) {
    return b.reduce({m.arg(T(D::Pred, {4, 3}))}, {b.splat(T(D::Pred), 1)}, {0},
                    [](Builder& r, const Values& a) { return Values{r.and_(a[0], a[1])}; });
  });
  add("reduce_argmax", [](Module& m, Builder& b) {  // variadic: (value, index) pairs
    Value x = m.arg(T(D::F32, {3, 5}));
    Value idx = b.iota(T(D::S32, {3, 5}), 1);
    Value init_v = b.splat(T(D::F32), -std::numeric_limits<double>::infinity()), init_i = b.splat(T(D::S32), 0);
    return b.reduce({x, idx}, {init_v, init_i}, {1}, [](Builder& r, const Values& a) {
      // a = (acc_v, acc_i, x_v, x_i): keep acc unless x is larger, or equal with a smaller index
      Value gt = r.compare(a[2], a[0], Cmp::GT);
      Value eq = r.compare(a[2], a[0], Cmp::EQ), lt = r.compare(a[3], a[1], Cmp::LT);
      Value take = r.or_(gt, r.and_(eq, lt));
      return Values{r.select(take, a[2], a[0]), r.select(take, a[3], a[1])};
    });
  });
  add("reduce_window_sum", [](Module& m, Builder& b) {
    Value x = m.arg(T(D::F32, {4, 5}));
    Window w{{2, 3}, {1, 2}, {}, {}, {{1, 0}, {0, 1}}};
    return b.reduce_window({x}, {b.splat(T(D::F32), 0)}, w, sum_body);
  });
  add("reduce_window_max_dilated", [](Module& m, Builder& b) {
    Value x = m.arg(T(D::F32, {1, 6, 5, 1}));
    Window w{{1, 2, 2, 1}, {1, 1, 2, 1}, {1, 2, 1, 1}, {1, 1, 2, 1}, {{0, 0}, {1, 1}, {0, 0}, {0, 0}}};
    return b.reduce_window({x}, {b.splat(T(D::F32), -std::numeric_limits<double>::infinity())}, w, max_body);
  });
  add("select_and_scatter", [](Module& m, Builder& b) {
    Value x = m.arg(T(D::F32, {4, 6})), src = m.arg(T(D::F32, {2, 3}));
    Window w{{2, 2}, {2, 2}, {}, {}, {}};
    return Values{b.select_and_scatter(
        x, src, b.splat(T(D::F32), 0), w,
        [](Builder& r, const Values& a) { return Values{r.compare(a[0], a[1], Cmp::GE)}; }, sum_body)};
  });

  // ---- contractions ----
  add("dot_matmul", [](Module& m, Builder& b) {
    auto a = A(m, {T(D::F32, {2, 3}), T(D::F32, {3, 4})});
    return Values{b.dot_general(a[0], a[1], {{}, {}, {1}, {0}})};
  });
  add("dot_batched_highest", [](Module& m, Builder& b) {
    auto a = A(m, {T(D::F32, {2, 3, 4}), T(D::F32, {2, 5, 4})});
    return Values{b.dot_general(a[0], a[1], {{0}, {0}, {2}, {2}},
                                Precision::Highest, Precision::High)};
  });
  add("dot_bf16_to_f32", [](Module& m, Builder& b) {
    auto a = A(m, {T(D::BF16, {4, 8}), T(D::BF16, {8, 3})});
    return Values{b.dot_general(a[0], a[1], {{}, {}, {1}, {0}},
                                Precision::Default, Precision::Default, D::F32)};
  });
  add("dot_s32_vector", [](Module& m, Builder& b) {
    auto a = A(m, {T(D::S32, {5}), T(D::S32, {5})});
    return Values{b.dot_general(a[0], a[1], {{}, {}, {0}, {0}})};
  });
  add("conv_nchw_stride_pad", [](Module& m, Builder& b) {
    ConvConfig c;
    c.dims = ConvDims::parse("bf01", "oi01", "bf01");
    c.window_strides = {2, 1};
    c.padding = {{1, 1}, {0, 2}};
    auto a = A(m, {T(D::F32, {2, 3, 5, 4}), T(D::F32, {4, 3, 3, 2})});
    return Values{b.convolution(a[0], a[1], c)};
  });
  add("conv_nhwc_dilated", [](Module& m, Builder& b) {
    ConvConfig c;
    c.dims = ConvDims::parse("b01f", "01io", "b01f");
    c.lhs_dilation = {2, 1};
    c.rhs_dilation = {1, 2};
    c.padding = {{1, 0}, {1, 1}};
    auto a = A(m, {T(D::F32, {1, 4, 5, 2}), T(D::F32, {2, 2, 2, 3})});
    return Values{b.convolution(a[0], a[1], c)};
  });
  add("conv_feature_groups", [](Module& m, Builder& b) {
    ConvConfig c;
    c.dims = ConvDims::parse("bf0", "oi0", "bf0");
    c.feature_group_count = 2;
    auto a = A(m, {T(D::F32, {2, 4, 6}), T(D::F32, {6, 2, 3})});
    return Values{b.convolution(a[0], a[1], c)};
  });
  add("conv_batch_groups", [](Module& m, Builder& b) {
    ConvConfig c;
    c.dims = ConvDims::parse("bf0", "oi0", "bf0");
    c.batch_group_count = 2;
    auto a = A(m, {T(D::F32, {4, 3, 5}), T(D::F32, {4, 3, 2})});
    return Values{b.convolution(a[0], a[1], c)};
  });

  // ---- gather / scatter ----
  add("gather_rows", [](Module& m, Builder& b) {  // embedding lookup, implicit index vector dim
    GatherDims d;
    d.offset_dims = {1};
    d.collapsed_slice_dims = {0};
    d.start_index_map = {0};
    d.index_vector_dim = 1;
    auto a = A(m, {T(D::F32, {5, 3}), T(D::S32, {4})});
    return Values{b.gather(a[0], a[1], d, {1, 3})};
  });
  add("gather_batched", [](Module& m, Builder& b) {
    GatherDims d;
    d.offset_dims = {2};
    d.collapsed_slice_dims = {1};
    d.operand_batching_dims = {0};
    d.start_indices_batching_dims = {0};
    d.start_index_map = {1};
    d.index_vector_dim = 2;
    auto a = A(m, {T(D::F32, {2, 5, 3}), T(D::S32, {2, 4, 1})});
    return Values{b.gather(a[0], a[1], d, {1, 1, 3})};
  });
  add("gather_window_2d", [](Module& m, Builder& b) {  // 2x2 windows at (i, j) start points
    GatherDims d;
    d.offset_dims = {1, 2};
    d.start_index_map = {0, 1};
    d.index_vector_dim = 1;
    auto a = A(m, {T(D::F32, {4, 5}), T(D::S32, {3, 2})});
    return Values{b.gather(a[0], a[1], d, {2, 2}, false)};
  });
  ScatterDims rows;
  rows.update_window_dims = {1};
  rows.inserted_window_dims = {0};
  rows.scatter_dims_to_operand_dims = {0};
  rows.index_vector_dim = 1;
  add("scatter_add", [rows](Module& m, Builder& b) {
    auto a = A(m, {T(D::F32, {5, 3}), T(D::S32, {4, 1}), T(D::F32, {4, 3})});
    return b.scatter({a[0]}, a[1], {a[2]}, rows, sum_body);
  });
  add("scatter_replace_unique", [rows](Module& m, Builder& b) {
    int32_t idx[3] = {3, 0, 4};
    auto a = A(m, {T(D::F32, {5, 3}), T(D::F32, {3, 3})});
    return b.scatter({a[0]}, b.constant(T(D::S32, {3, 1}), idx, sizeof idx), {a[1]}, rows, [](Builder&, const Values& a) { return Values{a[1]}; },
                     true, true);
  });
  add("scatter_variadic", [rows](Module& m, Builder& b) {
    auto a = A(m, {T(D::F32, {5, 3}), T(D::S32, {5, 3}), T(D::S32, {4, 1}), T(D::F32, {4, 3}), T(D::S32, {4, 3})});
    return b.scatter({a[0], a[1]}, a[2], {a[3], a[4]}, rows,
                     [](Builder& r, const Values& a) { return Values{r.add(a[0], a[2]), r.max(a[1], a[3])}; });
  });

  // ---- sort ----
  add("sort_rows", [](Module& m, Builder& b) {
    return b.sort({m.arg(T(D::F32, {3, 5}))}, 1, false, [](Builder& r, const Values& a) {
      return Values{r.compare(a[0], a[1], Cmp::LT, CmpType::TotalOrder)};
    });
  });
  add("sort_desc_dim0_s32", [](Module& m, Builder& b) {
    return b.sort({m.arg(T(D::S32, {4, 3}))}, 0, true,
                  [](Builder& r, const Values& a) { return Values{r.compare(a[0], a[1], Cmp::GT)}; });
  });
  add("sort_key_value_stable", [](Module& m, Builder& b) {
    return b.sort({m.arg(T(D::S32, {8})), m.arg(T(D::F32, {8}))}, 0, true,
                  [](Builder& r, const Values& a) { return Values{r.compare(a[0], a[1], Cmp::LT)}; });
  });

  // ---- rng ----
  add("rng_three_fry", [](Module& m, Builder& b) {
    auto [st, bits] = b.rng_bit_generator(m.arg(T(D::U64, {2})), RngAlgorithm::ThreeFry, T(D::U32, {4, 5}));
    return Values{st, bits};
  });
  add("rng_philox", [](Module& m, Builder& b) {
    auto [st, bits] = b.rng_bit_generator(m.arg(T(D::U64, {3})), RngAlgorithm::Philox, T(D::U64, {7}));
    return Values{st, bits};
  });
  add("rng_default", [](Module& m, Builder& b) {
    auto [st, bits] = b.rng_bit_generator(m.arg(T(D::U64, {2})), RngAlgorithm::Default, T(D::U32, {3, 3}));
    return Values{st, bits};
  });

  // ---- control flow ----
  add("while_loop", [](Module& m, Builder& b) {  // i = 0; acc = x; while i < 5: acc += x (captured); i += 1
    Value x = m.arg(T(D::F32, {2, 3}));
    auto out = b.while_(
        {b.splat(T(D::S32), 0), x},
        [](Builder& r, const Values& a) { return Values{r.compare(a[0], r.splat(T(D::S32), 5), Cmp::LT)}; },
        [x](Builder& r, const Values& a) { return Values{r.add(a[0], r.splat(T(D::S32), 1)), r.add(a[1], x)}; });
    return out;
  });
  add("while_nested_reduce", [](Module& m, Builder& b) {  // 3 times: acc += sum(x), a reduce inside a loop body
    Value x = m.arg(T(D::F32, {4}));
    return b.while_(
        {b.splat(T(D::S32), 0), b.splat(T(D::F32), 0)},
        [](Builder& r, const Values& a) { return Values{r.compare(a[0], r.splat(T(D::S32), 3), Cmp::LT)}; },
        [x](Builder& r, const Values& a) {
          Value s = r.reduce({x}, {r.splat(T(D::F32), 0)}, {0}, sum_body)[0];
          return Values{r.add(a[0], r.splat(T(D::S32), 1)), r.add(a[1], s)};
        });
  });
  add("case_branches", [](Module& m, Builder& b) {
    Value i = m.arg(T(D::S32)), x = m.arg(T(D::F32, {3}));
    return b.case_(i, {[x](Builder& r, const Values&) { return Values{r.add(x, r.splat(T(D::F32, {3}), 1))}; },
                       [x](Builder& r, const Values&) { return Values{r.mul(x, r.splat(T(D::F32, {3}), 2))}; },
                       [x](Builder& r, const Values&) { return Values{r.unary(Op::Neg, x)}; }});
  });

  // ---- misc ----
  add("custom_call_sharding", [](Module& m, Builder& b) {
    CustomCallOptions o;
    o.extra = {{"mhlo.sharding", "\"{replicated}\""}};
    Value x = m.arg(T(D::F32, {2, 3}));
    Value y = b.custom_call("Sharding", {x}, {x.type}, o)[0];
    return Values{b.add(y, y)};
  });
  add("optimization_barrier", [](Module& m, Builder& b) {
    auto xs = b.optimization_barrier({m.arg(T(D::F32, {3})), m.arg(T(D::S32, {2}))});
    return Values{b.add(xs[0], xs[0]), xs[1]};
  });
  add("donated_argument", [](Module& m, Builder& b) {
    Value x = m.arg(T(D::F32, {4}), /*alias_output=*/0), y = m.arg(T(D::F32, {4}));
    return Values{b.add(x, y), b.sub(x, y)};
  });
  return s;
}

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += static_cast<char>(c);
    else if (c == '\n') o += "\\n";
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else o += static_cast<char>(c);
  }
  return o + "\"";
}

std::string json_types(const std::vector<TensorType>& ts) {
  std::string o = "[";
  for (size_t i = 0; i < ts.size(); ++i) {
    o += std::string(i ? ", " : "") + "{\"dtype\": \"" + std::string(info(ts[i].dtype).name) + "\", \"shape\": [";
    for (size_t k = 0; k < ts[i].dims.size(); ++k) o += (k ? ", " : "") + std::to_string(ts[i].dims[k]);
    o += "]}";
  }
  return o + "]";
}

}  // namespace

int main() {
  std::string out = "[\n";
  auto all = samples();
  for (size_t i = 0; i < all.size(); ++i) {
    Module m;
    m.ret(all[i].build(m, m.builder()));
    out += std::string(i ? ",\n" : "") + "{\"name\": " + json_string(all[i].name) +
           ", \"program\": " + json_string(m.str()) + ", \"inputs\": " + json_types(m.arg_types()) +
           ", \"outputs\": " + json_types(m.result_types()) + "}";
  }
  std::fputs((out + "\n]\n").c_str(), stdout);
  return 0;
}

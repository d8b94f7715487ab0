// Element types shared by the PJRT layer, the StableHLO emitter and the runtime.
// One enum, spelled once; each layer converts at its own boundary.
#pragma once
#include <cstdint>
#include <string_view>

namespace tpu {

enum class DType : uint8_t {
  Pred, S8, S16, S32, S64, U8, U16, U32, U64,
  F16, BF16, F32, F64, C64, C128,
  F8E5M2, F8E4M3FN, F8E5M2FNUZ, F8E4M3FNUZ, F8E8M0FNU,
  C32,  // complex32 (torch.chalf): no XLA type; stored as U32, computed as C64 (storage_dtype, compute_dtype)
};
inline constexpr int kNumDTypes = 21;

struct DTypeInfo {
  std::string_view name;  // short name, also numpy/ml_dtypes-ish ("f32", "bf16", "pred")
  std::string_view mlir;  // MLIR element type spelling ("f32", "i1", "ui8", "complex<f32>")
  int bytes;
  bool is_float, is_int, is_unsigned, is_complex;
};

inline constexpr DTypeInfo kDTypeInfo[kNumDTypes] = {
    {"pred", "i1", 1, false, false, false, false},
    {"s8", "i8", 1, false, true, false, false},
    {"s16", "i16", 2, false, true, false, false},
    {"s32", "i32", 4, false, true, false, false},
    {"s64", "i64", 8, false, true, false, false},
    {"u8", "ui8", 1, false, true, true, false},
    {"u16", "ui16", 2, false, true, true, false},
    {"u32", "ui32", 4, false, true, true, false},
    {"u64", "ui64", 8, false, true, true, false},
    {"f16", "f16", 2, true, false, false, false},
    {"bf16", "bf16", 2, true, false, false, false},
    {"f32", "f32", 4, true, false, false, false},
    {"f64", "f64", 8, true, false, false, false},
    {"c64", "complex<f32>", 8, false, false, false, true},
    {"c128", "complex<f64>", 16, false, false, false, true},
    {"f8e5m2", "f8E5M2", 1, true, false, false, false},
    {"f8e4m3fn", "f8E4M3FN", 1, true, false, false, false},
    {"f8e5m2fnuz", "f8E5M2FNUZ", 1, true, false, false, false},
    {"f8e4m3fnuz", "f8E4M3FNUZ", 1, true, false, false, false},
    {"f8e8m0fnu", "f8E8M0FNU", 1, true, false, false, false},
    {"c32", "complex<f16>", 4, false, false, false, true},
};

inline const DTypeInfo& info(DType t) { return kDTypeInfo[static_cast<int>(t)]; }
inline int byte_size(DType t) { return info(t).bytes; }

// A complex dtype's real and imaginary part type; any other dtype itself.
inline DType real_part(DType t) {
  return t == DType::C64 ? DType::F32 : t == DType::C128 ? DType::F64 : t == DType::C32 ? DType::F16 : t;
}

// A dtype XLA lacks lives in device buffers as one it has, of the same bytes (complex32: a u32 holding
// the real half in its low bytes, the imaginary half in its high ones, as in host memory) ...
inline DType storage_dtype(DType t) { return t == DType::C32 ? DType::U32 : t; }
// ... and is computed in a wider one: a rule never sees it (lower::read_view and to_storage convert).
inline DType compute_dtype(DType t) { return t == DType::C32 ? DType::C64 : t; }

// Returns false when `name` names no dtype.
inline bool dtype_from_name(std::string_view name, DType* out) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kDTypeInfo[i].name == name) { *out = static_cast<DType>(i); return true; }
  return false;
}

}  // namespace tpu

// Spellings of types, values, literals and attributes (see printer.h).
#include "hlo/printer.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace tpu::hlo {

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string TensorType::str() const {
  std::string s = "tensor<";
  for (int64_t d : dims) s += std::to_string(d) + "x";
  return s + std::string(info(dtype).mlir) + ">";
}

std::string Value::name() const { return id < 0 ? "%arg" + std::to_string(-id - 1) : "%" + std::to_string(id); }

namespace print {
namespace {

std::string join(const Dims& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s;
}

// Named dimension lists, empty ones left out: "a = [1], b = [2]".
std::string fields(std::initializer_list<std::pair<const char*, const Dims*>> fs) {
  std::string s;
  for (auto& [name, d] : fs)
    if (!d->empty()) s += cat(s.empty() ? "" : ", ", name, " = ", list(*d));
  return s;
}

// Bit patterns of +inf and nan per float type (0: none); MLIR takes them as hex literals.
struct Special {
  DType t;
  uint64_t inf, nan, sign;
};
constexpr Special kSpecial[] = {
    {DType::F16, 0x7C00, 0x7E00, 0x8000},
    {DType::BF16, 0x7F80, 0x7FC0, 0x8000},
    {DType::F32, 0x7F800000, 0x7FC00000, 0x80000000},
    {DType::F64, 0x7FF0000000000000, 0x7FF8000000000000, 0x8000000000000000},
    {DType::F8E5M2, 0x7C, 0x7E, 0x80},
    {DType::F8E4M3FN, 0, 0x7F, 0x80},
    {DType::F8E5M2FNUZ, 0, 0x80, 0},
    {DType::F8E4M3FNUZ, 0, 0x80, 0},
    {DType::F8E8M0FNU, 0, 0xFF, 0},
};

std::string float_lit(DType t, double v) {
  char buf[64];
  if (std::isfinite(v)) {
    std::snprintf(buf, sizeof buf, "%.17e", v);  // always has a '.', as MLIR float literals must
    return buf;
  }
  for (const Special& s : kSpecial) {
    if (s.t != t) continue;
    uint64_t bitsv = std::isnan(v) ? s.nan : s.inf ? (s.inf | (v < 0 ? s.sign : 0)) : 0;
    if (!bitsv) break;
    std::snprintf(buf, sizeof buf, "0x%0*llX", 2 * byte_size(t), static_cast<unsigned long long>(bitsv));
    return buf;
  }
  throw DTypeError(cat("stablehlo.constant: ", v, " is not representable in ", info(t).mlir));
}

std::string scalar_lit(DType t, double re, double im) {
  const DTypeInfo& i = info(t);
  if (t == DType::Pred) return re != 0 ? "true" : "false";
  if (i.is_complex) {
    DType part = real_part(t);
    return cat("(", float_lit(part, re), ", ", float_lit(part, im), ")");
  }
  if (i.is_float) return float_lit(t, re);
  double lo = i.is_unsigned ? 0 : -std::ldexp(1.0, 8 * i.bytes - 1);
  double end = std::ldexp(1.0, 8 * i.bytes - (i.is_unsigned ? 0 : 1));  // first value past the range
  if (!(re == std::floor(re)) || re < lo || re >= end)
    throw DTypeError(cat("stablehlo.constant: ", re, " is not representable in ", i.mlir));
  return i.is_unsigned ? std::to_string(static_cast<unsigned long long>(re)) : std::to_string(static_cast<long long>(re));
}

void nest_bools(std::string& s, const Dims& d, size_t k, const uint8_t*& p) {
  if (k == d.size()) {
    s += *p++ ? "true" : "false";
    return;
  }
  s += '[';
  for (int64_t i = 0; i < d[k]; ++i) {
    if (i) s += ", ";
    nest_bools(s, d, k + 1, p);
  }
  s += ']';
}

}  // namespace

std::string list(const Dims& d) { return "[" + join(d) + "]"; }
std::string array(const Dims& d) { return d.empty() ? "array<i64>" : "array<i64: " + join(d) + ">"; }
std::string i64(int64_t v) { return std::to_string(v) + " : i64"; }
std::string boolean(bool v) { return v ? "true" : "false"; }

std::string string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += cat('\\', c);
    else if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
    else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "\\%02X", c);
      out += buf;
    }
  }
  return out + "\"";
}

std::string padding(const Padding& p) {
  std::string s;
  for (size_t i = 0; i < p.size(); ++i) s += cat(i ? ", " : "", "[", p[i].first, ", ", p[i].second, "]");
  return cat("dense<", p.empty() ? "" : "[" + s + "]", "> : tensor<", p.size(), "x2xi64>");
}

std::string cmp(Cmp dir) {
  static const char* n[] = {"EQ", "NE", "GE", "GT", "LE", "LT"};
  return cat("#stablehlo<comparison_direction ", n[static_cast<int>(dir)], ">");
}
std::string cmp_type(CmpType t) {
  static const char* n[] = {"NOTYPE", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
  return cat("#stablehlo<comparison_type ", n[static_cast<int>(t)], ">");
}
std::string precision(Precision lhs, Precision rhs) {
  static const char* n[] = {"DEFAULT", "HIGH", "HIGHEST"};
  return cat("[#stablehlo<precision ", n[static_cast<int>(lhs)], ">, #stablehlo<precision ",
             n[static_cast<int>(rhs)], ">]");
}
std::string rng(RngAlgorithm a) {
  static const char* n[] = {"DEFAULT", "THREE_FRY", "PHILOX"};
  return cat("#stablehlo<rng_algorithm ", n[static_cast<int>(a)], ">");
}
std::string fft(FftType t) {
  static const char* n[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
  return cat("#stablehlo<fft_type ", n[static_cast<int>(t)], ">");
}

std::string dot(const DotDims& d) {
  return cat("#stablehlo.dot<",
             fields({{"lhs_batching_dimensions", &d.lhs_batch}, {"rhs_batching_dimensions", &d.rhs_batch},
                     {"lhs_contracting_dimensions", &d.lhs_contracting},
                     {"rhs_contracting_dimensions", &d.rhs_contracting}}),
             ">");
}

std::string conv(const ConvDims& d) {
  auto layout = [](int64_t a, char ca, int64_t b, char cb, const Dims& sp) {
    std::vector<std::string> slot(sp.size() + 2);
    slot.at(a) = ca;
    slot.at(b) = cb;
    for (size_t i = 0; i < sp.size(); ++i) slot.at(sp[i]) = std::to_string(i);
    std::string s;
    for (size_t i = 0; i < slot.size(); ++i) s += (i ? ", " : "") + slot[i];
    return "[" + s + "]";
  };
  return cat("#stablehlo.conv<", layout(d.in_batch, 'b', d.in_feature, 'f', d.in_spatial), "x",
             layout(d.k_in, 'i', d.k_out, 'o', d.k_spatial), "->",
             layout(d.out_batch, 'b', d.out_feature, 'f', d.out_spatial), ">");
}

std::string gather(const GatherDims& d) {
  std::string f = fields({{"offset_dims", &d.offset_dims}, {"collapsed_slice_dims", &d.collapsed_slice_dims},
                          {"operand_batching_dims", &d.operand_batching_dims},
                          {"start_indices_batching_dims", &d.start_indices_batching_dims},
                          {"start_index_map", &d.start_index_map}});
  return cat("#stablehlo.gather<", f, f.empty() ? "" : ", ", "index_vector_dim = ", d.index_vector_dim, ">");
}

std::string scatter(const ScatterDims& d) {
  std::string f = fields({{"update_window_dims", &d.update_window_dims},
                          {"inserted_window_dims", &d.inserted_window_dims},
                          {"input_batching_dims", &d.input_batching_dims},
                          {"scatter_indices_batching_dims", &d.scatter_indices_batching_dims},
                          {"scatter_dims_to_operand_dims", &d.scatter_dims_to_operand_dims}});
  return cat("#stablehlo.scatter<", f, f.empty() ? "" : ", ", "index_vector_dim = ", d.index_vector_dim, ">");
}

std::string splat(const TensorType& t, double re, double im) {
  return cat("dense<", scalar_lit(t.dtype, re, im), "> : ", t.str());
}

std::string dense(const TensorType& t, const void* data, size_t nbytes) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  std::string body;
  if (t.numel() == 0) {
  } else if (t.dtype == DType::Pred) {  // i1 has no agreed raw layout: spell the elements
    if (nbytes == 1) body = *p ? "true" : "false";
    else nest_bools(body, t.dims, 0, p);
  } else {
    static const char* hex = "0123456789ABCDEF";
    body = "\"0x";
    for (size_t i = 0; i < nbytes; ++i) body += {hex[p[i] >> 4], hex[p[i] & 15]};
    body += "\"";
  }
  return cat("dense<", body, "> : ", t.str());
}

}  // namespace print
}  // namespace tpu::hlo

// Shape rules (see shape.h) and the op table.
#include "hlo/shape.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "hlo/printer.h"

namespace tpu::hlo {
namespace {

using print::cat;
using print::list;

// Element-type classes an elementwise op accepts, and how its result element type follows from the operand's.
enum : uint8_t { B = 1, S = 2, U = 4, F = 8, C = 16, I = S | U, N = S | U | F | C };
enum class Res : uint8_t { Same, Pred, Real, Complex, None };
struct OpInfo {
  const char* name;
  uint8_t arity = 0, types = 0;  // 0: not elementwise
  Res res = Res::None;
};

constexpr OpInfo kOps[] = {
    {"abs", 1, S | F | C, Res::Real}, {"negate", 1, N, Res::Same}, {"exponential", 1, F | C, Res::Same},
    {"exponential_minus_one", 1, F | C, Res::Same}, {"log", 1, F | C, Res::Same},
    {"log_plus_one", 1, F | C, Res::Same}, {"sqrt", 1, F | C, Res::Same}, {"rsqrt", 1, F | C, Res::Same},
    {"cbrt", 1, F | C, Res::Same}, {"tanh", 1, F | C, Res::Same}, {"logistic", 1, F | C, Res::Same},
    {"sine", 1, F | C, Res::Same}, {"cosine", 1, F | C, Res::Same}, {"tan", 1, F | C, Res::Same},
    {"floor", 1, F, Res::Same}, {"ceil", 1, F, Res::Same}, {"round_nearest_even", 1, F, Res::Same},
    {"round_nearest_afz", 1, F, Res::Same}, {"sign", 1, S | F | C, Res::Same}, {"not", 1, B | I, Res::Same},
    {"popcnt", 1, I, Res::Same}, {"is_finite", 1, F, Res::Pred}, {"real", 1, F | C, Res::Real},
    {"imag", 1, F | C, Res::Real}, {"count_leading_zeros", 1, I, Res::Same},
    // binary
    {"add", 2, B | N, Res::Same}, {"subtract", 2, N, Res::Same}, {"multiply", 2, B | N, Res::Same},
    {"divide", 2, N, Res::Same}, {"remainder", 2, I | F, Res::Same}, {"power", 2, N, Res::Same},
    {"maximum", 2, B | I | F, Res::Same}, {"minimum", 2, B | I | F, Res::Same}, {"atan2", 2, F | C, Res::Same},
    {"and", 2, B | I, Res::Same}, {"or", 2, B | I, Res::Same}, {"xor", 2, B | I, Res::Same},
    {"shift_left", 2, I, Res::Same}, {"shift_right_arithmetic", 2, I, Res::Same},
    {"shift_right_logical", 2, I, Res::Same}, {"complex", 2, F, Res::Complex},
    // the rest: checked by their own rules below
    {"compare"}, {"select"}, {"clamp"}, {"convert"}, {"bitcast_convert"}, {"constant"}, {"iota"},
    {"broadcast_in_dim"}, {"reshape"}, {"transpose"}, {"reverse"}, {"slice"}, {"dynamic_slice"},
    {"dynamic_update_slice"}, {"concatenate"}, {"pad"}, {"reduce"}, {"reduce_window"}, {"select_and_scatter"},
    {"dot_general"}, {"convolution"}, {"gather"}, {"scatter"}, {"sort"}, {"rng_bit_generator"}, {"fft"}, {"while"},
    {"case"}, {"custom_call"}, {"optimization_barrier"}, {"return"},
};
static_assert(std::size(kOps) == static_cast<size_t>(Op::kCount), "one kOps row per Op");

const OpInfo& row(Op op) { return kOps[static_cast<int>(op)]; }

uint8_t cls(DType t) {
  const DTypeInfo& i = info(t);
  return t == DType::Pred ? B : i.is_complex ? C : i.is_float ? F : i.is_unsigned ? U : S;
}
std::string cls_names(uint8_t m) {
  static const char* names[] = {"boolean", "signed integer", "unsigned integer", "floating-point", "complex"};
  std::string s;
  for (int i = 0; i < 5; ++i)
    if (m & (1 << i)) s += (s.empty() ? "" : ", ") + std::string(names[i]);
  return s;
}

[[noreturn]] void fail(Op op, const std::string& msg) { throw Error(op_name(op) + ": " + msg); }
[[noreturn]] void fail_dtype(Op op, DType t, const std::string& takes) {
  throw DTypeError(op_name(op) + ": " + cat("element type ", info(t).mlir, " not supported (takes ", takes, ")"));
}

void check_type(Op op, const TensorType& t) {
  for (int64_t d : t.dims)
    if (d < 0) fail(op, cat("dynamic or negative dimension in ", t.str()));
}
void check_types(Op op, const std::vector<TensorType>& ts) {
  for (auto& t : ts) check_type(op, t);
}
void same(Op op, const TensorType& a, const TensorType& b, const char* what = "operand") {
  if (a.dims != b.dims) fail(op, cat(what, " shapes differ: ", a.str(), " vs ", b.str()));
  if (a.dtype != b.dtype) fail(op, cat(what, " element types differ: ", a.str(), " vs ", b.str()));
}
void check_class(Op op, uint8_t allowed, DType t) {
  if (!(allowed & cls(t)))
    fail_dtype(op, t, cls_names(allowed));
}
void check_scalar(Op op, const TensorType& t, const char* what) {
  if (t.rank() != 0) fail(op, cat(what, " must be rank 0, got ", t.str()));
}
void check_dim(Op op, int64_t d, int64_t rank, const char* what) {
  if (d < 0 || d >= rank) fail(op, cat(what, " ", d, " out of range for rank ", rank));
}
// Each in [0, rank), no repeats.
void check_dims(Op op, const Dims& ds, int64_t rank, const char* what) {
  std::set<int64_t> seen;
  for (int64_t d : ds) {
    check_dim(op, d, rank, what);
    if (!seen.insert(d).second) fail(op, cat(what, " ", list(ds), " repeat dimension ", d));
  }
}
void check_size(Op op, const Dims& ds, int64_t n, const char* what) {
  if (static_cast<int64_t>(ds.size()) != n) fail(op, cat(what, " ", list(ds), " must have ", n, " entries"));
}
bool contains(const Dims& ds, int64_t d) { return std::find(ds.begin(), ds.end(), d) != ds.end(); }
Dims fill(const Dims& d, int64_t rank, int64_t v) { return d.empty() ? Dims(rank, v) : d; }
int bits(DType t) { return t == DType::Pred ? 1 : 8 * byte_size(t); }

// Size of a strided window sweep over a dilated, padded dimension.
int64_t window_out(int64_t in, int64_t base_dil, int64_t lo, int64_t hi, int64_t win, int64_t win_dil,
                   int64_t stride) {
  int64_t padded = lo + (in == 0 ? 0 : (in - 1) * base_dil + 1) + hi;
  int64_t window = (win - 1) * win_dil + 1;
  return padded < window ? 0 : (padded - window) / stride + 1;
}

void check_starts(Op op, const std::vector<TensorType>& starts, int64_t rank) {
  if (static_cast<int64_t>(starts.size()) != rank)
    fail(op, cat("got ", starts.size(), " start indices for rank ", rank));
  for (auto& s : starts) {
    check_scalar(op, s, "start index");
    check_class(op, I, s.dtype);
    if (s.dtype != starts[0].dtype) fail(op, cat("start indices differ in type: ", s.str(), " vs ", starts[0].str()));
  }
}

}  // namespace

std::string op_name(Op op) { return cat("stablehlo.", row(op).name); }
int op_arity(Op op) { return row(op).arity; }

ConvDims ConvDims::parse(const std::string& lhs, const std::string& rhs, const std::string& out) {
  auto one = [](const std::string& s, char a, char b, int64_t* pa, int64_t* pb, Dims* sp) {
    if (s.size() < 2) throw Error(cat("ConvDims::parse: layout '", s, "' too short"));
    *pa = *pb = -1;
    sp->assign(s.size() - 2, -1);
    for (size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      int64_t k = c - '0';
      int64_t* slot = c == a ? pa : c == b ? pb : (k >= 0 && k < (int64_t)sp->size()) ? &(*sp)[k] : nullptr;
      if (!slot || *slot != -1) throw Error(cat("ConvDims::parse: bad layout '", s, "'"));
      *slot = static_cast<int64_t>(i);
    }
  };
  ConvDims d;
  one(lhs, 'b', 'f', &d.in_batch, &d.in_feature, &d.in_spatial);
  one(rhs, 'i', 'o', &d.k_in, &d.k_out, &d.k_spatial);
  one(out, 'b', 'f', &d.out_batch, &d.out_feature, &d.out_spatial);
  if (lhs.size() != rhs.size() || lhs.size() != out.size())
    throw Error(cat("ConvDims::parse: layouts differ in rank: ", lhs, " ", rhs, " ", out));
  return d;
}

namespace shape {

TensorType unary(Op op, const TensorType& x) {
  if (op_arity(op) != 1) fail(op, "not a unary elementwise op");
  check_type(op, x);
  check_class(op, row(op).types, x.dtype);
  DType r = row(op).res == Res::Pred ? DType::Pred : row(op).res == Res::Real ? real_part(x.dtype) : x.dtype;
  return {r, x.dims};
}

TensorType binary(Op op, const TensorType& a, const TensorType& b) {
  if (op_arity(op) != 2) fail(op, "not a binary elementwise op");
  check_type(op, a);
  check_type(op, b);
  same(op, a, b);
  check_class(op, row(op).types, a.dtype);
  if (row(op).res != Res::Complex) return a;
  if (a.dtype != DType::F32 && a.dtype != DType::F64)
    fail_dtype(op, a.dtype, "f32 or f64");
  return {a.dtype == DType::F32 ? DType::C64 : DType::C128, a.dims};
}

CmpType compare_type(DType t) {
  uint8_t c = cls(t);
  return c & (F | C) ? CmpType::Float : c == S ? CmpType::Signed : CmpType::Unsigned;
}

TensorType compare(const TensorType& a, const TensorType& b, Cmp dir, CmpType type) {
  const Op op = Op::Compare;
  check_type(op, a);
  check_type(op, b);
  same(op, a, b);
  uint8_t c = cls(a.dtype);
  if (c == C && dir != Cmp::EQ && dir != Cmp::NE) fail_dtype(op, a.dtype, "real operands, or complex for EQ or NE");
  if (type == CmpType::Auto) type = compare_type(a.dtype);
  bool ok = type == CmpType::Signed     ? c == S
            : type == CmpType::Unsigned ? (c == U || c == B)
                                        : (c == F || (c == C && type == CmpType::Float));
  if (!ok) fail(op, cat("compare type ", print::cmp_type(type), " does not fit element type ", info(a.dtype).mlir));
  return {DType::Pred, a.dims};
}

TensorType select(const TensorType& pred, const TensorType& on_true, const TensorType& on_false) {
  const Op op = Op::Select;
  check_types(op, {pred, on_true, on_false});
  if (pred.dtype != DType::Pred) fail(op, cat("predicate must be i1, got ", pred.str()));
  same(op, on_true, on_false, "branch");
  if (pred.rank() != 0 && pred.dims != on_true.dims)
    fail(op, cat("predicate ", pred.str(), " must be rank 0 or match ", on_true.str()));
  return on_true;
}

TensorType clamp(const TensorType& lo, const TensorType& x, const TensorType& hi) {
  const Op op = Op::Clamp;
  check_types(op, {lo, x, hi});
  for (auto* b : {&lo, &hi}) {
    if (b->dtype != x.dtype) fail(op, cat("bound ", b->str(), " differs in element type from ", x.str()));
    if (b->rank() != 0 && b->dims != x.dims) fail(op, cat("bound ", b->str(), " must be rank 0 or match ", x.str()));
  }
  return x;
}

TensorType convert(const TensorType& x, DType to) {
  check_type(Op::Convert, x);
  if (cls(x.dtype) == C && cls(to) != C)
    fail_dtype(Op::Convert, x.dtype, cat("real operands for a real result type ", info(to).mlir));
  return {to, x.dims};
}

TensorType bitcast_convert(const TensorType& x, DType to) {
  const Op op = Op::BitcastConvert;
  check_type(op, x);
  for (DType t : {x.dtype, to})
    if (cls(t) & (B | C)) fail_dtype(op, t, "no bool or complex");
  int bi = bits(x.dtype), bo = bits(to);
  Dims d = x.dims;
  if (bo < bi) d.push_back(bi / bo);
  if (bo > bi) {
    if (d.empty() || d.back() != bo / bi)
      fail(op, cat(x.str(), " to ", info(to).mlir, " needs a last dimension of size ", bo / bi));
    d.pop_back();
  }
  return {to, d};
}

void constant(const TensorType& t, size_t nbytes) {
  check_type(Op::Constant, t);
  size_t all = static_cast<size_t>(t.numel()) * byte_size(t.dtype);
  if (nbytes != all && nbytes != static_cast<size_t>(byte_size(t.dtype)))
    fail(Op::Constant, cat("got ", nbytes, " bytes for ", t.str(), " (want ", all, ", or one element)"));
}

void iota(const TensorType& t, int64_t dim) {
  check_type(Op::Iota, t);
  check_dim(Op::Iota, dim, t.rank(), "iota_dimension");
  check_class(Op::Iota, N, t.dtype);
}

TensorType broadcast_in_dim(const TensorType& x, const Dims& out_dims, const Dims& bdims) {
  const Op op = Op::BroadcastInDim;
  TensorType out{x.dtype, out_dims};
  check_type(op, x);
  check_type(op, out);
  check_size(op, bdims, x.rank(), "broadcast_dimensions");
  check_dims(op, bdims, out.rank(), "broadcast dimension");
  for (size_t i = 0; i < bdims.size(); ++i)
    if (x.dims[i] != 1 && x.dims[i] != out_dims[bdims[i]])
      fail(op, cat("operand dimension ", i, " (size ", x.dims[i], ") cannot broadcast to result dimension ",
                   bdims[i], " (size ", out_dims[bdims[i]], ")"));
  return out;
}

TensorType reshape(const TensorType& x, const Dims& dims) {
  TensorType out{x.dtype, dims};
  check_type(Op::Reshape, x);
  check_type(Op::Reshape, out);
  if (out.numel() != x.numel()) fail(Op::Reshape, cat("cannot reshape ", x.str(), " to ", out.str()));
  return out;
}

TensorType transpose(const TensorType& x, const Dims& perm) {
  check_type(Op::Transpose, x);
  check_size(Op::Transpose, perm, x.rank(), "permutation");
  check_dims(Op::Transpose, perm, x.rank(), "permutation entry");
  TensorType out{x.dtype, {}};
  for (int64_t p : perm) out.dims.push_back(x.dims[p]);
  return out;
}

TensorType reverse(const TensorType& x, const Dims& dims) {
  check_type(Op::Reverse, x);
  check_dims(Op::Reverse, dims, x.rank(), "dimension");
  return x;
}

TensorType slice(const TensorType& x, const Dims& start, const Dims& limit, const Dims& strides_in) {
  const Op op = Op::Slice;
  check_type(op, x);
  Dims strides = fill(strides_in, x.rank(), 1);
  check_size(op, start, x.rank(), "start_indices");
  check_size(op, limit, x.rank(), "limit_indices");
  check_size(op, strides, x.rank(), "strides");
  TensorType out{x.dtype, {}};
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > x.dims[i])
      fail(op, cat("bounds [", start[i], ", ", limit[i], ") invalid for dimension ", i, " of ", x.str()));
    if (strides[i] <= 0) fail(op, cat("stride ", strides[i], " must be positive"));
    out.dims.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
  }
  return out;
}

TensorType dynamic_slice(const TensorType& x, const std::vector<TensorType>& starts, const Dims& sizes) {
  const Op op = Op::DynamicSlice;
  check_type(op, x);
  check_starts(op, starts, x.rank());
  check_size(op, sizes, x.rank(), "slice_sizes");
  for (int64_t i = 0; i < x.rank(); ++i)
    if (sizes[i] < 0 || sizes[i] > x.dims[i])
      fail(op, cat("slice size ", sizes[i], " invalid for dimension ", i, " of ", x.str()));
  return {x.dtype, sizes};
}

TensorType dynamic_update_slice(const TensorType& x, const TensorType& update, const std::vector<TensorType>& starts) {
  const Op op = Op::DynamicUpdateSlice;
  check_types(op, {x, update});
  if (update.dtype != x.dtype || update.rank() != x.rank())
    fail(op, cat("update ", update.str(), " does not fit operand ", x.str()));
  for (int64_t i = 0; i < x.rank(); ++i)
    if (update.dims[i] > x.dims[i]) fail(op, cat("update ", update.str(), " larger than operand ", x.str()));
  check_starts(op, starts, x.rank());
  return x;
}

TensorType concatenate(const std::vector<TensorType>& xs, int64_t dim) {
  const Op op = Op::Concatenate;
  if (xs.empty()) fail(op, "needs at least one operand");
  check_types(op, xs);
  check_dim(op, dim, xs[0].rank(), "dimension");
  TensorType out = xs[0];
  out.dims[dim] = 0;
  for (auto& x : xs) {
    TensorType a = x, b = xs[0];
    if (a.rank() == b.rank()) a.dims[dim] = b.dims[dim] = 0;
    if (a != b) fail(op, cat("operands ", xs[0].str(), " and ", x.str(), " differ outside dimension ", dim));
    out.dims[dim] += x.dims[dim];
  }
  return out;
}

TensorType pad(const TensorType& x, const TensorType& pv, const Dims& low, const Dims& high, const Dims& interior_in) {
  const Op op = Op::Pad;
  check_types(op, {x, pv});
  check_scalar(op, pv, "padding value");
  if (pv.dtype != x.dtype) fail(op, cat("padding value ", pv.str(), " differs in element type from ", x.str()));
  Dims interior = fill(interior_in, x.rank(), 0);
  check_size(op, low, x.rank(), "edge_padding_low");
  check_size(op, high, x.rank(), "edge_padding_high");
  check_size(op, interior, x.rank(), "interior_padding");
  TensorType out{x.dtype, {}};
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (interior[i] < 0) fail(op, cat("interior padding ", interior[i], " must be non-negative"));
    int64_t d = low[i] + high[i] + x.dims[i] + std::max<int64_t>(x.dims[i] - 1, 0) * interior[i];
    if (d < 0) fail(op, cat("padding leaves dimension ", i, " of ", x.str(), " with negative size ", d));
    out.dims.push_back(d);
  }
  return out;
}

// Shared by reduce and reduce_window: N inputs of one shape, N rank-0 inits of matching element types.
static void check_inits(Op op, const std::vector<TensorType>& inputs, const std::vector<TensorType>& inits) {
  if (inputs.empty()) fail(op, "needs at least one input");
  if (inits.size() != inputs.size()) fail(op, cat("got ", inputs.size(), " inputs but ", inits.size(), " inits"));
  check_types(op, inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dims != inputs[0].dims) fail(op, cat("input shapes differ: ", inputs[0].str(), " vs ", inputs[i].str()));
    check_scalar(op, inits[i], "init value");
    if (inits[i].dtype != inputs[i].dtype)
      fail(op, cat("init ", inits[i].str(), " differs in element type from input ", inputs[i].str()));
  }
}

std::vector<TensorType> reduce(const std::vector<TensorType>& inputs, const std::vector<TensorType>& inits,
                               const Dims& dims) {
  check_inits(Op::Reduce, inputs, inits);
  check_dims(Op::Reduce, dims, inputs[0].rank(), "dimension");
  std::vector<TensorType> out;
  for (auto& in : inputs) {
    TensorType t{in.dtype, {}};
    for (int64_t i = 0; i < in.rank(); ++i)
      if (!contains(dims, i)) t.dims.push_back(in.dims[i]);
    out.push_back(t);
  }
  return out;
}

// v (defaults filled) must have n entries, all positive.
static Dims positive(Op op, const Dims& v_in, int64_t n, int64_t dflt, const char* what) {
  Dims v = fill(v_in, n, dflt);
  check_size(op, v, n, what);
  for (int64_t x : v)
    if (x <= 0) fail(op, cat(what, " ", list(v), " must be positive"));
  return v;
}
static Padding full_padding(Op op, const Padding& p, int64_t n) {
  if (!p.empty() && static_cast<int64_t>(p.size()) != n) fail(op, cat("padding must have ", n, " (low, high) pairs"));
  return p.empty() ? Padding(n, {0, 0}) : p;
}

Window full_window(Op op, const Window& w, int64_t rank) {
  return {positive(op, w.dims, rank, 0, "window_dimensions"), positive(op, w.strides, rank, 1, "window_strides"),
          positive(op, w.base_dilations, rank, 1, "base_dilations"),
          positive(op, w.window_dilations, rank, 1, "window_dilations"), full_padding(op, w.padding, rank)};
}

std::vector<TensorType> reduce_window(const std::vector<TensorType>& inputs, const std::vector<TensorType>& inits,
                                      const Window& w) {
  const Op op = Op::ReduceWindow;
  check_inits(op, inputs, inits);
  const TensorType& x = inputs[0];
  Window f = full_window(op, w, x.rank());
  Dims d;
  for (int64_t i = 0; i < x.rank(); ++i)
    d.push_back(window_out(x.dims[i], f.base_dilations[i], f.padding[i].first, f.padding[i].second, f.dims[i],
                           f.window_dilations[i], f.strides[i]));
  std::vector<TensorType> out;
  for (auto& in : inputs) out.push_back({in.dtype, d});
  return out;
}

TensorType select_and_scatter(const TensorType& operand, const TensorType& source, const TensorType& init,
                              const Window& w) {
  const Op op = Op::SelectAndScatter;
  if (!w.base_dilations.empty() || !w.window_dilations.empty()) fail(op, "takes no dilations");
  check_types(op, {operand, source, init});
  check_scalar(op, init, "init value");
  if (init.dtype != operand.dtype || source.dtype != operand.dtype)
    fail(op, cat("element types differ: ", operand.str(), ", ", source.str(), ", ", init.str()));
  TensorType want = reduce_window({operand}, {init}, w)[0];
  if (source.dims != want.dims) fail(op, cat("source ", source.str(), " must have the window sweep's shape ", want.str()));
  return operand;
}

std::vector<TensorType> sort(const std::vector<TensorType>& inputs, int64_t dim) {
  const Op op = Op::Sort;
  if (inputs.empty()) fail(op, "needs at least one input");
  check_types(op, inputs);
  for (auto& in : inputs)
    if (in.dims != inputs[0].dims) fail(op, cat("input shapes differ: ", inputs[0].str(), " vs ", in.str()));
  check_dim(op, dim, inputs[0].rank(), "dimension");
  return inputs;
}

TensorType dot_general(const TensorType& lhs, const TensorType& rhs, const DotDims& d, std::optional<DType> rt) {
  const Op op = Op::DotGeneral;
  check_types(op, {lhs, rhs});
  if (lhs.dtype != rhs.dtype) fail(op, cat("operand element types differ: ", lhs.str(), " vs ", rhs.str()));
  check_class(op, N, lhs.dtype);
  if (d.lhs_batch.size() != d.rhs_batch.size())
    fail(op, cat("batching dimensions differ in count: ", list(d.lhs_batch), " vs ", list(d.rhs_batch)));
  if (d.lhs_contracting.size() != d.rhs_contracting.size())
    fail(op, cat("contracting dimensions differ in count: ", list(d.lhs_contracting), " vs ", list(d.rhs_contracting)));
  Dims lall = d.lhs_batch, rall = d.rhs_batch;
  lall.insert(lall.end(), d.lhs_contracting.begin(), d.lhs_contracting.end());
  rall.insert(rall.end(), d.rhs_contracting.begin(), d.rhs_contracting.end());
  check_dims(op, lall, lhs.rank(), "lhs batching/contracting dimension");
  check_dims(op, rall, rhs.rank(), "rhs batching/contracting dimension");
  for (size_t i = 0; i < lall.size(); ++i)
    if (lhs.dims[lall[i]] != rhs.dims[rall[i]])
      fail(op, cat(i < d.lhs_batch.size() ? "batching" : "contracting", " dimension sizes differ: lhs dim ", lall[i],
                   " of ", lhs.str(), " vs rhs dim ", rall[i], " of ", rhs.str()));
  TensorType out{rt.value_or(lhs.dtype), {}};
  if (rt && (cls(*rt) == B || (cls(*rt) == C) != (cls(lhs.dtype) == C)))
    fail(op, cat("result element type ", info(*rt).mlir, " does not fit operands ", lhs.str()));
  for (int64_t b : d.lhs_batch) out.dims.push_back(lhs.dims[b]);
  for (int64_t i = 0; i < lhs.rank(); ++i)
    if (!contains(lall, i)) out.dims.push_back(lhs.dims[i]);
  for (int64_t i = 0; i < rhs.rank(); ++i)
    if (!contains(rall, i)) out.dims.push_back(rhs.dims[i]);
  return out;
}

TensorType convolution(const TensorType& lhs, const TensorType& rhs, const ConvConfig& c) {
  const Op op = Op::Convolution;
  const ConvDims& d = c.dims;
  check_types(op, {lhs, rhs});
  if (lhs.dtype != rhs.dtype) fail(op, cat("operand element types differ: ", lhs.str(), " vs ", rhs.str()));
  check_class(op, N, lhs.dtype);
  if (lhs.rank() < 2 || rhs.rank() != lhs.rank())
    fail(op, cat("operands must have equal rank >= 2: ", lhs.str(), ", ", rhs.str()));
  const int64_t r = lhs.rank(), n = r - 2;
  auto layout = [&](int64_t a, int64_t b, const Dims& sp, const char* what) {
    Dims all = sp;
    all.push_back(a);
    all.push_back(b);
    check_size(op, sp, n, what);
    check_dims(op, all, r, what);
  };
  layout(d.in_batch, d.in_feature, d.in_spatial, "input dimension");
  layout(d.k_in, d.k_out, d.k_spatial, "kernel dimension");
  layout(d.out_batch, d.out_feature, d.out_spatial, "output dimension");
  const int64_t fg = c.feature_group_count, bg = c.batch_group_count;
  if (fg <= 0 || bg <= 0 || (fg > 1 && bg > 1))
    fail(op, cat("group counts ", fg, ", ", bg, " must be positive and not both above 1"));
  const int64_t in_f = lhs.dims[d.in_feature], k_in = rhs.dims[d.k_in], k_out = rhs.dims[d.k_out];
  if (in_f % fg != 0 || in_f / fg != k_in)
    fail(op, cat("input features ", in_f, " / feature_group_count ", fg, " must equal kernel input features ", k_in));
  if (k_out % fg != 0 || k_out % bg != 0)
    fail(op, cat("kernel output features ", k_out, " must divide by the group counts ", fg, ", ", bg));
  if (lhs.dims[d.in_batch] % bg != 0)
    fail(op, cat("batch ", lhs.dims[d.in_batch], " must divide by batch_group_count ", bg));
  Dims win, str = positive(op, c.window_strides, n, 1, "window_strides"),
            ld = positive(op, c.lhs_dilation, n, 1, "lhs_dilation"), rd = positive(op, c.rhs_dilation, n, 1, "rhs_dilation");
  Padding pad = full_padding(op, c.padding, n);
  for (int64_t i = 0; i < n; ++i) win.push_back(rhs.dims[d.k_spatial[i]]);
  if (c.result_dtype && (cls(*c.result_dtype) == B || (cls(*c.result_dtype) == C) != (cls(lhs.dtype) == C)))
    fail(op, cat("result element type ", info(*c.result_dtype).mlir, " does not fit operands ", lhs.str()));
  TensorType out{c.result_dtype.value_or(lhs.dtype), Dims(r)};
  out.dims[d.out_batch] = lhs.dims[d.in_batch] / bg;
  out.dims[d.out_feature] = k_out;
  for (int64_t i = 0; i < n; ++i)
    out.dims[d.out_spatial[i]] = window_out(lhs.dims[d.in_spatial[i]], ld[i], pad[i].first, pad[i].second, win[i],
                                            rd[i], str[i]);
  return out;
}

TensorType gather(const TensorType& operand, const TensorType& indices, const GatherDims& d, const Dims& sizes) {
  const Op op = Op::Gather;
  check_types(op, {operand, indices});
  check_class(op, I, indices.dtype);
  const int64_t r = operand.rank(), ivd = d.index_vector_dim;
  if (ivd < 0 || ivd > indices.rank()) fail(op, cat("index_vector_dim ", ivd, " out of range for ", indices.str()));
  Dims idx = indices.dims;
  if (ivd == indices.rank()) idx.push_back(1);
  check_size(op, sizes, r, "slice_sizes");
  check_size(op, d.start_index_map, idx[ivd], "start_index_map");
  check_dims(op, d.start_index_map, r, "start_index_map entry");
  Dims dropped = d.collapsed_slice_dims;
  dropped.insert(dropped.end(), d.operand_batching_dims.begin(), d.operand_batching_dims.end());
  check_dims(op, dropped, r, "collapsed/batching dimension");
  if (d.operand_batching_dims.size() != d.start_indices_batching_dims.size())
    fail(op, "operand_batching_dims and start_indices_batching_dims differ in count");
  check_dims(op, d.start_indices_batching_dims, indices.rank(), "start_indices_batching_dims entry");
  for (size_t i = 0; i < d.operand_batching_dims.size(); ++i) {
    int64_t od = d.operand_batching_dims[i], id = d.start_indices_batching_dims[i];
    if (id == ivd) fail(op, "start_indices_batching_dims must not contain index_vector_dim");
    if (operand.dims[od] != indices.dims[id])
      fail(op, cat("batching dimension sizes differ: operand dim ", od, " vs indices dim ", id));
  }
  for (int64_t i = 0; i < r; ++i) {
    if (sizes[i] < 0 || sizes[i] > operand.dims[i])
      fail(op, cat("slice size ", sizes[i], " invalid for dimension ", i, " of ", operand.str()));
    if (contains(dropped, i) && sizes[i] > 1) fail(op, cat("slice size of collapsed/batching dimension ", i, " must be <= 1"));
  }
  check_size(op, d.offset_dims, r - static_cast<int64_t>(dropped.size()), "offset_dims");
  if (!std::is_sorted(d.offset_dims.begin(), d.offset_dims.end())) fail(op, "offset_dims must be sorted");
  Dims batch, offs;
  for (int64_t i = 0; i < static_cast<int64_t>(idx.size()); ++i)
    if (i != ivd) batch.push_back(idx[i]);
  for (int64_t i = 0; i < r; ++i)
    if (!contains(dropped, i)) offs.push_back(sizes[i]);
  const int64_t out_rank = static_cast<int64_t>(batch.size() + offs.size());
  check_dims(op, d.offset_dims, out_rank, "offset_dims entry");
  TensorType out{operand.dtype, {}};
  size_t bi = 0, oi = 0;
  for (int64_t i = 0; i < out_rank; ++i) out.dims.push_back(contains(d.offset_dims, i) ? offs[oi++] : batch[bi++]);
  return out;
}

std::vector<TensorType> scatter(const std::vector<TensorType>& inputs, const TensorType& indices,
                                const std::vector<TensorType>& updates, const ScatterDims& d) {
  const Op op = Op::Scatter;
  if (inputs.empty() || inputs.size() != updates.size())
    fail(op, cat("needs N >= 1 inputs and N updates, got ", inputs.size(), " and ", updates.size()));
  check_types(op, inputs);
  check_types(op, updates);
  check_type(op, indices);
  check_class(op, I, indices.dtype);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dims != inputs[0].dims) fail(op, cat("input shapes differ: ", inputs[0].str(), " vs ", inputs[i].str()));
    if (updates[i].dims != updates[0].dims) fail(op, cat("update shapes differ: ", updates[0].str(), " vs ", updates[i].str()));
    if (updates[i].dtype != inputs[i].dtype) fail(op, cat("update ", updates[i].str(), " differs in element type from input ", inputs[i].str()));
  }
  const TensorType &x = inputs[0], &u = updates[0];
  const int64_t r = x.rank(), ivd = d.index_vector_dim;
  if (ivd < 0 || ivd > indices.rank()) fail(op, cat("index_vector_dim ", ivd, " out of range for ", indices.str()));
  Dims idx = indices.dims;
  if (ivd == indices.rank()) idx.push_back(1);
  check_size(op, d.scatter_dims_to_operand_dims, idx[ivd], "scatter_dims_to_operand_dims");
  check_dims(op, d.scatter_dims_to_operand_dims, r, "scatter_dims_to_operand_dims entry");
  Dims dropped = d.inserted_window_dims;
  dropped.insert(dropped.end(), d.input_batching_dims.begin(), d.input_batching_dims.end());
  check_dims(op, dropped, r, "inserted/batching dimension");
  if (d.input_batching_dims.size() != d.scatter_indices_batching_dims.size())
    fail(op, "input_batching_dims and scatter_indices_batching_dims differ in count");
  check_dims(op, d.scatter_indices_batching_dims, indices.rank(), "scatter_indices_batching_dims entry");
  for (size_t i = 0; i < d.input_batching_dims.size(); ++i) {
    int64_t od = d.input_batching_dims[i], id = d.scatter_indices_batching_dims[i];
    if (id == ivd) fail(op, "scatter_indices_batching_dims must not contain index_vector_dim");
    if (x.dims[od] != indices.dims[id]) fail(op, cat("batching dimension sizes differ: input dim ", od, " vs indices dim ", id));
  }
  check_dims(op, d.update_window_dims, u.rank(), "update_window_dims entry");
  if (!std::is_sorted(d.update_window_dims.begin(), d.update_window_dims.end())) fail(op, "update_window_dims must be sorted");
  check_size(op, d.update_window_dims, r - static_cast<int64_t>(dropped.size()), "update_window_dims");
  Dims scatter_sizes, window_operand_dims;
  for (int64_t i = 0; i < static_cast<int64_t>(idx.size()); ++i)
    if (i != ivd) scatter_sizes.push_back(idx[i]);
  for (int64_t i = 0; i < r; ++i)
    if (!contains(dropped, i)) window_operand_dims.push_back(i);
  size_t si = 0, wi = 0;
  if (u.rank() != static_cast<int64_t>(scatter_sizes.size() + d.update_window_dims.size()))
    fail(op, cat("updates ", u.str(), " must have rank ", scatter_sizes.size() + d.update_window_dims.size()));
  for (int64_t i = 0; i < u.rank(); ++i) {
    if (contains(d.update_window_dims, i)) {
      int64_t od = window_operand_dims[wi++];
      if (u.dims[i] > x.dims[od])
        fail(op, cat("update window dimension ", i, " (size ", u.dims[i], ") exceeds input dimension ", od, " of ", x.str()));
    } else if (u.dims[i] != scatter_sizes[si++]) {
      fail(op, cat("update scatter dimension ", i, " of ", u.str(), " does not match indices ", indices.str()));
    }
  }
  return inputs;
}

std::vector<TensorType> rng_bit_generator(const TensorType& state, RngAlgorithm alg, const TensorType& out) {
  const Op op = Op::RngBitGenerator;
  check_types(op, {state, out});
  if (state.dtype != DType::U64 || state.rank() != 1) fail(op, cat("state must be a rank-1 ui64 tensor, got ", state.str()));
  int64_t n = state.dims[0];
  bool ok = alg == RngAlgorithm::ThreeFry ? n == 2 : alg == RngAlgorithm::Philox ? (n == 2 || n == 3) : n >= 1;
  if (!ok) fail(op, cat("state ", state.str(), " has the wrong size for ", print::rng(alg)));
  check_class(op, I, out.dtype);
  return {state, out};
}

TensorType fft(const TensorType& x, FftType type, const Dims& length) {
  const Op op = Op::Fft;
  check_type(op, x);
  const int64_t L = static_cast<int64_t>(length.size());
  if (L < 1 || L > 3) fail(op, cat("fft_length must have 1 to 3 elements, got ", L));
  if (x.rank() < L) fail(op, cat("operand ", x.str(), " has rank below fft_length size ", L));
  for (int64_t n : length)
    if (n < 0) fail(op, cat("fft_length ", list(length), " has a negative size"));
  const bool real_in = type == FftType::RFFT;
  check_class(op, real_in ? F : C, x.dtype);
  if (real_in && x.dtype != DType::F32 && x.dtype != DType::F64)
    fail_dtype(op, x.dtype, "f32 or f64");
  TensorType r = x;
  const int64_t n = length.back(), half = n == 0 ? 0 : n / 2 + 1;
  if (type == FftType::RFFT) r.dtype = x.dtype == DType::F32 ? DType::C64 : DType::C128;
  if (type == FftType::IRFFT) r.dtype = x.dtype == DType::C64 ? DType::F32 : DType::F64;
  if (type == FftType::RFFT) r.dims.back() = half;
  if (type == FftType::IRFFT) r.dims.back() = n;
  const TensorType& real = type == FftType::IRFFT ? r : x;  // the full-length side
  for (int64_t i = 0; i < L; ++i)
    if (real.dims[real.rank() - L + i] != length[i])
      fail(op, cat("trailing dimensions of ", real.str(), " do not match fft_length ", list(length)));
  if (type == FftType::IRFFT && x.dims.back() != half)
    fail(op, cat("operand ", x.str(), " must have last dimension ", half, " for fft_length ", list(length)));
  return r;
}

std::vector<TensorType> scalars(const std::vector<TensorType>& ts) {
  std::vector<TensorType> out;
  for (auto& t : ts) out.push_back(scalar(t.dtype));
  return out;
}

}  // namespace shape
}  // namespace tpu::hlo

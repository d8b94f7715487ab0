// Builder ops and the module printer (see builder.h). Every op: shape rule, attributes, emit().
#include "hlo/builder.h"

#include <atomic>
#include <cctype>
#include <cmath>

#include "hlo/printer.h"
#include "hlo/shape.h"

namespace tpu::hlo {
namespace {

using print::cat;

[[noreturn]] void fail(Op op, const std::string& msg) { throw Error(op_name(op) + ": " + msg); }

std::vector<TensorType> types(const Values& vs) {
  std::vector<TensorType> ts;
  for (auto& v : vs) ts.push_back(v.type);
  return ts;
}
std::string type_list(const std::vector<TensorType>& ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].str();
  return s;
}
std::string name_list(const Values& vs) {
  std::string s;
  for (size_t i = 0; i < vs.size(); ++i) s += (i ? ", " : "") + vs[i].name();
  return s;
}
Values cat_values(Values a, const Values& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
void check_static(Op op, const TensorType& t) {
  for (int64_t d : t.dims)
    if (d < 0) fail(op, "dynamic or negative dimension in " + t.str());
}

}  // namespace

struct Builder::State {
  int next_id = 0;  // SSA numbers are per function
};

// Scope ids are unique across modules, so a Value from another module is never visible.
static std::atomic<int> next_scope{0};

Builder::Builder(State* st, const Builder* parent, bool isolated)
    : st_(st), parent_(parent), isolated_(isolated), scope_(next_scope++), depth_(parent ? parent->depth_ + 2 : 4) {}

void Builder::check_visible(Op op, const Value& v) const {
  if (v.scope < 0) fail(op, "operand is an uninitialized Value");
  for (const Builder* b = this; b; b = b->isolated_ ? nullptr : b->parent_)
    if (b->scope_ == v.scope) return;
  fail(op, cat("operand ", v.name(), " is not visible here (defined in another region, or captured by a body that "
               "must not capture)"));
}

Values Builder::emit(Op op, const Values& operands, const std::vector<TensorType>& results, const Attrs& attrs,
                     const std::vector<std::string>& regions) {
  for (auto& v : operands) check_visible(op, v);
  Values out;
  for (auto& t : results) out.push_back({st_->next_id++, scope_, t});
  std::string s(depth_, ' ');
  if (!out.empty()) s += name_list(out) + " = ";
  s += cat('"', op_name(op), "\"(", name_list(operands), ")");
  for (size_t i = 0; i < regions.size(); ++i) s += (i ? ", " : " (") + regions[i] + (i + 1 == regions.size() ? ")" : "");
  for (size_t i = 0; i < attrs.size(); ++i)
    s += cat(i ? ", " : " {", attrs[i].first, " = ", attrs[i].second, i + 1 == attrs.size() ? "}" : "");
  s += cat(" : (", type_list(types(operands)), ") -> ");
  s += results.size() == 1 ? results[0].str() : "(" + type_list(results) + ")";
  text_ += s + "\n";
  return out;
}

std::string Builder::region(Op op, const char* what, const std::vector<TensorType>& arg_types,
                            const std::vector<TensorType>* want, const Body& body, bool isolated,
                            std::vector<TensorType>* got) {
  Builder r(st_, this, isolated);
  Values args;
  std::string head;
  for (auto& t : arg_types) {
    args.push_back({st_->next_id++, r.scope_, t});
    head += cat(head.empty() ? "" : ", ", args.back().name(), ": ", t.str());
  }
  Values res = body(r, args);
  if (want && res.size() != want->size())
    fail(op, cat(what, " returned ", res.size(), " values, expected ", want->size()));
  for (size_t i = 0; want && i < res.size(); ++i)
    if (res[i].type != (*want)[i])
      fail(op, cat(what, " result ", i, " is ", res[i].type.str(), ", expected ", (*want)[i].str()));
  if (got) *got = types(res);
  r.emit(Op::Return, res, {});
  std::string label = head.empty() ? "" : std::string(depth_, ' ') + "^bb0(" + head + "):\n";
  return "{\n" + label + r.text_ + std::string(depth_, ' ') + "}";
}

// ---- constants and elementwise ----

Value Builder::constant(const TensorType& t, const void* data, size_t nbytes) {
  shape::constant(t, nbytes);
  return emit(Op::Constant, {}, {t}, {{"value", print::dense(t, data, nbytes)}})[0];
}

Value Builder::splat(const TensorType& t, double re, double im) {
  shape::constant(t, byte_size(t.dtype));
  return emit(Op::Constant, {}, {t}, {{"value", print::splat(t, re, im)}})[0];
}

Value Builder::iota(const TensorType& t, int64_t dim) {
  shape::iota(t, dim);
  return emit(Op::Iota, {}, {t}, {{"iota_dimension", print::i64(dim)}})[0];
}

Value Builder::unary(Op op, Value x) {
  if (op == Op::Abs && info(x.type.dtype).is_complex) return complex_abs(x);
  if (op == Op::Log1p && x.type.dtype == DType::F64) return log1p_f64(x);
  return emit(op, {x}, {shape::unary(op, x.type)})[0];
}
// XLA CPU's float64 log1p is up to 120 ulp off for x in (-0.4143, -0.4). For |x| < 1, Goldberg's
// log(u) x / (u - 1), u = 1 + x: u - 1 is exact there, so u's rounding cancels and log's own error is left.
// (The barrier keeps XLA from folding (1 + x) - 1 into x.)
Value Builder::log1p_f64(Value x) {
  Value one = splat(x.type, 1), u = optimization_barrier({add(one, x)})[0], d = sub(u, one);
  Value log_u = emit(Op::Log, {u}, {x.type})[0];
  Value small = div(mul(log_u, x), select(compare(d, splat(x.type, 0), Cmp::EQ), one, d));
  small = select(compare(d, splat(x.type, 0), Cmp::EQ), x, small);  // |x| below half an ulp of 1
  Value native = emit(Op::Log1p, {x}, {x.type})[0];
  return select(compare(unary(Op::Abs, x), one, Cmp::LT), small, native);
}
// |z| as C's cabs (an infinite part wins over NaN), from IEEE operations only: XLA's own complex abs rounds
// differently from one program to another (fused or not), so a norm disagreed with the abs in its gradient.
// complex64 squares its parts in f64, exactly (as glibc's hypotf): no contraction into an FMA can change
// the result, which is the correctly rounded one but for rare double roundings. complex128 scales by the
// larger part (within 1 ulp of CPU's hypot).
Value Builder::complex_abs(Value z) {
  Value re = unary(Op::Abs, unary(Op::Real, z)), im = unary(Op::Abs, unary(Op::Imag, z));
  Value inf = splat(re.type, INFINITY);
  Value infinite = or_(compare(re, inf, Cmp::EQ), compare(im, inf, Cmp::EQ)), r;
  if (re.type.dtype == DType::F32) {
    Value a = convert(re, DType::F64), b = convert(im, DType::F64);
    r = convert(unary(Op::Sqrt, add(mul(a, a), mul(b, b))), DType::F32);
  } else {
    // big sqrt(1 + q^2), q = small / big. q^2 from q's top 26 bits (their square is exact) plus a small
    // correction: an FMA contraction can change only the correction's last bit. (XLA reassociates
    // quotients, so q^2 cannot be a quotient either.)
    Value big = binary(Op::Maximum, re, im), small = binary(Op::Minimum, re, im), one = splat(re.type, 1);
    Value q = div(small, select(compare(big, splat(re.type, 0), Cmp::EQ), one, big));
    TensorType bits{DType::S64, q.type.dims};
    Value hi = bitcast_convert(and_(bitcast_convert(q, DType::S64), splat(bits, -134217728.0)), DType::F64);
    Value q2 = add(mul(hi, hi), mul(sub(q, hi), add(q, hi)));
    r = mul(big, unary(Op::Sqrt, add(one, q2)));
  }
  Value nan = or_(compare(re, re, Cmp::NE), compare(im, im, Cmp::NE));  // XLA's maximum may drop a NaN
  return select(infinite, inf, select(nan, splat(re.type, NAN), r));
}
Value Builder::binary(Op op, Value a, Value b) {
  TensorType t = shape::binary(op, a.type, b.type);
  // StableHLO's folder treats an empty constant as a splat of 0 and folds integer x / 0 on the host: SIGFPE
  if (t.numel() == 0) return splat(t, 0);
  return emit(op, {a, b}, {t})[0];
}

Value Builder::compare(Value a, Value b, Cmp dir, CmpType type) {
  TensorType t = shape::compare(a.type, b.type, dir, type);
  if (type == CmpType::Auto) type = shape::compare_type(a.type.dtype);
  return emit(Op::Compare, {a, b}, {t}, {{"comparison_direction", print::cmp(dir)}, {"compare_type", print::cmp_type(type)}})[0];
}

Value Builder::select(Value p, Value t, Value f) { return emit(Op::Select, {p, t, f}, {shape::select(p.type, t.type, f.type)})[0]; }
// NaN in x stays NaN, as the spec says: XLA CPU's loop emitter (small programs) clamps it to a bound.
Value Builder::clamp(Value lo, Value x, Value hi) {
  Value r = emit(Op::Clamp, {lo, x, hi}, {shape::clamp(lo.type, x.type, hi.type)})[0];
  return info(x.type.dtype).is_float ? select(compare(x, x, Cmp::NE), x, r) : r;
}
Value Builder::convert(Value x, DType to) { return emit(Op::Convert, {x}, {shape::convert(x.type, to)})[0]; }
Value Builder::bitcast_convert(Value x, DType to) {
  return emit(Op::BitcastConvert, {x}, {shape::bitcast_convert(x.type, to)})[0];
}

// ---- shape manipulation ----

Value Builder::broadcast_in_dim(Value x, const Dims& out_dims, const Dims& bdims) {
  return emit(Op::BroadcastInDim, {x}, {shape::broadcast_in_dim(x.type, out_dims, bdims)},
              {{"broadcast_dimensions", print::array(bdims)}})[0];
}

Value Builder::reshape(Value x, const Dims& dims) { return emit(Op::Reshape, {x}, {shape::reshape(x.type, dims)})[0]; }

Value Builder::transpose(Value x, const Dims& perm) {
  return emit(Op::Transpose, {x}, {shape::transpose(x.type, perm)}, {{"permutation", print::array(perm)}})[0];
}

Value Builder::reverse(Value x, const Dims& dims) {
  return emit(Op::Reverse, {x}, {shape::reverse(x.type, dims)}, {{"dimensions", print::array(dims)}})[0];
}

Value Builder::slice(Value x, const Dims& start, const Dims& limit, const Dims& strides) {
  TensorType t = shape::slice(x.type, start, limit, strides);
  return emit(Op::Slice, {x}, {t},
              {{"start_indices", print::array(start)}, {"limit_indices", print::array(limit)},
               {"strides", print::array(strides.empty() ? Dims(x.type.rank(), 1) : strides)}})[0];
}

Value Builder::dynamic_slice(Value x, const Values& starts, const Dims& sizes) {
  TensorType t = shape::dynamic_slice(x.type, types(starts), sizes);
  return emit(Op::DynamicSlice, cat_values({x}, starts), {t}, {{"slice_sizes", print::array(sizes)}})[0];
}

Value Builder::dynamic_update_slice(Value x, Value update, const Values& starts) {
  TensorType t = shape::dynamic_update_slice(x.type, update.type, types(starts));
  return emit(Op::DynamicUpdateSlice, cat_values({x, update}, starts), {t})[0];
}

Value Builder::concatenate(const Values& xs, int64_t dim) {
  return emit(Op::Concatenate, xs, {shape::concatenate(types(xs), dim)}, {{"dimension", print::i64(dim)}})[0];
}

Value Builder::pad(Value x, Value pv, const Dims& low, const Dims& high, const Dims& interior) {
  TensorType t = shape::pad(x.type, pv.type, low, high, interior);
  return emit(Op::Pad, {x, pv}, {t},
              {{"edge_padding_low", print::array(low)}, {"edge_padding_high", print::array(high)},
               {"interior_padding", print::array(interior.empty() ? Dims(x.type.rank(), 0) : interior)}})[0];
}

// ---- ops with bodies ----

Values Builder::reduce(const Values& inputs, const Values& inits, const Dims& dims, const Body& body) {
  auto out = shape::reduce(types(inputs), types(inits), dims);
  auto s = shape::scalars(types(inits));
  auto args = s;
  args.insert(args.end(), s.begin(), s.end());
  std::string r = region(Op::Reduce, "body", args, &s, body, true);
  return emit(Op::Reduce, cat_values(inputs, inits), out, {{"dimensions", print::array(dims)}}, {r});
}

Values Builder::reduce_window(const Values& inputs, const Values& inits, const Window& w, const Body& body) {
  auto out = shape::reduce_window(types(inputs), types(inits), w);
  Window f = shape::full_window(Op::ReduceWindow, w, inputs[0].type.rank());
  auto s = shape::scalars(types(inits));
  auto args = s;
  args.insert(args.end(), s.begin(), s.end());
  std::string r = region(Op::ReduceWindow, "body", args, &s, body, true);
  return emit(Op::ReduceWindow, cat_values(inputs, inits), out,
              {{"window_dimensions", print::array(f.dims)}, {"window_strides", print::array(f.strides)},
               {"base_dilations", print::array(f.base_dilations)},
               {"window_dilations", print::array(f.window_dilations)}, {"padding", print::padding(f.padding)}},
              {r});
}

Value Builder::select_and_scatter(Value operand, Value source, Value init, const Window& w, const Body& select,
                                  const Body& scatter) {
  const Op op = Op::SelectAndScatter;
  TensorType t = shape::select_and_scatter(operand.type, source.type, init.type, w);
  Window f = shape::full_window(op, w, operand.type.rank());
  TensorType e = scalar(operand.type.dtype);
  std::vector<TensorType> pred = {scalar(DType::Pred)}, one = {e};
  std::string rs = region(op, "select", {e, e}, &pred, select, true);
  std::string rc = region(op, "scatter", {e, e}, &one, scatter, true);
  return emit(op, {operand, source, init}, {t},
              {{"window_dimensions", print::array(f.dims)}, {"window_strides", print::array(f.strides)},
               {"padding", print::padding(f.padding)}},
              {rs, rc})[0];
}

Values Builder::sort(const Values& inputs, int64_t dim, bool is_stable, const Body& comparator) {
  auto out = shape::sort(types(inputs), dim);
  std::vector<TensorType> args;
  for (auto& v : inputs) args.insert(args.end(), 2, scalar(v.type.dtype));
  std::vector<TensorType> pred = {scalar(DType::Pred)};
  std::string r = region(Op::Sort, "comparator", args, &pred, comparator, true);
  return emit(Op::Sort, inputs, out, {{"dimension", print::i64(dim)}, {"is_stable", print::boolean(is_stable)}}, {r});
}

Values Builder::scatter(const Values& inputs, Value indices, const Values& updates, const ScatterDims& d,
                        const Body& body, bool sorted, bool unique) {
  auto out = shape::scatter(types(inputs), indices.type, types(updates), d);
  auto s = shape::scalars(types(inputs));
  auto args = s;
  args.insert(args.end(), s.begin(), s.end());
  std::string r = region(Op::Scatter, "body", args, &s, body, true);
  return emit(Op::Scatter, cat_values(cat_values(inputs, {indices}), updates), out,
              {{"scatter_dimension_numbers", print::scatter(d)}, {"indices_are_sorted", print::boolean(sorted)},
               {"unique_indices", print::boolean(unique)}},
              {r});
}

Values Builder::while_(const Values& init, const Body& cond, const Body& body) {
  auto ts = types(init);
  std::vector<TensorType> pred = {scalar(DType::Pred)};
  std::string c = region(Op::While, "cond", ts, &pred, cond, false);
  std::string b = region(Op::While, "body", ts, &ts, body, false);
  return emit(Op::While, init, ts, {}, {c, b});
}

Values Builder::case_(Value index, const std::vector<Body>& branches) {
  const Op op = Op::Case;
  if (index.type != scalar(DType::S32)) fail(op, "index must be tensor<i32>, got " + index.type.str());
  if (branches.empty()) fail(op, "needs at least one branch");
  std::vector<TensorType> ts;  // fixed by the first branch
  std::vector<std::string> rs;
  for (size_t i = 0; i < branches.size(); ++i)
    rs.push_back(region(op, "branch", {}, i ? &ts : nullptr, branches[i], false, &ts));
  return emit(op, {index}, ts, {}, rs);
}

// ---- contractions and indexing ----

Value Builder::dot_general(Value lhs, Value rhs, const DotDims& d, Precision lp, Precision rp, std::optional<DType> rt) {
  TensorType t = shape::dot_general(lhs.type, rhs.type, d, rt);
  return emit(Op::DotGeneral, {lhs, rhs}, {t},
              {{"dot_dimension_numbers", print::dot(d)}, {"precision_config", print::precision(lp, rp)}})[0];
}

Value Builder::convolution(Value lhs, Value rhs, const ConvConfig& c) {
  TensorType t = shape::convolution(lhs.type, rhs.type, c);
  const int64_t n = lhs.type.rank() - 2;
  auto ones = [n](const Dims& d) { return d.empty() ? Dims(n, 1) : d; };
  return emit(Op::Convolution, {lhs, rhs}, {t},
              {{"window_strides", print::array(ones(c.window_strides))},
               {"padding", print::padding(c.padding.empty() ? Padding(n, {0, 0}) : c.padding)},
               {"lhs_dilation", print::array(ones(c.lhs_dilation))},
               {"rhs_dilation", print::array(ones(c.rhs_dilation))},
               {"dimension_numbers", print::conv(c.dims)},
               {"feature_group_count", print::i64(c.feature_group_count)},
               {"batch_group_count", print::i64(c.batch_group_count)},
               {"precision_config", print::precision(c.lhs_precision, c.rhs_precision)}})[0];
}

Value Builder::gather(Value operand, Value indices, const GatherDims& d, const Dims& sizes, bool sorted) {
  TensorType t = shape::gather(operand.type, indices.type, d, sizes);
  return emit(Op::Gather, {operand, indices}, {t},
              {{"dimension_numbers", print::gather(d)}, {"slice_sizes", print::array(sizes)},
               {"indices_are_sorted", print::boolean(sorted)}})[0];
}

// ---- misc ----

std::pair<Value, Value> Builder::rng_bit_generator(Value state, RngAlgorithm alg, const TensorType& out) {
  auto r = emit(Op::RngBitGenerator, {state}, shape::rng_bit_generator(state.type, alg, out),
                {{"rng_algorithm", print::rng(alg)}});
  return {r[0], r[1]};
}

Value Builder::fft(Value x, FftType type, const Dims& length) {
  TensorType t = shape::fft(x.type, type, length);
  return emit(Op::Fft, {x}, {t}, {{"fft_type", print::fft(type)}, {"fft_length", print::array(length)}})[0];
}

Values Builder::custom_call(const std::string& target, const Values& operands, const std::vector<TensorType>& results,
                            const CustomCallOptions& o) {
  for (auto& t : results) check_static(Op::CustomCall, t);
  if (target.empty()) fail(Op::CustomCall, "call_target_name is empty");
  Attrs a = {{"call_target_name", print::string(target)},
             {"has_side_effect", print::boolean(o.has_side_effect)},
             {"backend_config", print::string(o.backend_config)}};
  if (o.api_version) a.push_back({"api_version", cat(*o.api_version, " : i32")});
  a.insert(a.end(), o.extra.begin(), o.extra.end());
  return emit(Op::CustomCall, operands, results, a);
}

Values Builder::optimization_barrier(const Values& xs) { return emit(Op::OptimizationBarrier, xs, types(xs)); }

// ---- module ----

Module::Module(std::string name) : name_(std::move(name)), st_(new Builder::State) {
  bool ok = !name_.empty() && !std::isdigit(static_cast<unsigned char>(name_[0]));
  for (char c : name_) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.');
  if (!ok) throw Error("module: bad name '" + name_ + "'");
  body_.reset(new Builder(st_.get(), nullptr, false));
}
Module::~Module() = default;

Value Module::arg(const TensorType& t, int alias_output) {
  if (returned_) throw Error("func.func: arg() after ret()");
  for (int64_t d : t.dims)
    if (d < 0) throw Error("func.func: dynamic or negative dimension in argument " + t.str());
  arg_types_.push_back(t);
  aliases_.push_back(alias_output);
  return {-static_cast<int>(arg_types_.size()), body_->scope_, t};
}

void Module::ret(const Values& results) {
  if (returned_) throw Error("func.return: ret() called twice");
  for (auto& v : results) {
    if (v.scope != body_->scope_) throw Error("func.return: " + v.name() + " is not a value of this function's body");
  }
  result_types_ = types(results);
  std::vector<bool> taken(results.size());
  for (size_t i = 0; i < aliases_.size(); ++i) {
    int a = aliases_[i];
    if (a < 0) continue;
    if (a >= static_cast<int>(results.size()) || taken[a])
      throw Error(cat("func.func: argument ", i, " aliases output ", a, ", which is missing or already aliased"));
    if (result_types_[a] != arg_types_[i])
      throw Error(cat("func.func: argument ", i, " ", arg_types_[i].str(), " cannot alias output ", a, " ",
                      result_types_[a].str()));
    taken[a] = true;
  }
  ret_ = cat("    \"func.return\"(", name_list(results), ") : (", type_list(result_types_), ") -> ()\n");
  returned_ = true;
}

std::string Module::str() const {
  if (!returned_) throw Error("func.func: str() before ret()");
  std::string args;
  for (size_t i = 0; i < arg_types_.size(); ++i) {
    args += cat(i ? ", " : "", "%arg", i, ": ", arg_types_[i].str());
    if (aliases_[i] >= 0) args += cat(" {tf.aliasing_output = ", aliases_[i], " : i32}");
  }
  return cat("module @", name_, " {\n  func.func public @main(", args, ") -> (", type_list(result_types_), ") {\n",
             body_->text_, ret_, "  }\n}\n");
}

}  // namespace tpu::hlo

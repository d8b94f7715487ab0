// StableHLO emitter: a Module holds one `func.func public @main`; its Builder appends ops in MLIR generic syntax.
// Each op method asks shape.h for the result type (throwing hlo::Error naming the op on bad operands), then prints.
// Regions (reduce, sort, while, ...) are built by Body callbacks on a nested Builder.
//
//   hlo::Module m;
//   hlo::Value x = m.arg({DType::F32, {2, 3}});
//   hlo::Builder& b = m.builder();
//   hlo::Value zero = b.splat(hlo::scalar(DType::F32), 0);
//   auto sum = b.reduce({x}, {zero}, {1}, [](hlo::Builder& r, const std::vector<hlo::Value>& a) {
//     return std::vector{r.add(a[0], a[1])};
//   });
//   m.ret(sum);
//   std::string text = m.str();
//
// Files: types.h (vocabulary), shape.h/.cpp (result types + op table), printer.h/.cpp (spellings),
// builder.h/.cpp (ops and module).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hlo/types.h"

namespace tpu::hlo {

class Builder;
using Values = std::vector<Value>;
// A region body: receives the nested builder and the block arguments, returns the values to yield.
using Body = std::function<Values(Builder&, const Values&)>;

// A condition a program checks on the device (an index in range, a divisor not zero), since XLA
// would clamp or drop silently: `status` is s64[2] {failed (0 or 1), the offending value}. The runtime
// raises `message` (its "{}" replaced by the value) at the next host sync when it failed.
struct Check {
  Value status;
  std::string message;
  bool index_error = true;  // IndexError, else RuntimeError
};

class Builder {
 public:
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;

  std::vector<Check> checks;  // the function's device-side checks, in emission order

  // Constants. `data` holds all elements little-endian (pred: one byte each), or one element to splat.
  Value constant(const TensorType& t, const void* data, size_t nbytes);
  Value splat(const TensorType& t, double re, double im = 0);  // every element = re (+ im*i for complex)
  Value iota(const TensorType& t, int64_t dim);

  // Elementwise: op from the unary / binary rows of Op.
  Value unary(Op op, Value x);
  Value binary(Op op, Value a, Value b);
  Value add(Value a, Value b) { return binary(Op::Add, a, b); }
  Value sub(Value a, Value b) { return binary(Op::Subtract, a, b); }
  Value mul(Value a, Value b) { return binary(Op::Multiply, a, b); }
  Value div(Value a, Value b) { return binary(Op::Divide, a, b); }
  Value max(Value a, Value b) { return binary(Op::Maximum, a, b); }
  Value min(Value a, Value b) { return binary(Op::Minimum, a, b); }
  Value and_(Value a, Value b) { return binary(Op::And, a, b); }
  Value or_(Value a, Value b) { return binary(Op::Or, a, b); }
  Value compare(Value a, Value b, Cmp dir, CmpType type = CmpType::Auto);
  Value select(Value pred, Value on_true, Value on_false);
  Value clamp(Value lo, Value x, Value hi);
  Value convert(Value x, DType to);
  Value bitcast_convert(Value x, DType to);

  // Shape manipulation.
  Value broadcast_in_dim(Value x, const Dims& out_dims, const Dims& broadcast_dims);
  Value reshape(Value x, const Dims& dims);
  Value transpose(Value x, const Dims& perm);
  Value reverse(Value x, const Dims& dims);
  Value slice(Value x, const Dims& start, const Dims& limit, const Dims& strides = {});
  Value dynamic_slice(Value x, const Values& starts, const Dims& sizes);
  Value dynamic_update_slice(Value x, Value update, const Values& starts);
  Value concatenate(const Values& xs, int64_t dim);
  Value pad(Value x, Value pad_value, const Dims& low, const Dims& high, const Dims& interior = {});

  // Reductions and other ops with bodies. Bodies of reduce, reduce_window, select_and_scatter, scatter and sort
  // take rank-0 tensors: (acc..., x...) for reductions and scatter, (lhs0, rhs0, lhs1, rhs1, ...) for sort.
  Values reduce(const Values& inputs, const Values& inits, const Dims& dims, const Body& body);
  Values reduce_window(const Values& inputs, const Values& inits, const Window& w, const Body& body);
  Value select_and_scatter(Value operand, Value source, Value init, const Window& w, const Body& select,
                           const Body& scatter);
  Values sort(const Values& inputs, int64_t dim, bool is_stable, const Body& comparator);
  Values scatter(const Values& inputs, Value indices, const Values& updates, const ScatterDims& d, const Body& body,
                 bool indices_are_sorted = false, bool unique_indices = false);
  // cond and body receive the loop values; cond yields one tensor<i1>. Branches take no arguments.
  Values while_(const Values& init, const Body& cond, const Body& body);
  Values case_(Value index, const std::vector<Body>& branches);

  // Contractions and indexing.
  Value dot_general(Value lhs, Value rhs, const DotDims& d, Precision lhs_precision = Precision::Default,
                    Precision rhs_precision = Precision::Default, std::optional<DType> result_dtype = {});
  Value convolution(Value lhs, Value rhs, const ConvConfig& c);
  Value gather(Value operand, Value indices, const GatherDims& d, const Dims& slice_sizes,
               bool indices_are_sorted = false);

  // Misc.
  std::pair<Value, Value> rng_bit_generator(Value state, RngAlgorithm alg, const TensorType& out);  // (state, bits)
  // FFT over the trailing fft_length.size() (1 to 3) dims of x.
  Value fft(Value x, FftType type, const Dims& fft_length);
  Values custom_call(const std::string& target, const Values& operands, const std::vector<TensorType>& results,
                     const CustomCallOptions& o = {});
  Values optimization_barrier(const Values& xs);

 private:
  friend class Module;
  struct State;
  Builder(State* st, const Builder* parent, bool isolated);
  Value complex_abs(Value z);
  Value log1p_f64(Value x);

  using Attrs = std::vector<std::pair<std::string, std::string>>;
  Values emit(Op op, const Values& operands, const std::vector<TensorType>& results, const Attrs& attrs = {},
              const std::vector<std::string>& regions = {});
  // Runs body on a nested builder with block arguments of arg_types; checks it yields `want` (if given) and
  // stores what it yielded in `got` (if given); returns the region's text.
  std::string region(Op op, const char* what, const std::vector<TensorType>& arg_types,
                     const std::vector<TensorType>* want, const Body& body, bool isolated,
                     std::vector<TensorType>* got = nullptr);
  void check_visible(Op op, const Value& v) const;

  State* st_;               // owned by the Module
  const Builder* parent_;   // enclosing region's builder, or null at function level
  bool isolated_;           // values from enclosing regions may not be used
  int scope_, depth_;
  std::string text_;
};

// A module with one public function @main. Arguments may donate their buffer to an output (tf.aliasing_output).
class Module {
 public:
  explicit Module(std::string name = "main");
  ~Module();
  Value arg(const TensorType& t, int alias_output = -1);
  Builder& builder() { return *body_; }
  void ret(const Values& results);  // once; checks the aliases against result types
  std::string str() const;          // the whole module; throws if ret() was not called
  const std::vector<TensorType>& arg_types() const { return arg_types_; }
  const std::vector<TensorType>& result_types() const { return result_types_; }

 private:
  std::string name_;
  std::unique_ptr<Builder::State> st_;
  std::unique_ptr<Builder> body_;
  std::vector<TensorType> arg_types_, result_types_;
  std::vector<int> aliases_;
  std::string ret_;
  bool returned_ = false;
};

}  // namespace tpu::hlo

// The lowering table: one StableHLO lowering rule per ATen op, shared by Strict eager,
// DeferAndFuse and torch.compile. Torch-free: a rule sees its call's arguments in schema order
// (tensors and Python scalars already as hlo::Values, ints/bools/lists/strings as constants) and
// the result types PyTorch's shape rules computed; it emits ops and returns the results.
//
// To add an op: write `Values my_op(Ctx& c)` in the family file under csrc/lower/ and add
// `{"my_op", my_op}` (its ATen name, "name.overload") to that file's table. In-place variants
// ("my_op_") find the functional rule by themselves; list out= overloads with '|'.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "hlo/builder.h"

namespace tpu::lower {

using hlo::Builder;
using hlo::Dims;
using hlo::TensorType;
using hlo::Value;
using hlo::Values;

// A bad argument PyTorch reports as IndexError (a dim out of range): the glue raises IndexError.
struct IndexError : hlo::Error {
  using hlo::Error::Error;
};
// A bad argument PyTorch reports as RuntimeError (a value shape that does not fit): the glue raises
// its message as PyTorch words it, without naming the lowering.
struct ArgumentError : hlo::Error {
  using hlo::Error::Error;
};

// One argument of the ATen call. Tensors, tensor lists and scalars refer to Ctx::inputs.
struct Arg {
  enum Kind : uint8_t { None, Tensor, TensorList, Scalar, Int, Bool, IntList, FloatList, String, ScalarList };
  Kind kind = None;
  int64_t i = 0;              // Int, Bool; DType for dtype= arguments; Tensor: < 0 for a wrapped Python number
  double f = 0;               // a structural Scalar's value (see Rule::structural)
  std::vector<int64_t> ints;  // IntList; input indices of Tensor / TensorList (-1: None) / Scalar / ScalarList
  std::vector<double> floats; // FloatList
  std::string s;              // String
};

struct Ctx {
  Builder& b;
  const std::vector<Arg>& args;
  const Values& inputs;
  const std::vector<TensorType>& out;  // result types, from PyTorch's meta kernels
  hlo::Precision precision;            // torch.set_float32_matmul_precision
  const std::vector<bool>* contiguous = nullptr;  // per input: its view is contiguous (det's LU of A^T)
  const std::vector<TensorType>* stored = nullptr;  // result types as stored, where `out` computes wider (complex32)

  DType stored_dtype(size_t k) const { return stored ? (*stored)[k].dtype : out[k].dtype; }

  const Arg& arg(size_t i) const;
  bool has(size_t i) const { return i < args.size() && args[i].kind != Arg::None; }
  Value v(size_t i) const;   // a Tensor or Scalar argument
  Values vs(size_t i) const; // a TensorList argument, or a ScalarList (runtime scalar operands)
  int64_t i(size_t i) const;
  int64_t i(size_t i, int64_t fallback) const { return has(i) ? this->i(i) : fallback; }
  bool flag(size_t i, bool fallback = false) const { return has(i) ? args[i].i != 0 : fallback; }
  const std::vector<int64_t>& ints(size_t i) const;
  const std::vector<double>& floats(size_t i) const;
  double f(size_t i) const;  // value of a structural Scalar
  const std::string& s(size_t i) const;
  // Random ops (Rule::random): the generator's seed and a fresh counter, as s64 scalars.
  Value rng_seed() const { return inputs[inputs.size() - 2]; }
  Value rng_counter() const { return inputs[inputs.size() - 1]; }
  [[noreturn]] void fail(const std::string& why) const;
  [[noreturn]] void fail_dtype(const std::string& why) const;  // an element type this op does not take
};

using RuleFn = Values (*)(Ctx&);

struct Rule {
  RuleFn fn;
  // Bit i set: the Scalar at argument i shapes the program (arange's bounds, norm's p), so its value
  // is part of the cache key. Every other Python scalar is a runtime operand.
  uint32_t structural = 0;
  // The op draws random numbers: the call appends the generator's seed and counter as inputs.
  bool random = false;
};

struct Entry {
  const char* names;  // "add.Tensor|add.out"
  RuleFn fn;
  uint32_t structural = 0;
  bool random = false;
};

// Registers a family's table at static-initialization time: `static Register r({...});`.
struct Register {
  Register(std::initializer_list<Entry> entries);
};

const Rule* find(std::string_view aten_name);
std::vector<std::string> names();  // every registered op, sorted

// The ATen name of the lowering a call uses: `name` itself, or for an in-place "op_.ov" the "op.ov".
const Rule* find_for_call(std::string_view aten_name);

}  // namespace tpu::lower

#include "aten/dispatch.h"

#include <Python.h>
#include <frameobject.h>

#include <ATen/ATen.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <set>
#include <unordered_map>

#include "aten/generator.h"
#include "aten/tensor.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

namespace tpu::aten {
namespace {

std::atomic<bool> fallback_on{false};

bool is_write(const c10::Argument& a) { return a.alias_info() && a.alias_info()->isWrite(); }

c10::TypeKind kind_of(const c10::TypePtr& t) {
  if (auto opt = t->cast<c10::OptionalType>()) return opt->getElementType()->kind();
  return t->kind();
}

bool data_dependent(const std::string& name);
enum class Overlap : uint8_t { Checked, Gathers, Scatters, Unchecked };
Overlap overlap_rule(const std::string& name);
bool reads_index_lists(const std::string& name);
bool fills_selected_elements(const std::string& name);

// What dispatch needs to know of an operator, worked out at its first call, so that a cached call does
// no name building, rule lookup or string comparison.
struct OpEntry {
  c10::OperatorName op;
  std::string name;       // "add.Tensor"
  std::string qualified;  // "aten::add.Tensor" (other namespaces: their own)
  const lower::Rule* rule = nullptr;
  ArgCheck check_args = nullptr;
  const ComplexRejection* complex_rejection = nullptr;
  size_t out_args = 0;  // trailing keyword-only arguments written to (out=)
  bool data_dependent = false, index_lists = false, fills_selected = false;
  bool pointwise = false;  // TensorIterator's out= rules (where.self_out lacks the tag its functional form has)
  Overlap overlap = Overlap::Checked;
  bool typed_params = false;  // a ScalarType or Layout parameter, or a conversion to a sparse layout
  bool grad_like_input = false;  // a backward without any meta kernel: the gradient is like argument 1
  bool keeps_out_shape = false;
  ResultFix fix_results = nullptr;

  explicit OpEntry(const c10::OperatorHandle& h) : op(h.operator_name()) {
    std::string base = op.name.substr(op.name.find("::") + 2);
    name = op.overload_name.empty() ? base : base + "." + op.overload_name;
    qualified = op.name + (op.overload_name.empty() ? "" : "." + op.overload_name);
    rule = lower::find_for_call(name);
    check_args = arg_check_for(name);
    complex_rejection = complex_rejection_for(name);
    fix_results = result_fix_for(name);
    data_dependent = aten::data_dependent(name);
    overlap = overlap_rule(name);
    index_lists = reads_index_lists(name);
    fills_selected = fills_selected_elements(name);
    pointwise = h.hasTag(at::Tag::pointwise) || base == "where";
    typed_params = base.find("to_sparse_") != std::string::npos;
    grad_like_input = aten::grad_like_input(name);
    keeps_out_shape = aten::keeps_out_shape(name);
    for (const c10::Argument& p : h.schema().arguments()) {
      c10::TypeKind k = kind_of(p.real_type());  // type() says int for ScalarType and Layout
      typed_params |= k == c10::TypeKind::ScalarTypeType || k == c10::TypeKind::LayoutType;
      out_args += p.kwarg_only() && p.alias_info() && p.alias_info()->isWrite();
    }
  }
};

// Entries live as long as the process; each thread keeps its own index of them (no lock per call). An
// operator registered again at a freed one's address (a Python torch.library) gets a new entry.
const OpEntry& entry_of(const c10::OperatorHandle& h) {
  thread_local std::unordered_map<const void*, const OpEntry*> index;
  const void* key = &h.schema();
  auto it = index.find(key);
  if (it != index.end() && it->second->op == h.operator_name()) return *it->second;
  static std::mutex mu;
  static std::deque<OpEntry> entries;
  std::lock_guard<std::mutex> lock(mu);
  return *(index[key] = &entries.emplace_back(h));
}

c10::TypePtr unwrap(const c10::TypePtr& t) {
  if (auto opt = t->cast<c10::OptionalType>()) return opt->getElementType();
  return t;
}

hlo::Precision matmul_precision() {
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST: return hlo::Precision::Highest;
    case at::Float32MatmulPrecision::HIGH: return hlo::Precision::High;
    default: return hlo::Precision::Default;
  }
}

// Collects the call's inputs while checking devices, like CUDA: all tpu tensors on one device;
// CPU tensors only as 0-dim scalars.
struct Builder {
  OpCall& call;
  const std::string& opname;
  int device = -1;
  std::vector<at::Tensor> keep;  // materialized conj / neg inputs, alive until the call has run

  int add_scalar(const c10::Scalar& s) {
    Input in;
    if (s.isComplex()) {
      in.scalar_dtype = DType::C128;
      in.scalar = {s.toComplexDouble().real(), s.toComplexDouble().imag()};
    }
    else if (s.isFloatingPoint()) { in.scalar_dtype = DType::F64; in.scalar = s.toDouble(); }
    else if (s.isBoolean()) { in.scalar_dtype = DType::Pred; in.scalar_int = s.toBool(); }
    else { in.scalar_dtype = DType::S64; in.scalar_int = s.toLong(); }
    call.inputs.push_back(in);
    return static_cast<int>(call.inputs.size() - 1);
  }

  int add_tensor(const at::Tensor& t) {
    if (t.device().type() != c10::DeviceType::PrivateUse1) {
      TORCH_CHECK(t.dim() == 0 && t.device().is_cpu(),
                  "Expected all tensors to be on the same device, but found at least two devices, tpu:",
                  std::max(device, 0), " and ", t.device(), "! (when checking arguments for ", opname, ")");
      return add_scalar(t.item());
    }
    int d = t.device().index();
    TORCH_CHECK(device < 0 || d == device,
                "Expected all tensors to be on the same device, but found at least two devices, tpu:", device,
                " and tpu:", d, "! (when checking arguments for ", opname, ")");
    device = d;
    if (t.is_conj() || t.is_neg()) {  // lazy conj / neg bits (conj-aware ops: copy_, clone): materialize them
      at::Tensor r = t.is_neg() ? at::neg(t._neg_view()) : t;
      if (r.is_conj()) r = at::conj_physical(r.conj());
      keep.push_back(r);
      return add_tensor(r);
    }
    call.inputs.push_back(input_of(t));
    return static_cast<int>(call.inputs.size() - 1);
  }

  lower::Arg arg(const c10::Argument& schema, const c10::IValue& v) {
    lower::Arg a;
    if (v.isNone() || (v.isTensor() && !v.toTensor().defined())) return a;  // C++ callers pass undefined for None
    c10::TypeKind k = kind_of(schema.type());
    c10::TypePtr t = unwrap(schema.type());
    c10::TypeKind elem = t->kind() == c10::TypeKind::ListType ? kind_of(t->containedType(0)) : c10::TypeKind::AnyType;
    if (v.isTensor()) {
      a.kind = lower::Arg::Tensor;
      a.ints = {add_tensor(v.toTensor())};
      // a CPU 0-d tensor becomes an f64/s64/pred operand, but its dtype (and whether it is a wrapped Python
      // number) decides result types: a.i = 1 + its ScalarType, negated for wrapped numbers; it keys the program
      const at::Tensor& t = v.toTensor();
      if (t.device().is_cpu())
        a.i = (t.unsafeGetTensorImpl()->is_wrapped_number() ? -1 : 1) * (1 + static_cast<int64_t>(t.scalar_type()));
    } else if (v.isTensorList() || (v.isList() && elem == c10::TypeKind::TensorType)) {
      a.kind = lower::Arg::TensorList;
      for (const c10::IValue& e : v.toListRef())
        a.ints.push_back(e.isNone() || !e.toTensor().defined() ? -1 : add_tensor(e.toTensor()));  // undefined: None
    } else if (v.isList() && elem == c10::TypeKind::NumberType) {
      a.kind = lower::Arg::ScalarList;  // Scalar[] (foreach ops): each element a runtime scalar operand
      for (const c10::IValue& e : v.toListRef()) a.ints.push_back(add_scalar(e.toScalar()));
    } else if (k == c10::TypeKind::NumberType || k == c10::TypeKind::FloatType ||
               k == c10::TypeKind::ComplexType || (v.isDouble() && k != c10::TypeKind::IntType)) {
      a.kind = lower::Arg::Scalar;
      c10::Scalar s = v.toScalar();
      a.f = s.isComplex() ? s.toComplexDouble().real() : s.toDouble();
      a.ints = {add_scalar(s)};
    } else if (k == c10::TypeKind::ScalarTypeType) {
      a.kind = lower::Arg::Int;
      a.i = static_cast<int64_t>(to_dtype(static_cast<at::ScalarType>(v.toInt())));
    } else if (v.isBool()) {
      a.kind = lower::Arg::Bool;
      a.i = v.toBool();
    } else if (v.isInt() || v.isSymInt()) {
      a.kind = lower::Arg::Int;
      a.i = v.isInt() ? v.toInt() : v.toSymInt().expect_int();
    } else if (v.isIntList() || v.isSymIntList()) {
      a.kind = lower::Arg::IntList;
      for (const c10::IValue& e : v.toListRef()) a.ints.push_back(e.isInt() ? e.toInt() : e.toSymInt().expect_int());
    } else if (v.isBoolList()) {
      a.kind = lower::Arg::IntList;
      for (bool b : v.toBoolList()) a.ints.push_back(b);
    } else if (v.isDoubleList()) {
      a.kind = lower::Arg::FloatList;
      for (double f : v.toDoubleList()) a.floats.push_back(f);
    } else if (v.isString()) {
      a.kind = lower::Arg::String;
      a.s = v.toStringRef();
    }  // Device, Layout, MemoryFormat, Generator: nothing the lowering needs
    return a;
  }
};

// A list of (optional) tensors given as a generic list, not a Scalar[] (an empty one too) nor a list of numbers.
bool is_tensor_list(const c10::IValue& v) {
  if (!v.isList() || v.isIntList() || v.isDoubleList() || v.isBoolList()) return false;
  if (v.toList().elementType()->kind() == c10::TypeKind::NumberType) return false;
  return v.toListRef().empty() || !v.toListRef()[0].isScalar();
}

// Meta tensors shaped like the tpu tensors in `args`, for PyTorch's shape and dtype rules.
c10::IValue to_meta(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1) return v;
    return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
  }
  if (v.isTensorList()) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(to_meta(t).toTensor());
    return out;
  }
  if (is_tensor_list(v)) {  // optional-tensor lists
    c10::List<std::optional<at::Tensor>> out;
    for (const c10::IValue& e : v.toListRef())
      out.push_back(e.isNone() || !e.toTensor().defined() ? std::nullopt : std::optional<at::Tensor>(to_meta(e).toTensor()));
    return out;
  }
  if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) return c10::Device(c10::kMeta);
  return v;
}

// Runs PyTorch's Meta kernel of `op` on meta copies of `args`; returns its outputs.
// A CPU scalar tensor stays on the CPU, as most meta kernels expect; those that insist on one device
// for all tensors (masked_fill's) get another try with it as a meta tensor too.
torch::jit::Stack run_meta(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  torch::jit::Stack meta;
  const auto& params = op.schema().arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    meta.push_back(to_meta(args[i]));
    // out= tensors go in empty: resizing the real ones warns once, after the meta kernel (as CPU)
    if (i < params.size() && params[i].is_out() && meta.back().isTensor() && meta.back().toTensor().defined())
      meta.back() = at::empty({0}, meta.back().toTensor().options());
  }
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
  } catch (const std::exception&) {  // (a Python meta kernel's error is not a c10::Error)
    auto cpu_scalar = [](const c10::IValue& v) {
      return v.isTensor() && v.toTensor().defined() && v.toTensor().device().is_cpu() && v.toTensor().dim() == 0;
    };
    if (std::none_of(args.begin(), args.end(), cpu_scalar)) throw;
    meta.clear();
    for (const c10::IValue& v : args)
      meta.push_back(cpu_scalar(v) ? c10::IValue(at::empty({}, v.toTensor().options().device(c10::kMeta))) : to_meta(v));
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
  }
  return meta;
}

// CPU copies of the tpu tensors in `args` (and the CPU for a tpu device=).
c10::IValue to_cpu(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 ? t.to(c10::kCPU) : t;
  }
  if (v.isTensorList()) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(to_cpu(t).toTensor());
    return out;
  }
  if (is_tensor_list(v)) {
    c10::List<std::optional<at::Tensor>> out;
    for (const c10::IValue& e : v.toListRef())
      out.push_back(e.isNone() || !e.toTensor().defined() ? std::nullopt : std::optional<at::Tensor>(to_cpu(e).toTensor()));
    return out;
  }
  if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) return c10::Device(c10::kCPU);
  return v;
}

// PyTorch's meta kernel rejected a call. Meta and CPU kernels do not always agree on the exception
// type (IndexError or RuntimeError), so CPU's kernel, run on copies, decides what the user sees: its
// error, or, should it accept the call (a Python meta kernel that fails on what CPU accepts, such as
// normal's of a complex mean), its results, whose types stand in for the meta kernel's. Only on this
// error path: a host sync.
torch::jit::Stack results_like_cpu(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  std::exception_ptr meta_error = std::current_exception();
  torch::jit::Stack cpu;
  try {
    for (const c10::IValue& v : args) cpu.push_back(to_cpu(v));
  } catch (const std::exception&) {
    std::rethrow_exception(meta_error);
  }
  op.callBoxed(&cpu);
  return cpu;
}

void flatten(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) { if (v.toTensor().defined()) out.push_back(v.toTensor()); }  // undefined: an optional return
  else if (v.isTensorList()) for (const at::Tensor& t : v.toTensorVector()) out.push_back(t);
  else if (v.isList())  // Tensor?[] (index lists)
    for (const c10::IValue& e : v.toListRef())
      if (e.isTensor() && e.toTensor().defined()) out.push_back(e.toTensor());
}

// The functional overload of an out= op: the one of the same name whose arguments are the out= op's
// minus its outputs (add.out -> add.Tensor). None for factories with a dtype= (the out's dtype is theirs).
std::optional<c10::OperatorHandle> functional_of(const c10::OperatorHandle& op) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::vector<std::string>> overloads;  // base name -> overload names
  static std::unordered_map<std::string, std::optional<c10::OperatorHandle>> found;
  std::lock_guard<std::mutex> lock(mu);
  const c10::OperatorName& full = op.operator_name();
  std::string key = full.name + "." + full.overload_name;
  if (auto it = found.find(key); it != found.end()) return it->second;
  if (overloads.empty())
    for (const c10::OperatorName& n : c10::Dispatcher::singleton().getAllOpNames()) overloads[n.name].push_back(n.overload_name);
  auto inputs = [](const c10::FunctionSchema& s) {
    std::vector<std::string> sig;
    for (const c10::Argument& a : s.arguments())
      if (!a.is_out()) sig.push_back(a.name() + ":" + a.type()->str());
    return sig;
  };
  std::optional<c10::OperatorHandle> match;
  for (const std::string& ov : overloads[full.name]) {
    auto cand = c10::Dispatcher::singleton().findSchema({full.name, ov});
    if (!cand || cand->schema().is_mutable()) continue;
    if (inputs(cand->schema()) == inputs(op.schema())) { match = cand; break; }
  }
  return found[key] = match;
}

// TensorIterator casts results into out= tensors of another dtype for some ops (add, sin) and rejects
// them for others (neg, all, argmax); the meta kernels do not tell which. So where an out dtype is not
// the functional op's result dtype, CPU's kernel, run on copies, decides: a host sync, once per op and
// dtypes, before the op is launched or recorded (a flush inside a recording would cut its graph).
void check_out_dtypes_like_cpu(const c10::OperatorHandle& op, const std::string& name, c10::ArrayRef<c10::IValue> args,
                               const std::vector<at::Tensor>& outs) {
  static std::mutex mu;
  static std::set<std::string> accepted;
  std::string key = name + '|' + std::to_string(static_cast<int>(c10::typeMetaToScalarType(c10::get_default_dtype())));
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = args[i];
    key += '|';
    if (v.isTensor() && v.toTensor().defined())
      key += std::to_string(static_cast<int>(v.toTensor().scalar_type())) + (v.toTensor().dim() == 0 ? "s" : "t");
    else if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorVector()) key += std::to_string(static_cast<int>(t.scalar_type())) + ',';
    else if (v.isDouble()) key += 'f';
    else if (v.isComplexDouble()) key += 'c';
    else if (v.isBool()) key += 'b';
    else if (v.isInt()) key += kind_of(op.schema().arguments()[i].real_type()) == c10::TypeKind::ScalarTypeType
                                   ? std::to_string(v.toInt()) : "i";
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    if (accepted.count(key)) return;
  }
  auto accept = [&] {
    std::lock_guard<std::mutex> lock(mu);
    accepted.insert(key);
  };
  auto functional = functional_of(op);
  if (!functional) return accept();
  torch::jit::Stack meta;
  for (size_t i = 0; i < args.size(); ++i)
    if (!op.schema().arguments()[i].is_out()) meta.push_back(to_meta(args[i]));
  try {
    functional->redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
  } catch (const std::exception&) {
    return;  // no verdict: the op's own meta kernel reports bad input
  }
  std::vector<at::Tensor> natural;
  for (const c10::IValue& v : meta) flatten(v, natural);
  bool differs = false;
  for (size_t k = 0; k < outs.size() && k < natural.size(); ++k) differs |= outs[k].scalar_type() != natural[k].scalar_type();
  if (!differs) return accept();
  torch::jit::Stack cpu;
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = args[i];
    bool out = op.schema().arguments()[i].is_out() && v.isTensor() && v.toTensor().defined();
    cpu.push_back(out ? c10::IValue(at::empty(v.toTensor().sizes(), v.toTensor().options().device(c10::kCPU))) : to_cpu(v));
  }
  try {
    op.callBoxed(&cpu);
  } catch (const c10::NotImplementedError&) {  // a dtype CPU lacks says nothing about the out= rule
  }
  accept();
}

// A layout other than the contiguous one that a result can be created in.
bool dense_permuted(const at::Tensor& t) {
  return t.is_non_overlapping_and_dense() && t.strides() != c10::contiguous_strides(t.sizes());
}

// out= of a pointwise op (TensorIterator's) computes in the dtype of its inputs, the functional op's result
// dtype, and only then casts into out: add(f16, f16, out=f64) overflows as in f16. (Reductions, cumsum:
// out's dtype is the computation's, as the out= meta kernel says.) The cast is the copy into out.
// An out tensor that gets resized takes the functional result's layout, as TensorIterator gives it.
void pointwise_out_like_functional(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args,
                                   std::vector<hlo::TensorType>& types, std::vector<hlo::Dims>& strides,
                                   const std::vector<at::Tensor>& out) {
  auto functional = functional_of(op);
  if (!functional) return;
  torch::jit::Stack meta;
  for (size_t i = 0; i < args.size(); ++i)
    if (!op.schema().arguments()[i].is_out()) meta.push_back(args[i]);
  try {
    meta = run_meta(*functional, meta);
  } catch (const std::exception&) {
    return;  // the out= meta kernel accepted the call: its types stand
  }
  std::vector<at::Tensor> natural;
  for (const c10::IValue& v : meta) flatten(v, natural);
  if (natural.size() != types.size()) return;
  for (size_t k = 0; k < types.size(); ++k) {
    types[k].dtype = to_dtype(natural[k].scalar_type());
    if (k < out.size() && out[k].sizes() != natural[k].sizes() && dense_permuted(natural[k]))
      strides[k] = natural[k].strides().vec();
  }
}

// A Tensor?[] argument. The TorchScript interpreter passes one as a GenericList (List[Optional[Tensor]]),
// eager calls as an OptionalTensorList: IValue::toOptionalTensorList() asserts on the former.
c10::List<std::optional<at::Tensor>> optional_tensor_list(const c10::IValue& v) {
  if (v.isOptionalTensorList()) return v.toOptionalTensorList();
  c10::List<std::optional<at::Tensor>> out;
  for (const c10::IValue& e : v.toListRef())
    out.push_back(e.isNone() || !e.toTensor().defined() ? std::nullopt : std::optional<at::Tensor>(e.toTensor()));
  return out;
}

// Index lists may hold CPU tensors, as on CUDA: they move to the device. Boolean masks become their
// nonzero() positions (a host sync, as on CUDA) in index.Tensor, whose result shape they decide, and in
// index_put when other indices come with them (a lone mask is lowered as a select).
bool reads_index_lists(const std::string& name) {
  for (const char* op : {"index.Tensor", "index.Tensor_out", "index_put", "index_put_", "_index_put_impl_", "_index_put_impl"})
    if (name == op) return true;
  return false;
}

void prepare_indices(const std::string& name, torch::jit::Stack* stack, size_t n) {
  bool index_read = name == "index.Tensor" || name == "index.Tensor_out";
  const at::Tensor& self = (*stack)[stack->size() - n].toTensor();
  c10::IValue& list = (*stack)[stack->size() - n + 1];
  c10::List<std::optional<at::Tensor>> given = optional_tensor_list(list);
  std::vector<at::Tensor> ts;
  int defined = 0, masks = 0;
  for (std::optional<at::Tensor> t : given) {
    ts.push_back(t ? *t : at::Tensor());
    defined += ts.back().defined();
    masks += ts.back().defined() && (ts.back().scalar_type() == at::kBool || ts.back().scalar_type() == at::kByte);
  }
  // A lone mask is put without its count (no host sync) unless the values extend along the selected
  // dim: then the count decides whether they fit, and CPU raises at once when they do not.
  bool values_need_count = false;
  if (masks && !index_read && defined == 1 && (name.rfind("index_put", 0) == 0 || name.rfind("_index_put_impl", 0) == 0)) {
    const at::Tensor& values = (*stack)[stack->size() - n + 2].toTensor();
    int64_t start = std::find_if(ts.begin(), ts.end(), [](const at::Tensor& t) { return t.defined(); }) - ts.begin();
    int64_t rank = self.dim() - ts[start].dim() + 1, at = values.dim() - (rank - start);
    values_need_count = at >= 0 && values.size(at) != 1;
  }
  if (masks && (index_read || defined > 1 || values_need_count)) {
    ts = at::native::expandTensors(self, given, true);  // (warns of uint8 masks, as CPU does)
  } else if (masks) {
    for (const at::Tensor& t : ts)
      if (t.defined() && t.scalar_type() == at::kByte)
        TORCH_WARN("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.");
  }
  c10::List<std::optional<at::Tensor>> idx;
  for (const at::Tensor& t : ts)
    idx.push_back(!t.defined() ? std::nullopt : std::optional<at::Tensor>(t.device() == self.device() ? t : t.to(self.device())));
  list = idx;
}

hlo::TensorType type_of(const at::Tensor& t) { return {to_dtype(t.scalar_type()), t.sizes().vec()}; }

// The mutated (in-place) and out= tensors of a call, flattened in argument order.
struct Mutated {
  std::vector<at::Tensor> self, out, read;  // in-place targets; out= targets; every other tensor argument
};

// CPU's memory-overlap rules for written tensors (TensorIterator's): no element written twice, and no
// written tensor partly overlapping an input (the same tensor is fine, except for the ops that gather, and
// for the in-place ops that scatter into self: no other argument may alias self at all).
// threshold_, zero_ and fill_ with a Python scalar check nothing (an expanded tensor takes the same value at each
// of its aliases).
Overlap overlap_rule(const std::string& name) {
  static const std::set<std::string> gather = {"cat", "take", "masked_select", "kthvalue", "index_select", "gather",
                                               "index"};
  static const std::set<std::string> scatter = {"index_add_", "index_copy_", "index_fill_", "index_put_",
                                                "_index_put_impl_", "put_", "scatter_", "scatter_add_", "scatter_reduce_"};
  std::string base = name.substr(0, name.find('.'));
  if (base == "threshold" || base == "threshold_" || name == "zero_" || name == "fill_.Scalar") return Overlap::Unchecked;
  return gather.count(base) ? Overlap::Gathers : scatter.count(base) ? Overlap::Scatters : Overlap::Checked;
}

void check_overlap(Overlap rule, const Mutated& m) {
  if (rule == Overlap::Unchecked) return;
  bool disjoint = rule == Overlap::Gathers || rule == Overlap::Scatters;
  for (const auto* written : {&m.self, &m.out})
    for (const at::Tensor& w : *written) {
      at::assert_no_internal_overlap(w);
      for (size_t k = rule == Overlap::Scatters; k < m.read.size(); ++k) {  // (a scatter's read[0] is self)
        const at::Tensor& t = m.read[k];
        if (disjoint) at::assert_no_overlap(w, t);
        else if (!t.is_same(w)) at::assert_no_partial_overlap(w, t);
      }
    }
}

bool fills_selected_elements(const std::string& name) {
  std::string base = name.substr(0, name.find('.'));
  return base == "masked_fill_" || base == "index_fill_" || base == "index_put_" || base == "_index_put_impl_";
}

// CPU and CUDA only warn when masked_fill_, index_fill_ or index_put_ write an expanded self: each selected
// element writes its storage element (the last write wins; index_put_'s accumulate adds them all). Here that
// is an index_put_ of the selected positions into the whole storage, seen as one flat tensor.
bool write_expanded_self(const std::string& name, torch::jit::Stack* stack, size_t n) {
  std::string base = name.substr(0, name.find('.'));
  bool index_put = base == "index_put_" || base == "_index_put_impl_";
  auto args = torch::jit::last(*stack, n);
  at::Tensor self = args[0].toTensor();
  if (at::has_internal_overlap(self) != at::MemOverlap::Yes) return false;
  TORCH_WARN("Use of ", index_put ? "index_put_" : base, " on expanded tensors is deprecated. Please clone() the tensor ",
             "before performing this operation. This also applies to advanced indexing e.g. ",
             index_put ? "tensor[indices] = tensor" : "tensor[mask] = scalar");
  int64_t numel = static_cast<int64_t>(self.storage().nbytes()) / self.dtype().itemsize();
  at::Tensor flat = at::empty({0}, self.options()).set_(self.storage(), 0, {numel}, {1});
  at::Tensor where = at::arange(numel, self.options().dtype(at::kLong)).as_strided(self.sizes(), self.strides(),
                                                                                  self.storage_offset());
  const c10::IValue& value = args[index_put ? 2 : base == "index_fill_" ? 3 : 2];
  at::Tensor positions = base == "masked_fill_" ? where.masked_select(args[1].toTensor())
                         : index_put            ? where.index(optional_tensor_list(args[1]))
                                                : where.index_select(args[1].toInt(), args[2].toTensor());
  at::Tensor values = value.isTensor() ? value.toTensor() : at::scalar_tensor(value.toScalar(), self.options());
  if (!index_put) values = values.to(self.scalar_type());
  flat.index_put_({positions.reshape(-1)}, values.expand(positions.sizes()).reshape(-1),
                  index_put && args[3].toBool());
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, self);
  return true;
}

// An out= tensor that is also read (x.op_(y) as op(x, y, out=x)) cannot be resized to the broadcast shape.
void check_read_write_shapes(const Mutated& m, const std::vector<at::Tensor>& results) {
  for (size_t k = 0; k < m.out.size() && k < results.size(); ++k)
    for (const at::Tensor& t : m.read)
      TORCH_CHECK(!t.is_same(m.out[k]) || m.out[k].sizes() == results[k].sizes(), "output with shape ",
                  m.out[k].sizes(), " doesn't match the broadcast shape ", results[k].sizes());
}

// The dtype of the call's first tensor argument (what CPU's "not implemented for" names).
c10::ScalarType first_dtype(c10::ArrayRef<c10::IValue> args) {
  for (const c10::IValue& v : args)
    if (v.isTensor() && v.toTensor().defined()) return v.toTensor().scalar_type();
  return c10::ScalarType::Undefined;
}

std::string torch_name(at::Layout l) {
  switch (l) {
    case at::kSparse: return "torch.sparse_coo";
    case at::kSparseCsr: return "torch.sparse_csr";
    case at::kSparseCsc: return "torch.sparse_csc";
    case at::kSparseBsr: return "torch.sparse_bsr";
    case at::kSparseBsc: return "torch.sparse_bsc";
    case at::kMkldnn: return "torch._mkldnn";
    case at::kJagged: return "torch.jagged";
    default: return "torch.strided";
  }
}

std::string torch_name(c10::ScalarType t) {
  std::string s = c10::toString(t);
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return "torch." + s;
}

[[noreturn]] void not_lowered(const std::string& qualified_name) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: ", qualified_name,
                              " has no tpu lowering yet. To run it on the CPU instead, set TORCH_TPU_CPU_FALLBACK=1 "
                              "or wrap the code in `with torch_tpu.cpu_fallback():`");
}

// Ops whose result shape depends on the data: they need the values on the host anyway, so they
// run there (a host sync, like CUDA's) instead of failing.
bool data_dependent(const std::string& name) {
  static const std::set<std::string> ops = {
      "masked_select", "unique_dim", "_unique", "_unique2", "unique_consecutive",
      "unique_dim_consecutive", "repeat_interleave.Tensor", "masked_select.out", "bincount",
      "_local_scalar_dense"};
  return ops.count(name) || ops.count(name.substr(0, name.find('.')));
}

void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& name, Overlap overlap) {
  static std::mutex mu;
  static std::set<std::string> warned;
  {  // CPU's overlap checks: the CPU copies of the arguments never alias each other
    Mutated m;
    const auto& params = op.schema().arguments();
    auto args = torch::jit::last(*stack, params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      flatten(args[i], params[i].is_out() ? m.out : m.read);
      if (is_write(params[i]) && !params[i].is_out()) flatten(args[i], m.self);
    }
    check_overlap(overlap, m);
  }
  if (data_dependent(name)) {
    metrics::count(metrics::HostSyncs);
    metrics::add("host_ops:" + name);
    return at::native::cpu_fallback(op, stack);
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    if (warned.insert(name).second)
      TORCH_WARN("tpu: aten::", name, " has no tpu lowering; running it on the CPU (slow: copies both ways)");
  }
  metrics::add("cpu_fallback:" + name);
  at::native::cpu_fallback(op, stack);
}

}  // namespace

void reject_unsupported_tensors(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  auto name = [&] { return entry_of(op).name; };
  auto quantized = [&](c10::ScalarType t) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: aten::", name(), ": quantized tensors (", torch_name(t),
                                ") are not supported on tpu; quantize on the CPU (tensor.cpu())");
  };
  auto layout = [&](at::Layout l) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: aten::", name(), " has no tpu kernel for tensors of layout ", torch_name(l),
                                "; use them on the CPU (tensor.cpu())");
  };
  const auto& params = op.schema().arguments();
  for (size_t i = 0; i < args.size() && i < params.size(); ++i) {
    const c10::IValue& v = args[i];
    c10::TypeKind k = kind_of(params[i].real_type());  // type() says int for ScalarType and Layout
    if (k == c10::TypeKind::ScalarTypeType && v.isInt() && c10::isQIntType(static_cast<c10::ScalarType>(v.toInt())))
      quantized(static_cast<c10::ScalarType>(v.toInt()));
    if (k == c10::TypeKind::LayoutType && v.isInt() && static_cast<at::Layout>(v.toInt()) != at::kStrided)
      layout(static_cast<at::Layout>(v.toInt()));
    if (v.isTensor() && v.toTensor().defined()) {
      if (v.toTensor().is_quantized()) quantized(v.toTensor().scalar_type());
      if (v.toTensor().layout() != at::kStrided) layout(v.toTensor().layout());
    }
  }
  // dense -> sparse compressed conversions (COO: sparse.cpp): the layout is in the name
  const std::string& base = op.operator_name().name;
  if (base.find("to_sparse_") == std::string::npos) return;
  for (auto [suffix, l] : {std::pair{"csr", at::kSparseCsr}, {"csc", at::kSparseCsc}, {"bsr", at::kSparseBsr}, {"bsc", at::kSparseBsc}})
    if (base == std::string("aten::_to_sparse_") + suffix || base == std::string("aten::to_sparse_") + suffix) layout(l);
}

Launched run(OpCall& call, const InferResults& infer, c10::ArrayRef<c10::IValue> args) {
  try {
    return mode() == Mode::Fuse ? record(call, infer) : launch(call, infer);
  } catch (const pjrt::Error& e) {
    rethrow(e, "");
  } catch (const lower::IndexError& e) {
    TORCH_CHECK_INDEX(false, e.what());
  } catch (const lower::ArgumentError& e) {
    TORCH_CHECK(false, e.what());
  } catch (const CheckFailed& e) {  // Debug mode: a device-side check of this op
    rethrow(e);
  } catch (const hlo::DTypeError& e) {  // as CPU and CUDA kernels without that dtype
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", call.name, "\" not implemented for '", first_dtype(args), "' on tpu (", e.what(), ")");
  } catch (const hlo::Error& e) {
    TORCH_CHECK(false, "tpu: lowering aten::", call.name, " failed: ", e.what());
  }
}

void set_cpu_fallback(bool on) { fallback_on = on; }
bool cpu_fallback() { return fallback_on; }

at::Tensor& copy_out(at::Tensor& out, const at::Tensor& result) {
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

std::string python_origin() {
  // PyTorch releases the GIL around ops; the calling Python thread is parked in this call, so
  // taking the GIL back briefly reads its frames safely. Threads without Python (the autograd
  // engine's) have no origin.
  if (!Py_IsInitialized() || _Py_IsFinalizing() || !PyGILState_GetThisThreadState()) return "";
  PyGILState_STATE gil = PyGILState_Ensure();
  std::string origin;
  PyFrameObject* f = PyEval_GetFrame();
  Py_XINCREF(f);
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    bool internal = !file || strstr(file, "/torch/") || strstr(file, "/torch_tpu/") || file[0] == '<';
    if (!internal) origin = std::string(file) + ":" + std::to_string(PyFrame_GetLineNumber(f));
    Py_DECREF(code);
    PyFrameObject* back = internal ? PyFrame_GetBack(f) : nullptr;
    Py_DECREF(f);
    f = back;
  }
  PyGILState_Release(gil);
  return origin;
}

void dispatch(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpEntry& entry = entry_of(op);
  const std::string& name = entry.name;
  const lower::Rule* rule = entry.rule;
  const c10::FunctionSchema& schema = op.schema();
  const auto& params = schema.arguments();
  size_t n = params.size();
  // Sparse and quantized tensors dispatch to their own keys (register.cpp); here only dtype= and
  // layout= arguments, and conversions to sparse layouts, can ask for them.
  if (entry.typed_params) reject_unsupported_tensors(op, torch::jit::last(*stack, n));
  if (!rule) {
    if (fallback_on || entry.data_dependent) return run_on_cpu(op, stack, name, entry.overlap);
    not_lowered(entry.qualified);
  }
  if (entry.index_lists) prepare_indices(name, stack, n);
  auto args = torch::jit::last(*stack, n);
  if (entry.complex_rejection) reject_complex(*entry.complex_rejection, name, args.slice(0, n - entry.out_args));
  if (entry.check_args) entry.check_args(name, args);
  if (launch_blocking()) check_bounds(name, args);
  if (entry.fills_selected && write_expanded_self(name, stack, n)) return;

  OpCall call;
  call.name = name;
  call.rule = rule;
  call.precision = matmul_precision();
  Builder b{call, entry.qualified};
  Mutated m;
  at::Generator generator;
  for (size_t i = 0; i < n; ++i) {
    const c10::Argument& p = params[i];
    if (p.type()->kind() == c10::TypeKind::OptionalType && unwrap(p.type())->kind() == c10::TypeKind::GeneratorType &&
        !args[i].isNone())
      generator = args[i].toGenerator();
    if (p.is_out()) {
      flatten(args[i], m.out);
      continue;
    }
    if (is_write(p)) flatten(args[i], m.self);
    flatten(args[i], m.read);
    call.args.push_back(b.arg(p, args[i]));
  }
  // Factory calls have no tensor arguments: their device comes from the device= argument.
  if (b.device < 0)
    for (size_t i = 0; i < n; ++i)
      if (args[i].isDevice() && args[i].toDevice().type() == c10::DeviceType::PrivateUse1)
        b.device = args[i].toDevice().has_index() ? args[i].toDevice().index() : 0;
  check_overlap(entry.overlap, m);
  for (const at::Tensor& t : m.out) {
    if (b.device < 0) b.device = t.device().index();
    // as CUDA's structured out= kernels: before any dtype check
    TORCH_CHECK(t.device() == c10::Device(c10::DeviceType::PrivateUse1, b.device), "Expected out tensor to have device ",
                c10::Device(c10::DeviceType::PrivateUse1, b.device), ", but got ", t.device(), " instead");
  }
  if (!m.out.empty() && m.self.empty() && !rule->random) check_out_dtypes_like_cpu(op, name, args, m.out);
  // The default dtype decides result types (integer true_divide, int tensor + Python float, factories).
  call.context_key.push_back(static_cast<char>(c10::typeMetaToScalarType(c10::get_default_dtype())));
  for (const at::Tensor& t : m.out) call.context_key.push_back(static_cast<char>(t.scalar_type()));
  // The key leaves out the strides of size-1 dims, which decide whether PyTorch calls an input
  // channels_last (and so lays out pooling, upsampling and convolution results)
  for (const at::Tensor& t : m.read)
    if (t.dim() >= 4)
      call.context_key.push_back(static_cast<char>(t.suggest_memory_format()) + 8 * unbatched_channels_last_3d(t));
  call.device = std::max(b.device, 0);
  if (rule->random) {
    auto [seed, counter] = next_random(generator, call.device);
    call.inputs.push_back(Input::integer(static_cast<int64_t>(seed)));
    call.inputs.push_back(Input::integer(static_cast<int64_t>(counter)));
  }
  for (size_t k = 0; k < m.self.size(); ++k) {
    TORCH_CHECK(m.self[k].device().type() == c10::DeviceType::PrivateUse1, "tpu: aten::", name,
                " writes a ", m.self[k].device(), " tensor");
    call.writes.push_back(Write{k, &storage_of(m.self[k]), view_of(m.self[k])});
  }
  call.locate = &python_origin;
  if (launch_blocking()) call.where();

  // PyTorch's meta kernels give result shapes and dtypes, and raise PyTorch's own errors for bad
  // input. Needed only when the program is not cached: the key fixes both.
  auto infer = [&]() -> Results {
    std::vector<hlo::TensorType> types;
    // in-place ops without any meta kernel (_fused_sgd_): the results are the mutated arguments
    if (!m.self.empty() && !op.hasKernelForDispatchKey(c10::DispatchKey::Meta) &&
        !op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) {
      for (const at::Tensor& t : m.self) types.push_back(type_of(t));
      return types;
    }
    if (m.self.empty() && entry.grad_like_input) return Results({type_of(args[1].toTensor())});
    torch::jit::Stack meta;
    try {
      meta = run_meta(op, args);
    } catch (const std::exception&) {
      meta = results_like_cpu(op, args);
    }
    std::vector<at::Tensor> outs;
    for (const c10::IValue& v : meta) flatten(v, outs);
    if (!m.self.empty()) {
      // Python meta kernels (PyTorch's refs) resize an in-place op's self to the broadcast shape
      for (size_t k = 0; k < m.self.size() && k < outs.size(); ++k) {
        c10::IntArrayRef self = m.self[k].sizes(), broadcast = outs[k].sizes();
        TORCH_CHECK(self == broadcast || !at::is_expandable_to(self, broadcast), "output with shape ", self,
                    " doesn't match the broadcast shape ", broadcast);
      }
      for (const at::Tensor& t : m.self) types.push_back(type_of(t));
      return types;
    }
    for (const at::Tensor& t : outs) types.push_back(type_of(t));
    // the layout PyTorch gives a new result (a pointwise op or clone keeps a channels_last or transposed
    // input's); out= results are copied into the out tensors' own layout
    std::vector<hlo::Dims> strides;
    for (const at::Tensor& t : outs)
      strides.push_back(m.out.empty() && dense_permuted(t) ? t.strides().vec() : hlo::Dims{});
    if (!m.out.empty() && entry.pointwise) pointwise_out_like_functional(op, args, types, strides, m.out);
    if (entry.fix_results) entry.fix_results(args, outs, types, strides);
    return Results(std::move(types), std::move(strides));
  };

  Launched res = run(call, infer, args);
  // Optional returns (a backward whose output_mask is off): the rule gives only the defined ones;
  // the meta kernel says which returns are None.
  std::vector<bool> none_at;
  if (m.self.empty() && m.out.empty() && res.results.size() < schema.returns().size()) {
    for (const c10::IValue& v : run_meta(op, args)) none_at.push_back(v.isNone() || (v.isTensor() && !v.toTensor().defined()));
  }

  torch::jit::drop(*stack, n);
  if (!m.self.empty()) {  // in-place: the mutated arguments are the returns
    for (size_t k = 0; k < schema.returns().size() && k < m.self.size(); ++k) torch::jit::push(*stack, m.self[k]);
    return;
  }
  std::vector<at::Tensor> results;
  for (size_t k = 0; k < res.results.size(); ++k)
    results.push_back(wrap(res.results[k], to_scalar_type(res.types[k].dtype), res.types[k].dims, call.device,
                           call.known_where(), k < res.strides.size() ? res.strides[k] : hlo::Dims{}));
  if (!m.out.empty()) {  // out=: the functional results copied into the out tensors
    check_read_write_shapes(m, results);
    if (entry.keeps_out_shape) fit_sequence_out(entry.name, m.out[0], results[0]);
    bool resized = false;
    for (size_t k = 0; k < m.out.size(); ++k)
      if (at::native::resize_output(m.out[k], results[k].sizes())) {
        resized = true;
        if (!results[k].is_contiguous()) m.out[k].as_strided_(results[k].sizes(), results[k].strides());
      }
    if (resized) check_overlap(entry.overlap, m);  // as CPU, which checks the resized out tensors
    for (size_t k = 0; k < m.out.size(); ++k) {
      Storage& st = storage_of(m.out[k]);
      if (m.out[k].scalar_type() == results[k].scalar_type() && Write{k, &st, view_of(m.out[k])}.covers())
        st.assign(storage_of(results[k]).contents(), storage_of(results[k]).dtype, storage_of(results[k]).origin);
      else
        m.out[k].copy_(results[k]);
    }
    results = m.out;
  }
  const auto& returns = schema.returns();
  if (returns.size() == 1 && returns[0].type()->kind() == c10::TypeKind::ListType) {
    torch::jit::push(*stack, c10::IValue(results));
    return;
  }
  if (none_at.size() == returns.size()) {
    std::vector<at::Tensor> all;
    for (size_t k = 0, j = 0; k < none_at.size(); ++k) all.push_back(none_at[k] || j >= results.size() ? at::Tensor() : results[j++]);
    results = all;
  }
  TORCH_CHECK(results.size() == returns.size(), "tpu: aten::", name, " produced ", results.size(),
              " results for ", returns.size(), " returns");
  for (const at::Tensor& t : results) torch::jit::push(*stack, t);
}

std::vector<c10::IValue> call(const char* name, const char* overload, std::vector<c10::IValue> args) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow((std::string("aten::") + name).c_str(), overload);
  torch::jit::Stack stack(args.begin(), args.end());
  dispatch(op, &stack);
  return stack;
}

}  // namespace tpu::aten

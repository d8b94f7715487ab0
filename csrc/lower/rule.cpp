#include "lower/rule.h"

#include <algorithm>
#include <map>

namespace tpu::lower {
namespace {
std::map<std::string, Rule, std::less<>>& table() {
  static auto* t = new std::map<std::string, Rule, std::less<>>();
  return *t;
}
}  // namespace

Register::Register(std::initializer_list<Entry> entries) {
  for (const Entry& e : entries) {
    std::string_view names = e.names;
    while (!names.empty()) {
      size_t bar = names.find('|');
      table()[std::string(names.substr(0, bar))] = Rule{e.fn, e.structural, e.random};
      names = bar == std::string_view::npos ? std::string_view() : names.substr(bar + 1);
    }
  }
}

const Rule* find(std::string_view name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second;
}

const Rule* find_for_call(std::string_view name) {
  if (const Rule* r = find(name)) return r;
  size_t dot = name.find('.');
  std::string_view base = name.substr(0, dot);
  if (base.size() > 1 && base.back() == '_' && base[base.size() - 2] != '_') {
    std::string functional(base.substr(0, base.size() - 1));
    if (dot == std::string_view::npos) return find(functional);
    if (const Rule* r = find(functional + std::string(name.substr(dot)))) return r;
    return name.substr(dot) == ".Tensor" ? find(functional) : nullptr;  // floor_divide_.Tensor: floor_divide
  }
  return nullptr;
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const auto& kv : table()) out.push_back(kv.first);
  return out;
}

const Arg& Ctx::arg(size_t i) const {
  if (i >= args.size()) fail("argument " + std::to_string(i) + " missing");
  return args[i];
}

Value Ctx::v(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::Tensor && a.kind != Arg::Scalar) fail("argument " + std::to_string(i) + " is not a tensor");
  return inputs[a.ints[0]];
}

Values Ctx::vs(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::TensorList && a.kind != Arg::ScalarList) fail("argument " + std::to_string(i) + " is not a tensor list");
  Values out;
  for (int64_t k : a.ints) out.push_back(k >= 0 ? inputs[k] : Value{});
  return out;
}

int64_t Ctx::i(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::Int && a.kind != Arg::Bool) fail("argument " + std::to_string(i) + " is not an int");
  return a.i;
}

const std::vector<int64_t>& Ctx::ints(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::IntList) fail("argument " + std::to_string(i) + " is not an int list");
  return a.ints;
}

const std::vector<double>& Ctx::floats(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::FloatList) fail("argument " + std::to_string(i) + " is not a float list");
  return a.floats;
}

double Ctx::f(size_t i) const { return arg(i).f; }

const std::string& Ctx::s(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::String) fail("argument " + std::to_string(i) + " is not a string");
  return a.s;
}

void Ctx::fail(const std::string& why) const { throw hlo::Error("lowering: " + why); }
void Ctx::fail_dtype(const std::string& why) const { throw hlo::DTypeError("lowering: " + why); }

}  // namespace tpu::lower

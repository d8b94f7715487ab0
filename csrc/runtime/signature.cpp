#include "runtime/signature.h"

#include <algorithm>
#include <cctype>

#include "pjrt/plugin.h"

namespace tpu {

static std::optional<hlo::TensorType> parse_tensor(const std::string& s) {
  hlo::TensorType t;
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    size_t j = i;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    if (j >= s.size() || s[j] != 'x') break;  // digits that start the element type
    t.dims.push_back(std::stoll(s.substr(i, j - i)));
    i = j + 1;
  }
  std::string elem = s.substr(i);
  for (int k = 0; k < kNumDTypes; ++k)
    if (kDTypeInfo[k].mlir == elem) {
      t.dtype = static_cast<DType>(k);
      return t;
    }
  return std::nullopt;
}

std::optional<std::vector<hlo::TensorType>> main_parameters(const std::string& program) {
  size_t start = program.find("@main(");
  if (start == std::string::npos) return std::nullopt;
  size_t end = program.find(')', start);
  if (end == std::string::npos) return std::nullopt;
  std::vector<hlo::TensorType> params;
  for (size_t p = program.find("tensor<", start); p < end; p = program.find("tensor<", p)) {
    size_t q = p + 7;
    int depth = 1;
    while (q < program.size() && depth) depth += program[q] == '<' ? 1 : program[q] == '>' ? -1 : 0, ++q;
    auto t = parse_tensor(program.substr(p + 7, q - p - 8));
    if (!t) return std::nullopt;
    params.push_back(*t);
    p = q;
  }
  return params;
}

int64_t largest_tensor(const std::string& program) {
  int64_t largest = 0;
  for (size_t p = program.find("tensor<"); p != std::string::npos; p = program.find("tensor<", p + 7)) {
    int64_t n = 1;
    size_t i = p + 7;
    while (i < program.size() && std::isdigit(static_cast<unsigned char>(program[i]))) {
      size_t j = i;
      while (j < program.size() && std::isdigit(static_cast<unsigned char>(program[j]))) ++j;
      if (j >= program.size() || program[j] != 'x') break;
      n *= std::stoll(program.substr(i, j - i));
      i = j + 1;
    }
    largest = std::max(largest, n);
  }
  return largest;
}

void check_arguments(const std::vector<hlo::TensorType>& params,
                     const std::vector<hlo::TensorType>& args) {
  auto fail = [](const std::string& msg) {
    throw pjrt::Error(pjrt::abi::ErrorCode::INVALID_ARGUMENT, msg);
  };
  if (params.size() != args.size())
    fail("program takes " + std::to_string(params.size()) + " arguments, got " + std::to_string(args.size()));
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i] != args[i])
      fail("argument " + std::to_string(i) + ": program expects " + params[i].str() + ", got " + args[i].str());
}

}  // namespace tpu

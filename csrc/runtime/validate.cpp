#include "runtime/validate.h"

#include <functional>
#include <map>
#include <regex>
#include <set>
#include <vector>

#include "pjrt/client.h"

namespace tpu {
namespace {

[[noreturn]] void reject(const std::string& why) {
  throw pjrt::Error(pjrt::abi::ErrorCode::INVALID_ARGUMENT, "tpu: program rejected before compiling: " + why);
}

void check_nesting(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (in_string) {
      if (ch == '\\') ++i;
      else if (ch == '"') in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '{' && ++depth > kMaxNesting) {
      reject("regions nested deeper than " + std::to_string(kMaxNesting) + " levels");
    } else if (ch == '}') {
      --depth;
    }
  }
}

void check_calls(const std::string& text) {
  static const std::regex def(R"(func\.func\s+(?:(?:public|private|nested)\s+)?@([\w.$-]+))");
  static const std::regex call(R"((?:func\.)?call\s+@([\w.$-]+))");
  std::map<std::string, std::set<std::string>> calls;
  std::vector<std::pair<size_t, std::string>> starts;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), def); it != std::sregex_iterator(); ++it)
    starts.emplace_back(static_cast<size_t>(it->position()), (*it)[1].str());
  for (size_t k = 0; k < starts.size(); ++k) {
    size_t end = k + 1 < starts.size() ? starts[k + 1].first : text.size();
    std::string body = text.substr(starts[k].first, end - starts[k].first);
    auto& callees = calls[starts[k].second];
    for (auto it = std::sregex_iterator(body.begin(), body.end(), call); it != std::sregex_iterator(); ++it)
      callees.insert((*it)[1].str());
  }
  std::map<std::string, int> state;  // 1: on the current path, 2: done
  std::function<void(const std::string&, const std::string&)> visit = [&](const std::string& f, const std::string& path) {
    state[f] = 1;
    for (const std::string& g : calls[f]) {
      if (state[g] == 1) reject("recursive call: " + path + " -> @" + g + " (the compiler does not support recursion)");
      if (state[g] == 0) visit(g, path + " -> @" + g);
    }
    state[f] = 2;
  };
  for (const auto& [f, _] : calls)
    if (state[f] == 0) visit(f, "@" + f);
}

}  // namespace

void validate_program(const std::string& text) {
  check_nesting(text);
  check_calls(text);
}

}  // namespace tpu

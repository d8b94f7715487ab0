#include "runtime/metrics.h"

#include <map>
#include <mutex>

namespace tpu::metrics {
namespace {
std::mutex mu;
std::map<std::string, double>& table() {
  static auto* t = new std::map<std::string, double>();  // leaked: read during interpreter exit
  return *t;
}
}  // namespace

void add(const std::string& name, double value) {
  std::lock_guard<std::mutex> lock(mu);
  table()[name] += value;
}

double get(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = table().find(name);
  return it == table().end() ? 0.0 : it->second;
}

std::vector<std::pair<std::string, double>> snapshot() {
  std::lock_guard<std::mutex> lock(mu);
  return {table().begin(), table().end()};
}

void reset() {
  std::lock_guard<std::mutex> lock(mu);
  table().clear();
}

}  // namespace tpu::metrics

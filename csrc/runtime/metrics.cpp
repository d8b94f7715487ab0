#include "runtime/metrics.h"

#include <pthread.h>

#include <atomic>
#include <map>
#include <mutex>

namespace tpu::metrics {
namespace {
std::mutex mu;
std::map<std::string, double>& table() {
  static auto* t = new std::map<std::string, double>();  // leaked: read during interpreter exit
  return *t;
}

// fork() copies only the forking thread: hold the lock across it, so that a child never inherits
// it locked by a thread that does not exist there (reading metrics in a forked child never hangs).
const bool fork_safe = [] {
  pthread_atfork([] { mu.lock(); }, [] { mu.unlock(); }, [] { mu.unlock(); });
  return true;
}();

constexpr const char* kHotNames[kHotCount] = {"ops_dispatched", "executions", "cache.memory_hits", "host_syncs"};
std::atomic<int64_t> hot[kHotCount];
}  // namespace

void count(Hot counter) { hot[counter].fetch_add(1, std::memory_order_relaxed); }

void add(const std::string& name, double value) {
  std::lock_guard<std::mutex> lock(mu);
  table()[name] += value;
}

double get(const std::string& name) {
  for (int h = 0; h < kHotCount; ++h)
    if (name == kHotNames[h]) return static_cast<double>(hot[h].load());
  std::lock_guard<std::mutex> lock(mu);
  auto it = table().find(name);
  return it == table().end() ? 0.0 : it->second;
}

std::vector<std::pair<std::string, double>> snapshot() {
  std::map<std::string, double> all;
  {
    std::lock_guard<std::mutex> lock(mu);
    all = table();
  }
  for (int h = 0; h < kHotCount; ++h)
    if (int64_t n = hot[h].load()) all[kHotNames[h]] += static_cast<double>(n);
  return {all.begin(), all.end()};
}

void reset() {
  for (auto& h : hot) h.store(0);
  std::lock_guard<std::mutex> lock(mu);
  table().clear();
}

}  // namespace tpu::metrics

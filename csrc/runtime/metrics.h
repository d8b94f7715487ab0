// Process-wide named counters (compiles, cache hits, compile seconds, ...). Every layer adds to
// them; torch_tpu.runtime.metrics() and torch_tpu.metrics read them. Safe to read in a forked child.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace tpu::metrics {

// Counters bumped on every op: lock-free, read under their names like the others.
enum Hot { OpsDispatched, Executions, MemoryHits, HostSyncs, kHotCount };
void count(Hot counter);

void add(const std::string& name, double value = 1.0);
double get(const std::string& name);
std::vector<std::pair<std::string, double>> snapshot();
void reset();

}  // namespace tpu::metrics

// Process-wide named counters (compiles, cache hits, compile seconds, ...). Every layer adds to
// them; torch_tpu.runtime.metrics() and torch_tpu.metrics read them.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace tpu::metrics {

void add(const std::string& name, double value = 1.0);
double get(const std::string& name);
std::vector<std::pair<std::string, double>> snapshot();
void reset();

}  // namespace tpu::metrics

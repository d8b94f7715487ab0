// The parameter types of a StableHLO program's @main, read from its text, so that execute can
// reject mismatched arguments (PJRT would silently reinterpret same-sized buffers).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "hlo/types.h"

namespace tpu {

// nullopt when the signature cannot be read (the plugin then reports what it finds).
std::optional<std::vector<hlo::TensorType>> main_parameters(const std::string& program);

// The element count of the largest tensor type anywhere in a program's text.
int64_t largest_tensor(const std::string& program);

// Throws pjrt::Error(INVALID_ARGUMENT) naming the first argument that does not match.
void check_arguments(const std::vector<hlo::TensorType>& params,
                     const std::vector<hlo::TensorType>& args);

}  // namespace tpu

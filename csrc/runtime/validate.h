// Checks on StableHLO text from outside (torch_tpu.runtime.execute) before the plugin sees it: the
// plugin crashes on some valid-looking programs instead of returning an error.
#pragma once
#include <string>

namespace tpu {

constexpr int kMaxNesting = 200;  // nested regions and attribute braces; our own programs use < 20

// Throws pjrt::Error (INVALID_ARGUMENT) naming the problem: braces nested deeper than kMaxNesting, or
// a function that calls itself directly or through others (the plugin recurses without end).
void validate_program(const std::string& text);

}  // namespace tpu

// SHA-256 (FIPS 180-4), used to name and verify compile-cache entries.
#pragma once
#include <string>
#include <string_view>

namespace tpu {
std::string sha256(std::string_view data);       // 32 raw bytes
std::string sha256_hex(std::string_view data);   // 64 hex characters
}  // namespace tpu

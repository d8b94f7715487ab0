// The tiny assertion kit of the C++ tests: CHECK records a failure and goes on; main returns
// failures() so the test program exits non-zero when anything failed.
#pragma once
#include <iostream>

namespace tpu::test {
inline int& failure_count() { static int n = 0; return n; }
inline int failures() {
  std::cout << (failure_count() ? "FAILED" : "OK") << " (" << failure_count() << " failures)\n";
  return failure_count() ? 1 : 0;
}
}  // namespace tpu::test

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      ++::tpu::test::failure_count();                                                 \
      std::cout << __FILE__ << ":" << __LINE__ << ": CHECK failed: " #cond "\n";       \
    }                                                                                 \
  } while (0)

// Checks that `stmt` throws `Exc` whose message contains `needle`.
#define CHECK_THROWS(Exc, stmt, needle)                                                  \
  do {                                                                                   \
    bool thrown = false;                                                                 \
    try { stmt; } catch (const Exc& e) {                                                 \
      thrown = std::string(e.what()).find(needle) != std::string::npos;                  \
      if (!thrown) std::cout << "  message was: " << e.what() << "\n";                   \
    }                                                                                    \
    if (!thrown) {                                                                       \
      ++::tpu::test::failure_count();                                                    \
      std::cout << __FILE__ << ":" << __LINE__ << ": expected " #Exc " containing '"     \
                << needle << "' from: " #stmt "\n";                                      \
    }                                                                                    \
  } while (0)

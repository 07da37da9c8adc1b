// What both `loom bench` runners share: the synthetic tokens they feed a model and the clock around a run.
#pragma once

#include <chrono>
#include <cstdint>

namespace loom::cli {

// A fixed, spread-out token for position `i` of a vocabulary of `vocab` (the same on every run, so runs compare).
inline std::int32_t token_at(std::int64_t i, std::int64_t vocab) {
  return static_cast<std::int32_t>((i * 7919 + 100) % vocab);
}

// Seconds that `run()` took.
inline double seconds_of(const auto& run) {
  const auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace loom::cli

// How much memory the machine can give a new allocation without swapping: MemAvailable from /proc/meminfo
// (Linux), or the free physical pages elsewhere (compute's reading, the one the gateway's default KV size
// uses). The binaries check a --kv-cache-mb against it before they allocate: the KV cache is written in
// full when it is made, so a budget past what is available fails as std::bad_alloc or brings the
// out-of-memory killer, neither of which tells the user why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "command_line.hpp"
#include "loom/compute/kv_memory_budget.hpp"

namespace loom::cli {

inline std::optional<std::uint64_t> available_memory_bytes() {
  const std::uint64_t bytes = compute::available_memory_bytes_or_zero();  // the reading the default KV size uses
  if (bytes == 0) return std::nullopt;
  return bytes;
}

// Throws UsageError when `--kv-cache-mb megabytes` asks for more memory than is available, saying both.
inline void check_kv_cache_fits_memory(std::int64_t megabytes) {
  const auto available = available_memory_bytes();
  if (megabytes <= 0 || !available) return;
  const std::uint64_t asked = static_cast<std::uint64_t>(megabytes) << 20;
  if (asked <= *available) return;
  throw UsageError("--kv-cache-mb " + std::to_string(megabytes) + " asks for " + std::to_string(megabytes) +
                   " MiB of memory for the KV cache, and this machine has " + std::to_string(*available >> 20) +
                   " MiB available (MemAvailable in /proc/meminfo); give a smaller --kv-cache-mb, or leave it out "
                   "for the default size");
}

}  // namespace loom::cli

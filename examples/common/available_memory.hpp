// How much memory the machine can give a new allocation without swapping: MemAvailable from /proc/meminfo
// (Linux), or the free physical pages elsewhere. The binaries check a --kv-cache-mb against it before
// they allocate: the KV cache is written in full when it is made, so a budget past what is available
// fails as std::bad_alloc or brings the out-of-memory killer, neither of which tells the user why.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "command_line.hpp"

namespace loom::cli {

inline std::optional<std::uint64_t> available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (!line.starts_with("MemAvailable:")) continue;
    std::istringstream fields(line.substr(line.find(':') + 1));
    std::uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  const long pages = ::sysconf(_SC_AVPHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
  return std::nullopt;
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
                   "for room for the model's own context");
}

}  // namespace loom::cli

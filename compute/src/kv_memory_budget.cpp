#include "loom/compute/kv_memory_budget.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace loom::compute {

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

std::string with_separators(std::uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string percent_text(double share) {
  std::ostringstream out;
  out << std::round(share * 1000.0) / 10.0 << " %";
  return out.str();
}

std::uint64_t saturating_product(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}

void check(const KvMemoryInputs& in) {
  if (in.bytes_per_token == 0) throw std::invalid_argument("kv memory budget: bytes_per_token must be positive");
  if (in.context_length <= 0) throw std::invalid_argument("kv memory budget: context_length must be positive");
  if (!(in.share > 0.0 && in.share <= 1.0)) throw std::invalid_argument("kv memory budget: share must be in (0, 1]");
  if (in.max_sequences < 0) throw std::invalid_argument("kv memory budget: max_sequences must not be negative");
  if (in.contexts_when_unknown <= 0) {
    throw std::invalid_argument("kv memory budget: contexts_when_unknown must be positive");
  }
}

// The caps, smallest first wins: the contexts the server can run at once, then the absolute ceiling.
std::uint64_t apply_caps(const KvMemoryInputs& in, std::uint64_t context_bytes, std::uint64_t bytes, std::string& reason) {
  if (in.max_sequences > 0) {
    const std::uint64_t all_sequences = saturating_product(context_bytes, static_cast<std::uint64_t>(in.max_sequences));
    if (bytes > all_sequences) {
      bytes = all_sequences;
      reason += ", capped at " + mib_text(all_sequences) + " = " + with_separators(static_cast<std::uint64_t>(in.max_sequences)) +
                " concurrent sequences x one full context of " + mib_text(context_bytes);
    }
  }
  if (in.max_bytes > 0 && bytes > in.max_bytes) {
    bytes = in.max_bytes;
    reason += ", capped at the ceiling of " + mib_text(in.max_bytes);
  }
  return bytes;
}

}  // namespace

std::string mib_text(std::uint64_t bytes) {
  if (bytes >= kMiB) return with_separators(bytes / kMiB) + " MiB";
  std::ostringstream out;
  out << std::round(static_cast<double>(bytes) / static_cast<double>(kMiB) * 100.0) / 100.0 << " MiB";
  return out.str();
}

KvMemoryBudget kv_budget_from_memory(const KvMemoryInputs& in) {
  check(in);
  const std::uint64_t context_bytes = saturating_product(in.bytes_per_token, static_cast<std::uint64_t>(in.context_length));
  std::uint64_t base = 0;  // what the rule asks for before the caps and the floors
  std::string base_text;
  std::string adjustments;
  std::uint64_t bytes = 0;
  if (in.available_bytes == 0) {
    base = saturating_product(context_bytes, static_cast<std::uint64_t>(in.contexts_when_unknown));
    base_text = "the available memory is unknown: room for " + std::to_string(in.contexts_when_unknown) +
                " full contexts of " + mib_text(context_bytes);
    bytes = apply_caps(in, context_bytes, base, adjustments);
  } else {
    const std::uint64_t kept = in.weight_bytes + in.margin_bytes;
    const std::uint64_t spare = in.available_bytes > kept ? in.available_bytes - kept : 0;
    base = static_cast<std::uint64_t>(static_cast<double>(spare) * in.share);
    base_text = percent_text(in.share) + " of " + mib_text(spare) + " available after the weights (" +
                mib_text(in.available_bytes) + " available - " + mib_text(in.weight_bytes) + " weights - " +
                mib_text(in.margin_bytes) + " margin)";
    bytes = apply_caps(in, context_bytes, base, adjustments);
    // One full context is what a request may hold; it takes precedence over the share and the caps as long
    // as the memory left after the weights holds it.
    if (bytes < context_bytes && context_bytes <= spare) {
      bytes = context_bytes;
      adjustments += ", raised to one full context of " + mib_text(context_bytes);
    } else if (bytes < context_bytes) {
      adjustments += ", less than one full context of " + mib_text(context_bytes) + ": the memory holds no more";
    }
  }
  if (bytes < in.min_bytes) {
    bytes = in.min_bytes;
    adjustments += ", raised to the least usable size of " + mib_text(in.min_bytes);
  }
  // "512 MiB = 25 % of ..." when the rule's answer stands, "768 MiB: 25 % of ... is 5,120 MiB, capped at ..."
  // when a cap or a floor changed it.
  const std::string reason = bytes == base ? mib_text(bytes) + " = " + base_text
                                           : mib_text(bytes) + ": " + base_text + " is " + mib_text(base);
  return KvMemoryBudget{.bytes = bytes, .reason = reason + adjustments};
}

std::uint64_t available_memory_bytes_or_zero() {
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
  return 0;
}

}  // namespace loom::compute

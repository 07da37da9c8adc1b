// CacheStats: a snapshot of the KV cache's occupancy and of how well prefix reuse works, as the Stats
// message and the metrics endpoint report it. A plain value.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::cache {

struct CacheStats {
  std::size_t block_size = 0;
  std::size_t total_blocks = 0;
  std::size_t used_blocks = 0;    // held by at least one sequence
  std::size_t cached_blocks = 0;  // held by none, kept as reusable prefixes (evictable)
  std::size_t free_blocks = 0;    // total = used + cached + free
  std::size_t sequences = 0;
  // Slots reserved but empty: the unfilled tail of each distinct partially filled last block.
  std::size_t wasted_slots = 0;
  std::uint64_t prompt_tokens_requested = 0;  // over every created sequence
  std::uint64_t prompt_tokens_reused = 0;     // of those, found in the cache (not prefilled again)
  std::uint64_t evicted_blocks = 0;
  std::uint64_t copied_blocks = 0;  // copy-on-write copies asked of the backend

  // tokens reused / tokens requested; 0 before any request.
  double prefix_hit_rate() const noexcept {
    return prompt_tokens_requested == 0
               ? 0.0
               : static_cast<double>(prompt_tokens_reused) / static_cast<double>(prompt_tokens_requested);
  }
};

}  // namespace loom::cache

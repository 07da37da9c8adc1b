// KvCache: one sequence's keys and values for the single-sequence callers (`loom logits`, tests,
// benchmarks): a PagedKvCache of its own whose blocks 0, 1, 2, ... are the sequence's block table, in order.
// The engine's scheduler instead shares one PagedKvCache among many sequences, with block tables from cache/.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "loom/compute/cpu/paged_kv_cache.hpp"

namespace loom::compute {

class KvCache {
 public:
  // Holds min(context_length, the pool's slots) positions. Throws std::invalid_argument when
  // context_length < 1.
  KvCache(PagedKvCache pages, std::int64_t context_length);

  std::int64_t context_length() const noexcept { return context_; }
  PagedKvCache& pages() noexcept { return pages_; }
  const PagedKvCache& pages() const noexcept { return pages_; }
  std::span<const std::int32_t> block_table() const noexcept { return table_; }

 private:
  PagedKvCache pages_;
  std::vector<std::int32_t> table_;
  std::int64_t context_;
};

}  // namespace loom::compute

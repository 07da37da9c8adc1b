#include "loom/compute/cpu/kv_cache.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace loom::compute {

KvCache::KvCache(PagedKvCache pages, std::int64_t context_length)
    : pages_(std::move(pages)), table_(static_cast<std::size_t>(pages_.blocks())) {
  if (context_length < 1) {
    throw std::invalid_argument("a KV cache needs a context of at least 1 position, got " + std::to_string(context_length));
  }
  std::iota(table_.begin(), table_.end(), 0);
  context_ = std::min(context_length, pages_.blocks() * pages_.block_size());
}

}  // namespace loom::compute

#include "loom/compute/cpu/paged_kv_cache.hpp"

#include "loom/compute/load_cancelled.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace loom::compute {
namespace {

std::size_t element_bytes_of(TensorType type) {
  if (type == TensorType::f16) return 2;
  if (type == TensorType::f32) return 4;
  throw std::invalid_argument("KV cache type must be f16 or f32, not " + std::string(name(type)));
}

void require_positive(std::int64_t value, std::int64_t max, const char* what) {
  if (value < 1 || value > max) {
    throw std::invalid_argument(std::string("KV cache ") + what + " must be in [1, " + std::to_string(max) +
                                "], got " + std::to_string(value));
  }
}

}  // namespace

std::uint64_t PagedKvCache::bytes_per_block(std::int64_t layers, std::int64_t kv_dim, std::int64_t block_size,
                                            TensorType type) {
  require_positive(layers, 1 << 16, "layer count");
  require_positive(kv_dim, 1 << 20, "row width (kv_dim)");
  require_positive(block_size, kMaxBlockSize, "block size");
  // At most 2 * 2^16 * 2^20 * 2^16 * 4 bytes: no overflow in 64 bits.
  return 2 * static_cast<std::uint64_t>(layers) * static_cast<std::uint64_t>(kv_dim) *
         static_cast<std::uint64_t>(block_size) * element_bytes_of(type);
}

PagedKvCache::PagedKvCache(std::int64_t layers, std::int64_t kv_dim, std::int64_t block_size, std::int64_t blocks,
                           TensorType type, const std::stop_token& stop)
    : layers_(layers), kv_dim_(kv_dim), block_size_(block_size), blocks_(blocks), type_(type),
      element_bytes_(element_bytes_of(type)) {
  const std::uint64_t per_block = bytes_per_block(layers, kv_dim, block_size, type);
  require_positive(blocks, kMaxBlocks, "block count");
  if (static_cast<std::uint64_t>(blocks) > std::numeric_limits<std::size_t>::max() / per_block) {
    throw std::invalid_argument("KV cache of " + std::to_string(blocks) + " blocks of " + std::to_string(per_block) +
                                " bytes does not fit in memory");
  }
  block_bytes_ = static_cast<std::size_t>(block_size * kv_dim) * element_bytes_;
  layer_bytes_ = block_bytes_ * static_cast<std::size_t>(blocks);
  const std::size_t total = layer_bytes_ * static_cast<std::size_t>(layers);
  keys_.reserve(total);
  values_.reserve(total);
  constexpr std::size_t kSlice = std::size_t{64} << 20;
  for (std::size_t done = 0; done < total; done += kSlice) {
    throw_if_stopped(stop, "the KV cache was being made");
    const std::size_t slice = std::min(kSlice, total - done);
    keys_.resize(done + slice);
    values_.resize(done + slice);
  }
}

PagedKvCache PagedKvCache::sized(std::int64_t layers, std::int64_t kv_dim, std::int64_t tokens,
                                 const KvCacheOptions& options, const std::stop_token& stop) {
  const std::uint64_t per_block = bytes_per_block(layers, kv_dim, options.block_size, options.type);
  std::int64_t blocks = 0;
  if (options.budget_bytes > 0) {
    const std::uint64_t fit = options.budget_bytes / per_block;
    if (fit == 0) {
      throw std::invalid_argument("a KV cache budget of " + std::to_string(options.budget_bytes) +
                                  " bytes holds no block; one takes " + std::to_string(per_block) + " bytes");
    }
    blocks = static_cast<std::int64_t>(std::min<std::uint64_t>(fit, kMaxBlocks));
  } else {
    require_positive(tokens, kMaxBlocks, "token count");
    blocks = (tokens + options.block_size - 1) / options.block_size;
  }
  return PagedKvCache(layers, kv_dim, options.block_size, blocks, options.type, stop);
}

void PagedKvCache::check_block(std::int32_t block, const char* what) const {
  if (block < 0 || block >= blocks_) {
    throw std::out_of_range(std::string(what) + " block " + std::to_string(block) + " is outside the KV cache's " +
                            std::to_string(blocks_) + " blocks");
  }
}

void PagedKvCache::copy_block(std::int32_t source, std::int32_t destination) {
  check_block(source, "source");
  check_block(destination, "destination");
  if (source == destination) return;
  for (std::int64_t layer = 0; layer < layers_; ++layer) {
    const std::size_t from = layer_offset(layer) + static_cast<std::size_t>(source) * block_bytes_;
    const std::size_t to = layer_offset(layer) + static_cast<std::size_t>(destination) * block_bytes_;
    std::memcpy(keys_.data() + to, keys_.data() + from, block_bytes_);
    std::memcpy(values_.data() + to, values_.data() + from, block_bytes_);
  }
}

void PagedKvCache::check_table(std::span<const std::int32_t> table, std::int64_t positions) const {
  const std::int64_t needed = (positions + block_size_ - 1) / block_size_;
  if (static_cast<std::int64_t>(table.size()) < needed) {
    throw std::out_of_range("a block table of " + std::to_string(table.size()) + " blocks cannot hold " +
                            std::to_string(positions) + " positions of " + std::to_string(block_size_) +
                            " per block");
  }
  for (std::int64_t i = 0; i < needed; ++i) check_block(table[static_cast<std::size_t>(i)], "block table's");
}

}  // namespace loom::compute

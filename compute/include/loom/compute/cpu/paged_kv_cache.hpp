// PagedKvCache: the keys and values of every sequence the model runs, in one pool of fixed-size blocks
// addressed by physical block id. Each layer holds K and V as [block][block_size * kv_dim elements]; a
// sequence's block table (logical block i -> physical block id, kept by the caller: cache/ does that
// bookkeeping) says where its position p lives: slot p % block_size of block table[p / block_size]. Memory
// then goes to the tokens sequences actually have, not to reserved max-length slots, and sequences can share
// blocks. Within a block the forward pass chooses the layout (llama_model.cpp: each KV head's key rows, and its
// values transposed, so that attention reads contiguous runs); the pool moves whole blocks only.
//
// Stored as F16 by default (half the memory of F32, at a precision attention does not notice; the
// reference implementation's arithmetic), or F32. Sized from a memory budget in bytes or a token count.
// Every block id that comes in is checked against the pool: a bad id is an exception, never a wild write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stop_token>
#include <vector>

#include "loom/compute/kv_cache_options.hpp"
#include "loom/compute/tensor_type.hpp"

namespace loom::compute {

class PagedKvCache {
 public:
  static constexpr std::int64_t kMaxBlockSize = 1 << 16;
  static constexpr std::int64_t kMaxBlocks = INT32_MAX;  // block ids are int32

  // `blocks` blocks of `block_size` slots for each of `layers` layers, kv_dim values per slot for K and
  // for V. Throws std::invalid_argument for a non-positive or too large size, or a type other than f16/f32.
  // The pool is zeroed (committed) here, a slice at a time: a stop requested on `stop` meanwhile ends it
  // with LoadCancelled, since a cache of many GiB takes seconds to commit and a shutdown must not wait.
  PagedKvCache(std::int64_t layers, std::int64_t kv_dim, std::int64_t block_size, std::int64_t blocks,
               TensorType type = TensorType::f16, const std::stop_token& stop = {});

  // Bytes one block takes over all layers, K and V.
  static std::uint64_t bytes_per_block(std::int64_t layers, std::int64_t kv_dim, std::int64_t block_size,
                                       TensorType type);
  // The pool for `options`: as many whole blocks as budget_bytes holds (std::invalid_argument when that is
  // not even one), or without a budget the blocks `tokens` need.
  static PagedKvCache sized(std::int64_t layers, std::int64_t kv_dim, std::int64_t tokens, const KvCacheOptions& options,
                            const std::stop_token& stop = {});

  std::int64_t layers() const noexcept { return layers_; }
  std::int64_t kv_dim() const noexcept { return kv_dim_; }
  std::int64_t block_size() const noexcept { return block_size_; }
  std::int64_t blocks() const noexcept { return blocks_; }
  TensorType type() const noexcept { return type_; }
  std::uint64_t bytes() const noexcept { return 2 * static_cast<std::uint64_t>(keys_.size()); }

  // Copies block `source` to block `destination` in every layer, K and V (copy-on-write of a shared block).
  // Throws std::out_of_range for an id outside the pool.
  void copy_block(std::int32_t source, std::int32_t destination);

  // Throws std::out_of_range unless `table` has the blocks for positions [0, positions) and each of them is
  // in the pool.
  void check_table(std::span<const std::int32_t> table, std::int64_t positions) const;

  // One layer's storage (element type type()): block b is the block_size() * kv_dim() elements from
  // b * block_size() * kv_dim(). Used with a checked table.
  void* keys(std::int64_t layer) noexcept { return keys_.data() + layer_offset(layer); }
  void* values(std::int64_t layer) noexcept { return values_.data() + layer_offset(layer); }
  const void* keys(std::int64_t layer) const noexcept { return keys_.data() + layer_offset(layer); }
  const void* values(std::int64_t layer) const noexcept { return values_.data() + layer_offset(layer); }
  std::size_t element_bytes() const noexcept { return element_bytes_; }

 private:
  std::size_t layer_offset(std::int64_t layer) const noexcept {
    return static_cast<std::size_t>(layer) * layer_bytes_;
  }
  void check_block(std::int32_t block, const char* what) const;

  std::int64_t layers_, kv_dim_, block_size_, blocks_;
  TensorType type_;
  std::size_t element_bytes_;
  std::size_t block_bytes_;  // one layer's block: block_size * kv_dim elements
  std::size_t layer_bytes_;
  std::vector<std::byte> keys_, values_;
};

}  // namespace loom::compute

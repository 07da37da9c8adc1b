// BlockAllocator: the fixed pool of KV blocks (ids 0 .. N-1, each of B token slots) and the state of each.
// A block is free (on the free list), used (held by at least one page table; its reference count says how
// many) or cached (no page table holds it, but it keeps a registered prefix that a later prompt may reuse).
// When a used block's count drops to zero it goes to the free list, or to the cached set if it is registered.
// Cached blocks are kept in least-recently-released order so that eviction takes the oldest first.
//
// Every operation is O(1): the free list is a stack of ids, the cached set an intrusive doubly linked list
// threaded through per-block arrays. Running out is not an error: allocate() returns std::nullopt and the
// caller (the scheduler) plans around the shortage. Misuse (an id out of range, releasing a block nobody
// holds) is a logic error and throws std::logic_error naming the block and its state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "loom/cache/block_types.hpp"

namespace loom::cache {

enum class BlockState : std::uint8_t { free, used, cached };

class BlockAllocator {
 public:
  // Bounds on the pool, so that a configuration cannot ask for unbounded bookkeeping memory.
  static constexpr std::size_t kMaxBlocks = std::size_t{1} << 22;
  static constexpr std::size_t kMaxBlockSize = 1024;
  // Slots in all (block_count * block_size): the prefix index keeps a token per slot.
  static constexpr std::size_t kMaxSlots = std::size_t{1} << 24;

  // Throws std::invalid_argument when block_count or block_size is 0 or above its bound, or when the pool
  // has more than kMaxSlots slots.
  BlockAllocator(std::size_t block_count, std::size_t block_size);

  std::size_t block_count() const noexcept { return states_.size(); }
  std::size_t block_size() const noexcept { return block_size_; }
  std::size_t free_count() const noexcept { return free_list_.size(); }
  std::size_t cached_count() const noexcept { return cached_count_; }
  std::size_t used_count() const noexcept { return block_count() - free_count() - cached_count(); }

  // A free block with reference count 1, or std::nullopt when the free list is empty. Never evicts: that
  // is evict_lru()'s job, because the owner of the prefix index must forget the evicted block.
  std::optional<BlockId> allocate();

  // One more holder. A cached block becomes used again (count 1) and leaves the eviction order.
  void retain(BlockId block);

  // One holder fewer. At zero the block becomes cached if registered, else free.
  void release(BlockId block);

  // Marks a used block as holding a registered prefix, so it is cached rather than freed at count zero.
  void mark_registered(BlockId block);

  // Frees the least recently released cached block and clears its registration; std::nullopt if none.
  std::optional<BlockId> evict_lru();

  BlockState state(BlockId block) const;
  std::uint32_t ref_count(BlockId block) const;
  bool is_registered(BlockId block) const;

  // Snapshots for tests and diagnostics (O(N)): the free list, and the cached blocks oldest first.
  std::vector<BlockId> free_blocks() const { return free_list_; }
  std::vector<BlockId> cached_blocks_oldest_first() const;

 private:
  void check_id(BlockId block, const char* operation) const;
  void unlink_cached(BlockId block);
  void link_cached_newest(BlockId block);

  std::size_t block_size_;
  std::vector<BlockState> states_;
  std::vector<std::uint32_t> ref_counts_;
  std::vector<std::uint8_t> registered_;
  std::vector<BlockId> free_list_;
  // Eviction order: prev/next per block, with index block_count() as the sentinel (next = oldest).
  std::vector<BlockId> lru_prev_;
  std::vector<BlockId> lru_next_;
  std::size_t cached_count_ = 0;
};

}  // namespace loom::cache

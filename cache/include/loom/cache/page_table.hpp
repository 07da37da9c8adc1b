// PageTable: one sequence's map from logical block (position / block_size) to physical block, and its token
// count. Appending reserves new blocks as the sequence grows and says exactly where each new token's K/V
// goes; fork() shares every block with a new table (parallel samples of one prompt); a table about to write
// into a block it shares (reference count > 1) first takes a fresh block and reports the copy the backend
// must do. Only the last, partially filled block is ever written: full blocks are immutable, which is what
// lets several sequences and the prefix index share them.
//
// A table holds references on blocks of a BlockAllocator it does not own, so every mutating call takes the
// allocator, and release() must be called before the table is dropped. It is move-only: fork() is the one
// way to duplicate it, because a copy would hold blocks without counting.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "loom/cache/block_allocator.hpp"
#include "loom/cache/block_types.hpp"

namespace loom::cache {

// What an append did: the copy to perform first (if any), then where each new token goes, in order.
struct AppendResult {
  std::size_t first_position = 0;  // sequence position of the first appended token
  std::optional<BlockCopy> copy;   // copy-on-write of the shared last block, to do before the writes
  std::vector<TokenSlot> slots;    // one per appended token
};

class PageTable {
 public:
  // Throws std::invalid_argument for block_size 0 or above BlockAllocator::kMaxBlockSize.
  explicit PageTable(std::size_t block_size);
  PageTable(PageTable&&) noexcept = default;
  PageTable& operator=(PageTable&&) noexcept = default;
  PageTable(const PageTable&) = delete;
  PageTable& operator=(const PageTable&) = delete;

  std::size_t block_size() const noexcept { return block_size_; }
  std::size_t token_count() const noexcept { return token_count_; }
  const std::vector<BlockId>& blocks() const noexcept { return blocks_; }
  // Slots allocated but not (yet) holding a token: the unused tail of the last block.
  std::size_t unused_slots() const noexcept { return blocks_.size() * block_size_ - token_count_; }

  // Where the token at `position` (< token_count()) lives. Throws std::out_of_range otherwise.
  TokenSlot slot(std::size_t position) const;

  // Fresh blocks append(new_tokens) would take from the allocator: new blocks beyond the last one, plus one
  // when the last block is partly filled and shared (copy-on-write).
  std::size_t blocks_needed(std::size_t new_tokens, const BlockAllocator& allocator) const;

  // Reserves slots for `new_tokens` more tokens. std::nullopt, with nothing changed, when the allocator has
  // fewer free blocks than blocks_needed(new_tokens).
  std::optional<AppendResult> append(std::size_t new_tokens, BlockAllocator& allocator);

  // Appends already filled, full blocks (a matched prefix), retaining each. The table must be empty or end
  // on a block boundary; throws std::logic_error otherwise.
  void append_full_blocks(std::span<const BlockId> blocks, BlockAllocator& allocator);

  // A new table sharing every block of this one (each block's count goes up by one).
  PageTable fork(BlockAllocator& allocator) const;

  // Drops every reference, last block first (so that a prefix's deeper blocks are older in the eviction
  // order than the blocks before them), and leaves the table empty.
  void release(BlockAllocator& allocator);

 private:
  std::size_t block_size_;
  std::size_t token_count_ = 0;
  std::vector<BlockId> blocks_;
};

}  // namespace loom::cache

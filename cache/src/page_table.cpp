#include "loom/cache/page_table.hpp"

#include <stdexcept>
#include <string>

namespace loom::cache {

PageTable::PageTable(std::size_t block_size) : block_size_(block_size) {
  if (block_size == 0 || block_size > BlockAllocator::kMaxBlockSize) {
    throw std::invalid_argument("PageTable: block_size " + std::to_string(block_size) + " is outside [1, " +
                                std::to_string(BlockAllocator::kMaxBlockSize) + "]");
  }
}

TokenSlot PageTable::slot(std::size_t position) const {
  if (position >= token_count_) {
    throw std::out_of_range("PageTable::slot: position " + std::to_string(position) + " is past the " +
                            std::to_string(token_count_) + " tokens of the sequence");
  }
  return {blocks_[position / block_size_], static_cast<std::uint32_t>(position % block_size_)};
}

std::size_t PageTable::blocks_needed(std::size_t new_tokens, const BlockAllocator& allocator) const {
  if (new_tokens == 0) return 0;
  const std::size_t capacity = blocks_.size() * block_size_;
  const std::size_t total = token_count_ + new_tokens;
  const std::size_t grow = total > capacity ? (total - capacity + block_size_ - 1) / block_size_ : 0;
  const bool last_partial = token_count_ % block_size_ != 0;
  const bool copy = last_partial && allocator.ref_count(blocks_.back()) > 1;
  return grow + (copy ? 1 : 0);
}

std::optional<AppendResult> PageTable::append(std::size_t new_tokens, BlockAllocator& allocator) {
  if (allocator.block_size() != block_size_) {
    throw std::logic_error("PageTable::append: allocator block size " + std::to_string(allocator.block_size()) +
                           " differs from the table's " + std::to_string(block_size_));
  }
  if (blocks_needed(new_tokens, allocator) > allocator.free_count()) return std::nullopt;

  AppendResult result;
  result.first_position = token_count_;
  if (new_tokens == 0) return result;
  if (token_count_ % block_size_ != 0 && allocator.ref_count(blocks_.back()) > 1) {
    // Another table still reads the tokens already in this block: write into a private copy.
    const BlockId fresh = *allocator.allocate();
    result.copy = BlockCopy{blocks_.back(), fresh};
    allocator.release(blocks_.back());
    blocks_.back() = fresh;
  }
  result.slots.reserve(new_tokens);
  for (std::size_t i = 0; i < new_tokens; ++i) {
    const std::size_t position = token_count_ + i;
    if (position / block_size_ == blocks_.size()) blocks_.push_back(*allocator.allocate());
    result.slots.push_back({blocks_.back(), static_cast<std::uint32_t>(position % block_size_)});
  }
  token_count_ += new_tokens;
  return result;
}

void PageTable::append_full_blocks(std::span<const BlockId> blocks, BlockAllocator& allocator) {
  if (token_count_ % block_size_ != 0) {
    throw std::logic_error("PageTable::append_full_blocks: the table's " + std::to_string(token_count_) +
                           " tokens do not end on a block boundary");
  }
  for (const BlockId block : blocks) {  // check all first, so that a bad id leaves the table unchanged
    if (allocator.state(block) == BlockState::free) {
      throw std::logic_error("PageTable::append_full_blocks: block " + std::to_string(block) + " is free");
    }
  }
  for (const BlockId block : blocks) {
    allocator.retain(block);
    blocks_.push_back(block);
    token_count_ += block_size_;
  }
}

PageTable PageTable::fork(BlockAllocator& allocator) const {
  PageTable child(block_size_);
  for (const BlockId block : blocks_) allocator.retain(block);
  child.blocks_ = blocks_;
  child.token_count_ = token_count_;
  return child;
}

void PageTable::release(BlockAllocator& allocator) {
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) allocator.release(*it);
  blocks_.clear();
  token_count_ = 0;
}

}  // namespace loom::cache

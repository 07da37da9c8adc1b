#include "loom/cache/block_allocator.hpp"

#include <limits>
#include <stdexcept>
#include <string>

namespace loom::cache {
namespace {

const char* state_name(BlockState state) {
  switch (state) {
    case BlockState::free: return "free";
    case BlockState::used: return "used";
    case BlockState::cached: return "cached";
  }
  return "unknown";
}

}  // namespace

BlockAllocator::BlockAllocator(std::size_t block_count, std::size_t block_size) : block_size_(block_size) {
  if (block_count == 0 || block_count > kMaxBlocks) {
    throw std::invalid_argument("BlockAllocator: block_count " + std::to_string(block_count) +
                                " is outside [1, " + std::to_string(kMaxBlocks) + "]");
  }
  if (block_size == 0 || block_size > kMaxBlockSize) {
    throw std::invalid_argument("BlockAllocator: block_size " + std::to_string(block_size) +
                                " is outside [1, " + std::to_string(kMaxBlockSize) + "]");
  }
  if (block_count * block_size > kMaxSlots) {
    throw std::invalid_argument("BlockAllocator: " + std::to_string(block_count) + " blocks of " +
                                std::to_string(block_size) + " slots exceed the bound of " +
                                std::to_string(kMaxSlots) + " slots");
  }
  states_.assign(block_count, BlockState::free);
  ref_counts_.assign(block_count, 0);
  registered_.assign(block_count, 0);
  lru_prev_.assign(block_count + 1, static_cast<BlockId>(block_count));
  lru_next_.assign(block_count + 1, static_cast<BlockId>(block_count));
  // Pushed in reverse so that a fresh pool hands out 0, 1, 2, ... (easier to read in logs and tests).
  free_list_.reserve(block_count);
  for (std::size_t i = block_count; i > 0; --i) free_list_.push_back(static_cast<BlockId>(i - 1));
}

void BlockAllocator::check_id(BlockId block, const char* operation) const {
  if (block < 0 || static_cast<std::size_t>(block) >= block_count()) {
    throw std::logic_error(std::string("BlockAllocator::") + operation + ": block " + std::to_string(block) +
                           " is out of range (pool of " + std::to_string(block_count()) + ")");
  }
}

std::optional<BlockId> BlockAllocator::allocate() {
  if (free_list_.empty()) return std::nullopt;
  const BlockId block = free_list_.back();
  free_list_.pop_back();
  states_[block] = BlockState::used;
  ref_counts_[block] = 1;
  return block;
}

void BlockAllocator::retain(BlockId block) {
  check_id(block, "retain");
  switch (states_[block]) {
    case BlockState::free:
      throw std::logic_error("BlockAllocator::retain: block " + std::to_string(block) + " is free");
    case BlockState::cached:
      unlink_cached(block);
      states_[block] = BlockState::used;
      ref_counts_[block] = 1;
      return;
    case BlockState::used:
      if (ref_counts_[block] == std::numeric_limits<std::uint32_t>::max()) {
        throw std::logic_error("BlockAllocator::retain: block " + std::to_string(block) +
                               " reference count would overflow");
      }
      ++ref_counts_[block];
      return;
  }
}

void BlockAllocator::release(BlockId block) {
  check_id(block, "release");
  if (states_[block] != BlockState::used) {
    throw std::logic_error("BlockAllocator::release: block " + std::to_string(block) + " is " +
                           state_name(states_[block]) + ", not used");
  }
  if (--ref_counts_[block] > 0) return;
  if (registered_[block] != 0) {
    states_[block] = BlockState::cached;
    link_cached_newest(block);
  } else {
    states_[block] = BlockState::free;
    free_list_.push_back(block);
  }
}

void BlockAllocator::mark_registered(BlockId block) {
  check_id(block, "mark_registered");
  if (states_[block] != BlockState::used) {
    throw std::logic_error("BlockAllocator::mark_registered: block " + std::to_string(block) + " is " +
                           state_name(states_[block]) + ", not used");
  }
  registered_[block] = 1;
}

std::optional<BlockId> BlockAllocator::evict_lru() {
  const auto sentinel = static_cast<BlockId>(block_count());
  const BlockId oldest = lru_next_[sentinel];
  if (oldest == sentinel) return std::nullopt;
  unlink_cached(oldest);
  states_[oldest] = BlockState::free;
  registered_[oldest] = 0;
  free_list_.push_back(oldest);
  return oldest;
}

BlockState BlockAllocator::state(BlockId block) const {
  check_id(block, "state");
  return states_[block];
}

std::uint32_t BlockAllocator::ref_count(BlockId block) const {
  check_id(block, "ref_count");
  return ref_counts_[block];
}

bool BlockAllocator::is_registered(BlockId block) const {
  check_id(block, "is_registered");
  return registered_[block] != 0;
}

std::vector<BlockId> BlockAllocator::cached_blocks_oldest_first() const {
  std::vector<BlockId> order;
  order.reserve(cached_count_);
  const auto sentinel = static_cast<BlockId>(block_count());
  for (BlockId b = lru_next_[sentinel]; b != sentinel; b = lru_next_[b]) order.push_back(b);
  return order;
}

void BlockAllocator::unlink_cached(BlockId block) {
  lru_next_[lru_prev_[block]] = lru_next_[block];
  lru_prev_[lru_next_[block]] = lru_prev_[block];
  --cached_count_;
}

void BlockAllocator::link_cached_newest(BlockId block) {
  const auto sentinel = static_cast<BlockId>(block_count());
  const BlockId newest = lru_prev_[sentinel];
  lru_prev_[block] = newest;
  lru_next_[block] = sentinel;
  lru_next_[newest] = block;
  lru_prev_[sentinel] = block;
  ++cached_count_;
}

}  // namespace loom::cache

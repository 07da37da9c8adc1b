#include "loom/cache/prefix_index.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "loom/cache/block_allocator.hpp"

namespace loom::cache {

std::uint64_t chained_block_hash(std::uint64_t parent_hash, std::span<const TokenId> tokens) noexcept {
  // Each step folds one token in and scrambles with a 64-bit odd multiply and xor-shifts (a splitmix-style
  // finalizer), so every token influences every output bit and the order of tokens matters.
  std::uint64_t h = parent_hash ^ 0x9E3779B97F4A7C15ull;
  for (const TokenId token : tokens) {
    h ^= static_cast<std::uint32_t>(token);
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  h ^= static_cast<std::uint64_t>(tokens.size());
  h *= 0x94D049BB133111EBull;
  return h ^ (h >> 29);
}

PrefixIndex::PrefixIndex(std::size_t block_count, std::size_t block_size, BlockHashFn hash)
    : block_size_(block_size), hash_(hash) {
  if (block_count == 0 || block_count > BlockAllocator::kMaxBlocks) {
    throw std::invalid_argument("PrefixIndex: block_count " + std::to_string(block_count) + " is outside [1, " +
                                std::to_string(BlockAllocator::kMaxBlocks) + "]");
  }
  if (block_size == 0 || block_size > BlockAllocator::kMaxBlockSize) {
    throw std::invalid_argument("PrefixIndex: block_size " + std::to_string(block_size) + " is outside [1, " +
                                std::to_string(BlockAllocator::kMaxBlockSize) + "]");
  }
  if (block_count * block_size > BlockAllocator::kMaxSlots) {
    throw std::invalid_argument("PrefixIndex: " + std::to_string(block_count) + " blocks of " +
                                std::to_string(block_size) + " slots exceed the bound of " +
                                std::to_string(BlockAllocator::kMaxSlots) + " slots");
  }
  if (hash == nullptr) throw std::invalid_argument("PrefixIndex: the hash function is null");
  tokens_.assign(block_count * block_size, 0);
  hash_of_block_.assign(block_count, 0);
  registered_.assign(block_count, 0);
}

bool PrefixIndex::contains(BlockId block) const {
  return block >= 0 && static_cast<std::size_t>(block) < registered_.size() && registered_[block] != 0;
}

std::span<const TokenId> PrefixIndex::stored_tokens(BlockId block) const {
  return std::span<const TokenId>(tokens_).subspan(static_cast<std::size_t>(block) * block_size_, block_size_);
}

PrefixMatch PrefixIndex::match(std::span<const TokenId> tokens) const {
  PrefixMatch result;
  const std::size_t full_blocks = tokens.size() / block_size_;
  for (std::size_t k = 0; k < full_blocks; ++k) {
    const auto block_tokens = tokens.subspan(k * block_size_, block_size_);
    const std::uint64_t h = hash_(result.link.hash, block_tokens);
    const auto it = entries_.find(h);
    if (it == entries_.end()) break;
    const Entry& entry = it->second;
    if (entry.parent_serial != result.link.serial) break;
    if (!std::ranges::equal(stored_tokens(entry.block), block_tokens)) break;
    result.blocks.push_back(entry.block);
    result.link = {h, entry.serial};
  }
  result.tokens = result.blocks.size() * block_size_;
  return result;
}

InsertResult PrefixIndex::insert(PrefixLink parent, std::span<const TokenId> block_tokens, BlockId block) {
  if (block_tokens.size() != block_size_) {
    throw std::invalid_argument("PrefixIndex::insert: " + std::to_string(block_tokens.size()) +
                                " tokens given for a block of " + std::to_string(block_size_));
  }
  if (block < 0 || static_cast<std::size_t>(block) >= registered_.size()) {
    throw std::invalid_argument("PrefixIndex::insert: block " + std::to_string(block) + " is out of range");
  }
  const std::uint64_t h = hash_(parent.hash, block_tokens);
  if (const auto it = entries_.find(h); it != entries_.end()) {
    const Entry& entry = it->second;
    if (entry.parent_serial == parent.serial && std::ranges::equal(stored_tokens(entry.block), block_tokens)) {
      return {InsertOutcome::duplicate, {h, entry.serial}};
    }
    return {InsertOutcome::collision, {}};
  }
  if (registered_[block] != 0) {
    throw std::logic_error("PrefixIndex::insert: block " + std::to_string(block) +
                           " is already registered with other contents");
  }
  const Entry entry{block, next_serial_++, parent.serial};
  entries_.emplace(h, entry);
  std::ranges::copy(block_tokens, tokens_.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(block) * block_size_));
  hash_of_block_[block] = h;
  registered_[block] = 1;
  return {InsertOutcome::inserted, {h, entry.serial}};
}

void PrefixIndex::erase(BlockId block) {
  if (!contains(block)) return;
  entries_.erase(hash_of_block_[block]);
  registered_[block] = 0;
}

}  // namespace loom::cache

// PrefixIndex: finds which leading blocks of a prompt are already in the KV cache. A full block is known by
// a chained hash: the hash of its tokens and of its parent block's hash, so a block's identity covers the
// whole prefix before it and equal prompts map to the same blocks. match(tokens) walks the prompt block by
// block and returns the longest chain of registered blocks.
//
// Hashes can collide, so a hash is only a lookup key: each entry keeps its block's tokens and the serial
// number of its parent entry, and a match accepts an entry only if both agree with the prompt. By induction
// along the chain a returned prefix has exactly the prompt's tokens, whatever the hash function (tests
// inject a colliding one through the constructor). One entry per hash: a second, different block with the
// same hash is not registered (a collision costs reuse, never correctness).
//
// The index does not own blocks or decide eviction; BlockManager keeps it in step with the allocator
// (insert when a full block's K/V is written, erase when the allocator evicts the block). Costs: match is
// O(tokens) hashing plus O(1) expected per block; insert and erase are O(block_size) expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "loom/cache/block_types.hpp"

namespace loom::cache {

// hash(parent_hash, tokens of one full block) -> the block's hash. A plain function pointer: the index calls
// it once per block of every lookup, and tests swap in a deliberately weak one.
using BlockHashFn = std::uint64_t (*)(std::uint64_t parent_hash, std::span<const TokenId> tokens);

// The default: a 64-bit multiply-xorshift mix of the parent hash and every token.
std::uint64_t chained_block_hash(std::uint64_t parent_hash, std::span<const TokenId> tokens) noexcept;

// A position in a chain of registered blocks: the hash and entry serial of the last block. The default value
// is the empty prefix (the root every chain starts from).
struct PrefixLink {
  std::uint64_t hash = 0;
  std::uint64_t serial = 0;
  friend bool operator==(const PrefixLink&, const PrefixLink&) = default;
};

struct PrefixMatch {
  std::vector<BlockId> blocks;  // the cached blocks of the prefix, in order
  std::size_t tokens = 0;       // tokens they cover: blocks.size() * block_size
  PrefixLink link;              // the chain position after them, to register the prompt's later blocks
};

enum class InsertOutcome : std::uint8_t {
  inserted,   // the block is now matchable
  duplicate,  // an entry with the same tokens and parent exists; its link continues the chain
  collision,  // another block holds this hash; nothing registered, and the chain cannot continue
};

struct InsertResult {
  InsertOutcome outcome = InsertOutcome::inserted;
  PrefixLink link;  // the new or existing entry's link; meaningless after a collision
};

class PrefixIndex {
 public:
  // Throws std::invalid_argument for sizes outside the BlockAllocator's bounds (kMaxSlots included) or a
  // null hash function.
  PrefixIndex(std::size_t block_count, std::size_t block_size, BlockHashFn hash = chained_block_hash);

  std::size_t block_size() const noexcept { return block_size_; }
  std::size_t size() const noexcept { return entries_.size(); }
  bool contains(BlockId block) const;

  // The longest registered prefix of `tokens`, in whole blocks (a partial last block never matches).
  PrefixMatch match(std::span<const TokenId> tokens) const;

  // Registers `block`, which holds `block_tokens` (exactly block_size of them), after `parent`. Throws
  // std::invalid_argument for a wrong token count or an id out of range, std::logic_error if `block` is
  // already registered under another entry.
  InsertResult insert(PrefixLink parent, std::span<const TokenId> block_tokens, BlockId block);

  // Forgets `block` (evicted); no-op when it is not registered.
  void erase(BlockId block);

 private:
  struct Entry {
    BlockId block;
    std::uint64_t serial;
    std::uint64_t parent_serial;
  };

  std::span<const TokenId> stored_tokens(BlockId block) const;

  std::size_t block_size_;
  BlockHashFn hash_;
  std::unordered_map<std::uint64_t, Entry> entries_;
  // Per block: its tokens (block_size each) and, when registered, its hash.
  std::vector<TokenId> tokens_;
  std::vector<std::uint64_t> hash_of_block_;
  std::vector<std::uint8_t> registered_;
  std::uint64_t next_serial_ = 1;  // 0 is the root
};

}  // namespace loom::cache

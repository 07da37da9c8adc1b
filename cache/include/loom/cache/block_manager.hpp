// BlockManager: the KV cache bookkeeping of a whole engine behind one message-shaped API (plain values in,
// plain values out, no callbacks), for the CacheManager actor to own. It ties a BlockAllocator, one PageTable
// per sequence and a PrefixIndex together:
//   - create_sequence(prompt) reuses the longest cached prefix of the prompt and reserves slots for the rest;
//   - append(tokens) reserves slots for more tokens (decode, or a later prefill chunk), copying a shared
//     last block first when needed;
//   - commit(computed) says the backend has written K/V for the first `computed` positions: from then on the
//     full blocks among them can be matched by other prompts (never before, so that no one reuses a block
//     whose K/V is still being computed in the same step);
//   - fork shares all of a sequence's blocks with a new one; release drops a sequence, and its committed full
//     blocks stay cached as prefixes until an allocation needs the space (least recently released first).
// A shortage is a result, not an exception: a Reservation with missing_blocks > 0 changed nothing. Caller
// mistakes (an unknown or duplicate sequence id, a sequence longer than the whole cache) throw
// std::invalid_argument naming the id and the limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "loom/cache/block_allocator.hpp"
#include "loom/cache/block_types.hpp"
#include "loom/cache/cache_stats.hpp"
#include "loom/cache/page_table.hpp"
#include "loom/cache/prefix_index.hpp"

namespace loom::cache {

using SequenceId = std::uint64_t;

struct BlockManagerConfig {
  std::size_t block_count = 0;
  std::size_t block_size = 16;
  BlockHashFn hash = chained_block_hash;
};

// The answer to a reservation. When missing_blocks > 0 nothing was reserved and the other fields are empty.
struct Reservation {
  std::size_t missing_blocks = 0;   // blocks that would have to be freed for this reservation to fit
  std::size_t reused_tokens = 0;    // leading prompt tokens whose K/V is already cached (create only)
  std::size_t first_position = 0;   // position of the first token to compute
  std::optional<BlockCopy> copy;    // block copy the backend must do before writing the slots
  std::vector<TokenSlot> slots;     // where each token to compute goes, in order

  bool reserved() const noexcept { return missing_blocks == 0; }
};

class BlockManager {
 public:
  // Throws std::invalid_argument for a pool outside the BlockAllocator's bounds or a null hash function.
  explicit BlockManager(const BlockManagerConfig& config);

  std::size_t block_size() const noexcept { return allocator_.block_size(); }
  // The longest sequence the cache could ever hold: every slot of every block.
  std::size_t max_sequence_tokens() const noexcept { return allocator_.block_count() * allocator_.block_size(); }
  // Blocks an allocation may take now: free ones plus cached ones it may evict.
  std::size_t available_blocks() const noexcept { return allocator_.free_count() + allocator_.cached_count(); }

  // Blocks create_sequence(prompt) would consume from available_blocks() (the cached blocks it reuses
  // count, since they stop being evictable), and blocks append(id, n) would take.
  std::size_t create_cost(std::span<const TokenId> prompt, bool reuse_prefix = true) const;
  std::size_t append_cost(SequenceId id, std::size_t new_tokens) const;

  // A new sequence holding `prompt`. Reuses the longest cached prefix, but at most prompt.size() - 1 tokens:
  // the last prompt token is always computed, since its logits give the first sampled token. Without
  // reuse_prefix every token is computed (an embedding pools the hidden states of all of them); its full
  // blocks become matchable as any prompt's do.
  Reservation create_sequence(SequenceId id, std::span<const TokenId> prompt, bool reuse_prefix = true);

  // Slots for `tokens` appended to sequence `id`.
  Reservation append(SequenceId id, std::span<const TokenId> tokens);

  // The backend has written K/V for positions [0, computed_tokens) of `id` (values below an earlier commit
  // are ignored). Throws std::invalid_argument when computed_tokens exceeds the sequence's length.
  void commit(SequenceId id, std::size_t computed_tokens);

  // `child` (a new id) shares every block of `parent`; its tokens and commit point are the parent's.
  void fork(SequenceId parent, SequenceId child);

  // Drops the sequence; its committed full blocks stay cached as prefixes, the rest become free.
  void release(SequenceId id);

  // The longest cached prefix of `tokens` (whole blocks). A query: nothing is reserved or refreshed.
  PrefixMatch match_prefix(std::span<const TokenId> tokens) const;

  // Evicts up to `count` cached blocks, least recently released first; returns how many it evicted.
  std::size_t evict_cached(std::size_t count);

  bool contains(SequenceId id) const { return sequences_.contains(id); }
  std::size_t token_count(SequenceId id) const;
  std::vector<BlockId> block_table(SequenceId id) const;
  CacheStats stats() const;

  // Read-only views for tests and diagnostics.
  const BlockAllocator& allocator() const noexcept { return allocator_; }
  const PrefixIndex& prefix_index() const noexcept { return index_; }
  std::vector<SequenceId> sequence_ids() const;

 private:
  struct Sequence {
    PageTable table;
    std::vector<TokenId> tokens;
    std::size_t committed_tokens = 0;
    std::size_t linked_blocks = 0;  // leading full blocks already offered to the prefix index
    PrefixLink link;                // chain position after those blocks
    bool chain_broken = false;      // a hash collision stopped registration for the rest of this sequence
  };

  Sequence& find(SequenceId id, const char* operation);
  const Sequence& find(SequenceId id, const char* operation) const;
  void check_length(SequenceId id, std::size_t tokens, const char* operation) const;
  PrefixMatch reusable_prefix(std::span<const TokenId> prompt) const;
  std::size_t cached_among(std::span<const BlockId> blocks) const;
  void make_free(std::size_t blocks);
  static Reservation shortage(std::size_t missing_blocks);
  static Reservation from_append(AppendResult&& appended);

  BlockAllocator allocator_;
  PrefixIndex index_;
  std::unordered_map<SequenceId, Sequence> sequences_;
  std::uint64_t prompt_tokens_requested_ = 0;
  std::uint64_t prompt_tokens_reused_ = 0;
  std::uint64_t evicted_blocks_ = 0;
  std::uint64_t copied_blocks_ = 0;
};

}  // namespace loom::cache

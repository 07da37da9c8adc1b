// Random operation sequences against BlockManager, checked after every step against an independent model:
// the tokens of each sequence, a simulated KV storage that the test writes through the reported slots and
// copies (as the backend would), and the set of blocks whose K/V a commit has declared written. The simulated
// K/V of position p is a hash of tokens 0..p, as real K/V depends on the whole context: a block reused after
// a different prefix reads back wrong even where its own tokens agree.
#include "loom/cache/block_manager.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace loom::cache {
namespace {

// Collides constantly: few distinct values, and permutations of a block hash alike.
std::uint64_t weak_hash(std::uint64_t parent, std::span<const TokenId> tokens) {
  std::uint64_t sum = parent * 3;
  for (const TokenId t : tokens) sum += static_cast<std::uint64_t>(t);
  return sum % 5;
}

// The simulated K/V of each position: FNV-1a over the tokens up to and including it.
std::vector<std::uint64_t> kv_values(std::span<const TokenId> tokens) {
  std::vector<std::uint64_t> values;
  values.reserve(tokens.size());
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (const TokenId t : tokens) {
    for (int byte = 0; byte < 4; ++byte) {
      h ^= (static_cast<std::uint32_t>(t) >> (8 * byte)) & 0xFFu;
      h *= 0x100000001B3ull;
    }
    values.push_back(h);
  }
  return values;
}

struct Coverage {
  std::size_t reused_tokens = 0;
  std::size_t copies = 0;
  std::size_t shortages = 0;
  std::size_t matched_blocks = 0;
  std::uint64_t evictions = 0;
};

class Harness {
 public:
  Harness(std::size_t block_count, std::size_t block_size, BlockHashFn hash, std::uint32_t seed)
      : manager_({.block_count = block_count, .block_size = block_size, .hash = hash}),
        block_size_(block_size),
        storage_(block_count, std::vector<std::uint64_t>(block_size, kUnwritten)),
        committed_blocks_(block_count, false),
        rng_(seed) {}

  void step() {
    const int op = pick(0, 99);
    if (op < 25 || model_.empty()) return create();
    if (op < 50) return append();
    if (op < 60) return fork();
    if (op < 75) return commit();
    if (op < 87) return release();
    if (op < 96) return match();
    evict();
  }

  void check_invariants() const {
    const std::size_t n = manager_.allocator().block_count();
    const BlockAllocator& allocator = manager_.allocator();
    std::vector<std::uint32_t> holders(n, 0);

    std::vector<SequenceId> model_ids;
    for (const auto& [id, tokens] : model_) model_ids.push_back(id);
    ASSERT_EQ(manager_.sequence_ids(), model_ids);
    for (const auto& [id, tokens] : model_) {
      const std::vector<BlockId> table = manager_.block_table(id);
      ASSERT_EQ(manager_.token_count(id), tokens.size());
      ASSERT_EQ(table.size(), (tokens.size() + block_size_ - 1) / block_size_) << "sequence " << id;
      std::set<BlockId> distinct(table.begin(), table.end());
      ASSERT_EQ(distinct.size(), table.size()) << "sequence " << id << " holds a block twice";
      for (const BlockId block : table) ++holders[block];
      // Reading the sequence back through its page table gives its K/V: slots, copies and reuse agree.
      const std::vector<std::uint64_t> kv = kv_values(tokens);
      for (std::size_t p = 0; p < tokens.size(); ++p) {
        ASSERT_EQ(storage_[table[p / block_size_]][p % block_size_], kv[p])
            << "sequence " << id << " position " << p;
      }
    }

    std::size_t used = 0;
    for (BlockId b = 0; static_cast<std::size_t>(b) < n; ++b) {
      ASSERT_EQ(allocator.ref_count(b), holders[b]) << "block " << b;
      if (holders[b] > 0) {
        ++used;
        ASSERT_EQ(allocator.state(b), BlockState::used) << "block " << b;
      } else {
        ASSERT_NE(allocator.state(b), BlockState::used) << "block " << b;
      }
      ASSERT_EQ(allocator.is_registered(b), manager_.prefix_index().contains(b)) << "block " << b;
      if (allocator.state(b) == BlockState::cached) {
        ASSERT_TRUE(allocator.is_registered(b)) << "block " << b;
      }
      if (allocator.is_registered(b)) {
        ASSERT_TRUE(committed_blocks_[b]) << "uncommitted block " << b;
      }
    }
    const std::vector<BlockId> free_list = allocator.free_blocks();
    const std::vector<BlockId> cached = allocator.cached_blocks_oldest_first();
    std::set<BlockId> seen;
    for (const BlockId b : free_list) {
      ASSERT_EQ(holders[b], 0u) << "block " << b << " is free and used";
      ASSERT_EQ(allocator.state(b), BlockState::free);
      ASSERT_TRUE(seen.insert(b).second) << "block " << b << " listed twice";
    }
    for (const BlockId b : cached) {
      ASSERT_EQ(holders[b], 0u) << "block " << b << " is cached and used";
      ASSERT_EQ(allocator.state(b), BlockState::cached);
      ASSERT_TRUE(seen.insert(b).second) << "block " << b << " listed twice";
    }
    const CacheStats stats = manager_.stats();
    ASSERT_EQ(stats.used_blocks, used);
    ASSERT_EQ(stats.free_blocks, free_list.size());
    ASSERT_EQ(stats.cached_blocks, cached.size());
    ASSERT_EQ(stats.free_blocks + stats.used_blocks + stats.cached_blocks, stats.total_blocks);
  }

 private:
  static constexpr std::uint64_t kUnwritten = 0;

  int pick(int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng_); }

  // Prompts share a few base prefixes and use a 3-token alphabet, so that reuse and collisions are common.
  std::vector<TokenId> random_prompt() {
    static const std::vector<std::vector<TokenId>> bases{{}, {1, 2, 0, 1, 2, 0}, {2, 2, 2, 2}, {0, 1}};
    std::vector<TokenId> prompt = bases[static_cast<std::size_t>(pick(0, 3))];
    const int extra = pick(prompt.empty() ? 1 : 0, 7);
    for (int i = 0; i < extra; ++i) prompt.push_back(pick(0, 2));
    return prompt;
  }

  SequenceId random_sequence() {
    auto it = model_.begin();
    std::advance(it, pick(0, static_cast<int>(model_.size()) - 1));
    return it->first;
  }

  // What the backend does with a reservation for `sequence` (its tokens, the new ones included): the copy
  // first, then the K/V of each new position into its slot.
  void run_backend(const Reservation& r, std::span<const TokenId> sequence) {
    if (r.copy) {
      ++coverage_.copies;
      storage_[r.copy->destination] = storage_[r.copy->source];
      committed_blocks_[r.copy->destination] = false;
    }
    ASSERT_EQ(r.first_position + r.slots.size(), sequence.size());
    const std::vector<std::uint64_t> kv = kv_values(sequence);
    for (std::size_t i = 0; i < r.slots.size(); ++i) {
      const TokenSlot slot = r.slots[i];
      // A block's first slot written means the block was (re)allocated: its old K/V is gone.
      if (slot.offset == 0) committed_blocks_[slot.block] = false;
      storage_[slot.block][slot.offset] = kv[r.first_position + i];
    }
  }

  void create() {
    if (model_.size() >= 8) return release();
    const std::vector<TokenId> prompt = random_prompt();
    const SequenceId id = next_id_++;
    if (prompt.size() > manager_.max_sequence_tokens()) {
      ASSERT_THROW(manager_.create_sequence(id, prompt), std::invalid_argument);
      return;
    }
    const std::size_t cost = manager_.create_cost(prompt);
    const std::size_t available = manager_.available_blocks();
    const Reservation r = manager_.create_sequence(id, prompt);
    if (cost > available) {
      ++coverage_.shortages;
      ASSERT_EQ(r.missing_blocks, cost - available);
      ASSERT_FALSE(manager_.contains(id));
      return;
    }
    coverage_.reused_tokens += r.reused_tokens;
    ASSERT_TRUE(r.reserved());
    ASSERT_LT(r.reused_tokens, prompt.size());  // the last prompt token is always computed
    ASSERT_EQ(r.reused_tokens % block_size_, 0u);
    ASSERT_EQ(r.first_position, r.reused_tokens);
    ASSERT_EQ(available - manager_.available_blocks(), cost);
    // Reused blocks must hold K/V that a commit declared written.
    const std::vector<BlockId> table = manager_.block_table(id);
    for (std::size_t k = 0; k < r.reused_tokens / block_size_; ++k) ASSERT_TRUE(committed_blocks_[table[k]]);
    run_backend(r, prompt);
    model_[id] = prompt;
  }

  void append() {
    const SequenceId id = random_sequence();
    std::vector<TokenId> tokens(static_cast<std::size_t>(pick(1, 6)));
    for (TokenId& t : tokens) t = pick(0, 2);
    std::vector<TokenId>& model = model_[id];
    if (model.size() + tokens.size() > manager_.max_sequence_tokens()) {
      ASSERT_THROW(manager_.append(id, tokens), std::invalid_argument);
      return;
    }
    // Cost from the model: blocks beyond the current ones, plus a copy when the partial last block is shared.
    const std::size_t b = block_size_;
    const std::size_t have = (model.size() + b - 1) / b;
    const std::size_t want = (model.size() + tokens.size() + b - 1) / b;
    const bool shared_partial = model.size() % b != 0 && holders_of(manager_.block_table(id).back()) > 1;
    const std::size_t cost = want - have + (shared_partial ? 1 : 0);
    const std::size_t available = manager_.available_blocks();
    const Reservation r = manager_.append(id, tokens);
    if (cost > available) {
      ++coverage_.shortages;
      ASSERT_EQ(r.missing_blocks, cost - available);
      return;
    }
    ASSERT_TRUE(r.reserved());
    ASSERT_EQ(r.copy.has_value(), shared_partial);
    ASSERT_EQ(r.first_position, model.size());
    model.insert(model.end(), tokens.begin(), tokens.end());
    run_backend(r, model);
  }

  std::size_t holders_of(BlockId block) const {
    std::size_t count = 0;
    for (const auto& [id, tokens] : model_) {
      const auto table = manager_.block_table(id);
      count += static_cast<std::size_t>(std::ranges::count(table, block));
    }
    return count;
  }

  void fork() {
    if (model_.size() >= 8) return release();
    const SequenceId parent = random_sequence();
    const SequenceId child = next_id_++;
    manager_.fork(parent, child);
    model_[child] = model_[parent];
  }

  void commit() {
    const SequenceId id = random_sequence();
    const std::size_t length = model_[id].size();
    const std::size_t computed = static_cast<std::size_t>(pick(0, static_cast<int>(length)));
    manager_.commit(id, computed);
    const std::vector<BlockId> table = manager_.block_table(id);
    for (std::size_t k = 0; (k + 1) * block_size_ <= computed; ++k) committed_blocks_[table[k]] = true;
  }

  void release() {
    if (model_.empty()) return;
    const SequenceId id = random_sequence();
    manager_.release(id);
    model_.erase(id);
  }

  void match() {
    const std::vector<TokenId> query = random_prompt();
    const PrefixMatch m = manager_.match_prefix(query);
    ASSERT_EQ(m.tokens, m.blocks.size() * block_size_);
    ASSERT_LE(m.tokens, query.size());
    coverage_.matched_blocks += m.blocks.size();
    const std::vector<std::uint64_t> kv = kv_values(query);
    for (std::size_t k = 0; k < m.blocks.size(); ++k) {
      const BlockId block = m.blocks[k];
      ASSERT_NE(manager_.allocator().state(block), BlockState::free);
      ASSERT_TRUE(committed_blocks_[block]) << "matched block " << block << " was never committed";
      for (std::size_t s = 0; s < block_size_; ++s) {
        ASSERT_EQ(storage_[block][s], kv[k * block_size_ + s]) << "matched block " << block << " slot " << s;
      }
    }
  }

  void evict() {
    const std::size_t cached = manager_.allocator().cached_count();
    const auto count = static_cast<std::size_t>(pick(0, 3));
    ASSERT_EQ(manager_.evict_cached(count), std::min(count, cached));
  }

  BlockManager manager_;
  std::size_t block_size_;
  std::vector<std::vector<std::uint64_t>> storage_;
  std::vector<bool> committed_blocks_;
  std::map<SequenceId, std::vector<TokenId>> model_;
  SequenceId next_id_ = 1;
  std::mt19937 rng_;
  Coverage coverage_;

 public:
  Coverage coverage() const {
    Coverage c = coverage_;
    c.evictions = manager_.stats().evicted_blocks;
    return c;
  }
};

// Runs the random sequences and returns what they exercised, so that the tests can show they are not vacuous.
Coverage run_random_sequences(BlockHashFn hash, std::uint32_t first_seed, int runs, int steps) {
  Coverage total;
  for (int run = 0; run < runs; ++run) {
    const std::uint32_t seed = first_seed + static_cast<std::uint32_t>(run);
    std::mt19937 shape(seed);
    const std::size_t block_size = std::size_t{1} << (shape() % 3);  // 1, 2 or 4
    const std::size_t block_count = 6 + shape() % 20;
    Harness harness(block_count, block_size, hash, seed);
    for (int step = 0; step < steps; ++step) {
      harness.step();
      if (!::testing::Test::HasFatalFailure()) harness.check_invariants();
      if (::testing::Test::HasFatalFailure()) {
        ADD_FAILURE() << "seed " << seed << " step " << step << " (blocks " << block_count << " x " << block_size
                      << ")";
        return total;
      }
    }
    const Coverage c = harness.coverage();
    total.reused_tokens += c.reused_tokens;
    total.copies += c.copies;
    total.shortages += c.shortages;
    total.matched_blocks += c.matched_blocks;
    total.evictions += c.evictions;
  }
  return total;
}

void expect_every_path_exercised(const Coverage& c) {
  EXPECT_GT(c.reused_tokens, 0u);
  EXPECT_GT(c.copies, 0u);
  EXPECT_GT(c.shortages, 0u);
  EXPECT_GT(c.matched_blocks, 0u);
  EXPECT_GT(c.evictions, 0u);
}

TEST(BlockManagerProperty, InvariantsHoldOverRandomOperationsWithTheDefaultHash) {
  expect_every_path_exercised(run_random_sequences(chained_block_hash, 1, 1500, 200));
}

TEST(BlockManagerProperty, InvariantsHoldOverRandomOperationsWithACollidingHash) {
  expect_every_path_exercised(run_random_sequences(weak_hash, 100000, 1500, 200));
}

}  // namespace
}  // namespace loom::cache

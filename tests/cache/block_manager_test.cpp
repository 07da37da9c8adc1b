#include "loom/cache/block_manager.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace loom::cache {
namespace {

std::vector<TokenId> iota_tokens(std::size_t count, TokenId first) {
  std::vector<TokenId> tokens(count);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

std::vector<TokenId> concat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(BlockManager, NewPromptReservesASlotPerToken) {
  BlockManager manager({.block_count = 8, .block_size = 4});
  const Reservation r = manager.create_sequence(1, iota_tokens(10, 0));
  ASSERT_TRUE(r.reserved());
  EXPECT_EQ(r.reused_tokens, 0u);
  EXPECT_EQ(r.first_position, 0u);
  EXPECT_EQ(r.slots.size(), 10u);
  EXPECT_EQ(manager.block_table(1), (std::vector<BlockId>{0, 1, 2}));  // ceil(10 / 4) blocks
  EXPECT_EQ(manager.token_count(1), 10u);
}

TEST(BlockManager, CommittedPrefixIsReusedByTheNextPrompt) {
  BlockManager manager({.block_count = 16, .block_size = 4});
  const std::vector<TokenId> system = iota_tokens(8, 100);  // two full blocks
  ASSERT_TRUE(manager.create_sequence(1, concat(system, {1, 2})).reserved());
  manager.commit(1, 10);

  const Reservation r = manager.create_sequence(2, concat(system, {7, 8, 9}));
  ASSERT_TRUE(r.reserved());
  EXPECT_EQ(r.reused_tokens, 8u);
  EXPECT_EQ(r.first_position, 8u);
  EXPECT_EQ(r.slots.size(), 3u);  // only the new tokens are computed
  const auto first = manager.block_table(1);
  const auto second = manager.block_table(2);
  EXPECT_EQ(second[0], first[0]);
  EXPECT_EQ(second[1], first[1]);
  EXPECT_NE(second[2], first[2]);
  EXPECT_EQ(manager.allocator().ref_count(first[0]), 2u);

  const CacheStats stats = manager.stats();
  EXPECT_EQ(stats.prompt_tokens_requested, 21u);  // 10 + 11
  EXPECT_EQ(stats.prompt_tokens_reused, 8u);
  EXPECT_DOUBLE_EQ(stats.prefix_hit_rate(), 8.0 / 21.0);
}

// An embedding pools the hidden state of every position, so it computes a cached prefix again; its blocks
// are new ones, and once committed and released they are matchable as any prompt's (duplicates of the chain).
TEST(BlockManager, WithoutPrefixReuseEveryTokenIsComputed) {
  BlockManager manager({.block_count = 16, .block_size = 4});
  const std::vector<TokenId> prompt = iota_tokens(10, 100);
  ASSERT_TRUE(manager.create_sequence(1, prompt).reserved());
  manager.commit(1, 10);
  EXPECT_EQ(manager.create_cost(prompt, false), 3u);
  const Reservation r = manager.create_sequence(2, prompt, false);
  ASSERT_TRUE(r.reserved());
  EXPECT_EQ(r.reused_tokens, 0u);
  EXPECT_EQ(r.first_position, 0u);
  EXPECT_EQ(r.slots.size(), 10u);
  EXPECT_NE(manager.block_table(2)[0], manager.block_table(1)[0]);
  manager.commit(2, 10);
  manager.release(2);
  EXPECT_EQ(manager.create_sequence(3, prompt).reused_tokens, 8u);
}

TEST(BlockManager, UncommittedBlocksAreNotReused) {
  // Sequence 1's K/V is not written until its step runs; a prompt in the same step must compute its own.
  BlockManager manager({.block_count = 16, .block_size = 4});
  const std::vector<TokenId> prompt = iota_tokens(9, 0);
  ASSERT_TRUE(manager.create_sequence(1, prompt).reserved());
  EXPECT_EQ(manager.create_sequence(2, prompt).reused_tokens, 0u);
  manager.commit(1, 4);  // only the first block is written so far
  EXPECT_EQ(manager.create_sequence(3, prompt).reused_tokens, 4u);
}

TEST(BlockManager, TheLastPromptTokenIsAlwaysComputed) {
  // A cached prompt of exactly two blocks reuses one: reusing both would leave no token to compute, and the
  // last token's logits are needed to sample.
  BlockManager manager({.block_count = 16, .block_size = 4});
  const std::vector<TokenId> prompt = iota_tokens(8, 0);
  ASSERT_TRUE(manager.create_sequence(1, prompt).reserved());
  manager.commit(1, 8);
  const Reservation r = manager.create_sequence(2, prompt);
  EXPECT_EQ(r.reused_tokens, 4u);
  EXPECT_EQ(r.slots.size(), 4u);
  EXPECT_EQ(manager.match_prefix(prompt).tokens, 8u);  // a plain query sees both blocks
}

TEST(BlockManager, ReleasedConversationServesItsNextTurn) {
  BlockManager manager({.block_count = 16, .block_size = 4});
  const std::vector<TokenId> turn1 = iota_tokens(6, 0);
  ASSERT_TRUE(manager.create_sequence(1, turn1).reserved());
  const std::vector<TokenId> reply{50, 51, 52};
  ASSERT_TRUE(manager.append(1, reply).reserved());  // 9 tokens: blocks 0, 1 full, block 2 partial
  manager.commit(1, 9);
  manager.release(1);
  CacheStats stats = manager.stats();
  EXPECT_EQ(stats.cached_blocks, 2u);  // the full blocks; the partial one is free
  EXPECT_EQ(stats.free_blocks, 14u);
  EXPECT_EQ(stats.used_blocks, 0u);

  const std::vector<TokenId> turn2 = concat(concat(turn1, reply), {60, 61});
  const Reservation r = manager.create_sequence(2, turn2);
  EXPECT_EQ(r.reused_tokens, 8u);
  EXPECT_EQ(r.slots.size(), 3u);
  stats = manager.stats();
  EXPECT_EQ(stats.cached_blocks, 0u);
  EXPECT_EQ(stats.used_blocks, 3u);
}

TEST(BlockManager, EvictsTheLeastRecentlyReleasedPrefixFirst) {
  BlockManager manager({.block_count = 6, .block_size = 2});
  const std::vector<TokenId> a{1, 2, 3, 4, 5};  // 3 blocks: 2 full (cached after release) + 1 partial
  const std::vector<TokenId> b{6, 7, 8, 9, 10};
  ASSERT_TRUE(manager.create_sequence(1, a).reserved());
  manager.commit(1, 5);
  ASSERT_TRUE(manager.create_sequence(2, b).reserved());
  manager.commit(2, 5);
  manager.release(1);  // a's blocks are released first: older
  manager.release(2);
  ASSERT_EQ(manager.stats().cached_blocks, 4u);
  ASSERT_EQ(manager.stats().free_blocks, 2u);

  // 7 new tokens need 4 blocks: the 2 free ones and the 2 oldest cached ones, a's.
  ASSERT_TRUE(manager.create_sequence(3, iota_tokens(7, 20)).reserved());
  EXPECT_EQ(manager.match_prefix(a).tokens, 0u);
  EXPECT_EQ(manager.match_prefix(b).tokens, 4u);
  EXPECT_EQ(manager.stats().evicted_blocks, 2u);
  // Sequence 3 is uncommitted, so none of its blocks may still be registered: a's were erased on eviction.
  for (const BlockId block : manager.block_table(3)) EXPECT_FALSE(manager.prefix_index().contains(block));
}

TEST(BlockManager, ReusedCachedBlocksAreNotEvictedForTheirOwnPrompt) {
  // The prompt reuses the only cached blocks; the rest must come from free blocks, and the cost counts the
  // revived blocks because they stop being evictable.
  BlockManager manager({.block_count = 6, .block_size = 2});
  const std::vector<TokenId> prefix{1, 2, 3, 4};
  ASSERT_TRUE(manager.create_sequence(1, prefix).reserved());
  manager.commit(1, 4);
  manager.release(1);                                                    // 2 cached, 4 free
  ASSERT_TRUE(manager.create_sequence(9, iota_tokens(4, 50)).reserved());  // 2 cached, 2 free
  const std::vector<TokenId> longer = concat(prefix, {5, 6, 7, 8});
  EXPECT_EQ(manager.create_cost(longer), 4u);  // 2 revived + 2 new
  const std::vector<TokenId> too_long = concat(longer, {9});
  const Reservation refused = manager.create_sequence(2, too_long);
  EXPECT_EQ(refused.missing_blocks, 1u);  // 2 revived + 3 new = 5 > 4 available
  const Reservation r = manager.create_sequence(2, longer);
  ASSERT_TRUE(r.reserved());
  EXPECT_EQ(r.reused_tokens, 4u);
  EXPECT_EQ(manager.stats().evicted_blocks, 0u);
  EXPECT_EQ(manager.stats().free_blocks, 0u);
}

TEST(BlockManager, ShortageNamesTheMissingBlocksAndChangesNothing) {
  BlockManager manager({.block_count = 5, .block_size = 4});
  ASSERT_TRUE(manager.create_sequence(1, iota_tokens(12, 0)).reserved());   // 3 blocks
  ASSERT_TRUE(manager.create_sequence(3, iota_tokens(4, 200)).reserved());  // 1 block; 1 left
  const CacheStats before = manager.stats();

  const Reservation created = manager.create_sequence(2, iota_tokens(9, 50));  // 3 blocks, 1 available
  EXPECT_FALSE(created.reserved());
  EXPECT_EQ(created.missing_blocks, 2u);
  EXPECT_TRUE(created.slots.empty());
  EXPECT_FALSE(manager.contains(2));

  const Reservation appended = manager.append(1, iota_tokens(5, 90));  // 17 tokens: 5 blocks, 2 more
  EXPECT_EQ(appended.missing_blocks, 1u);
  EXPECT_EQ(manager.token_count(1), 12u);

  const CacheStats after = manager.stats();
  EXPECT_EQ(after.used_blocks, before.used_blocks);
  EXPECT_EQ(after.free_blocks, before.free_blocks);
  EXPECT_EQ(after.prompt_tokens_requested, before.prompt_tokens_requested);
}

TEST(BlockManager, ForkedSampleCopiesTheSharedLastBlockOnItsFirstWrite) {
  BlockManager manager({.block_count = 8, .block_size = 4});
  ASSERT_TRUE(manager.create_sequence(1, iota_tokens(6, 0)).reserved());
  manager.fork(1, 2);
  EXPECT_EQ(manager.block_table(2), manager.block_table(1));
  EXPECT_EQ(manager.token_count(2), 6u);

  const std::vector<TokenId> sampled{42};
  const Reservation r = manager.append(2, sampled);
  ASSERT_TRUE(r.copy.has_value());
  EXPECT_EQ(r.copy->source, manager.block_table(1)[1]);
  EXPECT_EQ(r.copy->destination, manager.block_table(2)[1]);
  EXPECT_EQ(r.slots, (std::vector<TokenSlot>{{r.copy->destination, 2}}));
  EXPECT_EQ(manager.stats().copied_blocks, 1u);
  EXPECT_FALSE(manager.append(1, sampled).copy.has_value());  // the parent now holds its block alone
}

TEST(BlockManager, WastedSlotsCountEachPartialBlockOnce) {
  BlockManager manager({.block_count = 8, .block_size = 4});
  ASSERT_TRUE(manager.create_sequence(1, iota_tokens(6, 0)).reserved());
  EXPECT_EQ(manager.stats().wasted_slots, 2u);  // 2 blocks of 4 hold 6 tokens
  manager.fork(1, 2);
  EXPECT_EQ(manager.stats().wasted_slots, 2u);  // the partial block is shared, not doubled
  const std::vector<TokenId> one{9};
  ASSERT_TRUE(manager.append(2, one).reserved());
  EXPECT_EQ(manager.stats().wasted_slots, 3u);  // parent 2 + child's private copy 1
}

TEST(BlockManager, CollidingHashDoesNotShareBlocksOfAnotherPrompt) {
  BlockManager manager(
      {.block_count = 16, .block_size = 2, .hash = [](std::uint64_t, std::span<const TokenId>) -> std::uint64_t {
         return 1;
       }});
  ASSERT_TRUE(manager.create_sequence(1, std::vector<TokenId>{1, 2, 3}).reserved());
  manager.commit(1, 3);
  EXPECT_EQ(manager.create_sequence(2, std::vector<TokenId>{5, 6, 7}).reused_tokens, 0u);
  EXPECT_EQ(manager.create_sequence(3, std::vector<TokenId>{1, 2, 3}).reused_tokens, 2u);
}

TEST(BlockManager, SixtyFourShortSequencesFitWhereEightMaxLengthSlotsWould) {
  // A contiguous layout reserving the maximum length of 2048 tokens per sequence fits 8 sequences in
  // 8 * 2048 = 16384 slots. Paged with blocks of 16 that is 1024 blocks; a 200-token sequence takes
  // ceil(200 / 16) = 13 blocks, so 64 of them take 832 blocks and 192 stay free.
  constexpr std::size_t kMaxLength = 2048;
  constexpr std::size_t kBlockSize = 16;
  BlockManager manager({.block_count = 8 * kMaxLength / kBlockSize, .block_size = kBlockSize});
  for (SequenceId id = 0; id < 64; ++id) {
    // Distinct prompts, so nothing is shared: the fit comes from paging alone.
    const auto prompt = iota_tokens(200, static_cast<TokenId>(id * 1000));
    ASSERT_TRUE(manager.create_sequence(id, prompt).reserved()) << "sequence " << id;
  }
  const CacheStats stats = manager.stats();
  EXPECT_EQ(stats.sequences, 64u);
  EXPECT_EQ(stats.used_blocks, 832u);
  EXPECT_EQ(stats.free_blocks, 192u);
  EXPECT_EQ(stats.wasted_slots, 64u * (13 * 16 - 200));
}

TEST(BlockManager, CostsMatchWhatReservationsTake) {
  BlockManager manager({.block_count = 32, .block_size = 4});
  const std::vector<TokenId> prompt = iota_tokens(10, 0);
  ASSERT_TRUE(manager.create_sequence(1, prompt).reserved());
  manager.commit(1, 10);
  manager.release(1);  // 2 cached blocks
  const std::vector<TokenId> next = concat(prompt, {77, 78, 79});
  const std::size_t cost = manager.create_cost(next);
  std::size_t available = manager.available_blocks();
  ASSERT_TRUE(manager.create_sequence(2, next).reserved());
  EXPECT_EQ(available - manager.available_blocks(), cost);

  manager.fork(2, 3);
  const std::size_t append_cost = manager.append_cost(3, 6);  // copy of the shared partial block + 1 new
  EXPECT_EQ(append_cost, 2u);
  available = manager.available_blocks();
  ASSERT_TRUE(manager.append(3, iota_tokens(6, 300)).reserved());
  EXPECT_EQ(available - manager.available_blocks(), append_cost);
}

TEST(BlockManager, EvictCachedDropsOldestFirst) {
  BlockManager manager({.block_count = 8, .block_size = 2});
  const std::vector<TokenId> prompt{1, 2, 3, 4, 5};
  ASSERT_TRUE(manager.create_sequence(1, prompt).reserved());
  manager.commit(1, 5);
  manager.release(1);
  // Released back to front: {3,4} is older than {1,2}; evicting it leaves the first block matchable.
  EXPECT_EQ(manager.evict_cached(1), 1u);
  EXPECT_EQ(manager.match_prefix(prompt).tokens, 2u);
  EXPECT_EQ(manager.evict_cached(5), 1u);
  EXPECT_EQ(manager.match_prefix(prompt).tokens, 0u);
  EXPECT_EQ(manager.stats().free_blocks, 8u);
}

TEST(BlockManager, RejectsBadRequests) {
  BlockManager manager({.block_count = 4, .block_size = 4});
  ASSERT_TRUE(manager.create_sequence(1, iota_tokens(3, 0)).reserved());
  EXPECT_THROW(manager.create_sequence(1, iota_tokens(3, 0)), std::invalid_argument);   // duplicate id
  EXPECT_THROW(manager.create_sequence(2, iota_tokens(17, 0)), std::invalid_argument);  // > 16 slots
  EXPECT_THROW(manager.append(9, iota_tokens(1, 0)), std::invalid_argument);
  EXPECT_THROW(manager.append(1, iota_tokens(14, 0)), std::invalid_argument);           // 17 > 16
  EXPECT_THROW(manager.commit(1, 4), std::invalid_argument);                            // only 3 tokens
  EXPECT_THROW(manager.fork(1, 1), std::invalid_argument);
  EXPECT_THROW(manager.release(9), std::invalid_argument);
  EXPECT_THROW(BlockManager({.block_count = 0, .block_size = 4}), std::invalid_argument);
  EXPECT_THROW(BlockManager({.block_count = 4, .block_size = 4, .hash = nullptr}), std::invalid_argument);
}

}  // namespace
}  // namespace loom::cache

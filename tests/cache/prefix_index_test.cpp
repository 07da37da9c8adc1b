#include "loom/cache/prefix_index.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace loom::cache {
namespace {

// Every block hashes alike: any lookup finds whatever entry is registered, so only the token and parent
// checks stand between a query and a wrong prefix.
std::uint64_t constant_hash(std::uint64_t, std::span<const TokenId>) { return 42; }

// Collides whenever the parent hash and the token sum agree (e.g. {1, 2} and {2, 1}).
std::uint64_t sum_hash(std::uint64_t parent, std::span<const TokenId> tokens) {
  std::uint64_t sum = parent;
  for (const TokenId t : tokens) sum += static_cast<std::uint64_t>(t);
  return sum;
}

std::span<const TokenId> block(const std::vector<TokenId>& tokens, std::size_t index, std::size_t size) {
  return std::span<const TokenId>(tokens).subspan(index * size, size);
}

TEST(PrefixIndex, MatchesTheLongestRegisteredChainInWholeBlocks) {
  PrefixIndex index(8, 2);
  const std::vector<TokenId> prompt{1, 2, 3, 4, 5, 6};
  PrefixLink link;
  for (std::size_t k = 0; k < 2; ++k) {  // blocks {1,2} and {3,4} registered as blocks 5 and 6
    const InsertResult r = index.insert(link, block(prompt, k, 2), static_cast<BlockId>(5 + k));
    ASSERT_EQ(r.outcome, InsertOutcome::inserted);
    link = r.link;
  }
  const PrefixMatch full = index.match(prompt);
  EXPECT_EQ(full.blocks, (std::vector<BlockId>{5, 6}));
  EXPECT_EQ(full.tokens, 4u);
  EXPECT_EQ(full.link, link);

  // 3 tokens: one whole block; the partial second block {3} never matches.
  const std::vector<TokenId> short_prompt{1, 2, 3};
  EXPECT_EQ(index.match(short_prompt).blocks, (std::vector<BlockId>{5}));
  // Diverging in the first block: nothing.
  const std::vector<TokenId> other{1, 9, 3, 4};
  EXPECT_TRUE(index.match(other).blocks.empty());
  EXPECT_EQ(index.match(other).tokens, 0u);
}

TEST(PrefixIndex, ABlocksIdentityIncludesItsParent) {
  PrefixIndex index(8, 2);
  const std::vector<TokenId> registered{1, 2, 3, 4};
  const InsertResult first = index.insert({}, block(registered, 0, 2), 0);
  ASSERT_EQ(index.insert(first.link, block(registered, 1, 2), 1).outcome, InsertOutcome::inserted);
  // {3,4} is registered only after {1,2}: as the first block of a prompt it is not a match.
  const std::vector<TokenId> moved{3, 4};
  EXPECT_TRUE(index.match(moved).blocks.empty());
}

TEST(PrefixIndex, HashCollisionNeverReturnsWrongTokens) {
  PrefixIndex index(8, 2, constant_hash);
  const std::vector<TokenId> registered{1, 2};
  ASSERT_EQ(index.insert({}, block(registered, 0, 2), 3).outcome, InsertOutcome::inserted);
  const std::vector<TokenId> different{7, 8};
  EXPECT_TRUE(index.match(different).blocks.empty());  // same hash, other tokens
  EXPECT_EQ(index.match(registered).blocks, (std::vector<BlockId>{3}));
  // Registering the colliding block is refused rather than overwriting the first one.
  EXPECT_EQ(index.insert({}, block(different, 0, 2), 4).outcome, InsertOutcome::collision);
  EXPECT_FALSE(index.contains(4));
  EXPECT_EQ(index.match(registered).blocks, (std::vector<BlockId>{3}));
}

TEST(PrefixIndex, CollisionOnALaterBlockStopsTheMatchThere) {
  PrefixIndex index(8, 2, sum_hash);
  const std::vector<TokenId> registered{1, 1, 1, 2};  // blocks 0, 1
  const InsertResult first = index.insert({}, block(registered, 0, 2), 0);
  ASSERT_EQ(index.insert(first.link, block(registered, 1, 2), 1).outcome, InsertOutcome::inserted);
  // {2,1} sums like {1,2} after the same parent: the second block's hash collides, its tokens do not match.
  const std::vector<TokenId> query{1, 1, 2, 1};
  EXPECT_EQ(index.match(query).blocks, (std::vector<BlockId>{0}));
  EXPECT_EQ(index.match(query).tokens, 2u);
}

TEST(PrefixIndex, CollisionWithTheParentsSerialIsCaught) {
  // Chain A: {1,1} -> {5,5}. Chain B: {2,0} collides with {1,1} (same sum). After A's first block is
  // evicted and B's registered under the same hash, B's prompt {2,0,5,5} hashes exactly like A's chain and
  // A's second block even holds the right tokens {5,5}, but its K/V was computed after {1,1}, not {2,0}:
  // the parent serial recorded in A's second entry is what rejects it.
  PrefixIndex index(8, 2, sum_hash);
  const std::vector<TokenId> a{1, 1, 5, 5};
  const InsertResult a0 = index.insert({}, block(a, 0, 2), 0);
  ASSERT_EQ(index.insert(a0.link, block(a, 1, 2), 1).outcome, InsertOutcome::inserted);
  index.erase(0);
  const std::vector<TokenId> b{2, 0, 5, 5};
  ASSERT_EQ(index.insert({}, block(b, 0, 2), 2).outcome, InsertOutcome::inserted);
  EXPECT_EQ(index.match(b).blocks, (std::vector<BlockId>{2}));
}

TEST(PrefixIndex, DuplicateInsertReturnsTheExistingLink) {
  PrefixIndex index(8, 2);
  const std::vector<TokenId> tokens{4, 4};
  const InsertResult first = index.insert({}, tokens, 1);
  const InsertResult again = index.insert({}, tokens, 2);  // same contents computed into another block
  EXPECT_EQ(again.outcome, InsertOutcome::duplicate);
  EXPECT_EQ(again.link, first.link);
  EXPECT_FALSE(index.contains(2));
  EXPECT_EQ(index.size(), 1u);
}

TEST(PrefixIndex, EraseForgetsTheBlock) {
  PrefixIndex index(8, 2);
  const std::vector<TokenId> tokens{4, 5};
  (void)index.insert({}, tokens, 1);
  index.erase(1);
  EXPECT_FALSE(index.contains(1));
  EXPECT_TRUE(index.match(tokens).blocks.empty());
  index.erase(1);  // no-op
  EXPECT_EQ(index.size(), 0u);
}

TEST(PrefixIndex, RejectsBadInput) {
  EXPECT_THROW(PrefixIndex(8, 2, nullptr), std::invalid_argument);
  EXPECT_THROW(PrefixIndex(0, 2), std::invalid_argument);
  PrefixIndex index(8, 2);
  const std::vector<TokenId> three{1, 2, 3};
  EXPECT_THROW((void)index.insert({}, three, 0), std::invalid_argument);
  const std::vector<TokenId> two{1, 2};
  EXPECT_THROW((void)index.insert({}, two, 8), std::invalid_argument);
}

TEST(ChainedBlockHash, DependsOnParentAndTokenOrder) {
  const std::vector<TokenId> ab{1, 2};
  const std::vector<TokenId> ba{2, 1};
  EXPECT_NE(chained_block_hash(0, ab), chained_block_hash(0, ba));
  EXPECT_NE(chained_block_hash(0, ab), chained_block_hash(1, ab));
  EXPECT_EQ(chained_block_hash(7, ab), chained_block_hash(7, ab));
}

}  // namespace
}  // namespace loom::cache

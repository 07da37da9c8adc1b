// CacheManagerActor, tested only through its messages, as the scheduler will use it.
#include "loom/actors/engine/cache_manager_actor.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <vector>

#include <boost/asio/use_future.hpp>

#include "test_support.hpp"

namespace loom::actors {
namespace {

using namespace std::chrono_literals;
using testing::RunningContext;
namespace asio = boost::asio;

std::vector<cache::TokenId> tokens(std::size_t n, cache::TokenId first = 1) {
  std::vector<cache::TokenId> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

class CacheManagerActorTest : public ::testing::Test {
 protected:
  // 16 blocks of 4 slots.
  CacheManagerActorTest() : actor_(spawn<CacheManagerActor>(ctx_.executor(), {.name = "cache_manager"},
                                                            cache::BlockManagerConfig{.block_count = 16, .block_size = 4})) {}
  ~CacheManagerActorTest() override { actor_.stop(); }

  ReserveResult reserve(std::vector<ReserveItem> plan) {
    Reserve request{std::move(plan), {}};
    return actor_.address().ask(std::move(request), 5s, asio::use_future).get();
  }
  CacheManagerStats stats() { return actor_.address().ask(GetCacheStats{}, 5s, asio::use_future).get(); }
  cache::PrefixMatch match(std::vector<cache::TokenId> t) {
    MatchPrefix request{std::move(t), {}};
    return actor_.address().ask(std::move(request), 5s, asio::use_future).get();
  }
  std::string fork(cache::SequenceId parent, cache::SequenceId child) {
    Fork request{parent, child, {}};
    return actor_.address().ask(std::move(request), 5s, asio::use_future).get();
  }
  template <class Message>
  void tell(Message m) {
    ASSERT_TRUE(actor_.address().tell(std::move(m)));
  }

  RunningContext ctx_{2};
  ActorHandle<CacheManagerProtocol> actor_;
};

TEST_F(CacheManagerActorTest, ReservesEveryItemOfAPlanWithSlotsAndBlockTables) {
  const auto r = reserve({{1, tokens(10), true}, {2, tokens(3, 100), true}});
  ASSERT_TRUE(r.reserved) << r.error;
  ASSERT_EQ(r.reservations.size(), 2u);
  EXPECT_EQ(r.reservations[0].slots.size(), 10u);  // every token gets a slot
  EXPECT_EQ(r.reservations[1].slots.size(), 3u);
  EXPECT_EQ(r.block_tables[0].size(), 3u);  // 10 tokens in blocks of 4
  EXPECT_EQ(r.block_tables[1].size(), 1u);
  // The slots lie in the sequence's own blocks, in order.
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(r.reservations[0].slots[i].block, r.block_tables[0][i / 4]);
    EXPECT_EQ(r.reservations[0].slots[i].offset, i % 4);
  }
  const auto s = stats();
  EXPECT_EQ(s.cache.used_blocks, 4u);
  EXPECT_EQ(s.cache.free_blocks, 12u);

  // Decode: one more token for each.
  const auto next = reserve({{1, {99}, false}, {2, {98}, false}});
  ASSERT_TRUE(next.reserved) << next.error;
  EXPECT_EQ(next.reservations[0].first_position, 10u);
  EXPECT_EQ(next.reservations[1].first_position, 3u);
}

TEST_F(CacheManagerActorTest, AShortageNamesTheMissingBlocksAndChangesNothing) {
  ASSERT_TRUE(reserve({{1, tokens(40), true}}).reserved);  // 10 of 16 blocks
  const auto before = stats();
  // 7 + 2 = 9 blocks wanted, 6 available: 3 missing, and neither sequence is created.
  const auto r = reserve({{2, tokens(28, 500), true}, {3, tokens(5, 900), true}});
  EXPECT_FALSE(r.reserved);
  EXPECT_EQ(r.missing_blocks, 3u);
  EXPECT_TRUE(r.error.empty());
  const auto after = stats();
  EXPECT_EQ(after.cache.used_blocks, before.cache.used_blocks);
  EXPECT_EQ(after.cache.sequences, 1u);
  // Once sequence 1 is gone, the same plan fits.
  tell(Release{1});
  EXPECT_TRUE(reserve({{2, tokens(28, 500), true}, {3, tokens(5, 900), true}}).reserved);
}

TEST_F(CacheManagerActorTest, AWrongPlanIsAnErrorThatChangesNothing) {
  ASSERT_TRUE(reserve({{1, tokens(4), true}}).reserved);
  EXPECT_NE(reserve({{7, {1}, false}}).error.find("sequence 7 is unknown"), std::string::npos);
  EXPECT_NE(reserve({{1, {1}, true}}).error.find("sequence 1 already exists"), std::string::npos);
  EXPECT_NE(reserve({{2, {1}, true}, {2, {2}, true}}).error.find("appears twice"), std::string::npos);
  EXPECT_NE(reserve({{3, {}, true}}).error.find("no tokens"), std::string::npos);
  EXPECT_NE(reserve({{4, tokens(65), true}}).error.find("the whole cache holds 64"), std::string::npos);
  // A good item before a bad one was not reserved either.
  EXPECT_FALSE(reserve({{5, tokens(4), true}, {9, {1}, false}}).reserved);
  const auto s = stats();
  EXPECT_EQ(s.cache.sequences, 1u);
  EXPECT_EQ(s.cache.used_blocks, 1u);
}

TEST_F(CacheManagerActorTest, RetainedConversationsAreMatchedAndReusedByTheNextTurn) {
  const auto prompt = tokens(10);
  ASSERT_TRUE(reserve({{1, prompt, true}}).reserved);
  // Before the K/V is written nothing is matchable.
  EXPECT_EQ(match(prompt).tokens, 0u);
  tell(Retain{1, 10});
  const auto m = match(prompt);
  EXPECT_EQ(m.tokens, 8u);  // the two full blocks
  EXPECT_EQ(stats().cache.cached_blocks, 2u);

  // The next turn: the old prompt plus more; the cached blocks are reused, only the rest is computed.
  auto next_turn = prompt;
  next_turn.insert(next_turn.end(), {50, 51, 52});
  const auto r = reserve({{2, next_turn, true}});
  ASSERT_TRUE(r.reserved) << r.error;
  EXPECT_EQ(r.reservations[0].reused_tokens, 8u);
  EXPECT_EQ(r.reservations[0].first_position, 8u);
  EXPECT_EQ(r.reservations[0].slots.size(), 5u);
  EXPECT_EQ(std::vector<cache::BlockId>(r.block_tables[0].begin(), r.block_tables[0].begin() + 2), m.blocks);
  const auto s = stats();
  EXPECT_EQ(s.cache.prompt_tokens_reused, 8u);
  EXPECT_EQ(s.cache.prompt_tokens_requested, 23u);
}

TEST_F(CacheManagerActorTest, CommitThenReleaseKeepsFullBlocksAsPrefixes) {
  ASSERT_TRUE(reserve({{1, tokens(9), true}}).reserved);
  tell(Commit{1, 9});
  tell(Release{1});
  const auto s = stats();
  EXPECT_EQ(s.cache.sequences, 0u);
  EXPECT_EQ(s.cache.cached_blocks, 2u);  // the partial third block is freed
  EXPECT_EQ(s.cache.free_blocks, 14u);
}

TEST_F(CacheManagerActorTest, AForkSharesBlocksAndItsFirstWriteCopiesTheSharedBlock) {
  ASSERT_TRUE(reserve({{1, tokens(6), true}}).reserved);  // blocks: [full][2 of 4]
  EXPECT_EQ(fork(1, 2), "");
  EXPECT_EQ(stats().cache.used_blocks, 2u);  // shared, not copied
  const auto r = reserve({{2, {77}, false}});
  ASSERT_TRUE(r.reserved) << r.error;
  ASSERT_TRUE(r.reservations[0].copy.has_value());  // the shared partial block is copied before the write
  EXPECT_EQ(r.reservations[0].copy->destination, r.reservations[0].slots[0].block);
  EXPECT_EQ(r.reservations[0].slots[0].offset, 2u);
  EXPECT_EQ(stats().cache.copied_blocks, 1u);
  EXPECT_NE(fork(9, 10).find("sequence 9 is unknown"), std::string::npos);
  EXPECT_NE(fork(1, 2).find("sequence 2 already exists"), std::string::npos);
}

TEST_F(CacheManagerActorTest, MessagesNamingUnknownSequencesAreCountedNotFatal) {
  tell(Commit{42, 1});
  tell(Release{43});
  tell(Retain{44, 0});
  ASSERT_TRUE(reserve({{1, tokens(4), true}}).reserved);
  tell(Commit{1, 5});  // past its end
  EXPECT_EQ(stats().rejected_messages, 4u);
  EXPECT_EQ(actor_.metrics().failed, 0u);
}

// The capacity claim, through the actor: a budget that 8 fixed max-length slots would fill holds
// 64 short sequences, because blocks go to actual tokens.
TEST(CacheManagerActorCapacity, SixtyFourShortSequencesFitWhereEightMaxLengthSlotsWould) {
  RunningContext ctx(1);
  constexpr std::size_t kMaxLength = 512, kBlock = 16;
  const std::size_t blocks = 8 * kMaxLength / kBlock;  // 8 slots of 512 tokens
  auto actor = spawn<CacheManagerActor>(ctx.executor(), {.name = "cache_manager"},
                                        cache::BlockManagerConfig{.block_count = blocks, .block_size = kBlock});
  std::vector<ReserveItem> plan;
  for (cache::SequenceId id = 0; id < 64; ++id) plan.push_back({id, tokens(50, static_cast<cache::TokenId>(1000 * id)), true});
  Reserve request{plan, {}};
  const auto r = actor.address().ask(std::move(request), 5s, asio::use_future).get();
  EXPECT_TRUE(r.reserved) << r.error << " missing " << r.missing_blocks;
  const auto s = actor.address().ask(GetCacheStats{}, 5s, asio::use_future).get();
  EXPECT_EQ(s.cache.sequences, 64u);
  EXPECT_EQ(s.cache.used_blocks, 64u * 4u);  // 50 tokens take 4 blocks of 16
  actor.stop();
}

}  // namespace
}  // namespace loom::actors

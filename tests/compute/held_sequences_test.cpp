// HeldSequences: a backend's record of each sequence between steps, rebuilt from the changes a step
// carries. Each rule of a step's changes, followed and refused.
#include "loom/compute/held_sequences.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace loom::compute {
namespace {

constexpr std::int64_t kHeldBlockSize = 4;

StepSequence start(SequenceId id, std::vector<std::int32_t> prefix, std::vector<std::int32_t> tokens,
                   std::vector<BlockId> table) {
  StepSequence s;
  s.sequence = id;
  s.start = static_cast<std::int64_t>(prefix.size());
  s.tokens = std::move(tokens);
  s.blocks = std::move(table);
  s.begin = SequenceStart{proto::SamplingParams{}, std::move(prefix)};
  return s;
}

StepSequence next(SequenceId id, std::int64_t start, std::int32_t token, std::int64_t table_from,
                  std::vector<BlockId> blocks = {}) {
  StepSequence s;
  s.sequence = id;
  s.start = start;
  s.tokens = {token};
  s.table_from = table_from;
  s.blocks = std::move(blocks);
  return s;
}

std::string refusal(const HeldSequences& held, const StepSequence& step) {
  try {
    held.check(step, kHeldBlockSize);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(HeldSequences, FollowsAStartThenDecodesThatGrowAndSwapTheTable) {
  HeldSequences held;
  StepSequence first = start(7, {1, 2}, {3, 4, 5}, {10, 11});
  ASSERT_EQ(refusal(held, first), "");
  held.apply(first);
  // Positions 5, 6, 7 fit the two blocks; position 8 needs a third.
  for (std::int32_t p = 5; p < 8; ++p) {
    const auto step = next(7, p, 100 + p, 2);
    ASSERT_EQ(refusal(held, step), "") << p;
    held.apply(step);
  }
  const auto grow = next(7, 8, 108, 2, {12});
  ASSERT_EQ(refusal(held, grow), "");
  held.apply(grow);
  const auto swap = next(7, 9, 109, 2, {99});  // a copy-on-write replaced the last block
  ASSERT_EQ(refusal(held, swap), "");
  const auto& sequence = held.apply(swap);
  EXPECT_EQ(sequence.table, (std::vector<BlockId>{10, 11, 99}));
  EXPECT_EQ(sequence.tokens, (std::vector<std::int32_t>{1, 2, 3, 4, 5, 105, 106, 107, 108, 109}));
}

TEST(HeldSequences, RefusesStepsThatDoNotFollowFromWhatIsHeldAndChangesNothing) {
  HeldSequences held;
  EXPECT_NE(refusal(held, next(3, 0, 1, 0, {1})).find("sequence 3 is not held"), std::string::npos);
  auto bad_prefix = start(3, {1, 2}, {3}, {1});
  bad_prefix.start = 1;
  EXPECT_NE(refusal(held, bad_prefix).find("starts at position 1 with a prefix of 2 tokens"), std::string::npos);
  EXPECT_NE(refusal(held, start(3, {}, {1, 2, 3, 4, 5}, {1})).find("block table of 1 blocks for 5 positions"),
            std::string::npos);

  held.apply(start(3, {}, {1, 2}, {1}));
  EXPECT_NE(refusal(held, next(3, 3, 9, 1)).find("continues at position 3 but 2 positions are computed"),
            std::string::npos);
  EXPECT_NE(refusal(held, next(3, 2, 9, 2)).find("changes its block table from entry 2 of 1"), std::string::npos);
  EXPECT_NE(refusal(held, next(3, 2, 9, -1)).find("changes its block table"), std::string::npos);
  // The refusals changed nothing.
  EXPECT_EQ(held.find(3)->tokens, (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(held.find(3)->table, (std::vector<BlockId>{1}));
}

TEST(HeldSequences, AStartReplacesWhatWasHeldAndAReleaseForgetsIt) {
  HeldSequences held;
  held.apply(start(1, {}, {1, 2, 3}, {5}));
  auto again = start(1, {}, {4, 5}, {8});
  again.begin->params.temperature = 0.0;
  ASSERT_EQ(refusal(held, again), "") << "a held sequence may start afresh (after a preemption)";
  const auto& sequence = held.apply(again);
  EXPECT_EQ(sequence.tokens, (std::vector<std::int32_t>{4, 5}));
  EXPECT_EQ(sequence.table, (std::vector<BlockId>{8}));
  EXPECT_EQ(sequence.params.temperature, 0.0);
  held.release(1);
  EXPECT_EQ(held.find(1), nullptr);
  EXPECT_EQ(held.size(), 0u);
}

TEST(HeldSequences, AForkTakesTheTableAndHistoryWithItsOwnParameters) {
  HeldSequences held;
  held.apply(start(1, {}, {10, 11, 12, 13, 14}, {5, 6}));
  proto::SamplingParams params;
  params.seed = 8;
  held.fork(1, SequenceFork{2, params});
  const auto* fork = held.find(2);
  ASSERT_NE(fork, nullptr);
  EXPECT_EQ(fork->table, (std::vector<BlockId>{5, 6}));
  EXPECT_EQ(fork->tokens, (std::vector<std::int32_t>{10, 11, 12, 13, 14}));
  EXPECT_EQ(fork->params.seed, std::optional<std::uint64_t>(8));
  EXPECT_EQ(held.find(1)->params.seed, std::nullopt) << "the parent keeps its own";
  // The fork continues on its own: its table changes, the parent's does not.
  held.apply(next(2, 5, 20, 1, {7}));
  EXPECT_EQ(held.find(2)->table, (std::vector<BlockId>{5, 7}));
  EXPECT_EQ(held.find(1)->table, (std::vector<BlockId>{5, 6}));
  EXPECT_THROW(held.fork(1, SequenceFork{2, params}), std::invalid_argument) << "a fork needs a new id";
  EXPECT_THROW(held.fork(9, SequenceFork{3, params}), std::invalid_argument) << "the parent must be held";
}

TEST(HeldSequences, PayloadBytesCountWhatAStepCarries) {
  StepBatch batch;
  batch.sequences.push_back(next(1, 10, 5, 3));
  const std::size_t decode = payload_bytes(batch);
  EXPECT_EQ(decode, sizeof(StepSequence) + sizeof(std::int32_t));
  batch.sequences[0].begin = SequenceStart{proto::SamplingParams{}, std::vector<std::int32_t>(10, 1)};
  batch.sequences[0].begin->params.stop = {"abc"};
  batch.copies.push_back({1, 2});
  EXPECT_EQ(payload_bytes(batch), decode + 10 * sizeof(std::int32_t) + 3 + sizeof(BlockCopy));
  // A constraint carries its text (a grammar or schema can be large).
  batch.sequences[0].begin->params.constraint = proto::OutputConstraint{proto::OutputConstraint::Kind::grammar, "root ::= \"x\""};
  EXPECT_EQ(payload_bytes(batch), decode + 10 * sizeof(std::int32_t) + 3 + sizeof(BlockCopy) + 12);
}

}  // namespace
}  // namespace loom::compute

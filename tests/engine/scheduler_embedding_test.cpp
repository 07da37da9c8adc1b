// The Scheduler with embedding sequences (SubmitSequence::embed), driven directly as scheduler_test.cpp
// does: an embedding reserves without prefix reuse, runs its prompt in chunks beside a generation (each of
// its steps marked embed, the last one sampling), and ends with reason stop carrying the executor's vector
// and its blocks released; the generation beside it goes on as alone; a prompt as long as the context is
// refused; a last chunk answered without a vector fails the sequence.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <vector>

#include "loom/actors/engine/scheduler.hpp"

namespace loom::actors {
namespace {

using namespace std::chrono_literals;
using Clock = Scheduler::Clock;
const Clock::time_point kEmbeddingT0 = Clock::time_point{} + 1h;

SubmitSequence submission(cache::SequenceId id, std::size_t prompt, bool embed) {
  SubmitSequence s;
  s.sequence = id;
  s.prompt = std::vector<std::int32_t>(prompt, 3);
  s.params.max_tokens = 6;
  s.embed = embed;
  s.fairness_key = "key" + std::to_string(id);
  s.accepted = kEmbeddingT0;
  s.sink = [](SequenceEvent) {};
  return s;
}

ReserveResult grant_embedding(const std::vector<ReserveItem>& items) {
  ReserveResult result;
  result.reserved = true;
  for (const auto& item : items) {
    result.reservations.emplace_back();
    result.block_tables.push_back({static_cast<cache::BlockId>(item.sequence * 10)});
  }
  return result;
}

std::optional<SequenceFinished> finished_of(const SchedulerActions& actions, cache::SequenceId id) {
  for (const auto& a : actions) {
    const auto* e = std::get_if<SinkEvent>(&a);
    if (e == nullptr) continue;
    if (const auto* f = std::get_if<SequenceFinished>(&e->event); f != nullptr && f->sequence == id) return *f;
  }
  return std::nullopt;
}

bool releases_embedding(const SchedulerActions& actions, cache::SequenceId id) {
  for (const auto& a : actions) {
    if (const auto* r = std::get_if<Release>(&a); r != nullptr && r->sequence == id) return true;
  }
  return false;
}

TEST(SchedulerEmbedding, RunsInChunksBesideAGenerationAndEndsWithItsVector) {
  Scheduler scheduler(SchedulerConfig{.max_batch_tokens = 4, .context_length = 64});
  ASSERT_FALSE(scheduler.submit(submission(1, 10, true)));
  ASSERT_FALSE(scheduler.submit(submission(2, 2, false)));
  const std::vector<float> vector{0.6f, 0.8f};
  Clock::time_point now = kEmbeddingT0;
  std::size_t embedded_positions = 0;
  int generated = 0;
  std::optional<SequenceFinished> embedding_end;
  for (int step = 0; step < 20 && !scheduler.empty(); ++step) {
    const StepPlan plan = scheduler.plan_step();
    ASSERT_TRUE(plan.planned);
    for (const ReserveItem& item : plan.reserve) {
      if (item.new_sequence) {
        EXPECT_EQ(item.reuse_prefix, item.sequence != 1) << "an embedding pools every position";
      }
    }
    now += 1ms;
    const compute::StepBatch batch = scheduler.start_step(grant_embedding(plan.reserve), now);
    StepDone done;
    for (const compute::StepSequence& s : batch.sequences) {
      EXPECT_EQ(s.embed, s.sequence == 1);
      if (s.sequence == 1) {
        EXPECT_EQ(s.start, static_cast<std::int64_t>(embedded_positions));
        embedded_positions += s.tokens.size();
        EXPECT_EQ(s.sample, embedded_positions == 10) << "only the last chunk ends the prompt";
        if (s.sample) done.embeddings.push_back(compute::PooledEmbedding{1, vector});
      } else if (s.sample) {
        done.sampled.push_back(compute::SampledToken{.sequence = 2, .token = 7, .logprob = 0, .top = {}});
        ++generated;
      }
    }
    now += 1ms;
    const AppliedStep applied = scheduler.apply_step(std::move(done), now);
    if (auto end = finished_of(applied.actions, 1)) {
      embedding_end = end;
      EXPECT_TRUE(releases_embedding(applied.actions, 1)) << "its blocks go back";
    }
  }
  EXPECT_EQ(embedded_positions, 10u);
  ASSERT_TRUE(embedding_end.has_value());
  EXPECT_EQ(embedding_end->reason, proto::FinishReason::stop);
  EXPECT_EQ(embedding_end->embedding, vector);
  EXPECT_EQ(embedding_end->prompt_tokens, 10);
  EXPECT_EQ(embedding_end->completion_tokens, 0);
  EXPECT_EQ(generated, 6) << "the generation beside it ran its max_tokens";
}

TEST(SchedulerEmbedding, APromptAsLongAsTheContextIsRefused) {
  Scheduler scheduler(SchedulerConfig{.context_length = 16});
  const auto rejected = scheduler.submit(submission(1, 16, true));
  ASSERT_TRUE(rejected.has_value());
  EXPECT_EQ(std::get<SequenceRejected>(rejected->event).code, proto::ErrorCode::invalid_request);
}

TEST(SchedulerEmbedding, ALastChunkWithoutAVectorFailsTheSequence) {
  Scheduler scheduler(SchedulerConfig{.context_length = 16});
  ASSERT_FALSE(scheduler.submit(submission(1, 3, true)));
  const StepPlan plan = scheduler.plan_step();
  const compute::StepBatch batch = scheduler.start_step(grant_embedding(plan.reserve), kEmbeddingT0);
  ASSERT_EQ(batch.sequences.size(), 1u);
  ASSERT_TRUE(batch.sequences[0].sample);
  const AppliedStep applied = scheduler.apply_step(StepDone{}, kEmbeddingT0);
  const auto end = finished_of(applied.actions, 1);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->reason, proto::FinishReason::error);
  EXPECT_TRUE(end->embedding.empty());
}

}  // namespace
}  // namespace loom::actors

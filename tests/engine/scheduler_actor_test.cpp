// SchedulerActor with the real CacheManagerActor and GpuExecutorActor, over a fake backend that keeps
// "K/V" as the token ids themselves: each step writes its tokens into the slots its block table names, and
// a sampled token is a function of the tokens read back through the table (never of the step's history).
// A sequence's output is then right only if paging, prefix reuse, copy-on-write and recompute after a
// preemption all are; and the expected output of any prompt is known without a model. The batch log lets
// the tests count steps and tokens instead of timing anything.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <boost/asio/use_future.hpp>

#include "loom/actors/engine/cache_manager_actor.hpp"
#include "loom/actors/engine/gpu_executor_actor.hpp"
#include "loom/actors/engine/scheduler_actor.hpp"
#include "loom/compute/held_sequences.hpp"
#include "loom/cache/block_manager.hpp"
#include "test_support.hpp"

namespace loom::actors {
namespace {

using namespace std::chrono_literals;
using proto::FinishReason;
using testing::RunningContext;
using testing::eventually;

constexpr std::int32_t kVocab = 100;
constexpr std::int32_t kEnd = 1;  // the fake never samples it unless a prompt asks (see next_token)

// The token after `tokens`: a hash of all of them, in [2, kVocab).
std::int32_t next_token(const std::vector<std::int32_t>& tokens) {
  std::uint32_t h = 2166136261u;
  for (const std::int32_t t : tokens) h = (h ^ static_cast<std::uint32_t>(t)) * 16777619u;
  return static_cast<std::int32_t>(2 + h % (kVocab - 2));
}

std::vector<std::int32_t> expected_output(std::vector<std::int32_t> tokens, int count) {
  std::vector<std::int32_t> out;
  for (int i = 0; i < count; ++i) {
    const std::int32_t t = next_token(tokens);
    out.push_back(t);
    tokens.push_back(t);
  }
  return out;
}

struct LoggedSequence {
  cache::SequenceId id;
  std::size_t tokens;
  bool sample;
};
using LoggedStep = std::vector<LoggedSequence>;

// Shared between the test thread and the executor's compute thread; the lock is the test's, not an actor's.
struct FakeLog {
  std::mutex mutex;
  std::vector<LoggedStep> steps;
  int fail_step = -1;  // the step (0-based) that throws
  std::vector<LoggedStep> snapshot() {
    std::lock_guard lock(mutex);
    return steps;
  }
};

class PagedFakeBackend final : public compute::Backend {
 public:
  PagedFakeBackend(std::shared_ptr<FakeLog> log, std::int64_t blocks, std::int64_t block_size, std::int64_t context)
      : log_(std::move(log)), block_size_(block_size), slots_(static_cast<std::size_t>(blocks * block_size), -1) {
    info_.config.vocab_size = kVocab;
    info_.config.context_length = context;
    info_.kv_block_size = block_size;
    info_.kv_blocks = blocks;
    info_.max_batch_tokens = 4096;
  }
  compute::BackendInfo info() const override { return info_; }
  std::shared_ptr<const compute::Tokenizer> tokenizer() const override { return nullptr; }
  void release(cache::SequenceId sequence) override { held_.release(sequence); }

  compute::StepResult run(const compute::StepBatch& batch) override {
    {
      std::lock_guard lock(log_->mutex);
      LoggedStep step;
      for (const auto& s : batch.sequences) step.push_back({s.sequence, s.tokens.size(), s.sample});
      const int index = static_cast<int>(log_->steps.size());
      log_->steps.push_back(std::move(step));
      if (index == log_->fail_step) throw std::runtime_error("injected failure at step " + std::to_string(index));
    }
    for (const auto& copy : batch.copies) {
      for (std::int64_t i = 0; i < block_size_; ++i) slot(copy.destination, i) = slot(copy.source, i);
    }
    // The tables come as changes: followed as every backend follows them (a step that does not follow from
    // what is held fails, as it would on the real backend).
    for (const auto& s : batch.sequences) held_.check(s, block_size_);
    compute::StepResult result;
    for (const auto& step : batch.sequences) {
      const auto& s = step;
      const auto& table = held_.apply(step).table;
      for (std::size_t i = 0; i < s.tokens.size(); ++i) at(table, s.start + static_cast<std::int64_t>(i)) = s.tokens[i];
      if (!s.sample) continue;
      std::vector<std::int32_t> seen;
      for (std::int64_t p = 0; p < s.start + static_cast<std::int64_t>(s.tokens.size()); ++p) seen.push_back(at(table, p));
      result.sampled.push_back(compute::SampledToken{.sequence = s.sequence, .token = next_token(seen), .logprob = 0, .top = {}});
    }
    return result;
  }

 private:
  std::int32_t& slot(std::uint32_t block, std::int64_t offset) {
    return slots_.at(static_cast<std::size_t>(block * block_size_ + offset));
  }
  std::int32_t& at(const std::vector<compute::BlockId>& table, std::int64_t position) {
    const auto index = static_cast<std::size_t>(position / block_size_);
    if (index >= table.size()) throw std::out_of_range("position past the block table");
    return slot(static_cast<std::uint32_t>(table[index]), position % block_size_);
  }

  compute::HeldSequences held_;
  std::shared_ptr<FakeLog> log_;
  compute::BackendInfo info_;
  std::int64_t block_size_;
  std::vector<std::int32_t> slots_;
};

// What one sequence's sink saw, in order.
struct Outcome {
  std::vector<std::int32_t> tokens;
  std::optional<SequenceFinished> finished;
  std::optional<SequenceRejected> rejected;
  bool over() const { return finished || rejected; }
};

class Collector {
 public:
  SequenceSink sink(cache::SequenceId id) {
    return [this, id](SequenceEvent event) {
      std::lock_guard lock(mutex_);
      Outcome& o = outcomes_[id];
      if (auto* t = std::get_if<SequenceToken>(&event)) {
        EXPECT_EQ(t->index, static_cast<std::int32_t>(o.tokens.size())) << "sequence " << id;
        EXPECT_FALSE(o.over()) << "event after the end, sequence " << id;
        o.tokens.push_back(t->token);
      } else if (auto* f = std::get_if<SequenceFinished>(&event)) {
        EXPECT_FALSE(o.over()) << "second end, sequence " << id;
        o.finished = *f;
      } else {
        o.rejected = std::get<SequenceRejected>(event);
      }
      order_.push_back({id, event.index()});
    };
  }
  Outcome get(cache::SequenceId id) {
    std::lock_guard lock(mutex_);
    return outcomes_[id];
  }
  bool all_over(const std::vector<cache::SequenceId>& ids) {
    std::lock_guard lock(mutex_);
    return std::all_of(ids.begin(), ids.end(), [&](cache::SequenceId id) { return outcomes_[id].over(); });
  }
  std::size_t tokens_of(cache::SequenceId id) {
    std::lock_guard lock(mutex_);
    return outcomes_[id].tokens.size();
  }
  // Events in arrival order: (sequence, 0 token / 1 finished / 2 rejected).
  std::vector<std::pair<cache::SequenceId, std::size_t>> order() {
    std::lock_guard lock(mutex_);
    return order_;
  }

 private:
  std::mutex mutex_;
  std::map<cache::SequenceId, Outcome> outcomes_;
  std::vector<std::pair<cache::SequenceId, std::size_t>> order_;
};

struct Rig {
  std::int64_t blocks = 64;
  std::int64_t block_size = 4;
  SchedulerConfig config{};

  RunningContext context{2};
  std::shared_ptr<FakeLog> log = std::make_shared<FakeLog>();
  ActorHandle<GpuExecutorProtocol> executor;
  ActorHandle<CacheManagerProtocol> cache;
  ActorHandle<SchedulerProtocol> scheduler;
  Collector collector;

  void start() {
    if (config.context_length == 0) config.context_length = 256;
    auto shared_log = log;
    const std::int64_t b = blocks, bs = block_size, ctx = config.context_length;
    executor = spawn<GpuExecutorActor>(context.executor(), {.name = "executor"},
                                       compute::BackendFactory([shared_log, b, bs, ctx](const compute::LoadOptions&) {
                                         return std::make_unique<PagedFakeBackend>(shared_log, b, bs, ctx);
                                       }));
    compute::LoadOptions options;
    options.model_path = "fake";
    LoadModel load{options, {}};
    const LoadResult loaded = executor.address().ask(std::move(load), 10s, boost::asio::use_future).get();
    ASSERT_TRUE(loaded.loaded()) << loaded.error;
    cache = spawn<CacheManagerActor>(context.executor(), {.name = "cache"},
                                     cache::BlockManagerConfig{.block_count = static_cast<std::size_t>(blocks),
                                                               .block_size = static_cast<std::size_t>(block_size)});
    scheduler = spawn<SchedulerActor>(context.executor(), {.name = "scheduler"}, config, cache.address(), executor.address());
  }

  void submit(cache::SequenceId id, std::vector<std::int32_t> prompt, std::int32_t max_tokens, std::int32_t priority = 0,
              std::string key = {}) {
    SubmitSequence s;
    s.sequence = id;
    s.prompt = std::move(prompt);
    s.params.temperature = 0.0f;
    s.params.max_tokens = max_tokens;
    s.end_ids = {kEnd};
    s.priority = priority;
    s.fairness_key = key.empty() ? "key" + std::to_string(id) : key;
    s.sink = collector.sink(id);
    scheduler.address().tell(std::move(s));
  }

  bool wait(const std::vector<cache::SequenceId>& ids, std::chrono::milliseconds limit = 30s) {
    return eventually([&] { return collector.all_over(ids); }, limit);
  }

  CacheManagerStats cache_stats() {
    GetCacheStats request{};
    return cache.address().ask(std::move(request), 10s, boost::asio::use_future).get();
  }
  SchedulerStats scheduler_stats() {
    GetSchedulerStats request{};
    return scheduler.address().ask(std::move(request), 10s, boost::asio::use_future).get();
  }

  ~Rig() {
    for (auto* stop : {&scheduler}) stop->async_stop(boost::asio::use_future).get();
    cache.async_stop(boost::asio::use_future).get();
    executor.async_stop(boost::asio::use_future).get();
  }
};

std::vector<std::int32_t> prompt_of(int seed, int length) {
  std::vector<std::int32_t> p;
  for (int i = 0; i < length; ++i) p.push_back(2 + (seed * 31 + i * 7) % (kVocab - 2));
  return p;
}

TEST(SchedulerActor, ManySequencesTogetherEachGiveWhatTheyGiveAlone) {
  Rig rig;
  rig.config.max_batch_tokens = 24;  // prompts of up to 40 tokens prefill in chunks, mixed with decodes
  rig.start();
  std::vector<cache::SequenceId> ids;
  for (int i = 0; i < 16; ++i) {
    ids.push_back(static_cast<cache::SequenceId>(i + 1));
    rig.submit(ids.back(), prompt_of(i, 5 + (i * 7) % 36), 12);
  }
  ASSERT_TRUE(rig.wait(ids));
  for (int i = 0; i < 16; ++i) {
    const Outcome o = rig.collector.get(ids[static_cast<std::size_t>(i)]);
    ASSERT_TRUE(o.finished) << "sequence " << ids[static_cast<std::size_t>(i)];
    EXPECT_EQ(o.finished->reason, FinishReason::length);
    EXPECT_EQ(o.tokens, expected_output(prompt_of(i, 5 + (i * 7) % 36), 12)) << "sequence " << i + 1;
    EXPECT_EQ(o.finished->completion_tokens, 12);
  }
  for (const LoggedStep& step : rig.log->snapshot()) {
    std::size_t tokens = 0;
    for (const auto& s : step) tokens += s.tokens;
    EXPECT_LE(tokens, 24u);
  }
  const auto stats = rig.cache_stats();
  EXPECT_EQ(stats.cache.used_blocks, 0u) << "every finished sequence gave its blocks back";
  EXPECT_EQ(stats.cache.sequences, 0u);
}

TEST(SchedulerActor, ALongPromptPrefillsInChunksWhileAStreamDecodesAtEveryStep) {
  Rig rig;
  rig.config.max_batch_tokens = 16;
  rig.blocks = 128;
  rig.start();
  rig.submit(1, prompt_of(1, 6), 200);
  ASSERT_TRUE(eventually([&] { return rig.collector.tokens_of(1) >= 3; }));
  rig.submit(2, prompt_of(2, 150), 4);
  ASSERT_TRUE(rig.wait({2}));
  rig.scheduler.address().tell(CancelSequence{1, FinishReason::cancelled});
  ASSERT_TRUE(rig.wait({1}));

  // Every step that ran a chunk of sequence 2's prompt also decoded sequence 1; the chunks cover the
  // prompt exactly and fill the step's budget.
  std::size_t chunks = 0, prefilled = 0;
  for (const LoggedStep& step : rig.log->snapshot()) {
    const auto two = std::find_if(step.begin(), step.end(), [](const LoggedSequence& s) { return s.id == 2; });
    if (two == step.end() || (two->tokens == 1 && two->sample && prefilled >= 150)) continue;
    ++chunks;
    prefilled += two->tokens;
    const auto one = std::find_if(step.begin(), step.end(), [](const LoggedSequence& s) { return s.id == 1; });
    ASSERT_NE(one, step.end()) << "the decoding stream was left out of a prefill step";
    EXPECT_EQ(one->tokens, 1u);
    EXPECT_TRUE(one->sample);
    EXPECT_LE(two->tokens, 15u);
  }
  EXPECT_EQ(prefilled, 150u);
  EXPECT_EQ(chunks, 10u);  // 150 tokens at 15 a step
  EXPECT_EQ(rig.collector.get(2).tokens, expected_output(prompt_of(2, 150), 4));
}

TEST(SchedulerActor, AHighPriorityRequestGetsItsFirstTokenBeforeTheLowOnesFinish) {
  Rig rig;
  rig.config.max_running = 4;  // full with the low ones: the high one must take a place
  rig.config.thermal.nominal.step_delay = 1ms;  // so that the low ones are still decoding when it comes
  rig.start();
  std::vector<cache::SequenceId> low;
  for (int i = 0; i < 4; ++i) {
    low.push_back(static_cast<cache::SequenceId>(10 + i));
    rig.submit(low.back(), prompt_of(i, 8), 200, -1);
  }
  ASSERT_TRUE(eventually([&] { return rig.collector.tokens_of(10) >= 2; }));
  rig.submit(99, prompt_of(99, 8), 5, 5);
  low.push_back(99);
  ASSERT_TRUE(rig.wait(low));
  const auto order = rig.collector.order();
  const auto first_high = std::find_if(order.begin(), order.end(), [](const auto& e) { return e.first == 99 && e.second == 0; });
  const auto first_low_end = std::find_if(order.begin(), order.end(), [](const auto& e) { return e.first != 99 && e.second == 1; });
  ASSERT_NE(first_high, order.end());
  EXPECT_LT(first_high - order.begin(), first_low_end - order.begin());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(rig.collector.get(low[static_cast<std::size_t>(i)]).tokens, expected_output(prompt_of(i, 8), 200))
        << "the preempted low sequence resumed where it was";
  }
  EXPECT_GE(rig.scheduler_stats().preemptions, 1u);
}

TEST(SchedulerActor, AKvCacheFarTooSmallPreemptsAndEverySequenceStillCompletesAsAlone) {
  Rig rig;
  rig.blocks = 24;  // 96 slots: each sequence grows to 16 + 40 = 56 tokens (14 blocks)
  rig.config.context_length = 96;
  rig.start();
  std::vector<cache::SequenceId> ids;
  for (int i = 0; i < 6; ++i) {
    ids.push_back(static_cast<cache::SequenceId>(i + 1));
    rig.submit(ids.back(), prompt_of(i + 40, 16), 40);
  }
  ASSERT_TRUE(rig.wait(ids, 60s));
  for (int i = 0; i < 6; ++i) {
    const Outcome o = rig.collector.get(ids[static_cast<std::size_t>(i)]);
    ASSERT_TRUE(o.finished);
    EXPECT_EQ(o.finished->reason, FinishReason::length) << o.finished->error;
    EXPECT_EQ(o.tokens, expected_output(prompt_of(i + 40, 16), 40)) << "sequence " << i + 1;
  }
  EXPECT_GE(rig.scheduler_stats().preemptions, 1u);
  EXPECT_EQ(rig.cache_stats().cache.used_blocks, 0u);
}

TEST(SchedulerActor, AHighPriorityRequestStillGetsInWhileAKvShortageHoldsAdmissions) {
  Rig rig;
  rig.blocks = 24;
  rig.config.context_length = 96;
  rig.config.thermal.nominal.step_delay = 1ms;
  rig.start();
  std::vector<cache::SequenceId> ids;
  for (int i = 0; i < 6; ++i) {
    ids.push_back(static_cast<cache::SequenceId>(i + 1));
    rig.submit(ids.back(), prompt_of(i + 40, 16), 60, -1);
  }
  ASSERT_TRUE(eventually([&] { return rig.scheduler_stats().preemptions >= 1; }));
  rig.submit(99, prompt_of(99, 8), 5, 5);
  ids.push_back(99);
  ASSERT_TRUE(rig.wait(ids, 60s));
  const auto order = rig.collector.order();
  const auto first_high = std::find_if(order.begin(), order.end(), [](const auto& e) { return e.first == 99 && e.second == 0; });
  const auto first_low_end = std::find_if(order.begin(), order.end(), [](const auto& e) { return e.first != 99 && e.second == 1; });
  EXPECT_LT(first_high - order.begin(), first_low_end - order.begin());
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(rig.collector.get(ids[static_cast<std::size_t>(i)]).tokens, expected_output(prompt_of(i + 40, 16), 60));
  }
}

TEST(SchedulerActor, CancelEndsWaitingAndRunningSequencesAndGivesTheirBlocksBack) {
  Rig rig;
  rig.config.max_running = 1;
  rig.start();
  rig.submit(1, prompt_of(1, 10), 1000);
  rig.submit(2, prompt_of(2, 10), 1000);  // waits behind 1
  ASSERT_TRUE(eventually([&] { return rig.collector.tokens_of(1) >= 2; }));
  rig.scheduler.address().tell(CancelSequence{2, FinishReason::cancelled});
  ASSERT_TRUE(rig.wait({2}));
  EXPECT_EQ(rig.collector.get(2).finished->reason, FinishReason::cancelled);
  EXPECT_TRUE(rig.collector.get(2).tokens.empty());

  std::size_t steps_before = 0;
  {
    // No step starts while the count is taken and the cancel sent (the backend logs a step under this
    // lock), so the cancel reaches the scheduler before the result of any step that starts after it: what
    // runs later is at most the one step already on its way. (Counting, then telling, let a descheduled test
    // thread see several steps pass in between.)
    std::lock_guard lock(rig.log->mutex);
    steps_before = rig.log->steps.size();
    rig.scheduler.address().tell(CancelSequence{1, FinishReason::cancelled});
  }
  ASSERT_TRUE(rig.wait({1}));
  EXPECT_EQ(rig.collector.get(1).finished->reason, FinishReason::cancelled);
  EXPECT_LE(rig.log->snapshot().size(), steps_before + 1) << "the cancel took effect within one step";
  rig.scheduler.address().tell(CancelSequence{1, FinishReason::cancelled});   // finished: harmless
  rig.scheduler.address().tell(CancelSequence{777, FinishReason::cancelled}); // unknown: harmless
  ASSERT_TRUE(eventually([&] { return rig.cache_stats().cache.used_blocks == 0; }));
  EXPECT_EQ(rig.scheduler_stats().cancelled, 2u);
}

TEST(SchedulerActor, TheWaitingQueueIsBoundedAndRefusesWithOverloaded) {
  Rig rig;
  rig.config.max_waiting = 2;
  rig.start();
  // Critical pauses background work, so these stay waiting.
  rig.scheduler.address().tell(ThermalStateChanged{ThermalState::critical, std::nullopt, "test"});
  for (cache::SequenceId id = 1; id <= 3; ++id) rig.submit(id, prompt_of(static_cast<int>(id), 4), 3, -1);
  ASSERT_TRUE(rig.wait({3}));
  ASSERT_TRUE(rig.collector.get(3).rejected);
  EXPECT_EQ(rig.collector.get(3).rejected->code, proto::ErrorCode::overloaded);
  EXPECT_FALSE(rig.collector.get(1).over());
  rig.scheduler.address().tell(ThermalStateChanged{ThermalState::nominal, std::nullopt, "test"});
  ASSERT_TRUE(rig.wait({1, 2}));
  EXPECT_EQ(rig.collector.get(1).tokens, expected_output(prompt_of(1, 4), 3));
}

TEST(SchedulerActor, CriticalPausesBackgroundWorkAndNominalResumesItWithNothingLost) {
  Rig rig;
  rig.start();
  rig.submit(1, prompt_of(1, 6), 200, -2);  // background
  ASSERT_TRUE(eventually([&] { return rig.collector.tokens_of(1) >= 2; }));
  rig.scheduler.address().tell(ThermalStateChanged{ThermalState::critical, std::nullopt, "test"});
  ASSERT_TRUE(eventually([&] { return rig.scheduler_stats().paused == 1; }));
  rig.submit(2, prompt_of(2, 6), 20, 0);  // a user prompt still runs under critical
  // Once the user prompt has a token, the step that was out when the state changed is surely back.
  ASSERT_TRUE(eventually([&] { return rig.collector.tokens_of(2) >= 1; }));
  const std::size_t paused_at = rig.collector.tokens_of(1);
  ASSERT_TRUE(rig.wait({2}));
  EXPECT_EQ(rig.collector.tokens_of(1), paused_at) << "no tokens for background work while critical";
  rig.scheduler.address().tell(ThermalStateChanged{ThermalState::nominal, std::nullopt, "test"});
  ASSERT_TRUE(rig.wait({1}));
  EXPECT_EQ(rig.collector.get(1).tokens, expected_output(prompt_of(1, 6), 200));
  EXPECT_EQ(rig.collector.get(2).tokens, expected_output(prompt_of(2, 6), 20));
}

TEST(SchedulerActor, AFailedStepFailsOnlyItsSequencesAndTheNextOnesSucceed) {
  Rig rig;
  rig.start();
  rig.log->fail_step = 2;
  rig.submit(1, prompt_of(1, 6), 10);
  ASSERT_TRUE(rig.wait({1}));
  EXPECT_EQ(rig.collector.get(1).finished->reason, FinishReason::error);
  EXPECT_NE(rig.collector.get(1).finished->error.find("injected failure"), std::string::npos);
  rig.submit(2, prompt_of(2, 6), 10);
  ASSERT_TRUE(rig.wait({2}));
  EXPECT_EQ(rig.collector.get(2).finished->reason, FinishReason::length);
  EXPECT_EQ(rig.collector.get(2).tokens, expected_output(prompt_of(2, 6), 10));
  ASSERT_TRUE(eventually([&] { return rig.cache_stats().cache.used_blocks == 0; }));
}

TEST(SchedulerActor, EndAndStopIdsAndTheContextEndASequence) {
  Rig rig;
  rig.config.context_length = 20;
  rig.start();
  const auto prompt = prompt_of(3, 6);
  const auto out = expected_output(prompt, 20);
  // The third generated token as a stop id: two tokens stream, then reason stop.
  SubmitSequence s;
  s.sequence = 1;
  s.prompt = prompt;
  s.params.temperature = 0.0f;
  s.params.max_tokens = 50;
  s.params.stop_token_ids = {out[2]};
  s.sink = rig.collector.sink(1);
  rig.scheduler.address().tell(std::move(s));
  rig.submit(2, prompt, 50);  // runs into the context: 20 - 6 = 14 tokens
  ASSERT_TRUE(rig.wait({1, 2}));
  const auto one = rig.collector.get(1);
  EXPECT_EQ(one.finished->reason, FinishReason::stop);
  EXPECT_EQ(one.tokens, std::vector<std::int32_t>(out.begin(), out.begin() + 2));
  EXPECT_EQ(one.finished->completion_tokens, 3);
  const auto two = rig.collector.get(2);
  EXPECT_EQ(two.finished->reason, FinishReason::length);
  EXPECT_EQ(two.tokens.size(), 14u);
  rig.submit(3, prompt_of(4, 20), 5);  // no room for a generated token
  ASSERT_TRUE(rig.wait({3}));
  ASSERT_TRUE(rig.collector.get(3).rejected);
  EXPECT_EQ(rig.collector.get(3).rejected->code, proto::ErrorCode::invalid_request);
}

TEST(SchedulerActor, ADeadlineEndsTheSequenceWithTimeout) {
  Rig rig;
  rig.config.thermal.nominal.step_delay = 5ms;  // a slow stream
  rig.start();
  SubmitSequence s;
  s.sequence = 1;
  s.prompt = prompt_of(1, 4);
  s.params.temperature = 0.0f;
  s.params.max_tokens = 200;
  s.deadline = std::chrono::steady_clock::now() + 100ms;
  s.sink = rig.collector.sink(1);
  rig.scheduler.address().tell(std::move(s));
  ASSERT_TRUE(rig.wait({1}));
  EXPECT_EQ(rig.collector.get(1).finished->reason, FinishReason::timeout);
  EXPECT_LT(rig.collector.get(1).tokens.size(), 200u);
}

TEST(SchedulerActor, DrainRefusesNewWorkAndAnswersOnceTheLastSequenceEnds) {
  Rig rig;
  rig.start();
  rig.submit(1, prompt_of(1, 4), 30);
  DrainScheduler drain{false, {}};
  auto drained = rig.scheduler.address().ask(std::move(drain), 30s, boost::asio::use_future);
  rig.submit(2, prompt_of(2, 4), 3);
  EXPECT_TRUE(drained.get());
  EXPECT_EQ(rig.collector.get(1).tokens, expected_output(prompt_of(1, 4), 30)) << "drain lets running work finish";
  ASSERT_TRUE(rig.wait({2}));
  ASSERT_TRUE(rig.collector.get(2).rejected);
  EXPECT_EQ(rig.collector.get(2).rejected->code, proto::ErrorCode::unavailable);
}

TEST(SchedulerActor, SessionsOfEqualPriorityAreAdmittedRoundRobin) {
  Rig rig;
  rig.config.max_running = 1;
  rig.start();
  rig.scheduler.address().tell(ThermalStateChanged{ThermalState::critical, std::nullopt, "hold"});
  // Session a submits three, b one, c one (held back while critical: priority -1).
  rig.submit(1, prompt_of(1, 4), 1, -1, "a");
  rig.submit(2, prompt_of(2, 4), 1, -1, "a");
  rig.submit(3, prompt_of(3, 4), 1, -1, "a");
  rig.submit(4, prompt_of(4, 4), 1, -1, "b");
  rig.submit(5, prompt_of(5, 4), 1, -1, "c");
  ASSERT_TRUE(eventually([&] { return rig.scheduler_stats().waiting == 5; }));
  rig.scheduler.address().tell(ThermalStateChanged{ThermalState::nominal, std::nullopt, "go"});
  ASSERT_TRUE(rig.wait({1, 2, 3, 4, 5}));
  std::vector<cache::SequenceId> finished;
  for (const auto& [id, kind] : rig.collector.order()) {
    if (kind == 1) finished.push_back(id);
  }
  EXPECT_EQ(finished, (std::vector<cache::SequenceId>{1, 4, 5, 2, 3}));
}

}  // namespace
}  // namespace loom::actors

// Scheduler, the SchedulerActor's policy, driven directly: no actors, no io_context, no clock. A test plays
// the cache manager (granting reservations, or answering a shortage) and the executor (a StepDone with the
// tokens it chooses), and passes `now` itself, so timings and deadlines are exact.
#include "loom/actors/engine/scheduler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace loom::actors {
namespace {

using namespace std::chrono_literals;
using proto::FinishReason;
using Clock = Scheduler::Clock;
using SequenceIds = std::vector<cache::SequenceId>;

constexpr std::int32_t kSchedulerEnd = 1;
constexpr std::int32_t kToken = 7;  // what the fake executor samples unless a test says otherwise
const Clock::time_point t0 = Clock::time_point{} + 1h;

std::vector<std::int32_t> prompt(std::size_t length) { return std::vector<std::int32_t>(length, 3); }

// ---- Reading a list of actions ----

std::vector<SequenceEvent> events(const SchedulerActions& actions, cache::SequenceId id) {
  std::vector<SequenceEvent> out;
  for (const auto& a : actions) {
    const auto* e = std::get_if<SinkEvent>(&a);
    if (e == nullptr) continue;
    const cache::SequenceId of = std::visit([](const auto& x) { return x.sequence; }, e->event);
    if (of == id) out.push_back(e->event);
  }
  return out;
}

std::vector<std::int32_t> tokens(const SchedulerActions& actions, cache::SequenceId id) {
  std::vector<std::int32_t> out;
  for (const auto& e : events(actions, id)) {
    if (const auto* t = std::get_if<SequenceToken>(&e)) out.push_back(t->token);
  }
  return out;
}

std::optional<SequenceFinished> finished(const SchedulerActions& actions, cache::SequenceId id) {
  for (const auto& e : events(actions, id)) {
    if (const auto* f = std::get_if<SequenceFinished>(&e)) return *f;
  }
  return std::nullopt;
}

bool releases(const SchedulerActions& actions, cache::SequenceId id) {
  for (const auto& a : actions) {
    if (const auto* r = std::get_if<Release>(&a); r != nullptr && r->sequence == id) return true;
  }
  return false;
}

SequenceIds batch_ids(const compute::StepBatch& batch) {
  SequenceIds ids;
  for (const auto& s : batch.sequences) ids.push_back(s.sequence);
  return ids;
}

const compute::StepSequence& in_batch(const compute::StepBatch& batch, cache::SequenceId id) {
  for (const auto& s : batch.sequences) {
    if (s.sequence == id) return s;
  }
  throw std::out_of_range("sequence not in the batch");
}

// Every item reserved; a new sequence finds `reused[id]` of its tokens cached (none unless given).
ReserveResult grant(const std::vector<ReserveItem>& items, const std::map<cache::SequenceId, std::size_t>& reused = {}) {
  ReserveResult result;
  result.reserved = true;
  for (const auto& item : items) {
    cache::Reservation r;
    if (item.new_sequence && reused.contains(item.sequence)) r.reused_tokens = reused.at(item.sequence);
    result.reservations.push_back(r);
    result.block_tables.push_back({static_cast<cache::BlockId>(item.sequence * 10)});
  }
  return result;
}

struct Step {
  StepPlan plan;
  compute::StepBatch batch;
  AppliedStep applied;
};

// One Scheduler, and the cache manager and executor played by the test.
struct Harness {
  explicit Harness(SchedulerConfig c = {}) : scheduler(with_context(c)) {}

  static SchedulerConfig with_context(SchedulerConfig c) {
    if (c.context_length == 0) c.context_length = 256;
    return c;
  }

  SubmitSequence sequence(cache::SequenceId id, std::size_t prompt_length, std::int32_t max_tokens,
                          std::int32_t priority = 0, std::string key = {}) {
    SubmitSequence s;
    s.sequence = id;
    s.prompt = prompt(prompt_length);
    s.params.max_tokens = max_tokens;
    s.end_ids = {kSchedulerEnd};
    s.priority = priority;
    s.fairness_key = key.empty() ? "key" + std::to_string(id) : key;
    s.accepted = t0;
    s.sink = [](SequenceEvent) {};
    return s;
  }
  void submit(SubmitSequence s) {
    const auto rejected = scheduler.submit(std::move(s));
    ASSERT_FALSE(rejected.has_value());
  }
  void submit(cache::SequenceId id, std::size_t prompt_length, std::int32_t max_tokens, std::int32_t priority = 0,
              std::string key = {}) {
    submit(sequence(id, prompt_length, max_tokens, priority, std::move(key)));
  }

  // The executor's answer: `token(id)` for every sequence of the batch that samples, in batch order.
  static StepDone answer(const compute::StepBatch& batch, const std::function<std::int32_t(cache::SequenceId)>& token) {
    StepDone done;
    for (const auto& s : batch.sequences) {
      if (s.sample) done.sampled.push_back(compute::SampledToken{.sequence = s.sequence, .token = token(s.sequence), .logprob = 0, .top = {}});
    }
    return done;
  }

  // A whole step: plan, every reservation granted, the batch computed (5 ms after planning, 10 ms long).
  Step step(const std::function<std::int32_t(cache::SequenceId)>& token = [](cache::SequenceId) { return kToken; },
            const std::map<cache::SequenceId, std::size_t>& reused = {}) {
    Step out;
    out.plan = scheduler.plan_step();
    if (!out.plan.planned) return out;
    now += 5ms;
    out.batch = scheduler.start_step(grant(out.plan.reserve, reused), now);
    now += 10ms;
    out.applied = scheduler.apply_step(answer(out.batch, token), now);
    return out;
  }

  Scheduler scheduler;
  Clock::time_point now = t0;
};

// ---- Admission ----

TEST(Scheduler, AdmitsByPriorityThenTheLeastRecentlyServedKeyThenArrival) {
  Harness h(SchedulerConfig{.max_running = 1});
  h.submit(1, 4, 1, 0, "a");
  h.submit(2, 4, 1, 0, "a");
  h.submit(3, 4, 1, 0, "b");
  h.submit(4, 4, 1, 1, "c");
  h.submit(5, 4, 1, 0, "c");
  EXPECT_EQ(h.scheduler.waiting().size(), 5u);
  SequenceIds order;
  for (int i = 0; i < 5; ++i) {
    const Step s = h.step();
    ASSERT_EQ(s.batch.sequences.size(), 1u);
    order.push_back(s.batch.sequences[0].sequence);
    EXPECT_EQ(finished(s.applied.actions, order.back())->reason, FinishReason::length);
  }
  // 4: the only priority 1. Then among priority 0: a and b never served, a arrived first (1); then b (3);
  // then c (5: served before a's last admission); then a again (2).
  EXPECT_EQ(order, (SequenceIds{4, 1, 3, 5, 2}));
  EXPECT_TRUE(h.scheduler.empty());
}

// A conversation's next turn under a steady stream of stand-alone requests, each with a key never seen
// before (as the engine gives every stand-alone request a session of its own). Its key was admitted before
// (turn 1), which must not put it behind every new key: it waits only for the backlog that was there when
// it arrived. Here the backlog is 6 at 2 admissions a step (max_running 2, each request ends in its first
// step), so its turn comes within 6 / 2 + 1 = 4 steps; two new requests arrive every step, so the queue
// never drains and a policy that lets new keys go first never admits it.
TEST(Scheduler, ANextTurnWaitsOnlyForTheBacklogAheadOfItNotForEveryNewKey) {
  Harness h(SchedulerConfig{.max_running = 2});
  cache::SequenceId next = 1;
  const auto stand_alone = [&] {
    const cache::SequenceId id = next++;
    h.submit(id, 4, 1, 0, "request:" + std::to_string(id));
  };
  h.submit(next++, 4, 1, 0, "chat");  // turn 1: admitted and finished
  ASSERT_EQ(batch_ids(h.step().batch), (SequenceIds{1}));
  constexpr int kBacklog = 6;
  for (int i = 0; i < kBacklog; ++i) stand_alone();
  const cache::SequenceId turn_two = next++;
  h.submit(turn_two, 4, 1, 0, "chat");

  int steps = 0;
  bool admitted = false;
  while (!admitted && steps < 100) {
    stand_alone();
    stand_alone();
    const Step s = h.step();
    ++steps;
    const SequenceIds ids = batch_ids(s.batch);
    admitted = std::find(ids.begin(), ids.end(), turn_two) != ids.end();
  }
  ASSERT_TRUE(admitted) << "turn two starved behind " << steps << " steps of new keys";
  EXPECT_LE(steps, kBacklog / 2 + 1);
}

// The round-robin state is per live key: a key is forgotten with its last sequence, so a stream of
// stand-alone requests (a new key each) leaves nothing behind. Every per-sequence structure is back to 0.
TEST(Scheduler, EveryPerSequenceStructureIsEmptyOnceItsSequencesHaveEnded) {
  Harness h(SchedulerConfig{.max_running = 4});
  for (cache::SequenceId id = 1; id <= 1000; ++id) {
    h.submit(id, 4, 2, 0, "request:" + std::to_string(id));
    if (id % 8 == 0) {
      while (!h.scheduler.empty()) h.step();
    }
  }
  h.submit(1001, 4, 2, 0, "chat");
  h.submit(1002, 4, 2, 0, "chat");
  h.submit(1003, 4, 2, 0, "other");
  EXPECT_EQ(h.scheduler.bookkeeping().fairness_keys, 2u) << "one entry per live key";
  EXPECT_EQ(h.scheduler.bookkeeping().sequences, 3u);
  while (!h.scheduler.empty()) h.step();
  const SchedulerBookkeeping b = h.scheduler.bookkeeping();
  EXPECT_EQ(b.sequences, 0u);
  EXPECT_EQ(b.waiting, 0u);
  EXPECT_EQ(b.running, 0u);
  EXPECT_EQ(b.fairness_keys, 0u);
  EXPECT_EQ(b.step_plan, 0u);
}

TEST(Scheduler, TheWaitingQueueIsBoundedAndBadSubmitsAreRejected) {
  Harness h(SchedulerConfig{.max_waiting = 2, .context_length = 10});
  h.submit(1, 4, 5);
  h.submit(2, 4, 5);
  bool sink_called = false;
  SubmitSequence third = h.sequence(3, 4, 5);
  third.sink = [&](SequenceEvent) { sink_called = true; };
  const auto overloaded = h.scheduler.submit(std::move(third));
  ASSERT_TRUE(overloaded.has_value());
  EXPECT_EQ(std::get<SequenceRejected>(overloaded->event).code, proto::ErrorCode::overloaded);
  ASSERT_TRUE(overloaded->sink);
  (*overloaded->sink)(overloaded->event);
  EXPECT_TRUE(sink_called) << "the rejection goes to the submit's own sink";
  EXPECT_FALSE(h.scheduler.contains(3));

  const auto code_of = [&](SubmitSequence s) {
    const auto r = h.scheduler.submit(std::move(s));
    return r ? std::get<SequenceRejected>(r->event).code : proto::ErrorCode::internal;
  };
  EXPECT_EQ(code_of(h.sequence(1, 4, 5)), proto::ErrorCode::conflict);
  EXPECT_EQ(code_of(h.sequence(4, 0, 5)), proto::ErrorCode::invalid_request);
  EXPECT_EQ(code_of(h.sequence(4, 10, 5)), proto::ErrorCode::invalid_request) << "no room for a generated token";
  EXPECT_EQ(code_of(h.sequence(4, 4, 0)), proto::ErrorCode::invalid_request);

  // Admitted ones leave the waiting queue, which has room again.
  const StepPlan plan = h.scheduler.plan_step();
  EXPECT_TRUE(plan.planned);
  EXPECT_TRUE(h.scheduler.waiting().empty());
  h.submit(3, 4, 5);
}

// ---- Planning ----

TEST(Scheduler, PlansEveryDecodeFirstThenPrefillChunksUnderTheTokenBudget) {
  Harness h(SchedulerConfig{.max_batch_tokens = 16});
  h.submit(1, 6, 100);
  Step s = h.step();
  EXPECT_EQ(in_batch(s.batch, 1).tokens.size(), 6u);
  EXPECT_TRUE(in_batch(s.batch, 1).sample);

  h.submit(2, 40, 100, 3);  // a higher priority does not put its prefill before a decode
  s = h.step();
  ASSERT_EQ(s.plan.reserve.size(), 2u);
  EXPECT_FALSE(s.plan.reserve[0].new_sequence);
  EXPECT_EQ(s.plan.reserve[0].tokens, (std::vector<std::int32_t>{kToken}));
  EXPECT_TRUE(s.plan.reserve[1].new_sequence);
  EXPECT_EQ(s.plan.reserve[1].tokens.size(), 40u) << "a new sequence reserves its whole prompt at once";
  EXPECT_EQ(batch_ids(s.batch), (SequenceIds{1, 2}));
  EXPECT_EQ(in_batch(s.batch, 1).tokens.size(), 1u);
  EXPECT_EQ(in_batch(s.batch, 1).start, 6);
  EXPECT_EQ(in_batch(s.batch, 2).tokens.size(), 15u);
  EXPECT_FALSE(in_batch(s.batch, 2).sample);
  ASSERT_TRUE(in_batch(s.batch, 2).begin.has_value()) << "its first step starts it on the backend";
  EXPECT_EQ(in_batch(s.batch, 2).blocks, (std::vector<cache::BlockId>{20}));

  s = h.step();
  ASSERT_EQ(s.plan.reserve.size(), 1u) << "a later chunk reserves nothing";
  EXPECT_EQ(batch_ids(s.batch), (SequenceIds{1, 2}));
  EXPECT_EQ(in_batch(s.batch, 2).start, 15);
  EXPECT_EQ(in_batch(s.batch, 2).tokens.size(), 15u);

  s = h.step();
  EXPECT_EQ(in_batch(s.batch, 2).start, 30);
  EXPECT_EQ(in_batch(s.batch, 2).tokens.size(), 10u);
  EXPECT_TRUE(in_batch(s.batch, 2).sample) << "the last chunk samples";
  EXPECT_FALSE(in_batch(s.batch, 2).begin.has_value()) << "later steps carry no history";
  EXPECT_EQ(s.applied.prefill_tokens, 10u);
  EXPECT_EQ(tokens(s.applied.actions, 2), (std::vector<std::int32_t>{kToken}));

  s = h.step();
  EXPECT_EQ(batch_ids(s.batch), (SequenceIds{2, 1})) << "decodes in priority order";
  for (const auto& seq : s.batch.sequences) EXPECT_EQ(seq.tokens.size(), 1u);
}

TEST(Scheduler, AReusedPrefixIsNotComputedAndItsBudgetGoesToTheNextPrefill) {
  Harness h(SchedulerConfig{.max_batch_tokens = 16});
  h.submit(1, 12, 5);
  h.submit(2, 12, 5);
  const Step s = h.step([](cache::SequenceId) { return kToken; }, {{1, 8}});
  EXPECT_EQ(in_batch(s.batch, 1).start, 8);
  EXPECT_EQ(in_batch(s.batch, 1).tokens.size(), 4u);
  EXPECT_EQ(in_batch(s.batch, 2).tokens.size(), 12u) << "planned at 4, given the 8 the prefix left";
  EXPECT_TRUE(in_batch(s.batch, 2).sample);
  h.scheduler.cancel_all(FinishReason::cancelled, h.now);
  EXPECT_TRUE(h.scheduler.empty());
}

// ---- Preemption ----

TEST(Scheduler, AShortagePreemptsTheLowestPriorityMostRecentlyAdmittedWhichRecomputesItsTokens) {
  Harness h(SchedulerConfig{.max_running = 8});
  h.submit(1, 4, 10, 0, "user");
  h.submit(2, 4, 10, -1, "bg2");
  h.submit(3, 4, 10, -1, "bg");
  h.step();  // prefill + first token
  h.step();  // one decode each
  EXPECT_EQ(h.scheduler.running(), (SequenceIds{1, 2, 3}));

  const StepPlan plan = h.scheduler.plan_step();
  ASSERT_TRUE(plan.planned);
  const SchedulerActions actions = h.scheduler.shortage(3, h.now);
  EXPECT_FALSE(h.scheduler.step_out());
  EXPECT_TRUE(releases(actions, 3));
  EXPECT_FALSE(finished(actions, 3)) << "a preempted sequence is not ended";
  EXPECT_EQ(h.scheduler.running(), (SequenceIds{1, 2}));
  EXPECT_EQ(h.scheduler.waiting(), (std::deque<cache::SequenceId>{3}));
  EXPECT_EQ(h.scheduler.preemptions(), 1u);

  // Admissions wait until a sequence leaves, even for a waiting one of the same priority.
  h.submit(4, 4, 10, -1, "bg");
  Step s = h.step();
  EXPECT_EQ(batch_ids(s.batch), (SequenceIds{1, 2}));
  EXPECT_EQ(h.scheduler.waiting().size(), 2u);

  ASSERT_TRUE(finished(h.scheduler.cancel(2, FinishReason::cancelled, h.now), 2));
  s = h.step([](cache::SequenceId) { return kToken; }, {{3, 4}});
  ASSERT_EQ(batch_ids(s.batch), (SequenceIds{1, 3, 4})) << "3 is ahead of 4 in its class";
  const ReserveItem& again = s.plan.reserve[1];
  EXPECT_EQ(again.sequence, 3u);
  EXPECT_TRUE(again.new_sequence);
  EXPECT_EQ(again.tokens, (std::vector<std::int32_t>{3, 3, 3, 3, kToken, kToken})) << "prompt + generated";
  EXPECT_EQ(in_batch(s.batch, 3).start, 4);
  EXPECT_EQ(in_batch(s.batch, 3).tokens, (std::vector<std::int32_t>{kToken, kToken}));
  EXPECT_TRUE(in_batch(s.batch, 3).sample);
  const auto events_of_3 = events(s.applied.actions, 3);
  ASSERT_EQ(events_of_3.size(), 1u);
  EXPECT_EQ(std::get<SequenceToken>(events_of_3[0]).index, 2) << "the stream carries on where it was";

  const auto ended = finished(h.scheduler.cancel(3, FinishReason::cancelled, h.now), 3);
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->preemptions, 1);
  EXPECT_EQ(ended->prefilled_tokens, 4 + 1 + 2);
  EXPECT_EQ(ended->cached_tokens, 0) << "cached tokens count the first run only";
}

TEST(Scheduler, AHigherPriorityTakesThePlaceOfTheLowestRunningOneWhenFull) {
  Harness h(SchedulerConfig{.max_running = 2});
  h.submit(1, 4, 10);
  h.submit(2, 4, 10);
  h.step();
  h.submit(3, 4, 10);  // the same priority: waits for a place
  const Step s = h.step();
  EXPECT_TRUE(s.plan.actions.empty());
  EXPECT_EQ(batch_ids(s.batch), (SequenceIds{1, 2}));
  EXPECT_EQ(h.scheduler.waiting(), (std::deque<cache::SequenceId>{3}));

  h.submit(9, 4, 10, 5);
  const StepPlan plan = h.scheduler.plan_step();
  EXPECT_TRUE(releases(plan.actions, 2)) << "the most recently admitted among the lowest yields";
  EXPECT_EQ(h.scheduler.running(), (SequenceIds{1, 9}));
  EXPECT_EQ(h.scheduler.waiting(), (std::deque<cache::SequenceId>{2, 3})) << "the preempted one first";
  EXPECT_EQ(h.scheduler.preemptions(), 1u);
}

TEST(Scheduler, ASequenceAloneThatCannotFitFails) {
  Harness h;
  h.submit(1, 4, 10);
  ASSERT_TRUE(h.scheduler.plan_step().planned);
  const SchedulerActions actions = h.scheduler.shortage(5, h.now);
  const auto ended = finished(actions, 1);
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->reason, FinishReason::error);
  EXPECT_NE(ended->error.find("5 blocks short"), std::string::npos);
  EXPECT_FALSE(releases(actions, 1)) << "it held no blocks";
  EXPECT_TRUE(h.scheduler.empty());
}

// ---- Thermal policy ----

TEST(Scheduler, CriticalPausesPrioritiesBelowItsMinimumAndCapsTheBatch) {
  Harness h(SchedulerConfig{.max_running = 8});
  h.submit(1, 4, 100, -1);
  h.step();
  EXPECT_TRUE(h.scheduler.set_thermal(ThermalState::critical));
  EXPECT_FALSE(h.scheduler.set_thermal(ThermalState::critical));
  EXPECT_EQ(h.scheduler.policy().step_delay, 50ms);
  EXPECT_EQ(h.scheduler.paused_count(), 1u);
  EXPECT_EQ(h.scheduler.step_cap(), 2u);
  h.submit(2, 4, 100, -1);
  h.submit(3, 4, 100, 0);
  h.submit(4, 4, 100, 0);
  h.submit(5, 4, 100, 0);
  Step s = h.step();
  EXPECT_EQ(batch_ids(s.batch), (SequenceIds{3, 4}));
  EXPECT_EQ(h.scheduler.waiting(), (std::deque<cache::SequenceId>{2})) << "background work is not admitted";
  EXPECT_EQ(h.scheduler.running(), (SequenceIds{1, 3, 4, 5}));

  EXPECT_TRUE(h.scheduler.set_thermal(ThermalState::nominal));
  EXPECT_EQ(h.scheduler.paused_count(), 0u);
  s = h.step();
  EXPECT_EQ(batch_ids(s.batch), (SequenceIds{3, 4, 1, 5, 2}));
  EXPECT_EQ(tokens(s.applied.actions, 1).size(), 1u) << "the paused one resumes";
}

TEST(Scheduler, SeriousHalvesMaxRunningWhenItsTableHasNoCap) {
  Harness h(SchedulerConfig{.max_running = 8});
  EXPECT_EQ(h.scheduler.step_cap(), 8u);
  h.scheduler.set_thermal(ThermalState::fair);
  EXPECT_EQ(h.scheduler.step_cap(), 8u);
  h.scheduler.set_thermal(ThermalState::serious);
  EXPECT_EQ(h.scheduler.step_cap(), 4u);
  for (cache::SequenceId id = 1; id <= 6; ++id) h.submit(id, 4, 10);
  const Step s = h.step();
  EXPECT_EQ(batch_ids(s.batch), (SequenceIds{1, 2, 3, 4}));

  SchedulerConfig capped{.max_running = 8};
  capped.thermal.serious.max_running = 3;
  Harness g(capped);
  g.scheduler.set_thermal(ThermalState::serious);
  EXPECT_EQ(g.scheduler.step_cap(), 3u) << "the table's own cap wins";
}

// ---- What a step carries ----

// A cache manager that grows each sequence's table by a block every 4 tokens (block ids 100 * id + n), and
// that swaps a sequence's last block when told (a copy-on-write).
struct GrowingTables {
  std::map<cache::SequenceId, std::size_t> tokens;
  std::map<cache::SequenceId, std::vector<cache::BlockId>> tables;
  ReserveResult grant(const std::vector<ReserveItem>& items, std::size_t reused = 0) {
    ReserveResult result;
    result.reserved = true;
    for (const auto& item : items) {
      auto& table = tables[item.sequence];
      std::size_t& count = tokens[item.sequence];
      cache::Reservation r;
      if (item.new_sequence) {
        table.clear();
        count = 0;
        r.reused_tokens = reused;
      }
      count += item.tokens.size();
      while (table.size() * 4 < count) {
        table.push_back(static_cast<cache::BlockId>(100 * item.sequence + table.size()));
      }
      result.reservations.push_back(r);
      result.block_tables.push_back(table);
    }
    return result;
  }
};

TEST(Scheduler, StepsCarryOnlyWhatChangedSinceTheSequencesLastStep) {
  Harness h(SchedulerConfig{.context_length = 64});
  SubmitSequence submit = h.sequence(1, 6, 20);
  submit.params.temperature = 0.25;
  submit.params.stop = {"END"};
  h.submit(std::move(submit));
  GrowingTables cache;
  const auto run = [&](std::size_t reused = 0) {
    const StepPlan plan = h.scheduler.plan_step();
    compute::StepBatch batch = h.scheduler.start_step(cache.grant(plan.reserve, reused), h.now);
    h.scheduler.apply_step(Harness::answer(batch, [](cache::SequenceId) { return kToken; }), h.now);
    return batch;
  };

  // The first step starts the sequence: its parameters, the reused prefix (2 of its 6 prompt tokens), the
  // whole table.
  auto batch = run(2);
  ASSERT_EQ(batch.sequences.size(), 1u);
  const compute::StepSequence& first = batch.sequences[0];
  ASSERT_TRUE(first.begin.has_value());
  EXPECT_EQ(first.begin->params.temperature, 0.25);
  EXPECT_EQ(first.begin->params.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(first.begin->prefix, std::vector<std::int32_t>(2, prompt(1).front()));
  EXPECT_EQ(first.start, 2);
  EXPECT_EQ(first.table_from, 0);
  EXPECT_EQ(first.blocks, (std::vector<cache::BlockId>{100, 101}));

  // Decodes: nothing but the token, and a new block when the table grows (positions 8, 12, ...).
  std::vector<std::int64_t> grew_at;
  for (int i = 0; i < 8; ++i) {
    batch = run();
    const compute::StepSequence& step = batch.sequences.at(0);
    EXPECT_FALSE(step.begin.has_value());
    EXPECT_EQ(step.tokens.size(), 1u);
    if (step.blocks.empty()) {
      EXPECT_EQ(step.table_from, static_cast<std::int64_t>(cache.tables[1].size()));
    } else {
      EXPECT_EQ(step.blocks.size(), 1u);
      EXPECT_EQ(step.table_from + 1, static_cast<std::int64_t>(cache.tables[1].size()));
      grew_at.push_back(step.start);
    }
  }
  EXPECT_EQ(grew_at, (std::vector<std::int64_t>{8, 12}));

  // A copy-on-write swaps the last block: only that entry is sent.
  cache.tables[1].back() = 999;
  batch = run();
  EXPECT_EQ(batch.sequences.at(0).table_from, static_cast<std::int64_t>(cache.tables[1].size()) - 1);
  EXPECT_EQ(batch.sequences.at(0).blocks, (std::vector<cache::BlockId>{999}));

  // What one decode step carries is a few dozen bytes, whatever the sequence's length.
  batch = run();
  EXPECT_LT(compute::payload_bytes(batch), sizeof(compute::StepSequence) + 64);
}

TEST(Scheduler, APreemptedSequenceStartsAfreshOnTheBackendWhenItRunsAgain) {
  Harness h(SchedulerConfig{.context_length = 64});
  h.submit(1, 6, 20, 1);
  h.submit(2, 6, 20, 0);
  GrowingTables cache;
  const auto run = [&] {
    const StepPlan plan = h.scheduler.plan_step();
    compute::StepBatch batch = h.scheduler.start_step(cache.grant(plan.reserve), h.now);
    h.scheduler.apply_step(Harness::answer(batch, [](cache::SequenceId) { return kToken; }), h.now);
    return batch;
  };
  run();
  run();
  // A shortage: sequence 2 (lower priority) yields. When it runs again (once sequence 1 is done) it starts
  // afresh: its 6 prompt tokens and the 2 it had generated to recompute (nothing reused), its new table whole.
  const StepPlan plan = h.scheduler.plan_step();
  ASSERT_TRUE(plan.planned);
  h.scheduler.shortage(1, h.now);
  std::optional<compute::StepSequence> restarted;
  for (int i = 0; i < 40 && !restarted; ++i) {
    const compute::StepBatch batch = run();
    for (const auto& step : batch.sequences) {
      if (step.sequence == 2) restarted = step;
      else EXPECT_FALSE(step.begin.has_value()) << "sequence 1 was never preempted";
    }
  }
  ASSERT_TRUE(restarted.has_value());
  ASSERT_TRUE(restarted->begin.has_value());
  EXPECT_EQ(restarted->start, 0);
  EXPECT_TRUE(restarted->begin->prefix.empty());
  EXPECT_EQ(restarted->tokens.size(), 8u);
  EXPECT_EQ(restarted->table_from, 0);
  EXPECT_EQ(restarted->blocks, cache.tables[2]);
}

// ---- Finishing ----

TEST(Scheduler, EndIdsStopIdsMaxTokensAndTheContextEndASequence) {
  Harness h(SchedulerConfig{.context_length = 12});
  h.submit(1, 4, 50);                  // samples the end id
  SubmitSequence with_stop = h.sequence(2, 4, 50);
  with_stop.params.stop_token_ids = {9};
  h.submit(std::move(with_stop));      // 7, then the stop id 9
  h.submit(3, 4, 2);                   // max_tokens
  h.submit(4, 10, 50);                 // 10 + 2 fills the context
  std::map<cache::SequenceId, int> count;
  const auto token = [&](cache::SequenceId id) {
    const int n = count[id]++;
    if (id == 1) return kSchedulerEnd;
    if (id == 2 && n == 1) return 9;
    return kToken;
  };
  Step s = h.step(token);
  const auto one = finished(s.applied.actions, 1);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->reason, FinishReason::eos);
  EXPECT_EQ(one->completion_tokens, 1);
  EXPECT_TRUE(tokens(s.applied.actions, 1).empty()) << "the ending token is not streamed";
  // The step's K/V is committed before the sequence's blocks are released, and its sampler goes too.
  std::vector<std::size_t> kinds;
  for (const auto& a : s.applied.actions) {
    const bool of_one = std::visit([](const auto& x) {
      if constexpr (std::is_same_v<std::decay_t<decltype(x)>, SinkEvent>) {
        return std::visit([](const auto& e) { return e.sequence; }, x.event) == 1u;
      } else {
        return x.sequence == 1u;
      }
    }, a);
    if (of_one) kinds.push_back(a.index());
  }
  EXPECT_EQ(kinds, (std::vector<std::size_t>{1, 2, 3, 0}));  // Commit, Release, ReleaseSequence, the event
  EXPECT_EQ(std::get<Commit>(s.applied.actions.front()).computed_tokens, 4u);

  s = h.step(token);
  EXPECT_EQ(tokens(s.applied.actions, 2), std::vector<std::int32_t>{});
  ASSERT_TRUE(finished(s.applied.actions, 2));
  EXPECT_EQ(finished(s.applied.actions, 2)->reason, FinishReason::stop);
  EXPECT_EQ(finished(s.applied.actions, 2)->completion_tokens, 2);
  for (const cache::SequenceId id : {3u, 4u}) {
    const auto ended = finished(s.applied.actions, id);
    ASSERT_TRUE(ended) << id;
    EXPECT_EQ(ended->reason, FinishReason::length);
    EXPECT_EQ(ended->completion_tokens, 2);
    EXPECT_EQ(tokens(s.applied.actions, id).size(), 1u) << "the last token is streamed before the end";
  }
  // Timings from the injected clock: planned at t0, started at +5 ms, first token at +15, second at +30.
  const auto three = *finished(s.applied.actions, 3);
  EXPECT_DOUBLE_EQ(three.timings.queue_ms, 5.0);
  EXPECT_DOUBLE_EQ(three.timings.prefill_ms, 10.0);
  EXPECT_DOUBLE_EQ(three.timings.first_token_ms, 15.0);
  EXPECT_DOUBLE_EQ(three.timings.decode_ms, 15.0);
  EXPECT_TRUE(h.scheduler.empty());
}

TEST(Scheduler, AMissingSampledTokenOrAFailedStepEndsOnlyThatStepsSequences) {
  Harness h(SchedulerConfig{.max_running = 2});
  h.submit(1, 4, 10);
  h.submit(2, 4, 10);
  h.submit(3, 4, 10);
  StepPlan plan = h.scheduler.plan_step();
  const compute::StepBatch batch = h.scheduler.start_step(grant(plan.reserve), h.now);
  EXPECT_EQ(batch_ids(batch), (SequenceIds{1, 2}));
  const SchedulerActions actions = h.scheduler.fail_step("boom", h.now);
  for (const cache::SequenceId id : {1u, 2u}) {
    ASSERT_TRUE(finished(actions, id));
    EXPECT_EQ(finished(actions, id)->error, "boom");
    EXPECT_TRUE(releases(actions, id));
  }
  EXPECT_FALSE(h.scheduler.step_out());
  EXPECT_TRUE(h.scheduler.contains(3));

  plan = h.scheduler.plan_step();
  const compute::StepBatch next = h.scheduler.start_step(grant(plan.reserve), h.now);
  EXPECT_EQ(batch_ids(next), (SequenceIds{3}));
  const AppliedStep applied = h.scheduler.apply_step(StepDone{}, h.now);
  ASSERT_TRUE(finished(applied.actions, 3));
  EXPECT_EQ(finished(applied.actions, 3)->reason, FinishReason::error);
  EXPECT_EQ(finished(applied.actions, 3)->error, "the executor returned no token for the sequence");
}

TEST(Scheduler, ASampledTokenWithAnErrorEndsOnlyItsSequence) {
  // The backend could not go on with sequence 1 alone (its grammar allows nothing): 1 ends with the
  // backend's message and its token is neither kept nor streamed; 2, in the same step, goes on.
  Harness h(SchedulerConfig{.max_running = 2});
  h.submit(1, 4, 10);
  h.submit(2, 4, 10);
  StepPlan plan = h.scheduler.plan_step();
  const compute::StepBatch batch = h.scheduler.start_step(grant(plan.reserve), h.now);
  ASSERT_EQ(batch_ids(batch), (SequenceIds{1, 2}));
  StepDone done = Harness::answer(batch, [](cache::SequenceId) { return kToken; });
  done.sampled[0].error = "sequence 1: no token of the vocabulary can continue the text under the output constraint";
  const AppliedStep applied = h.scheduler.apply_step(std::move(done), h.now);
  const auto one = finished(applied.actions, 1);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->reason, FinishReason::error);
  EXPECT_EQ(one->error, "sequence 1: no token of the vocabulary can continue the text under the output constraint");
  EXPECT_EQ(one->completion_tokens, 0);
  EXPECT_TRUE(tokens(applied.actions, 1).empty());
  EXPECT_TRUE(releases(applied.actions, 1));
  EXPECT_FALSE(finished(applied.actions, 2));
  EXPECT_EQ(tokens(applied.actions, 2), std::vector<std::int32_t>{kToken});
  EXPECT_TRUE(h.scheduler.contains(2));
  EXPECT_FALSE(h.scheduler.contains(1));
  EXPECT_EQ(batch_ids(h.step().batch), (SequenceIds{2}));
}

// ---- Deadlines and cancellation ----

TEST(Scheduler, DeadlinesEndSequencesAtTheGivenTimeAndInTheStepOnlyWhenItIsBack) {
  Harness h;
  SubmitSequence timed = h.sequence(1, 4, 100);
  timed.deadline = t0 + 100ms;
  h.submit(std::move(timed));
  h.submit(2, 4, 100);
  EXPECT_TRUE(h.scheduler.expire_deadlines(t0 + 99ms).empty());

  const StepPlan plan = h.scheduler.plan_step();
  const compute::StepBatch batch = h.scheduler.start_step(grant(plan.reserve), t0 + 99ms);
  EXPECT_TRUE(h.scheduler.expire_deadlines(t0 + 100ms).empty()) << "in the step that is out: later";
  const AppliedStep applied = h.scheduler.apply_step(Harness::answer(batch, [](cache::SequenceId) { return kToken; }), t0 + 110ms);
  ASSERT_TRUE(finished(applied.actions, 1));
  EXPECT_EQ(finished(applied.actions, 1)->reason, FinishReason::timeout);
  EXPECT_TRUE(tokens(applied.actions, 1).empty()) << "its token is dropped";
  EXPECT_EQ(tokens(applied.actions, 2).size(), 1u);

  SubmitSequence waiting = h.sequence(3, 4, 100);
  waiting.deadline = t0 + 200ms;
  h.submit(std::move(waiting));
  const SchedulerActions expired = h.scheduler.expire_deadlines(t0 + 200ms);
  ASSERT_TRUE(finished(expired, 3));
  EXPECT_EQ(finished(expired, 3)->error, "the request passed its deadline");
  EXPECT_EQ(finished(expired, 3)->completion_tokens, 0);
  EXPECT_TRUE(h.scheduler.contains(2));
}

TEST(Scheduler, CancelEndsWaitingRunningAndInStepSequences) {
  Harness h(SchedulerConfig{.max_running = 1});
  h.submit(1, 4, 100);
  h.submit(2, 4, 100);  // waits behind 1
  h.step();
  EXPECT_TRUE(h.scheduler.cancel(77, FinishReason::cancelled, h.now).empty());

  SchedulerActions actions = h.scheduler.cancel(2, FinishReason::cancelled, h.now);
  ASSERT_TRUE(finished(actions, 2));
  EXPECT_EQ(finished(actions, 2)->reason, FinishReason::cancelled);
  EXPECT_FALSE(releases(actions, 2)) << "a waiting sequence holds no blocks";

  const StepPlan plan = h.scheduler.plan_step();
  const compute::StepBatch batch = h.scheduler.start_step(grant(plan.reserve), h.now);
  EXPECT_TRUE(h.scheduler.cancel(1, FinishReason::stop, h.now).empty()) << "in the step: when it is back";
  EXPECT_TRUE(h.scheduler.contains(1));
  const AppliedStep applied = h.scheduler.apply_step(Harness::answer(batch, [](cache::SequenceId) { return kToken; }), h.now);
  ASSERT_TRUE(finished(applied.actions, 1));
  EXPECT_EQ(finished(applied.actions, 1)->reason, FinishReason::stop);
  EXPECT_TRUE(tokens(applied.actions, 1).empty());
  EXPECT_TRUE(releases(applied.actions, 1));
  EXPECT_TRUE(h.scheduler.empty());
  EXPECT_FALSE(h.scheduler.plan_step().planned);
}

}  // namespace
}  // namespace loom::actors

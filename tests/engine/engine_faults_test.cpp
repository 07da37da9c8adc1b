// Faults at the engine's edges, through loom::Engine on a ScriptedBackend: a backend step that throws or
// answers without a token, a KV cache far too small for the load, a thermal sensor that throws or errors
// on every read, a consumer that never reads its stream, and a shutdown during a long load. Each must end cleanly: every request gets
// exactly one last event (done or error), nothing hangs, the KV blocks and every bookkeeping entry come
// back to idle, and the engine serves the next request.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/use_future.hpp>

#include "loom/compute/load_cancelled.hpp"
#include "scripted_engine.hpp"

namespace loom::actors {
namespace {

using namespace std::chrono_literals;
using namespace loom::actors::testing;
using proto::FinishReason;

constexpr auto kLong = 60s;

void load(Engine& engine) {
  const LoadResult loaded = engine.async_load(boost::asio::use_future).get();
  ASSERT_TRUE(loaded.loaded()) << loaded.error;
}

// The engine still serves: a new request runs to its length.
void expect_serves(Engine& engine, const std::string& id = "afterwards") {
  Outcomes outcomes;
  engine.generate(small_request(id, 4), outcomes.handler(id));
  ASSERT_TRUE(eventually([&] { return outcomes.over({id}); }, kLong));
  const Outcomes::Of of = outcomes.get(id);
  ASSERT_TRUE(of.done) << (of.error ? of.error->message : "");
  EXPECT_EQ(of.done->finish_reason, FinishReason::length);
  EXPECT_EQ(of.tokens, 4u);
}

std::vector<std::string> ids_of(const std::string& prefix, int n) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) ids.push_back(prefix + std::to_string(i));
  return ids;
}

// A step that throws mid-generation (some requests decoding, one prefilling): that step's requests end with
// reason error and the backend's message, the others carry on to their length.
TEST(EngineFaults, AStepThatThrowsEndsItsRequestsWithOneErrorDoneEachAndNothingLeaks) {
  REQUIRE_SHARED_FILE(compute::testing::shared_path(kScriptedModel));
  auto script = std::make_shared<BackendScript>();
  script->hold_steps();
  Engine engine(scripted_config(script));
  OpenGateOnExit open_on_exit{script};
  load(engine);
  const auto idle = stats_of(engine).bookkeeping_entries();

  Outcomes outcomes;
  const auto first = ids_of("early-", 3);
  for (const auto& id : first) engine.generate(small_request(id, 12), outcomes.handler(id));
  script->allow(2);  // step 0 prefills the three, step 1 decodes them
  ASSERT_TRUE(script->wait_for_steps(3, kLong));  // step 2 waits at the gate
  engine.generate(small_request("late", 12, "The little dog"), outcomes.handler("late"));
  script->fail_step(3);
  script->open();

  std::vector<std::string> all = first;
  all.push_back("late");
  ASSERT_TRUE(eventually([&] { return outcomes.over(all); }, kLong));
  EXPECT_TRUE(outcomes.not_exactly_one_last_event(all).empty());
  const auto steps = script->steps();
  ASSERT_GT(steps.size(), 3u);
  std::size_t failed = 0;
  for (const auto& id : all) {
    const Outcomes::Of of = outcomes.get(id);
    ASSERT_TRUE(of.done) << id;
    if (of.done->finish_reason == FinishReason::error) {
      ++failed;
      EXPECT_NE(of.done->error_message.value_or("").find("scripted backend failure"), std::string::npos);
    } else {
      EXPECT_EQ(of.done->finish_reason, FinishReason::length) << id;
      EXPECT_EQ(of.tokens, 12u) << id;
    }
  }
  EXPECT_EQ(failed, steps[3].sequences.size()) << "exactly the failed step's requests end with error";
  EXPECT_GE(failed, 1u);

  expect_bookkeeping_back_to(engine, idle);
  EXPECT_EQ(stats_of(engine).cache.cache.used_blocks, 0u);
  expect_backend_holds_nothing(*script);
  expect_serves(engine);
}

// A step that computes but answers no token for its sequences (a backend's wrong answer rather than an
// exception): those that wanted one end with error, and nothing is left behind.
TEST(EngineFaults, AStepAnsweredWithoutTokensEndsThoseRequestsWithAnErrorAndNothingLeaks) {
  REQUIRE_SHARED_FILE(compute::testing::shared_path(kScriptedModel));
  auto script = std::make_shared<BackendScript>();
  script->answer_without_tokens_at(2);
  Engine engine(scripted_config(script));
  load(engine);
  const auto idle = stats_of(engine).bookkeeping_entries();

  Outcomes outcomes;
  const auto ids = ids_of("r-", 3);
  for (const auto& id : ids) engine.generate(small_request(id, 8), outcomes.handler(id));
  ASSERT_TRUE(eventually([&] { return outcomes.over(ids); }, kLong));
  EXPECT_TRUE(outcomes.not_exactly_one_last_event(ids).empty());
  const auto steps = script->steps();
  ASSERT_GT(steps.size(), 2u);
  std::size_t errors = 0;
  for (const auto& id : ids) {
    const Outcomes::Of of = outcomes.get(id);
    ASSERT_TRUE(of.done) << id;
    if (of.done->finish_reason != FinishReason::error) continue;
    ++errors;
    EXPECT_NE(of.done->error_message.value_or("").find("no token"), std::string::npos) << *of.done->error_message;
  }
  EXPECT_EQ(errors, steps[2].sampled.size());
  EXPECT_GE(errors, 1u);
  expect_bookkeeping_back_to(engine, idle);
  EXPECT_EQ(stats_of(engine).cache.cache.used_blocks, 0u);
  expect_backend_holds_nothing(*script);
  expect_serves(engine);
}

// A backend whose release() throws something that is not a std::exception: the executor logs it and
// carries on (it used to escape the compute thread's job and end the process).
TEST(EngineFaults, ABackendReleaseThatThrowsANonStandardExceptionIsLoggedAndTheEngineCarriesOn) {
  REQUIRE_SHARED_FILE(compute::testing::shared_path(kScriptedModel));
  auto script = std::make_shared<BackendScript>();
  script->throw_on_release();
  Engine engine(scripted_config(script));
  load(engine);
  const auto idle = stats_of(engine).bookkeeping_entries();
  expect_serves(engine, "first");
  expect_serves(engine, "second");
  expect_bookkeeping_back_to(engine, idle);
  expect_backend_holds_nothing(*script);
}

// KV exhaustion: sixteen requests at once, each of which alone needs most of a 16-block cache. They are
// preempted and queued, and each still ends with its full length (or the context), never an error, a
// crash or a leaked block.
TEST(EngineFaults, AKvCacheFarTooSmallForTheLoadPreemptsAndQueuesAndLeaksNothing) {
  REQUIRE_SHARED_FILE(compute::testing::shared_path(kScriptedModel));
  auto script = std::make_shared<BackendScript>();
  script->keep_step_log(false);
  Engine engine(scripted_config(script, /*kv_tokens=*/64, /*block_size=*/4));  // context 64: the whole pool
  load(engine);
  const auto idle = stats_of(engine).bookkeeping_entries();

  Outcomes outcomes;
  const auto ids = ids_of("kv-", 16);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    // Two run into the context (prompt + 100 > 64): they end with length at the context.
    engine.generate(small_request(ids[i], i < 2 ? 100 : 48), outcomes.handler(ids[i]));
  }
  ASSERT_TRUE(eventually([&] { return outcomes.over(ids); }, kLong));
  EXPECT_TRUE(outcomes.not_exactly_one_last_event(ids).empty());
  for (const auto& id : ids) {
    const Outcomes::Of of = outcomes.get(id);
    ASSERT_TRUE(of.done) << id << ": " << (of.error ? of.error->message : "");
    EXPECT_EQ(of.done->finish_reason, FinishReason::length) << id << " " << of.done->error_message.value_or("");
    if (id != "kv-0" && id != "kv-1") {
      EXPECT_EQ(of.tokens, 48u) << id;
    }
  }
  const EngineStats stats = stats_of(engine);
  EXPECT_GE(stats.scheduler.preemptions, 1u) << "the cache was meant to run short";
  EXPECT_EQ(stats.cache.cache.used_blocks, 0u);
  expect_bookkeeping_back_to(engine, idle);
  expect_backend_holds_nothing(*script);
  expect_serves(engine);
}

// A sensor that throws on some reads and reports an error on the others: every reading is taken as
// nominal, the monitor keeps reading (its later good reading still reaches the scheduler), and the engine
// serves throughout.
class BrokenSensor final : public ThermalProvider {
 public:
  ThermalReading read() const override {
    const int n = reads_.fetch_add(1);
    if (n >= good_after_.load()) return ThermalState::serious;
    if (n % 2 == 0) throw std::runtime_error("sensor bus error");
    return ThermalReadError{"no zone readable"};
  }
  int reads() const { return reads_.load(); }
  void good_after(int n) { good_after_.store(n); }

 private:
  mutable std::atomic<int> reads_{0};
  std::atomic<int> good_after_{1 << 30};
};

TEST(EngineFaults, AThermalSensorThatThrowsOrErrorsOnEveryReadLeavesTheEngineServingAtNominal) {
  REQUIRE_SHARED_FILE(compute::testing::shared_path(kScriptedModel));
  auto script = std::make_shared<BackendScript>();
  auto sensor = std::make_shared<BrokenSensor>();
  auto config = scripted_config(script);
  config.thermal_provider = sensor;
  config.thermal.interval = 2ms;
  Engine engine(config);
  load(engine);

  ASSERT_TRUE(eventually([&] { return sensor->reads() >= 20; }, kLong)) << "the monitor keeps reading";
  EXPECT_EQ(stats_of(engine).thermal, ThermalState::nominal);
  expect_serves(engine, "while-broken");
  EXPECT_EQ(stats_of(engine).thermal, ThermalState::nominal);

  // After a run of errors and exceptions a good reading still gets through to the scheduler.
  sensor->good_after(sensor->reads() + 2);
  ASSERT_TRUE(eventually([&] { return stats_of(engine).thermal == ThermalState::serious; }, kLong));
  expect_serves(engine, "after-recovery");
}

// A consumer that never reads its stream: the engine does not wait for it. The request runs to its end,
// the engine forgets it (its bookkeeping is back to idle while the events still sit unread), and the
// stream holds exactly what the request produced: max_tokens token events and one done, a bound the
// request itself sets (max_tokens is at most the context). A stream dropped unread costs nothing either.
TEST(EngineFaults, AStreamNobodyReadsIsBoundedByItsRequestAndTheEngineMovesOn) {
  REQUIRE_SHARED_FILE(compute::testing::shared_path(kScriptedModel));
  auto script = std::make_shared<BackendScript>();
  Engine engine(scripted_config(script));
  load(engine);
  const auto idle = stats_of(engine).bookkeeping_entries();

  EventStream unread = engine.generate_stream(small_request("unread", 20));
  { EventStream dropped = engine.generate_stream(small_request("dropped", 20)); }
  expect_serves(engine, "meanwhile");
  ASSERT_TRUE(eventually([&] { return unread.finished(); }, kLong));
  expect_bookkeeping_back_to(engine, idle);
  EXPECT_EQ(stats_of(engine).requests_completed, 3u) << "the dropped stream's request ran to its end too";

  std::size_t tokens = 0, dones = 0, events = 0;
  while (auto event = unread.async_next(boost::asio::use_future).get()) {
    ++events;
    tokens += std::holds_alternative<proto::TokenEvent>(*event);
    dones += std::holds_alternative<proto::DoneEvent>(*event);
  }
  EXPECT_EQ(tokens, 20u);
  EXPECT_EQ(dones, 1u);
  EXPECT_EQ(events, 21u) << "max_tokens + 1 events, no more";
}

}  // namespace
}  // namespace loom::actors

namespace loom::actors {
namespace {

// A shutdown during a long load does not wait for the load: the executor's stop reaches the backend's
// factory through LoadOptions::stop. The factory here stands for a load of many GiB: it waits for that
// stop (at most 30 s) and throws LoadCancelled, as CpuBackend does between its stages.
TEST(EngineFaults, AShutdownDuringALongLoadCancelsTheLoadAndEndsPromptly) {
  struct Seen {
    std::atomic<bool> entered{false};
    std::atomic<bool> stopped{false};
  };
  auto seen = std::make_shared<Seen>();
  Engine::Config config = scripted_config(std::make_shared<BackendScript>());
  config.backend_factory = [seen](const compute::LoadOptions& options) -> std::unique_ptr<compute::Backend> {
    seen->entered = true;
    const auto give_up = std::chrono::steady_clock::now() + 30s;
    while (!options.stop.stop_requested() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(1ms);
    }
    seen->stopped = options.stop.stop_requested();
    throw compute::LoadCancelled("the test's load waited");
  };
  Engine engine(config);
  auto loaded = engine.async_load(boost::asio::use_future);
  ASSERT_TRUE(eventually([&] { return seen->entered.load(); }, kLong));

  const auto began = std::chrono::steady_clock::now();
  auto shut = engine.async_shutdown(ShutdownMode::cancel, boost::asio::use_future);
  ASSERT_EQ(shut.wait_for(5s), std::future_status::ready) << "the shutdown waited for the load";
  EXPECT_TRUE(shut.get());
  EXPECT_LT(std::chrono::steady_clock::now() - began, 5s);
  EXPECT_TRUE(seen->stopped);
  ASSERT_EQ(loaded.wait_for(5s), std::future_status::ready);
  try {  // the load's answer: its cancellation, or no reply at all if the executor went first
    EXPECT_FALSE(loaded.get().loaded());
  } catch (const boost::system::system_error&) {
  }
}

}  // namespace
}  // namespace loom::actors

// loom::Engine end to end on the shared aidreams260K model (F32 weights, well separated logits: its greedy
// tokens must equal the reference exactly): a greedy generation by callback and as a coroutine's stream,
// the refusals (before a load, unknown session, request id still running, after shutdown), sessions,
// cancel, stats, and shutdown in both modes. Tests that need a request to be in a step at a known moment
// hold the backend's steps at a gate (a wrapper around the real backend) rather than racing the clock.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <nlohmann/json.hpp>

#include "loom/actors/engine/thermal_provider.hpp"
#include "loom/cache/block_manager.hpp"
#include "loom/compute/cpu/cpu_backend.hpp"
#include "loom/engine.hpp"
#include "reference_greedy.hpp"
#include "test_files.hpp"
#include "test_support.hpp"

namespace loom {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using actors::error_code;
using compute::testing::shared_path;

constexpr auto kTimeout = 120s;  // generous: the suite also runs under sanitizers on a busy machine
constexpr std::int32_t kFacadeReferenceTokens = 64;

std::string model_path() { return shared_path("models/aidreams260K.gguf"); }

using testing::reference_greedy;

Engine::Config engine_config() {
  Engine::Config config;
  config.model.model_path = model_path();
  config.model.threads = 2;
  config.model.kv_tokens = 1024;  // room for several requests at once
  config.io_threads = 2;
  return config;
}

proto::GenerateRequest greedy_request(std::string id, std::optional<std::string> session = std::nullopt) {
  proto::GenerateRequest request;
  request.id = std::move(id);
  request.session_id = std::move(session);
  request.input = std::string("Once upon a time");
  request.params.temperature = 0.0;
  request.params.max_tokens = kFacadeReferenceTokens;
  request.params.ignore_eos = true;  // the reference ran its full length
  return request;
}

// One request's events, as its handler saw them. The handler runs on an engine strand; the test reads
// only after `ended` is ready, which orders the reads after the writes.
struct Events {
  std::vector<proto::ServerMessage> all;
  std::promise<void> ended;
  std::shared_future<void> ended_future = ended.get_future().share();

  bool wait() const { return ended_future.wait_for(kTimeout) == std::future_status::ready; }

  std::vector<std::int32_t> tokens() const {
    std::vector<std::int32_t> ids;
    for (const auto& e : all) {
      if (const auto* t = std::get_if<proto::TokenEvent>(&e)) ids.push_back(t->token);
    }
    return ids;
  }
  const proto::DoneEvent* done() const { return all.empty() ? nullptr : std::get_if<proto::DoneEvent>(&all.back()); }
  const proto::ErrorEvent* error() const { return all.empty() ? nullptr : std::get_if<proto::ErrorEvent>(&all.back()); }
  std::size_t last_events() const {
    std::size_t n = 0;
    for (const auto& e : all) n += std::holds_alternative<proto::DoneEvent>(e) || std::holds_alternative<proto::ErrorEvent>(e);
    return n;
  }
};

Engine::EventHandler handler_for(const std::shared_ptr<Events>& events) {
  return [events](proto::ServerMessage event) {
    const bool last = std::holds_alternative<proto::DoneEvent>(event) || std::holds_alternative<proto::ErrorEvent>(event);
    events->all.push_back(std::move(event));
    if (last && events->last_events() == 1) events->ended.set_value();
  };
}

std::shared_ptr<Events> generate_all(Engine& engine, proto::GenerateRequest request, Engine::GenerateOptions options = {}) {
  auto events = std::make_shared<Events>();
  engine.generate(std::move(request), handler_for(events), options);
  return events;
}

// Completions through plain callbacks into shared promises (a completion after a failed bounded wait must
// find its promise alive; and use_future's exceptions upset ThreadSanitizer, see test_support.hpp).
template <class T>
struct Outcome {
  error_code ec;
  T value{};
};

template <class T>
Outcome<T> await(std::future<Outcome<T>> future) {
  if (future.wait_for(kTimeout) != std::future_status::ready) throw std::runtime_error("no completion in time");
  return future.get();
}

Outcome<actors::LoadResult> load_model(Engine& engine) {
  auto promise = std::make_shared<std::promise<Outcome<actors::LoadResult>>>();
  engine.async_load([promise](error_code ec, actors::LoadResult r) { promise->set_value({ec, std::move(r)}); });
  return await(promise->get_future());
}

Outcome<proto::ServerMessage> open_session(Engine& engine, proto::SessionOpen open) {
  auto promise = std::make_shared<std::promise<Outcome<proto::ServerMessage>>>();
  engine.async_open_session(std::move(open),
                            [promise](error_code ec, proto::ServerMessage m) { promise->set_value({ec, std::move(m)}); });
  return await(promise->get_future());
}

Outcome<Engine::Stats> engine_stats(Engine& engine) {
  auto promise = std::make_shared<std::promise<Outcome<Engine::Stats>>>();
  engine.async_stats([promise](error_code ec, Engine::Stats s) { promise->set_value({ec, std::move(s)}); });
  return await(promise->get_future());
}

Outcome<bool> shutdown(Engine& engine, Engine::ShutdownMode mode) {
  auto promise = std::make_shared<std::promise<Outcome<bool>>>();
  engine.async_shutdown(mode, [promise](error_code ec, bool ok) { promise->set_value({ec, ok}); });
  return await(promise->get_future());
}

void expect_model_loaded(Engine& engine) {
  const auto loaded = load_model(engine);
  ASSERT_FALSE(loaded.ec) << loaded.ec.message();
  ASSERT_TRUE(loaded.value.loaded()) << loaded.value.error;
}

// Holds the backend's steps until opened; counts the steps that reached it.
class StepGate {
 public:
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    changed_.notify_all();
  }
  void pass() {
    std::unique_lock lock(mutex_);
    ++arrived_;
    changed_.notify_all();
    changed_.wait(lock, [this] { return open_; });
  }
  bool wait_for_step(std::chrono::steady_clock::duration limit = kTimeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [this] { return arrived_ > 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = false;
  int arrived_ = 0;
};

class GatedBackend final : public compute::Backend {
 public:
  GatedBackend(std::unique_ptr<compute::Backend> inner, std::shared_ptr<StepGate> gate)
      : inner_(std::move(inner)), gate_(std::move(gate)) {}
  compute::BackendInfo info() const override { return inner_->info(); }
  std::shared_ptr<const compute::Tokenizer> tokenizer() const override { return inner_->tokenizer(); }
  compute::StepResult run(const compute::StepBatch& batch) override {
    gate_->pass();
    return inner_->run(batch);
  }
  void release(cache::SequenceId sequence) override { inner_->release(sequence); }

 private:
  std::unique_ptr<compute::Backend> inner_;
  std::shared_ptr<StepGate> gate_;
};

Engine::Config gated_config(const std::shared_ptr<StepGate>& gate) {
  auto config = engine_config();
  config.backend_factory = [gate](const compute::LoadOptions& options) -> std::unique_ptr<compute::Backend> {
    return std::make_unique<GatedBackend>(compute::load_cpu_backend(options), gate);
  };
  return config;
}

// Opens the gate when the test leaves, before the engine (declared earlier) waits for its steps.
struct OpenOnExit {
  std::shared_ptr<StepGate> gate;
  bool armed = true;
  ~OpenOnExit() {
    if (armed) gate->open();
  }
};

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override { REQUIRE_SHARED_FILE(model_path()); }
};

TEST_F(EngineTest, AGreedyGenerationEqualsTheReference) {
  const auto reference = reference_greedy();
  Engine engine(engine_config());
  expect_model_loaded(engine);
  auto events = generate_all(engine, greedy_request("r1"));
  ASSERT_TRUE(events->wait());
  ASSERT_NE(events->done(), nullptr) << "the last event is not a done event";
  EXPECT_EQ(events->done()->finish_reason, proto::FinishReason::length);
  EXPECT_EQ(events->done()->request_id, "r1");
  EXPECT_EQ(events->tokens(), reference);
  EXPECT_EQ(events->done()->usage.completion_tokens, kFacadeReferenceTokens);
  EXPECT_EQ(events->last_events(), 1u);
  for (std::size_t i = 0; i + 1 < events->all.size(); ++i) {
    const auto& token = std::get<proto::TokenEvent>(events->all[i]);
    EXPECT_EQ(token.index, static_cast<std::int32_t>(i));
    EXPECT_EQ(token.request_id, "r1");
  }
}

TEST_F(EngineTest, AGreedyGenerationInASessionEqualsTheReferenceToo) {
  Engine engine(engine_config());
  expect_model_loaded(engine);
  const auto opened = open_session(engine, {});
  ASSERT_FALSE(opened.ec);
  ASSERT_TRUE(std::holds_alternative<proto::SessionOpened>(opened.value));
  const auto session_id = std::get<proto::SessionOpened>(opened.value).session_id;
  EXPECT_FALSE(session_id.empty());
  auto events = generate_all(engine, greedy_request("in-session", session_id));
  ASSERT_TRUE(events->wait());
  ASSERT_NE(events->done(), nullptr);
  EXPECT_EQ(events->tokens(), reference_greedy());
}

TEST_F(EngineTest, ACoroutineReadsTheSameGenerationAsAStream) {
  Engine engine(engine_config());
  expect_model_loaded(engine);
  auto outcome = asio::co_spawn(
      engine.get_executor(),
      [&engine]() -> asio::awaitable<std::vector<std::int32_t>> {
        // A named request: GCC 12 mishandles aggregate temporaries inside co_await expressions.
        auto request = greedy_request("streamed");
        auto stream = engine.generate_stream(std::move(request));
        std::vector<std::int32_t> tokens;
        bool done = false;
        while (auto event = co_await stream.async_next(asio::use_awaitable)) {
          if (const auto* token = std::get_if<proto::TokenEvent>(&*event)) tokens.push_back(token->token);
          if (const auto* last = std::get_if<proto::DoneEvent>(&*event)) done = last->finish_reason == proto::FinishReason::length;
        }
        if (!done) tokens.push_back(-1);  // marks a stream that ended without its done event
        co_return tokens;
      },
      asio::use_future);
  ASSERT_EQ(outcome.wait_for(kTimeout), std::future_status::ready);
  EXPECT_EQ(outcome.get(), reference_greedy());
}

TEST_F(EngineTest, TheAsyncCallsWorkAwaitedInACoroutine) {
  // use_awaitable starts an ask only when it is awaited, after the call that made it has returned: this
  // failed while the Engine asked through a temporary Address.
  Engine engine(engine_config());
  auto outcome = asio::co_spawn(
      engine.get_executor(),
      [&engine]() -> asio::awaitable<std::string> {
        const auto loaded = co_await engine.async_load(asio::use_awaitable);
        if (!loaded.loaded()) co_return "load: " + loaded.error;
        proto::SessionOpen open;
        open.session_id = "awaited";
        const auto opened = co_await engine.async_open_session(std::move(open), asio::use_awaitable);
        if (!std::holds_alternative<proto::SessionOpened>(opened)) co_return "open_session did not open";
        const auto s = co_await engine.async_stats(asio::use_awaitable);
        if (!s.model_loaded || s.sessions != 1) co_return "stats do not show the model and the session";
        const bool shut = co_await engine.async_shutdown(Engine::ShutdownMode::drain, asio::use_awaitable);
        co_return shut ? "ok" : "shutdown answered false";
      },
      asio::use_future);
  ASSERT_EQ(outcome.wait_for(kTimeout), std::future_status::ready);
  EXPECT_EQ(outcome.get(), "ok");
}

TEST_F(EngineTest, RequestsBeforeALoadAreRefusedAsUnavailable) {
  Engine engine(engine_config());
  auto events = generate_all(engine, greedy_request("early"));
  ASSERT_TRUE(events->wait());
  ASSERT_NE(events->error(), nullptr);
  EXPECT_EQ(events->error()->code, proto::ErrorCode::unavailable);
  EXPECT_EQ(events->error()->request_id, "early");
  EXPECT_EQ(events->all.size(), 1u);

  const auto opened = open_session(engine, {});
  ASSERT_FALSE(opened.ec);
  ASSERT_TRUE(std::holds_alternative<proto::ErrorEvent>(opened.value));
  EXPECT_EQ(std::get<proto::ErrorEvent>(opened.value).code, proto::ErrorCode::unavailable);

  const auto s = engine_stats(engine);
  ASSERT_FALSE(s.ec);
  EXPECT_FALSE(s.value.model_loaded);
  EXPECT_FALSE(s.value.executor.model_loaded);
  EXPECT_EQ(s.value.executor.loads, 0u);
  EXPECT_EQ(s.value.requests_refused, 1u);
  EXPECT_EQ(s.value.requests_accepted, 0u);
  EXPECT_EQ(s.value.cache.cache.total_blocks, 0u);
}

TEST_F(EngineTest, AMissingModelFileFailsTheLoadNamingThePath) {
  auto config = engine_config();
  config.model.model_path = shared_path("models/no-such-model.gguf");
  Engine engine(config);
  const auto loaded = load_model(engine);
  ASSERT_FALSE(loaded.ec);
  EXPECT_FALSE(loaded.value.loaded());
  EXPECT_NE(loaded.value.error.find("no-such-model.gguf"), std::string::npos) << loaded.value.error;
  auto events = generate_all(engine, greedy_request("after-failed-load"));
  ASSERT_TRUE(events->wait());
  ASSERT_NE(events->error(), nullptr);
  EXPECT_EQ(events->error()->code, proto::ErrorCode::unavailable);
}

TEST_F(EngineTest, ASecondLoadAnswersAnError) {
  Engine engine(engine_config());
  expect_model_loaded(engine);
  const auto again = load_model(engine);
  ASSERT_FALSE(again.ec);
  EXPECT_FALSE(again.value.loaded());
  EXPECT_NE(again.value.error.find("already"), std::string::npos) << again.value.error;
}

TEST_F(EngineTest, AnUnknownChatTemplateNameIsRefusedAtConstruction) {
  auto config = engine_config();
  config.chat_template = "no-such-template";
  EXPECT_THROW({ Engine engine(config); }, std::invalid_argument);
}

TEST_F(EngineTest, AnUnknownSessionIsNotFound) {
  Engine engine(engine_config());
  expect_model_loaded(engine);
  auto events = generate_all(engine, greedy_request("lost", "no-such-session"));
  ASSERT_TRUE(events->wait());
  ASSERT_NE(events->error(), nullptr);
  EXPECT_EQ(events->error()->code, proto::ErrorCode::not_found);
  EXPECT_EQ(events->error()->field, "session_id");
}

TEST_F(EngineTest, ARequestIdStillRunningIsAConflictAndTheFirstRequestIsUnharmed) {
  auto gate = std::make_shared<StepGate>();
  Engine engine(gated_config(gate));
  OpenOnExit open_on_exit{gate};
  expect_model_loaded(engine);
  auto first = generate_all(engine, greedy_request("same"));
  ASSERT_TRUE(gate->wait_for_step());
  auto second = generate_all(engine, greedy_request("same"));
  ASSERT_TRUE(second->wait());
  ASSERT_NE(second->error(), nullptr);
  EXPECT_EQ(second->error()->code, proto::ErrorCode::conflict);
  EXPECT_EQ(second->all.size(), 1u);
  gate->open();
  ASSERT_TRUE(first->wait());
  ASSERT_NE(first->done(), nullptr);
  EXPECT_EQ(first->tokens(), reference_greedy());

  // Once its done event has come, the id is free again.
  auto third = generate_all(engine, greedy_request("same"));
  ASSERT_TRUE(third->wait());
  ASSERT_NE(third->done(), nullptr);
  EXPECT_EQ(third->tokens(), reference_greedy());
}

TEST_F(EngineTest, CancellingARunningRequestEndsItAsCancelled) {
  auto gate = std::make_shared<StepGate>();
  Engine engine(gated_config(gate));
  OpenOnExit open_on_exit{gate};
  expect_model_loaded(engine);
  auto events = generate_all(engine, greedy_request("to-cancel"));
  ASSERT_TRUE(gate->wait_for_step());
  engine.cancel("to-cancel");
  // The cancel must have reached the scheduler before the step is let go; stats is a round trip through it.
  ASSERT_FALSE(engine_stats(engine).ec);
  gate->open();
  ASSERT_TRUE(events->wait());
  ASSERT_NE(events->done(), nullptr);
  EXPECT_EQ(events->done()->finish_reason, proto::FinishReason::cancelled);
  EXPECT_LT(events->tokens().size(), static_cast<std::size_t>(kFacadeReferenceTokens));
}

TEST_F(EngineTest, CancellingAnUnknownOrFinishedRequestIsHarmless) {
  Engine engine(engine_config());
  expect_model_loaded(engine);
  engine.cancel("never-existed");
  auto first = generate_all(engine, greedy_request("finished"));
  ASSERT_TRUE(first->wait());
  engine.cancel("finished");
  engine.cancel("finished");
  auto second = generate_all(engine, greedy_request("after-cancels"));
  ASSERT_TRUE(second->wait());
  ASSERT_NE(second->done(), nullptr);
  EXPECT_EQ(second->done()->finish_reason, proto::FinishReason::length);
  EXPECT_EQ(second->tokens(), reference_greedy());
  EXPECT_EQ(first->all.size(), static_cast<std::size_t>(kFacadeReferenceTokens + 1)) << "events after the done event";
}

TEST_F(EngineTest, SessionsOpenWithChosenOrGeneratedIdsAndCloseForGood) {
  auto config = engine_config();
  config.max_sessions = 2;
  Engine engine(config);
  expect_model_loaded(engine);

  proto::SessionOpen named;
  named.session_id = "chat";
  const auto chat = open_session(engine, named);
  ASSERT_TRUE(std::holds_alternative<proto::SessionOpened>(chat.value));
  EXPECT_EQ(std::get<proto::SessionOpened>(chat.value).session_id, "chat");

  const auto duplicate = open_session(engine, named);
  ASSERT_TRUE(std::holds_alternative<proto::ErrorEvent>(duplicate.value));
  EXPECT_EQ(std::get<proto::ErrorEvent>(duplicate.value).code, proto::ErrorCode::conflict);

  const auto generated = open_session(engine, {});
  ASSERT_TRUE(std::holds_alternative<proto::SessionOpened>(generated.value));
  const auto generated_id = std::get<proto::SessionOpened>(generated.value).session_id;
  EXPECT_NE(generated_id, "chat");

  const auto third = open_session(engine, {});
  ASSERT_TRUE(std::holds_alternative<proto::ErrorEvent>(third.value));
  EXPECT_EQ(std::get<proto::ErrorEvent>(third.value).code, proto::ErrorCode::overloaded);
  EXPECT_EQ(engine_stats(engine).value.sessions, 2u);

  engine.close_session("chat");
  engine.close_session("never-opened");  // ignored
  auto after_close = generate_all(engine, greedy_request("too-late", "chat"));
  ASSERT_TRUE(after_close->wait());
  ASSERT_NE(after_close->error(), nullptr);
  EXPECT_EQ(after_close->error()->code, proto::ErrorCode::not_found);
  EXPECT_EQ(engine_stats(engine).value.sessions, 1u);

  // Its id and its place are free again.
  const auto reopened = open_session(engine, named);
  ASSERT_TRUE(std::holds_alternative<proto::SessionOpened>(reopened.value));
}

TEST_F(EngineTest, StatsCountTheRequestsAndShowTheModelsCacheAndLatencies) {
  Engine engine(engine_config());
  expect_model_loaded(engine);
  auto events = generate_all(engine, greedy_request("counted"));
  ASSERT_TRUE(events->wait());
  auto refused = generate_all(engine, greedy_request("refused", "no-such-session"));
  ASSERT_TRUE(refused->wait());

  const auto s = engine_stats(engine);
  ASSERT_FALSE(s.ec);
  EXPECT_TRUE(s.value.model_loaded);
  EXPECT_TRUE(s.value.executor.model_loaded);
  EXPECT_EQ(s.value.requests_accepted, 1u);
  EXPECT_EQ(s.value.requests_completed, 1u);
  EXPECT_EQ(s.value.requests_refused, 1u);
  EXPECT_EQ(s.value.active_requests, 0u);
  EXPECT_GE(s.value.scheduler.generated_tokens, static_cast<std::uint64_t>(kFacadeReferenceTokens));
  EXPECT_EQ(s.value.scheduler.time_to_first_token.count(), 1u);
  EXPECT_GE(s.value.scheduler.inter_token_latency.count(), 1u);
  EXPECT_GT(s.value.cache.cache.total_blocks, 0u);
  EXPECT_EQ(s.value.cache.cache.used_blocks, 0u) << "a finished request's blocks are back";
  EXPECT_EQ(s.value.kv_usage(), 0.0);
  EXPECT_EQ(s.value.thermal, actors::ThermalState::nominal);
}

TEST_F(EngineTest, TheThermalMonitorsStateReachesTheScheduler) {
  auto config = engine_config();
  config.thermal_provider = std::make_shared<actors::FixedThermalProvider>(actors::ThermalState::serious);
  config.thermal.interval = 10ms;
  Engine engine(config);
  EXPECT_EQ(engine_stats(engine).value.thermal, actors::ThermalState::nominal) << "no monitor before a load";
  expect_model_loaded(engine);
  EXPECT_TRUE(actors::testing::eventually(
      [&] { return engine_stats(engine).value.thermal == actors::ThermalState::serious; }, 30s));
  // A user request (priority 0) still runs under serious, to the same tokens.
  auto events = generate_all(engine, greedy_request("warm"));
  ASSERT_TRUE(events->wait());
  ASSERT_NE(events->done(), nullptr);
  EXPECT_EQ(events->tokens(), reference_greedy());
  EXPECT_TRUE(shutdown(engine, Engine::ShutdownMode::drain).value);
}

TEST_F(EngineTest, ADrainingShutdownLetsRunningRequestsFinishThenRefusesNewOnes) {
  const auto reference = reference_greedy();
  Engine engine(engine_config());
  expect_model_loaded(engine);
  auto a = generate_all(engine, greedy_request("a"));
  auto b = generate_all(engine, greedy_request("b"));
  const auto shut = shutdown(engine, Engine::ShutdownMode::drain);
  ASSERT_FALSE(shut.ec) << shut.ec.message();
  EXPECT_TRUE(shut.value);
  for (const auto& events : {a, b}) {
    ASSERT_TRUE(events->wait());
    ASSERT_NE(events->done(), nullptr);
    EXPECT_EQ(events->done()->finish_reason, proto::FinishReason::length);
    EXPECT_EQ(events->tokens(), reference);
  }
  auto late = generate_all(engine, greedy_request("late"));
  ASSERT_TRUE(late->wait());
  ASSERT_NE(late->error(), nullptr);
  EXPECT_EQ(late->error()->code, proto::ErrorCode::unavailable);
  const auto again = shutdown(engine, Engine::ShutdownMode::cancel);
  EXPECT_TRUE(again.value) << "a second shutdown answers at once";
  EXPECT_FALSE(engine_stats(engine).value.model_loaded);
}

TEST_F(EngineTest, ACancellingShutdownEndsRunningRequestsAsCancelled) {
  auto gate = std::make_shared<StepGate>();
  Engine engine(gated_config(gate));
  OpenOnExit open_on_exit{gate};
  expect_model_loaded(engine);
  auto running = generate_all(engine, greedy_request("running"));
  ASSERT_TRUE(gate->wait_for_step());
  auto promise = std::make_shared<std::promise<Outcome<bool>>>();
  engine.async_shutdown(Engine::ShutdownMode::cancel,
                        [promise](error_code ec, bool ok) { promise->set_value({ec, ok}); });
  // Requests arriving once the shutdown has begun are refused.
  auto late = generate_all(engine, greedy_request("late"));
  ASSERT_TRUE(late->wait());
  ASSERT_NE(late->error(), nullptr);
  EXPECT_EQ(late->error()->code, proto::ErrorCode::unavailable);
  gate->open();
  const auto shut = await(promise->get_future());
  ASSERT_FALSE(shut.ec) << shut.ec.message();
  EXPECT_TRUE(shut.value);
  ASSERT_TRUE(running->wait());
  ASSERT_NE(running->done(), nullptr);
  EXPECT_EQ(running->done()->finish_reason, proto::FinishReason::cancelled);
}

TEST_F(EngineTest, AShutdownDuringALoadAnswersBoth) {
  // The backend factory (on the executor's compute thread) waits at a gate, so the shutdown surely comes
  // while the load is under way.
  auto gate = std::make_shared<StepGate>();
  auto config = engine_config();
  config.backend_factory = [gate](const compute::LoadOptions& options) {
    gate->pass();
    return compute::load_cpu_backend(options);
  };
  Engine engine(config);
  OpenOnExit open_on_exit{gate};
  auto loaded = std::make_shared<std::promise<Outcome<actors::LoadResult>>>();
  engine.async_load([loaded](error_code ec, actors::LoadResult r) { loaded->set_value({ec, std::move(r)}); });
  ASSERT_TRUE(gate->wait_for_step());
  auto shut = std::make_shared<std::promise<Outcome<bool>>>();
  engine.async_shutdown(Engine::ShutdownMode::cancel, [shut](error_code ec, bool ok) { shut->set_value({ec, ok}); });
  gate->open();
  const auto load_outcome = await(loaded->get_future());
  ASSERT_FALSE(load_outcome.ec);
  EXPECT_FALSE(load_outcome.value.loaded()) << "a load cut short by a shutdown must not report a model";
  const auto shut_outcome = await(shut->get_future());
  ASSERT_FALSE(shut_outcome.ec);
  EXPECT_TRUE(shut_outcome.value);
  EXPECT_FALSE(engine_stats(engine).value.model_loaded);
}

TEST_F(EngineTest, DestroyingAnEngineWithItsOwnPoolEndsWhatRunsWithADoneEvent) {
  auto gate = std::make_shared<StepGate>();
  std::shared_ptr<Events> events;
  std::thread opener;
  {
    Engine engine(gated_config(gate));
    OpenOnExit open_on_failure{gate};
    expect_model_loaded(engine);
    events = generate_all(engine, greedy_request("cut-short"));
    ASSERT_TRUE(gate->wait_for_step());
    open_on_failure.armed = false;
    // The destructor waits for the step in flight; let it go a little later, from outside. Whatever the
    // timing, the request must end with exactly one done event.
    opener = std::thread([gate] {
      std::this_thread::sleep_for(100ms);
      gate->open();
    });
  }
  opener.join();
  ASSERT_TRUE(events->wait());
  EXPECT_EQ(events->last_events(), 1u);
  EXPECT_NE(events->done(), nullptr);
}

TEST_F(EngineTest, RunsOnAnApplicationsExecutor) {
  actors::testing::RunningContext app(2);
  auto engine = std::make_unique<Engine>(app.executor(), engine_config());
  expect_model_loaded(*engine);
  auto events = generate_all(*engine, greedy_request("embedded"));
  ASSERT_TRUE(events->wait());
  ASSERT_NE(events->done(), nullptr);
  EXPECT_EQ(events->tokens(), reference_greedy());
  const auto shut = shutdown(*engine, Engine::ShutdownMode::drain);
  EXPECT_TRUE(shut.value);
  engine.reset();
  app.join();  // returns only once nothing of the engine is left on the application's io_context
}

}  // namespace
}  // namespace loom

namespace loom::engine_test_limits {
using namespace loom;

// A prompt longer than max_prompt_tokens is refused naming the field; one within it runs.
TEST(EngineLimits, APromptOverMaxPromptTokensIsRefusedNamingTheLimit) {
  auto config = engine_config();
  config.max_prompt_tokens = 24;
  Engine engine(config);
  expect_model_loaded(engine);
  auto long_request = greedy_request("long");
  long_request.input = std::string(
      "Once upon a time there was a little girl who liked to play in the sun with her friends every day");
  auto refused = generate_all(engine, long_request);
  ASSERT_TRUE(refused->wait());
  ASSERT_NE(refused->error(), nullptr);
  EXPECT_EQ(refused->error()->code, proto::ErrorCode::invalid_request);
  EXPECT_EQ(refused->error()->field, "prompt");
  EXPECT_NE(refused->error()->message.find("prompt limit"), std::string::npos) << refused->error()->message;
  auto short_request = greedy_request("short");
  short_request.params.max_tokens = 2;
  auto accepted = generate_all(engine, short_request);  // "Once upon a time": fewer than 24 tokens
  ASSERT_TRUE(accepted->wait());
  ASSERT_NE(accepted->done(), nullptr) << (accepted->error() ? accepted->error()->message : "");
  EXPECT_LE(accepted->done()->usage.prompt_tokens, 24);
}

TEST(EngineLimits, ANegativeMaxPromptTokensIsRefusedAtConstruction) {
  auto config = engine_config();
  config.max_prompt_tokens = -1;
  EXPECT_THROW({ Engine engine(config); }, std::invalid_argument);
}

// aidreams260K has no chat template: chat requests are unsupported, unless a fallback is configured.
TEST(EngineChatTemplate, AFallbackTemplateLetsAModelWithoutOneChat) {
  auto chat = greedy_request("chat");
  chat.input = std::vector<proto::ChatMessage>{{proto::ChatRole::user, "Hello"}};
  chat.params.max_tokens = 3;
  {
    Engine engine(engine_config());
    expect_model_loaded(engine);
    auto events = generate_all(engine, chat);
    ASSERT_TRUE(events->wait());
    ASSERT_NE(events->error(), nullptr);
    EXPECT_EQ(events->error()->code, proto::ErrorCode::unsupported);
  }
  auto config = engine_config();
  config.fallback_chat_template = "chatml";
  Engine engine(config);
  expect_model_loaded(engine);
  auto events = generate_all(engine, chat);
  ASSERT_TRUE(events->wait());
  ASSERT_NE(events->done(), nullptr);
  // "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n" is far more than the 2 tokens of "Hello".
  EXPECT_GT(events->done()->usage.prompt_tokens, 10);
  auto bad = engine_config();
  bad.fallback_chat_template = "nope";
  EXPECT_THROW({ Engine refused(bad); }, std::invalid_argument);
}

// Without kv_tokens, kv_contexts sizes the cache in whole model contexts.
TEST(EngineKvSizing, KvContextsSizeTheCacheInModelContexts) {
  auto config = engine_config();
  config.model.kv_tokens = 0;
  config.model.kv_contexts = 3;
  Engine engine(config);
  const auto loaded = load_model(engine);
  ASSERT_TRUE(loaded.value.loaded()) << loaded.value.error;
  const auto& info = loaded.value.info;
  EXPECT_GE(info.kv_blocks * info.kv_block_size, 3 * info.config.context_length);
  EXPECT_LT(info.kv_blocks * info.kv_block_size, 3 * info.config.context_length + info.kv_block_size);
}

// kv_auto sizes the cache from the memory it is told is available: a share of what the weights and the
// margin leave, capped by the sequences that can run at once, and the backend says how it chose.
TEST(EngineKvSizing, KvAutoTakesAShareOfTheMemoryLeftAfterTheWeights) {
  auto one_context = engine_config();
  one_context.model.kv_tokens = 0;
  Engine probe(one_context);
  const auto probed = load_model(probe);
  ASSERT_TRUE(probed.value.loaded()) << probed.value.error;
  const std::int64_t context = probed.value.info.config.context_length;
  const std::uint64_t context_bytes = probed.value.info.kv_bytes;  // one context, in whole blocks
  ASSERT_EQ(probed.value.info.kv_blocks * probed.value.info.kv_block_size % context, 0) << "a context in whole blocks";
  EXPECT_TRUE(probed.value.info.kv_sizing.empty()) << "only kv_auto says how it sized";

  const std::uint64_t weights = std::filesystem::file_size(model_path());
  const auto sized_with = [&](std::int64_t max_sequences) {
    auto config = engine_config();
    config.model.kv_tokens = 0;
    config.model.kv_auto = compute::KvAutoSize{.share = 0.5,
                                               .max_sequences = max_sequences,
                                               .max_bytes = 0,
                                               .margin_bytes = 1 << 20,
                                               .available_bytes = weights + (1 << 20) + 16 * context_bytes};
    Engine engine(config);
    auto loaded = load_model(engine);
    EXPECT_TRUE(loaded.value.loaded()) << loaded.value.error;
    return loaded.value.info;
  };
  const auto half = sized_with(0);  // half of 16 contexts
  EXPECT_EQ(half.kv_blocks * half.kv_block_size, 8 * context);
  EXPECT_NE(half.kv_sizing.find("50 % of"), std::string::npos) << half.kv_sizing;
  const auto capped = sized_with(3);
  EXPECT_EQ(capped.kv_blocks * capped.kv_block_size, 3 * context);
  EXPECT_NE(capped.kv_sizing.find("3 concurrent sequences"), std::string::npos) << capped.kv_sizing;
}

}  // namespace loom::engine_test_limits

// n > 1 through loom::Engine on the shared aidreams260K model: the prompt is computed once (the executor's
// own count of positions), the choices fork its KV blocks, and each choice equals a stand-alone request with
// seed + i, so the forks' copy-on-write kept them apart (a choice that wrote into a shared block would change
// the others' text). One request still gets exactly one done event, which tells every choice's end.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "loom/engine.hpp"
#include "test_files.hpp"

namespace loom {
namespace {

using namespace std::chrono_literals;
using actors::error_code;
using compute::testing::shared_path;

constexpr auto kChoicesTimeout = 120s;

std::string choices_model_path() { return shared_path("models/aidreams260K.gguf"); }

struct ChoicesEvents {
  std::vector<proto::ServerMessage> all;
  std::promise<void> ended;

  // The tokens of choice `choice`, in order.
  std::vector<std::int32_t> tokens(std::int32_t choice) const {
    std::vector<std::int32_t> ids;
    for (const auto& e : all) {
      if (const auto* t = std::get_if<proto::TokenEvent>(&e); t != nullptr && t->choice == choice) ids.push_back(t->token);
    }
    return ids;
  }
  std::size_t last_events() const {
    std::size_t n = 0;
    for (const auto& e : all) n += std::holds_alternative<proto::DoneEvent>(e) || std::holds_alternative<proto::ErrorEvent>(e);
    return n;
  }
};

// Runs one request to its end; the events as its handler saw them (read after the last one arrived).
std::shared_ptr<ChoicesEvents> run(Engine& engine, proto::GenerateRequest request) {
  auto events = std::make_shared<ChoicesEvents>();
  auto ended = events->ended.get_future();
  engine.generate(std::move(request), [events](proto::ServerMessage event) {
    const bool last = std::holds_alternative<proto::DoneEvent>(event) || std::holds_alternative<proto::ErrorEvent>(event);
    events->all.push_back(std::move(event));
    if (last && events->last_events() == 1) events->ended.set_value();
  });
  if (ended.wait_for(kChoicesTimeout) != std::future_status::ready) throw std::runtime_error("the request did not end");
  return events;
}

Engine::Stats stats(Engine& engine) {
  auto promise = std::make_shared<std::promise<Engine::Stats>>();
  engine.async_stats([promise](error_code, Engine::Stats s) { promise->set_value(std::move(s)); });
  auto future = promise->get_future();
  if (future.wait_for(kChoicesTimeout) != std::future_status::ready) throw std::runtime_error("no stats");
  return future.get();
}

class EngineChoices : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_SHARED_FILE(choices_model_path());
    Engine::Config config;
    config.model.model_path = choices_model_path();
    config.model.threads = 2;
    config.model.kv_tokens = 1024;
    config.io_threads = 2;
    engine_ = std::make_unique<Engine>(config);
    auto promise = std::make_shared<std::promise<actors::LoadResult>>();
    engine_->async_load([promise](error_code, actors::LoadResult r) { promise->set_value(std::move(r)); });
    auto loaded = promise->get_future();
    ASSERT_EQ(loaded.wait_for(kChoicesTimeout), std::future_status::ready);
    ASSERT_TRUE(loaded.get().loaded());
  }

  static proto::GenerateRequest request(std::string id, std::int32_t n, double temperature, std::uint64_t seed) {
    proto::GenerateRequest r;
    r.id = std::move(id);
    r.input = std::string("Once upon a time, in a small village by the sea,");
    r.n = n;
    r.params.temperature = temperature;
    r.params.seed = seed;
    r.params.max_tokens = kTokens;
    r.params.ignore_eos = true;
    return r;
  }

  static constexpr std::int32_t kTokens = 24;  // past a block boundary: every choice writes blocks of its own
  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineChoices, FourGreedyChoicesComputeThePromptOnceAndEqualTheSingleReply) {
  const auto before = stats(*engine_);
  const auto four = run(*engine_, request("four", 4, 0.0, 1));
  const auto after = stats(*engine_);
  const auto* done = std::get_if<proto::DoneEvent>(&four->all.back());
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(four->last_events(), 1u);
  ASSERT_EQ(done->choices.size(), 4u);
  const std::int32_t prompt = done->usage.prompt_tokens;
  EXPECT_EQ(done->usage.completion_tokens, 4 * kTokens) << "usage counts every choice's tokens, the prompt once";
  // Positions the model ran: the prompt once, then each choice's decodes (its last token is never computed).
  EXPECT_EQ(after.scheduler.prefill_tokens - before.scheduler.prefill_tokens, static_cast<std::uint64_t>(prompt));
  EXPECT_EQ(after.executor.tokens_computed - before.executor.tokens_computed,
            static_cast<std::uint64_t>(prompt + 4 * (kTokens - 1)));

  const auto one = run(*engine_, request("one", 1, 0.0, 1));
  ASSERT_TRUE(std::get<proto::DoneEvent>(one->all.back()).choices.empty()) << "n = 1 has no choices list";
  for (std::int32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(four->tokens(i), one->tokens(0)) << "choice " << i;
    EXPECT_EQ(done->choices[i].index, i);
    EXPECT_EQ(done->choices[i].finish_reason, proto::FinishReason::length);
    EXPECT_EQ(done->choices[i].completion_tokens, kTokens);
  }
  EXPECT_EQ(stats(*engine_).cache.cache.used_blocks, 0u) << "every choice's blocks are back";
}

TEST_F(EngineChoices, SeededChoicesEqualSeparateRequestsWithSeedPlusI) {
  constexpr std::uint64_t kSeed = 41;
  const auto four = run(*engine_, request("four", 4, 1.0, kSeed));
  ASSERT_TRUE(std::holds_alternative<proto::DoneEvent>(four->all.back()));
  std::vector<std::vector<std::int32_t>> distinct;
  for (std::int32_t i = 0; i < 4; ++i) {
    const auto single = run(*engine_, request("single-" + std::to_string(i), 1, 1.0, kSeed + i));
    ASSERT_EQ(single->tokens(0).size(), static_cast<std::size_t>(kTokens));
    EXPECT_EQ(four->tokens(i), single->tokens(0)) << "choice " << i << " differs from the request with seed + " << i;
    if (std::find(distinct.begin(), distinct.end(), single->tokens(0)) == distinct.end()) distinct.push_back(single->tokens(0));
  }
  EXPECT_GE(distinct.size(), 2u) << "the seeds gave the same text: the test would not see a shared block written";
}

TEST_F(EngineChoices, MoreThanOneChoiceInASessionIsRefused) {
  proto::SessionOpen open;
  open.session_id = "s";
  auto promise = std::make_shared<std::promise<void>>();
  engine_->async_open_session(open, [promise](error_code, proto::ServerMessage) { promise->set_value(); });
  ASSERT_EQ(promise->get_future().wait_for(kChoicesTimeout), std::future_status::ready);
  auto r = request("in-session", 2, 0.0, 1);
  r.session_id = "s";
  const auto refused = run(*engine_, r);
  const auto* error = std::get_if<proto::ErrorEvent>(&refused->all.back());
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, proto::ErrorCode::invalid_request);
  EXPECT_EQ(error->field, "n");
}

}  // namespace
}  // namespace loom

// Output constraints through the whole engine (loom::Engine on the shared aidreams260K model): requests
// whose params carry a grammar decode in the same batches as free ones, their text follows the grammar and
// they end with EOS (finish reason eos, "stop" on the wire) where the grammar completes; a request whose
// grammar cannot go on ends alone with an error, the others unharmed.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <limits>
#include <memory>
#include <regex>
#include <string>
#include <variant>
#include <vector>

#include "loom/compute/cpu/cpu_backend.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/engine.hpp"
#include "test_files.hpp"

namespace loom {
namespace {

using namespace std::chrono_literals;
using actors::error_code;
using compute::testing::shared_path;

constexpr auto kConstraintTimeout = 120s;

std::string constraint_model_path() { return shared_path("models/aidreams260K.gguf"); }

Engine::Config constraint_engine_config() {
  Engine::Config config;
  config.model.model_path = constraint_model_path();
  config.model.threads = 2;
  config.model.kv_tokens = 4096;  // room for every request of a test at once
  config.io_threads = 2;
  return config;
}

struct ConstraintEvents {
  std::vector<proto::ServerMessage> all;
  std::promise<void> ended;
  std::shared_future<void> ended_future = ended.get_future().share();

  bool wait() const { return ended_future.wait_for(kConstraintTimeout) == std::future_status::ready; }
  std::string text() const {
    std::string t;
    for (const auto& e : all) {
      if (const auto* token = std::get_if<proto::TokenEvent>(&e)) t += token->text;
    }
    return t;
  }
  const proto::DoneEvent* done() const { return all.empty() ? nullptr : std::get_if<proto::DoneEvent>(&all.back()); }
};

std::shared_ptr<ConstraintEvents> generate(Engine& engine, proto::GenerateRequest request) {
  auto events = std::make_shared<ConstraintEvents>();
  engine.generate(std::move(request), [events](proto::ServerMessage event) {
    const bool last = std::holds_alternative<proto::DoneEvent>(event) || std::holds_alternative<proto::ErrorEvent>(event);
    events->all.push_back(std::move(event));
    if (last) events->ended.set_value();
  });
  return events;
}

void expect_loaded(Engine& engine) {
  auto promise = std::make_shared<std::promise<std::pair<error_code, actors::LoadResult>>>();
  engine.async_load([promise](error_code ec, actors::LoadResult r) { promise->set_value({ec, std::move(r)}); });
  auto future = promise->get_future();
  ASSERT_EQ(future.wait_for(kConstraintTimeout), std::future_status::ready);
  const auto [ec, result] = future.get();
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(result.loaded()) << result.error;
}

proto::GenerateRequest request(std::string id, std::uint64_t seed) {
  proto::GenerateRequest r;
  r.id = std::move(id);
  r.input = std::string("Once upon a time");
  r.params.temperature = 1.0;
  r.params.top_k = 0;
  r.params.top_p = 1.0;
  r.params.min_p = 0.0;
  r.params.seed = seed;
  r.params.max_tokens = 48;
  return r;
}

proto::OutputConstraint gbnf(std::string text) {
  return proto::OutputConstraint{proto::OutputConstraint::Kind::grammar, std::move(text)};
}

class EngineConstraint : public ::testing::Test {
 protected:
  void SetUp() override { REQUIRE_SHARED_FILE(constraint_model_path()); }
};

TEST_F(EngineConstraint, ConstrainedRequestsFollowTheirGrammarAndStopWhereItCompletes) {
  // Two grammars and free requests, all at once so that they share steps.
  const std::string answer = "root ::= [0-9]{1,6} \" \" (\"yes\" | \"no\") \".\"\n";
  const std::string tag = "root ::= \"<\" [a-z]{2,10} \">\"\n";
  Engine engine(constraint_engine_config());
  expect_loaded(engine);
  std::vector<std::shared_ptr<ConstraintEvents>> answers, tags, free;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    auto a = request("answer" + std::to_string(seed), seed);
    a.params.constraint = gbnf(answer);
    answers.push_back(generate(engine, std::move(a)));
    auto t = request("tag" + std::to_string(seed), seed + 50);
    t.params.constraint = gbnf(tag);
    tags.push_back(generate(engine, std::move(t)));
    free.push_back(generate(engine, request("free" + std::to_string(seed), seed + 100)));
  }
  const auto check = [](const std::vector<std::shared_ptr<ConstraintEvents>>& all, const std::regex& shape) {
    for (const auto& events : all) {
      ASSERT_TRUE(events->wait());
      const proto::DoneEvent* done = events->done();
      ASSERT_NE(done, nullptr);
      EXPECT_EQ(done->finish_reason, proto::FinishReason::eos)
          << done->request_id << ": " << done->error_message.value_or("") << " text \"" << events->text() << "\"";
      EXPECT_TRUE(std::regex_match(events->text(), shape)) << done->request_id << ": \"" << events->text() << "\"";
    }
  };
  check(answers, std::regex(R"(^[0-9]{1,6} (yes|no)\.$)"));
  check(tags, std::regex("^<[a-z]{2,10}>$"));
  for (const auto& events : free) {
    ASSERT_TRUE(events->wait());
    ASSERT_NE(events->done(), nullptr);
    EXPECT_NE(events->done()->finish_reason, proto::FinishReason::error) << events->done()->error_message.value_or("");
  }
}

TEST_F(EngineConstraint, ARequestWhoseGrammarCannotGoOnEndsAloneWithAnError) {
  Engine engine(constraint_engine_config());
  expect_loaded(engine);
  // After each "x" the grammar owes one of two characters that every request bans (their lead byte): the
  // live stacks double with every x until the state's limit (see constrained_decoding_test).
  auto failing = request("failing", 3);
  failing.params.constraint = gbnf("root ::= \"x\" r\nr ::= \"x\" r \"\\U0001F600\" | \"x\" r \"\\U0001F601\" | \"\\U0001F602\"\n");
  const auto tokenizer = compute::CpuBackend::load(constraint_engine_config().model)->tokenizer();
  for (std::int32_t id = 0; id < tokenizer->vocabulary().size(); ++id) {
    if (tokenizer->piece(id).find('\xF0') != std::string::npos) {
      failing.params.logit_bias[id] = -100.0;  // the wire's strongest ban: enough against these logits
    }
  }
  auto fine = request("fine", 4);
  fine.params.constraint = gbnf("root ::= [0-9]{1,6} \".\"\n");
  auto failing_events = generate(engine, std::move(failing));
  auto fine_events = generate(engine, std::move(fine));
  auto free_events = generate(engine, request("free", 5));
  ASSERT_TRUE(failing_events->wait());
  ASSERT_NE(failing_events->done(), nullptr);
  EXPECT_EQ(failing_events->done()->finish_reason, proto::FinishReason::error);
  EXPECT_NE(failing_events->done()->error_message.value_or("").find("max_stacks"), std::string::npos)
      << failing_events->done()->error_message.value_or("");
  EXPECT_TRUE(std::regex_match(failing_events->text(), std::regex("^x+$"))) << failing_events->text();
  ASSERT_TRUE(fine_events->wait());
  ASSERT_NE(fine_events->done(), nullptr);
  EXPECT_EQ(fine_events->done()->finish_reason, proto::FinishReason::eos);
  EXPECT_TRUE(std::regex_match(fine_events->text(), std::regex("^[0-9]{1,6}\\.$"))) << fine_events->text();
  ASSERT_TRUE(free_events->wait());
  ASSERT_NE(free_events->done(), nullptr);
  EXPECT_NE(free_events->done()->finish_reason, proto::FinishReason::error);
}

}  // namespace
}  // namespace loom

// The engine's behaviours end to end through loom::Engine, on the shared models: batching does not change
// results, cancel, priority, thermal pausing, preemption under a tiny KV budget, fault injection, chunked
// prefill, and multi-turn prefix reuse. Steps and tokens are counted (through a backend wrapper that logs
// each step's batch), never timed; step delays only make a stream slow enough to act on while it runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/use_future.hpp>

#include "loom/cache/block_manager.hpp"
#include "loom/compute/cpu/cpu_backend.hpp"
#include "loom/engine.hpp"
#include "test_files.hpp"
#include "test_support.hpp"

namespace loom::actors {
namespace {

using namespace std::chrono_literals;
using compute::testing::ScratchDir;
using compute::testing::shared_path;
using proto::FinishReason;
using testing::eventually;

constexpr auto kScenarioLong = 300s;  // bounds for "eventually": generous, the suite also runs under sanitizers

// One request's events, gathered from the engine's callback (any thread; the lock is the test's).
struct Gathered {
  std::vector<std::int32_t> tokens;
  std::string text;
  std::optional<proto::DoneEvent> done;
  std::optional<proto::ErrorEvent> error;
  bool over() const { return done || error; }
};

// Every event of every request, in the order the callbacks ran.
class Recorder {
 public:
  Engine::EventHandler handler(const std::string& id, std::function<void(const proto::ServerMessage&)> also = {}) {
    return [this, id, also](proto::ServerMessage message) {
      {
        std::lock_guard lock(mutex_);
        Gathered& g = requests_[id];
        if (auto* t = std::get_if<proto::TokenEvent>(&message)) {
          g.tokens.push_back(t->token);
          g.text += t->text;
        } else if (auto* d = std::get_if<proto::DoneEvent>(&message)) {
          g.done = *d;
        } else if (auto* e = std::get_if<proto::ErrorEvent>(&message)) {
          g.error = *e;
        }
        log_.emplace_back(id, message.index());
      }
      if (also) also(message);
    };
  }
  Gathered get(const std::string& id) {
    std::lock_guard lock(mutex_);
    return requests_[id];
  }
  std::size_t token_count(const std::string& id) {
    std::lock_guard lock(mutex_);
    return requests_[id].tokens.size();
  }
  bool over(const std::vector<std::string>& ids) {
    std::lock_guard lock(mutex_);
    return std::all_of(ids.begin(), ids.end(), [&](const std::string& id) { return requests_[id].over(); });
  }
  // (request id, ServerMessage alternative index: 1 token, 2 done, 3 error) in arrival order.
  std::vector<std::pair<std::string, std::size_t>> log() {
    std::lock_guard lock(mutex_);
    return log_;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, Gathered> requests_;
  std::vector<std::pair<std::string, std::size_t>> log_;
};

struct StepRecord {
  std::vector<std::pair<cache::SequenceId, std::size_t>> sequences;  // (id, tokens)
  std::vector<bool> sampled;
};

// Wraps the real backend: logs each step's batch and can fail a chosen step.
struct BackendProbe {
  std::mutex mutex;
  std::vector<StepRecord> steps;
  int fail_at = -1;  // the run() call (0-based) that throws
  std::vector<StepRecord> snapshot() {
    std::lock_guard lock(mutex);
    return steps;
  }
};

class ScenarioProbedBackend final : public compute::Backend {
 public:
  ScenarioProbedBackend(std::unique_ptr<compute::Backend> inner, std::shared_ptr<BackendProbe> probe)
      : inner_(std::move(inner)), probe_(std::move(probe)) {}
  compute::BackendInfo info() const override { return inner_->info(); }
  std::shared_ptr<const compute::Tokenizer> tokenizer() const override { return inner_->tokenizer(); }
  void release(cache::SequenceId id) override { inner_->release(id); }
  compute::StepResult run(const compute::StepBatch& batch) override {
    {
      std::lock_guard lock(probe_->mutex);
      StepRecord record;
      for (const auto& s : batch.sequences) {
        record.sequences.emplace_back(s.sequence, s.tokens.size());
        record.sampled.push_back(s.sample);
      }
      const int index = static_cast<int>(probe_->steps.size());
      probe_->steps.push_back(std::move(record));
      if (index == probe_->fail_at) throw std::runtime_error("injected backend failure at step " + std::to_string(index));
    }
    return inner_->run(batch);
  }

 private:
  std::unique_ptr<compute::Backend> inner_;
  std::shared_ptr<BackendProbe> probe_;
};

Engine::Config config_for(const std::string& model, std::shared_ptr<BackendProbe> probe = nullptr) {
  Engine::Config c;
  c.model.model_path = shared_path("models/" + model);
  c.model.threads = 2;
  c.model.kv.block_size = 16;
  c.io_threads = 2;
  if (probe) {
    c.backend_factory = [probe](const compute::LoadOptions& o) -> std::unique_ptr<compute::Backend> {
      return std::make_unique<ScenarioProbedBackend>(compute::load_cpu_backend(o), probe);
    };
  }
  return c;
}

void load_scenario_model(Engine& engine) {
  const LoadResult loaded = engine.async_load(boost::asio::use_future).get();
  ASSERT_TRUE(loaded.loaded()) << loaded.error;
}

proto::GenerateRequest greedy_request(const std::string& id, const std::string& prompt, std::int32_t max_tokens,
                                      std::int32_t priority = 0) {
  proto::GenerateRequest r;
  r.id = id;
  r.input = prompt;
  r.params.temperature = 0.0;
  r.params.max_tokens = max_tokens;
  r.priority = priority;
  return r;
}

EngineStats stats_of(Engine& engine) { return engine.async_stats(boost::asio::use_future).get(); }

const std::vector<std::string>& story_prompts() {
  static const std::vector<std::string> prompts = {
      "Once upon a time", "The little dog", "In the morning", "She looked at the sky", "A big red ball",
      "The cat was", "One day, a girl named Lily", "Tom and Sam", "The sun was shining", "He wanted to play",
      "There was a tree", "Mom said", "The bird sang", "A small boy", "They went to the park",
      "The fish swam", "It was a dark night", "The king", "Ben had a toy", "The flowers were",
      "Once there was a bunny", "The rain fell", "Anna liked to", "The big bear", "A friendly frog",
      "The car went", "Lucy found a", "The old man", "At the beach", "The moon", "A happy duck", "Tim ran"};
  return prompts;
}

TEST(EngineScenarios, ThirtyTwoConcurrentGreedyRequestsEachEqualTheSamePromptRunAlone) {
  const std::string model = "aidreams260K.gguf";
  REQUIRE_SHARED_FILE(shared_path("models/" + model));
  Engine engine(config_for(model));
  load_scenario_model(engine);
  Recorder alone;
  const auto& prompts = story_prompts();
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const std::string id = "alone-" + std::to_string(i);
    engine.generate(greedy_request(id, prompts[i], 24), alone.handler(id));
    ASSERT_TRUE(eventually([&] { return alone.over({id}); }, kScenarioLong)) << id;
  }
  Recorder together;
  std::vector<std::string> ids;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    ids.push_back("together-" + std::to_string(i));
    engine.generate(greedy_request(ids.back(), prompts[i], 24), together.handler(ids.back()));
  }
  ASSERT_TRUE(eventually([&] { return together.over(ids); }, kScenarioLong));
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const Gathered a = alone.get("alone-" + std::to_string(i));
    const Gathered t = together.get(ids[i]);
    ASSERT_TRUE(a.done && t.done) << prompts[i];
    EXPECT_EQ(t.tokens, a.tokens) << "prompt '" << prompts[i] << "'";
    EXPECT_EQ(t.text, a.text);
    EXPECT_EQ(t.done->finish_reason, a.done->finish_reason);
  }
  const EngineStats stats = stats_of(engine);
  EXPECT_GT(stats.scheduler.time_to_first_token.count(), 0u);
  EXPECT_EQ(stats.active_requests, 0u);
}

TEST(EngineScenarios, CancelEndsTheRequestWithinOneStepAndGivesItsBlocksBack) {
  const std::string model = "aidreams260K.gguf";
  REQUIRE_SHARED_FILE(shared_path("models/" + model));
  auto config = config_for(model);
  config.scheduler.thermal.nominal.step_delay = 20ms;  // hops between actors take far less than a step
  Engine engine(config);
  load_scenario_model(engine);
  Recorder recorder;
  std::atomic<int> tokens_at_cancel{-1};
  int seen = 0;  // only touched by the handler, which runs on one strand at a time
  engine.generate(greedy_request("long", "Once upon a time", 100), recorder.handler("long", [&](const proto::ServerMessage& m) {
    if (std::holds_alternative<proto::TokenEvent>(m) && ++seen == 3) {
      tokens_at_cancel = seen;
      engine.cancel("long");
    }
  }));
  ASSERT_TRUE(eventually([&] { return recorder.over({"long"}); }, kScenarioLong));
  const Gathered g = recorder.get("long");
  ASSERT_TRUE(g.done);
  EXPECT_EQ(g.done->finish_reason, FinishReason::cancelled);
  EXPECT_LE(static_cast<int>(g.tokens.size()), tokens_at_cancel.load() + 1) << "at most one step after the cancel";
  ASSERT_TRUE(eventually([&] { return stats_of(engine).cache.cache.used_blocks == 0; }, kScenarioLong))
      << "the cancelled sequence's blocks are back in the pool";

  engine.cancel("long");             // finished: harmless
  engine.cancel("no-such-request");  // unknown: harmless
  engine.generate(greedy_request("after", "Once upon a time", 5), recorder.handler("after"));
  ASSERT_TRUE(eventually([&] { return recorder.over({"after"}); }, kScenarioLong));
  EXPECT_EQ(recorder.get("after").done->finish_reason, FinishReason::length);
}

TEST(EngineScenarios, AHighPriorityRequestGetsItsFirstTokenBeforeAnyOfEightLowOnesFinishes) {
  const std::string model = "aidreams260K.gguf";
  REQUIRE_SHARED_FILE(shared_path("models/" + model));
  auto config = config_for(model);
  config.scheduler.thermal.nominal.step_delay = 5ms;
  config.model.kv_tokens = 2048;  // room for all nine: priority alone decides here, not a KV shortage
  Engine engine(config);
  load_scenario_model(engine);
  Recorder recorder;
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) {
    ids.push_back("low-" + std::to_string(i));
    auto low = greedy_request(ids.back(), story_prompts()[static_cast<std::size_t>(i)], 80, -3);
    low.params.ignore_eos = true;  // each runs its 80 tokens: none may end early by chance
    engine.generate(low, recorder.handler(ids.back()));
  }
  ASSERT_TRUE(eventually([&] {
    return std::all_of(ids.begin(), ids.end(), [&](const std::string& id) { return recorder.token_count(id) >= 1; });
  }, kScenarioLong)) << "the eight low-priority requests are decoding";
  engine.generate(greedy_request("high", "The little dog", 10, 5), recorder.handler("high"));
  ids.push_back("high");
  ASSERT_TRUE(eventually([&] { return recorder.over(ids); }, kScenarioLong));
  const auto log = recorder.log();
  const auto first_high = std::find_if(log.begin(), log.end(), [](const auto& e) { return e.first == "high" && e.second == 1; });
  const auto first_low_done = std::find_if(log.begin(), log.end(), [](const auto& e) { return e.first != "high" && e.second == 2; });
  ASSERT_NE(first_high, log.end());
  EXPECT_LT(first_high - log.begin(), first_low_done - log.begin());
}

TEST(EngineScenarios, CriticalPausesLowPrioritySessionsAndNominalResumesThemWithNothingLostOrRepeated) {
  const std::string model = "aidreams260K.gguf";
  REQUIRE_SHARED_FILE(shared_path("models/" + model));
  ScratchDir dir("thermal");
  const auto state_file = dir.path("state");
  const auto set_state = [&](const char* state) {
    std::ofstream(state_file, std::ios::trunc) << state << "\n";
  };
  set_state("nominal");
  auto config = config_for(model);
  config.thermal_provider = std::make_shared<FileThermalProvider>(state_file);
  config.thermal.interval = 10ms;
  config.scheduler.thermal.nominal.step_delay = 5ms;
  Engine engine(config);
  load_scenario_model(engine);

  Recorder unthrottled;
  engine.generate(greedy_request("reference", "Once upon a time", 100, -2), unthrottled.handler("reference"));
  ASSERT_TRUE(eventually([&] { return unthrottled.over({"reference"}); }, kScenarioLong));

  Recorder recorder;
  engine.generate(greedy_request("background", "Once upon a time", 100, -2), recorder.handler("background"));
  ASSERT_TRUE(eventually([&] { return recorder.token_count("background") >= 3; }, kScenarioLong));
  set_state("critical");
  ASSERT_TRUE(eventually([&] {
    const auto s = stats_of(engine);
    return s.thermal == ThermalState::critical && s.scheduler.paused == 1;
  }, kScenarioLong));
  // A user prompt (priority 0) still runs while critical; once it has tokens, the step that was out when
  // the state changed is surely back, and the background one must not move until nominal.
  engine.generate(greedy_request("user", "The little dog", 8, 0), recorder.handler("user"));
  ASSERT_TRUE(eventually([&] { return recorder.token_count("user") >= 1; }, kScenarioLong));
  const std::size_t paused_at = recorder.token_count("background");
  ASSERT_TRUE(eventually([&] { return recorder.over({"user"}); }, kScenarioLong));
  EXPECT_EQ(recorder.token_count("background"), paused_at) << "no tokens for low-priority work while critical";
  EXPECT_FALSE(recorder.over({"background"}));
  set_state("nominal");
  ASSERT_TRUE(eventually([&] { return recorder.over({"background"}); }, kScenarioLong));
  EXPECT_EQ(recorder.get("background").tokens, unthrottled.get("reference").tokens);
  EXPECT_EQ(recorder.get("background").text, unthrottled.get("reference").text);
}

TEST(EngineScenarios, AKvBudgetFarTooSmallForAllRequestsStillCompletesEachAsAlone) {
  const std::string model = "aidreams260K.gguf";
  REQUIRE_SHARED_FILE(shared_path("models/" + model));
  auto config = config_for(model);
  config.model.kv.block_size = 4;
  config.model.kv_tokens = 128;  // 32 blocks: one sequence's whole context, while 8 want ~90 tokens each
  Engine engine(config);
  load_scenario_model(engine);
  Recorder alone;
  for (int i = 0; i < 8; ++i) {
    const std::string id = "alone-" + std::to_string(i);
    engine.generate(greedy_request(id, story_prompts()[static_cast<std::size_t>(i)], 80), alone.handler(id));
    ASSERT_TRUE(eventually([&] { return alone.over({id}); }, kScenarioLong));
  }
  Recorder together;
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) {
    ids.push_back("together-" + std::to_string(i));
    engine.generate(greedy_request(ids.back(), story_prompts()[static_cast<std::size_t>(i)], 80), together.handler(ids.back()));
  }
  ASSERT_TRUE(eventually([&] { return together.over(ids); }, kScenarioLong));
  for (int i = 0; i < 8; ++i) {
    const Gathered a = alone.get("alone-" + std::to_string(i));
    const Gathered t = together.get(ids[static_cast<std::size_t>(i)]);
    ASSERT_TRUE(t.done) << ids[static_cast<std::size_t>(i)];
    EXPECT_NE(t.done->finish_reason, FinishReason::error) << t.done->error_message.value_or("");
    EXPECT_EQ(t.tokens, a.tokens) << ids[static_cast<std::size_t>(i)];
  }
  const EngineStats stats = stats_of(engine);
  EXPECT_GE(stats.scheduler.preemptions, 1u) << "the budget was meant to force preemption";
  EXPECT_EQ(stats.cache.cache.used_blocks, 0u);
}

TEST(EngineScenarios, ABackendFailureOnOneStepFailsOnlyThatStepsRequests) {
  const std::string model = "aidreams260K.gguf";
  REQUIRE_SHARED_FILE(shared_path("models/" + model));
  auto probe = std::make_shared<BackendProbe>();
  probe->fail_at = 4;
  Engine engine(config_for(model, probe));
  load_scenario_model(engine);
  Recorder recorder;
  engine.generate(greedy_request("a", "Once upon a time", 20), recorder.handler("a"));
  engine.generate(greedy_request("b", "The little dog", 20), recorder.handler("b"));
  ASSERT_TRUE(eventually([&] { return recorder.over({"a", "b"}); }, kScenarioLong));
  const auto steps = probe->snapshot();
  ASSERT_GT(steps.size(), 4u);
  // Which requests were in the failed step: their done says error; the others completed.
  const StepRecord& failed = steps[4];
  int errors = 0;
  for (const char* id : {"a", "b"}) {
    const Gathered g = recorder.get(id);
    ASSERT_TRUE(g.done) << id;
    if (g.done->finish_reason == FinishReason::error) {
      ++errors;
      EXPECT_NE(g.done->error_message.value_or("").find("injected backend failure"), std::string::npos);
    }
  }
  EXPECT_EQ(errors, static_cast<int>(failed.sequences.size()));
  engine.generate(greedy_request("c", "Once upon a time", 20), recorder.handler("c"));
  ASSERT_TRUE(eventually([&] { return recorder.over({"c"}); }, kScenarioLong));
  EXPECT_EQ(recorder.get("c").done->finish_reason, FinishReason::length);
  EXPECT_EQ(recorder.get("c").tokens.size(), 20u);
}

// A prompt of 2000 tokens (800 in a sanitizer build, where Debug prefill is 20x slower: still two chunks and
// more) prefills in chunks of the 512-token step budget beside a decoding stream.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kLongPromptWords = 400;
#else
constexpr int kLongPromptWords = 1000;
#endif

TEST(EngineScenarios, WhileALongPromptPrefillsADecodingStreamGetsATokenAtEveryStep) {
  const std::string model = "synth11M-q8_0.gguf";
  REQUIRE_SHARED_FILE(shared_path("models/" + model));
  auto probe = std::make_shared<BackendProbe>();
  auto config = config_for(model, probe);
  config.model.kv_tokens = 4096;
  Engine engine(config);
  load_scenario_model(engine);
  Recorder recorder;
  proto::GenerateRequest stream = greedy_request("stream", "Hello", 200);
  stream.params.ignore_eos = true;
  engine.generate(stream, recorder.handler("stream"));
  ASSERT_TRUE(eventually([&] { return recorder.token_count("stream") >= 2; }, kScenarioLong));
  std::string long_text;
  for (int i = 0; i < kLongPromptWords; ++i) long_text += "one two ";
  proto::GenerateRequest long_prompt = greedy_request("long", long_text, 1);
  engine.generate(long_prompt, recorder.handler("long"));
  ASSERT_TRUE(eventually([&] { return recorder.over({"long"}); }, kScenarioLong));
  const Gathered l = recorder.get("long");
  ASSERT_TRUE(l.done) << (l.error ? l.error->message : "");
  ASSERT_GE(l.done->usage.prompt_tokens, 2 * kLongPromptWords);
  engine.cancel("stream");
  ASSERT_TRUE(eventually([&] { return recorder.over({"stream"}); }, kScenarioLong));

  // The long prompt is the sequence whose step carried more than one token; every such step also
  // carried the stream's single sampled token.
  const auto steps = probe->snapshot();
  std::size_t chunk_steps = 0, chunk_tokens = 0;
  for (const StepRecord& step : steps) {
    if (step.sequences.size() != 2) continue;
    const auto big = std::max_element(step.sequences.begin(), step.sequences.end(),
                                      [](const auto& a, const auto& b) { return a.second < b.second; });
    if (big->second <= 1) continue;
    ++chunk_steps;
    chunk_tokens += big->second;
    const std::size_t other = big == step.sequences.begin() ? 1 : 0;
    EXPECT_EQ(step.sequences[other].second, 1u) << "the stream decodes one token in a prefill step";
    EXPECT_TRUE(step.sampled[other]) << "the stream samples in every prefill step";
    EXPECT_LE(big->second + 1, 512u) << "the step stays within the 512-token budget";
  }
  EXPECT_EQ(chunk_tokens, static_cast<std::size_t>(l.done->usage.prompt_tokens - l.done->usage.cached_tokens));
  const auto least_steps = static_cast<std::size_t>((2 * kLongPromptWords + 510) / 511);
  EXPECT_GE(chunk_steps, least_steps) << "at most 511 prompt tokens a step";
}

TEST(EngineScenarios, TurnTwoOfASessionPrefillsOnlyItsNewTokens) {
  const std::string model = "aidreams260K.gguf";
  REQUIRE_SHARED_FILE(shared_path("models/" + model));
  auto probe = std::make_shared<BackendProbe>();
  auto config = config_for(model, probe);
  config.chat_template = "chatml";  // the tiny model has none of its own
  config.model.kv.block_size = 4;
  Engine engine(config);
  load_scenario_model(engine);
  proto::SessionOpen open;
  open.session_id = "chat";
  // No system prompt, short messages: chatml's markers cost this vocabulary many tokens each, and both
  // turns must fit the model's 128-token context without dropping turn 1.
  const proto::ServerMessage opened = engine.async_open_session(open, boost::asio::use_future).get();
  ASSERT_TRUE(std::holds_alternative<proto::SessionOpened>(opened));

  const auto turn = [&](const std::string& id, const std::string& text) {
    proto::GenerateRequest r;
    r.id = id;
    r.session_id = "chat";
    r.input = std::vector<proto::ChatMessage>{{proto::ChatRole::user, text}};
    r.params.temperature = 0.0;
    r.params.max_tokens = 8;
    return r;
  };
  const auto computed = [&] {
    std::size_t n = 0;
    for (const StepRecord& s : probe->snapshot()) {
      for (const auto& [id, tokens] : s.sequences) n += tokens;
    }
    return n;
  };
  Recorder recorder;
  engine.generate(turn("t1", "Once upon a time"), recorder.handler("t1"));
  ASSERT_TRUE(eventually([&] { return recorder.over({"t1"}); }, kScenarioLong));
  const Gathered one = recorder.get("t1");
  ASSERT_TRUE(one.done);
  const std::size_t before = computed();
  engine.generate(turn("t2", "A dog"), recorder.handler("t2"));
  ASSERT_TRUE(eventually([&] { return recorder.over({"t2"}); }, kScenarioLong));
  const Gathered two = recorder.get("t2");
  ASSERT_TRUE(two.done);
  const std::size_t turn2_computed = computed() - before;
  const auto prompt1 = static_cast<std::size_t>(one.done->usage.prompt_tokens);
  const auto prompt2 = static_cast<std::size_t>(two.done->usage.prompt_tokens);
  const auto cached2 = static_cast<std::size_t>(two.done->usage.cached_tokens);
  // Turn 2's prompt repeats all of turn 1's; what the model computes for it (prompt positions, then one
  // per generated token after the first) is only the new part: the prompt minus what was cached, and the
  // cache covered turn 1's prompt at least (its whole blocks; block size 4 here).
  EXPECT_GE(cached2, prompt1 / 4 * 4);
  EXPECT_EQ(turn2_computed, prompt2 - cached2 + (two.done->usage.completion_tokens - 1));
  EXPECT_LE(prompt2 - cached2, prompt2 - prompt1 + 4 + static_cast<std::size_t>(one.done->usage.completion_tokens))
      << "turn 2 prefills its new message and turn 1's reply, not the whole conversation";
}

}  // namespace
}  // namespace loom::actors

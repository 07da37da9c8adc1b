// Embeddings through loom::Engine on the shared aidreams260K model: an embedding request and a generation
// share steps (a wrapper around the real backend sees steps that hold both), the generation's greedy tokens
// are still the reference's, the embedding is a unit vector of the model's width that equals the same input
// embedded alone, and the refusals name the input at fault (empty text, a prompt as long as the context, a
// token outside the vocabulary).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/compute/cpu/cpu_backend.hpp"
#include "loom/engine.hpp"
#include "reference_greedy.hpp"
#include "test_files.hpp"

namespace loom {
namespace {

using namespace std::chrono_literals;
using actors::error_code;
using compute::testing::shared_path;

constexpr auto kEmbeddingTimeout = 120s;
constexpr std::int32_t kReferenceTokens = 64;

std::string embedding_model_path() { return shared_path("models/aidreams260K.gguf"); }

using testing::reference_greedy;

// Holds the first step until released, and counts the steps that held an embedding and a generating
// sequence together.
struct StepWatch {
  std::promise<void> first_arrived;
  std::promise<void> release_promise;
  std::shared_future<void> release = release_promise.get_future().share();
  std::atomic<int> steps{0};
  std::atomic<int> shared_steps{0};
};

class WatchedBackend final : public compute::Backend {
 public:
  WatchedBackend(std::unique_ptr<compute::Backend> inner, std::shared_ptr<StepWatch> watch)
      : inner_(std::move(inner)), watch_(std::move(watch)) {}
  compute::BackendInfo info() const override { return inner_->info(); }
  std::shared_ptr<const compute::Tokenizer> tokenizer() const override { return inner_->tokenizer(); }
  compute::StepResult run(const compute::StepBatch& batch) override {
    if (watch_->steps++ == 0) {
      watch_->first_arrived.set_value();
      watch_->release.wait_for(kEmbeddingTimeout);
    }
    bool embeds = false, generates = false;
    for (const auto& s : batch.sequences) (s.embed ? embeds : generates) = true;
    if (embeds && generates) ++watch_->shared_steps;
    return inner_->run(batch);
  }
  void release(cache::SequenceId sequence) override { inner_->release(sequence); }

 private:
  std::unique_ptr<compute::Backend> inner_;
  std::shared_ptr<StepWatch> watch_;
};

Engine::Config embedding_engine_config(std::shared_ptr<StepWatch> watch = nullptr) {
  Engine::Config config;
  config.model.model_path = embedding_model_path();
  config.model.threads = 2;
  config.model.kv_tokens = 1024;
  config.model.max_batch_tokens = 16;  // an embedding of 100 tokens takes several steps
  config.scheduler.max_batch_tokens = 16;
  config.io_threads = 2;
  if (watch) {
    config.backend_factory = [watch](const compute::LoadOptions& options) -> std::unique_ptr<compute::Backend> {
      return std::make_unique<WatchedBackend>(compute::load_cpu_backend(options), watch);
    };
  }
  return config;
}

template <class T>
T await(std::future<T> future) {
  if (future.wait_for(kEmbeddingTimeout) != std::future_status::ready) throw std::runtime_error("no completion in time");
  return future.get();
}

void load(Engine& engine) {
  auto promise = std::make_shared<std::promise<actors::LoadResult>>();
  engine.async_load([promise](error_code, actors::LoadResult r) { promise->set_value(std::move(r)); });
  const auto result = await(promise->get_future());
  ASSERT_TRUE(result.loaded()) << result.error;
}

std::future<actors::EmbedResult> embed(Engine& engine, std::vector<actors::EmbedInput> inputs) {
  auto promise = std::make_shared<std::promise<actors::EmbedResult>>();
  actors::EmbedRequest request;
  request.inputs = std::move(inputs);
  engine.async_embed(std::move(request), [promise](error_code ec, actors::EmbedResult r) {
    if (ec) r.error = proto::ErrorEvent{{}, proto::ErrorCode::internal, "ask failed: " + ec.message(), {}};
    promise->set_value(std::move(r));
  });
  return promise->get_future();
}

std::vector<std::int32_t> long_input() {
  std::vector<std::int32_t> tokens;
  for (std::int32_t i = 0; i < 100; ++i) tokens.push_back(3 + (i * 37) % 500);
  return tokens;
}

TEST(EngineEmbedding, SharesStepsWithAGenerationWhoseTokensAreUnchanged) {
  REQUIRE_SHARED_FILE(embedding_model_path());
  const auto reference = reference_greedy();
  auto watch = std::make_shared<StepWatch>();
  Engine engine(embedding_engine_config(watch));
  load(engine);

  proto::GenerateRequest request;
  request.id = "gen";
  request.input = std::string("Once upon a time");
  request.params.temperature = 0.0;
  request.params.max_tokens = kReferenceTokens;
  request.params.ignore_eos = true;
  auto tokens = std::make_shared<std::vector<std::int32_t>>();
  auto ended = std::make_shared<std::promise<void>>();
  engine.generate(request, [tokens, ended](proto::ServerMessage event) {
    if (const auto* t = std::get_if<proto::TokenEvent>(&event)) tokens->push_back(t->token);
    if (!std::holds_alternative<proto::TokenEvent>(event)) ended->set_value();
  });
  // The generation's prefill is held at the backend until the embedding is queued too.
  ASSERT_EQ(watch->first_arrived.get_future().wait_for(kEmbeddingTimeout), std::future_status::ready);
  auto embedded = embed(engine, {long_input()});
  std::this_thread::sleep_for(50ms);  // the embedding reaches the scheduler's queue while the step is out
  watch->release_promise.set_value();

  const actors::EmbedResult result = await(std::move(embedded));
  ASSERT_EQ(ended->get_future().wait_for(kEmbeddingTimeout), std::future_status::ready);
  ASSERT_TRUE(result.ok()) << result.error->message;
  EXPECT_GT(watch->shared_steps.load(), 0) << "no step held the embedding and the generation together";
  EXPECT_EQ(*tokens, std::vector<std::int32_t>(reference.begin(), reference.begin() + kReferenceTokens));

  ASSERT_EQ(result.embeddings.size(), 1u);
  ASSERT_EQ(result.prompt_tokens, std::vector<std::int32_t>{100});
  const auto& vector = result.embeddings[0];
  ASSERT_EQ(vector.size(), 64u) << "the model's embedding length";
  double norm = 0.0;
  for (const float v : vector) norm += static_cast<double>(v) * v;
  EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-5);

  // Alone (other chunks, no generation beside it) it is the same vector.
  const actors::EmbedResult alone = await(embed(engine, {long_input()}));
  ASSERT_TRUE(alone.ok());
  ASSERT_EQ(alone.embeddings.size(), 1u);
  for (std::size_t i = 0; i < vector.size(); ++i) EXPECT_NEAR(alone.embeddings[0][i], vector[i], 1e-5) << i;
}

TEST(EngineEmbedding, SeveralInputsComeBackInOrder) {
  REQUIRE_SHARED_FILE(embedding_model_path());
  Engine engine(embedding_engine_config());
  load(engine);
  const actors::EmbedResult both = await(embed(engine, {std::string("a cat"), std::string("a dog on the moon")}));
  ASSERT_TRUE(both.ok()) << both.error->message;
  const actors::EmbedResult cat = await(embed(engine, {std::string("a cat")}));
  const actors::EmbedResult dog = await(embed(engine, {std::string("a dog on the moon")}));
  ASSERT_TRUE(cat.ok() && dog.ok());
  ASSERT_EQ(both.embeddings.size(), 2u);
  EXPECT_GT(both.prompt_tokens[1], both.prompt_tokens[0]);
  for (std::size_t i = 0; i < 64; ++i) {
    EXPECT_NEAR(both.embeddings[0][i], cat.embeddings[0][i], 1e-5);
    EXPECT_NEAR(both.embeddings[1][i], dog.embeddings[0][i], 1e-5);
  }
}

TEST(EngineEmbedding, RefusalsNameTheInput) {
  REQUIRE_SHARED_FILE(embedding_model_path());
  Engine engine(embedding_engine_config());
  load(engine);
  const auto expect_refused = [&](std::vector<actors::EmbedInput> inputs, const std::string& field) {
    const actors::EmbedResult result = await(embed(engine, std::move(inputs)));
    ASSERT_FALSE(result.ok()) << field;
    EXPECT_EQ(result.error->code, proto::ErrorCode::invalid_request) << result.error->message;
    EXPECT_EQ(result.error->field, field) << result.error->message;
    EXPECT_TRUE(result.embeddings.empty());
  };
  expect_refused({std::string("fine"), std::string()}, "inputs[1]");
  expect_refused({std::vector<std::int32_t>(128, 5)}, "inputs[0]");  // the context is 128: no room
  expect_refused({std::vector<std::int32_t>{1, 512}}, "inputs[0]");   // the vocabulary has 512 tokens
  expect_refused({}, "inputs");
  // The engine goes on: a good request after the refusals is answered.
  EXPECT_TRUE(await(embed(engine, {std::vector<std::int32_t>(127, 5)})).ok());
}

std::future<actors::EmbedResult> embed_with_id(Engine& engine, std::string id, std::vector<actors::EmbedInput> inputs) {
  auto promise = std::make_shared<std::promise<actors::EmbedResult>>();
  actors::EmbedRequest request;
  request.id = std::move(id);
  request.inputs = std::move(inputs);
  engine.async_embed(std::move(request), [promise](error_code ec, actors::EmbedResult r) {
    if (ec) r.error = proto::ErrorEvent{{}, proto::ErrorCode::internal, "ask failed: " + ec.message(), {}};
    promise->set_value(std::move(r));
  });
  return promise->get_future();
}

std::size_t embeddings_by_id(Engine& engine) {
  auto promise = std::make_shared<std::promise<std::size_t>>();
  engine.async_stats([promise](error_code, actors::EngineStats stats) { promise->set_value(stats.bookkeeping.embeddings); });
  return await(promise->get_future());
}

// An embedding request with an id is what Engine::cancel ends (a client that left): its inputs' sequences stop
// after a step or two instead of the dozens the request takes, the answer is an unavailable error saying so, the
// id is taken while it runs (a generation or an embedding reusing it is refused) and free once it is over.
TEST(EngineEmbedding, CancelEndsAnEmbeddingByItsIdAndFreesTheId) {
  REQUIRE_SHARED_FILE(embedding_model_path());
  auto watch = std::make_shared<StepWatch>();
  Engine engine(embedding_engine_config(watch));
  load(engine);
  const std::vector<actors::EmbedInput> inputs(6, long_input());  // 600 tokens at 16 a step: ~38 steps
  auto cancelled = embed_with_id(engine, "e1", inputs);
  ASSERT_EQ(watch->first_arrived.get_future().wait_for(kEmbeddingTimeout), std::future_status::ready);

  const actors::EmbedResult twin = await(embed_with_id(engine, "e1", {std::string("a cat")}));
  ASSERT_FALSE(twin.ok());
  EXPECT_EQ(twin.error->code, proto::ErrorCode::conflict) << twin.error->message;
  proto::GenerateRequest generate;
  generate.id = "e1";
  generate.input = std::string("Once");
  auto refused = std::make_shared<std::promise<proto::ServerMessage>>();
  engine.generate(generate, [refused](proto::ServerMessage event) { refused->set_value(std::move(event)); });
  const proto::ServerMessage answer = await(refused->get_future());
  ASSERT_TRUE(std::holds_alternative<proto::ErrorEvent>(answer));
  EXPECT_EQ(std::get<proto::ErrorEvent>(answer).code, proto::ErrorCode::conflict);

  engine.cancel("e1");
  std::this_thread::sleep_for(50ms);  // the cancel reaches the scheduler while the first step is out
  watch->release_promise.set_value();
  const actors::EmbedResult result = await(std::move(cancelled));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error->code, proto::ErrorCode::unavailable);
  EXPECT_NE(result.error->message.find("cancelled"), std::string::npos) << result.error->message;
  EXPECT_TRUE(result.embeddings.empty());
  EXPECT_LT(watch->steps.load(), 10) << "the cancelled embedding ran on";

  const auto deadline = std::chrono::steady_clock::now() + kEmbeddingTimeout;
  while (embeddings_by_id(engine) != 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(embeddings_by_id(engine), 0u) << "the engine still holds the ended embedding's id";
  const actors::EmbedResult again = await(embed_with_id(engine, "e1", {std::string("a cat")}));
  EXPECT_TRUE(again.ok()) << again.error->message;
}

}  // namespace
}  // namespace loom

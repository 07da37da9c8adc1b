// Generator: the single-sequence generation loop (sampling, streaming text, stop rules, cache reuse).
#include "loom/compute/generator.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "test_files.hpp"

namespace loom::compute {
namespace {

using testing::shared_path;

struct Aidreams {
  std::unique_ptr<LoadedModel> loaded;
  std::unique_ptr<Tokenizer> tokenizer;
  ThreadPool pool{1};
  std::unique_ptr<LlamaModel> model;

  Aidreams() {
    const std::string path = shared_path("models/aidreams260K.gguf");
    loaded = LoadedModel::open(path);
    tokenizer = std::make_unique<Tokenizer>(Vocabulary::from_gguf(*loaded->gguf()));
    model = std::make_unique<LlamaModel>(loaded->config(), loaded->weights(), pool, 64);
  }
};

nlohmann::json reference(const std::string& prompt) {
  std::ifstream in(shared_path("reference/aidreams260K." + prompt + ".json"));
  return nlohmann::json::parse(in);
}

GenerationSettings greedy(std::int32_t max_tokens) {
  GenerationSettings s;
  s.max_tokens = max_tokens;
  s.sampler.temperature = 0.0f;
  return s;
}

TEST(Generator, GreedyTokensAreTheReferenceGreedyContinuation) {
  REQUIRE_SHARED_FILE(shared_path("models/aidreams260K.gguf"));
  Aidreams m;
  Generator generator(*m.model, *m.tokenizer);
  for (const std::string prompt : {"once", "fox"}) {
    const auto ref = reference(prompt);
    const auto prompt_tokens = ref.at("prompt_tokens").get<std::vector<std::int32_t>>();
    const auto expected = ref.at("greedy").get<std::vector<std::int32_t>>();
    generator.reset();
    const auto result = generator.generate(prompt_tokens, greedy(static_cast<std::int32_t>(expected.size())));
    EXPECT_EQ(result.tokens, expected) << prompt;
    EXPECT_EQ(result.finish, FinishReason::length);
    // The streamed text is the detokenized tokens.
    EXPECT_EQ(result.text, m.tokenizer->decode(result.tokens)) << prompt;
  }
}

TEST(Generator, TextArrivesInPiecesThatJoinToTheResult) {
  REQUIRE_SHARED_FILE(shared_path("models/aidreams260K.gguf"));
  Aidreams m;
  Generator generator(*m.model, *m.tokenizer);
  const auto prompt = reference("once").at("prompt_tokens").get<std::vector<std::int32_t>>();
  std::string streamed;
  int calls = 0;
  const auto result = generator.generate(prompt, greedy(30), [&](std::string_view text) {
    streamed += text;
    ++calls;
    return true;
  });
  EXPECT_EQ(streamed, result.text);
  EXPECT_GT(calls, 5);
}

TEST(Generator, AFollowUpPromptReusesTheCachedPrefixAndGivesTheSameTokens) {
  REQUIRE_SHARED_FILE(shared_path("models/aidreams260K.gguf"));
  Aidreams m;
  const auto ref = reference("once");
  auto prompt = ref.at("prompt_tokens").get<std::vector<std::int32_t>>();
  const auto greedy_tokens = ref.at("greedy").get<std::vector<std::int32_t>>();
  Generator generator(*m.model, *m.tokenizer);
  const auto first = generator.generate(prompt, greedy(8));
  EXPECT_EQ(first.cached_tokens, 0);
  // The next prompt is the first plus its reply: everything fed before is reused.
  prompt.insert(prompt.end(), first.tokens.begin(), first.tokens.end());
  const auto second = generator.generate(prompt, greedy(8));
  EXPECT_EQ(second.cached_tokens, static_cast<std::int32_t>(prompt.size()) - 1);  // all but the last reply token, never fed
  const std::vector<std::int32_t> expected(greedy_tokens.begin() + 8, greedy_tokens.begin() + 16);
  EXPECT_EQ(second.tokens, expected);
  // A prompt that differs early shares only the common start.
  auto other = prompt;
  other[2] = other[2] == 100 ? 101 : 100;
  const auto third = generator.generate(other, greedy(2));
  EXPECT_EQ(third.cached_tokens, 2);
}

TEST(Generator, StopTokenIdsAndStopStringsEndGenerationWithReasonStop) {
  REQUIRE_SHARED_FILE(shared_path("models/aidreams260K.gguf"));
  Aidreams m;
  Generator generator(*m.model, *m.tokenizer);
  const auto ref = reference("once");
  const auto prompt = ref.at("prompt_tokens").get<std::vector<std::int32_t>>();
  const auto greedy_tokens = ref.at("greedy").get<std::vector<std::int32_t>>();

  auto by_token = greedy(64);
  by_token.stop_token_ids = {greedy_tokens[5]};
  generator.reset();
  const auto a = generator.generate(prompt, by_token);
  EXPECT_EQ(a.finish, FinishReason::stop);
  const std::vector<std::int32_t> first_six(greedy_tokens.begin(), greedy_tokens.begin() + 6);
  EXPECT_EQ(a.tokens, first_six);
  EXPECT_EQ(a.text, m.tokenizer->decode(std::span(greedy_tokens).first(5)));

  // A stop string spanning tokens: the text ends right before it, and nothing after it is shown.
  const std::string full = m.tokenizer->decode(greedy_tokens);
  const std::string stop = full.substr(20, 7);
  auto by_text = greedy(64);
  by_text.stop = {stop};
  std::string streamed;
  const auto b = generator.generate(prompt, by_text, [&](std::string_view t) {
    streamed += t;
    return true;
  });
  EXPECT_EQ(b.finish, FinishReason::stop);
  EXPECT_EQ(b.text, full.substr(0, full.find(stop)));
  EXPECT_EQ(streamed, b.text);
}

TEST(Generator, EndOfSequenceEndsWithReasonEosUnlessIgnored) {
  REQUIRE_SHARED_FILE(shared_path("models/aidreams260K.gguf"));
  Aidreams m;
  Generator generator(*m.model, *m.tokenizer);
  const auto prompt = reference("once").at("prompt_tokens").get<std::vector<std::int32_t>>();
  // Force EOS as the first token with a logit bias.
  auto settings = greedy(10);
  settings.sampler.logit_bias = {{m.tokenizer->vocabulary().eos, 1000.0f}};
  const auto ended = generator.generate(prompt, settings);
  EXPECT_EQ(ended.finish, FinishReason::eos);
  EXPECT_EQ(ended.tokens.size(), 1u);
  EXPECT_EQ(ended.text, "");
  settings.ignore_eos = true;
  const auto ignored = generator.generate(prompt, settings);
  EXPECT_EQ(ignored.finish, FinishReason::length);
  EXPECT_EQ(ignored.tokens.size(), 10u);
}

TEST(Generator, CancellingFromTheSinkOrTheFlagStopsAtOnce) {
  REQUIRE_SHARED_FILE(shared_path("models/aidreams260K.gguf"));
  Aidreams m;
  Generator generator(*m.model, *m.tokenizer);
  const auto prompt = reference("once").at("prompt_tokens").get<std::vector<std::int32_t>>();
  int calls = 0;
  const auto by_sink = generator.generate(prompt, greedy(50), [&](std::string_view) { return ++calls < 3; });
  EXPECT_EQ(by_sink.finish, FinishReason::cancelled);
  EXPECT_EQ(calls, 3);
  EXPECT_LT(by_sink.tokens.size(), 50u);

  std::atomic<bool> cancel{true};
  const auto by_flag = generator.generate(prompt, greedy(50), {}, &cancel);
  EXPECT_EQ(by_flag.finish, FinishReason::cancelled);
  EXPECT_TRUE(by_flag.tokens.empty());
}

TEST(Generator, ContextFullEndsWithReasonLengthAndBadPromptsAreRejected) {
  REQUIRE_SHARED_FILE(shared_path("models/aidreams260K.gguf"));
  Aidreams m;
  Generator generator(*m.model, *m.tokenizer, 16);
  const auto prompt = reference("once").at("prompt_tokens").get<std::vector<std::int32_t>>();  // 13 tokens
  const auto result = generator.generate(prompt, greedy(100));
  EXPECT_EQ(result.finish, FinishReason::length);
  // Positions 13..15 take the first three generated tokens; the fourth needs no position of its own.
  EXPECT_EQ(result.tokens.size(), 16 - prompt.size() + 1);

  EXPECT_THROW(generator.generate(std::vector<std::int32_t>{}, greedy(1)), std::invalid_argument);
  EXPECT_THROW(generator.generate(std::vector<std::int32_t>(16, 1), greedy(1)), std::invalid_argument);
  EXPECT_THROW(generator.generate(std::vector<std::int32_t>{1, 100000}, greedy(1)), std::invalid_argument);
}

}  // namespace
}  // namespace loom::compute

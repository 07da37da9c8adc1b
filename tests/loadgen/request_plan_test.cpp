// RequestPlan: a request's lengths and prompt are a function of the seed and its number; PromptScale.
#include "request_plan.hpp"

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace loom::loadgen {
namespace {

Options options_with(CountRange prompt, CountRange output, std::uint64_t seed = 1, Endpoint endpoint = Endpoint::completions) {
  Options options;
  options.prompt_tokens = prompt;
  options.max_tokens = output;
  options.seed = seed;
  options.endpoint = endpoint;
  return options;
}

std::size_t word_count(const std::string& text) {
  std::istringstream words(text);
  std::size_t count = 0;
  for (std::string word; words >> word;) ++count;
  return count;
}

TEST(PromptScale, WordsForATokenCount) {
  EXPECT_EQ(PromptScale{}.words_for(128), 128);
  EXPECT_EQ((PromptScale{1, 2, true}.words_for(41)), 20);
  EXPECT_EQ((PromptScale{3.5, 2.19, true}.words_for(40)), 17);  // (40 - 3.5) / 2.19 = 16.7
  EXPECT_EQ((PromptScale{10, 2, true}.words_for(4)), 1);        // never fewer than one word
}

TEST(RequestPlan, LengthsStayInTheirRangesAndReachBothEnds) {
  const Options options = options_with({10, 14}, {1, 3});
  const RequestPlan plan(options, PromptScales{});
  std::set<std::int64_t> prompts, outputs;
  for (std::uint64_t i = 0; i < 500; ++i) {
    const RequestSpec spec = plan.request(i);
    EXPECT_EQ(spec.index, i);
    prompts.insert(spec.prompt_tokens);
    outputs.insert(spec.max_tokens);
    EXPECT_EQ(spec.prompt_words, spec.prompt_tokens);  // one word per token, uncalibrated
    EXPECT_EQ(word_count(spec.prompt), static_cast<std::size_t>(spec.prompt_words));
  }
  EXPECT_EQ(prompts, (std::set<std::int64_t>{10, 11, 12, 13, 14}));
  EXPECT_EQ(outputs, (std::set<std::int64_t>{1, 2, 3}));
}

TEST(RequestPlan, TheSeedRepeatsEveryChoiceAndAnotherSeedChangesThem) {
  const Options options = options_with({5, 50}, {1, 100}, 42);
  const Options same = options_with({5, 50}, {1, 100}, 42);
  const Options other = options_with({5, 50}, {1, 100}, 43);
  const RequestPlan plan(options, PromptScales{}), again(same, PromptScales{}), different(other, PromptScales{});
  int differing = 0;
  for (std::uint64_t i = 0; i < 50; ++i) {
    const RequestSpec a = plan.request(i), b = again.request(i), c = different.request(i);
    EXPECT_EQ(a.prompt, b.prompt);
    EXPECT_EQ(a.max_tokens, b.max_tokens);
    EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
    if (a.prompt != c.prompt || a.max_tokens != c.max_tokens) ++differing;
  }
  EXPECT_GE(differing, 45);
}

TEST(RequestPlan, PromptsDifferFromTheirFirstWords) {
  // Distinct beginnings keep a prefix cache from serving one request's prompt to another.
  const Options options = options_with({64, 64}, {8, 8});
  const RequestPlan plan(options, PromptScales{});
  std::set<std::string> beginnings;
  for (std::uint64_t i = 0; i < 100; ++i) beginnings.insert(plan.request(i).prompt.substr(0, 20));
  EXPECT_GE(beginnings.size(), 99u);
  // The calibration probes use prompts of their own.
  EXPECT_NE(plan.probe(0, 64, 1, false).prompt, plan.request(0).prompt);
}

TEST(RequestPlan, ASharedPrefixOpensEveryPromptAndTheRestDiffers) {
  Options options = options_with({40, 60}, {8, 8});
  options.shared_prefix_tokens = 30;
  const RequestPlan plan(options, PromptScales{});
  std::set<std::string> shared, rests;
  for (std::uint64_t i = 0; i < 100; ++i) {
    const RequestSpec spec = plan.request(i);
    EXPECT_EQ(word_count(spec.prompt), static_cast<std::size_t>(spec.prompt_words)) << i;  // same length as without
    std::istringstream words(spec.prompt);
    std::string head, rest, word;
    for (int w = 0; w < 30 && words >> word; ++w) head += word + ' ';
    for (int w = 0; w < 10 && words >> word; ++w) rest += word + ' ';
    shared.insert(head);
    rests.insert(rest);
  }
  EXPECT_EQ(shared.size(), 1u);   // 30 words, the same in every request
  EXPECT_GE(rests.size(), 99u);   // then each request's own words
  // Without the option the beginnings differ (the test above), so the prefix is the option's doing.
  const RequestPlan plain(options_with({40, 60}, {8, 8}), PromptScales{});
  EXPECT_NE(plain.request(0).prompt.substr(0, 40), plain.request(1).prompt.substr(0, 40));
}

TEST(RequestPlan, CalibrationScalesTheWordCountPerKindOfPrompt) {
  // Raw prompts: 1 token of overhead (BOS), 2 per word; chat: 21 (the template), 2 per word.
  const Options options = options_with({41, 41}, {8, 8}, 1, Endpoint::both);
  const RequestPlan plan(options, PromptScales{{1, 2, true}, {21, 2, true}});
  const RequestSpec raw = plan.request(2);
  EXPECT_FALSE(raw.chat);
  EXPECT_EQ(raw.prompt_tokens, 41);
  EXPECT_EQ(raw.prompt_words, 20);
  EXPECT_EQ(word_count(raw.prompt), 20u);
  const RequestSpec chat = plan.request(3);
  EXPECT_TRUE(chat.chat);
  EXPECT_EQ(chat.prompt_words, 10);
  EXPECT_EQ(word_count(chat.prompt), 10u);
}

TEST(RequestPlan, BothEndpointsAlternate) {
  const Options both = options_with({4, 4}, {4, 4}, 1, Endpoint::both);
  const RequestPlan plan(both, PromptScales{});
  EXPECT_FALSE(plan.request(0).chat);
  EXPECT_TRUE(plan.request(1).chat);
  EXPECT_FALSE(plan.request(2).chat);
  const Options chat = options_with({4, 4}, {4, 4}, 1, Endpoint::chat);
  EXPECT_TRUE(RequestPlan(chat, PromptScales{}).request(0).chat);
}

}  // namespace
}  // namespace loom::loadgen

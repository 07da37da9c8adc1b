// Sampler: the draws follow the distribution (chi-square), each filter keeps exactly what its definition
// says (expected sets computed here by sorting everything, a different route from the partial selections),
// penalties and bias move logits as specified (seen through greedy picks on logits built so that the
// specified arithmetic and the plausible wrong ones pick different tokens), the random stream is the
// documented one, and bad configurations are refused by name.
#include "loom/compute/sampler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace loom::compute {
namespace {

constexpr float inf = std::numeric_limits<float>::infinity();

// Plain sampling from the softmax: every filter off, temperature 1.
proto::SamplingParams plain(std::uint64_t seed) {
  proto::SamplingParams config;
  config.temperature = 1.0f;
  config.top_k = 0;
  config.top_p = 1.0f;
  config.min_p = 0.0f;
  config.seed = seed;
  return config;
}

proto::SamplingParams greedy_config() {
  proto::SamplingParams config;
  config.temperature = 0.0f;
  return config;
}

std::vector<float> log_of(const std::vector<double>& probabilities) {
  std::vector<float> logits;
  for (const double p : probabilities) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

std::vector<int> histogram(Sampler& sampler, const std::vector<float>& logits, int draws) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++counts[static_cast<std::size_t>(sampler.sample(logits, {}))];
  return counts;
}

std::set<std::int32_t> seen(const std::vector<int>& counts) {
  std::set<std::int32_t> ids;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > 0) ids.insert(static_cast<std::int32_t>(i));
  }
  return ids;
}

// Pearson's statistic over the categories with expected probability > 0.
double chi_square(const std::vector<int>& counts, const std::vector<double>& expected, int draws) {
  double statistic = 0.0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] == 0.0) continue;
    const double e = expected[i] * draws;
    statistic += (counts[i] - e) * (counts[i] - e) / e;
  }
  return statistic;
}

std::vector<double> normalised(std::vector<double> weights) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  for (double& w : weights) w /= total;
  return weights;
}

// Chi-square critical values at p = 0.001 (standard tables) by degrees of freedom (categories - 1). A correct
// sampler exceeds one for 0.1% of seeds; the seeds are fixed, so each test is deterministic and a failure
// means a distribution that is off, not bad luck (100k draws make a 1-point error in a 10% probability
// several times the critical value).
constexpr double chi2_critical_df1 = 10.828;
constexpr double chi2_critical_df5 = 20.515;
constexpr int draws = 100'000;

TEST(Sampler, DrawsFollowTheSoftmax) {
  const std::vector<double> p{0.35, 0.25, 0.2, 0.1, 0.07, 0.03};
  Sampler sampler(plain(12345), static_cast<std::int32_t>(p.size()));
  const auto counts = histogram(sampler, log_of(p), draws);
  EXPECT_LT(chi_square(counts, p, draws), chi2_critical_df5);
}

TEST(Sampler, TemperatureSharpensTheDistribution) {
  // Logits log(p) divided by T = 0.5 give weights p^2.
  const std::vector<double> p{0.35, 0.25, 0.2, 0.1, 0.07, 0.03};
  proto::SamplingParams config = plain(777);
  config.temperature = 0.5f;
  Sampler sampler(config, static_cast<std::int32_t>(p.size()));
  const auto counts = histogram(sampler, log_of(p), draws);
  std::vector<double> squared;
  for (const double x : p) squared.push_back(x * x);
  const auto expected = normalised(squared);
  EXPECT_LT(chi_square(counts, expected, draws), chi2_critical_df5);
  EXPECT_GT(chi_square(counts, p, draws), 1000.0) << "the draws ignore the temperature";
}

TEST(Sampler, TopKKeepsTheKHighestAndBreaksTiesByLowerId) {
  // Distinct logits at shuffled ids: the three highest are ids 7, 2 and 5.
  const std::vector<float> logits{0.1f, 0.3f, 2.0f, 0.2f, 0.0f, 1.5f, 0.4f, 3.0f, -1.0f, 0.5f};
  proto::SamplingParams config = plain(1);
  config.top_k = 3;
  Sampler sampler(config, 10);
  EXPECT_EQ(seen(histogram(sampler, logits, 20'000)), (std::set<std::int32_t>{2, 5, 7}));

  // Four equal logits and room for two: the two lowest ids.
  config.top_k = 2;
  Sampler tied(config, 5);
  EXPECT_EQ(seen(histogram(tied, {0.0f, 1.0f, 1.0f, 1.0f, 1.0f}, 20'000)), (std::set<std::int32_t>{1, 2}));

  // The kept tokens share the probability as the softmax of their own logits.
  config.top_k = 2;
  Sampler shares(config, 4);
  const auto counts = histogram(shares, log_of({0.1, 0.4, 0.2, 0.3}), draws);
  EXPECT_LT(chi_square(counts, {0.0, 0.4 / 0.7, 0.0, 0.3 / 0.7}, draws), chi2_critical_df1);
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  // Probabilities 0.4, 0.3, 0.2, 0.1 at ids 2, 0, 3, 1: the prefixes sum to 0.4, 0.7, 0.9, 1.0.
  const auto logits = log_of({0.3, 0.1, 0.4, 0.2});
  const auto kept = [&](float top_p) {
    proto::SamplingParams config = plain(5);
    config.top_p = top_p;
    Sampler sampler(config, 4);
    return seen(histogram(sampler, logits, 20'000));
  };
  EXPECT_EQ(kept(0.35f), (std::set<std::int32_t>{2}));
  EXPECT_EQ(kept(0.65f), (std::set<std::int32_t>{2, 0}));
  EXPECT_EQ(kept(0.75f), (std::set<std::int32_t>{2, 0, 3}));
  EXPECT_EQ(kept(0.95f), (std::set<std::int32_t>{2, 0, 3, 1}));
}

TEST(Sampler, TopPWithoutTopKKeepsExactlyTheSetASortFinds) {
  // 150 likely tokens (logits 0, -0.01, ..., -1.49) scattered over 1000 ids, the rest at -5: the cut falls
  // among logits spread over many of the implementation's buckets. The expected set comes from sorting
  // everything.
  constexpr std::int32_t vocab = 1000;
  std::vector<float> logits(vocab, -5.0f);
  for (std::int32_t i = 0; i < 150; ++i) logits[static_cast<std::size_t>(i * 17 % vocab)] = -0.01f * i;
  constexpr float top_p = 0.6f;

  std::vector<std::int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  double total = 0.0;
  for (const float l : logits) total += std::exp(static_cast<double>(l));
  std::set<std::int32_t> expected;
  double cumulative = 0.0;
  for (const std::int32_t id : order) {
    expected.insert(id);
    cumulative += std::exp(static_cast<double>(logits[id]));
    if (cumulative >= top_p * total) break;
  }
  ASSERT_GT(expected.size(), 40u);
  ASSERT_LT(expected.size(), 140u);
  ASSERT_GT(cumulative - top_p * total, 1e-6) << "a knife-edge cut that rounding could move";

  proto::SamplingParams config = plain(99);
  config.top_p = top_p;
  Sampler sampler(config, vocab);
  EXPECT_EQ(seen(histogram(sampler, logits, 30'000)), expected);
}

TEST(Sampler, MinPKeepsTokensAtLeastMinPTimesTheMostLikely) {
  // Relative to the most likely (id 1): 0.21, 1, 0.5, 0.19, 0.05. min_p = 0.2 keeps ids 0, 1, 2.
  const auto logits = log_of({0.21, 1.0, 0.5, 0.19, 0.05});
  proto::SamplingParams config = plain(8);
  config.min_p = 0.2f;
  Sampler sampler(config, 5);
  EXPECT_EQ(seen(histogram(sampler, logits, 20'000)), (std::set<std::int32_t>{0, 1, 2}));
  config.min_p = 0.6f;
  Sampler strict(config, 5);
  EXPECT_EQ(seen(histogram(strict, logits, 20'000)), (std::set<std::int32_t>{1}));
}

TEST(Sampler, TopPMeasuresTheMassOfWhatTopKKept) {
  // 0.4, 0.3, 0.2, 0.1. Alone, top-p 0.55 needs two tokens (0.4 < 0.55 <= 0.7); after top-k 2 the first
  // holds 0.4 / 0.7 = 0.57 of what is left, which is enough alone.
  const auto logits = log_of({0.4, 0.3, 0.2, 0.1});
  proto::SamplingParams config = plain(3);
  config.top_p = 0.55f;
  Sampler without_top_k(config, 4);
  EXPECT_EQ(seen(histogram(without_top_k, logits, 20'000)), (std::set<std::int32_t>{0, 1}));
  config.top_k = 2;
  Sampler with_top_k(config, 4);
  EXPECT_EQ(seen(histogram(with_top_k, logits, 20'000)), (std::set<std::int32_t>{0}));
}

TEST(Sampler, TemperatureChangesTheSharesButNotTheKeptSet) {
  // Top-p 0.65 keeps 0.4 and 0.3. Were temperature 5 applied first, the flattened distribution
  // (0.4^0.2 : 0.3^0.2 : 0.2^0.2 : 0.1^0.2 = 0.28 : 0.27 : 0.25 : 0.20) would need three tokens.
  const std::vector<double> p{0.4, 0.3, 0.2, 0.1};
  proto::SamplingParams config = plain(4);
  config.top_p = 0.65f;
  config.temperature = 5.0f;
  Sampler sampler(config, 4);
  const auto counts = histogram(sampler, log_of(p), draws);
  EXPECT_EQ(seen(counts), (std::set<std::int32_t>{0, 1}));
  const auto expected = normalised({std::pow(0.4, 0.2), std::pow(0.3, 0.2), 0.0, 0.0});
  EXPECT_LT(chi_square(counts, expected, draws), chi2_critical_df1);
}

TEST(Sampler, GreedyPicksTheArgmaxLowestIdOnTiesAndSkipsNaN) {
  Sampler sampler(greedy_config(), 5);
  EXPECT_EQ(sampler.sample(std::vector<float>{0.5f, 2.0f, -1.0f, 1.0f, 1.9f}, {}), 1);
  EXPECT_EQ(sampler.sample(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f, 3.0f}, {}), 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(sampler.sample(std::vector<float>{nan, 1.0f, nan, 0.0f, -inf}, {}), 1);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  proto::SamplingParams config = greedy_config();
  config.repetition_penalty = 1.1f;
  const std::vector<std::int32_t> history{0};
  // 2.0 / 1.1 = 1.82 < 1.9.
  EXPECT_EQ(Sampler(config, 3).sample(std::vector<float>{2.0f, 1.9f, 0.5f}, history), 1);
  // -1.0 * 1.1 = -1.1 < -1.05 (dividing would have raised it to -0.91).
  EXPECT_EQ(Sampler(config, 3).sample(std::vector<float>{-1.0f, -1.05f, -3.0f}, history), 1);
  // 2.0 / 1.04 = 1.92 > 1.9: a divisor, not a subtraction of 0.04 * something larger.
  config.repetition_penalty = 1.04f;
  EXPECT_EQ(Sampler(config, 3).sample(std::vector<float>{2.0f, 1.9f, 0.5f}, history), 0);
  // Without the token in the history nothing changes.
  config.repetition_penalty = 1.1f;
  EXPECT_EQ(Sampler(config, 3).sample(std::vector<float>{2.0f, 1.9f, 0.5f}, std::vector<std::int32_t>{2}), 0);
}

TEST(Sampler, FrequencyPenaltyCountsOccurrencesPresencePenaltyDoesNot) {
  const std::vector<float> logits{3.0f, 2.0f};
  const std::vector<std::int32_t> history{0, 0, 0};
  proto::SamplingParams config = greedy_config();
  config.frequency_penalty = 0.4f;  // 3 - 3 * 0.4 = 1.8 < 2
  EXPECT_EQ(Sampler(config, 2).sample(logits, history), 1);
  config.frequency_penalty = 0.3f;  // 3 - 0.9 = 2.1 > 2
  EXPECT_EQ(Sampler(config, 2).sample(logits, history), 0);
  config.frequency_penalty = 0.0f;
  config.presence_penalty = 0.9f;  // once, not three times: 2.1 > 2
  EXPECT_EQ(Sampler(config, 2).sample(logits, history), 0);
  config.presence_penalty = 1.1f;  // 1.9 < 2
  EXPECT_EQ(Sampler(config, 2).sample(logits, history), 1);
}

TEST(Sampler, RepetitionPenaltyComesBeforeTheSubtractions) {
  // (3 / 2) - 0.4 = 1.1 < 1.2 picks 1; (3 - 0.4) / 2 = 1.3 would pick 0.
  proto::SamplingParams config = greedy_config();
  config.repetition_penalty = 2.0f;
  config.presence_penalty = 0.4f;
  EXPECT_EQ(Sampler(config, 2).sample(std::vector<float>{3.0f, 1.2f}, std::vector<std::int32_t>{0}), 1);
}

TEST(Sampler, PenaltiesLookOnlyAtTheLastNTokens) {
  // Token 0 is second to last in the history; penalised, 2.0 / 1.1 = 1.82 loses to 1.9.
  const std::vector<float> logits{2.0f, 1.9f, 0.0f, 0.0f, 0.0f, -5.0f};
  const std::vector<std::int32_t> history{3, 0, 5};
  const auto pick = [&](std::int32_t last_n) {
    proto::SamplingParams config = greedy_config();
    config.repetition_penalty = 1.1f;
    config.repetition_last_n = last_n;
    return Sampler(config, 6).sample(logits, history);
  };
  EXPECT_EQ(pick(0), 0);
  EXPECT_EQ(pick(1), 0);
  EXPECT_EQ(pick(2), 1);
  EXPECT_EQ(pick(64), 1);
  EXPECT_EQ(pick(-1), 1);
}

TEST(Sampler, LogitBiasAddsAndComesBeforePenalties) {
  proto::SamplingParams config = greedy_config();
  config.logit_bias = {{2, 2.5f}};  // 0 + 2.5 > 2
  EXPECT_EQ(Sampler(config, 3).sample(std::vector<float>{1.0f, 2.0f, 0.0f}, {}), 2);
  config.logit_bias = {{2, 2.5}, {1, -0.5}};  // several tokens at once: 0 + 2.5 > 2 - 0.5 > 1
  EXPECT_EQ(Sampler(config, 3).sample(std::vector<float>{1.0f, 2.0f, 0.0f}, {}), 2);

  // Token 0: 1.0 with bias -2 is -1.0, which the repetition penalty 2 multiplies to -2.0 < -1.75. The other
  // order (1.0 / 2 - 2 = -1.5) would keep it above token 1.
  config.logit_bias = {{0, -2.0f}};
  config.repetition_penalty = 2.0f;
  EXPECT_EQ(Sampler(config, 2).sample(std::vector<float>{1.0f, -1.75f}, std::vector<std::int32_t>{0}), 1);
}

TEST(Sampler, MinusInfinityBiasBansATokenWhenSampling) {
  proto::SamplingParams config = plain(11);
  config.logit_bias = {{0, -inf}};
  Sampler sampler(config, 3);
  EXPECT_EQ(seen(histogram(sampler, {5.0f, 0.0f, 0.0f}, 5'000)), (std::set<std::int32_t>{1, 2}));
}

TEST(Sampler, InfiniteLogitsShareAllTheProbability) {
  Sampler sampler(plain(21), 4);
  const auto counts = histogram(sampler, {0.0f, inf, 5.0f, inf}, draws);
  EXPECT_EQ(seen(counts), (std::set<std::int32_t>{1, 3}));
  EXPECT_LT(chi_square(counts, {0.0, 0.5, 0.0, 0.5}, draws), chi2_critical_df1);
}

TEST(Sampler, NoPickableTokenThrows) {
  Sampler sampling(plain(1), 3);
  EXPECT_THROW(sampling.sample(std::vector<float>{-inf, -inf, -inf}, {}), std::runtime_error);
  proto::SamplingParams config = greedy_config();
  config.logit_bias = {{0, -inf}, {1, -inf}};
  Sampler greedy(config, 2);
  EXPECT_THROW(greedy.sample(std::vector<float>{1.0f, 2.0f}, {}), std::runtime_error);
}

TEST(Sampler, TheRandomStreamIsOneMt19937_64OutputPerTokenTopBitsFirst) {
  // Four equal weights walked in id order: token i is drawn when i <= 4u < i + 1, i.e. when the top two
  // bits of the 64-bit output are i. An independent generator with the same seed predicts every token.
  Sampler sampler(plain(42), 4);
  std::mt19937_64 reference(42);
  for (int i = 0; i < 256; ++i) {
    ASSERT_EQ(sampler.sample(std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f}, {}),
              static_cast<std::int32_t>(reference() >> 62))
        << "draw " << i;
  }
}

std::vector<std::int32_t> generate(std::uint64_t seed, const std::vector<float>& logits, int count) {
  proto::SamplingParams config;  // the defaults: top-k 40, top-p 0.95, min-p 0.05, temperature 0.8
  config.seed = seed;
  config.repetition_penalty = 1.1f;
  Sampler sampler(config, static_cast<std::int32_t>(logits.size()));
  std::vector<std::int32_t> tokens;
  for (int i = 0; i < count; ++i) tokens.push_back(sampler.sample(logits, tokens));
  return tokens;
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(0.0f, 2.0f);
  std::vector<float> logits(1000);
  for (float& l : logits) l = uniform(rng);
  const auto first = generate(1, logits, 200);
  EXPECT_EQ(first, generate(1, logits, 200));
  EXPECT_NE(first, generate(2, logits, 200));
  EXPECT_GT(std::set<std::int32_t>(first.begin(), first.end()).size(), 10u) << "the draws are not random";
}

TEST(Sampler, LargeVocabularyPicksOnlyWhatTheFiltersAllow) {
  // 150K random logits; the expected sets come from a full sort.
  constexpr std::int32_t vocab = 150'000;
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(vocab);
  for (float& l : logits) l = normal(rng);
  std::vector<std::int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b]; });
  const std::set<std::int32_t> top_40(order.begin(), order.begin() + 40);

  proto::SamplingParams config;
  config.seed = 17;
  Sampler defaults(config, vocab);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(top_40.count(defaults.sample(logits, {}))) << "draw " << i;

  // Top-p 0.5 alone: the prefix of the full sort whose mass reaches half.
  double total = 0.0;
  for (const float l : logits) total += std::exp(static_cast<double>(l));
  std::set<std::int32_t> top_half;
  double cumulative = 0.0;
  for (const std::int32_t id : order) {
    top_half.insert(id);
    cumulative += std::exp(static_cast<double>(logits[id]));
    if (cumulative >= 0.5 * total) break;
  }
  config = plain(23);
  config.top_p = 0.5f;
  Sampler top_p(config, vocab);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(top_half.count(top_p.sample(logits, {}))) << "draw " << i;
}

TEST(Sampler, InvalidConfigurationsThrowNamingTheField) {
  const auto rejects = [](proto::SamplingParams config, const std::string& field, std::int32_t vocab = 10) {
    try {
      Sampler sampler(std::move(config), vocab);
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted a bad " << field;
  };
  const auto with = [](auto change) {
    proto::SamplingParams config;
    change(config);
    return config;
  };
  rejects(with([](proto::SamplingParams& c) { c.temperature = -0.1f; }), "temperature");
  rejects(with([](proto::SamplingParams& c) { c.temperature = std::numeric_limits<float>::quiet_NaN(); }),
          "temperature");
  rejects(with([](proto::SamplingParams& c) { c.temperature = inf; }), "temperature");
  rejects(with([](proto::SamplingParams& c) { c.top_k = -1; }), "top_k");
  rejects(with([](proto::SamplingParams& c) { c.top_p = 0.0f; }), "top_p");
  rejects(with([](proto::SamplingParams& c) { c.top_p = 1.01f; }), "top_p");
  rejects(with([](proto::SamplingParams& c) { c.top_p = std::numeric_limits<float>::quiet_NaN(); }), "top_p");
  rejects(with([](proto::SamplingParams& c) { c.min_p = -0.01f; }), "min_p");
  rejects(with([](proto::SamplingParams& c) { c.min_p = 1.5f; }), "min_p");
  rejects(with([](proto::SamplingParams& c) { c.repetition_penalty = 0.0f; }), "repetition_penalty");
  rejects(with([](proto::SamplingParams& c) { c.repetition_penalty = inf; }), "repetition_penalty");
  rejects(with([](proto::SamplingParams& c) { c.repetition_last_n = -2; }), "repetition_last_n");
  rejects(with([](proto::SamplingParams& c) { c.frequency_penalty = inf; }), "frequency_penalty");
  rejects(with([](proto::SamplingParams& c) { c.presence_penalty = -inf; }), "presence_penalty");
  rejects(with([](proto::SamplingParams& c) { c.logit_bias = {{10, 1.0f}}; }), "logit_bias");
  rejects(with([](proto::SamplingParams& c) { c.logit_bias = {{-1, 1.0f}}; }), "logit_bias");
  rejects(with([](proto::SamplingParams& c) { c.logit_bias = {{3, inf}}; }), "logit_bias");
  rejects(with([](proto::SamplingParams& c) {
            c.logit_bias = {{3, std::numeric_limits<float>::quiet_NaN()}};
          }),
          "logit_bias");
  rejects(proto::SamplingParams{}, "vocab_size", 0);
  // The boundaries themselves are valid.
  EXPECT_NO_THROW(Sampler(with([](proto::SamplingParams& c) {
                            c.top_p = 1.0f;
                            c.min_p = 1.0f;
                            c.repetition_last_n = -1;
                            c.logit_bias = {{9, -inf}};
                          }),
                          10));
}

TEST(Sampler, BadInputsToSampleThrow) {
  proto::SamplingParams config;
  config.repetition_penalty = 1.2f;
  Sampler sampler(config, 4);
  EXPECT_THROW(sampler.sample(std::vector<float>{1.0f, 2.0f, 3.0f}, {}), std::invalid_argument);
  EXPECT_THROW(sampler.sample(std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}, std::vector<std::int32_t>{1, 4}),
               std::invalid_argument);
  // A refused history leaves no counts behind: later, token 1 once in the window costs one frequency
  // penalty (2.0 - 0.05 = 1.95 > 1.9), not three (1.85 < 1.9) from the two counted before the bad token.
  proto::SamplingParams frequency = greedy_config();
  frequency.frequency_penalty = 0.05f;
  Sampler greedy(frequency, 4);
  const std::vector<float> logits{0.0f, 2.0f, 1.9f, 0.0f};
  EXPECT_THROW(greedy.sample(logits, std::vector<std::int32_t>{1, 1, -3}), std::invalid_argument);
  EXPECT_EQ(greedy.sample(logits, std::vector<std::int32_t>{1}), 1);
}

// ---- The allowed-token mask (a grammar's) ----

TEST(SamplerMask, GreedyPicksTheBestAllowedToken) {
  Sampler sampler(greedy_config(), 5);
  const std::vector<float> logits{9.0f, 4.0f, 7.0f, 5.0f, 8.0f};
  EXPECT_EQ(sampler.sample(logits, {}, std::vector<std::uint8_t>{0, 1, 0, 1, 0}), 3);
  EXPECT_EQ(sampler.sample(logits, {}, std::vector<std::uint8_t>{0, 1, 1, 1, 0}), 2);
  EXPECT_EQ(sampler.sample(logits, {}, std::vector<std::uint8_t>{0, 1, 0, 0, 0}), 1);
  EXPECT_EQ(sampler.sample(logits, {}), 0);  // no mask: no constraint
  EXPECT_EQ(sampler.sample(logits, {}, std::vector<std::uint8_t>{1, 1, 1, 1, 1}), 0);
}

TEST(SamplerMask, AMaskedTokenIsNeverPickedEvenWithAnInfiniteLogitOrAPositiveBias) {
  proto::SamplingParams config = greedy_config();
  config.logit_bias = {{0, 100.0}};
  Sampler greedy(config, 4);
  EXPECT_EQ(greedy.sample(std::vector<float>{1.0f, inf, 0.0f, 2.0f}, {}, std::vector<std::uint8_t>{0, 0, 1, 1}), 3);
  Sampler random(plain(5), 4);
  for (int i = 0; i < 500; ++i) {
    const auto token = random.sample(std::vector<float>{1.0f, inf, 0.0f, 2.0f}, {}, std::vector<std::uint8_t>{1, 0, 1, 1});
    ASSERT_NE(token, 1);
  }
}

TEST(SamplerMask, RandomDrawsFollowTheDistributionRenormalisedOverTheAllowedTokens) {
  Sampler sampler(plain(77), 5);
  const auto logits = log_of({0.4, 0.1, 0.2, 0.25, 0.05});
  const std::vector<std::uint8_t> mask{0, 1, 1, 0, 1};  // 0.1 : 0.2 : 0.05 of 0.35
  constexpr int n = 20000;
  std::vector<int> counts(5, 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<std::size_t>(sampler.sample(logits, {}, mask))];
  EXPECT_EQ(counts[0], 0);
  EXPECT_EQ(counts[3], 0);
  // Two degrees of freedom over the three allowed: 13.82 is the 0.999 quantile.
  const double expected[3] = {0.1 / 0.35, 0.2 / 0.35, 0.05 / 0.35};
  const int observed[3] = {counts[1], counts[2], counts[4]};
  double chi = 0.0;
  for (int k = 0; k < 3; ++k) {
    const double e = expected[k] * n;
    chi += (observed[k] - e) * (observed[k] - e) / e;
  }
  EXPECT_LT(chi, 13.82) << counts[1] << " " << counts[2] << " " << counts[4];
}

TEST(SamplerMask, FiltersWorkOnTheAllowedTokensOnly) {
  // top-k 1 keeps the best allowed token, not the best token (which the mask bans).
  proto::SamplingParams config = plain(3);
  config.top_k = 1;
  Sampler top_k(config, 4);
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(top_k.sample(std::vector<float>{9.0f, 1.0f, 3.0f, 2.0f}, {}, std::vector<std::uint8_t>{0, 1, 1, 1}), 2);
  }
  // min-p relative to the best allowed token: with 0 banned, 2 (e^3) and 3 (e^2.9) pass 0.5, 1 does not.
  config = plain(4);
  config.min_p = 0.5;
  Sampler min_p(config, 4);
  std::set<std::int32_t> picked;
  for (int i = 0; i < 400; ++i) {
    picked.insert(min_p.sample(std::vector<float>{9.0f, 1.0f, 3.0f, 2.9f}, {}, std::vector<std::uint8_t>{0, 1, 1, 1}));
  }
  EXPECT_EQ(picked, (std::set<std::int32_t>{2, 3}));
}

TEST(SamplerMask, NothingAllowedIsANoTokenError) {
  const std::vector<float> logits{1.0f, 2.0f, 3.0f};
  const std::vector<std::uint8_t> none{0, 0, 0};
  Sampler greedy(greedy_config(), 3);
  EXPECT_THROW(greedy.sample(logits, {}, none), NoTokenError);
  Sampler random(plain(9), 3);
  EXPECT_THROW(random.sample(logits, {}, none), NoTokenError);
  // Allowed, but with -inf logits (the model's or a bias's): nothing pickable either.
  EXPECT_THROW(random.sample(std::vector<float>{1.0f, -inf, -inf}, {}, std::vector<std::uint8_t>{0, 1, 1}), NoTokenError);
  // The sampler is fine afterwards.
  EXPECT_EQ(greedy.sample(logits, {}, std::vector<std::uint8_t>{1, 1, 0}), 1);
}

TEST(SamplerMask, AMaskOfTheWrongSizeIsRefused) {
  Sampler sampler(greedy_config(), 3);
  EXPECT_THROW(sampler.sample(std::vector<float>{1.0f, 2.0f, 3.0f}, {}, std::vector<std::uint8_t>{1, 1}),
               std::invalid_argument);
}

TEST(SamplerMask, PenaltiesCannotReviveAMaskedToken) {
  // A negative frequency penalty raises the logits of repeated tokens; a masked one stays banned.
  proto::SamplingParams config = greedy_config();
  config.frequency_penalty = -2.0;
  config.repetition_last_n = -1;
  Sampler sampler(config, 3);
  const std::vector<std::int32_t> history{0, 0, 0, 0};
  EXPECT_EQ(sampler.sample(std::vector<float>{1.0f, 2.0f, 1.5f}, history), 0);  // 1 + 8 beats 2
  EXPECT_EQ(sampler.sample(std::vector<float>{1.0f, 2.0f, 1.5f}, history, std::vector<std::uint8_t>{0, 1, 1}), 1);
}

}  // namespace
}  // namespace loom::compute

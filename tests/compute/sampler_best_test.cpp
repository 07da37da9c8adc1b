// Sampler::sample_best: a row's best candidates alone (what a GPU backend reads back instead of the whole row)
// give the token sample() gives from the whole row, draw for draw from the same seed, for every combination of
// top-k, top-p, min-p and temperature the shortcut is offered for, ties between equal logits included; and
// best_logits_needed() offers it exactly where nothing outside the best top_k + 1 can change the pick.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "loom/compute/sampler.hpp"

namespace loom::compute::sampler_best_test {
namespace {

// The row's `count` best as (ids, logits): sorted here by a full sort on (logit descending, id ascending).
struct Best {
  std::vector<std::int32_t> ids;
  std::vector<float> logits;
};
Best best_of(const std::vector<float>& row, std::size_t count) {
  std::vector<std::int32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    const float la = row[static_cast<std::size_t>(a)], lb = row[static_cast<std::size_t>(b)];
    return la != lb ? la > lb : a < b;
  });
  Best best;
  for (std::size_t i = 0; i < count; ++i) {
    best.ids.push_back(order[i]);
    best.logits.push_back(row[static_cast<std::size_t>(order[i])]);
  }
  return best;
}

// Logits with many exact ties (values on a coarse grid) so that the lower-id rule decides memberships.
std::vector<float> tied_row(std::mt19937& random, std::size_t vocab) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> row(vocab);
  for (float& v : row) v = std::round(normal(random) * 4.0f) / 4.0f;
  return row;
}

proto::SamplingParams sampled(double temperature, std::int32_t top_k, double top_p, double min_p, std::uint64_t seed) {
  proto::SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

TEST(SamplerBest, TheBestCandidatesDrawWhatTheWholeRowDraws) {
  std::mt19937 random(7);
  constexpr std::int32_t vocab = 3000;
  int draws = 0, differing_from_greedy = 0;
  for (const std::int32_t top_k : {1, 2, 5, 40, 63}) {
    for (const double top_p : {1.0, 0.95, 0.5}) {
      for (const double min_p : {0.0, 0.05}) {
        for (const double temperature : {0.3, 0.8, 1.7}) {
          const proto::SamplingParams params = sampled(temperature, top_k, top_p, min_p, 1234 + draws);
          ASSERT_EQ(Sampler::best_logits_needed(params, vocab), top_k + 1);
          Sampler whole(params, vocab), best(params, vocab);
          for (int step = 0; step < 12; ++step, ++draws) {
            const std::vector<float> row = tied_row(random, vocab);
            // Exactly as many as needed, and more (a device reads back a fixed 64).
            const std::size_t count = step % 2 == 0 ? static_cast<std::size_t>(top_k + 1) : 64;
            const Best candidates = best_of(row, count);
            const std::int32_t expected = whole.sample(row, {});
            ASSERT_EQ(best.sample_best(candidates.ids, candidates.logits), expected)
                << "top_k " << top_k << " top_p " << top_p << " min_p " << min_p << " temperature " << temperature
                << " step " << step;
            differing_from_greedy += expected != candidates.ids[0] ? 1 : 0;
          }
        }
      }
    }
  }
  EXPECT_GT(differing_from_greedy, draws / 4) << "the draws were mostly the best token: the test shows little";
}

// Candidates past the row's finite logits (-inf, NaN: a device reads back a fixed 64 even where fewer are
// finite) are dropped as sample() drops such tokens; too few finite ones are refused.
TEST(SamplerBest, NonFiniteCandidatesAreDroppedAsTheWholeRowDropsThem) {
  constexpr std::int32_t vocab = 200;
  const proto::SamplingParams params = sampled(1.0, 5, 0.9, 0.0, 3);
  Sampler whole(params, vocab), best(params, vocab);
  std::mt19937 random(5);
  for (int step = 0; step < 30; ++step) {
    std::vector<float> row = tied_row(random, vocab);
    for (std::size_t i = 10; i < row.size(); ++i) row[i] = i % 2 == 0 ? -INFINITY : NAN;  // 10 finite logits
    Best candidates = best_of(std::vector<float>(row.begin(), row.begin() + 10), 10);
    candidates.ids.insert(candidates.ids.end(), {10, 11, 12});
    candidates.logits.insert(candidates.logits.end(), {-INFINITY, NAN, -INFINITY});
    ASSERT_EQ(best.sample_best(candidates.ids, candidates.logits), whole.sample(row, {})) << "step " << step;
  }
  Sampler few(params, vocab);
  EXPECT_THROW(few.sample_best(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}, std::vector<float>{6, 5, 4, 3, 2, -INFINITY}),
               std::invalid_argument)
      << "top_k 5 needs 6 finite candidates";
}

TEST(SamplerBest, CandidatesInAnyOrderGiveTheSameToken) {
  std::mt19937 random(11);
  constexpr std::int32_t vocab = 500;
  const proto::SamplingParams params = sampled(0.9, 20, 0.9, 0.0, 99);
  Sampler whole(params, vocab), shuffled(params, vocab);
  for (int step = 0; step < 50; ++step) {
    const std::vector<float> row = tied_row(random, vocab);
    Best candidates = best_of(row, 21);
    std::vector<std::size_t> order(candidates.ids.size());
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), random);
    Best mixed;
    for (const std::size_t i : order) {
      mixed.ids.push_back(candidates.ids[i]);
      mixed.logits.push_back(candidates.logits[i]);
    }
    ASSERT_EQ(shuffled.sample_best(mixed.ids, mixed.logits), whole.sample(row, {})) << "step " << step;
  }
}

TEST(SamplerBest, GreedyTakesTheBestCandidateWithTheLowerIdOnTies) {
  proto::SamplingParams greedy;
  greedy.temperature = 0.0;
  ASSERT_EQ(Sampler::best_logits_needed(greedy, 100), 1);
  Sampler sampler(greedy, 100);
  EXPECT_EQ(sampler.sample_best(std::vector<std::int32_t>{7}, std::vector<float>{2.0f}), 7);
  EXPECT_EQ(sampler.sample_best(std::vector<std::int32_t>{9, 4, 8}, std::vector<float>{3.0f, 3.0f, 1.0f}), 4);
}

// Anything that looks at tokens outside the best top_k + 1 needs the whole row.
TEST(SamplerBest, WhatNeedsTheWholeRowIsNotOffered) {
  constexpr std::int32_t vocab = 1000;
  const proto::SamplingParams base = sampled(0.8, 40, 0.95, 0.05, 1);
  EXPECT_EQ(Sampler::best_logits_needed(base, vocab), 41);
  auto with = [&](auto change) {
    proto::SamplingParams p = base;
    change(p);
    return Sampler::best_logits_needed(p, vocab);
  };
  EXPECT_EQ(with([](auto& p) { p.top_k = 0; }), 0) << "top-k off: every token may be drawn";
  EXPECT_EQ(with([](auto& p) { p.top_k = vocab; }), 0) << "top-k keeping the whole vocabulary";
  EXPECT_EQ(with([](auto& p) { p.logit_bias = {{3, 5.0}}; }), 0) << "a bias can lift any token";
  EXPECT_EQ(with([](auto& p) { p.repetition_penalty = 1.1; }), 0);
  EXPECT_EQ(with([](auto& p) { p.frequency_penalty = 0.5; }), 0);
  EXPECT_EQ(with([](auto& p) { p.presence_penalty = -0.5; }), 0);
  EXPECT_EQ(with([](auto& p) { p.temperature = 0.0; p.logit_bias = {{3, 5.0}}; }), 0) << "greedy with a bias";
  EXPECT_EQ(with([](auto& p) { p.temperature = 0.0; }), 1);
}

TEST(SamplerBest, RefusesWhatItCannotDecideFrom) {
  constexpr std::int32_t vocab = 100;
  Sampler sampler(sampled(0.8, 3, 1.0, 0.0, 5), vocab);
  const std::vector<std::int32_t> ids{4, 2, 9, 1};
  EXPECT_THROW(sampler.sample_best(std::vector<std::int32_t>{4, 2, 9}, std::vector<float>{3, 2, 1}), std::invalid_argument)
      << "top_k 3 needs 4 candidates";
  EXPECT_THROW(sampler.sample_best(ids, std::vector<float>{3, 2, 1}), std::invalid_argument) << "sizes differ";
  EXPECT_THROW(sampler.sample_best(ids, std::vector<float>{3, 2, NAN, 1}), std::invalid_argument) << "3 finite";
  EXPECT_THROW(sampler.sample_best(ids, std::vector<float>{INFINITY, 2, 1, 0}), std::invalid_argument);
  EXPECT_THROW(sampler.sample_best(std::vector<std::int32_t>{4, 2, 100, 1}, std::vector<float>{3, 2, 1, 0}),
               std::invalid_argument);
  Sampler whole_row(sampled(0.8, 0, 1.0, 0.0, 5), vocab);
  EXPECT_THROW(whole_row.sample_best(ids, std::vector<float>{3, 2, 1, 0}), std::invalid_argument)
      << "top-k off needs the whole row";
}

}  // namespace
}  // namespace loom::compute::sampler_best_test

// top_k on the device against a full sort on the host (logit descending, token ascending on ties), over a
// vocabulary of 150,000: tied maxima far apart, a row of all-equal logits (-0 and +0 mixed), infinities, and
// k = 64 and k = 1 (argmax). Exact: the same tokens in the same order, the same logit bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "loom/compute/vulkan/vulkan_ops.hpp"
#include "ops_test_support.hpp"

namespace loom::compute::vulkan {
namespace {

using testing::buffer_of;
using testing::random_floats;
using testing::read_back;

constexpr std::int64_t kVocab = 150000;

struct Candidate {
  std::int32_t token;
  float logit;
};

std::vector<Candidate> host_top_k(const float* row, std::int64_t vocab, std::int64_t k) {
  std::vector<std::int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return row[a] > row[b]; });
  std::vector<Candidate> top;
  for (std::int64_t i = 0; i < k; ++i) top.push_back({order[i], row[order[i]]});
  return top;
}

std::vector<float> test_rows() {
  // Row 0: noise with its largest value at three tokens and the next one at two; row 1: all zeros of both
  // signs; row 2: noise with infinities of both signs and 100 equal values from about the 5th place to past
  // the 64th (so the 64 end inside a tie).
  auto logits = random_floats(3 * kVocab, -20.0f, 20.0f, 81);
  float* row0 = logits.data();
  for (const std::int64_t t : {149999, 100, 75000}) row0[t] = 31.5f;
  for (const std::int64_t t : {5, 149998}) row0[t] = 30.25f;
  float* row1 = logits.data() + kVocab;
  for (std::int64_t t = 0; t < kVocab; ++t) row1[t] = t % 3 == 0 ? -0.0f : 0.0f;
  float* row2 = logits.data() + 2 * kVocab;
  row2[7] = std::numeric_limits<float>::infinity();
  row2[8] = -std::numeric_limits<float>::infinity();
  for (std::int64_t t = 1000; t < 1200; t += 2) row2[t] = 19.999f;  // 100 ties across the 64th place
  return logits;
}

void check_top_k(std::int64_t k) {
  const auto logits = test_rows();
  const std::int64_t rows = 3;
  auto logit_buffer = buffer_of(logits);
  auto out = buffer_of(std::vector<Candidate>(rows * k));
  testing::run_ops([&](OpContext& op) { top_k(op, logit_buffer.range(), rows, kVocab, k, out.range()); });
  const auto got = read_back<Candidate>(out, rows * k);
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto want = host_top_k(logits.data() + r * kVocab, kVocab, k);
    for (std::int64_t i = 0; i < k; ++i) {
      const Candidate& g = got[r * k + i];
      ASSERT_EQ(g.token, want[i].token) << "row " << r << " place " << i;
      ASSERT_EQ(std::memcmp(&g.logit, &want[i].logit, 4), 0) << "row " << r << " place " << i;
    }
  }
}

TEST(VulkanTopK, SixtyFourLargestOfA150000VocabularyWithTies) {
  LOOM_REQUIRE_VULKAN();
  check_top_k(64);
}

TEST(VulkanTopK, ArgmaxTakesTheLowestTokenOfTiedMaxima) {
  LOOM_REQUIRE_VULKAN();
  check_top_k(1);
}

TEST(VulkanTopK, RejectsKOutsideOneTo64) {
  LOOM_REQUIRE_VULKAN();
  auto buffer = buffer_of(std::vector<float>(1024));
  for (const std::int64_t k : {0, 65}) {
    EXPECT_THROW(testing::run_ops([&](OpContext& op) { top_k(op, buffer.range(), 1, 100, k, buffer.range()); }),
                 std::invalid_argument);
  }
}

}  // namespace
}  // namespace loom::compute::vulkan

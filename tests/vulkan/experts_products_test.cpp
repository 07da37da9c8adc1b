// The mixture-of-experts steps on the device (vulkan_experts.hpp), each against an independent computation:
// the router's choice against a double-precision softmax and top-k on the host (ties to the lower expert,
// renormalized or not), the expert-indexed product against vkmatmul's plain product with each slot's expert
// uploaded alone (both reductions, and slots split over several dispatches), a decode slot reading only its
// own expert (the others' weights are NaN), and the weighted sum against the host's sum in choice order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "loom/compute/vulkan/vulkan_experts.hpp"
#include "matmul_test_support.hpp"
#include "vulkan/vulkan_experts_detail.hpp"

namespace loom::compute::vulkan {
namespace {

using testing::device_buffer;
using testing::download;
using testing::empty_buffer;
using testing::quantized_rows;
using testing::random_values;
using testing::run_ops;

struct Choice {
  std::int32_t expert;
  float weight;
};

// The host's choice: softmax in double, the `used` largest probabilities, the lower expert first on ties.
std::vector<Choice> host_route(const std::vector<float>& logits, std::int64_t n, std::int64_t experts, std::int64_t used,
                               bool normalize) {
  std::vector<Choice> choices;
  for (std::int64_t t = 0; t < n; ++t) {
    const float* row = &logits[static_cast<std::size_t>(t * experts)];
    const double largest = *std::max_element(row, row + experts);
    std::vector<double> p(static_cast<std::size_t>(experts));
    double sum = 0.0;
    for (std::int64_t e = 0; e < experts; ++e) sum += p[e] = std::exp(row[e] - largest);
    for (double& v : p) v /= sum;
    std::vector<std::int32_t> order(static_cast<std::size_t>(experts));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return p[a] > p[b]; });
    double total = 0.0;
    for (std::int64_t k = 0; k < used; ++k) total += p[order[k]];
    for (std::int64_t k = 0; k < used; ++k) {
      choices.push_back({order[k], static_cast<float>(normalize ? p[order[k]] / total : p[order[k]])});
    }
  }
  return choices;
}

std::vector<Choice> device_route(const std::vector<float>& logits, std::int64_t n, std::int64_t experts,
                                 std::int64_t used, bool normalize) {
  Buffer logit_buffer = device_buffer(logits, "logits");
  Buffer choice_buffer = empty_buffer(8 * n * used, "choices");
  run_ops([&](OpContext& op) {
    route_experts(op, logit_buffer.range(), n, experts, used, normalize, choice_buffer.range());
  });
  return download<Choice>(choice_buffer.range(), static_cast<std::size_t>(n * used));
}

TEST(ExpertsRoute, PicksTheMostProbableExpertsWithTheLowerOneOnTies) {
  LOOM_REQUIRE_VULKAN();
  const std::int64_t n = 5, experts = 60, used = 4;
  std::vector<float> logits = random_values(n, experts, 11);
  for (float& v : logits) v *= 40.0f;
  // Token 1: three experts tie for the top (7, 20 and 41); token 2: every logit equal.
  logits[1 * experts + 41] = logits[1 * experts + 20] = logits[1 * experts + 7] = 30.0f;
  std::fill(logits.begin() + 2 * experts, logits.begin() + 3 * experts, 0.5f);
  for (const bool normalize : {true, false}) {
    const auto expected = host_route(logits, n, experts, used, normalize);
    const auto actual = device_route(logits, n, experts, used, normalize);
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(actual[i].expert, expected[i].expert) << "slot " << i << " normalize " << normalize;
      EXPECT_NEAR(actual[i].weight, expected[i].weight, 1e-5) << "slot " << i << " normalize " << normalize;
    }
    EXPECT_EQ(actual[4].expert, 7);
    EXPECT_EQ(actual[5].expert, 20);
    EXPECT_EQ(actual[6].expert, 41);
    EXPECT_EQ(actual[8].expert, 0);
    EXPECT_EQ(actual[11].expert, 3);
  }
}

// y[s] = W[expert(s)] . x[input(s)] for every slot, against the plain product of the expert alone.
// `reduction` and `slots_per_dispatch` (0: the device's limit) as detail::matmul_experts_prepared takes them.
void check_expert_product(TensorType type, std::int64_t rows, std::int64_t cols, std::int64_t inputs,
                          std::int64_t slots_per_input,
                          detail::Reduction reduction = detail::Reduction::automatic,
                          std::uint32_t slots_per_dispatch = 0) {
  SCOPED_TRACE(std::string(name(type)));
  const std::int64_t experts = 5, slots = inputs * slots_per_input;
  std::vector<std::vector<std::byte>> matrices;
  std::vector<std::byte> stacked;
  for (std::int64_t e = 0; e < experts; ++e) {
    matrices.push_back(quantized_rows(type, random_values(rows, cols, 100 + static_cast<std::uint32_t>(e)), rows, cols));
    stacked.insert(stacked.end(), matrices.back().begin(), matrices.back().end());
  }
  std::vector<Choice> choices;
  for (std::int64_t s = 0; s < slots; ++s) choices.push_back({static_cast<std::int32_t>((3 * s + 1) % experts), 0.5f});
  const std::vector<float> x = random_values(inputs, cols, 7);
  Buffer weights = device_buffer(stacked, "experts"), choice_buffer = device_buffer(choices, "choices");
  Buffer x_buffer = device_buffer(x, "x");
  const ActivationFormat format = activation_format(type);
  Buffer prepared = empty_buffer(format == ActivationFormat::f32 ? 4 : prepared_bytes(format, inputs, cols), "prepared");
  Buffer y = empty_buffer(4 * slots * rows, "y");
  const DeviceTensor w{.type = type, .rows = rows, .cols = cols, .data = weights.range()};
  run_ops([&](OpContext& op) {
    const BufferRange input = format == ActivationFormat::f32 ? x_buffer.range() : prepared.range();
    prepare_activations(op, format, x_buffer.range(), input, inputs, cols);
    detail::matmul_experts_prepared(op, w, experts, choice_buffer.range(), input, y.range(), inputs, slots, reduction,
                                    slots_per_dispatch);
  });
  const auto actual = download<float>(y.range(), static_cast<std::size_t>(slots * rows));
  for (std::int64_t e = 0; e < experts; ++e) {
    Buffer alone = device_buffer(matrices[static_cast<std::size_t>(e)], "expert");
    Buffer expected_y = empty_buffer(4 * inputs * rows, "expected");
    Buffer scratch = empty_buffer(prepared.size(), "scratch");
    run_ops([&](OpContext& op) {
      matmul(op, DeviceTensor{.type = type, .rows = rows, .cols = cols, .data = alone.range()}, x_buffer.range(),
             expected_y.range(), inputs, scratch.range());
    });
    const auto expected = download<float>(expected_y.range(), static_cast<std::size_t>(inputs * rows));
    for (std::int64_t s = 0; s < slots; ++s) {
      if (choices[static_cast<std::size_t>(s)].expert != e) continue;
      const std::int64_t input = s / slots_per_input;
      for (std::int64_t r = 0; r < rows; ++r) {
        const float want = expected[static_cast<std::size_t>(input * rows + r)];
        ASSERT_NEAR(actual[static_cast<std::size_t>(s * rows + r)], want, 1e-5f * (1.0f + std::abs(want)))
            << "slot " << s << " row " << r;
      }
    }
  }
}

TEST(ExpertsProduct, EachSlotMeetsItsExpertInTheStoredType) {
  LOOM_REQUIRE_VULKAN();
  check_expert_product(TensorType::f16, 6, 96, 3, 2);   // gate/up: slots share their token's input
  check_expert_product(TensorType::q8_0, 5, 64, 4, 2);
  check_expert_product(TensorType::q4_k, 4, 256, 6, 1);  // down: one input row per slot
}

TEST(ExpertsProduct, SharedMemoryReductionAndSlotsSplitOverDispatches) {
  LOOM_REQUIRE_VULKAN();
  check_expert_product(TensorType::q8_0, 5, 64, 4, 2, detail::Reduction::shared_memory);
  check_expert_product(TensorType::q8_0, 5, 64, 4, 2, detail::Reduction::automatic, 3);  // 8 slots: 3 + 3 + 2
}

TEST(ExpertsProduct, ADecodeSlotReadsOnlyItsOwnExpert) {
  LOOM_REQUIRE_VULKAN();
  const std::int64_t experts = 4, rows = 3, cols = 40;
  std::vector<float> weights(static_cast<std::size_t>(experts * rows * cols), std::numeric_limits<float>::quiet_NaN());
  for (std::int64_t i = 0; i < rows * cols; ++i) weights[static_cast<std::size_t>(2 * rows * cols + i)] = 0.25f;
  const std::vector<float> x(static_cast<std::size_t>(cols), 2.0f);
  const std::vector<Choice> choices{{2, 1.0f}};
  Buffer w_buffer = device_buffer(weights, "experts"), x_buffer = device_buffer(x, "x");
  Buffer choice_buffer = device_buffer(choices, "choices"), y = empty_buffer(4 * rows, "y");
  run_ops([&](OpContext& op) {
    matmul_experts_prepared(op, DeviceTensor{.type = TensorType::f32, .rows = rows, .cols = cols, .data = w_buffer.range()},
                            experts, choice_buffer.range(), x_buffer.range(), y.range(), 1, 1);
  });
  for (float v : download<float>(y.range(), rows)) EXPECT_EQ(v, 0.25f * 2.0f * cols);
}

TEST(ExpertsCombine, AddsTheWeightedSlotsInChoiceOrderThenTheGatedSharedExpert) {
  LOOM_REQUIRE_VULKAN();
  const std::int64_t n = 3, dim = 70, used = 2;
  const std::vector<float> residual = random_values(n, dim, 1), slot_out = random_values(n * used, dim, 2);
  const std::vector<float> shared_out = random_values(n, dim, 3), shared_gate{0.3f, -2.0f, 5.0f};
  const std::vector<Choice> choices{{1, 0.7f}, {0, 0.3f}, {3, 0.9f}, {2, 0.1f}, {0, 0.5f}, {1, 0.5f}};
  for (const bool gated : {true, false}) {
    Buffer r = device_buffer(residual, "residual"), s = device_buffer(slot_out, "slots");
    Buffer c = device_buffer(choices, "choices"), so = device_buffer(shared_out, "shared"), sg = device_buffer(shared_gate, "gate");
    run_ops([&](OpContext& op) {
      combine_experts(op, r.range(), s.range(), c.range(), so.range(),
                      gated ? std::optional<BufferRange>(sg.range()) : std::nullopt, n, dim, used);
    });
    const auto actual = download<float>(r.range(), static_cast<std::size_t>(n * dim));
    for (std::int64_t t = 0; t < n; ++t) {
      const double gate = gated ? 1.0 / (1.0 + std::exp(-static_cast<double>(shared_gate[t]))) : 1.0;
      for (std::int64_t i = 0; i < dim; ++i) {
        double sum = residual[t * dim + i] + gate * shared_out[t * dim + i];
        for (std::int64_t k = 0; k < used; ++k) sum += slot_out[(t * used + k) * dim + i] * choices[t * used + k].weight;
        EXPECT_NEAR(actual[static_cast<std::size_t>(t * dim + i)], sum, 1e-5) << t << " " << i << " gated " << gated;
      }
    }
  }
}

}  // namespace
}  // namespace loom::compute::vulkan

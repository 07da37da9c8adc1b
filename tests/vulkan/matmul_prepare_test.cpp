// The activation quantizers on the device give the CPU quantizers' values bit for bit (quantize_row(): the
// quants, the f16-rounded Q8_0/Q8_1 scales, Q8_1's sums, Q8_K's F32 scale and bsums; F16's rounding), read
// back from the prepared layout (shaders/quantize_layout.glsl). Includes the edge cases: an all-zero block,
// ties of the largest magnitude (Q8_K takes the first), values that land exactly half-way between two quants.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <random>
#include <cstring>
#include <vector>

#include "loom/compute/model/half.hpp"
#include "loom/compute/model/quant_blocks.hpp"
#include "matmul_test_support.hpp"

namespace loom::compute::vulkan {
namespace {

using namespace testing;

constexpr std::int64_t kTokens = 7;
constexpr std::int64_t kCols = 512;       // Q8_K and F16
constexpr std::int64_t kSmallCols = 480;  // Q8_0/Q8_1: 105 blocks, the last workgroup's 8 only partly used

std::vector<float> activations(std::int64_t cols = kCols) {
  auto x = random_values(kTokens, cols, 99);
  // Block 3 of token 0: max 127/8, so the scale is exactly 8 and these land on .5 after scaling.
  const float ties[] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 3.5f, -126.5f};
  for (int i = 0; i < 32; ++i) x[96 + i] = ties[i % 8] / 8.0f;
  // Token 1's second 256-block: its largest magnitude twice, negative first.
  x[cols + 256 + 3] = -0.9f;
  x[cols + 256 + 10] = 0.9f;
  // Token 2: tiny values, token 3: large ones.
  for (std::int64_t c = 0; c < cols; ++c) {
    x[2 * cols + c] *= 1e-4f;
    x[3 * cols + c] *= 300.0f;
  }
  return x;
}

template <class Block>
std::vector<Block> cpu_blocks(TensorType type, const std::vector<float>& x, std::int64_t cols) {
  const std::size_t blocks_per_row = static_cast<std::size_t>(cols / (type == TensorType::q8_k ? 256 : 32));
  std::vector<Block> blocks(static_cast<std::size_t>(kTokens) * blocks_per_row);
  for (std::int64_t t = 0; t < kTokens; ++t) quantize_row(type, x.data() + t * cols, blocks.data() + t * blocks_per_row, cols);
  return blocks;
}

// The device's prepared bytes for `format`.
std::vector<std::uint32_t> prepared_words(ActivationFormat format, const std::vector<float>& x, std::int64_t cols) {
  Buffer input = device_buffer(x, "x");
  const std::uint64_t bytes = prepared_bytes(format, kTokens, cols);
  Buffer prepared = empty_buffer(bytes, "prepared");
  run_ops([&](OpContext& op) { prepare_activations(op, format, input.range(), prepared.range(), kTokens, cols); });
  return download<std::uint32_t>(prepared.range(), bytes / 4);
}

std::int8_t quant(const std::vector<std::uint32_t>& words, std::int64_t cols, std::int64_t t, std::int64_t i) {
  const std::uint32_t word = words[static_cast<std::size_t>((t * cols + i) / 4)];
  return static_cast<std::int8_t>(word >> (8 * ((t * cols + i) % 4)));
}

float word_float(const std::vector<std::uint32_t>& words, std::size_t i) { return std::bit_cast<float>(words[i]); }

TEST(VulkanPrepareActivations, Q8_0AndQ8_1AreTheCpuBlocks) {
  LOOM_REQUIRE_VULKAN();
  const std::int64_t cols = kSmallCols;
  const auto x = activations(cols);
  for (const bool sums : {false, true}) {
    const auto words = prepared_words(sums ? ActivationFormat::q8_1 : ActivationFormat::q8_0, x, cols);
    const std::size_t blocks = static_cast<std::size_t>(kTokens * cols / 32);
    const std::size_t scales = static_cast<std::size_t>(kTokens * cols / 4);
    std::vector<BlockQ8_0> q8_0;
    std::vector<BlockQ8_1> q8_1;
    if (sums) q8_1 = cpu_blocks<BlockQ8_1>(TensorType::q8_1, x, cols); else q8_0 = cpu_blocks<BlockQ8_0>(TensorType::q8_0, x, cols);
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::int64_t t = static_cast<std::int64_t>(b) / (cols / 32), first = 32 * (static_cast<std::int64_t>(b) % (cols / 32));
      const std::int8_t* qs = sums ? q8_1[b].qs : q8_0[b].qs;
      for (int i = 0; i < 32; ++i) ASSERT_EQ(quant(words, cols, t, first + i), qs[i]) << "block " << b << " value " << i;
      const float d = half_to_float(sums ? q8_1[b].d : q8_0[b].d);
      ASSERT_EQ(std::bit_cast<std::uint32_t>(word_float(words, scales + b)), std::bit_cast<std::uint32_t>(d)) << "block " << b;
      if (sums) {
        ASSERT_EQ(word_float(words, scales + blocks + b), half_to_float(q8_1[b].s)) << "block " << b;
      }
    }
  }
}

TEST(VulkanPrepareActivations, Q8_KIsTheCpuBlocks) {
  LOOM_REQUIRE_VULKAN();
  const auto x = activations();
  const auto words = prepared_words(ActivationFormat::q8_k, x, kCols);
  const auto cpu = cpu_blocks<BlockQ8_K>(TensorType::q8_k, x, kCols);
  const std::size_t scales = static_cast<std::size_t>(kTokens * kCols / 4);
  const std::size_t bsums = scales + cpu.size();
  for (std::size_t b = 0; b < cpu.size(); ++b) {
    const std::int64_t t = static_cast<std::int64_t>(b) / (kCols / 256), first = 256 * (static_cast<std::int64_t>(b) % (kCols / 256));
    for (int i = 0; i < 256; ++i) ASSERT_EQ(quant(words, kCols, t, first + i), cpu[b].qs[i]) << "block " << b << " value " << i;
    ASSERT_EQ(words[scales + b], std::bit_cast<std::uint32_t>(cpu[b].d)) << "block " << b;
    for (int k = 0; k < 16; ++k) ASSERT_EQ(static_cast<std::int32_t>(words[bsums + 16 * b + k]), cpu[b].bsums[k]);
  }
}

TEST(VulkanPrepareActivations, F16RoundsAsTheCpuDoes) {
  LOOM_REQUIRE_VULKAN();
  auto x = activations();
  x[1] = 65519.0f;  // rounds down to the largest half
  x[2] = 65520.0f;  // rounds to infinity
  x[3] = 3e-8f;     // a half subnormal
  const auto words = prepared_words(ActivationFormat::f16, x, kCols);
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(words[i], std::bit_cast<std::uint32_t>(half_to_float(float_to_half(x[i])))) << "value " << i << " " << x[i];
  }
}

TEST(VulkanPrepareActivations, F32NeedsNoRoomAndOthersCheckTheirs) {
  LOOM_REQUIRE_VULKAN();
  EXPECT_EQ(prepared_bytes(ActivationFormat::f32, 3, 512), 0u);
  EXPECT_EQ(prepared_bytes(ActivationFormat::q8_0, 2, 64), 128u + 16u);
  EXPECT_EQ(prepared_bytes(ActivationFormat::q8_1, 2, 64), 128u + 32u);
  EXPECT_EQ(prepared_bytes(ActivationFormat::q8_k, 1, 256), 256u + 4u + 64u);
  Buffer small = empty_buffer(64, "small");
  run_ops([&](OpContext& op) {
    EXPECT_THROW(prepare_activations(op, ActivationFormat::q8_0, small.range(), small.range(), 1, 256), std::invalid_argument);
    EXPECT_THROW(prepare_activations(op, ActivationFormat::q8_k, small.range(), small.range(), 1, 32), std::invalid_argument);
  });
}

// The quantizers' division corrects a device quotient up to two ulps off (GPUs divide through a reciprocal):
// started 2 ulps below to 2 above the device's a / b, it ends on the host's correctly rounded a / b, for the
// quantizers' own divisions (max / 127, 127 / max, -127 / max, 1 / iscale) and random ones.
TEST(VulkanPrepareActivations, TheDivisionIsCorrectlyRoundedFromAnyNearbyStart) {
  LOOM_REQUIRE_VULKAN();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  std::vector<float> pairs;
  for (int i = 0; i < 2000; ++i) {
    const float v = std::ldexp(mantissa(rng), exponent(rng)) * (i % 3 == 0 ? -1.0f : 1.0f);
    const float iscale = -127.0f / v;
    const float quantizer[][2] = {{std::abs(v), 127.0f}, {127.0f, std::abs(v)}, {-127.0f, v}, {1.0f, iscale}};
    for (const auto& pair : quantizer) pairs.insert(pairs.end(), {pair[0], pair[1]});
    pairs.insert(pairs.end(), {std::ldexp(mantissa(rng), exponent(rng)), std::ldexp(mantissa(rng), exponent(rng))});
  }
  const std::size_t count = pairs.size() / 2;
  Buffer input = device_buffer(pairs, "pairs");
  Buffer output = empty_buffer(4 * 5 * count, "quotients");
  run_ops([&](OpContext& op) {
    const std::array<std::uint32_t, 1> spec{64};
    const auto& pipeline = op.pipelines.get("quantize_divide_check", 2, 4, spec);
    const auto n = static_cast<std::uint32_t>(count);
    op.recording.dispatch(pipeline, {input.range(), output.range()}, n, groups_for(count, 64));
  });
  const auto got = download<float>(output.range(), 5 * count);
  for (std::size_t i = 0; i < count; ++i) {
    const float expected = pairs[2 * i] / pairs[2 * i + 1];
    for (int k = 0; k < 5; ++k) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[5 * i + k]), std::bit_cast<std::uint32_t>(expected))
          << pairs[2 * i] << " / " << pairs[2 * i + 1] << " from " << (k - 2) << " ulps away: " << got[5 * i + k];
    }
  }
}

}  // namespace
}  // namespace loom::compute::vulkan

// The pinned activations on the device (vulkan_pinned.hpp) against the CPU's, bit for bit: SwiGLU as
// swiglu(row, up, width, path, lanes) for both lane widths over rows whose width leaves values over a whole
// group (those through the C library's expf), and GeGLU as geglu() with the CPU's own F16 table, over inputs
// that cross -10 and 10 and F16 rounding boundaries.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "loom/compute/cpu/activations.hpp"
#include "loom/compute/cpu/attention.hpp"
#include "loom/compute/vulkan/vulkan_pinned.hpp"
#include "ops_test_support.hpp"

namespace loom::compute::vulkan {
namespace {

using testing::buffer_of;
using testing::random_floats;
using testing::read_back;

std::int64_t count_mismatches(const std::vector<float>& cpu, const std::vector<float>& device) {
  std::int64_t mismatches = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    if (std::memcmp(&cpu[i], &device[i], sizeof(float)) != 0 && ++mismatches <= 5) {
      ADD_FAILURE() << "value " << i << ": cpu " << cpu[i] << " device " << device[i];
    }
  }
  return mismatches;
}

void check_swiglu(LaneWidth lanes) {
  LOOM_REQUIRE_VULKAN();
  if (!pinned_supported(*testing::test_device().context)) GTEST_SKIP() << "the device has no shaderFloat64";
  constexpr std::int64_t kRows = 7, kWidth = 1000;  // 1000 = 62 groups of 16 and 8 over (125 of 8)
  std::vector<float> gate = random_floats(kRows * kWidth, -30.0f, 30.0f, 21);
  for (std::size_t i = 0; i < 40; ++i) gate[i] = -110.0f + 3.0f * static_cast<float>(i);  // under- and overflow
  const std::vector<float> up = random_floats(kRows * kWidth, -2.0f, 2.0f, 22);
  Buffer gate_buffer = buffer_of(gate), up_buffer = buffer_of(up);
  testing::run_ops([&](OpContext& op) {
    swiglu_pinned(op, gate_buffer.range(), up_buffer.range(), kRows, kWidth, lanes);
  });
  std::vector<float> cpu = gate;
  for (std::int64_t r = 0; r < kRows; ++r) loom::compute::swiglu(&cpu[r * kWidth], &up[r * kWidth], kWidth, default_kernel_path(), lanes);
  EXPECT_EQ(count_mismatches(cpu, read_back<float>(gate_buffer, gate.size())), 0);
}

TEST(AttentionPinnedActivationsTest, SwigluAvx512FormEqualsTheCpu) { check_swiglu(LaneWidth::avx512); }
TEST(AttentionPinnedActivationsTest, SwigluAvx2FormEqualsTheCpu) { check_swiglu(LaneWidth::avx2); }

TEST(AttentionPinnedActivationsTest, GegluFromTheTableEqualsTheCpu) {
  LOOM_REQUIRE_VULKAN();
  std::vector<float> gate = random_floats(20000, -12.0f, 12.0f, 23);
  for (float x : {-10.0f, -9.999f, 10.0f, 9.999f, 0.0f, -0.0f, 1e-6f}) gate.push_back(x);
  const std::vector<float> up = random_floats(gate.size(), -2.0f, 2.0f, 24);
  const std::vector<std::uint32_t> words = gelu_table_words();
  Buffer gate_buffer = buffer_of(gate), up_buffer = buffer_of(up), table = buffer_of(words);
  testing::run_ops([&](OpContext& op) {
    geglu_table(op, gate_buffer.range(), up_buffer.range(), static_cast<std::int64_t>(gate.size()), table.range());
  });
  std::vector<float> cpu = gate;
  loom::compute::geglu(cpu.data(), up.data(), static_cast<std::int64_t>(cpu.size()));
  EXPECT_EQ(count_mismatches(cpu, read_back<float>(gate_buffer, gate.size())), 0);
}

}  // namespace
}  // namespace loom::compute::vulkan

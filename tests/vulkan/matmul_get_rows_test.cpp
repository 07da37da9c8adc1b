// get_rows for every weight type: each looked-up row is dequantize_row() of the stored row times the scale,
// bit for bit (the shader dequantizes with the CPU's operations in the CPU's order), a repeated id repeats
// its row, and an id outside the table gives zeros instead of a read past the buffer.
#include <gtest/gtest.h>

#include <bit>
#include <vector>

#include "loom/compute/cpu/dequantize.hpp"
#include "matmul_test_support.hpp"

namespace loom::compute::vulkan {
namespace {

using namespace testing;

class VulkanGetRows : public ::testing::TestWithParam<TensorType> {};

TEST_P(VulkanGetRows, AreTheCpuDequantizedRowsScaled) {
  LOOM_REQUIRE_VULKAN();
  const TensorType type = GetParam();
  const bool is_float = type == TensorType::f32 || type == TensorType::f16 || type == TensorType::bf16;
  for (const std::int64_t cols : is_float ? std::vector<std::int64_t>{512, 300} : std::vector<std::int64_t>{512}) {
    const std::int64_t rows = 40;
    const auto stored = quantized_rows(type, random_values(rows, cols, 5), rows, cols);
    const std::size_t row_bytes = stored.size() / rows;
    Buffer table = device_buffer(stored, "table");
    const std::vector<std::int32_t> tokens{3, 0, 39, 3, 17, 40, -1};
    Buffer ids = device_buffer(tokens, "tokens");
    const auto n = static_cast<std::int64_t>(tokens.size());
    for (const float scale : {1.0f, 0.25f, 3.0f}) {
      Buffer out = empty_buffer(4 * n * cols, "rows");
      run_ops([&](OpContext& op) {
        get_rows(op, DeviceTensor{type, rows, cols, table.range()}, ids.range(), out.range(), n, scale);
      });
      const auto got = download<float>(out.range(), static_cast<std::size_t>(n * cols));
      std::vector<float> expected(static_cast<std::size_t>(cols));
      for (std::int64_t i = 0; i < n; ++i) {
        const bool inside = tokens[i] >= 0 && tokens[i] < rows;
        if (inside) dequantize_row(type, stored.data() + row_bytes * tokens[i], expected.data(), cols);
        for (std::int64_t c = 0; c < cols; ++c) {
          const float want = inside ? scale * expected[c] : 0.0f;
          ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i * cols + c]), std::bit_cast<std::uint32_t>(want))
              << name(type) << " cols " << cols << " scale " << scale << " id " << tokens[i] << " value " << c
              << ": " << got[i * cols + c] << " vs " << want;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryWeightType, VulkanGetRows, ::testing::ValuesIn(kWeightTypes),
                         [](const ::testing::TestParamInfo<TensorType>& tested) { return std::string(name(tested.param)); });

}  // namespace
}  // namespace loom::compute::vulkan

// The pinned products (vulkan_matmul.hpp's Summation::pinned) against the CPU backend's matmul() of the same
// stored weights and F32 activations, bit for bit (EXPECT_EQ on floats): decode (n = 1), a batch smaller
// than the CPU's column tiles (5) and a batch past them (64), so every CPU kernel this machine picks (the
// one-column kernels, the multi-column ones, the AVX-512 panel GEMM) is met; the CPU code states that its
// scalar and SIMD paths give these types the same bits (the K-quants: its AVX2 and AVX-512 paths;
// skipped where the CPU runs scalar).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "loom/compute/cpu/kernel_path.hpp"
#include "loom/compute/cpu/matmul.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/tensor_view.hpp"
#include "matmul_test_support.hpp"

namespace loom::compute::vulkan {
namespace matmul_pinned_test {

using namespace testing;

std::vector<float> cpu_matmul(TensorType type, const std::vector<std::byte>& weights, std::int64_t rows,
                               std::int64_t cols, const std::vector<float>& x, std::int64_t n) {
  TensorView view{"w", type, {cols, rows}, weights.data(), weights.size()};
  ThreadPool pool(1);
  MatmulScratch scratch;
  scratch.reserve(n, cols);
  std::vector<float> y(static_cast<std::size_t>(n * rows));
  matmul(view, x.data(), n, y.data(), pool, scratch);
  return y;
}

class VulkanMatmulPinned : public ::testing::TestWithParam<TensorType> {};

// Rows long enough that an order difference shows.
TEST_P(VulkanMatmulPinned, EqualsTheCpuBackendBitForBit) {
  LOOM_REQUIRE_VULKAN();
  if (!test_device().context->description().shader_float64) GTEST_SKIP() << "no shaderFloat64";
  const TensorType type = GetParam();
  ASSERT_TRUE(pinned_summation_supported(type));
  // The K-quants' pinned orders are the CPU's SIMD kernels' (its scalar kernels sum otherwise).
  const bool k_quant = type == TensorType::q4_k || type == TensorType::q5_k || type == TensorType::q6_k;
  if (k_quant && default_kernel_path() == KernelPath::scalar) GTEST_SKIP() << "the CPU runs scalar kernels";
  // 70 rows (a partial workgroup of 64) of 4 superblocks, or 33 blocks of 32 (an odd count: IQ4_NL's tail).
  const bool superblocks = type == TensorType::iq4_xs || (type >= TensorType::q2_k && type <= TensorType::q6_k);
  const std::int64_t rows = 70, cols = superblocks ? 1024 : 1056;
  const auto stored = quantized_rows(type, random_values(rows, cols, 11 + static_cast<std::uint32_t>(type)), rows, cols);
  Buffer weights = device_buffer(stored, "weights");
  const DeviceTensor tensor{type, rows, cols, weights.range()};
  const ActivationFormat format = activation_format(type);
  for (const std::int64_t n : {1, 5, 64}) {
    const auto x = random_values(n, cols, 500 + static_cast<std::uint32_t>(n));
    const auto expected = cpu_matmul(type, stored, rows, cols, x, n);
    Buffer x_buffer = device_buffer(x, "x");
    Buffer y_buffer = empty_buffer(4 * n * rows, "y");
    Buffer scratch = empty_buffer(prepared_bytes(format, n, cols), "scratch");
    run_ops([&](OpContext& op) { matmul(op, tensor, x_buffer.range(), y_buffer.range(), n, scratch.range(), Summation::pinned); });
    const auto got = download<float>(y_buffer.range(), expected.size());
    int mismatches = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      if (got[i] != expected[i] && ++mismatches <= 3) {
        ADD_FAILURE() << name(type) << " n=" << n << " token " << i / rows << " row " << i % rows << ": vulkan "
                      << got[i] << ", cpu " << expected[i];
      }
    }
    EXPECT_EQ(mismatches, 0) << name(type) << " n=" << n << " of " << expected.size() << " outputs";
  }
}

INSTANTIATE_TEST_SUITE_P(Types, VulkanMatmulPinned, ::testing::Values(TensorType::q8_0, TensorType::q4_0, TensorType::q4_1,
                                                                      TensorType::q5_0, TensorType::q5_1, TensorType::q2_k, TensorType::q3_k,
                                                                      TensorType::q4_k, TensorType::q5_k, TensorType::q6_k,
                                                                      TensorType::iq4_nl, TensorType::iq4_xs),
                         [](const auto& param_info) { return std::string(name(param_info.param)); });

}  // namespace matmul_pinned_test
}  // namespace loom::compute::vulkan

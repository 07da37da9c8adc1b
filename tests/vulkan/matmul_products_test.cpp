// The Vulkan products of every weight type against the CPU backend's matmul of the same stored weights and
// F32 activations, decode (n = 1) and batches (n = 3, 17, 64: a partial token tile, several tiles). Both
// quantize the activations the same way and multiply the same integers, so the results differ only in the
// order of F32 additions: each output is held to 1e-5 of its row's magnitude (sum over c of |w_c * x_c|),
// and the test prints the worst ratio it saw per type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <set>
#include <vector>

#include "loom/compute/cpu/dequantize.hpp"
#include "loom/compute/cpu/matmul.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/model/half.hpp"
#include "loom/compute/model/tensor_view.hpp"
#include "matmul_test_support.hpp"
#include "vulkan/vulkan_matmul_detail.hpp"

namespace loom::compute::vulkan {
namespace {

using namespace testing;

constexpr double kRelativeBound = 1e-5;

struct Shape {
  std::int64_t rows;
  std::int64_t cols;
};

// The CPU backend's product: F16 weights meet activations rounded to f16 first, as its forward pass does.
std::vector<float> cpu_product(TensorType type, const std::vector<std::byte>& weights, const Shape& shape,
                               std::vector<float> x, std::int64_t n) {
  if (type == TensorType::f16) {
    for (float& v : x) v = half_to_float(float_to_half(v));
  }
  TensorView view{"w", type, {shape.cols, shape.rows}, weights.data(), weights.size()};
  ThreadPool pool(1);
  MatmulScratch scratch;
  scratch.reserve(n, shape.cols);
  std::vector<float> y(static_cast<std::size_t>(n * shape.rows));
  matmul(view, x.data(), n, y.data(), pool, scratch);
  return y;
}

// The stored rows' products with n random tokens on the device and on the CPU, every output held to the
// bound; returns the worst |difference| / magnitude.
double compare_products(TensorType type, const std::vector<std::byte>& stored, const Shape& shape,
                        std::initializer_list<std::int64_t> token_counts, detail::Reduction reduction) {
  std::vector<float> dequantized(static_cast<std::size_t>(shape.rows * shape.cols));
  for (std::int64_t r = 0; r < shape.rows; ++r) {
    dequantize_row(type, stored.data() + stored.size() / shape.rows * r, dequantized.data() + r * shape.cols, shape.cols);
  }
  Buffer weights = device_buffer(stored, "weights");
  const DeviceTensor tensor{type, shape.rows, shape.cols, weights.range()};
  double worst = 0.0;
  for (const std::int64_t n : token_counts) {
    const auto x = random_values(n, shape.cols, 1000 + static_cast<std::uint32_t>(n));
    const auto expected = cpu_product(type, stored, shape, x, n);
    const ActivationFormat format = activation_format(type);
    Buffer x_buffer = device_buffer(x, "x");
    Buffer y_buffer = empty_buffer(4 * n * shape.rows, "y");
    Buffer scratch = empty_buffer(prepared_bytes(format, n, shape.cols), "scratch");
    run_ops([&](OpContext& op) {
      prepare_activations(op, format, x_buffer.range(), scratch.range(), n, shape.cols);
      const BufferRange& prepared = format == ActivationFormat::f32 ? x_buffer.range() : scratch.range();
      detail::matmul_prepared(op, tensor, prepared, y_buffer.range(), n, reduction);
    });
    const auto got = download<float>(y_buffer.range(), static_cast<std::size_t>(n * shape.rows));
    for (std::int64_t t = 0; t < n; ++t) {
      for (std::int64_t r = 0; r < shape.rows; ++r) {
        double magnitude = 0.0;
        for (std::int64_t c = 0; c < shape.cols; ++c) {
          magnitude += std::abs(static_cast<double>(dequantized[r * shape.cols + c]) * x[t * shape.cols + c]);
        }
        const std::size_t i = static_cast<std::size_t>(t * shape.rows + r);
        const double diff = std::abs(static_cast<double>(got[i]) - expected[i]);
        worst = std::max(worst, diff / magnitude);
        EXPECT_LE(diff, kRelativeBound * magnitude)
            << name(type) << " " << shape.rows << "x" << shape.cols << " n=" << n << " token " << t << " row " << r
            << ": vulkan " << got[i] << ", cpu " << expected[i];
        if (diff > kRelativeBound * magnitude) return worst;
      }
    }
  }
  return worst;
}

// Random weights stored by the CPU quantizer: 131 rows (a partial row tile) of 512; float weights also
// 67 rows of 300 (a width that is no multiple of 32).
double check_products(TensorType type, std::initializer_list<std::int64_t> token_counts, detail::Reduction reduction) {
  const bool is_float = type == TensorType::f32 || type == TensorType::f16 || type == TensorType::bf16;
  std::vector<Shape> shapes{{131, 512}};
  if (is_float) shapes.push_back({67, 300});
  double worst = 0.0;
  for (const Shape& shape : shapes) {
    const auto values = random_values(shape.rows, shape.cols, 7 + static_cast<std::uint32_t>(type));
    const auto stored = quantized_rows(type, values, shape.rows, shape.cols);
    worst = std::max(worst, compare_products(type, stored, shape, token_counts, reduction));
  }
  return worst;
}

class VulkanMatmul : public ::testing::TestWithParam<TensorType> {};

TEST_P(VulkanMatmul, AgreesWithTheCpuBackendToSummationOrder) {
  LOOM_REQUIRE_VULKAN();
  const TensorType type = GetParam();
  const double worst = check_products(type, {1, 3, 17, 64}, detail::Reduction::automatic);
  std::printf("[ worst    ] %s: |vulkan - cpu| / row magnitude <= %.3g\n", std::string(name(type)).c_str(), worst);
}

// The reduction the device does not pick by itself (lavapipe and GPUs have subgroup arithmetic): the same
// products through shared memory alone, for a type of each family.
TEST(VulkanMatmulSharedMemory, AgreesWithTheCpuBackendToo) {
  LOOM_REQUIRE_VULKAN();
  // Decode and batch tiles between them, a pipeline each (lavapipe compiles every one anew).
  check_products(TensorType::f16, {1}, detail::Reduction::shared_memory);
  check_products(TensorType::q4_1, {17}, detail::Reduction::shared_memory);
  check_products(TensorType::q6_k, {17}, detail::Reduction::shared_memory);
}

// Three products of one input (q, k, v): the activations prepared once, the first two recorded without a
// barrier after them (nothing reads their outputs before the third's barrier), each matching the CPU.
TEST(VulkanMatmulShapes, ProductsOfOneInputShareTheirPreparation) {
  LOOM_REQUIRE_VULKAN();
  const Shape shape{40, 512};
  const std::int64_t n = 3;
  const TensorType types[] = {TensorType::q4_k, TensorType::q6_k, TensorType::iq4_xs};  // all meet Q8_K
  std::vector<std::vector<std::byte>> stored;
  std::vector<Buffer> weights, outputs;
  for (const TensorType type : types) {
    stored.push_back(quantized_rows(type, random_values(shape.rows, shape.cols, 50 + static_cast<std::uint32_t>(type)),
                                    shape.rows, shape.cols));
    weights.push_back(device_buffer(stored.back(), "weights"));
    outputs.push_back(empty_buffer(4 * n * shape.rows, "y"));
  }
  const auto x = random_values(n, shape.cols, 77);
  Buffer input = device_buffer(x, "x");
  Buffer prepared = empty_buffer(prepared_bytes(ActivationFormat::q8_k, n, shape.cols), "prepared");
  run_ops([&](OpContext& op) {
    prepare_activations(op, ActivationFormat::q8_k, input.range(), prepared.range(), n, shape.cols);
    for (std::size_t i = 0; i < 3; ++i) {
      matmul_prepared(op, {types[i], shape.rows, shape.cols, weights[i].range()}, prepared.range(), outputs[i].range(), n,
                      i < 2 ? Barrier::none : Barrier::after);
    }
  });
  for (std::size_t i = 0; i < 3; ++i) {
    const auto expected = cpu_product(types[i], stored[i], shape, x, n);
    const auto got = download<float>(outputs[i].range(), expected.size());
    for (std::size_t k = 0; k < expected.size(); ++k) {
      ASSERT_NEAR(got[k], expected[k], 1e-5 * (std::abs(expected[k]) + 1.0)) << name(types[i]) << " output " << k;
    }
  }
}

// More row tiles than a dispatch's x dimension takes on lavapipe (65535): the grid wraps into z, and every
// row must still be computed once, the last ones included.
TEST(VulkanMatmulShapes, ManyRowsWrapTheGrid) {
  LOOM_REQUIRE_VULKAN();
  const auto max_x = test_device().context->description().max_workgroup_count[0];
  if (max_x > 100000) GTEST_SKIP() << "this device takes " << max_x << " workgroups along x: no wrap to test";
  const Shape shape{2 * static_cast<std::int64_t>(max_x) + 77, 32};
  const auto values = random_values(shape.rows, shape.cols, 3);
  const auto stored = quantized_rows(TensorType::q4_0, values, shape.rows, shape.cols);
  compare_products(TensorType::q4_0, stored, shape, {1}, detail::Reduction::automatic);
}

// Real rows: the first matrix of each stored type met in ../shared/models' files (their output and
// embedding matrices bring Q6_K and Q4_K, the Q2_K file Q3_K too), its first 96 rows against one token,
// so the layouts are also those of files our quantizers did not write.
struct RealFile {
  const char* file;
  std::vector<TensorType> types;  // the matrix types it holds, each tested once
};

void PrintTo(const RealFile& real, std::ostream* out) { *out << real.file; }

class VulkanMatmulRealRows : public ::testing::TestWithParam<RealFile> {};

TEST_P(VulkanMatmulRealRows, AgreeWithTheCpuBackend) {
  LOOM_REQUIRE_VULKAN();
  const RealFile& real = GetParam();
  const std::string path = std::string(LOOM_SHARED_DIR) + "/models/" + real.file;
  ASSERT_TRUE(std::filesystem::exists(path)) << "missing test model " << path;
  const GgufFile gguf = GgufFile::open(path);
  std::set<TensorType> seen;
  for (const TensorView& tensor : gguf.tensors()) {
    if (tensor.dims.size() != 2 || tensor.type == TensorType::f32 || seen.count(tensor.type) != 0) continue;
    seen.insert(tensor.type);
    const Shape shape{std::min<std::int64_t>(tensor.rows(), 96), tensor.cols()};
    const std::vector<std::byte> stored(tensor.data, tensor.data + tensor.row_bytes() * shape.rows);
    const double worst = compare_products(tensor.type, stored, shape, {1}, detail::Reduction::automatic);
    std::printf("[ worst    ] %s %s (%s, %ld x %ld): %.3g\n", real.file, tensor.name.c_str(),
                std::string(name(tensor.type)).c_str(), static_cast<long>(shape.rows), static_cast<long>(shape.cols), worst);
  }
  EXPECT_EQ(seen, std::set<TensorType>(real.types.begin(), real.types.end()));
}

INSTANTIATE_TEST_SUITE_P(
    SharedModels, VulkanMatmulRealRows,
    ::testing::Values(RealFile{"synth11M-q4_0.gguf", {TensorType::q4_0, TensorType::q6_k}},
                      RealFile{"synth11M-q8_0.gguf", {TensorType::q8_0}},
                      RealFile{"synth11M-q4_k_m.gguf", {TensorType::q4_k, TensorType::q6_k}},
                      RealFile{"synth11M-f16.gguf", {TensorType::f16}},
                      RealFile{"synthq256-q2_k.gguf", {TensorType::q2_k, TensorType::q3_k, TensorType::q6_k}},
                      RealFile{"synthq256-iq4_xs.gguf", {TensorType::iq4_xs, TensorType::q6_k}}),
    [](const ::testing::TestParamInfo<RealFile>& tested) {
      std::string label = tested.param.file;
      label = label.substr(0, label.find('.'));
      for (char& c : label) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return label;
    });

INSTANTIATE_TEST_SUITE_P(EveryWeightType, VulkanMatmul, ::testing::ValuesIn(kWeightTypes),
                         [](const ::testing::TestParamInfo<TensorType>& tested) { return std::string(name(tested.param)); });

TEST(VulkanMatmulShapes, RefusesWhatTheShadersCannotTake) {
  LOOM_REQUIRE_VULKAN();
  Buffer weights = empty_buffer(4096, "weights");
  Buffer io = empty_buffer(4096, "io");
  run_ops([&](OpContext& op) {
    // Q4_0 rows of 48 values: not whole blocks.
    EXPECT_THROW(matmul_prepared(op, {TensorType::q4_0, 2, 48, weights.range()}, io.range(), io.range(), 1),
                 std::invalid_argument);
    // A buffer too small for the tensor it claims to hold.
    EXPECT_THROW(matmul_prepared(op, {TensorType::f32, 64, 64, weights.range()}, io.range(), io.range(), 1),
                 std::invalid_argument);
    EXPECT_THROW(get_rows(op, {TensorType::q8_k, 1, 256, weights.range()}, io.range(), io.range(), 1),
                 std::invalid_argument);
  });
  run_ops([&](OpContext& op) {  // no tokens: nothing to record
    matmul(op, {TensorType::q4_0, 2, 64, weights.range()}, io.range(), io.range(), 0, io.range());
    get_rows(op, {TensorType::q4_0, 2, 64, weights.range()}, io.range(), io.range(), 0);
    EXPECT_EQ(op.recording.dispatches(), 0u);
  });
  EXPECT_FALSE(supports_weight_type(TensorType::q8_k));
  EXPECT_THROW(activation_format(TensorType::i32), std::invalid_argument);
}

}  // namespace
}  // namespace loom::compute::vulkan

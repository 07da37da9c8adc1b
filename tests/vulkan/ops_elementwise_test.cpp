// The Vulkan ops that are one pass over their values (norms, element-wise steps, rotary embeddings, row
// gathers, the KV store) against double-precision computations written here from the definitions. Bounds:
// add, add_bias, scale and gather_rows are one float operation per value (or none), so exact; store_kv is exact
// too (F16: the CPU's round-to-nearest-even bits). The others carry the shader's float roundings and the
// device's exp/tanh/sqrt: rms_norm 2e-6 relative (lavapipe: 1.7e-7); swiglu 1e-5 relative, as Vulkan lets exp
// err by 3 + 2|x| ulp and gates reach |x| = 30 (lavapipe: 5e-7); geglu is the CPU's gelu_tanh (F16 in and
// out) up to one F16 step where the device's tanh rounds across a boundary; soft_cap 1e-6 relative + 1e-5 with
// a cap of 30, tanh's error being absolute (lavapipe: 5e-6); rope 2 ulp of the pair's magnitude.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "loom/compute/cpu/activations.hpp"
#include "loom/compute/model/half.hpp"
#include "loom/compute/vulkan/vulkan_ops.hpp"
#include "ops_test_support.hpp"

namespace loom::compute::vulkan {
namespace {

using testing::buffer_of;
using testing::random_floats;
using testing::read_back;
using testing::run_ops;

// out = x / sqrt(mean(x^2) + eps) * w, the squares in float and summed in double (the CPU's definition).
std::vector<double> rms_norm_reference(const std::vector<float>& x, const std::vector<float>& w, std::size_t rows,
                                       std::size_t width, float epsilon) {
  std::vector<double> out(rows * width);
  for (std::size_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (std::size_t i = 0; i < width; ++i) sum += static_cast<double>(x[r * width + i] * x[r * width + i]);
    const double factor = 1.0 / std::sqrt(sum / static_cast<double>(width) + epsilon);
    for (std::size_t i = 0; i < width; ++i) out[r * width + i] = x[r * width + i] * factor * w[i];
  }
  return out;
}

void expect_near_relative(const std::vector<float>& got, const std::vector<double>& want, double relative,
                          double absolute) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], relative * std::fabs(want[i]) + absolute) << "at " << i;
  }
}

TEST(VulkanOps, RmsNormOfWideRowsAndOfHeadsInPlace) {
  LOOM_REQUIRE_VULKAN();
  for (const std::size_t width : {std::size_t{4096}, std::size_t{128}}) {
    const std::size_t rows = width == 128 ? 37 : 3;
    const auto x = random_floats(rows * width, -3.0f, 3.0f, 11);
    const auto w = random_floats(width, 0.5f, 1.5f, 12);
    auto x_buffer = buffer_of(x);
    auto w_buffer = buffer_of(w);
    auto out_buffer = buffer_of(std::vector<float>(rows * width));
    // The wide rows go to a separate output; the heads are normed in place (out = x), as qk-norm does.
    const Buffer& out = width == 128 ? x_buffer : out_buffer;
    run_ops([&](OpContext& op) { rms_norm(op, x_buffer.range(), w_buffer.range(), out.range(), rows, width, 1e-5f); });
    expect_near_relative(read_back<float>(out, rows * width), rms_norm_reference(x, w, rows, width, 1e-5f), 2e-6, 0.0);
  }
}

TEST(VulkanOps, AddAddBiasAndScaleAreExact) {
  LOOM_REQUIRE_VULKAN();
  const std::size_t n = 5, width = 300;
  const auto x = random_floats(n * width, -4.0f, 4.0f, 21);
  const auto y = random_floats(n * width, -4.0f, 4.0f, 22);
  const auto bias = random_floats(width, -1.0f, 1.0f, 23);
  auto added = buffer_of(x), biased = buffer_of(x), scaled = buffer_of(x);
  auto y_buffer = buffer_of(y), bias_buffer = buffer_of(bias);
  run_ops([&](OpContext& op) {
    add(op, added.range(), y_buffer.range(), n * width);
    add_bias(op, biased.range(), bias_buffer.range(), n, width);
    scale(op, scaled.range(), n * width, 0.3f);
  });
  const auto got_added = read_back<float>(added, n * width);
  const auto got_biased = read_back<float>(biased, n * width);
  const auto got_scaled = read_back<float>(scaled, n * width);
  for (std::size_t i = 0; i < n * width; ++i) {
    ASSERT_EQ(got_added[i], x[i] + y[i]) << i;
    ASSERT_EQ(got_biased[i], x[i] + bias[i % width]) << i;
    ASSERT_EQ(got_scaled[i], x[i] * 0.3f) << i;
  }
}

TEST(VulkanOps, SoftCapSwigluAndGegluFollowTheirFormulas) {
  LOOM_REQUIRE_VULKAN();
  const std::size_t count = 20000;
  // Gates from -30 to 30 reach GELU's and SiLU's flat ends; logits up to 120 reach the cap's.
  const auto gate = random_floats(count, -30.0f, 30.0f, 31);
  const auto up = random_floats(count, -2.0f, 2.0f, 32);
  const auto logits = random_floats(count, -120.0f, 120.0f, 33);
  auto silu_gate = buffer_of(gate), gelu_gate = buffer_of(gate), capped = buffer_of(logits), up_buffer = buffer_of(up);
  const float cap = 30.0f;
  run_ops([&](OpContext& op) {
    swiglu(op, silu_gate.range(), up_buffer.range(), count);
    geglu(op, gelu_gate.range(), up_buffer.range(), count);
    soft_cap(op, capped.range(), count, cap);
  });
  std::vector<double> want_silu(count), want_capped(count);
  for (std::size_t i = 0; i < count; ++i) {
    const double g = gate[i];
    want_silu[i] = g / (1.0 + std::exp(-g)) * up[i];
    want_capped[i] = cap * std::tanh(logits[i] / static_cast<double>(cap));
  }
  expect_near_relative(read_back<float>(silu_gate, count), want_silu, 1e-5, 1e-30);
  // GeGLU's definition is the CPU's gelu_tanh (F16 in, F16 out): equal, or one F16 step (2^-10 relative)
  // apart where the device's tanh lands across a rounding boundary (6 of ~4,000 gates in (-3, 10) on
  // lavapipe; at most 1% allowed). Below -3, 1 + tanh cancels, on the CPU too, and tanh's absolute error
  // (~1e-7, times |x| < 10) moves the tiny results there by a few F16 subnormal steps: bound 1e-6 absolute.
  const auto got_gelu = read_back<float>(gelu_gate, count);
  std::size_t checked = 0, different = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const float gelu = gelu_tanh(gate[i]);
    if (gate[i] > -3.0f && gate[i] < 10.0f) {
      ++checked;
      different += got_gelu[i] == gelu * up[i] ? 0 : 1;
    }
    ASSERT_NEAR(got_gelu[i], gelu * up[i], std::fabs(up[i]) * (std::ldexp(std::fabs(gelu), -10) + 1e-6)) << gate[i];
  }
  EXPECT_LE(different, checked / 100) << "of " << checked;
  expect_near_relative(read_back<float>(capped, count), want_capped, 1e-6, 1e-5);
}

TEST(VulkanOps, RopeRotatesAdjacentPairsAndNeoxHalves) {
  LOOM_REQUIRE_VULKAN();
  const std::size_t n = 3, heads = 5, head_dim = 64, pairs = head_dim / 2;
  const auto vectors = random_floats(n * heads * head_dim, -2.0f, 2.0f, 41);
  std::vector<float> rotation(n * head_dim);
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t i = 0; i < pairs; ++i) {
      const double angle = static_cast<double>(t + 17) * std::pow(10000.0, -2.0 * i / head_dim);
      rotation[t * head_dim + 2 * i] = static_cast<float>(std::cos(angle));
      rotation[t * head_dim + 2 * i + 1] = static_cast<float>(std::sin(angle));
    }
  }
  for (const bool adjacent : {true, false}) {
    auto vector_buffer = buffer_of(vectors);
    auto rotation_buffer = buffer_of(rotation);
    run_ops([&](OpContext& op) { rope(op, vector_buffer.range(), rotation_buffer.range(), n, heads, head_dim, adjacent); });
    const auto got = read_back<float>(vector_buffer, vectors.size());
    for (std::size_t row = 0; row < n * heads; ++row) {
      const std::size_t t = row / heads;
      for (std::size_t i = 0; i < pairs; ++i) {
        const std::size_t a = row * head_dim + (adjacent ? 2 * i : i);
        const std::size_t b = row * head_dim + (adjacent ? 2 * i + 1 : i + pairs);
        const double c = rotation[t * head_dim + 2 * i], s = rotation[t * head_dim + 2 * i + 1];
        const double bound = 2.0 * std::ldexp(std::fabs(vectors[a]) + std::fabs(vectors[b]), -23);
        ASSERT_NEAR(got[a], vectors[a] * c - vectors[b] * s, bound) << "adjacent " << adjacent << " at " << a;
        ASSERT_NEAR(got[b], vectors[a] * s + vectors[b] * c, bound) << "adjacent " << adjacent << " at " << b;
      }
    }
  }
}

TEST(VulkanOps, GatherRowsCopiesTheNamedRows) {
  LOOM_REQUIRE_VULKAN();
  const std::size_t width = 70;
  const auto source = random_floats(10 * width, -1.0f, 1.0f, 51);
  const std::vector<std::int32_t> rows{9, 0, 4, 4, 7};
  auto source_buffer = buffer_of(source), rows_buffer = buffer_of(rows);
  auto destination = buffer_of(std::vector<float>(rows.size() * width));
  run_ops([&](OpContext& op) {
    gather_rows(op, source_buffer.range(), rows_buffer.range(), destination.range(), rows.size(), width);
  });
  const auto got = read_back<float>(destination, rows.size() * width);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t j = 0; j < width; ++j) ASSERT_EQ(got[i * width + j], source[rows[i] * width + j]) << i << "," << j;
  }
}

// Keys and values land at [block][kv_head][slot][head_dim]; every other element keeps its sentinel.
void check_store_kv(TensorType type) {
  KvLayout layout{type, 4, 3, 8};
  const std::size_t blocks = 5, n = 4, row = layout.kv_heads * layout.head_dim;
  const std::size_t elements = blocks * row * layout.block_size;
  const std::size_t element_bytes = type == TensorType::f16 ? 2 : 4;
  // Keys from F16's subnormals (2^-24 and below) to past its largest value (infinities), to check the rounding.
  auto k = random_floats(n * row, -1.0f, 1.0f, 61);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = std::ldexp(k[i], static_cast<int>(i % 44) - 26);
  const auto v = random_floats(n * row, -1.0f, 1.0f, 62);
  const std::vector<std::int32_t> slots{4 * 3 + 1, 4 * 0 + 3, -1, 4 * 4 + 0};  // token 2 is not stored
  const std::vector<std::uint8_t> sentinel(elements * element_bytes, 0xAB);
  auto k_buffer = buffer_of(k), v_buffer = buffer_of(v), slot_buffer = buffer_of(slots);
  auto keys = buffer_of(sentinel), values = buffer_of(sentinel);
  run_ops([&](OpContext& op) {
    store_kv(op, layout, k_buffer.range(), v_buffer.range(), slot_buffer.range(), keys.range(), values.range(), n);
  });
  const auto got_keys = read_back<std::uint8_t>(keys, sentinel.size());
  const auto got_values = read_back<std::uint8_t>(values, sentinel.size());
  auto expected_keys = sentinel, expected_values = sentinel;
  for (std::size_t t = 0; t < n; ++t) {
    if (slots[t] < 0) continue;
    const std::size_t block = slots[t] / layout.block_size, slot = slots[t] % layout.block_size;
    for (std::size_t h = 0; h < static_cast<std::size_t>(layout.kv_heads); ++h) {
      for (std::size_t d = 0; d < static_cast<std::size_t>(layout.head_dim); ++d) {
        const std::size_t at = ((block * layout.kv_heads + h) * layout.block_size + slot) * layout.head_dim + d;
        const std::size_t from = t * row + h * layout.head_dim + d;
        if (type == TensorType::f16) {
          const std::uint16_t key = float_to_half(k[from]), value = float_to_half(v[from]);
          std::memcpy(&expected_keys[at * 2], &key, 2);
          std::memcpy(&expected_values[at * 2], &value, 2);
        } else {
          std::memcpy(&expected_keys[at * 4], &k[from], 4);
          std::memcpy(&expected_values[at * 4], &v[from], 4);
        }
      }
    }
  }
  EXPECT_EQ(got_keys, expected_keys);
  EXPECT_EQ(got_values, expected_values);
}

TEST(VulkanOps, StoreKvWritesF16BitsAsTheCpuRoundsThem) {
  LOOM_REQUIRE_VULKAN();
  check_store_kv(TensorType::f16);
}

TEST(VulkanOps, StoreKvWritesF32Exactly) {
  LOOM_REQUIRE_VULKAN();
  check_store_kv(TensorType::f32);
}

TEST(VulkanOps, RejectsShapesTheShadersCannotTake) {
  LOOM_REQUIRE_VULKAN();
  auto small = buffer_of(std::vector<float>(16));
  EXPECT_THROW(run_ops([&](OpContext& op) { add(op, small.range(), small.range(), 17); }), std::invalid_argument);
  EXPECT_THROW(run_ops([&](OpContext& op) { rope(op, small.range(), small.range(), 1, 1, 3, true); }),
               std::invalid_argument);
}

}  // namespace
}  // namespace loom::compute::vulkan

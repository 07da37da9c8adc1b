// matmul_many over weights whose kernels want different activation types: the K-quant recipes' fallbacks
// put Q5_0 (Q8_0 activations), Q5_1 (Q8_1) and K-quants (Q8_K) side by side in one product group, so one
// call converts the input three ways. Each product must equal the same product run alone, bit for bit.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "loom/compute/cpu/matmul.hpp"
#include "loom/compute/cpu/quantize.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/cpu/vec_dot.hpp"
#include "loom/compute/model/tensor_view.hpp"
#include "loom/compute/tensor_type.hpp"

namespace loom::compute {
namespace {

struct Weight {
  std::vector<std::byte> data;
  TensorView view;
};

Weight random_weight(TensorType type, std::int64_t cols, std::int64_t rows, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 0.05f);
  std::vector<float> values(static_cast<std::size_t>(cols * rows));
  for (auto& v : values) v = gauss(rng);
  Weight w;
  const std::uint64_t row_bytes = *tensor_bytes(type, static_cast<std::uint64_t>(cols));
  w.data.resize(row_bytes * static_cast<std::uint64_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    quantize_row(type, &values[static_cast<std::size_t>(r * cols)], &w.data[row_bytes * static_cast<std::uint64_t>(r)], cols);
  }
  w.view = TensorView{"w", type, {cols, rows}, w.data.data(), w.data.size()};
  return w;
}

TEST(MatmulMany, ThreeActivationTypesInOneGroup) {
  constexpr std::int64_t kCols = 512, kTokens = 3;
  const Weight a = random_weight(TensorType::q5_0, kCols, 40, 1);
  const Weight b = random_weight(TensorType::q5_1, kCols, 24, 2);
  const Weight c = random_weight(TensorType::q4_k, kCols, 16, 3);
  ASSERT_NE(activation_type(a.view.type), activation_type(b.view.type));
  ASSERT_NE(activation_type(b.view.type), activation_type(c.view.type));
  ASSERT_NE(activation_type(a.view.type), activation_type(c.view.type));
  std::mt19937 rng(4);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(kCols * kTokens));
  for (auto& v : x) v = gauss(rng);
  ThreadPool pool(2);
  MatmulScratch scratch;
  scratch.reserve(kTokens, kCols);
  std::vector<float> ya(40 * kTokens), yb(24 * kTokens), yc(16 * kTokens);
  matmul_many({{&a.view, ya.data()}, {&b.view, yb.data()}, {&c.view, yc.data()}}, x.data(), kTokens, pool, scratch);
  for (const auto& [w, together] : {std::pair{&a, &ya}, std::pair{&b, &yb}, std::pair{&c, &yc}}) {
    std::vector<float> alone(together->size());
    matmul(w->view, x.data(), kTokens, alone.data(), pool, scratch);
    for (std::size_t i = 0; i < alone.size(); ++i) {
      ASSERT_EQ((*together)[i], alone[i]) << name(w->view.type) << " output " << i;
    }
  }
}

}  // namespace
}  // namespace loom::compute

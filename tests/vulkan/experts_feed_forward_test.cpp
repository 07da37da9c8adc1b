// The Vulkan mixture-of-experts feed-forward (vulkan_experts.hpp, expert_feed_forward) against the CPU's
// ExpertFeedForward on the same layer and inputs: layer 0 of the shared synthetic qwen3moe (Q8_0) and Mixtral
// (F16) files, and a synthesized qwen2moe with its gated shared expert (Q4_K, weights not renormalized), for a
// decode token and a batch of tokens. Measured on lavapipe: 2e-7 (quantized) and 5e-6 (F16) of the largest
// change to the residual; the bound leaves room for other devices' summation orders.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "loom/compute/cpu/expert_feed_forward.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/model_synth.hpp"
#include "loom/compute/vulkan/vulkan_experts.hpp"
#include "matmul_test_support.hpp"
#include "test_files.hpp"

namespace loom::compute::vulkan {
namespace {

using testing::device_buffer;
using testing::download;
using testing::empty_buffer;
using testing::random_values;
using testing::run_ops;

std::unique_ptr<LoadedModel> shared_model(const std::string& file) {
  return LoadedModel::open(compute::testing::shared_path("models/" + file));
}

std::unique_ptr<LoadedModel> synthesized_qwen2moe() {
  SynthSpec spec;
  spec.architecture = Architecture::qwen2moe;
  spec.type = TensorType::q4_k;
  spec.dim = 256;
  spec.ffn_dim = 256;
  spec.layers = 1;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.vocab_size = 64;
  spec.context_length = 32;
  spec.seed = 9;
  spec.experts = 6;
  spec.experts_used = 3;
  spec.expert_ffn_dim = 256;
  spec.shared_expert_ffn_dim = 256;
  const auto path = (std::filesystem::temp_directory_path() / "loom_vulkan_experts_qwen2moe.gguf").string();
  write_synthetic_model(spec, path);
  auto loaded = LoadedModel::open(path);
  std::filesystem::remove(path);  // mapped: the mapping stays valid
  return loaded;
}

// Layer 0's feed-forward of n random inputs on both backends; the largest difference relative to the
// largest change the CPU made to the residual.
double relative_difference(const LoadedModel& model, std::int64_t n) {
  const ModelConfig& c = model.config();
  const LayerWeights& layer = model.weights().layers.front();
  std::vector<float> xn = random_values(n, c.dim, 21);
  for (float& v : xn) v *= 20.0f;  // the size of a normed activation: the router's choices are clear
  const std::vector<float> residual = random_values(n, c.dim, 22);

  std::vector<float> cpu = residual;
  ThreadPool pool(1);
  ExpertFeedForward cpu_experts(c, n);
  cpu_experts.forward(layer, xn.data(), n, cpu.data(), pool, KernelPath::avx2);

  auto& dev = testing::test_device();
  std::vector<Buffer> owner;
  Uploader uploader(*dev.context, 1 << 20);
  const DeviceExperts experts = upload_experts(*dev.context, uploader, c, layer, owner);
  Buffer x_buffer = device_buffer(xn, "xn"), r_buffer = device_buffer(residual, "residual");
  Buffer scratch = empty_buffer(expert_scratch_bytes(experts, n), "scratch");
  run_ops([&](OpContext& op) { expert_feed_forward(op, experts, x_buffer.range(), r_buffer.range(), n, scratch.range()); });
  const auto gpu = download<float>(r_buffer.range(), static_cast<std::size_t>(n * c.dim));

  double largest_change = 0.0, largest_difference = 0.0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    largest_change = std::max(largest_change, std::abs(static_cast<double>(cpu[i]) - residual[i]));
    largest_difference = std::max(largest_difference, std::abs(static_cast<double>(gpu[i]) - cpu[i]));
  }
  EXPECT_GT(largest_change, 0.0);
  return largest_difference / largest_change;
}

TEST(ExpertsFeedForward, MatchesTheCpuOnQwen3moeQ8_0) {
  LOOM_REQUIRE_VULKAN();
  const auto model = shared_model("synth-qwen3moe-q8_0.gguf");
  EXPECT_LT(relative_difference(*model, 1), 1e-4);
  EXPECT_LT(relative_difference(*model, 5), 1e-4);
}

TEST(ExpertsFeedForward, MatchesTheCpuOnMixtralF16) {
  LOOM_REQUIRE_VULKAN();
  const auto model = shared_model("synth-mixtral-f16.gguf");
  EXPECT_LT(relative_difference(*model, 1), 1e-4);
  EXPECT_LT(relative_difference(*model, 5), 1e-4);
}

TEST(ExpertsFeedForward, MatchesTheCpuOnQwen2moeWithItsSharedExpert) {
  LOOM_REQUIRE_VULKAN();
  const auto model = synthesized_qwen2moe();
  ASSERT_FALSE(model->config().expert_weights_norm);
  ASSERT_NE(model->weights().layers.front().shared_expert_gate, nullptr);
  EXPECT_LT(relative_difference(*model, 1), 1e-4);
  EXPECT_LT(relative_difference(*model, 4), 1e-4);
}

}  // namespace
}  // namespace loom::compute::vulkan

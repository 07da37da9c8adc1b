// Mixture-of-experts files through the Vulkan backend's run(), as the engine drives it: greedy tokens equal
// the CPU backend's (synth-mixtral-f16), one decode recording serves every step whatever experts its token
// picks, and two sequences prefilled in one step (their tokens routed together) each get what they get alone
// (synth-qwen3moe-q8_0).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend_test_support.hpp"
#include "vulkan_test_device.hpp"

namespace loom::compute::vulkan::testing {
// Named, not anonymous: the suite is a unity build and attention_paged_test.cpp / backend_steps_test.cpp use the
// same helper names.
namespace experts_backend_test {

const std::vector<std::int32_t> kPrompt{1, 17, 42, 5, 88, 3, 60, 9};
const std::vector<std::int32_t> kOther{2, 71, 30, 12, 99, 45, 7, 64, 23, 50, 11};

std::vector<std::int32_t> greedy_tokens(Backend& backend, std::size_t steps) {
  const std::vector<BlockId> table = blocks(0, 4);
  std::vector<std::int32_t> out;
  out.push_back(backend.run(StepBatch{.sequences = {greedy_start(1, kPrompt, table)}}).sampled.at(0).token);
  for (std::size_t i = 1; i < steps; ++i) {
    const auto position = static_cast<std::int64_t>(kPrompt.size() + i - 1);
    const StepResult r = backend.run(StepBatch{.sequences = {decode(1, out.back(), position, 4)}});
    out.push_back(r.sampled.at(0).token);
  }
  backend.release(1);
  return out;
}

TEST(ExpertsBackend, GreedyTokensEqualTheCpuBackendsWithOneDecodeRecording) {
  LOOM_REQUIRE_VULKAN();
  const LoadOptions options = shared_model_options("synth-mixtral-f16.gguf", 256);
  const auto vulkan = VulkanBackend::load(options);
  LoadOptions cpu_options = options;
  cpu_options.device = "cpu";
  const auto cpu = CpuBackend::load(cpu_options);
  EXPECT_EQ(greedy_tokens(*vulkan, 6), greedy_tokens(*cpu, 6));
  EXPECT_EQ(vulkan->recordings_made(), 2u);  // the prefill's shape and the decode steps'
}

TEST(ExpertsBackend, SequencesInOneStepGetWhatEachGetsAlone) {
  LOOM_REQUIRE_VULKAN();
  const auto backend = VulkanBackend::load(shared_model_options("synth-qwen3moe-q8_0.gguf", 256));
  expect_together_as_alone(*backend, kPrompt, kOther);
}

}  // namespace experts_backend_test
}  // namespace loom::compute::vulkan::testing

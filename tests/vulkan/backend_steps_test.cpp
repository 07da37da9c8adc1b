// The Vulkan backend through Backend::run(), as the engine drives it: its greedy tokens equal the CPU
// backend's, sequences with scattered block tables in one step give what each gives alone, a forked
// sequence's copy-on-write blocks keep its history, a shape's recording is made once and reused, and the
// load refuses what it cannot run with a message that says so.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend_test_support.hpp"
#include "vulkan_test_device.hpp"

namespace loom::compute::vulkan::testing {
namespace {

constexpr const char* kModel = "aidreams260K.gguf";
const std::vector<std::int32_t> kPrompt{1, 429, 491, 433, 295, 429, 444, 445, 265, 262, 263, 342};  // "Once upon a time"

// Greedy decoding of `steps` tokens after `prompt` through run(), one sequence with blocks `table`.
std::vector<std::int32_t> greedy_tokens(Backend& backend, const std::vector<BlockId>& table, std::size_t steps) {
  std::vector<std::int32_t> out;
  StepResult first = backend.run(StepBatch{.sequences = {greedy_start(1, kPrompt, table)}});
  out.push_back(first.sampled.at(0).token);
  for (std::size_t i = 1; i < steps; ++i) {
    const auto position = static_cast<std::int64_t>(kPrompt.size() + i - 1);
    const StepResult r = backend.run(StepBatch{.sequences = {decode(1, out.back(), position, static_cast<std::int64_t>(table.size()))}});
    out.push_back(r.sampled.at(0).token);
  }
  backend.release(1);
  return out;
}

TEST(VulkanBackendSteps, GreedyTokensEqualTheCpuBackendsAndOneRecordingServesEveryDecodeStep) {
  LOOM_REQUIRE_VULKAN();
  const LoadOptions options = shared_model_options(kModel, 256);
  const auto vulkan = VulkanBackend::load(options);
  LoadOptions cpu_options = options;
  cpu_options.device = "cpu";
  const auto cpu = CpuBackend::load(cpu_options);
  const std::vector<BlockId> table = blocks(0, 4);
  const auto expected = greedy_tokens(*cpu, table, 12);
  EXPECT_EQ(greedy_tokens(*vulkan, table, 12), expected);
  // One prefill shape, one decode shape: 11 decode steps reused the second recording.
  EXPECT_EQ(vulkan->recordings_made(), 2u);
  EXPECT_EQ(greedy_tokens(*vulkan, table, 12), expected);
  EXPECT_EQ(vulkan->recordings_made(), 2u);
}

// The device's own arithmetic (a GPU's default: online-softmax attention, tiled products) gives the same greedy
// tokens on this F32 model, whose logits are well apart, as the CPU backend; on lavapipe it is chosen here, as
// lavapipe starts pinned.
TEST(VulkanBackendSteps, TheFastArithmeticGivesTheCpuBackendsGreedyTokens) {
  LOOM_REQUIRE_VULKAN();
  const LoadOptions options = shared_model_options(kModel, 256);
  const auto vulkan = VulkanBackend::load(options);
  EXPECT_EQ(vulkan->pinned_arithmetic(), vulkan->device().type == "cpu" && vulkan->device().shader_float64)
      << "pinned by default on a CPU device only";
  vulkan->set_pinned_arithmetic(false);
  LoadOptions cpu_options = options;
  cpu_options.device = "cpu";
  const auto cpu = CpuBackend::load(cpu_options);
  const std::vector<BlockId> table = blocks(0, 4);
  EXPECT_EQ(greedy_tokens(*vulkan, table, 12), greedy_tokens(*cpu, table, 12));
  if (vulkan->device().shader_float64) {  // and back: the pinned attention's scratch is grown on demand
    vulkan->set_pinned_arithmetic(true);
    EXPECT_EQ(greedy_tokens(*vulkan, table, 12), greedy_tokens(*cpu, table, 12));
  }
}

TEST(VulkanBackendSteps, InterleavedSequencesWithScatteredBlocksGiveWhatEachGivesAlone) {
  LOOM_REQUIRE_VULKAN();
  const auto backend = VulkanBackend::load(shared_model_options(kModel, 256));
  const std::vector<std::int32_t> other{1, 368, 430, 429, 472, 444, 353, 453, 294, 302, 449, 433, 279, 437, 458, 429, 467, 348, 445};
  expect_together_as_alone(*backend, kPrompt, other);
}

// Rows read back whole come first on the device, best-token rows after: a greedy sequence after one with
// logprobs in the batch still gets its own row's token, the one the logprobs sequence picks from the same prompt.
TEST(VulkanBackendSteps, WholeRowsAndBestTokenRowsInOneStepEachGetTheirOwnRow) {
  LOOM_REQUIRE_VULKAN();
  const auto backend = VulkanBackend::load(shared_model_options(kModel, 256));
  const std::vector<std::int32_t> other{1, 368, 430, 429, 472, 444, 353};
  const StepResult alone = backend->run(StepBatch{.sequences = {greedy_start(5, other, {6})}});
  backend->release(5);
  const StepResult r = backend->run(StepBatch{.sequences = {greedy_start(1, other, {0}),
                                                            with_logprobs(greedy_start(2, kPrompt, {1})),
                                                            greedy_start(3, kPrompt, {2})}});
  ASSERT_EQ(r.sampled.size(), 3u);
  EXPECT_EQ(r.sampled[0].token, alone.sampled[0].token);
  EXPECT_EQ(r.sampled[2].token, r.sampled[1].token);
  EXPECT_EQ(r.sampled[1].top.at(0).token, r.sampled[1].token);
  EXPECT_TRUE(r.sampled[0].top.empty());
}

// Sequences that each start on kPrompt with their own params (table: blocks {i, i + count}), decoded together for
// `steps` tokens; each sequence's tokens.
std::vector<std::vector<std::int32_t>> decode_together(Backend& backend, const std::vector<proto::SamplingParams>& params,
                                                       std::size_t steps) {
  const auto count = static_cast<BlockId>(params.size());
  StepBatch batch;
  for (BlockId i = 0; i < count; ++i) {
    StepSequence s = greedy_start(i + 1, kPrompt, {i, i + count});
    s.begin->params = params[static_cast<std::size_t>(i)];
    batch.sequences.push_back(std::move(s));
  }
  std::vector<std::vector<std::int32_t>> tokens(params.size());
  for (std::size_t step = 0; step < steps; ++step) {
    const StepResult r = backend.run(batch);
    EXPECT_EQ(r.sampled.size(), params.size());
    batch.sequences.clear();
    for (std::size_t i = 0; i < r.sampled.size(); ++i) {
      EXPECT_TRUE(r.sampled[i].error.empty()) << r.sampled[i].error;
      tokens[i].push_back(r.sampled[i].token);
      batch.sequences.push_back(decode(r.sampled[i].sequence, r.sampled[i].token,
                                       static_cast<std::int64_t>(kPrompt.size() + step), 2));
    }
  }
  for (BlockId i = 0; i < count; ++i) backend.release(i + 1);
  return tokens;
}

// A temperature-sampled sequence with top-k comes back as its row's best candidates, not its whole row, and draws
// what the whole row draws: beside it in the same step, the same prompt and seed with logprobs (which need the
// whole row) draws the same tokens. Greedy rows, top_k 63 (64 candidates, the most the device selects) and top_k
// 64 (65 needed: the whole row) in the same steps; in the pinned arithmetic every draw equals the CPU backend's.
TEST(VulkanBackendSteps, SampledRowsFromTheBestCandidatesDrawWhatTheWholeRowDraws) {
  LOOM_REQUIRE_VULKAN();
  const LoadOptions options = shared_model_options(kModel, 256);
  const auto vulkan = VulkanBackend::load(options);
  const auto sampled = [](std::int32_t top_k, std::uint64_t seed, std::int32_t logprobs) {
    proto::SamplingParams p;
    p.temperature = 1.3;
    p.top_k = top_k;
    p.top_p = 0.95;
    p.min_p = 0.02;
    p.seed = seed;
    p.logprobs = logprobs;
    return p;
  };
  proto::SamplingParams greedy;
  greedy.temperature = 0.0;
  const std::vector<proto::SamplingParams> params{sampled(40, 42, 0), sampled(40, 42, 1), greedy, sampled(63, 7, 0),
                                                  sampled(64, 7, 0)};
  constexpr std::size_t kSteps = 10;
  const auto on_vulkan = decode_together(*vulkan, params, kSteps);
  EXPECT_EQ(on_vulkan[0], on_vulkan[1]) << "the best candidates drew other tokens than the whole row";
  EXPECT_NE(on_vulkan[0], on_vulkan[2]) << "the temperature draws were all greedy's tokens: the test shows little";
  EXPECT_EQ(vulkan->whole_rows_read(), 2 * kSteps) << "only the logprobs and the top_k 64 rows come back whole";

  if (!vulkan->pinned_arithmetic()) {
    if (!vulkan->device().shader_float64) GTEST_SKIP() << "no shaderFloat64: the CPU backend's draws are not compared";
    vulkan->set_pinned_arithmetic(true);
  }
  LoadOptions cpu_options = options;
  cpu_options.device = "cpu";
  const auto cpu = CpuBackend::load(cpu_options);
  EXPECT_EQ(decode_together(*vulkan, params, kSteps), decode_together(*cpu, params, kSteps));
}

// An embedding sequence's final hidden states come back and are pooled as the CPU backend pools them.
TEST(VulkanBackendSteps, AnEmbeddingSequencePoolsWhatTheCpuBackendPools) {
  LOOM_REQUIRE_VULKAN();
  const LoadOptions options = shared_model_options(kModel, 256);
  LoadOptions cpu_options = options;
  cpu_options.device = "cpu";
  const auto embed = [&](Backend& backend) {
    StepSequence s = greedy_start(1, kPrompt, {3});
    s.embed = true;
    const StepResult r = backend.run(StepBatch{.sequences = {s}});
    EXPECT_TRUE(r.sampled.empty());
    return r.embeddings.at(0).values;
  };
  const auto vulkan = VulkanBackend::load(options);
  const std::vector<float> on_vulkan = embed(*vulkan);
  const std::vector<float> on_cpu = embed(*CpuBackend::load(cpu_options));
  ASSERT_EQ(on_vulkan.size(), on_cpu.size());
  for (std::size_t i = 0; i < on_cpu.size(); ++i) EXPECT_NEAR(on_vulkan[i], on_cpu[i], 1e-4f) << i;
}

TEST(VulkanBackendSteps, AForkedSequenceDecodesFromItsCopiedBlockLikeItsParent) {
  LOOM_REQUIRE_VULKAN();
  const auto backend = VulkanBackend::load(shared_model_options(kModel, 256));
  proto::SamplingParams greedy;
  greedy.temperature = 0.0;
  StepSequence parent = greedy_start(1, kPrompt, {4});  // 12 tokens in one block of 16: the fork shares it
  parent.forks.push_back(SequenceFork{.sequence = 2, .params = greedy});
  const StepResult first = backend->run(StepBatch{.sequences = {parent}});
  ASSERT_EQ(first.sampled.size(), 2u);
  ASSERT_EQ(first.sampled[0].token, first.sampled[1].token);
  // Copy-on-write: the fork gets block 11 as a copy of 4 before both write position 12.
  std::int32_t a = first.sampled[0].token, b = first.sampled[1].token;
  StepSequence fork_step = decode(2, b, 12, 0);
  fork_step.blocks = {11};
  const std::uint64_t waits = backend->fence_waits();
  StepResult r = backend->run(StepBatch{.copies = {BlockCopy{.source = 4, .destination = 11}},
                                         .sequences = {decode(1, a, 12, 1), fork_step}});
  EXPECT_EQ(backend->fence_waits(), waits + 1) << "the block copies and the forward pass: one submission, one wait";
  for (int step = 0; step < 3; ++step) {
    ASSERT_EQ(r.sampled.size(), 2u);
    EXPECT_EQ(r.sampled[0].token, r.sampled[1].token) << "step " << step;
    a = r.sampled[0].token;
    b = r.sampled[1].token;
    r = backend->run(StepBatch{.sequences = {decode(1, a, 13 + step, 1), decode(2, b, 13 + step, 1)}});
  }
}

// LoadOptions::arithmetic: fast and pinned as asked (pinned refused, saying why, without shaderFloat64), auto by
// the device's type; BackendInfo::device names the device and the arithmetic it runs.
TEST(VulkanBackendLoad, TheArithmeticIsChosenAtLoad) {
  LOOM_REQUIRE_VULKAN();
  LoadOptions options = shared_model_options(kModel, 256);
  options.arithmetic = DeviceArithmetic::fast;
  const auto fast = VulkanBackend::load(options);
  EXPECT_FALSE(fast->pinned_arithmetic());
  EXPECT_EQ(fast->info().device, fast->device().name + ", fast arithmetic");
  const bool float64 = fast->device().shader_float64;
  const bool cpu_device = fast->device().type == "cpu";

  options.arithmetic = DeviceArithmetic::automatic;
  EXPECT_EQ(VulkanBackend::load(options)->pinned_arithmetic(), float64 && cpu_device);

  options.arithmetic = DeviceArithmetic::pinned;
  if (!float64) {
    try {
      VulkanBackend::load(options);
      ADD_FAILURE() << "the pinned arithmetic was accepted on a device without shaderFloat64";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("shaderFloat64"), std::string::npos) << e.what();
    }
    return;
  }
  const auto pinned = VulkanBackend::load(options);
  EXPECT_TRUE(pinned->pinned_arithmetic());
  EXPECT_EQ(pinned->info().device, pinned->device().name + ", pinned arithmetic");
}

TEST(VulkanBackendLoad, RefusesAnOutOfRangeDevice) {
  LOOM_REQUIRE_VULKAN();
  LoadOptions options = shared_model_options(kModel);
  options.device = "vulkan:99";
  try {
    VulkanBackend::load(options);
    ADD_FAILURE() << "vulkan:99 loaded";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("vulkan:99"), std::string::npos) << e.what();
  }
}

// Weights and KV storage beyond the device's memory: refused before anything is allocated, saying how much
// each needs and what the device has.
TEST(VulkanBackendLoad, MoreMemoryThanTheDeviceHasIsAClearError) {
  LOOM_REQUIRE_VULKAN();
  LoadOptions options = shared_model_options(kModel);
  options.kv_tokens = 0;
  options.kv.budget_bytes = test_device().context->description().device_local_bytes + (std::uint64_t{1} << 30);
  try {
    VulkanBackend::load(options);
    ADD_FAILURE() << "a KV budget beyond the device's memory loaded";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("has too little memory for this model: its weights need"), std::string::npos) << what;
    EXPECT_NE(what.find("and the KV storage"), std::string::npos) << what;
    EXPECT_NE(what.find("the device has"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace loom::compute::vulkan::testing

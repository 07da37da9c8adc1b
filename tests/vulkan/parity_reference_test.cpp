// The Vulkan backend's logits against ../shared/reference (the reference_parity_test.cpp method: the prompt fed
// as one prefill, then the reference's greedy tokens one at a time, every reference top-10 value compared) and
// against the CPU backend's LlamaModel on the same steps (every logit). Every model file with references runs
// ("once" prompt), the mixture-of-experts ones (qwen3moe, Mixtral-style llama) included.
//
// Both backends run attention, SwiGLU/GeGLU, the RMS norms and rope in the CPU's pinned arithmetic
// (vulkan_pinned.hpp), each file in the attention orders of the machine that made its reference (made_on, as
// reference_parity_test.cpp). Measured on lavapipe (max |logit - reference| / max |logit - cpu|), before (the
// online softmax, the device's exp and tanh, a float-tree norm) -> after:
//   to the CPU's last printed digit after: synth11M Q8_0, Q4_0 (0.029/0.043 with attention and the activations
//   pinned but not yet the norms and rope),
//   Q4_K_M, gemma Q8_0, IQ4_NL, IQ4_XS, Q2_K (both), synthq256 Q3_K_M (0.054 from the reference, as the CPU's),
//   qwen2bpe F16 and Q8_0, phi3lr Q8_0, qwen3moe Q8_0;
//   F32/F16: aidreams260K 0.0007/0.0008, synth11M-f16 0.0008/0.0013, gemma F16 0.0061 -> 0.0033/0.0062,
//   gemma2 F16 0.0034/0.0066, gemma3 F16 0.0061 -> 0.0039/0.0076, phi3 0.0028/0.0038, phi3lr 0.0024/0.0037,
//   qwen3moe F16 0.0032/0.0043, mixtral F16 0.0037/0.0047:
//   all within the issue's 0.005 now (their products sum in other orders than the CPU's);
//   quantized, within the issue's tolerance: synth11M Q6_K 0.014/0.024, synthq320 Q5_0 0.014/0.025, Q5_1
//   0.036/0.054, Q5_K_M 0.017/0.027, Q3_K_M 0.0015/0.0057; missing it: synth-gemma2-q8_0 0.053/0.135,
//   synth-gemma3-q8_0 0.068/0.106 (0.02 asked), synthq320-q4_1 0.070/0.111 and -q4_k_m 0.056/0.082 (0.05),
//   synth-phi3-q8_0 0.038/0.112 and synth-mixtral-q8_0 0.026/0.058 (0.02); before, most quantized files were
//   0.07-0.16 from the reference.
// Then the matrix products pinned too (Summation::pinned, shaders/matmul_pinned.comp: every quantized type
// bit-equal to the CPU's matmul, matmul_pinned_test.cpp): those six files, synth11M Q6_K
// (0.014/0.024 before), synthq320 Q5_0, Q5_1, Q5_K_M (0.014-0.036) and Q3_K_M (0.0015/0.0057) now follow
// the CPU to the last printed digit (0.00001 from the reference at most, 0.00000 from the CPU; synthq256
// Q3_K_M 0.054 from the reference, as the CPU). Every file now meets the issue's tolerance, and every
// quantized file follows the CPU. What differs still is the F32/F16 products (not pinned), which
// agree with the CPU's to summation order (about 2e-7 of a row's magnitude, matmul_products_test.cpp): the
// F32/F16 files above. Each file asserts 1e-4 where it follows the CPU to print
// precision, else the CPU parity test's tolerance for it where it is met, else the issue's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "backend_test_support.hpp"
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "reference_logits.hpp"
#include "vulkan_test_device.hpp"

namespace loom::compute::vulkan::testing {
namespace {

struct Worst {
  float reference = 0.0f;  // |vulkan - reference| over the reference's top-10 entries
  float cpu = 0.0f;        // |vulkan - cpu| over every logit
  std::string where;
  std::string first_cpu_difference;  // the first prompt position or greedy step more than 0.001 off the CPU
};

void compare(const std::vector<compute::testing::ReferenceTop>& top, const float* vulkan, const float* cpu, std::int64_t vocab,
             const std::string& where, Worst& worst) {
  for (const compute::testing::ReferenceTop& entry : top) {
    const float diff = std::abs(vulkan[entry.token] - entry.logit);
    if (diff > worst.reference) {
      worst.reference = diff;
      worst.where = where + " token " + std::to_string(entry.token);
    }
  }
  float step_cpu = 0.0f;
  for (std::int64_t i = 0; i < vocab; ++i) step_cpu = std::max(step_cpu, std::abs(vulkan[i] - cpu[i]));
  worst.cpu = std::max(worst.cpu, step_cpu);
  if (step_cpu > 1e-3f && worst.first_cpu_difference.empty()) worst.first_cpu_difference = where;
}

struct ParityCase {
  std::string model;
  float issue_tolerance;         // the reference README's for the file's type (printed: met or not)
  float tolerance;               // asserted on the reference's top-10 values (see the list below)
  float cpu_bound;               // asserted on every logit against the CPU backend
  std::int64_t context = 0;      // > 0: run at this context (synth-phi3lr: below its LongRoPE original context)
  std::size_t greedy_steps = 4;  // of the reference's greedy tokens, fed one at a time (lavapipe is slow)
  LaneWidth made_on = LaneWidth::avx2;  // whose attention orders made the reference (reference_parity_test.cpp)
};

void PrintTo(const ParityCase& c, std::ostream* out) { *out << c.model; }

// Against the CPU: files that follow it to the last printed digit, F16/F32 files (their products sum in
// other orders), and quantized files whose activations a last-bit product difference rounds the other way.
constexpr float kCpuExact = 1e-4f;
constexpr float kCpuFloat = 1e-2f;
constexpr float kCpuDrift = 0.2f;

class VulkanReferenceParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(VulkanReferenceParity, LogitsMatchTheReferenceAndTheCpu) {
  LOOM_REQUIRE_VULKAN();
  const ParityCase& c = GetParam();
  const std::string stem = c.model.substr(0, c.model.find(".gguf"));
  const compute::testing::ReferenceLogits ref =
      compute::testing::read_reference_logits(compute::testing::shared_path("reference/" + stem + ".once.json"));
  const auto backend = VulkanBackend::load(shared_model_options(c.model, 256), c.context);
  backend->set_reference_lanes(c.made_on);
  // The arithmetic these bounds are for, whatever the device's default (a GPU starts fast).
  if (!backend->device().shader_float64) GTEST_SKIP() << "the pinned arithmetic needs shaderFloat64, which " << backend->device().name << " lacks";
  backend->set_pinned_arithmetic(true);

  auto loaded = LoadedModel::open(compute::testing::shared_path("models/" + c.model));
  ModelConfig config = loaded->config();
  if (c.context > 0) config.context_length = c.context;
  ThreadPool pool(2);
  LlamaModel cpu(config, loaded->weights(), pool, 64);
  cpu.set_reference_lanes(c.made_on);
  auto cache = cpu.make_cache(256);
  const std::int64_t vocab = config.vocab_size;

  const std::vector<BlockId> table = blocks(0, 16);
  Worst worst;
  const std::vector<float> prefill = backend->logits(ref.prompt_tokens, 0, table);
  std::vector<float> expected(prefill.size());
  cpu.forward(ref.prompt_tokens, 0, cache, LlamaModel::Logits::all, expected.data());
  for (std::size_t i = 0; i < ref.prompt_top.size(); ++i) {
    compare(ref.prompt_top[i], &prefill[i * vocab], &expected[i * vocab], vocab, "prompt position " + std::to_string(i), worst);
  }
  const std::size_t steps = std::min(c.greedy_steps, ref.greedy.size());
  std::vector<float> step(static_cast<std::size_t>(vocab));
  for (std::size_t g = 0; g < steps; ++g) {
    const std::int32_t token = ref.greedy[g];
    const auto position = static_cast<std::int64_t>(ref.prompt_tokens.size() + g);
    const std::vector<float> logits = backend->logits({&token, 1}, position, table);
    cpu.forward({&token, 1}, position, cache, LlamaModel::Logits::last, step.data());
    compare(ref.greedy_top[g], logits.data(), step.data(), vocab, "greedy step " + std::to_string(g), worst);
  }
  std::printf("[ vulkan parity ] %s: max |logit - reference| %.5f, max |logit - cpu| %.5f over %zu prompt positions "
              "and %zu greedy steps (issue asks <= %.3g: %s; first > 0.001 from the cpu: %s)\n",
              c.model.c_str(), worst.reference, worst.cpu, ref.prompt_tokens.size(), steps, c.issue_tolerance,
              worst.reference <= c.issue_tolerance ? "met" : "NOT met yet",
              worst.first_cpu_difference.empty() ? "none" : worst.first_cpu_difference.c_str());
  EXPECT_LE(worst.reference, c.tolerance) << c.model << ": worst at " << worst.where;
  EXPECT_LE(worst.cpu, c.cpu_bound) << c.model;
}

INSTANTIATE_TEST_SUITE_P(SharedModels, VulkanReferenceParity,
                         // Asserted on the reference: the CPU parity test's tolerance for the file
                         // (reference_parity_test.cpp, where the SIMD kernels run) where the Vulkan
                         // backend meets it, else the issue's; 1e-4 (and kCpuExact) for the files that
                         // follow the CPU to print precision: see the opening comment.
                         ::testing::Values(ParityCase{"aidreams260K.gguf", 5e-3f, 5e-3f, kCpuFloat, 0, 32, LaneWidth::avx512},
                                           ParityCase{"synth11M-f16.gguf", 5e-3f, 5e-3f, kCpuFloat, 0, 2, LaneWidth::avx512},
                                           ParityCase{"synth11M-q8_0.gguf", 2e-2f, 1e-4f, kCpuExact, 0, 2, LaneWidth::avx512},
                                           ParityCase{"synth11M-q4_0.gguf", 5e-2f, 1e-4f, kCpuExact, 0, 2, LaneWidth::avx512},
                                           ParityCase{"synth11M-q4_k_m.gguf", 5e-2f, 3e-2f, kCpuExact, 0, 2, LaneWidth::avx512},
                                           ParityCase{"synth11M-q6_k.gguf", 5e-2f, 1e-4f, kCpuExact, 0, 2, LaneWidth::avx512},
                                           ParityCase{"synth-gemma-f16.gguf", 5e-3f, 5e-3f, kCpuFloat},
                                           ParityCase{"synth-gemma-q8_0.gguf", 2e-2f, 1e-4f, kCpuExact},
                                           ParityCase{"synth-gemma2-f16.gguf", 5e-3f, 5e-3f, kCpuFloat},
                                           ParityCase{"synth-gemma2-q8_0.gguf", 2e-2f, 1e-4f, kCpuExact},
                                           ParityCase{"synth-gemma3-f16.gguf", 5e-3f, 5e-3f, kCpuFloat},
                                           ParityCase{"synth-gemma3-q8_0.gguf", 2e-2f, 1e-4f, kCpuExact},
                                           ParityCase{"synthq320-q4_1.gguf", 5e-2f, 1e-4f, kCpuExact},
                                           ParityCase{"synthq320-q5_0.gguf", 5e-2f, 1e-4f, kCpuExact},
                                           ParityCase{"synthq320-q5_1.gguf", 5e-2f, 1e-4f, kCpuExact},
                                           ParityCase{"synthq320-iq4_nl.gguf", 5e-2f, 1e-4f, kCpuExact},
                                           ParityCase{"synthq320-q4_k_m.gguf", 5e-2f, 1e-4f, kCpuExact},
                                           ParityCase{"synthq320-q5_k_m.gguf", 5e-2f, 1e-4f, kCpuExact},
                                           ParityCase{"synthq320-q2_k.gguf", 1e-1f, 1e-1f, kCpuExact},
                                           ParityCase{"synthq320-q3_k_m.gguf", 1e-1f, 1e-4f, kCpuExact},
                                           ParityCase{"synthq320-iq4_xs.gguf", 5e-2f, 1e-4f, kCpuExact},
                                           ParityCase{"synthq256-q2_k.gguf", 1e-1f, 1e-1f, kCpuExact},
                                           ParityCase{"synthq256-q3_k_m.gguf", 1e-1f, 1e-1f, kCpuExact},
                                           ParityCase{"synthq256-iq4_xs.gguf", 5e-2f, 5e-2f, kCpuExact},
                                           ParityCase{"synth-qwen2bpe-f16.gguf", 5e-3f, 1e-4f, kCpuExact, 0, 2},
                                           ParityCase{"synth-qwen2bpe-q8_0.gguf", 2e-2f, 2e-2f, kCpuExact, 0, 2},
                                           ParityCase{"synth-phi3-f16.gguf", 5e-3f, 5e-3f, kCpuFloat},
                                           ParityCase{"synth-phi3-q8_0.gguf", 2e-2f, 1e-4f, kCpuExact},
                                           ParityCase{"synth-phi3lr-f16.gguf", 5e-3f, 5e-3f, kCpuFloat, 4096},
                                           ParityCase{"synth-phi3lr-q8_0.gguf", 2e-2f, 2e-2f, kCpuExact, 4096},
                                           ParityCase{"synth-qwen3moe-f16.gguf", 5e-3f, 5e-3f, kCpuFloat},
                                           ParityCase{"synth-qwen3moe-q8_0.gguf", 2e-2f, 1e-4f, kCpuExact},
                                           ParityCase{"synth-mixtral-f16.gguf", 5e-3f, 5e-3f, kCpuFloat},
                                           ParityCase{"synth-mixtral-q8_0.gguf", 2e-2f, 1e-4f, kCpuExact}),
                         [](const auto& tested) {
                           std::string name = tested.param.model.substr(0, tested.param.model.find(".gguf"));
                           std::replace_if(name.begin(), name.end(), [](char ch) { return !std::isalnum(static_cast<unsigned char>(ch)); }, '_');
                           return name;
                         });

}  // namespace
}  // namespace loom::compute::vulkan::testing

// Parity with ../shared/reference: logits from an independent GGUF implementation, teacher forced (see
// reference/README.md). Every reference top-10 value must be matched within the per-type tolerance, and
// the real model's greedy continuation must be identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "loom/compute/cpu/kernel_path.hpp"
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "reference_logits.hpp"
#include "test_files.hpp"

namespace {

using loom::compute::LlamaModel;
using loom::compute::LoadedModel;

using loom::compute::testing::shared_path;

using loom::compute::testing::read_reference_logits;
using loom::compute::testing::ReferenceLogits;
using loom::compute::testing::ReferenceTop;

struct Worst {
  float diff = 0;
  std::string where;
};

struct ParityResult {
  Worst prefill;  // the prompt, fed as one batch
  Worst decode;   // the continuation, one token at a time
};

void compare(const std::vector<ReferenceTop>& top, const float* logits, const std::string& where, Worst& worst) {
  for (const auto& entry : top) {
    const float diff = std::abs(logits[entry.token] - entry.logit);
    if (diff > worst.diff) worst = {diff, where + " token " + std::to_string(entry.token)};
  }
}

int argmax(const float* logits, std::int64_t n) { return static_cast<int>(std::max_element(logits, logits + n) - logits); }

// Returns the largest deviations seen; checks the greedy sequence when asked.
// `context` > 0 runs the model at that context instead of the file's (what LongRoPE chooses its factors by).
ParityResult run_parity(const std::string& model_file, const std::string& reference_file, bool greedy_must_match,
                        const loom::compute::KvCacheOptions& kv = {}, std::int64_t context = 0,
                        loom::compute::LaneWidth lanes = loom::compute::LaneWidth::avx512) {
  const std::string model_path = shared_path("models/" + model_file);
  const std::string reference_path = shared_path("reference/" + reference_file);
  if (!std::filesystem::exists(model_path)) throw std::runtime_error("missing model file " + model_path);
  const ReferenceLogits ref = read_reference_logits(reference_path);

  auto loaded = LoadedModel::open(model_path);
  loom::compute::ThreadPool pool(2);
  auto config = loaded->config();
  if (context > 0) config.context_length = context;
  LlamaModel model(config, loaded->weights(), pool, 64);
  model.set_reference_lanes(lanes);
  auto cache = model.make_cache(0, kv);
  const std::int64_t vocab = loaded->config().vocab_size;

  ParityResult worst;
  std::vector<float> logits(ref.prompt_tokens.size() * static_cast<std::size_t>(vocab));
  std::vector<std::int32_t> prompt(ref.prompt_tokens.begin(), ref.prompt_tokens.end());
  model.forward(prompt, 0, cache, LlamaModel::Logits::all, logits.data());
  for (std::size_t i = 0; i < ref.prompt_top.size(); ++i) {
    compare(ref.prompt_top[i], &logits[i * vocab], "prompt position " + std::to_string(i), worst.prefill);
  }
  if (greedy_must_match) {
    EXPECT_EQ(argmax(&logits[(prompt.size() - 1) * vocab], vocab), ref.greedy[0]) << "first greedy token";
  }

  std::vector<float> step(static_cast<std::size_t>(vocab));
  for (std::size_t g = 0; g < ref.greedy.size(); ++g) {
    const std::int32_t token = ref.greedy[g];
    model.forward({&token, 1}, static_cast<std::int64_t>(prompt.size() + g), cache, LlamaModel::Logits::last,
                  step.data());
    compare(ref.greedy_top[g], step.data(), "greedy step " + std::to_string(g), worst.decode);
    if (greedy_must_match && g + 1 < ref.greedy.size()) {
      EXPECT_EQ(argmax(step.data(), vocab), ref.greedy[g + 1]) << "greedy step " << g;
    }
  }
  return worst;
}

struct ParityCase {
  std::string model;
  float tolerance;        // asserted on every reference value, prefill and decode
  float issue_tolerance;  // what issue #3 asks; printed beside the measurement when it differs
  bool exact_greedy;
  // Asserted instead where the SIMD kernels run (0: the same as `tolerance`): Q6_K's AVX2/AVX-512 kernels
  // keep the reference's lane order and its logits then match to print precision; its scalar kernel sums
  // in another order and stays within the issue's 0.03 (and so does the Q4_0 file's Q6_K output matrix).
  float simd_tolerance = 0.0f;
  // The context to run at (0: the file's). synth-phi3lr's references ran below its LongRoPE original
  // context (4096), so with its short factors; at the file's 131072 the long ones would apply.
  std::int64_t context = 0;
  // The vector width of the machine that made the reference, whose attention and SwiGLU arithmetic the model
  // follows (attention.hpp, LlamaModel::set_reference_lanes): the synth11M and aidreams260K files come from
  // an AVX-512 machine, the rest from an AVX2 one (reference/README.md).
  loom::compute::LaneWidth made_on = loom::compute::LaneWidth::avx2;
};

constexpr auto kAvx512 = loom::compute::LaneWidth::avx512;

class ReferenceParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(ReferenceParity, LogitsMatchTheReferenceTeacherForced) {
  const auto& c = GetParam();
  const std::string stem = c.model.substr(0, c.model.find(".gguf"));
  const bool simd = loom::compute::default_kernel_path() >= loom::compute::KernelPath::avx2;
  const float tolerance = simd && c.simd_tolerance > 0.0f ? c.simd_tolerance : c.tolerance;
  for (const std::string prompt : {"once", "fox"}) {
    const auto worst = run_parity(c.model, stem + "." + prompt + ".json", c.exact_greedy, {}, c.context, c.made_on);
    std::printf("[ parity ] %s %s: max |logit - reference| prefill %.5f, decode %.5f (issue asks <= %.3g%s)\n",
                c.model.c_str(), prompt.c_str(), worst.prefill.diff, worst.decode.diff, c.issue_tolerance,
                std::max(worst.prefill.diff, worst.decode.diff) <= c.issue_tolerance ? ", met" : ", NOT met yet");
    EXPECT_LE(worst.prefill.diff, tolerance) << c.model << " " << prompt << ": worst at " << worst.prefill.where;
    EXPECT_LE(worst.decode.diff, tolerance) << c.model << " " << prompt << ": worst at " << worst.decode.where;
  }
}

INSTANTIATE_TEST_SUITE_P(SharedModels, ReferenceParity,
                         // Products (Q8_0, Q4_0, F32, Q6_K), attention, softmax, rotary embedding and SwiGLU
                         // follow the reference's arithmetic on an AVX-512 machine (attention.hpp, rotary.hpp,
                         // vec_dot.hpp), so aidreams260K, Q8_0, Q4_0 and Q6_K match it to print precision over
                         // every position of both prompts: asserted within 1e-4 (the last printed digit of a
                         // logit >= 10), far inside what issue #3 asks, so a change to the pinned arithmetic
                         // fails here. Q4_K sums in another order than the reference's repacked kernel; F16
                         // rounds activations to F16 as the reference does, but its products sum in other
                         // orders (0.0008). These (synth11M, aidreams260K) run attention in the AVX-512 build's
                         // orders (kAvx512); every other file came from an AVX2 machine and runs in the AVX2
                         // build's (ParityCase::made_on, attention.hpp: 8 lanes where AVX-512 has 16).
                         ::testing::Values(ParityCase{"aidreams260K.gguf", 1e-4f, 1e-3f, true, 0.0f, 0, kAvx512},
                                           ParityCase{"synth11M-f16.gguf", 5e-3f, 5e-3f, false, 0.0f, 0, kAvx512},
                                           ParityCase{"synth11M-q8_0.gguf", 1e-4f, 5e-3f, false, 0.0f, 0, kAvx512},
                                           ParityCase{"synth11M-q4_0.gguf", 3e-2f, 3e-2f, false, 1e-4f, 0, kAvx512},
                                           ParityCase{"synth11M-q4_k_m.gguf", 3e-2f, 3e-2f, false, 0.0f, 0, kAvx512},
                                           ParityCase{"synth11M-q6_k.gguf", 3e-2f, 3e-2f, false, 1e-4f, 0, kAvx512},
                                           // Gemma family (issue 20): GeGLU, scaled embeddings, NeoX rope;
                                           // gemma2 post-norms, soft-caps, a sliding window of 8 on even layers;
                                           // gemma3 Q/K norms, a window of 10 on five layers of six with the
                                           // local rope base. The prompts plus 32 greedy steps run past every
                                           // window. Tolerances as the shared reference README gives them
                                           // where the SIMD kernels run; the scalar F16 dot sums in another
                                           // order (up to 0.0099 measured), hence 0.01 there.
                                           ParityCase{"synth-gemma-f16.gguf", 1e-2f, 5e-3f, false, 5e-3f},
                                           // Q8_0 (all three): to print precision on every path with
                                           // attention in the AVX2 build's orders. In the AVX-512 ones the
                                           // decode drifts (synth-gemma-q8_0 fox 0.053 from greedy step 22,
                                           // synth-gemma3-q8_0 0.020): a last-bit difference in an attention
                                           // output that moves an activation across a Q8_0 rounding boundary
                                           // moves logits by that much.
                                           ParityCase{"synth-gemma-q8_0.gguf", 2e-2f, 2e-2f, false, 1e-4f},
                                           ParityCase{"synth-gemma2-f16.gguf", 1e-2f, 5e-3f, false, 5e-3f},
                                           ParityCase{"synth-gemma2-q8_0.gguf", 2e-2f, 2e-2f, false},
                                           ParityCase{"synth-gemma3-f16.gguf", 1e-2f, 5e-3f, false, 5e-3f},
                                           ParityCase{"synth-gemma3-q8_0.gguf", 2e-2f, 2e-2f, false, 1e-4f},
                                           // The 32-value block types (issue 20), in files whose rows of 320
                                           // values make the K-quant recipes fall back to Q5_0/Q5_1/IQ4_NL
                                           // (tied output). These references come from an AVX2 machine
                                           // without repacked weights, whose orders small_blocks.hpp keeps (on
                                           // every path), so on the SIMD paths they match to print precision:
                                           // asserted within 1e-4, as above.
                                           // Q4_1: in the AVX-512 build's attention orders a late decode step
                                           // jumped to 0.046 (once, greedy step 14) and the rest drifted to
                                           // 0.058; in the AVX2 build's (this reference's) to print precision.
                                           ParityCase{"synthq320-q4_1.gguf", 5e-2f, 5e-2f, false, 1e-4f},
                                           ParityCase{"synthq320-q5_0.gguf", 5e-2f, 5e-2f, false, 1e-4f},
                                           ParityCase{"synthq320-q5_1.gguf", 5e-2f, 5e-2f, false, 1e-4f},
                                           ParityCase{"synthq320-iq4_nl.gguf", 5e-2f, 5e-2f, false, 1e-4f},
                                           ParityCase{"synthq320-q4_k_m.gguf", 5e-2f, 5e-2f, false, 1e-4f},
                                           // Its Q5_K tensors' scalar kernel keeps a plainer order than the
                                           // reference's: 0.074 under LOOM_FORCE_SCALAR.
                                           ParityCase{"synthq320-q5_k_m.gguf", 1e-1f, 5e-2f, false, 1e-4f},
                                           // Issue 20's architectures: GPT-2 byte-level BPE qwen2 (no BOS in
                                           // its prompts), phi3 (fused tensors), phi3 LongRoPE, and MoE. Q8_0
                                           // matches to print precision. F16 weights meet F16-rounded
                                           // activations, as in the reference (llama_model.cpp), so F16 holds
                                           // the issue's 0.005 where the SIMD kernels run (the scalar F16 dot
                                           // sums in another order: 0.01 there); with attention and SwiGLU in
                                           // the AVX2 build's forms they match to print precision there (1e-4;
                                           // phi3/phi3lr 0.0004/0.0016 with the AVX-512 build's SwiGLU exp;
                                           // the MoE ones 0.002-0.003 with F16 experts in our batch order, not
                                           // the reference's one row at a time). synth-qwen3moe-q8_0 (the newer
                                           // reference build) matches to 1e-5 with attention in the AVX2
                                           // build's orders and a decode step's router logits in its one-row
                                           // order (expert_feed_forward.cpp). In the AVX-512 attention orders
                                           // it was off from prefill position 5 on ("once", 0.068; the AVX2
                                           // attention orders alone fixed that, its Q/K norms and routing
                                           // unchanged); with the router's batch order in decode, one "fox"
                                           // step was off by 0.004.
                                           ParityCase{"synth-qwen2bpe-f16.gguf", 1e-2f, 5e-3f, false, 1e-4f},
                                           ParityCase{"synth-qwen2bpe-q8_0.gguf", 2e-2f, 2e-2f, false},
                                           ParityCase{"synth-phi3-f16.gguf", 1e-2f, 5e-3f, false, 1e-4f},
                                           ParityCase{"synth-phi3-q8_0.gguf", 2e-2f, 2e-2f, false},
                                           ParityCase{"synth-phi3lr-f16.gguf", 1e-2f, 5e-3f, false, 1e-4f, 4096},
                                           ParityCase{"synth-phi3lr-q8_0.gguf", 2e-2f, 2e-2f, false, 0.0f, 4096},
                                           ParityCase{"synth-qwen3moe-f16.gguf", 1e-2f, 5e-3f, false, 1e-4f},
                                           ParityCase{"synth-qwen3moe-q8_0.gguf", 2e-2f, 2e-2f, false, 1e-4f},
                                           ParityCase{"synth-mixtral-f16.gguf", 1e-2f, 5e-3f, false, 1e-4f},
                                           ParityCase{"synth-mixtral-q8_0.gguf", 2e-2f, 2e-2f, false},
                                           // Q2_K/Q3_K/IQ4_XS with Q4_K/Q5_K/Q6_K/F32 (reference/README.md's
                                           // tolerances for these files: 0.1 for 2- and 3-bit, 0.05 for 4-bit).
                                           ParityCase{"synthq256-q2_k.gguf", 1e-1f, 1e-1f, false},
                                           ParityCase{"synthq256-q3_k_m.gguf", 1e-1f, 1e-1f, false},
                                           ParityCase{"synthq256-iq4_xs.gguf", 5e-2f, 5e-2f, false},
                                           // Their synthq320 forms, whose 320-value rows fall back to IQ4_NL,
                                           // Q5_0 and Q5_1; ffn_down (rows of 512) keeps Q3_K in the Q2_K file,
                                           // Q4_K in the Q3_K_M one (no Q3_K left there), IQ4_XS in its own.
                                           ParityCase{"synthq320-q2_k.gguf", 1e-1f, 1e-1f, false},
                                           ParityCase{"synthq320-q3_k_m.gguf", 1e-1f, 1e-1f, false},
                                           // IQ4_XS: to print precision in the AVX2 build's attention orders
                                           // (0.079 at "fox" greedy step 30 in the AVX-512 ones).
                                           ParityCase{"synthq320-iq4_xs.gguf", 5e-2f, 5e-2f, false, 1e-4f}),
                         [](const auto& tested) {
                           std::string name = tested.param.model.substr(0, tested.param.model.find(".gguf"));
                           std::replace_if(name.begin(), name.end(), [](char ch) { return !std::isalnum(static_cast<unsigned char>(ch)); }, '_');
                           return name;
                         });

// The paged cache's block size changes where keys and values live, never the arithmetic: the same runs with
// blocks of 1 and 32 positions deviate from the reference by exactly what the default blocks do.
TEST(ReferenceParityPaged, BlockSizeDoesNotChangeTheDeviations) {
  for (const std::string model : {"aidreams260K", "synth11M-q8_0"}) {
    const auto usual = run_parity(model + ".gguf", model + ".once.json", false);
    for (const std::int64_t block_size : {1, 32}) {
      const auto paged = run_parity(model + ".gguf", model + ".once.json", false, {.block_size = block_size});
      EXPECT_EQ(paged.prefill.diff, usual.prefill.diff) << model << " block size " << block_size;
      EXPECT_EQ(paged.decode.diff, usual.decode.diff) << model << " block size " << block_size;
    }
  }
}

}  // namespace

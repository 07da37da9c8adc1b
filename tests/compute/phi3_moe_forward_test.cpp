// phi3 (fused attn_qkv and ffn_up, LongRoPE) and the mixture-of-experts models (qwen3moe, qwen2moe with its
// shared expert, Mixtral-style llama) against the plain double-precision forward pass of double_reference.hpp,
// on synthesized files; LongRoPE's choice of factors by the run context; a decode step of several sequences
// whose tokens choose different experts giving each sequence its logits alone, bit for bit; and a decode
// step reading only the experts its token chose.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "double_reference.hpp"
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/model_synth.hpp"

namespace {

using namespace loom::compute;
using loom::compute::testing::double_forward;

struct NewArchCase {
  std::string label;
  Architecture arch;
  TensorType type;
  double tolerance;  // max |logit - double reference|: the F16 KV cache, and quantized activations
  std::int64_t experts = 0;
  std::int64_t shared_expert = 0;
  std::int64_t context = 64;
  std::int64_t rope_original_context = 0;  // LongRoPE when > 0
};

void PrintTo(const NewArchCase& c, std::ostream* os) { *os << c.label; }

SynthSpec spec_for(const NewArchCase& param) {
  SynthSpec spec;
  spec.architecture = param.arch;
  spec.type = param.type;
  spec.dim = 64;
  spec.ffn_dim = 96;
  spec.layers = 2;
  spec.heads = 4;
  spec.kv_heads = param.arch == Architecture::phi3 ? 4 : 2;
  spec.vocab_size = 96;
  spec.context_length = param.context;
  spec.seed = 5;
  spec.experts = param.experts;
  spec.experts_used = 2;
  spec.expert_ffn_dim = param.experts > 0 ? 64 : 0;
  spec.shared_expert_ffn_dim = param.shared_expert;
  spec.rope_original_context = param.rope_original_context;
  return spec;
}

std::unique_ptr<LoadedModel> synthesize(const SynthSpec& spec, const std::string& label) {
  const auto path = (std::filesystem::temp_directory_path() / ("loom_test_newarch_" + label + ".gguf")).string();
  write_synthetic_model(spec, path);
  auto loaded = LoadedModel::open(path);
  std::filesystem::remove(path);  // mapped: the mapping stays valid
  return loaded;
}

// Prefill of 5 tokens, then 3 decode steps; logits of every position.
std::vector<float> run(const LoadedModel& loaded, const ModelConfig& c, const std::vector<std::int32_t>& tokens) {
  ThreadPool pool(2);
  LlamaModel model(c, loaded.weights(), pool, 16);
  auto cache = model.make_cache();
  const std::size_t prefill = 5;
  std::vector<float> logits(tokens.size() * static_cast<std::size_t>(c.vocab_size));
  model.forward({tokens.data(), prefill}, 0, cache, LlamaModel::Logits::all, logits.data());
  for (std::size_t i = prefill; i < tokens.size(); ++i) {
    model.forward({&tokens[i], 1}, static_cast<std::int64_t>(i), cache, LlamaModel::Logits::last, &logits[i * c.vocab_size]);
  }
  return logits;
}

const std::vector<std::int32_t> kTokens{1, 17, 42, 5, 88, 3, 60, 9};

class NewArchVsDouble : public ::testing::TestWithParam<NewArchCase> {};

TEST_P(NewArchVsDouble, PrefillAndDecodeMatchTheDoublePrecisionReference) {
  const auto& param = GetParam();
  auto loaded = synthesize(spec_for(param), param.label);
  const ModelConfig& c = loaded->config();
  ASSERT_EQ(c.architecture, param.arch);
  ASSERT_EQ(c.experts, param.experts);
  ASSERT_EQ(c.shared_expert_ffn_dim, param.shared_expert);
  ASSERT_EQ(c.rope_original_context, param.rope_original_context);
  const auto logits = run(*loaded, c, kTokens);
  const auto expected = double_forward(*loaded->gguf(), c, kTokens, c.context_length);

  double worst = 0, largest = 0;
  for (std::size_t pos = 0; pos < kTokens.size(); ++pos) {
    for (std::int64_t v = 0; v < c.vocab_size; ++v) {
      worst = std::max(worst, std::abs(logits[pos * c.vocab_size + v] - expected.logits[pos][v]));
      largest = std::max(largest, std::abs(expected.logits[pos][v]));
    }
  }
  std::printf("[ forward ] %s: max |logit - double reference| = %.6f (largest |logit| %.3f)\n", param.label.c_str(), worst,
              largest);
  EXPECT_LE(worst, param.tolerance);
  if (c.experts > 0) {
    // The routing must vary, or the test would not exercise it: more distinct experts than one token uses.
    std::set<int> used;
    for (const auto& layer : expected.chosen) {
      for (const auto& token : layer) used.insert(token.begin(), token.end());
    }
    EXPECT_GT(used.size(), static_cast<std::size_t>(c.experts_used)) << "every token chose the same experts";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Synthesized, NewArchVsDouble,
    ::testing::Values(NewArchCase{"phi3_f32", Architecture::phi3, TensorType::f32, 2e-3},
                      NewArchCase{"phi3_q8_0", Architecture::phi3, TensorType::q8_0, 6e-2},
                      // LongRoPE: run at a context within the original one (short factors), and beyond it (long).
                      NewArchCase{"phi3_longrope_short", Architecture::phi3, TensorType::f32, 2e-3, 0, 0, 64, 128},
                      NewArchCase{"phi3_longrope_long", Architecture::phi3, TensorType::f32, 2e-3, 0, 0, 256, 128},
                      NewArchCase{"qwen3moe_f32", Architecture::qwen3moe, TensorType::f32, 2e-3, 8},
                      NewArchCase{"qwen3moe_q8_0", Architecture::qwen3moe, TensorType::q8_0, 6e-2, 8},
                      NewArchCase{"qwen2moe_shared_f32", Architecture::qwen2moe, TensorType::f32, 2e-3, 8, 96},
                      NewArchCase{"qwen2moe_shared_q8_0", Architecture::qwen2moe, TensorType::q8_0, 6e-2, 8, 96},
                      NewArchCase{"mixtral_f32", Architecture::llama, TensorType::f32, 2e-3, 4},
                      // F16 weights meet F16-rounded activations, as in the reference (llama_model.cpp), which
                      // the double-precision pass does not round: 0.0020 measured, as qwen2's F16 case.
                      NewArchCase{"mixtral_f16", Architecture::llama, TensorType::f16, 4e-3, 4}),
    [](const auto& tested) { return tested.param.label; });

// The factors are chosen by the context the model runs at: the same file at a context within the original
// one and beyond it gives clearly different logits (so the cases above could tell a wrong choice).
TEST(LongRope, TheRunContextChoosesShortOrLongFactors) {
  const NewArchCase param{"phi3_longrope_choice", Architecture::phi3, TensorType::f32, 0, 0, 0, 256, 128};
  auto loaded = synthesize(spec_for(param), param.label);
  ModelConfig short_context = loaded->config();
  short_context.context_length = 128;  // == the original context: still the short factors
  const auto long_logits = run(*loaded, loaded->config(), kTokens);
  const auto short_logits = run(*loaded, short_context, kTokens);
  const auto expected_short = double_forward(*loaded->gguf(), short_context, kTokens, 128);
  double apart = 0, worst_short = 0;
  for (std::size_t i = 0; i < long_logits.size(); ++i) {
    apart = std::max(apart, static_cast<double>(std::abs(long_logits[i] - short_logits[i])));
    const std::size_t pos = i / static_cast<std::size_t>(short_context.vocab_size);
    worst_short = std::max(worst_short, std::abs(short_logits[i] - expected_short.logits[pos][i % short_context.vocab_size]));
  }
  EXPECT_GT(apart, 0.1) << "short and long factors should move the logits";
  EXPECT_LE(worst_short, 2e-3);
}

// A decode step of four sequences whose tokens choose different experts gives each sequence the logits it
// gets alone, bit for bit (Q8_0 products sum in one order whatever the batch, and the router runs per token).
TEST(ExpertFeedForward, ABatchOfTokensChoosingDifferentExpertsGivesEachItsLogitsAlone) {
  const NewArchCase param{"moe_batch", Architecture::qwen3moe, TensorType::q8_0, 0, 8};
  auto loaded = synthesize(spec_for(param), param.label);
  const ModelConfig& c = loaded->config();
  const auto vocab = static_cast<std::size_t>(c.vocab_size);
  ThreadPool pool(2);
  LlamaModel model(c, loaded->weights(), pool, 32);
  const std::vector<std::vector<std::int32_t>> prompts{{1, 5, 9, 13}, {2, 40, 7, 70}, {3, 33, 66, 11}, {4, 90, 21, 50}};
  const std::vector<std::int32_t> next{8, 61, 27, 44};
  const std::size_t n = prompts.size();

  // The decode tokens' routing, from the double reference: they must not all choose the same experts.
  std::set<std::vector<int>> choices;
  for (std::size_t s = 0; s < n; ++s) {
    auto tokens = prompts[s];
    tokens.push_back(next[s]);
    const auto expected = double_forward(*loaded->gguf(), c, tokens, c.context_length);
    choices.insert(expected.chosen[0].back());
  }
  ASSERT_GE(choices.size(), 3u) << "the decode tokens should choose different experts in layer 0";

  auto prefill_all = [&](PagedKvCache& pages, std::vector<std::vector<std::int32_t>>& tables) {
    for (std::size_t s = 0; s < n; ++s) {
      tables.push_back({static_cast<std::int32_t>(s)});
      const LlamaModel::SequenceStep step{prompts[s], 0, tables[s], nullptr, LlamaModel::Logits::none};
      model.forward({&step, 1}, pages);
    }
  };
  std::vector<float> alone(n * vocab), together(n * vocab);
  {
    PagedKvCache pages(c.layers, c.kv_dim(), 16, static_cast<std::int64_t>(n));
    std::vector<std::vector<std::int32_t>> tables;
    prefill_all(pages, tables);
    for (std::size_t s = 0; s < n; ++s) {
      const LlamaModel::SequenceStep step{{&next[s], 1}, 4, tables[s], &alone[s * vocab], LlamaModel::Logits::last};
      model.forward({&step, 1}, pages);
    }
  }
  {
    PagedKvCache pages(c.layers, c.kv_dim(), 16, static_cast<std::int64_t>(n));
    std::vector<std::vector<std::int32_t>> tables;
    prefill_all(pages, tables);
    std::vector<LlamaModel::SequenceStep> steps;
    for (std::size_t s = 0; s < n; ++s) steps.push_back({{&next[s], 1}, 4, tables[s], &together[s * vocab], LlamaModel::Logits::last});
    model.forward(steps, pages);
  }
  for (std::size_t i = 0; i < alone.size(); ++i) {
    ASSERT_EQ(alone[i], together[i]) << "sequence " << i / vocab << " logit " << i % vocab;
  }
}

// A decode step reads the router and the chosen experts only: with 8 experts of which 2 are used, each
// layer's expert traffic is the router plus two experts' three matrices, a quarter of all the experts.
TEST(ExpertFeedForward, ADecodeStepReadsOnlyTheChosenExperts) {
  const NewArchCase param{"moe_bytes", Architecture::qwen3moe, TensorType::q8_0, 0, 8};
  auto loaded = synthesize(spec_for(param), param.label);
  const ModelConfig& c = loaded->config();
  ThreadPool pool(2);
  LlamaModel model(c, loaded->weights(), pool, 8);
  auto cache = model.make_cache();
  std::vector<float> logits(static_cast<std::size_t>(c.vocab_size));
  const std::vector<std::int32_t> prompt{1, 2, 3};
  model.forward(prompt, 0, cache, LlamaModel::Logits::last, logits.data());
  const std::uint64_t before = model.expert_bytes_read();
  const std::int32_t token = 7;
  model.forward({&token, 1}, 3, cache, LlamaModel::Logits::last, logits.data());
  const std::uint64_t step = model.expert_bytes_read() - before;

  const LayerWeights& layer = loaded->weights().layers[0];
  const std::uint64_t expert = layer.experts[0].gate->bytes + layer.experts[0].up->bytes + layer.experts[0].down->bytes;
  const std::uint64_t router = layer.router->bytes;
  EXPECT_EQ(step, static_cast<std::uint64_t>(c.layers) * (router + static_cast<std::uint64_t>(c.experts_used) * expert));
  const std::uint64_t all_experts = static_cast<std::uint64_t>(c.layers * c.experts) * expert;
  std::printf("[ experts ] one decode token read %llu expert bytes of %llu stored (router included)\n",
              static_cast<unsigned long long>(step), static_cast<unsigned long long>(all_experts));
}

}  // namespace

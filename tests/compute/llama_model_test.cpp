// The forward pass against an obviously-correct double-precision implementation (double_reference.hpp), on small
// synthetic models of each architecture (llama, qwen2 with QKV biases, qwen3 with Q/K norms), with grouped
// KV heads; and batching invariance (one prefill == chunks == one token at a time).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/model_synth.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/compute/text/vocabulary.hpp"
#include "double_reference.hpp"
#include "test_files.hpp"

namespace {

using namespace loom::compute;

using Vec = std::vector<double>;

std::string temp_model(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("loom_test_" + name + ".gguf")).string();
}

// The gateway's demo model carries loom's own vocabulary: text goes in and comes back out unchanged (ASCII
// pieces, byte fallback for the rest), with no file from elsewhere.
TEST(ModelSynth, TheBuiltInVocabularyRoundTripsText) {
  SynthSpec spec;
  spec.builtin_vocabulary = true;
  spec.context_length = 32;
  const std::string path = temp_model("builtin_vocab");
  write_synthetic_model(spec, path);
  auto loaded = LoadedModel::open(path);
  ASSERT_NE(loaded->gguf(), nullptr);
  Tokenizer tokenizer(Vocabulary::from_gguf(*loaded->gguf()));
  EXPECT_EQ(loaded->config().vocab_size, static_cast<std::int64_t>(tokenizer.vocabulary().size()));
  for (const std::string text : {"Once upon a time, the cat said hello!", "naïve café — 日本", "tabs\tand\nlines"}) {
    const auto ids = tokenizer.encode(text, {.add_special = false});
    EXPECT_EQ(tokenizer.decode(ids), " " + std::string(text)) << "SentencePiece's space prefix, then the text";
  }
  // Whole words are single pieces ("the" with its space prefix), so the demo's output reads as words.
  EXPECT_EQ(tokenizer.encode("the", {.add_special = false}).size(), 1u);
  std::filesystem::remove(path);
}

struct ArchCase {
  Architecture arch;
  TensorType type;
  double tolerance;  // max |logit - double reference|: the F16 KV cache, and quantized activations
  std::int64_t dim = 64;  // K-quant rows are whole 256-value blocks: dim and ffn multiples of 256
  std::int64_t ffn = 96;
};

class ForwardVsDouble : public ::testing::TestWithParam<ArchCase> {};

TEST_P(ForwardVsDouble, PrefillAndDecodeMatchTheDoublePrecisionReference) {
  const auto& param = GetParam();
  SynthSpec spec;
  spec.architecture = param.arch;
  spec.dim = param.dim;
  spec.ffn_dim = param.ffn;
  spec.layers = 2;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.vocab_size = 96;
  spec.context_length = 64;
  spec.type = param.type;
  spec.seed = 7;
  const std::string path = temp_model(to_string(param.arch) + "_" + std::string(name(param.type)));
  write_synthetic_model(spec, path);

  auto loaded = LoadedModel::open(path);
  const ModelConfig& c = loaded->config();
  ASSERT_EQ(c.architecture, param.arch);
  ThreadPool pool(2);
  LlamaModel model(c, loaded->weights(), pool, 16);
  auto cache = model.make_cache();

  const std::vector<std::int32_t> tokens{1, 17, 42, 5, 88, 3, 60, 9};
  const std::size_t prefill = 5;
  std::vector<float> logits(tokens.size() * static_cast<std::size_t>(c.vocab_size));
  model.forward({tokens.data(), prefill}, 0, cache, LlamaModel::Logits::all, logits.data());
  for (std::size_t i = prefill; i < tokens.size(); ++i) {
    model.forward({&tokens[i], 1}, static_cast<std::int64_t>(i), cache, LlamaModel::Logits::last,
                  &logits[i * c.vocab_size]);
  }

  // The textbook forward pass, one token at a time, everything in double (double_reference.hpp).
  const auto expected = loom::compute::testing::double_forward(*loaded->gguf(), c, tokens, c.context_length).logits;
  double worst = 0, largest = 0;
  for (std::size_t pos = 0; pos < tokens.size(); ++pos) {
    for (std::int64_t v = 0; v < c.vocab_size; ++v) {
      worst = std::max(worst, std::abs(logits[pos * c.vocab_size + v] - expected[pos][v]));
      largest = std::max(largest, std::abs(expected[pos][v]));
    }
  }
  std::printf("[ forward ] %s %s: max |logit - double reference| = %.6f (largest |logit| %.3f)\n",
              to_string(param.arch).c_str(), std::string(name(param.type)).c_str(), worst, largest);
  EXPECT_LE(worst, param.tolerance);
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Architectures, ForwardVsDouble,
                         ::testing::Values(ArchCase{Architecture::llama, TensorType::f32, 2e-3},
                                           ArchCase{Architecture::qwen2, TensorType::f32, 2e-3},
                                           ArchCase{Architecture::qwen3, TensorType::f32, 2e-3},
                                           // F16 weights meet activations rounded to F16, as the reference's do
                                           // (llama_model.cpp): 0.0028 here.
                                           ArchCase{Architecture::qwen2, TensorType::f16, 4e-3},
                                           // Quantized weights dot 8-bit quantized activations (as the reference
                                           // implementation does, and the shared parity tests confirm
                                           // bit-for-bit): about 1.5% of these logits (|logit| up to 3.3).
                                           ArchCase{Architecture::qwen3, TensorType::q8_0, 6e-2},
                                           ArchCase{Architecture::llama, TensorType::q4_0, 6e-2},
                                           ArchCase{Architecture::llama, TensorType::bf16, 5e-3},
                                           // K-quant weights dot Q8_K activations, one scale per 256
                                           // values: coarser than Q8_0's one per 32, about 2% here.
                                           ArchCase{Architecture::qwen2, TensorType::q4_k, 0.1, 256, 512},
                                           ArchCase{Architecture::llama, TensorType::q5_k, 0.1, 256, 512},
                                           ArchCase{Architecture::qwen3, TensorType::q6_k, 0.1, 256, 512},
                                           ArchCase{Architecture::llama, TensorType::q2_k, 0.1, 256, 512},
                                           ArchCase{Architecture::qwen2, TensorType::q3_k, 0.1, 256, 512},
                                           ArchCase{Architecture::llama, TensorType::iq4_xs, 0.1, 256, 512}),
                         [](const auto& tested) {
                           return to_string(tested.param.arch) + "_" + std::string(name(tested.param.type));
                         });

TEST(ForwardBatching, OnePrefillEqualsChunksEqualsOneTokenAtATime) {
  SynthSpec spec;
  spec.architecture = Architecture::qwen2;
  spec.type = TensorType::q8_0;
  spec.ffn_dim = 96;  // q8_0 rows are whole 32-value blocks
  spec.vocab_size = 64;
  spec.seed = 3;
  const std::string path = temp_model("batching");
  write_synthetic_model(spec, path);
  auto loaded = LoadedModel::open(path);
  const auto& c = loaded->config();
  ThreadPool pool(2);
  const std::vector<std::int32_t> tokens{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5};
  const auto n = static_cast<std::int64_t>(tokens.size());

  auto run = [&](std::int64_t max_batch, bool one_at_a_time) {
    LlamaModel model(c, loaded->weights(), pool, max_batch);
    auto cache = model.make_cache();
    std::vector<float> logits(static_cast<std::size_t>(n * c.vocab_size));
    if (one_at_a_time) {
      for (std::int64_t i = 0; i < n; ++i) {
        model.forward({&tokens[static_cast<std::size_t>(i)], 1}, i, cache, LlamaModel::Logits::last,
                      &logits[static_cast<std::size_t>(i * c.vocab_size)]);
      }
    } else {
      model.forward(tokens, 0, cache, LlamaModel::Logits::all, logits.data());
    }
    return logits;
  };
  const auto whole = run(64, false);
  const auto chunks = run(4, false);
  const auto single = run(64, true);
  for (std::size_t i = 0; i < whole.size(); ++i) {
    ASSERT_NEAR(whole[i], chunks[i], 1e-5) << "logit " << i;
    ASSERT_NEAR(whole[i], single[i], 1e-5) << "logit " << i;
  }
  std::filesystem::remove(path);
}

TEST(ForwardErrors, TokensOutsideTheVocabularyOrContextAreRefused) {
  SynthSpec spec;
  spec.vocab_size = 32;
  spec.context_length = 8;
  const std::string path = temp_model("errors");
  write_synthetic_model(spec, path);
  auto loaded = LoadedModel::open(path);
  ThreadPool pool(1);
  LlamaModel model(loaded->config(), loaded->weights(), pool, 4);
  auto cache = model.make_cache();
  std::vector<float> logits(32 * 16);
  const std::vector<std::int32_t> bad_token{40};
  EXPECT_THROW(model.forward(bad_token, 0, cache, LlamaModel::Logits::last, logits.data()), std::out_of_range);
  const std::vector<std::int32_t> too_long(9, 1);
  EXPECT_THROW(model.forward(too_long, 0, cache, LlamaModel::Logits::last, logits.data()), std::out_of_range);
  std::filesystem::remove(path);
}

}  // namespace

namespace {

// The llama2.c checkpoint and the GGUF conversion of aidreams260K are the same model: same logits.
TEST(ForwardFormats, Llama2cCheckpointGivesTheSameLogitsAsItsGgufForm) {
  const std::string dir = loom::compute::testing::shared_path("models/");
  for (const auto* file : {"aidreams260K.bin", "aidreams260K.gguf"}) REQUIRE_SHARED_FILE(dir + file);
  auto from_bin = LoadedModel::open(dir + "aidreams260K.bin");
  auto from_gguf = LoadedModel::open(dir + "aidreams260K.gguf");
  EXPECT_EQ(from_bin->gguf(), nullptr);
  ThreadPool pool(2);
  const std::vector<std::int32_t> tokens{1, 403, 407, 285, 446, 280, 432, 269};
  auto logits_of = [&](const LoadedModel& loaded) {
    LlamaModel model(loaded.config(), loaded.weights(), pool, 8);
    auto cache = model.make_cache();
    std::vector<float> logits(tokens.size() * static_cast<std::size_t>(loaded.config().vocab_size));
    model.forward(tokens, 0, cache, LlamaModel::Logits::all, logits.data());
    return logits;
  };
  const auto a = logits_of(*from_bin);
  const auto b = logits_of(*from_gguf);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << "logit " << i;
}

}  // namespace

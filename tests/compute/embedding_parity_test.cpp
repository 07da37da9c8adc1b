// Embeddings in the CPU backend against a pooled double-precision forward computed here (double_reference.hpp),
// on the shared aidreams260K model (a real tiny Llama, F32): mean (the default without `pooling_type`),
// cls and last pooling (copies of the file with the key set), a prompt longer than one step (max_batch_tokens
// 8, fed in chunks beside a generating sequence), the unit L2 norm, no token sampled for an embedding, and the
// refusal of pooling types that give no sequence embedding.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "double_reference.hpp"
#include "loom/compute/cpu/cpu_backend.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/model/gguf_writer.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "test_files.hpp"

namespace loom::compute {
namespace {

using testing::ScratchDir;
using testing::shared_path;

constexpr std::int64_t kParityBlockSize = 4;
constexpr std::int64_t kParityBlocksPerSequence = 32;  // 128 positions: the model's whole context
constexpr std::int64_t kChunk = 8;               // max_batch_tokens: the prompt takes several steps

std::string parity_model_path() { return shared_path("models/aidreams260K.gguf"); }

// The shared file with `llama.pooling_type` set, written to `dir`.
std::string with_pooling(const ScratchDir& dir, std::uint32_t pooling) {
  const GgufFile source = GgufFile::open(parity_model_path());
  GgufWriter writer;
  for (const GgufKeyValue& entry : source.metadata()) writer.add(entry.key, entry.value);
  writer.add_u32("llama.pooling_type", pooling);
  for (const TensorView& t : source.tensors()) writer.add_tensor(t.name, t.type, t.dims, std::span(t.data, t.bytes));
  const std::string path = dir.path("pooled_" + std::to_string(pooling) + ".gguf").string();
  writer.write(path);
  return path;
}

std::unique_ptr<CpuBackend> load(const std::string& path) {
  LoadOptions o;
  o.model_path = path;
  o.threads = 2;
  o.kv.block_size = kParityBlockSize;
  // F16 keys and values would round a row by ~1e-4 against the double forward; with F32 the largest
  // difference is ~1e-7.
  o.kv.type = TensorType::f32;
  o.kv_tokens = kParityBlockSize * kParityBlocksPerSequence * 2;
  o.max_batch_tokens = kChunk;
  return CpuBackend::load(o);
}

std::vector<BlockId> table(std::int64_t first) {
  std::vector<BlockId> blocks;
  for (std::int64_t b = 0; b < kParityBlocksPerSequence; ++b) blocks.push_back(static_cast<BlockId>(first + b));
  return blocks;
}

// Runs `prompt` as embedding sequence 1 in chunks of kChunk - 1 positions, each step shared with sequence 2,
// which generates greedily one token per step; returns the embedding (checking nothing else came for it).
std::vector<float> embed_in_chunks(CpuBackend& backend, const std::vector<std::int32_t>& prompt) {
  std::vector<float> embedding;
  std::int32_t last_generated = 1;
  for (std::size_t start = 0; start < prompt.size(); start += kChunk - 1) {
    const std::size_t end = std::min(prompt.size(), start + kChunk - 1);
    StepBatch batch;
    StepSequence embed;
    embed.sequence = 1;
    embed.embed = true;
    embed.tokens.assign(prompt.begin() + static_cast<std::ptrdiff_t>(start), prompt.begin() + static_cast<std::ptrdiff_t>(end));
    embed.start = static_cast<std::int64_t>(start);
    embed.sample = end == prompt.size();
    embed.table_from = start == 0 ? 0 : kParityBlocksPerSequence;
    if (start == 0) {
      embed.begin = SequenceStart{};
      embed.blocks = table(0);
    }
    StepSequence generate;
    generate.sequence = 2;
    generate.tokens = {last_generated};
    generate.start = static_cast<std::int64_t>(start / (kChunk - 1));
    generate.sample = true;
    generate.table_from = start == 0 ? 0 : kParityBlocksPerSequence;
    if (start == 0) {
      proto::SamplingParams greedy;
      greedy.temperature = 0.0;
      generate.begin = SequenceStart{greedy, {}};
      generate.blocks = table(kParityBlocksPerSequence);
    }
    batch.sequences = {embed, generate};
    StepResult result = backend.run(batch);
    EXPECT_EQ(result.sampled.size(), 1u) << "only the generating sequence samples";
    if (!result.sampled.empty()) {
      EXPECT_EQ(result.sampled[0].sequence, 2u);
      last_generated = result.sampled[0].token;
    }
    EXPECT_EQ(result.embeddings.size(), embed.sample ? 1u : 0u) << "the embedding comes with the last chunk only";
    if (!result.embeddings.empty()) {
      EXPECT_EQ(result.embeddings[0].sequence, 1u);
      embedding = result.embeddings[0].values;
    }
  }
  backend.release(1);
  backend.release(2);
  return embedding;
}

std::vector<double> normalized(std::vector<double> v) {
  double norm = 0.0;
  for (double x : v) norm += x * x;
  for (double& x : v) x /= std::sqrt(norm);
  return v;
}

// The reference pooling of the double forward's final normed hidden states.
std::vector<double> reference(const testing::DoubleForward& forward, Pooling pooling) {
  const auto& rows = forward.hidden;
  if (pooling == Pooling::cls) return normalized(rows.front());
  if (pooling == Pooling::last) return normalized(rows.back());
  std::vector<double> mean(rows.front().size(), 0.0);
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < mean.size(); ++i) mean[i] += row[i] / static_cast<double>(rows.size());
  }
  return normalized(mean);
}

class EmbeddingParity : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_SHARED_FILE(parity_model_path());
    const GgufFile file = GgufFile::open(parity_model_path());
    const std::unique_ptr<CpuBackend> backend = load(parity_model_path());
    prompt_ = encode_prompt(*backend->tokenizer(), "Once upon a time, a little cat sat by the warm window and dreamed", false);
    ASSERT_GT(prompt_.size(), static_cast<std::size_t>(2 * kChunk)) << "the prompt must take several steps";
    forward_ = testing::double_forward(file, backend->info().config, prompt_, backend->info().config.context_length);
  }

  void expect_parity(const std::string& path, Pooling pooling) {
    const std::unique_ptr<CpuBackend> backend = load(path);
    ASSERT_EQ(backend->info().config.pooling, pooling);
    const std::vector<float> got = embed_in_chunks(*backend, prompt_);
    const std::vector<double> want = reference(forward_, pooling);
    ASSERT_EQ(got.size(), want.size());
    double norm = 0.0;
    double worst = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      norm += static_cast<double>(got[i]) * got[i];
      worst = std::max(worst, std::abs(got[i] - want[i]));
    }
    EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-5) << "L2-normalised";
    EXPECT_LT(worst, 1e-6) << to_string(pooling) << " pooling differs from the double-precision reference";
  }

  std::vector<std::int32_t> prompt_;
  testing::DoubleForward forward_;
};

TEST_F(EmbeddingParity, MeanByDefaultMatchesThePooledDoubleForward) {
  expect_parity(parity_model_path(), Pooling::mean);
}

TEST_F(EmbeddingParity, LastAndClsPoolingFromTheFileMatchTheDoubleForward) {
  const ScratchDir dir("embedding_parity");
  expect_parity(with_pooling(dir, 3), Pooling::last);
  expect_parity(with_pooling(dir, 2), Pooling::cls);
}

TEST(EmbeddingPooling, NoneAndRankGiveNoSequenceEmbedding) {
  REQUIRE_SHARED_FILE(parity_model_path());
  const ScratchDir dir("embedding_pooling");
  for (const std::uint32_t pooling : {0u, 4u}) {
    const std::unique_ptr<CpuBackend> backend = load(with_pooling(dir, pooling));
    StepBatch batch;
    StepSequence s;
    s.sequence = 1;
    s.embed = true;
    s.sample = true;
    s.tokens = {1, 2, 3};
    s.begin = SequenceStart{};
    s.blocks = table(0);
    batch.sequences = {s};
    try {
      backend->run(batch);
      ADD_FAILURE() << "pooling type " << pooling << " embedded a sequence";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("gives no sequence embedding"), std::string::npos) << e.what();
    }
  }
}

TEST(EmbeddingPooling, AnUnknownPoolingTypeIsAFileError) {
  REQUIRE_SHARED_FILE(parity_model_path());
  const ScratchDir dir("embedding_pooling_bad");
  EXPECT_THROW(load(with_pooling(dir, 9)), ModelFileError);
}

}  // namespace
}  // namespace loom::compute

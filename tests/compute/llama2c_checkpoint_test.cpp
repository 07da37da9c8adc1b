// Llama2cCheckpoint: the shared aidreams260K checkpoint loads with its config, and its weights are the same
// bytes as the GGUF conversion of the same model under the same names and dims; damaged checkpoints throw
// ModelFileError naming the offset and field.
#include "loom/compute/model/llama2c_checkpoint.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "loom/compute/model/gguf_file.hpp"
#include "test_files.hpp"

namespace loom::compute {
namespace {

namespace fs = std::filesystem;

using testing::ScratchDir;
using testing::shared_path;

TEST(Llama2cCheckpoint, AidreamsConfig) {
  const std::string path = shared_path("models/aidreams260K.bin");
  REQUIRE_SHARED_FILE(path);
  const Llama2cCheckpoint checkpoint = Llama2cCheckpoint::open(path);
  const Llama2cConfig& c = checkpoint.config();
  EXPECT_EQ(checkpoint.path(), path);
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 4);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.seq_len, 128);
  EXPECT_TRUE(c.shared_classifier);
  EXPECT_EQ(c.head_size(), 16);
  EXPECT_EQ(c.kv_dim(), 64);

  ASSERT_EQ(checkpoint.tensors().size(), 1u + 9u * 4u + 1u);  // no output.weight: shared with the embedding
  EXPECT_EQ(checkpoint.find_tensor("output.weight"), nullptr);
  const TensorView& embd = checkpoint.get_tensor("token_embd.weight");
  EXPECT_EQ(embd.dims, (std::vector<std::int64_t>{64, 512}));
  EXPECT_EQ(embd.bytes, 64u * 512u * 4u);
  EXPECT_EQ(checkpoint.get_tensor("blk.3.ffn_down.weight").dims, (std::vector<std::int64_t>{172, 64}));
  EXPECT_EQ(checkpoint.get_tensor("blk.3.ffn_gate.weight").dims, (std::vector<std::int64_t>{64, 172}));
  EXPECT_EQ(checkpoint.get_tensor("blk.0.attn_norm.weight").dims, (std::vector<std::int64_t>{64}));
  for (const TensorView& t : checkpoint.tensors()) {
    EXPECT_EQ(t.type, TensorType::f32) << t.name;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data) % alignof(float), 0u) << t.name;
  }
  EXPECT_THROW((void)checkpoint.get_tensor("blk.4.attn_q.weight"), ModelFileError);
}

// The GGUF conversion holds the very same bytes: no Q/K row permutation (llama2.c and GGML's llama RoPE both
// rotate adjacent pairs), and output.weight is a copy of the shared embedding.
TEST(Llama2cCheckpoint, MatchesTheGgufConversion) {
  const std::string bin = shared_path("models/aidreams260K.bin");
  const std::string gguf_path = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(bin);
  REQUIRE_SHARED_FILE(gguf_path);
  const Llama2cCheckpoint checkpoint = Llama2cCheckpoint::open(bin);
  const GgufFile gguf = GgufFile::open(gguf_path);

  for (const TensorView& t : checkpoint.tensors()) {
    SCOPED_TRACE(t.name);
    const TensorView* g = gguf.find_tensor(t.name);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->type, TensorType::f32);
    EXPECT_EQ(g->dims, t.dims);
    ASSERT_EQ(g->bytes, t.bytes);
    EXPECT_EQ(std::memcmp(g->data, t.data, t.bytes), 0);
  }
  // Every GGUF tensor is accounted for: all of the checkpoint's, plus the copied classifier.
  EXPECT_EQ(gguf.tensors().size(), checkpoint.tensors().size() + 1);
  const TensorView& output = gguf.get_tensor("output.weight");
  const TensorView& embd = checkpoint.get_tensor("token_embd.weight");
  EXPECT_EQ(output.dims, embd.dims);
  ASSERT_EQ(output.bytes, embd.bytes);
  EXPECT_EQ(std::memcmp(output.data, embd.data, embd.bytes), 0);

  // The config agrees with the GGUF metadata.
  const Llama2cConfig& c = checkpoint.config();
  EXPECT_EQ(gguf.get_u32("llama.embedding_length"), static_cast<std::uint32_t>(c.dim));
  EXPECT_EQ(gguf.get_u32("llama.feed_forward_length"), static_cast<std::uint32_t>(c.hidden_dim));
  EXPECT_EQ(gguf.get_u32("llama.block_count"), static_cast<std::uint32_t>(c.n_layers));
  EXPECT_EQ(gguf.get_u32("llama.attention.head_count"), static_cast<std::uint32_t>(c.n_heads));
  EXPECT_EQ(gguf.get_u32("llama.attention.head_count_kv"), static_cast<std::uint32_t>(c.n_kv_heads));
  EXPECT_EQ(gguf.get_u32("llama.context_length"), static_cast<std::uint32_t>(c.seq_len));
  EXPECT_EQ(gguf.get_u32("llama.rope.dimension_count"), static_cast<std::uint32_t>(c.head_size()));
  EXPECT_EQ(gguf.get_string_array("tokenizer.ggml.tokens").size(), static_cast<std::size_t>(c.vocab_size));
}

// A small synthetic checkpoint: every float is its own index in the weights, so each view can be checked.
struct Synthetic {
  std::int32_t dim = 8, hidden = 12, layers = 2, heads = 2, kv_heads = 1, vocab = 10, seq = 4;
  bool shared = true;

  std::uint64_t floats() const {
    const std::uint64_t kv = static_cast<std::uint64_t>(dim / heads * kv_heads);
    const std::uint64_t d = dim, h = hidden, l = layers;
    std::uint64_t n = vocab * d + l * d + l * d * d + 2 * l * kv * d + l * d * d + l * d + 3 * l * h * d + d +
                      2 * static_cast<std::uint64_t>(seq) * static_cast<std::uint64_t>(dim / heads / 2);
    if (!shared) n += vocab * d;
    return n;
  }
  std::vector<std::byte> bytes() const {
    const std::int32_t header[7] = {dim, hidden, layers, heads, kv_heads, shared ? vocab : -vocab, seq};
    std::vector<std::byte> out(sizeof header + floats() * 4);
    std::memcpy(out.data(), header, sizeof header);
    for (std::uint64_t i = 0; i < floats(); ++i) {
      const float value = static_cast<float>(i);
      std::memcpy(out.data() + sizeof header + i * 4, &value, 4);
    }
    return out;
  }
};

float first_value(const TensorView& t) {
  float v;
  std::memcpy(&v, t.data, 4);
  return v;
}

TEST(Llama2cCheckpoint, SeparateClassifierAndGroupedKv) {
  ScratchDir dir{"loom_llama2c"};
  Synthetic s;
  s.shared = false;
  const Llama2cCheckpoint checkpoint = Llama2cCheckpoint::open(dir.write("sep.bin", s.bytes()));
  const Llama2cConfig& c = checkpoint.config();
  EXPECT_FALSE(c.shared_classifier);
  EXPECT_EQ(c.vocab_size, 10);
  EXPECT_EQ(c.kv_dim(), 4);
  ASSERT_EQ(checkpoint.tensors().size(), 1u + 9u * 2u + 2u);

  // Offsets in floats, following the file order.
  const float embd = 0, rms_att = 80, wq = rms_att + 16, wk = wq + 128, wv = wk + 64, wo = wv + 64, rms_ffn = wo + 128,
              w1 = rms_ffn + 16, w2 = w1 + 192, w3 = w2 + 192, rms_final = w3 + 192, freq = rms_final + 8,
              wcls = freq + 2 * 4 * 2;
  EXPECT_EQ(first_value(checkpoint.get_tensor("token_embd.weight")), embd);
  EXPECT_EQ(first_value(checkpoint.get_tensor("blk.1.attn_norm.weight")), rms_att + 8);
  EXPECT_EQ(first_value(checkpoint.get_tensor("blk.1.attn_q.weight")), wq + 64);
  EXPECT_EQ(first_value(checkpoint.get_tensor("blk.1.attn_k.weight")), wk + 32);
  EXPECT_EQ(checkpoint.get_tensor("blk.1.attn_k.weight").dims, (std::vector<std::int64_t>{8, 4}));
  EXPECT_EQ(first_value(checkpoint.get_tensor("blk.1.attn_v.weight")), wv + 32);
  EXPECT_EQ(first_value(checkpoint.get_tensor("blk.0.attn_output.weight")), wo);
  EXPECT_EQ(first_value(checkpoint.get_tensor("blk.1.ffn_norm.weight")), rms_ffn + 8);
  EXPECT_EQ(first_value(checkpoint.get_tensor("blk.1.ffn_gate.weight")), w1 + 96);
  EXPECT_EQ(first_value(checkpoint.get_tensor("blk.1.ffn_down.weight")), w2 + 96);
  EXPECT_EQ(checkpoint.get_tensor("blk.1.ffn_down.weight").dims, (std::vector<std::int64_t>{12, 8}));
  EXPECT_EQ(first_value(checkpoint.get_tensor("blk.1.ffn_up.weight")), w3 + 96);
  EXPECT_EQ(first_value(checkpoint.get_tensor("output_norm.weight")), rms_final);
  const TensorView& output = checkpoint.get_tensor("output.weight");
  EXPECT_EQ(first_value(output), wcls);
  EXPECT_EQ(output.dims, (std::vector<std::int64_t>{8, 10}));
  EXPECT_EQ(checkpoint.tensors().back().name, "output.weight");
}

class Llama2cCorrupt : public ::testing::Test {
 protected:
  void expect_error(const std::vector<std::byte>& bytes, std::uint64_t offset, const std::string& key,
                    const std::string& expected) {
    const std::string path = dir_.write("bad.bin", bytes);
    try {
      Llama2cCheckpoint::open(path);
      ADD_FAILURE() << "the damaged checkpoint opened";
    } catch (const ModelFileError& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.path(), path);
      EXPECT_EQ(e.offset(), offset) << what;
      EXPECT_EQ(e.key(), key) << what;
      EXPECT_NE(what.find(path + ": offset " + std::to_string(offset) + ": "), std::string::npos) << what;
      EXPECT_NE(what.find(expected), std::string::npos) << what;
    }
  }
  static void set_field(std::vector<std::byte>& bytes, int field, std::int32_t value) {
    std::memcpy(bytes.data() + 4 * field, &value, 4);
  }

  ScratchDir dir_{"loom_llama2c"};
  Synthetic synthetic_;
};

TEST_F(Llama2cCorrupt, TheSyntheticFileOpens) {
  EXPECT_EQ(Llama2cCheckpoint::open(dir_.write("good.bin", synthetic_.bytes())).tensors().size(), 20u);
}

TEST_F(Llama2cCorrupt, ZeroAndNegativeDims) {
  const char* names[] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int field = 0; field < 7; ++field) {
    SCOPED_TRACE(names[field]);
    auto bytes = synthetic_.bytes();
    set_field(bytes, field, 0);
    expect_error(bytes, 4u * static_cast<unsigned>(field), names[field], "0 (expected a");
    if (field != 5) {  // a negative vocab_size is legal: it marks a separate classifier
      set_field(bytes, field, -3);
      expect_error(bytes, 4u * static_cast<unsigned>(field), names[field], "-3 (expected a positive number)");
    }
  }
  auto bytes = synthetic_.bytes();
  set_field(bytes, 5, std::numeric_limits<std::int32_t>::min());
  expect_error(bytes, 20, "vocab_size", "-2147483648 (expected a non-zero vocabulary size)");
}

TEST_F(Llama2cCorrupt, InconsistentHeads) {
  auto bytes = synthetic_.bytes();
  set_field(bytes, 3, 3);  // dim 8 is not a multiple of 3 heads
  expect_error(bytes, 12, "n_heads", "dim 8 is not a multiple of n_heads 3");
  bytes = synthetic_.bytes();
  set_field(bytes, 4, 4);  // more kv heads than heads
  expect_error(bytes, 16, "n_kv_heads", "n_heads 2 is not a multiple of n_kv_heads 4");
  bytes = synthetic_.bytes();
  set_field(bytes, 3, 8);  // head size 1: RoPE needs pairs
  set_field(bytes, 4, 8);
  expect_error(bytes, 12, "n_heads", "head size 1 (dim / n_heads) is odd");
}

TEST_F(Llama2cCorrupt, AbsurdSizes) {
  auto bytes = synthetic_.bytes();
  set_field(bytes, 0, 1 << 30);  // dim
  set_field(bytes, 3, 1 << 29);  // heads: head size 2
  set_field(bytes, 4, 1 << 29);
  set_field(bytes, 5, std::numeric_limits<std::int32_t>::max());  // vocab
  expect_error(bytes, 28, "token_embd.weight", "needs 9223372032559808512 bytes but only");
  bytes = synthetic_.bytes();
  set_field(bytes, 2, std::numeric_limits<std::int32_t>::max());  // layers
  expect_error(bytes, 28 + 10 * 8 * 4, "blk.*.attn_norm.weight", "needs 68719476704 bytes but only");
}

TEST_F(Llama2cCorrupt, ClassifierMissing) {
  auto bytes = synthetic_.bytes();
  set_field(bytes, 5, -10);  // claims a separate classifier the file does not have
  expect_error(bytes, bytes.size(), "output.weight", "needs 320 bytes but only 0 remain");
}

TEST_F(Llama2cCorrupt, TrailingBytes) {
  auto bytes = synthetic_.bytes();
  bytes.resize(bytes.size() + 12);
  expect_error(bytes, bytes.size() - 12, "", "12 unexpected bytes after the weights");
}

TEST_F(Llama2cCorrupt, GgufFileIsNamedAsSuch) {
  auto bytes = synthetic_.bytes();
  std::memcpy(bytes.data(), "GGUF", 4);
  expect_error(bytes, 0, "", "this is a GGUF file, not a llama2.c checkpoint");
}

TEST_F(Llama2cCorrupt, EveryTruncationThrows) {
  Synthetic tiny;  // about 500 bytes, so that every prefix can be tried
  tiny.dim = 4;
  tiny.hidden = 4;
  tiny.layers = 1;
  tiny.vocab = 3;
  tiny.seq = 2;
  const auto bytes = tiny.bytes();
  ASSERT_NO_THROW(Llama2cCheckpoint::open(dir_.write("whole.bin", bytes)));
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    SCOPED_TRACE("prefix length " + std::to_string(length));
    const std::string path = dir_.write(
        "cut.bin", std::vector<std::byte>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(length)));
    try {
      Llama2cCheckpoint::open(path);
      ADD_FAILURE() << "a truncated checkpoint opened";
    } catch (const ModelFileError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
      if (length > 0) {
        ASSERT_TRUE(e.offset().has_value()) << what;
        EXPECT_TRUE(what.find("needs") != std::string::npos) << what;
      }
    }
  }
}

}  // namespace
}  // namespace loom::compute

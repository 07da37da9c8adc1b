// GgufFile against the shared model and vocabulary files, MappedFile, and GGUF files damaged on purpose:
// every corruption must end in a ModelFileError that names the offset or key and what was expected.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "loom/compute/model/gguf_file.hpp"
#include "test_files.hpp"
#include "loom/compute/model/gguf_writer.hpp"
#include "loom/compute/model/mapped_file.hpp"
#include "loom/compute/model/model_file_error.hpp"

namespace loom::compute {
namespace {

namespace fs = std::filesystem;

using testing::ScratchDir;
using testing::shared_path;

// ---------------------------------------------------------------------------------------------------------
// MappedFile

TEST(MappedFile, MapsTheWholeFile) {
  ScratchDir dir{"loom_gguf_reader"};
  std::vector<std::byte> bytes(5000);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7);
  const std::string path = dir.write("data.bin", bytes);
  const MappedFile file(path);
  EXPECT_EQ(file.path(), path);
  ASSERT_EQ(file.size(), bytes.size());
  EXPECT_EQ(std::memcmp(file.data(), bytes.data(), bytes.size()), 0);
  EXPECT_EQ(file.bytes().size(), bytes.size());
}

TEST(MappedFile, MoveKeepsTheMappingInPlace) {
  ScratchDir dir{"loom_gguf_reader"};
  const std::string path = dir.write("data.bin", std::vector<std::byte>(100, std::byte{42}));
  MappedFile first(path);
  const std::byte* data = first.data();
  MappedFile second(std::move(first));
  EXPECT_EQ(second.data(), data);
  EXPECT_EQ(second.size(), 100u);
  EXPECT_EQ(first.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(first.size(), 0u);       // NOLINT(bugprone-use-after-move)
  MappedFile third(dir.write("other.bin", std::vector<std::byte>(10)));
  third = std::move(second);
  EXPECT_EQ(third.data(), data);
  EXPECT_EQ(third.path(), path);
}

TEST(MappedFile, MissingFileNamesPathAndReason) {
  const std::string path = "/nonexistent/loom/model.gguf";
  try {
    MappedFile file(path);
    FAIL() << "expected MappedFileError";
  } catch (const MappedFileError& e) {
    EXPECT_EQ(e.error_number(), ENOENT);
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
  }
}

TEST(MappedFile, EmptyFileAndDirectoryAreRefused) {
  ScratchDir dir{"loom_gguf_reader"};
  const std::string empty = dir.write("empty.bin", {});
  try {
    MappedFile file(empty);
    FAIL() << "expected MappedFileError";
  } catch (const MappedFileError& e) {
    EXPECT_NE(std::string(e.what()).find(empty + ": the file is empty"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MappedFile{dir.path("").string()}, MappedFileError);
  // A MappedFileError is a ModelFileError, so loaders have one error type to catch.
  EXPECT_THROW(MappedFile{empty}, ModelFileError);
}

// ---------------------------------------------------------------------------------------------------------
// The shared files

struct SharedGguf {
  const char* file;
  TensorType main_type;  // of the 2-D weights other than output.weight
};

void expect_tensors_inside_and_aligned(const GgufFile& gguf) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const TensorView& t : gguf.tensors()) {
    const std::uint64_t offset = gguf.file_offset(t);
    EXPECT_EQ(offset % gguf.alignment(), 0u) << t.name;
    EXPECT_GE(offset, gguf.data_offset()) << t.name;
    EXPECT_LE(offset + t.bytes, gguf.file_size()) << t.name;
    EXPECT_EQ(tensor_bytes(t.type, static_cast<std::uint64_t>(t.elements())), t.bytes) << t.name;
    ranges.emplace_back(offset, offset + t.bytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first) << "overlap";
}

void expect_llama_vocab(const GgufFile& gguf, std::size_t size) {
  EXPECT_EQ(gguf.get_string("tokenizer.ggml.model"), "llama");
  const auto& tokens = gguf.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), size);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(gguf.get_f32_array("tokenizer.ggml.scores").size(), size);
  const auto types = gguf.get_i32_array("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), size);
  EXPECT_EQ(types[0], 2);  // unknown
  EXPECT_EQ(types[1], 3);  // control
  EXPECT_EQ(types[3], 6);  // byte
  EXPECT_EQ(gguf.get_u32("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(gguf.get_u32("tokenizer.ggml.eos_token_id"), 2u);
}

TEST(GgufReader, Synth11MFilesOpenWithTheirTypes) {
  const SharedGguf files[] = {
      {"synth11M-f16.gguf", TensorType::f16},   {"synth11M-q8_0.gguf", TensorType::q8_0},
      {"synth11M-q4_0.gguf", TensorType::q4_0}, {"synth11M-q4_k_m.gguf", TensorType::q4_k},
      {"synth11M-q6_k.gguf", TensorType::q6_k},
  };
  for (const auto& f : files) {
    SCOPED_TRACE(f.file);
    const std::string path = shared_path(std::string("models/") + f.file);
    REQUIRE_SHARED_FILE(path);
    const GgufFile gguf = GgufFile::open(path);
    EXPECT_EQ(gguf.version(), 3u);
    EXPECT_EQ(gguf.path(), path);
    EXPECT_EQ(gguf.alignment(), 32u);
    EXPECT_EQ(gguf.data_offset(), 726144u);  // the tensor infos end at 726122
    EXPECT_EQ(gguf.metadata().size(), 21u);
    EXPECT_EQ(gguf.get_string("general.architecture"), "llama");
    EXPECT_EQ(gguf.get_u32("llama.block_count"), 4u);
    EXPECT_EQ(gguf.get_u32("llama.embedding_length"), 256u);
    EXPECT_EQ(gguf.get_u32("llama.feed_forward_length"), 768u);
    EXPECT_EQ(gguf.get_u32("llama.attention.head_count"), 8u);
    EXPECT_EQ(gguf.get_u32("llama.attention.head_count_kv"), 4u);
    EXPECT_EQ(gguf.get_u32("llama.context_length"), 2048u);
    EXPECT_EQ(gguf.get_u32("llama.rope.dimension_count"), 32u);
    EXPECT_FLOAT_EQ(gguf.get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
    EXPECT_EQ(gguf.get_u32("general.quantization_version"), 2u);
    expect_llama_vocab(gguf, 32000);

    ASSERT_EQ(gguf.tensors().size(), 39u);  // embd, output, output_norm, 4 x 9
    expect_tensors_inside_and_aligned(gguf);
    const TensorView& embd = gguf.get_tensor("token_embd.weight");
    EXPECT_EQ(embd.dims, (std::vector<std::int64_t>{256, 32000}));
    EXPECT_EQ(embd.type, f.main_type);
    EXPECT_EQ(gguf.get_tensor("blk.3.attn_k.weight").dims, (std::vector<std::int64_t>{256, 128}));
    EXPECT_EQ(gguf.get_tensor("blk.0.ffn_down.weight").dims, (std::vector<std::int64_t>{768, 256}));
    EXPECT_EQ(gguf.get_tensor("blk.0.ffn_up.weight").dims, (std::vector<std::int64_t>{256, 768}));

    int q6k = 0;
    int main = 0;
    for (const TensorView& t : gguf.tensors()) {
      if (t.dims.size() == 1) {
        EXPECT_EQ(t.type, TensorType::f32) << t.name;  // norms stay f32
        continue;
      }
      ASSERT_EQ(t.dims.size(), 2u) << t.name;
      if (t.type == TensorType::q6_k) ++q6k;
      if (t.type == f.main_type) ++main;
    }
    const TensorType output_type = gguf.get_tensor("output.weight").type;
    switch (f.main_type) {
      case TensorType::f16:
      case TensorType::q8_0:
        EXPECT_EQ(main, 30);
        EXPECT_EQ(output_type, f.main_type);
        break;
      case TensorType::q4_0:  // the quantizer keeps the output projection at q6_K
        EXPECT_EQ(main, 29);
        EXPECT_EQ(q6k, 1);
        EXPECT_EQ(output_type, TensorType::q6_k);
        break;
      case TensorType::q4_k:  // q4_K_M: q6_K for output, and attn_v / ffn_down of some layers
        EXPECT_EQ(main, 25);
        EXPECT_EQ(q6k, 5);
        EXPECT_EQ(output_type, TensorType::q6_k);
        EXPECT_EQ(gguf.get_tensor("blk.3.ffn_down.weight").type, TensorType::q6_k);
        EXPECT_EQ(gguf.get_tensor("blk.0.ffn_down.weight").type, TensorType::q4_k);
        break;
      case TensorType::q6_k: EXPECT_EQ(q6k, 30); break;
      default: FAIL();
    }
  }
}

TEST(GgufReader, Aidreams260KIsAllF32) {
  const std::string path = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(path);
  const GgufFile gguf = GgufFile::open(path);
  EXPECT_EQ(gguf.version(), 3u);
  EXPECT_EQ(gguf.data_offset(), 13664u);
  EXPECT_EQ(gguf.metadata().size(), 19u);
  EXPECT_EQ(gguf.get_string("general.architecture"), "llama");
  EXPECT_EQ(gguf.get_string("general.name"), "llama");
  EXPECT_EQ(gguf.get_u32("llama.embedding_length"), 64u);
  EXPECT_EQ(gguf.get_u32("llama.feed_forward_length"), 172u);
  EXPECT_EQ(gguf.get_u32("llama.block_count"), 4u);
  EXPECT_EQ(gguf.get_u32("llama.attention.head_count"), 4u);
  EXPECT_EQ(gguf.get_u32("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(gguf.get_u32("llama.context_length"), 128u);
  EXPECT_EQ(gguf.get_u32("llama.rope.dimension_count"), 16u);
  EXPECT_EQ(gguf.get_u32("tokenizer.ggml.padding_token_id"), 0xFFFFFFFFu);
  expect_llama_vocab(gguf, 512);

  ASSERT_EQ(gguf.tensors().size(), 39u);
  expect_tensors_inside_and_aligned(gguf);
  for (const TensorView& t : gguf.tensors()) EXPECT_EQ(t.type, TensorType::f32) << t.name;
  EXPECT_EQ(gguf.tensors().front().name, "token_embd.weight");
  EXPECT_EQ(gguf.file_offset(gguf.tensors().front()), 13664u);
  EXPECT_EQ(gguf.get_tensor("output.weight").dims, (std::vector<std::int64_t>{64, 512}));
  EXPECT_EQ(gguf.get_tensor("blk.2.ffn_gate.weight").dims, (std::vector<std::int64_t>{64, 172}));
  EXPECT_EQ(gguf.get_tensor("blk.2.ffn_gate.weight").bytes, 64u * 172u * 4u);
  EXPECT_EQ(gguf.find_tensor("blk.4.attn_q.weight"), nullptr);
}

TEST(GgufReader, VocabularyOnlyFilesHaveNoTensors) {
  const std::string spm = shared_path("vocab/ggml-vocab-llama-spm.gguf");
  const std::string gpt2 = shared_path("vocab/ggml-vocab-gpt-2.gguf");
  REQUIRE_SHARED_FILE(spm);
  REQUIRE_SHARED_FILE(gpt2);

  const GgufFile llama = GgufFile::open(spm);
  EXPECT_TRUE(llama.tensors().empty());
  EXPECT_EQ(llama.get_string("general.architecture"), "llama");
  EXPECT_EQ(llama.get_string("tokenizer.ggml.pre"), "default");
  EXPECT_EQ(llama.get_u32("llama.vocab_size"), 32000u);
  EXPECT_TRUE(llama.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(llama.get_bool("tokenizer.ggml.add_eos_token"));
  expect_llama_vocab(llama, 32000);

  const GgufFile gpt = GgufFile::open(gpt2);
  EXPECT_TRUE(gpt.tensors().empty());
  EXPECT_EQ(gpt.get_string("general.architecture"), "gpt2");
  EXPECT_EQ(gpt.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(gpt.get_u32("gpt2.context_length"), 1024u);
  EXPECT_FLOAT_EQ(gpt.get_f32("gpt2.attention.layer_norm_epsilon"), 1e-5f);
  const auto& tokens = gpt.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 50257u);
  EXPECT_EQ(tokens[0], "!");
  const auto& merges = gpt.get_string_array("tokenizer.ggml.merges");
  ASSERT_EQ(merges.size(), 50000u);
  EXPECT_EQ(merges[0], "\xC4\xA0 t");  // "Ġ t"
  EXPECT_EQ(gpt.get_u32("tokenizer.ggml.bos_token_id"), 50256u);
}

TEST(GgufReader, TypedGettersNameKeyAndTypes) {
  const std::string path = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(path);
  const GgufFile gguf = GgufFile::open(path);

  // Integer getters take any integer value that fits.
  EXPECT_EQ(gguf.get_u64("llama.block_count"), 4u);
  EXPECT_EQ(gguf.get_i32("llama.block_count"), 4);
  EXPECT_EQ(gguf.get_i64("tokenizer.ggml.padding_token_id"), 0xFFFFFFFFll);
  EXPECT_EQ(gguf.find_u32("llama.block_count"), 4u);
  EXPECT_EQ(gguf.find_u32("llama.expert_count"), std::nullopt);
  EXPECT_EQ(gguf.find_f32("llama.rope.freq_base"), std::nullopt);
  EXPECT_EQ(gguf.find_bool("tokenizer.ggml.add_bos_token"), std::nullopt);
  EXPECT_EQ(gguf.find_string("general.name"), "llama");
  EXPECT_TRUE(gguf.has("llama.context_length"));
  EXPECT_FALSE(gguf.has("llama.context"));

  auto expect_error = [&](auto&& call, const std::string& expected) {
    try {
      call();
      ADD_FAILURE() << "expected ModelFileError containing: " << expected;
    } catch (const ModelFileError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_EQ(e.path(), path);
    }
  };
  expect_error([&] { (void)gguf.get_u32("llama.expert_count"); },
               "'llama.expert_count': missing metadata key (expected u32)");
  expect_error([&] { (void)gguf.get_i32("tokenizer.ggml.padding_token_id"); },
               "'tokenizer.ggml.padding_token_id': expected i32, found u32 4294967295 (out of range)");
  expect_error([&] { (void)gguf.get_string("llama.block_count"); }, "expected string, found u32 4");
  expect_error([&] { (void)gguf.get_u32("general.architecture"); }, "expected u32, found string \"llama\"");
  expect_error([&] { (void)gguf.get_f32_array("tokenizer.ggml.tokens"); },
               "expected array<f32>, found array<string> [\"<unk>\", \"<s>\", \"</s>\", ... (512 items)]");
  expect_error([&] { (void)gguf.get_string_array("llama.block_count"); }, "expected an array, found u32 4");
  expect_error([&] { (void)gguf.get_i32_array("tokenizer.ggml.scores"); }, "integer array");
  expect_error([&] { (void)gguf.find_u32("general.name"); }, "expected u32");  // present but mistyped
  expect_error([&] { (void)gguf.get_tensor("blk.9.attn_q.weight"); }, "'blk.9.attn_q.weight': missing tensor");

  // Mistyped keys carry the offset of their entry.
  try {
    (void)gguf.get_bool("llama.block_count");
    FAIL();
  } catch (const ModelFileError& e) {
    EXPECT_EQ(e.key(), "llama.block_count");
    ASSERT_TRUE(e.offset().has_value());
    EXPECT_NE(std::string(e.what()).find(": offset " + std::to_string(*e.offset()) + ": "), std::string::npos);
  }
}

TEST(GgufReader, MetadataSummariesForInfo) {
  const std::string path = shared_path("models/synth11M-q4_0.gguf");
  REQUIRE_SHARED_FILE(path);
  const GgufFile gguf = GgufFile::open(path);
  std::vector<std::string> keys;
  for (const GgufKeyValue& kv : gguf.metadata()) keys.push_back(kv.key);
  EXPECT_EQ(keys.front(), "tokenizer.ggml.tokens");  // file order is kept
  EXPECT_EQ(keys.back(), "general.file_type");

  const GgufValue& tokens = gguf.get("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens.type_name(), "array<string>");
  EXPECT_EQ(tokens.summary(3), "[\"<unk>\", \"<s>\", \"</s>\", ... (32000 items)]");
  EXPECT_EQ(gguf.get("tokenizer.ggml.scores").type_name(), "array<f32>");
  EXPECT_EQ(gguf.get("llama.block_count").type_name(), "u32");
  EXPECT_EQ(gguf.get("llama.block_count").summary(), "4");
  EXPECT_EQ(gguf.get("general.architecture").summary(), "\"llama\"");
  EXPECT_EQ(gguf.get("llama.attention.layer_norm_rms_epsilon").summary(), "1e-05");
  for (const GgufKeyValue& kv : gguf.metadata()) EXPECT_FALSE(kv.value.summary().empty()) << kv.key;
}

TEST(GgufReader, MovedFileKeepsViewsValid) {
  const std::string path = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(path);
  GgufFile first = GgufFile::open(path);
  const TensorView* view = first.find_tensor("output_norm.weight");
  ASSERT_NE(view, nullptr);
  const std::byte* data = view->data;
  const GgufFile second = std::move(first);
  EXPECT_EQ(second.get_tensor("output_norm.weight").data, data);
  float first_value = 0;
  std::memcpy(&first_value, data, sizeof first_value);
  EXPECT_TRUE(std::isfinite(first_value));
}

// ---------------------------------------------------------------------------------------------------------
// Damaged files. A small valid file is built with GgufWriter, then single fields are overwritten.

std::vector<std::byte> sample_gguf() {
  GgufWriter writer;
  writer.add_string("general.architecture", "llama");
  writer.add_u32("key.a", 7);
  writer.add_u32("key.b", 8);
  writer.add_bool("key.c", true);
  writer.set_alignment(32);
  writer.add_array("test.tokens", std::vector<std::string>{"a", "bc", "def"});
  writer.add_array("test.nested", GgufArray(std::vector<GgufArray>{GgufArray(std::vector<std::int32_t>{1, 2}),
                                                                   GgufArray(std::vector<std::int32_t>{3})}));
  writer.add_f32("test.f", 1.5f);
  const std::vector<float> values{1, 2, 3, 4, 5, 6, 7, 8};
  writer.add_f32_tensor("t.a", {4, 2}, values);
  writer.add_f32_tensor("t.b", {8}, values);  // 32 bytes: the file ends with it, no padding after
  return writer.to_bytes();
}

// Where the length prefix of the string `text` lies (the start of a key or tensor info).
std::size_t find_string(const std::vector<std::byte>& bytes, const std::string& text) {
  const auto length = std::bit_cast<std::array<std::byte, 8>>(std::uint64_t{text.size()});
  std::vector<std::byte> needle(length.begin(), length.end());
  for (const char c : text) needle.push_back(static_cast<std::byte>(c));
  const auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  EXPECT_NE(it, bytes.end()) << text;
  return static_cast<std::size_t>(it - bytes.begin());
}

// The offset of a metadata entry's type field, and of its value just after it.
std::size_t type_of(const std::vector<std::byte>& bytes, const std::string& key) {
  return find_string(bytes, key) + 8 + key.size();
}
std::size_t value_of(const std::vector<std::byte>& bytes, const std::string& key) { return type_of(bytes, key) + 4; }

// Tensor info fields: n_dims, dims, type, offset.
struct TensorInfoAt {
  std::size_t n_dims, dims, type, offset;
};
TensorInfoAt tensor_info(const std::vector<std::byte>& bytes, const std::string& name, std::uint32_t n_dims) {
  const std::size_t at = find_string(bytes, name) + 8 + name.size();
  return {at, at + 4, at + 4 + 8 * n_dims, at + 4 + 8 * n_dims + 4};
}

template <class T>
void put(std::vector<std::byte>& bytes, std::size_t at, T value) {
  const auto raw = std::bit_cast<std::array<std::byte, sizeof(T)>>(value);
  for (std::size_t i = 0; i < raw.size(); ++i) bytes.at(at + i) = raw[i];
}

class GgufCorrupt : public ::testing::Test {
 protected:
  // Opens `bytes` and returns the error; fails the test when the file opens.
  ModelFileError open_error(const std::vector<std::byte>& bytes) {
    const std::string path = dir_.write("bad.gguf", bytes);
    try {
      GgufFile::open(path);
    } catch (const ModelFileError& e) {
      EXPECT_EQ(e.path(), path);
      EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
      return e;
    }
    ADD_FAILURE() << "the damaged file opened";
    return ModelFileError(path, std::nullopt, {}, "(opened)");
  }

  // The error must name `offset` (and `key` when given) and contain `expected`.
  void expect_error(const std::vector<std::byte>& bytes, std::uint64_t offset, const std::string& key,
                    const std::string& expected) {
    const ModelFileError e = open_error(bytes);
    const std::string what = e.what();
    EXPECT_EQ(e.offset(), offset) << what;
    EXPECT_NE(what.find(": offset " + std::to_string(offset) + ": "), std::string::npos) << what;
    EXPECT_EQ(e.key(), key) << what;
    if (!key.empty()) {
      EXPECT_NE(what.find("'" + key + "'"), std::string::npos) << what;
    }
    EXPECT_NE(what.find(expected), std::string::npos) << what;
  }

  ScratchDir dir_{"loom_gguf_reader"};
  std::vector<std::byte> bytes_ = sample_gguf();
};

TEST_F(GgufCorrupt, TheSampleItselfOpens) {
  const GgufFile gguf = GgufFile::open(dir_.write("good.gguf", bytes_));
  EXPECT_EQ(gguf.metadata().size(), 8u);
  ASSERT_EQ(gguf.tensors().size(), 2u);
  EXPECT_EQ(gguf.get_u32("key.b"), 8u);
  EXPECT_EQ(gguf.file_offset(gguf.tensors()[1]) + 32, bytes_.size());
}

TEST_F(GgufCorrupt, BadMagic) {
  bytes_[0] = std::byte{'X'};
  expect_error(bytes_, 0, "", "bad magic 58 47 55 46 (expected \"GGUF\"");
}

TEST_F(GgufCorrupt, Version1IsRefused) {
  put<std::uint32_t>(bytes_, 4, 1);
  expect_error(bytes_, 4, "", "GGUF version 1 is not supported (expected version 2 or 3)");
}

TEST_F(GgufCorrupt, UnknownVersion) {
  put<std::uint32_t>(bytes_, 4, 99);
  expect_error(bytes_, 4, "", "unsupported GGUF version 99 (expected 2 or 3)");
}

TEST_F(GgufCorrupt, BigEndianFileIsNamed) {
  put<std::uint32_t>(bytes_, 4, 0x03000000);
  expect_error(bytes_, 4, "", "big-endian");
}

TEST_F(GgufCorrupt, Version2IsAccepted) {
  put<std::uint32_t>(bytes_, 4, 2);  // v2 and v3 share the little-endian layout
  EXPECT_EQ(GgufFile::open(dir_.write("v2.gguf", bytes_)).version(), 2u);
}

TEST_F(GgufCorrupt, TensorCountPastTheEnd) {
  put<std::uint64_t>(bytes_, 8, 0x7FFFFFFFFFFFFFFFull);
  expect_error(bytes_, 8, "",
               "tensor count 9223372036854775807 exceeds what the file can hold (file size " +
                   std::to_string(bytes_.size()) + " bytes");
}

TEST_F(GgufCorrupt, TensorCountThatOnlyFitsWithoutTheMetadata) {
  // Small enough to pass the first check, too big for what is left after the metadata.
  put<std::uint64_t>(bytes_, 8, (bytes_.size() - 24) / 32);
  expect_error(bytes_, 8, "", "exceeds what the file can hold");
}

TEST_F(GgufCorrupt, KeyValueCountPastTheEnd) {
  put<std::uint64_t>(bytes_, 16, 1ull << 40);
  expect_error(bytes_, 16, "", "metadata entry count 1099511627776 exceeds what the file can hold");
}

TEST_F(GgufCorrupt, StringLengthOverflow) {
  put<std::uint64_t>(bytes_, 24, 1ull << 63);  // the first key's length
  expect_error(bytes_, 24, "", "metadata key length 9223372036854775808 exceeds the");
}

TEST_F(GgufCorrupt, StringValuePastTheEnd) {
  const std::size_t at = value_of(bytes_, "general.architecture");
  put<std::uint64_t>(bytes_, at, bytes_.size());
  expect_error(bytes_, at, "general.architecture",
               "string value length " + std::to_string(bytes_.size()) + " exceeds the");
}

TEST_F(GgufCorrupt, UnknownValueType) {
  const std::size_t at = type_of(bytes_, "key.a");
  put<std::uint32_t>(bytes_, at, 13);
  expect_error(bytes_, at, "key.a", "unknown value type 13 (expected 0 to 12)");
}

TEST_F(GgufCorrupt, BoolOtherThanZeroOrOne) {
  const std::size_t at = value_of(bytes_, "key.c");
  bytes_[at] = std::byte{2};
  expect_error(bytes_, at, "key.c", "bool value 2 (expected 0 or 1)");
}

TEST_F(GgufCorrupt, HugeArrayCount) {
  const std::size_t at = value_of(bytes_, "test.tokens") + 4;
  put<std::uint64_t>(bytes_, at, 1ull << 62);
  expect_error(bytes_, at, "test.tokens", "array length 4611686018427387904 exceeds what the file can hold");
}

TEST_F(GgufCorrupt, UnknownArrayElementType) {
  const std::size_t at = value_of(bytes_, "test.tokens");
  put<std::uint32_t>(bytes_, at, 77);
  expect_error(bytes_, at, "test.tokens", "unknown array element type 77");
}

TEST_F(GgufCorrupt, NestedArrayPastTheEnd) {
  // test.nested: element type, count 2, then the first inner array: element type i32, count 2.
  const std::size_t at = value_of(bytes_, "test.nested") + 4 + 8 + 4;
  put<std::uint64_t>(bytes_, at, 1000);
  expect_error(bytes_, at, "test.nested", "array length 1000 exceeds what the file can hold");
}

TEST_F(GgufCorrupt, ArraysNestedTooDeep) {
  GgufArray nested(std::vector<std::int32_t>{1});
  for (int i = 0; i < 10; ++i) nested = GgufArray(std::vector<GgufArray>{nested});
  GgufWriter writer;
  writer.add_array("deep", nested);
  const auto bytes = writer.to_bytes();
  // The innermost allowed level is 8; the 8th array's element type field names array again.
  const std::size_t at = value_of(bytes, "deep") + 7 * (4 + 8);
  expect_error(bytes, at, "deep", "arrays nested more than 8 levels deep");
}

TEST_F(GgufCorrupt, TooManyDimensions) {
  const auto info = tensor_info(bytes_, "t.a", 2);
  put<std::uint32_t>(bytes_, info.n_dims, 5);
  expect_error(bytes_, info.n_dims, "t.a", "tensor has 5 dimensions (expected 1 to 4)");
}

TEST_F(GgufCorrupt, ZeroDimensions) {
  const auto info = tensor_info(bytes_, "t.a", 2);
  put<std::uint32_t>(bytes_, info.n_dims, 0);
  expect_error(bytes_, info.n_dims, "t.a", "tensor has 0 dimensions (expected 1 to 4)");
}

TEST_F(GgufCorrupt, DimensionOfZero) {
  const auto info = tensor_info(bytes_, "t.a", 2);
  put<std::uint64_t>(bytes_, info.dims + 8, 0);
  expect_error(bytes_, info.dims + 8, "t.a", "dimension 1 is 0 (expected 1 to 2^63-1)");
}

TEST_F(GgufCorrupt, DimensionProductOverflow) {
  const auto info = tensor_info(bytes_, "t.a", 2);
  put<std::uint64_t>(bytes_, info.dims, 1ull << 32);
  put<std::uint64_t>(bytes_, info.dims + 8, 1ull << 32);
  expect_error(bytes_, info.dims + 8, "t.a",
               "dimensions [4294967296, 4294967296] overflow: the element count exceeds 2^63-1");
}

TEST_F(GgufCorrupt, ByteSizeOverflow) {
  // 2^62 elements fit in i64, but not as f32 bytes.
  const auto info = tensor_info(bytes_, "t.a", 2);
  put<std::uint64_t>(bytes_, info.dims, 1ull << 31);
  put<std::uint64_t>(bytes_, info.dims + 8, 1ull << 31);
  put<std::uint32_t>(bytes_, info.type, static_cast<std::uint32_t>(TensorType::f64));
  // 2^62 f64 = 2^65 bytes.
  expect_error(bytes_, info.type, "t.a", "overflow the byte size");
}

TEST_F(GgufCorrupt, UnknownTensorType) {
  const auto info = tensor_info(bytes_, "t.a", 2);
  put<std::uint32_t>(bytes_, info.type, 99);
  expect_error(bytes_, info.type, "t.a", "unknown tensor type id 99");
}

TEST_F(GgufCorrupt, PartialQuantBlock) {
  const auto info = tensor_info(bytes_, "t.a", 2);
  put<std::uint32_t>(bytes_, info.type, static_cast<std::uint32_t>(TensorType::q4_0));
  expect_error(bytes_, info.type, "t.a", "row length 4 is not a whole number of q4_0 blocks (32 values each)");
}

TEST_F(GgufCorrupt, TensorDataPastTheEnd) {
  const auto info = tensor_info(bytes_, "t.b", 1);
  put<std::uint64_t>(bytes_, info.offset, 1 << 20);
  expect_error(bytes_, info.offset, "t.b", "runs past the end of the file");
}

TEST_F(GgufCorrupt, TensorDataOffsetOverflow) {
  const auto info = tensor_info(bytes_, "t.b", 1);
  put<std::uint64_t>(bytes_, info.offset, ~std::uint64_t{31});  // aligned, and offset + size wraps around
  expect_error(bytes_, info.offset, "t.b", "runs past the end of the file");
}

TEST_F(GgufCorrupt, MisalignedTensorOffset) {
  const auto info = tensor_info(bytes_, "t.b", 1);
  put<std::uint64_t>(bytes_, info.offset, 36);
  expect_error(bytes_, info.offset, "t.b", "data offset 36 is not a multiple of the alignment 32");
}

TEST_F(GgufCorrupt, AlignmentNotAPowerOfTwo) {
  const std::size_t at = find_string(bytes_, "general.alignment");
  put<std::uint32_t>(bytes_, value_of(bytes_, "general.alignment"), 24);
  expect_error(bytes_, at, "general.alignment", "alignment 24 is not a power of two");
}

TEST_F(GgufCorrupt, AlignmentZero) {
  const std::size_t at = find_string(bytes_, "general.alignment");
  put<std::uint32_t>(bytes_, value_of(bytes_, "general.alignment"), 0);
  expect_error(bytes_, at, "general.alignment", "alignment 0 is not a power of two");
}

TEST_F(GgufCorrupt, AlignmentOfTheWrongType) {
  const std::size_t at = find_string(bytes_, "general.alignment");
  put<std::uint32_t>(bytes_, type_of(bytes_, "general.alignment"), static_cast<std::uint32_t>(GgufValueType::f32));
  expect_error(bytes_, at, "general.alignment", "expected a u32 alignment, found f32");
}

TEST_F(GgufCorrupt, DuplicateKey) {
  const std::size_t first = find_string(bytes_, "key.a");
  const std::size_t at = find_string(bytes_, "key.b");
  bytes_[at + 8 + 4] = std::byte{'a'};
  expect_error(bytes_, at, "key.a", "duplicate metadata key (first at offset " + std::to_string(first) + ")");
}

TEST_F(GgufCorrupt, DuplicateTensorName) {
  const std::size_t first = find_string(bytes_, "t.a");
  const std::size_t at = find_string(bytes_, "t.b");
  bytes_[at + 8 + 2] = std::byte{'a'};
  expect_error(bytes_, at, "t.a", "duplicate tensor name (first at offset " + std::to_string(first) + ")");
}

TEST_F(GgufCorrupt, EveryTruncationThrows) {
  ASSERT_NO_THROW(GgufFile::open(dir_.write("whole.gguf", bytes_)));
  for (std::size_t length = 0; length < bytes_.size(); ++length) {
    SCOPED_TRACE("prefix length " + std::to_string(length));
    const std::vector<std::byte> prefix(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(length));
    const std::string path = dir_.write("cut.gguf", prefix);
    try {
      GgufFile::open(path);
      ADD_FAILURE() << "a truncated file opened";
    } catch (const ModelFileError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
      if (length > 0) {  // an empty file cannot be mapped; it has no offset to name
        ASSERT_TRUE(e.offset().has_value()) << what;
        EXPECT_LE(*e.offset(), length) << what;
        const bool says_what = what.find("remain") != std::string::npos || what.find("exceeds") != std::string::npos ||
                               what.find("past the end") != std::string::npos;
        EXPECT_TRUE(says_what) << what;
      }
    }
  }
}

TEST_F(GgufCorrupt, EverySingleByteDamageIsHandled) {
  // Not every damaged byte makes the file invalid (a changed float is still a float), but none may crash.
  int refused = 0;
  for (std::size_t at = 0; at < bytes_.size(); ++at) {
    std::vector<std::byte> damaged = bytes_;
    damaged[at] ^= std::byte{0xA5};
    try {
      const GgufFile gguf = GgufFile::open(dir_.write("flip.gguf", damaged));
      for (const TensorView& t : gguf.tensors()) ASSERT_LE(gguf.file_offset(t) + t.bytes, gguf.file_size());
    } catch (const ModelFileError&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace loom::compute

// GgufWriter: what it writes, GgufFile reads back unchanged (every value, every tensor byte), with the
// layout other GGUF implementations expect; rewriting a shared model reproduces it byte for byte.
#include "loom/compute/model/gguf_writer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "loom/compute/model/gguf_file.hpp"

#include "test_files.hpp"

namespace loom::compute {
namespace {

namespace fs = std::filesystem;

using testing::ScratchDir;

std::vector<std::byte> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

std::vector<std::byte> random_bytes(std::size_t size, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> bytes(size);
  for (auto& b : bytes) b = static_cast<std::byte>(rng() & 0xFF);
  return bytes;
}

// Every scalar type at its extremes, strings, arrays of every element type, nested and empty arrays.
std::vector<std::pair<std::string, GgufValue>> every_kind_of_value() {
  std::vector<std::pair<std::string, GgufValue>> values;
  values.emplace_back("v.u8", std::uint8_t{255});
  values.emplace_back("v.i8", std::int8_t{-128});
  values.emplace_back("v.u16", std::uint16_t{65535});
  values.emplace_back("v.i16", std::int16_t{-32768});
  values.emplace_back("v.u32", std::uint32_t{4294967295u});
  values.emplace_back("v.i32", std::int32_t{std::numeric_limits<std::int32_t>::min()});
  values.emplace_back("v.f32", 3.25f);
  values.emplace_back("v.bool.true", true);
  values.emplace_back("v.bool.false", false);
  values.emplace_back("v.string", "hello, \"world\"\n\xE2\x96\x81x");
  values.emplace_back("v.string.empty", "");
  values.emplace_back("v.u64", std::uint64_t{std::numeric_limits<std::uint64_t>::max()});
  values.emplace_back("v.i64", std::int64_t{std::numeric_limits<std::int64_t>::min()});
  values.emplace_back("v.f64", -1.0e300);
  values.emplace_back("a.u8", std::vector<std::uint8_t>{0, 1, 255});
  values.emplace_back("a.i8", std::vector<std::int8_t>{-1, 0, 127});
  values.emplace_back("a.u16", std::vector<std::uint16_t>{1, 65535});
  values.emplace_back("a.i16", std::vector<std::int16_t>{-2, 2});
  values.emplace_back("a.u32", std::vector<std::uint32_t>{7, 4000000000u});
  values.emplace_back("a.i32", std::vector<std::int32_t>{-5, 6, 7});
  values.emplace_back("a.f32", std::vector<float>{0.5f, -0.0f, 1e-30f});
  values.emplace_back("a.bool", std::vector<bool>{true, false, true});
  values.emplace_back("a.string", std::vector<std::string>{"<unk>", "", "\xC4\xA0the"});
  values.emplace_back("a.u64", std::vector<std::uint64_t>{1ull << 60});
  values.emplace_back("a.i64", std::vector<std::int64_t>{-(1ll << 60)});
  values.emplace_back("a.f64", std::vector<double>{1.0 / 3.0});
  values.emplace_back("a.empty", std::vector<float>{});
  values.emplace_back("a.nested", std::vector<GgufArray>{GgufArray(std::vector<std::int32_t>{1, 2}),
                                                         GgufArray(std::vector<std::string>{"x"}),
                                                         GgufArray(std::vector<GgufArray>{})});
  return values;
}

struct TestTensor {
  std::string name;
  TensorType type;
  std::vector<std::int64_t> dims;
  std::vector<std::byte> data;
};

std::vector<TestTensor> tensors_of_every_type() {
  std::vector<TestTensor> tensors;
  std::uint32_t seed = 1;
  auto add = [&](std::string name, TensorType type, std::vector<std::int64_t> dims) {
    std::uint64_t elements = 1;
    for (auto d : dims) elements *= static_cast<std::uint64_t>(d);
    const auto bytes = *tensor_bytes(type, elements);
    tensors.push_back({std::move(name), type, std::move(dims), random_bytes(bytes, seed++)});
  };
  add("f32.vector", TensorType::f32, {5});  // 20 bytes: the next tensor needs padding
  add("f16.matrix", TensorType::f16, {3, 7});
  add("bf16.cube", TensorType::bf16, {2, 3, 4});
  add("q8_0", TensorType::q8_0, {64, 3});
  add("q4_0", TensorType::q4_0, {32, 5});
  add("q4_k", TensorType::q4_k, {256, 2});
  add("q5_k", TensorType::q5_k, {256, 1});
  add("q6_k", TensorType::q6_k, {512, 3});
  add("four.dims", TensorType::f32, {1, 2, 3, 2});
  return tensors;
}

void round_trip(std::uint32_t alignment) {
  SCOPED_TRACE("alignment " + std::to_string(alignment));
  ScratchDir dir{"loom_gguf_writer"};
  GgufWriter writer;
  const auto values = every_kind_of_value();
  for (const auto& [key, value] : values) writer.add(key, value);
  if (alignment != GgufFile::kDefaultAlignment) writer.set_alignment(alignment);
  EXPECT_EQ(writer.alignment(), alignment);
  const auto tensors = tensors_of_every_type();
  for (const auto& t : tensors) writer.add_tensor(t.name, t.type, t.dims, t.data);

  const std::string path = dir.path("round.gguf").string();
  writer.write(path);
  EXPECT_EQ(read_all(path), writer.to_bytes());

  const GgufFile gguf = GgufFile::open(path);
  EXPECT_EQ(gguf.version(), 3u);
  EXPECT_EQ(gguf.alignment(), alignment);
  EXPECT_EQ(gguf.data_offset() % alignment, 0u);
  const std::size_t extra = alignment != GgufFile::kDefaultAlignment ? 1 : 0;
  ASSERT_EQ(gguf.metadata().size(), values.size() + extra);
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(gguf.metadata()[i].key, values[i].first);
    EXPECT_EQ(gguf.metadata()[i].value, values[i].second) << values[i].first;
    EXPECT_EQ(gguf.metadata()[i].value.type(), values[i].second.type()) << values[i].first;
  }
  if (extra == 1) {
    EXPECT_EQ(gguf.get_u32("general.alignment"), alignment);
  }

  ASSERT_EQ(gguf.tensors().size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& view = gguf.tensors()[i];
    SCOPED_TRACE(view.name);
    EXPECT_EQ(view.name, tensors[i].name);
    EXPECT_EQ(view.type, tensors[i].type);
    EXPECT_EQ(view.dims, tensors[i].dims);
    ASSERT_EQ(view.bytes, tensors[i].data.size());
    EXPECT_EQ(std::memcmp(view.data, tensors[i].data.data(), view.bytes), 0);
    EXPECT_EQ(gguf.file_offset(view) % alignment, 0u);
  }
}

TEST(GgufWriter, RoundTripsEveryValueAndTensor) { round_trip(GgufFile::kDefaultAlignment); }
TEST(GgufWriter, RoundTripsWithOtherAlignments) {
  round_trip(64);
  round_trip(8);
  round_trip(1);
}

TEST(GgufWriter, TypedAddersKeepTheirTypes) {
  GgufWriter writer;
  writer.add_u8("u8", 1);
  writer.add_i8("i8", -1);
  writer.add_u16("u16", 2);
  writer.add_i16("i16", -2);
  writer.add_u32("u32", 3);
  writer.add_i32("i32", -3);
  writer.add_u64("u64", 4);
  writer.add_i64("i64", -4);
  writer.add_f32("f32", 0.25f);
  writer.add_f64("f64", 0.125);
  writer.add_bool("bool", true);
  writer.add_string("string", "s");
  writer.add_array("array", std::vector<std::string>{"a", "b"});
  ScratchDir dir{"loom_gguf_writer"};
  writer.write(dir.path("typed.gguf").string());
  const GgufFile gguf = GgufFile::open(dir.path("typed.gguf").string());
  const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f32", "f64", "bool", "string"};
  for (const char* name : names) EXPECT_EQ(gguf.get(name).type_name(), name);
  EXPECT_EQ(gguf.get("array").type_name(), "array<string>");
  EXPECT_EQ(gguf.get_i32("i8"), -1);
  EXPECT_EQ(gguf.get_u32("u64"), 4u);  // integers convert when they fit
  EXPECT_THROW((void)gguf.get_u32("i32"), ModelFileError);
  EXPECT_EQ(gguf.get_f32("f64"), 0.125f);
  EXPECT_EQ(gguf.get_string_array("array"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(gguf.tensors().empty());
}

TEST(GgufWriter, LayoutMatchesTheFormat) {
  GgufWriter writer;
  writer.add_u32("k", 9);
  const std::vector<float> values{1, 2, 3};
  writer.add_f32_tensor("t", {3}, values);
  writer.add_f32_tensor("u", {1}, std::vector<float>{4});
  const auto bytes = writer.to_bytes();
  // magic, version 3, 2 tensors, 1 entry; key "k" u32 9; infos; pad to 32; data at 0 and 32, padded.
  auto u32_at = [&](std::size_t at) {
    std::uint32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    return v;
  };
  auto u64_at = [&](std::size_t at) {
    std::uint64_t v;
    std::memcpy(&v, bytes.data() + at, 8);
    return v;
  };
  EXPECT_EQ(std::memcmp(bytes.data(), "GGUF", 4), 0);
  EXPECT_EQ(u32_at(4), 3u);
  EXPECT_EQ(u64_at(8), 2u);
  EXPECT_EQ(u64_at(16), 1u);
  EXPECT_EQ(u64_at(24), 1u);                                             // key length
  EXPECT_EQ(static_cast<char>(bytes[32]), 'k');                          // key
  EXPECT_EQ(u32_at(33), 4u);                                             // u32
  EXPECT_EQ(u32_at(37), 9u);                                             // value
  EXPECT_EQ(u64_at(41), 1u);                                             // name length
  EXPECT_EQ(static_cast<char>(bytes[49]), 't');                          // name
  EXPECT_EQ(u32_at(50), 1u);                                             // n_dims
  EXPECT_EQ(u64_at(54), 3u);                                             // dim
  EXPECT_EQ(u32_at(62), 0u);                                             // f32
  EXPECT_EQ(u64_at(66), 0u);                                             // offset
  EXPECT_EQ(u64_at(74 + 8 + 1 + 4 + 8 + 4), 32u);                        // u's offset: t's 12 bytes padded to 32
  const std::size_t data = (74 + 8 + 1 + 4 + 8 + 4 + 8 + 31) / 32 * 32;  // 128
  EXPECT_EQ(data, 128u);
  ASSERT_EQ(bytes.size(), data + 64);
  float first;
  std::memcpy(&first, bytes.data() + data, 4);
  EXPECT_EQ(first, 1.0f);
  for (std::size_t i = data + 12; i < data + 32; ++i) EXPECT_EQ(bytes[i], std::byte{0});  // zero padding
}

TEST(GgufWriter, RefusesInvalidInput) {
  GgufWriter writer;
  writer.add_u32("key", 1);
  EXPECT_THROW(writer.add_u32("key", 2), std::invalid_argument);
  EXPECT_THROW(writer.add_u32("", 2), std::invalid_argument);
  EXPECT_THROW(writer.set_alignment(24), std::invalid_argument);
  EXPECT_THROW(writer.set_alignment(0), std::invalid_argument);
  EXPECT_THROW(writer.add_u64("general.alignment", 64), std::invalid_argument);  // must be u32
  writer.set_alignment(16);
  writer.set_alignment(64);  // replaces, not duplicates
  EXPECT_EQ(writer.alignment(), 64u);
  EXPECT_THROW(writer.set_alignment(3), std::invalid_argument);

  const std::vector<float> four(4);
  writer.add_f32_tensor("t", {4}, four);
  EXPECT_THROW(writer.add_f32_tensor("t", {4}, four), std::invalid_argument);  // duplicate
  EXPECT_THROW(writer.add_f32_tensor("u", {5}, four), std::invalid_argument);  // size mismatch
  EXPECT_THROW(writer.add_f32_tensor("u", {}, four), std::invalid_argument);   // no dims
  EXPECT_THROW(writer.add_f32_tensor("u", {1, 1, 1, 1, 4}, four), std::invalid_argument);
  EXPECT_THROW(writer.add_f32_tensor("u", {-4}, four), std::invalid_argument);
  EXPECT_THROW(writer.add_tensor("u", TensorType::q4_0, {16}, std::vector<std::byte>(9)), std::invalid_argument);
  EXPECT_THROW(writer.add_f32_tensor("", {4}, four), std::invalid_argument);
}

TEST(GgufWriter, WriteFailureNamesThePath) {
  GgufWriter writer;
  const std::string path = "/nonexistent/loom/out.gguf";
  try {
    writer.write(path);
    FAIL();
  } catch (const ModelFileError& e) {
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(std::string(e.what()).find("cannot open for writing"), std::string::npos) << e.what();
  }
}

// Copying a shared model through GgufFile and GgufWriter gives the same bytes: the writer's layout is the
// one the reference implementation produces.
void expect_identical_rewrite(const std::string& relative) {
  const std::string path = std::string(LOOM_SHARED_DIR) + "/" + relative;
  ASSERT_TRUE(fs::exists(path)) << "missing shared test file: " << path;
  const GgufFile original = GgufFile::open(path);
  GgufWriter writer;
  for (const auto& kv : original.metadata()) writer.add(kv.key, kv.value);
  for (const auto& t : original.tensors()) writer.add_tensor(t.name, t.type, t.dims, {t.data, t.bytes});
  const auto bytes = writer.to_bytes();
  const auto expected = read_all(path);
  ASSERT_EQ(bytes.size(), expected.size());
  EXPECT_TRUE(bytes == expected);
}

TEST(GgufWriter, RewritesAidreamsByteForByte) { expect_identical_rewrite("models/aidreams260K.gguf"); }
TEST(GgufWriter, RewritesSynthQ4KMByteForByte) { expect_identical_rewrite("models/synth11M-q4_k_m.gguf"); }

}  // namespace
}  // namespace loom::compute

// `loom info`: what a file holds and whether loom runs it. A file loom cannot run is still described (its
// tensor types with counts and sizes, its vocabulary, its metadata) and the reason it does not run is named.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "run_process.hpp"
#include "test_files.hpp"

namespace loom::cli::testing {
namespace {

using loom::compute::testing::ScratchDir;
using loom::compute::testing::shared_path;


TEST(InfoCommand, AFileLoomRunsShowsItsShapeTypesAndRunsYes) {
  const std::string model = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(model);
  const auto info = run_loom({"info", "--model", model});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_TRUE(has(info.out, "architecture: llama\n")) << info.out;
  EXPECT_TRUE(has(info.out, "hyperparameters: vocab 512, dim 64, ffn 172, layers 4")) << info.out;
  EXPECT_TRUE(has(info.out, "f32: 39 (")) << info.out;  // every tensor of that file is F32
  EXPECT_TRUE(has(info.out, "vocabulary: llama, 512 tokens, bos 1, eos 2")) << info.out;
  EXPECT_TRUE(has(info.out, "runs: yes\n")) << info.out;
  EXPECT_TRUE(has(info.out, "general.architecture (string) = \"llama\"")) << info.out;
}

// The same file with its architecture renamed (a string of the same length, patched in place): described,
// and the reason it does not run names the architecture and the ones loom knows.
TEST(InfoCommand, AFileLoomCannotRunIsDescribedWithTheReason) {
  const std::string model = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(model);
  std::ifstream in(model, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "general.architecture";
  const auto at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  // After the key: the value's type (u32) and the string's length (u64), then its bytes.
  const std::size_t value = at + key.size() + 4 + 8;
  ASSERT_EQ(bytes.substr(value, 5), "llama");
  bytes.replace(value, 5, "mamba");
  ScratchDir dir("info_cli");
  const std::string patched = dir.path("mamba.gguf").string();
  std::ofstream(patched, std::ios::binary) << bytes;

  const auto info = run_loom({"info", "--model", patched});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_TRUE(has(info.out, "architecture: mamba\n")) << info.out;
  EXPECT_TRUE(has(info.out, "f32: 39 (")) << info.out;
  EXPECT_TRUE(has(info.out, "runs: no: 'general.architecture': unsupported architecture 'mamba' (supported: llama,"))
      << info.out;
  EXPECT_FALSE(has(info.out, "hyperparameters:")) << info.out;  // no config was read
  EXPECT_TRUE(has(info.out, "metadata:\n")) << info.out;
}

}  // namespace
}  // namespace loom::cli::testing

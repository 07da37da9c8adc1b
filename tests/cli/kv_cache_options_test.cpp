// The KV cache options of `loom logits` and `loom generate`: the block size changes where keys and values
// live, not the output; F32 storage runs; bad values are usage errors naming the option.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_process.hpp"
#include "test_files.hpp"

namespace loom::cli::testing {
namespace {

using loom::compute::testing::shared_path;


ProcessResult logits_with(const std::vector<std::string>& kv_options) {
  std::vector<std::string> args{"logits", "--model", kGguf, "--tokens", "1,403,407,285,446", "--greedy", "20",
                                "--threads", "1"};
  args.insert(args.end(), kv_options.begin(), kv_options.end());
  return run_loom(args);
}

TEST(KvCacheOptions, LogitsAreTheSameForEveryBlockSizeAndBudget) {
  REQUIRE_SHARED_FILE(kGguf);
  const auto plain = logits_with({});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const std::vector<std::string>& options : {std::vector<std::string>{"--kv-block-size", "1"},
                                                  std::vector<std::string>{"--kv-block-size", "32", "--kv-cache-mb", "1"},
                                                  std::vector<std::string>{"--kv-block-size", "7", "--kv-type", "f16"}}) {
    const auto paged = logits_with(options);
    ASSERT_EQ(paged.exit_code, 0) << paged.err;
    EXPECT_EQ(paged.out, plain.out) << options[1];
  }
}

TEST(KvCacheOptions, F32StorageGivesTheSameGreedyTokensOnThisModel) {
  REQUIRE_SHARED_FILE(kGguf);
  const auto f16 = logits_with({});
  const auto f32 = logits_with({"--kv-type", "f32"});
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  // Logits differ by ~0.002 (tests/compute/paged_forward_test.cpp); the greedy path of 20 tokens does not.
  EXPECT_EQ(nlohmann::json::parse(f32.out).at("continue"), nlohmann::json::parse(f16.out).at("continue"));
}

TEST(KvCacheOptions, GenerateTakesThemAndGivesTheSameText) {
  REQUIRE_SHARED_FILE(kGguf);
  const std::vector<std::string> common{"generate", "--model", kGguf, "--prompt", "Once upon a time",
                                        "--temperature", "0", "--max-tokens", "40", "--json"};
  auto paged_args = common;
  paged_args.insert(paged_args.end(), {"--kv-block-size", "3", "--kv-cache-mb", "2"});
  const auto plain = run_loom(common);
  const auto paged = run_loom(paged_args);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(paged.exit_code, 0) << paged.err;
  EXPECT_EQ(nlohmann::json::parse(paged.out).at("text"), nlohmann::json::parse(plain.out).at("text"));
}

TEST(KvCacheOptions, BadValuesAreUsageErrorsNamingTheOption) {
  REQUIRE_SHARED_FILE(kGguf);
  const auto bad_type = logits_with({"--kv-type", "q8_0"});
  EXPECT_EQ(bad_type.exit_code, 2);
  EXPECT_NE(bad_type.err.find("--kv-type"), std::string::npos) << bad_type.err;
  const auto zero_block = logits_with({"--kv-block-size", "0"});
  EXPECT_EQ(zero_block.exit_code, 2);
  EXPECT_NE(zero_block.err.find("--kv-block-size"), std::string::npos) << zero_block.err;
  // One block of 65536 tokens of this model takes 2 x 4 layers x 64 x 65536 x 2 bytes = 64 MiB.
  const auto too_small = run_loom({"generate", "--model", kGguf, "--prompt", "x", "--kv-block-size", "65536",
                                   "--kv-cache-mb", "1"});
  EXPECT_EQ(too_small.exit_code, 2);
  EXPECT_NE(too_small.err.find("--kv-cache-mb"), std::string::npos) << too_small.err;
}

}  // namespace
}  // namespace loom::cli::testing

// The vocabularies of issue 20's shared files tokenize both reference prompts into the reference's
// prompt_tokens: synth-qwen2bpe's GPT-2 byte-level BPE with the qwen2 pre-tokenizer and no BOS (its
// add_bos_token is false), and the SentencePiece files (phi3, phi3lr, qwen3moe, mixtral) with BOS 1.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "loom/compute/text/vocabulary.hpp"
#include "test_files.hpp"

namespace {

using namespace loom::compute;
using loom::compute::testing::shared_path;

std::vector<std::int32_t> reference_prompt_tokens(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing reference file " + path);
  return nlohmann::json::parse(in).at("prompt_tokens").get<std::vector<std::int32_t>>();
}

class NewArchPromptTokens : public ::testing::TestWithParam<std::string> {};

TEST_P(NewArchPromptTokens, BothPromptsTokenizeAsTheReferenceDid) {
  const std::string stem = GetParam();
  const std::string model = shared_path("models/" + stem + ".gguf");
  REQUIRE_SHARED_FILE(model);
  const Tokenizer tokenizer(Vocabulary::from_gguf(GgufFile::open(model)));
  const std::vector<std::pair<std::string, std::string>> prompts{
      {"once", "Once upon a time"}, {"fox", "The quick brown fox jumps over the lazy dog."}};
  for (const auto& [name, text] : prompts) {
    const auto expected = reference_prompt_tokens(shared_path("reference/" + stem + "." + name + ".json"));
    const auto ids = tokenizer.encode(text);
    EXPECT_EQ(std::vector<std::int32_t>(ids.begin(), ids.end()), expected) << stem << " " << name;
    if (stem.find("qwen2bpe") != std::string::npos) {
      EXPECT_NE(expected.front(), 1) << "the qwen2 BPE prompts start without BOS";
    } else {
      EXPECT_EQ(expected.front(), 1) << "BOS first";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SharedModels, NewArchPromptTokens,
                         ::testing::Values("synth-qwen2bpe-f16", "synth-qwen2bpe-q8_0", "synth-phi3-f16", "synth-phi3lr-q8_0",
                                           "synth-qwen3moe-f16", "synth-mixtral-q8_0"),
                         [](const auto& tested) {
                           std::string name = tested.param;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

}  // namespace

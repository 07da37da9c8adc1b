// `loom generate`, `tokenize` and `detokenize` run as a user runs them.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "run_process.hpp"
#include "test_files.hpp"

namespace loom::cli::testing {
namespace {

using loom::compute::testing::shared_path;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const std::string kCheckpoint = shared_path("models/aidreams260K.bin");
const std::string kTokenizerFile = shared_path("models/aidreams260K.tok512.bin");
const std::string kGreedyText = shared_path("reference/aidreams260K.llama2c-greedy.txt");

// The issue's end-to-end check: greedy text from the llama2.c checkpoint and its tokenizer file is what a
// plain llama2.c runner prints (prompt included), as far as our 100 tokens go.
TEST(GenerateCommand, GreedyTextFromTheLlama2cCheckpointMatchesTheReferenceRunner) {
  REQUIRE_SHARED_FILE(kCheckpoint);
  REQUIRE_SHARED_FILE(kTokenizerFile);
  REQUIRE_SHARED_FILE(kGreedyText);
  const auto run = run_loom({"generate", "--model", kCheckpoint, "--tokenizer", kTokenizerFile, "--prompt",
                             "Once upon a time", "--temperature", "0", "--max-tokens", "100", "--threads", "1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string expected = read_text(kGreedyText);
  ASSERT_FALSE(run.out.empty());
  ASSERT_EQ(run.out.back(), '\n');
  const std::string text = run.out.substr(0, run.out.size() - 1);
  EXPECT_GT(text.size(), 200u) << text;  // 100 tokens of this model are well over 200 characters
  EXPECT_EQ(expected.substr(0, text.size()), text);
  EXPECT_NE(run.err.find("generated 100 tokens"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("finish: length"), std::string::npos) << run.err;
}

TEST(GenerateCommand, TheGgufFormWithItsEmbeddedVocabularyGivesTheSameText) {
  REQUIRE_SHARED_FILE(kCheckpoint);
  REQUIRE_SHARED_FILE(kGguf);
  const std::vector<std::string> common{"--prompt", "Once upon a time", "--temperature", "0", "--max-tokens", "60"};
  auto from_bin = common;
  from_bin.insert(from_bin.begin(), {"generate", "--model", kCheckpoint, "--tokenizer", kTokenizerFile});
  auto from_gguf = common;
  from_gguf.insert(from_gguf.begin(), {"generate", "--model", kGguf});
  const auto a = run_loom(from_bin);
  const auto b = run_loom(from_gguf);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(GenerateCommand, JsonReportsTextTokensFinishReasonUsageAndTimings) {
  REQUIRE_SHARED_FILE(kGguf);
  const auto run = run_loom({"generate", "--model", kGguf, "--prompt", "Once upon a time", "--temperature", "0",
                             "--max-tokens", "12", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j.at("finish_reason"), "length");
  EXPECT_EQ(j.at("tokens").size(), 12u);
  EXPECT_EQ(j.at("usage").at("completion_tokens"), 12);
  EXPECT_EQ(j.at("usage").at("prompt_tokens"), 13);  // BOS + 12 tokens, as in reference/aidreams260K.once.json
  EXPECT_EQ(j.at("usage").at("total_tokens"), 25);
  EXPECT_GE(j.at("timings").at("time_to_first_token_ms").get<double>(), 0.0);
  EXPECT_FALSE(j.at("text").get<std::string>().empty());
  // The greedy text continues the prompt as the reference runner does.
  const std::string expected = read_text(kGreedyText);
  EXPECT_TRUE(expected.starts_with("Once upon a time" + j.at("text").get<std::string>())) << j.at("text");
}

TEST(GenerateCommand, AStopStringEndsTheTextBeforeIt) {
  REQUIRE_SHARED_FILE(kGguf);
  // The greedy continuation contains "petals" (reference text); stop there.
  const auto run = run_loom({"generate", "--model", kGguf, "--prompt", "Once upon a time", "--temperature", "0",
                             "--max-tokens", "100", "--stop", "petals", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j.at("finish_reason"), "stop");
  EXPECT_EQ(j.at("text"), ", pixels unfolding like ");
}

TEST(GenerateCommand, SeededSamplingIsRepeatableAndSeedsDiffer) {
  REQUIRE_SHARED_FILE(kGguf);
  auto run_with_seed = [&](const std::string& seed) {
    const auto run = run_loom({"generate", "--model", kGguf, "--prompt", "Once upon a time", "--temperature", "1.5",
                               "--top-k", "0", "--top-p", "1", "--min-p", "0", "--max-tokens", "40", "--seed", seed,
                               "--json"});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return nlohmann::json::parse(run.out).at("tokens").get<std::vector<int>>();
  };
  EXPECT_EQ(run_with_seed("7"), run_with_seed("7"));
  EXPECT_NE(run_with_seed("7"), run_with_seed("8"));
}

TEST(GenerateCommand, BadOptionsAreUsageErrorsNamingTheOption) {
  REQUIRE_SHARED_FILE(kGguf);
  const auto no_prompt = run_loom({"generate", "--model", kGguf});
  EXPECT_EQ(no_prompt.exit_code, 2);
  EXPECT_NE(no_prompt.err.find("--prompt"), std::string::npos) << no_prompt.err;
  const auto bad_temperature = run_loom({"generate", "--model", kGguf, "--prompt", "x", "--temperature", "hot"});
  EXPECT_EQ(bad_temperature.exit_code, 2);
  EXPECT_NE(bad_temperature.err.find("--temperature"), std::string::npos) << bad_temperature.err;
  const auto no_vocabulary = run_loom({"generate", "--model", kCheckpoint, "--prompt", "x"});
  EXPECT_EQ(no_vocabulary.exit_code, 2);
  EXPECT_NE(no_vocabulary.err.find("--tokenizer"), std::string::npos) << no_vocabulary.err;
}

TEST(GenerateCommand, AGrammarConstrainsTheTextAndEndsItWhereTheGrammarEnds) {
  REQUIRE_SHARED_FILE(kGguf);
  for (const char* seed : {"1", "2", "3", "4"}) {
    const auto run = run_loom({"generate", "--model", kGguf, "--prompt", "Once upon a time", "--temperature", "1.5",
                               "--seed", seed, "--max-tokens", "40", "--json", "--grammar",
                               "root ::= (\"yes\" | \"no\") \"!\"{1,3}"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const auto j = nlohmann::json::parse(run.out);
    const std::string text = j.at("text");
    EXPECT_TRUE(text == "yes!" || text == "yes!!" || text == "yes!!!" || text == "no!" || text == "no!!" ||
                text == "no!!!")
        << "seed " << seed << ": " << text;
    // Where the grammar has nothing more to allow, only the end of sequence is: the model stops.
    if (text.ends_with("!!!")) {
      EXPECT_EQ(j.at("finish_reason"), "eos") << run.out;
    }
  }
}

TEST(GenerateCommand, AJsonSchemaGivesJsonThatFollowsIt) {
  REQUIRE_SHARED_FILE(kGguf);
  const std::string schema =
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},"ok":{"type":"boolean"}},)"
      R"("required":["name","ok"],"additionalProperties":false})";
  int complete = 0;
  for (const char* seed : {"1", "2", "3", "4", "5"}) {
    const auto run = run_loom({"generate", "--model", kGguf, "--prompt", "Once upon a time", "--seed", seed,
                               "--max-tokens", "60", "--json", "--json-schema", schema});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const auto j = nlohmann::json::parse(run.out);
    if (j.at("finish_reason") == "length") continue;  // the one case allowed to be cut short
    ++complete;
    const auto value = nlohmann::json::parse(j.at("text").get<std::string>(), nullptr, false);
    ASSERT_TRUE(value.is_object()) << "seed " << seed << ": " << j.at("text");
    EXPECT_EQ(value.size(), 2u) << value.dump();
    EXPECT_TRUE(value.at("name").is_string()) << value.dump();
    EXPECT_TRUE(value.at("ok").is_boolean()) << value.dump();
  }
  EXPECT_GT(complete, 0);
}

TEST(GenerateCommand, ABadConstraintIsRefusedNamingTheOptionAndThePlace) {
  REQUIRE_SHARED_FILE(kGguf);
  const auto grammar = run_loom({"generate", "--model", kGguf, "--prompt", "x", "--grammar", "root ::= (\"a\""});
  EXPECT_EQ(grammar.exit_code, 1);
  EXPECT_NE(grammar.err.find("--grammar"), std::string::npos) << grammar.err;
  EXPECT_NE(grammar.err.find("line 1, column"), std::string::npos) << grammar.err;
  const auto schema = run_loom({"generate", "--model", kGguf, "--prompt", "x", "--json-schema", R"({"type":"tuple"})"});
  EXPECT_EQ(schema.exit_code, 1);
  EXPECT_NE(schema.err.find("--json-schema"), std::string::npos) << schema.err;
  EXPECT_NE(schema.err.find("type"), std::string::npos) << schema.err;
  const auto two = run_loom({"generate", "--model", kGguf, "--prompt", "x", "--json-object", "--grammar", "root ::= \"a\""});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_NE(two.err.find("at most one"), std::string::npos) << two.err;
  const auto missing = run_loom({"generate", "--model", kGguf, "--prompt", "x", "--grammar-file", "/nonexistent/g.gbnf"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/g.gbnf"), std::string::npos) << missing.err;
}

TEST(TokenizeCommand, PrintsTheReferencePromptIdsAndDetokenizeGivesTheTextBack) {
  REQUIRE_SHARED_FILE(kGguf);
  const auto run = run_loom({"tokenize", "--model", kGguf, "--text", "Once upon a time"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // reference/aidreams260K.once.json: prompt_tokens, BOS first.
  const auto reference = nlohmann::json::parse(read_text(shared_path("reference/aidreams260K.once.json")));
  std::string expected;
  for (const auto& id : reference.at("prompt_tokens")) expected += (expected.empty() ? "" : " ") + std::to_string(id.get<int>());
  EXPECT_EQ(run.out, expected + "\n");

  std::string ids = expected;
  for (auto& c : ids) c = c == ' ' ? ',' : c;
  const auto back = run_loom({"detokenize", "--model", kGguf, "--ids", ids});
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_EQ(back.out, "Once upon a time\n");

  const auto bad = run_loom({"detokenize", "--model", kGguf, "--ids", "1,99999"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("99999"), std::string::npos) << bad.err;
}

TEST(TokenizeCommand, WorksOnAVocabularyOnlyFile) {
  const std::string vocab = shared_path("vocab/ggml-vocab-llama-spm.gguf");
  REQUIRE_SHARED_FILE(vocab);
  const auto run = run_loom({"tokenize", "--model", vocab, "--text", "Hello world", "--no-bos"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // Llama 2 vocabulary: "▁Hello" = 15043, "▁world" = 3186 (facts of that public vocabulary).
  EXPECT_EQ(run.out, "15043 3186\n");
}

}  // namespace
}  // namespace loom::cli::testing

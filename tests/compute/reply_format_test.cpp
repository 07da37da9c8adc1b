// Reply-format detection (reply_format.hpp) on the 15 shared chat templates: the family and reasoning
// markers of each, and starts_in_reasoning from each template's own rendered generation prompt
// (expected/NAME/14-tools-offered.txt; Qwen 3 with thinking off: 26-enable-thinking-false.txt).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "loom/compute/text/reply_format.hpp"
#include "test_files.hpp"

namespace loom::compute {
namespace {

using testing::shared_path;
using F = ToolCallFormat;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Expected {
  const char* name;
  F format;
  const char* reasoning_open;
  bool starts_in_reasoning;
  bool name_then_args = false;
};

TEST(ReplyFormat, DetectsEachSharedTemplate) {
  const std::vector<Expected> table = {
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", F::command_r, "<|START_THINKING|>", false},
      {"Mistral-Small-3.2-24B-Instruct-2506", F::mistral, "", false, true},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", F::hermes, "", false},
      {"Qwen-Qwen2.5-7B-Instruct", F::hermes, "", false},
      {"Qwen-Qwen3-0.6B", F::hermes, "<think>", false},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", F::deepseek, "<think>", true},
      {"google-gemma-2-2b-it", F::none, "", false},
      {"google-gemma-3-it", F::none, "", false},
      {"ibm-granite-granite-3.3-2B-Instruct", F::granite, "<think>", false},
      {"meetkai-functionary-medium-v3.1", F::functionary_v3_1, "", false},
      {"meta-llama-Llama-3.1-8B-Instruct", F::llama3, "", false},
      {"meta-llama-Llama-4-Scout-17B-16E-Instruct", F::llama3, "", false},
      {"microsoft-Phi-3.5-mini-instruct", F::none, "", false},
      {"mistralai-Mistral-Nemo-Instruct-2407", F::mistral, "", false},
      {"openai-gpt-oss-120b", F::gpt_oss, "", false},
  };
  for (const auto& e : table) {
    const std::string tpl = shared_path(std::string("templates/templates/") + e.name + ".jinja");
    const std::string prompt = shared_path(std::string("templates/expected/") + e.name + "/14-tools-offered.txt");
    REQUIRE_SHARED_FILE(tpl);
    REQUIRE_SHARED_FILE(prompt);
    const ReplyFormat f = detect_reply_format(read(tpl), read(prompt));
    EXPECT_EQ(name(f.tools), name(e.format)) << e.name;
    EXPECT_EQ(f.reasoning_open, e.reasoning_open) << e.name;
    EXPECT_EQ(f.starts_in_reasoning, e.starts_in_reasoning) << e.name;
    EXPECT_EQ(f.name_then_args, e.name_then_args) << e.name;
  }
}

TEST(ReplyFormat, ThinkingOffPromptDoesNotStartInReasoning) {
  const std::string tpl = shared_path("templates/templates/Qwen-Qwen3-0.6B.jinja");
  const std::string prompt = shared_path("templates/expected/Qwen-Qwen3-0.6B/26-enable-thinking-false.txt");
  REQUIRE_SHARED_FILE(tpl);
  REQUIRE_SHARED_FILE(prompt);
  const std::string rendered = read(prompt);
  ASSERT_NE(rendered.find("</think>"), std::string::npos);  // the prompt closed an empty block
  EXPECT_FALSE(detect_reply_format(read(tpl), rendered).starts_in_reasoning);
  EXPECT_TRUE(detect_reply_format(read(tpl), "<|im_start|>assistant\n<think>\n").starts_in_reasoning);
  EXPECT_FALSE(detect_reply_format(read(tpl)).starts_in_reasoning);
}

// Markers of families without a shared template, on template fragments.
TEST(ReplyFormat, DetectsFromMarkersAlone) {
  const ReplyFormat magistral = detect_reply_format("{{ '[TOOL_CALLS]' }}{{ '[THINK]' }}{{ '[ARGS]' }}", "[INST]hi[/INST][THINK]");
  EXPECT_EQ(magistral.tools, F::mistral);
  EXPECT_EQ(magistral.reasoning_open, "[THINK]");
  EXPECT_EQ(magistral.reasoning_close, "[/THINK]");
  EXPECT_TRUE(magistral.starts_in_reasoning);
  EXPECT_TRUE(magistral.name_then_args);
  EXPECT_EQ(detect_reply_format("<｜tool▁call▁begin｜>").tools, F::deepseek);  // V3 writes the calls' list markers too
  EXPECT_EQ(detect_reply_format("<|start_header_id|> \"parameters\": ").tools, F::llama3);
  EXPECT_EQ(detect_reply_format("plain {{ messages }}").tools, F::none);
  EXPECT_EQ(detect_reply_format("plain {{ messages }}").reasoning_open, "");
}

TEST(ReplyFormat, NamesRoundTrip) {
  for (F f : {F::none, F::hermes, F::llama3, F::mistral, F::command_r, F::functionary_v3_1, F::deepseek, F::granite,
              F::gpt_oss}) {
    EXPECT_EQ(find_tool_call_format(name(f)), f) << name(f);
  }
  EXPECT_EQ(name(F::functionary_v3_1), "functionary_v3_1");
  EXPECT_FALSE(find_tool_call_format("qwen").has_value());
}

}  // namespace
}  // namespace loom::compute

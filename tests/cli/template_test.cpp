// `loom template`: a chat template rendered over a conversation file, bytes exactly as expected by
// ../shared/templates; template errors on stderr with exit code 1 (raise_exception's own message); a model's
// tokenizer.chat_template read from its GGUF metadata.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <string>
#include <vector>

#include "loom/compute/model/gguf_writer.hpp"
#include "run_process.hpp"
#include "test_files.hpp"

namespace loom::cli::testing {
namespace {

using loom::compute::testing::ScratchDir;
using loom::compute::testing::shared_path;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}


TEST(TemplateCommand, RendersASharedTemplateByteForByte) {
  const std::string tmpl = shared_path("templates/templates/meta-llama-Llama-3.1-8B-Instruct.jinja");
  const std::string conversation = shared_path("templates/conversations/17-tool-call-full-cycle.json");
  const std::string expected = shared_path("templates/expected/meta-llama-Llama-3.1-8B-Instruct/17-tool-call-full-cycle.txt");
  REQUIRE_SHARED_FILE(tmpl);
  REQUIRE_SHARED_FILE(conversation);
  REQUIRE_SHARED_FILE(expected);
  const auto result = run_loom({"template", "--template", tmpl, "--conversation", conversation, "--now", "2025-03-09T08:05:03"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, read_all(expected));
}

// The whole conformance set through the binary (the library's own test is jinja_conformance_test): every
// .txt byte for byte on stdout with exit 0, every .error a failure with exit 1, with the template's own
// message on stderr when it raised one. A sanitizer build runs every fifth case: the interpreter itself is
// checked whole in-process there (JinjaConformance), and 525 sanitized process starts cost over a minute.
namespace {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr std::size_t kCaseStride = 5;
#else
constexpr std::size_t kCaseStride = 1;
#endif
}  // namespace

TEST(TemplateCommand, EverySharedRenderingByteForByte) {
  namespace fs = std::filesystem;
  const std::string root = shared_path("templates");
  REQUIRE_SHARED_FILE(root + "/expected");
  struct Case {
    std::string label, tmpl, conversation, expected_path;
    ProcessResult result;
  };
  std::vector<Case> cases;
  std::size_t all_renderings = 0, all_errors = 0;
  for (const auto& dir : fs::directory_iterator(root + "/expected")) {
    const std::string name = dir.path().filename().string();
    const std::string tmpl = root + "/templates/" + name + ".jinja";
    REQUIRE_SHARED_FILE(tmpl);
    for (const auto& file : fs::directory_iterator(dir.path())) {
      const std::string stem = file.path().stem().string();
      (file.path().extension() == ".txt" ? all_renderings : all_errors) += 1;
      if ((all_renderings + all_errors - 1) % kCaseStride != 0) continue;
      cases.push_back({name + " / " + stem, tmpl, root + "/conversations/" + stem + ".json", file.path().string(), {}});
    }
  }
  // Four processes at a time: a sanitizer build starts each slowly.
  std::vector<std::future<void>> running;
  for (std::size_t start = 0; start < 4; ++start) {
    running.push_back(std::async(std::launch::async, [&cases, start] {
      for (std::size_t k = start; k < cases.size(); k += 4) {
        cases[k].result = run_loom({"template", "--template", cases[k].tmpl, "--conversation", cases[k].conversation,
                                    "--now", "2025-03-09T08:05:03"});
      }
    }));
  }
  for (auto& r : running) r.get();

  std::size_t renderings = 0;
  std::size_t errors = 0;
  for (const auto& c : cases) {
    const std::string expected = read_all(c.expected_path);
    if (c.expected_path.ends_with(".txt")) {
      EXPECT_EQ(c.result.exit_code, 0) << c.label << ": " << c.result.err;
      EXPECT_TRUE(c.result.out == expected) << c.label << ": the rendering differs";
      ++renderings;
      continue;
    }
    EXPECT_EQ(c.result.exit_code, 1) << c.label;
    EXPECT_EQ(c.result.out, "") << c.label;
    const auto newline = expected.find('\n');
    if (expected.substr(0, newline) == "raise_exception") {
      EXPECT_TRUE(has(c.result.err, expected.substr(newline + 1))) << c.label << ": " << c.result.err;
    }
    ++errors;
  }
  EXPECT_EQ(all_renderings + all_errors, 525u);
  EXPECT_EQ(all_errors, 106u);
  EXPECT_EQ(renderings + errors, (525u + kCaseStride - 1) / kCaseStride);
}

TEST(TemplateCommand, RaiseExceptionFailsWithTheTemplatesMessage) {
  const std::string tmpl = shared_path("templates/templates/google-gemma-2-2b-it.jinja");
  const std::string conversation = shared_path("templates/conversations/12-assistant-first.json");
  REQUIRE_SHARED_FILE(tmpl);
  REQUIRE_SHARED_FILE(conversation);
  const auto result = run_loom({"template", "--template", tmpl, "--conversation", conversation});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.out, "");
  EXPECT_TRUE(has(result.err, "Conversation roles must alternate user/assistant/user/assistant/...")) << result.err;
}

TEST(TemplateCommand, ABadNowIsAUsageError) {
  const std::string tmpl = shared_path("templates/templates/google-gemma-2-2b-it.jinja");
  const std::string conversation = shared_path("templates/conversations/01-user-only.json");
  REQUIRE_SHARED_FILE(tmpl);
  for (const char* bad : {"2025-13-01T00:00:00", "yesterday", "2025-02-30T08:00:00", "2025-03-09T08:05:03Z"}) {
    const auto result = run_loom({"template", "--template", tmpl, "--conversation", conversation, "--now", bad});
    EXPECT_EQ(result.exit_code, 2) << bad;
    EXPECT_TRUE(has(result.err, "--now")) << result.err;
  }
}

TEST(TemplateCommand, ReadsTheTemplateFromAModelsMetadata) {
  ScratchDir dir("template_cli");
  const std::string model = dir.path("with_template.gguf").string();
  compute::GgufWriter writer;
  writer.add_string("general.architecture", "llama");
  writer.add_string("tokenizer.chat_template",
                    "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{{ strftime_now('%Y-%m-%d') }}");
  writer.write(model);
  const std::string conversation = dir.path("conversation.json").string();
  std::ofstream(conversation) << R"({"messages": [{"role": "user", "content": "hi"}]})";
  const auto result = run_loom({"template", "--model", model, "--conversation", conversation, "--now", "2025-03-09 08:05:03"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "<user>hi2025-03-09");

  const std::string no_template = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(no_template);
  const auto missing = run_loom({"template", "--model", no_template, "--conversation", conversation});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(has(missing.err, "has no chat template")) << missing.err;
}

TEST(TemplateCommand, IsInTheHelpAndChecksItsOptions) {
  const auto help = run_loom({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(has(help.out, "template (--template FILE.jinja | --model PATH) --conversation FILE.json")) << help.out;
  const auto neither = run_loom({"template", "--conversation", "c.json"});
  EXPECT_EQ(neither.exit_code, 2);
  EXPECT_TRUE(has(neither.err, "--template FILE or --model PATH")) << neither.err;
  const auto unknown = run_loom({"template", "--template", "t.jinja", "--conversation", "c.json", "--bogus", "1"});
  EXPECT_EQ(unknown.exit_code, 2);
}

TEST(TemplateCommand, ASyntaxErrorNamesTheLine) {
  ScratchDir dir("template_cli");
  const std::string tmpl = dir.path("bad.jinja").string();
  std::ofstream(tmpl) << "line one\n{% if x %}\nnever closed\n";
  const std::string conversation = dir.path("conversation.json").string();
  std::ofstream(conversation) << R"({"messages": []})";
  const auto result = run_loom({"template", "--template", tmpl, "--conversation", conversation});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(has(result.err, "bad.jinja:")) << result.err;
  EXPECT_TRUE(has(result.err, "syntax")) << result.err;
}

}  // namespace
}  // namespace loom::cli::testing

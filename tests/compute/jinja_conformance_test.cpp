// Conformance of the Jinja interpreter with ../shared/templates: every real chat template rendered over every
// conversation must give the expected bytes (expected/NAME/NN.txt), or fail where Python's jinja2 fails
// (expected/NAME/NN.error; for raise_exception, with exactly the template's message). The clock is fixed at
// 2025-03-09 08:05:03, as it was for the expected files.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "loom/compute/text/jinja/conversation.hpp"
#include "loom/compute/text/jinja/template.hpp"
#include "test_files.hpp"

namespace loom::compute::jinja {
namespace {

using loom::compute::testing::shared_path;
namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ext) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string escaped(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else out.push_back(c);
  }
  return out;
}

// A short view of where two renderings part.
std::string diff_context(const std::string& expected, const std::string& actual) {
  std::size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  std::size_t from = i > 30 ? i - 30 : 0;
  std::ostringstream os;
  os << "first difference at byte " << i << " (expected " << expected.size() << " bytes, got " << actual.size()
     << ")\n    expected: ..." << escaped(expected.substr(from, 80)) << "\n    actual:   ..."
     << escaped(actual.substr(from, 80));
  return os.str();
}

RenderOptions fixed_clock() {
  RenderOptions options;
  using namespace std::chrono;
  options.now = sys_days{year{2025} / March / 9} + hours{8} + minutes{5} + seconds{3};
  return options;
}

TEST(JinjaConformance, EveryTemplateOverEveryConversation) {
  const fs::path root = shared_path("templates");
  REQUIRE_SHARED_FILE(root / "README.md");
  const auto templates = sorted_files(root / "templates", ".jinja");
  const auto conversations = sorted_files(root / "conversations", ".json");
  ASSERT_EQ(templates.size(), 15u);
  ASSERT_EQ(conversations.size(), 35u);
  const RenderOptions options = fixed_clock();
  int passed = 0, total = 0;
  for (const auto& template_path : templates) {
    const std::string name = template_path.stem().string();
    std::shared_ptr<const Template> tmpl;
    try {
      tmpl = Template::parse(read_file(template_path));
    } catch (const TemplateError& e) {
      ADD_FAILURE() << name << ": parse error at line " << e.line() << ": " << e.what();
      total += static_cast<int>(conversations.size());
      continue;
    }
    for (const auto& conversation_path : conversations) {
      ++total;
      const std::string case_name = conversation_path.stem().string();
      const fs::path expected_txt = root / "expected" / name / (case_name + ".txt");
      const fs::path expected_error = root / "expected" / name / (case_name + ".error");
      const bool expect_error = fs::exists(expected_error);
      if (!expect_error) {
        REQUIRE_SHARED_FILE(expected_txt);
      }
      const auto variables = conversation_variables(nlohmann::ordered_json::parse(read_file(conversation_path)));
      std::string rendered;
      try {
        rendered = tmpl->render(variables, options);
      } catch (const TemplateError& e) {
        if (!expect_error) {
          ADD_FAILURE() << name << " / " << case_name << ": failed (" << to_string(e.kind()) << ", line " << e.line()
                        << "): " << e.what();
          continue;
        }
        const std::string error = read_file(expected_error);
        const std::string kind = error.substr(0, error.find('\n'));
        const std::string message = error.find('\n') == std::string::npos ? "" : error.substr(error.find('\n') + 1);
        if (kind == "raise_exception" && (e.kind() != ErrorKind::raised || message != e.what())) {
          ADD_FAILURE() << name << " / " << case_name << ": expected raise_exception \"" << message << "\", got "
                        << to_string(e.kind()) << " \"" << e.what() << "\"";
          continue;
        }
        ++passed;
        continue;
      }
      if (expect_error) {
        ADD_FAILURE() << name << " / " << case_name << ": rendered, but Python fails with "
                      << escaped(read_file(expected_error));
        continue;
      }
      const std::string expected = read_file(expected_txt);
      if (rendered != expected) {
        ADD_FAILURE() << name << " / " << case_name << ": " << diff_context(expected, rendered);
        continue;
      }
      ++passed;
    }
  }
  std::printf("jinja conformance: %d/%d\n", passed, total);
  EXPECT_EQ(passed, 525);
}

}  // namespace
}  // namespace loom::compute::jinja

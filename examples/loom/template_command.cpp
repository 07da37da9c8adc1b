#include "template_command.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/text/jinja/conversation.hpp"
#include "loom/compute/text/jinja/template.hpp"

namespace loom::cli {
namespace {

std::string read_text_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot read the ") + what + " " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// "YYYY-MM-DDTHH:MM:SS" (or with a space): the wall-clock fields strftime_now() prints, taken as they are.
std::chrono::sys_seconds parse_now(const std::string& text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, consumed = 0;
  char sep = 0;
  bool ok = std::sscanf(text.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d%n", &y, &mo, &d, &sep, &h, &mi, &s, &consumed) == 7 &&
            static_cast<std::size_t>(consumed) == text.size() && (sep == 'T' || sep == ' ') && h >= 0 && h < 24 &&
            mi >= 0 && mi < 60 && s >= 0 && s < 60;
  using namespace std::chrono;
  const year_month_day date{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
  if (!ok || !date.ok()) throw UsageError("option --now expects a time like 2025-03-09T08:05:03, got '" + text + "'");
  return sys_days{date} + hours{h} + minutes{mi} + seconds{s};
}

std::string template_source(const std::string& template_path, const std::string& model_path) {
  if (!template_path.empty()) return read_text_file(template_path, "template");
  auto source = compute::GgufFile::open(model_path).find_string("tokenizer.chat_template");
  if (!source) throw std::runtime_error(model_path + " has no chat template (no tokenizer.chat_template in its metadata)");
  return *source;
}

}  // namespace

int run_template(CommandLine& args) {
  const std::string template_path = args.text("template", "");
  const std::string model_path = args.text("model", "");
  const std::string conversation_path = args.text("conversation", "");
  const std::string now = args.text("now", "");
  args.reject_unknown();
  if (template_path.empty() == model_path.empty()) throw UsageError("template needs --template FILE or --model PATH (one of them)");
  if (conversation_path.empty()) throw UsageError("template needs --conversation FILE");
  compute::jinja::RenderOptions options;
  if (!now.empty()) options.now = parse_now(now);

  nlohmann::ordered_json conversation;
  try {
    conversation = nlohmann::ordered_json::parse(read_text_file(conversation_path, "conversation"));
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(conversation_path + ": not valid JSON: " + e.what());
  }
  const auto variables = compute::jinja::conversation_variables(conversation);
  const std::string source = template_source(template_path, model_path);
  const std::string& origin = template_path.empty() ? model_path : template_path;
  try {
    const std::string rendered = compute::jinja::Template::parse(source)->render(variables, options);
    std::fwrite(rendered.data(), 1, rendered.size(), stdout);
    std::fflush(stdout);
    return 0;
  } catch (const compute::jinja::TemplateError& e) {
    const std::string where = e.line() ? origin + ":" + std::to_string(e.line()) : origin;
    if (e.kind() == compute::jinja::ErrorKind::raised)
      std::fprintf(stderr, "loom: %s: the template raised an exception: %s\n", where.c_str(), e.what());
    else
      std::fprintf(stderr, "loom: %s: template error (%s): %s\n", where.c_str(), compute::jinja::to_string(e.kind()), e.what());
    return 1;
  }
}

}  // namespace loom::cli

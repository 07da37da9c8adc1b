// The Jinja interpreter (chat templates from downloaded model files) on arbitrary template text, parsed and
// rendered with small Limits over a fixed small conversation (messages with a system turn, a tool call and
// content parts, one tool, bos/eos tokens, a fixed clock). Properties: parse and render return or throw
// TemplateError only; a syntax error names a line; the output stays within max_output_bytes; rendering is
// deterministic (twice the same text, or the same error kind and message).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "loom/compute/text/jinja/conversation.hpp"
#include "loom/compute/text/jinja/template.hpp"

namespace {

using namespace loom::compute::jinja;

const nlohmann::ordered_json& variables() {
  static const nlohmann::ordered_json vars = conversation_variables(nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "it's {{ not }} a tag"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 3, "temp": 1.5}}}]},
      {"role": "tool", "content": "{\"temperature\": 21}", "tool_call_id": "call_1"},
      {"role": "user", "content": "  thanks\n"}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": ["integer", "null"]}},
      "required": ["city"]}}}],
    "add_generation_prompt": true,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "kwargs": {"enable_thinking": false, "big": 12345678901234567890}
  })"));
  return vars;
}

struct Outcome {
  bool ok = false;
  std::string text;
  ErrorKind kind = ErrorKind::other;
};

Outcome render_once(const Template& tmpl, const RenderOptions& options) {
  Outcome o;
  try {
    o.text = tmpl.render(variables(), options);
    o.ok = true;
    loom::fuzz::check(o.text.size() <= options.limits.max_output_bytes, "output within max_output_bytes");
  } catch (const TemplateError& e) {
    o.kind = e.kind();
    o.text = e.what();
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  RenderOptions options;
  options.limits.max_source_bytes = 64 * 1024;
  options.limits.max_output_bytes = 64 * 1024;
  options.limits.max_nesting = 64;
  options.limits.max_call_depth = 32;
  options.limits.max_steps = 200'000;
  using namespace std::chrono;
  options.now = sys_days{year{2025} / March / 9} + hours{8} + minutes{5} + seconds{3};
  std::shared_ptr<const Template> tmpl;
  try {
    tmpl = Template::parse(source, options.limits);
  } catch (const TemplateError& e) {
    loom::fuzz::check(e.kind() == ErrorKind::syntax, "parse fails with kind syntax only");
    loom::fuzz::check(e.line() >= 1 || size > options.limits.max_source_bytes, "a syntax error names a line");
    return 0;
  }
  const Outcome first = render_once(*tmpl, options);
  const Outcome second = render_once(*tmpl, options);
  loom::fuzz::check(first.ok == second.ok && first.text == second.text && first.kind == second.kind,
                    "rendering is deterministic");
  return 0;
}

// Reply-format detection (reply_format.hpp): the family from the markers its chat template writes.
#include "loom/compute/text/reply_format.hpp"

#include <array>
#include <utility>

namespace loom::compute {
namespace {

constexpr std::array<std::pair<ToolCallFormat, std::string_view>, 9> kNames{{
    {ToolCallFormat::none, "none"},
    {ToolCallFormat::hermes, "hermes"},
    {ToolCallFormat::llama3, "llama3"},
    {ToolCallFormat::mistral, "mistral"},
    {ToolCallFormat::command_r, "command_r"},
    {ToolCallFormat::functionary_v3_1, "functionary_v3_1"},
    {ToolCallFormat::deepseek, "deepseek"},
    {ToolCallFormat::granite, "granite"},
    {ToolCallFormat::gpt_oss, "gpt_oss"},
}};

bool has(std::string_view text, std::string_view marker) { return text.find(marker) != std::string_view::npos; }

// Most specific markers first: functionary's template also writes <|python_tag|>, and Hermes 2 Pro's (a
// Llama 3 fine-tune) "parameters", so those are tried before llama3's.
ToolCallFormat detect_tools(std::string_view t) {
  if (has(t, "<|channel|>") && has(t, "<|message|>")) return ToolCallFormat::gpt_oss;
  if (has(t, "tool▁calls▁begin") || has(t, "tool▁call▁begin")) return ToolCallFormat::deepseek;
  if (has(t, "<|START_ACTION|>")) return ToolCallFormat::command_r;
  if (has(t, "[TOOL_CALLS]")) return ToolCallFormat::mistral;
  if (has(t, "<|tool_call|>")) return ToolCallFormat::granite;
  if (has(t, "<function=")) return ToolCallFormat::functionary_v3_1;
  if (has(t, "<tool_call>")) return ToolCallFormat::hermes;
  if (has(t, "<|python_tag|>") || has(t, "<|python_start|>")) return ToolCallFormat::llama3;
  if (has(t, "\"parameters\"") && (has(t, "<|start_header_id|>") || has(t, "<|header_start|>"))) {
    return ToolCallFormat::llama3;
  }
  return ToolCallFormat::none;
}

bool ends_with_after_space(std::string_view text, std::string_view marker) {
  const std::size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return false;
  return text.substr(0, end + 1).ends_with(marker);
}

}  // namespace

std::string_view name(ToolCallFormat format) noexcept {
  for (const auto& [f, n] : kNames) if (f == format) return n;
  return "none";
}

std::optional<ToolCallFormat> find_tool_call_format(std::string_view name) noexcept {
  for (const auto& [f, n] : kNames) if (n == name) return f;
  return std::nullopt;
}

ReplyFormat detect_reply_format(std::string_view template_source, std::string_view rendered_generation_prompt_tail) {
  ReplyFormat format;
  format.tools = detect_tools(template_source);
  if (format.tools == ToolCallFormat::gpt_oss) return format;
  format.name_then_args = format.tools == ToolCallFormat::mistral && has(template_source, "[ARGS]");  // reasoning is a channel there
  if (has(template_source, "<|START_THINKING|>")) {
    format.reasoning_open = "<|START_THINKING|>";
    format.reasoning_close = "<|END_THINKING|>";
  } else if (has(template_source, "[THINK]")) {  // Magistral
    format.reasoning_open = "[THINK]";
    format.reasoning_close = "[/THINK]";
  } else if (has(template_source, "<think>") || has(template_source, "</think>")) {
    format.reasoning_open = "<think>";
    format.reasoning_close = "</think>";
  }
  format.starts_in_reasoning = !format.reasoning_open.empty() &&
                               ends_with_after_space(rendered_generation_prompt_tail, format.reasoning_open);
  return format;
}

}  // namespace loom::compute

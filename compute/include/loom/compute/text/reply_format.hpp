// ReplyFormat: how a model family writes tool calls and reasoning in its replies, read from its chat template.
// A model's reply is plain text; the family decides which markers in it open a tool call ("<tool_call>",
// "[TOOL_CALLS]", "<function=", ...) or a reasoning block ("<think>"). detect_reply_format() recognizes the
// family from markers in the template source (the template shows assistant tool calls to the model, so the
// markers are in it), and whether the reply starts inside reasoning from the tail of the rendered prompt
// (DeepSeek R1's generation prompt ends with "<think>\n": the model's reply then starts mid-reasoning).
// reply_parser.hpp splits a reply by this format; tool_call_grammar.hpp forces a call in it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace loom::compute {

enum class ToolCallFormat {
  none,              // the template shows no tool-call syntax: replies are content (and maybe reasoning)
  hermes,            // <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Hermes 2 Pro, Qwen 2.5, Qwen 3)
  llama3,            // {"name": ..., "parameters": {...}}, maybe after <|python_tag|> / <|python_start|> (Llama 3.x, 4)
  mistral,           // [TOOL_CALLS][{...}] (Nemo) or [TOOL_CALLS]name[CALL_ID]id[ARGS]{...} (Small 3.2)
  command_r,         // <|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}]<|END_ACTION|>
  functionary_v3_1,  // <function=name>{...}</function>
  deepseek,          // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n```json\n{...}\n```...
  granite,           // <|tool_call|>[{"name": ..., "arguments": {...}}]
  gpt_oss,           // harmony channels: <|channel|>commentary to=functions.name ...<|message|>{...}<|call|>
};

// "none", "hermes", "llama3", "mistral", "command_r", "functionary_v3_1", "deepseek", "granite", "gpt_oss".
std::string_view name(ToolCallFormat format) noexcept;
// The format with that name, or nullopt.
std::optional<ToolCallFormat> find_tool_call_format(std::string_view name) noexcept;

struct ReplyFormat {
  ToolCallFormat tools = ToolCallFormat::none;
  // Markers around a reasoning block at the start of a reply ("<think>", "</think>"); both empty when the
  // family has none. gpt_oss keeps them empty: its reasoning is the analysis channel, parsed with the calls.
  std::string reasoning_open;
  std::string reasoning_close;
  // The reply begins inside an open reasoning block (the prompt already opened it).
  bool starts_in_reasoning = false;
  // mistral only: calls are written [TOOL_CALLS]name[ARGS]{...} (v11 tokenizers, Small 3.2) rather than as a
  // JSON list. The parser reads both; the grammar writes this one when set.
  bool name_then_args = false;
};

// The reply format of the family whose chat template is `template_source`. The optional second argument is
// the end of the rendered prompt (with the generation prompt): when it ends with the reasoning opener,
// followed only by whitespace, the reply starts in reasoning.
ReplyFormat detect_reply_format(std::string_view template_source,
                                std::string_view rendered_generation_prompt_tail = {});

}  // namespace loom::compute

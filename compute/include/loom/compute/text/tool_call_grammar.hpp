// Tool-call grammar: the GBNF grammar (start rule `root`) of a reply that is exactly one tool call in the
// family's syntax (or one or more when parallel), for tool_choice "required" or a named function. Each
// call's name is one of the tools (or only_function) and its arguments are valid under that tool's
// `parameters` JSON Schema (json_schema_to_gbnf; a tool without parameters takes any JSON object). The
// grammar is stricter than the parser (reply_parser.hpp): compact JSON keys in the family's order, one
// canonical spacing around markers; every text it accepts parses into the call(s).
//
// Reasoning stays possible before the calls: an optional reasoning block (<think>...</think> and the like,
// then up to 4 whitespace characters) for families with reasoning markers, a required close when the reply
// starts inside reasoning (DeepSeek R1), and an optional analysis message for gpt-oss. No content may come
// before or after the calls.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "loom/compute/text/reply_format.hpp"

namespace loom::compute {

// `tools` is OpenAI's list: [{"type": "function", "function": {"name", "parameters"?}}, ...]. Throws
// std::invalid_argument for format none, an empty list, an unknown only_function, and
// grammar::SchemaError for parameters the converter refuses. Without `reasoning` (the client asked for
// reasoning_format none) no reasoning block may come first; a reply that starts inside one closes it at once.
std::string tool_call_grammar(const ReplyFormat& format, const nlohmann::ordered_json& tools,
                              std::optional<std::string> only_function, bool parallel, bool reasoning = true);

}  // namespace loom::compute

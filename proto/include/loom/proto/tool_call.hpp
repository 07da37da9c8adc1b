// Tool calling, as OpenAI's API has it: the tools a client offers the model (ToolDefinition), which of them
// the model may or must call (ToolChoice), the calls it made (ToolCall, in a done event and in the assistant
// messages a client sends back) and the pieces of a call as they stream (ToolCallDelta, in token events).
// The session splits the model's reply into content, reasoning and tool calls (issue 22); these are the
// wire types. Wire format: PROTOCOL.md.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"

namespace loom::proto {

// OpenAI's rule for a function name: 1 to 64 characters, each a letter, a digit, '_', '-' or '.'.
inline constexpr std::size_t kMaxToolNameBytes = 64;
bool is_valid_tool_name(std::string_view name) noexcept;

// One call the model made. Wire (done event): {"id", "name", "arguments"}.
struct ToolCall {
  // Chosen by the server ("call_..."), echoed by the client in the tool message that answers it.
  std::string id;
  std::string name;
  // The arguments as the JSON text of an object, as OpenAI sends them (a string, not an object): the
  // model wrote it, so it is not guaranteed to be valid JSON.
  std::string arguments;

  bool operator==(const ToolCall&) const = default;
};

// A piece of a call as it streams, in a token event. The first delta of call `index` carries its id and
// name; later ones add to its arguments. Wire: {"index", "id"?, "name"?, "arguments"}.
struct ToolCallDelta {
  std::int32_t index = 0;  // which call of the reply, from 0
  std::optional<std::string> id;
  std::optional<std::string> name;
  std::string arguments;  // the next piece of the arguments' text, possibly empty

  bool operator==(const ToolCallDelta&) const = default;
};

// A function the model may call. Wire (OpenAI's shape): {"type": "function", "function": {"name",
// "description"?, "parameters"?, "strict"?}}; `strict` is accepted and ignored.
struct ToolDefinition {
  std::string name;  // is_valid_tool_name
  std::optional<std::string> description;
  // The JSON Schema of the arguments (an object) as compact JSON text, its keys in the client's order when
  // the request was parsed from text (keep_key_order); at most ParseOptions::max_constraint_bytes.
  std::optional<std::string> parameters;

  bool operator==(const ToolDefinition&) const = default;
};

// Whether the model may call a tool. Wire: "auto" | "none" | "required" |
// {"type": "function", "function": {"name": ...}}.
struct ToolChoice {
  enum class Mode {
    auto_,     // the model decides (the default)
    none,      // the model must not call a tool
    required,  // the model must call at least one tool
    function,  // the model must call `function`
  };
  Mode mode = Mode::auto_;
  std::string function;  // the tool's name when mode is function; empty otherwise

  bool operator==(const ToolChoice&) const = default;
};

void to_json(nlohmann::json& j, const ToolCall& call);
void to_json(nlohmann::json& j, const ToolCallDelta& delta);
void to_json(nlohmann::json& j, const ToolDefinition& tool);
void to_json(nlohmann::json& j, const ToolChoice& choice);
Parsed<ToolCall> parse_tool_call(const nlohmann::json& j, const ParseOptions& options = {});
Parsed<ToolCallDelta> parse_tool_call_delta(const nlohmann::json& j, const ParseOptions& options = {});
Parsed<ToolDefinition> parse_tool_definition(const nlohmann::json& j, const ParseOptions& options = {});
// Alone, a choice naming a function is not checked against any tools; parse_generate_request does that.
Parsed<ToolChoice> parse_tool_choice(const nlohmann::json& j, const ParseOptions& options = {});

}  // namespace loom::proto

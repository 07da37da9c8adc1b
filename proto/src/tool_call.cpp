#include "loom/proto/tool_call.hpp"

#include <limits>

#include "readers.hpp"

namespace loom::proto {

bool is_valid_tool_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > kMaxToolNameBytes) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

void to_json(nlohmann::json& j, const ToolCall& call) {
  j = nlohmann::json{{"id", call.id}, {"name", call.name}, {"arguments", call.arguments}};
}

void to_json(nlohmann::json& j, const ToolCallDelta& delta) {
  j = nlohmann::json{{"index", delta.index}};
  if (delta.id) j["id"] = *delta.id;
  if (delta.name) j["name"] = *delta.name;
  j["arguments"] = delta.arguments;
}

void to_json(nlohmann::json& j, const ToolDefinition& tool) {
  nlohmann::json function{{"name", tool.name}};
  if (tool.description) function["description"] = *tool.description;
  if (tool.parameters) {
    // Parsed back from its text; a text that is not JSON (built in code) stays a string, which the reader
    // refuses with a message.
    function["parameters"] = nlohmann::json::parse(*tool.parameters, nullptr, false);
    if (function["parameters"].is_discarded()) function["parameters"] = *tool.parameters;
  }
  j = nlohmann::json{{"type", "function"}, {"function", std::move(function)}};
}

void to_json(nlohmann::json& j, const ToolChoice& choice) {
  switch (choice.mode) {
    case ToolChoice::Mode::auto_:
      j = "auto";
      return;
    case ToolChoice::Mode::none:
      j = "none";
      return;
    case ToolChoice::Mode::required:
      j = "required";
      return;
    case ToolChoice::Mode::function:
      j = nlohmann::json{{"type", "function"}, {"function", {{"name", choice.function}}}};
      return;
  }
}

Parsed<ToolCall> parse_tool_call(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<ToolCall>([&] { return detail::read_tool_call(j, "", options); }, nullptr, options);
}

Parsed<ToolCallDelta> parse_tool_call_delta(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<ToolCallDelta>([&] { return detail::read_tool_call_delta(j, "", options); }, nullptr,
                                        options);
}

Parsed<ToolDefinition> parse_tool_definition(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<ToolDefinition>([&] { return detail::read_tool_definition(j, "", options); }, nullptr,
                                         options);
}

Parsed<ToolChoice> parse_tool_choice(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<ToolChoice>([&] { return detail::read_tool_choice(j, "", options); }, nullptr, options);
}

namespace detail {

std::string read_tool_name(const Json& value, const std::string& path) {
  std::string name = read_string(value, path);
  if (!is_valid_tool_name(name)) {
    fail(path, "must be 1 to 64 characters, each a letter, a digit, '_', '-' or '.', got " + echo_text(name));
  }
  return name;
}

std::string read_json_object_text(const Json& value, const std::string& path, std::size_t max_bytes) {
  if (!value.is_object()) fail(path, "must be a JSON object, got " + describe(value));
  std::string text = value.dump();
  check_max_bytes(text, path, max_bytes);
  return text;
}

// Events: what the server wrote. The name is the model's, so only its type is checked here.
ToolCall read_tool_call(const Json& j, const std::string& path, const ParseOptions& options) {
  ObjectReader r(j, path, options);
  r.check_known({"id", "name", "arguments"});
  ToolCall call;
  call.id = read_id(r.require("id"), r.path("id"), options);
  call.name = read_string(r.require("name"), r.path("name"));
  call.arguments = read_string(r.require("arguments"), r.path("arguments"));
  return call;
}

ToolCallDelta read_tool_call_delta(const Json& j, const std::string& path, const ParseOptions& options) {
  ObjectReader r(j, path, options);
  r.check_known({"index", "id", "name", "arguments"});
  ToolCallDelta delta;
  delta.index = static_cast<std::int32_t>(
      read_integer(r.require("index"), r.path("index"), 0, std::numeric_limits<std::int32_t>::max()));
  if (const Json* v = r.find("id")) delta.id = read_id(*v, r.path("id"), options);
  if (const Json* v = r.find("name")) delta.name = read_string(*v, r.path("name"));
  delta.arguments = read_string(r.require("arguments"), r.path("arguments"));
  return delta;
}

ToolDefinition read_tool_definition(const Json& j, const std::string& path, const ParseOptions& options) {
  ObjectReader r(j, path, options);
  // The type first: another kind of tool (OpenAI's "custom", ...) has fields of its own, and the type is
  // what the client has to change.
  const std::string type = read_string(r.require("type"), r.path("type"));
  if (type != "function") fail(r.path("type"), "must be \"function\" (the only kind of tool), got " + echo_text(type));
  r.check_known({"type", "function"});
  ObjectReader f(r.require("function"), r.path("function"), options);
  f.check_known({"name", "description", "parameters", "strict"});
  ToolDefinition tool;
  tool.name = read_tool_name(f.require("name"), f.path("name"));
  if (const Json* v = f.find("description")) {
    tool.description = read_string(*v, f.path("description"));
    check_max_bytes(*tool.description, f.path("description"), options.max_prompt_bytes);
  }
  if (const Json* v = f.find("parameters")) {
    tool.parameters = read_json_object_text(*v, f.path("parameters"), options.max_constraint_bytes);
  }
  if (const Json* v = f.find("strict")) read_bool(*v, f.path("strict"));
  return tool;
}

ToolChoice read_tool_choice(const Json& j, const std::string& path, const ParseOptions& options) {
  constexpr std::string_view kRule =
      "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}, got ";
  if (j.is_string()) {
    const auto& text = j.get_ref<const std::string&>();
    if (text == "auto") return ToolChoice{};
    if (text == "none") return ToolChoice{ToolChoice::Mode::none, {}};
    if (text == "required") return ToolChoice{ToolChoice::Mode::required, {}};
    fail(path, std::string(kRule) + echo_text(text));
  }
  if (!j.is_object()) fail(path, std::string(kRule) + describe(j));
  ObjectReader r(j, path, options);
  r.check_known({"type", "function"});
  const std::string type = read_string(r.require("type"), r.path("type"));
  if (type != "function") fail(r.path("type"), "must be \"function\", got " + echo_text(type));
  ObjectReader f(r.require("function"), r.path("function"), options);
  f.check_known({"name"});
  return ToolChoice{ToolChoice::Mode::function, read_tool_name(f.require("name"), f.path("name"))};
}

}  // namespace detail

}  // namespace loom::proto

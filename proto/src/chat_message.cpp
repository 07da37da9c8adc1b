#include "loom/proto/chat_message.hpp"

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const ChatMessage& message) {
  j = nlohmann::json{{"role", to_string(message.role)}};
  // A content that is not empty is written even when content_null is set, so that nothing is lost.
  if (message.content_null && message.content.empty()) {
    j["content"] = nullptr;
  } else {
    j["content"] = message.content;
  }
  if (!message.tool_calls.empty()) {
    auto& calls = j["tool_calls"] = nlohmann::json::array();
    for (const ToolCall& call : message.tool_calls) {
      nlohmann::json item{{"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
      if (!call.id.empty()) item["id"] = call.id;
      calls.push_back(std::move(item));
    }
  }
  if (message.tool_call_id) j["tool_call_id"] = *message.tool_call_id;
  if (message.name) j["name"] = *message.name;
  if (message.reasoning_content) j["reasoning_content"] = *message.reasoning_content;
}

Parsed<ChatMessage> parse_chat_message(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<ChatMessage>([&] { return detail::read_chat_message(j, "", options); }, nullptr, options);
}

namespace detail {

namespace {

// OpenAI's shape: {"id", "type": "function", "function": {"name", "arguments"}}; arguments a string or an
// object (kept as its JSON text).
ToolCall read_message_tool_call(const Json& j, const std::string& path, const ParseOptions& options) {
  ObjectReader r(j, path, options);
  r.check_known({"id", "type", "function"});
  ToolCall call;
  if (const Json* v = r.find("id")) call.id = read_id(*v, r.path("id"), options);
  if (const Json* v = r.find("type")) {
    const std::string type = read_string(*v, r.path("type"));
    if (type != "function") fail(r.path("type"), "must be \"function\", got " + echo_text(type));
  }
  ObjectReader f(r.require("function"), r.path("function"), options);
  f.check_known({"name", "arguments"});
  call.name = read_tool_name(f.require("name"), f.path("name"));
  const std::string arguments_path = f.path("arguments");
  const Json& arguments = f.require("arguments");
  if (arguments.is_string()) {
    call.arguments = arguments.get<std::string>();
    check_max_bytes(call.arguments, arguments_path, options.max_prompt_bytes);
  } else if (arguments.is_object()) {
    call.arguments = read_json_object_text(arguments, arguments_path, options.max_prompt_bytes);
  } else {
    fail(arguments_path, "must be the arguments' JSON text (a string) or a JSON object, got " + describe(arguments));
  }
  return call;
}

}  // namespace

ChatMessage read_chat_message(const Json& j, const std::string& path, const ParseOptions& options) {
  ObjectReader r(j, path, options);
  r.check_known({"role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content"});
  ChatMessage message;
  const std::string role_path = r.path("role");
  const std::string role = read_string(r.require("role"), role_path);
  const auto parsed_role = parse_chat_role(role);
  if (!parsed_role) fail(role_path, "must be one of system, user, assistant, tool, got " + echo_text(role));
  message.role = *parsed_role;
  const bool assistant = message.role == ChatRole::assistant;
  const std::string content_path = r.path("content");
  if (const Json* content = r.find("content")) {
    message.content = read_string(*content, content_path);
    check_max_bytes(message.content, content_path, options.max_prompt_bytes);
  } else if (assistant) {
    message.content_null = true;
  } else {
    fail(content_path, "is required (only an assistant message may leave it out or null)");
  }
  if (const Json* v = r.find("tool_calls")) {
    const std::string calls_path = r.path("tool_calls");
    if (!assistant) fail(calls_path, "may only be given on an assistant message, got role " + role);
    message.tool_calls = read_array<ToolCall>(*v, calls_path, options.max_tools, [&](const Json& item, const std::string& p) {
      return read_message_tool_call(item, p, options);
    });
  }
  if (const Json* v = r.find("tool_call_id")) {
    if (message.role != ChatRole::tool) {
      fail(r.path("tool_call_id"), "may only be given on a tool message, got role " + role);
    }
    message.tool_call_id = read_id(*v, r.path("tool_call_id"), options);
  }
  if (const Json* v = r.find("name")) {
    std::string name = read_string(*v, r.path("name"));
    if (name.empty()) fail(r.path("name"), "must not be empty");
    check_max_bytes(name, r.path("name"), kMaxToolNameBytes);
    message.name = std::move(name);
  }
  if (const Json* v = r.find("reasoning_content")) {
    const std::string reasoning_path = r.path("reasoning_content");
    if (!assistant) fail(reasoning_path, "may only be given on an assistant message, got role " + role);
    message.reasoning_content = read_string(*v, reasoning_path);
    check_max_bytes(*message.reasoning_content, reasoning_path, options.max_prompt_bytes);
  }
  return message;
}

}  // namespace detail

}  // namespace loom::proto

#include "loom/proto/chat_message.hpp"

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const ChatMessage& message) {
  j = nlohmann::json{{"role", to_string(message.role)}, {"content", message.content}};
}

Parsed<ChatMessage> parse_chat_message(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<ChatMessage>([&] { return detail::read_chat_message(j, "", options); }, nullptr, options);
}

namespace detail {

ChatMessage read_chat_message(const Json& j, const std::string& path, const ParseOptions& options) {
  ObjectReader r(j, path, options);
  r.check_known({"role", "content"});
  ChatMessage message;
  const std::string role_path = r.path("role");
  const std::string role = read_string(r.require("role"), role_path);
  const auto parsed_role = parse_chat_role(role);
  if (!parsed_role) fail(role_path, "must be one of system, user, assistant, tool, got " + echo_text(role));
  message.role = *parsed_role;
  const std::string content_path = r.path("content");
  message.content = read_string(r.require("content"), content_path);
  check_max_bytes(message.content, content_path, options.max_prompt_bytes);
  return message;
}

}  // namespace detail

}  // namespace loom::proto

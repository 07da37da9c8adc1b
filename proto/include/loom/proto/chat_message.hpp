// ChatMessage: one turn of a conversation sent as `messages` in a generate request; the session renders
// the list with the model's chat template before tokenizing.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "loom/proto/chat_role.hpp"
#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"
#include "loom/proto/tool_call.hpp"

namespace loom::proto {

struct ChatMessage {
  ChatRole role = ChatRole::user;
  // UTF-8 text, possibly empty; at most ParseOptions::max_prompt_bytes.
  std::string content;
  // The content was JSON null (or left out): an assistant turn that only called tools. `content` is then
  // empty. Only an assistant message may have it. Templates tell null from "" (some render no content
  // block at all for null).
  bool content_null = false;
  // (The fields below have `{}` initialisers so that the code that builds a message as {role, content}
  // compiles without -Wmissing-field-initializers warnings; the same in the other wire types.)
  // The calls an assistant turn made (assistant only). Wire, OpenAI's shape: [{"id", "type": "function",
  // "function": {"name", "arguments"}}], arguments a JSON string (OpenAI) or an object (kept as its JSON
  // text, the client's key order kept by keep_key_order); id optional (empty when left out). At most
  // ParseOptions::max_tools.
  std::vector<ToolCall> tool_calls{};
  // The call a tool message answers (tool only); the id rules.
  std::optional<std::string> tool_call_id{};
  // The speaker's name (OpenAI's `name`; for a tool message, the function's). 1 to 64 bytes.
  std::optional<std::string> name{};
  // The reasoning ("thinking") of an earlier assistant turn (assistant only); templates that keep it
  // render it, others drop it.
  std::optional<std::string> reasoning_content{};

  bool operator==(const ChatMessage&) const = default;
};

void to_json(nlohmann::json& j, const ChatMessage& message);
Parsed<ChatMessage> parse_chat_message(const nlohmann::json& j, const ParseOptions& options = {});

}  // namespace loom::proto

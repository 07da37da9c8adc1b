// ChatMessage: one turn of a conversation sent as `messages` in a generate request; the session renders
// the list with the model's chat template before tokenizing.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "loom/proto/chat_role.hpp"
#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"

namespace loom::proto {

struct ChatMessage {
  ChatRole role = ChatRole::user;
  // UTF-8 text, possibly empty; at most ParseOptions::max_prompt_bytes.
  std::string content;

  bool operator==(const ChatMessage&) const = default;
};

void to_json(nlohmann::json& j, const ChatMessage& message);
Parsed<ChatMessage> parse_chat_message(const nlohmann::json& j, const ParseOptions& options = {});

}  // namespace loom::proto

// ChatRole: who speaks a chat message. A closed set, because the chat template has a rule for each role
// and an unknown role would otherwise be dropped or mis-rendered silently.
#pragma once

#include <optional>
#include <string_view>

namespace loom::proto {

enum class ChatRole {
  system,     // instructions that frame the conversation
  user,       // the human's turn
  assistant,  // the model's earlier turns
  tool,       // the output of a tool the assistant called
};

// The wire spelling: "system", "user", "assistant", "tool".
std::string_view to_string(ChatRole role) noexcept;
// The inverse of to_string; nullopt for anything else (the match is exact and case-sensitive).
std::optional<ChatRole> parse_chat_role(std::string_view text) noexcept;

}  // namespace loom::proto

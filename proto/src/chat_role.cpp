#include "loom/proto/chat_role.hpp"

#include <array>
#include <utility>

namespace loom::proto {

namespace {

constexpr std::array<std::pair<ChatRole, std::string_view>, 4> kRoleNames{{
    {ChatRole::system, "system"},
    {ChatRole::user, "user"},
    {ChatRole::assistant, "assistant"},
    {ChatRole::tool, "tool"},
}};

}  // namespace

std::string_view to_string(ChatRole role) noexcept {
  for (const auto& [value, name] : kRoleNames) {
    if (value == role) return name;
  }
  return "unknown";
}

std::optional<ChatRole> parse_chat_role(std::string_view text) noexcept {
  for (const auto& [value, name] : kRoleNames) {
    if (name == text) return value;
  }
  return std::nullopt;
}

}  // namespace loom::proto

// SessionOpen: the client asking for a conversation (a session) on its connection, optionally naming it
// and giving the system prompt that frames every turn. The server answers with session.opened.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"

namespace loom::proto {

struct SessionOpen {
  // The id the client wants for the session; absent = the server chooses one. Same rules as request ids.
  std::optional<std::string> session_id;
  // Rendered before the first turn of every request in the session; at most max_prompt_bytes.
  std::optional<std::string> system_prompt;

  bool operator==(const SessionOpen&) const = default;
};

void to_json(nlohmann::json& j, const SessionOpen& message);
Parsed<SessionOpen> parse_session_open(const nlohmann::json& j, const ParseOptions& options = {});

}  // namespace loom::proto

// SessionOpened: the server's answer to session.open, giving the id that later generate requests use to
// continue the conversation.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"

namespace loom::proto {

struct SessionOpened {
  std::string session_id;

  bool operator==(const SessionOpened&) const = default;
};

void to_json(nlohmann::json& j, const SessionOpened& message);
Parsed<SessionOpened> parse_session_opened(const nlohmann::json& j, const ParseOptions& options = {});

}  // namespace loom::proto

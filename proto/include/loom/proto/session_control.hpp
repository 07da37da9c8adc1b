// Managing sessions after session.open: closing one (session.close -> session.closed), forgetting its
// history while keeping its id and system prompt (session.reset -> session.reset_done), and listing the
// sessions open on the connection (session.list -> session.listed). Wire format: PROTOCOL.md.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"

namespace loom::proto {

// ---- Client -> server ----

struct SessionClose {
  std::string session_id;

  bool operator==(const SessionClose&) const = default;
};

struct SessionReset {
  std::string session_id;

  bool operator==(const SessionReset&) const = default;
};

struct SessionList {
  bool operator==(const SessionList&) const = default;
};

// ---- Server -> client ----

struct SessionClosed {
  std::string session_id;

  bool operator==(const SessionClosed&) const = default;
};

struct SessionResetDone {
  std::string session_id;

  bool operator==(const SessionResetDone&) const = default;
};

struct SessionSummary {
  std::string session_id;
  std::optional<std::string> active_request;  // the id of the request generating in it, if one is

  bool operator==(const SessionSummary&) const = default;
};

struct SessionListed {
  std::vector<SessionSummary> sessions;  // ordered by session id

  bool operator==(const SessionListed&) const = default;
};

void to_json(nlohmann::json& j, const SessionClose& message);
void to_json(nlohmann::json& j, const SessionReset& message);
void to_json(nlohmann::json& j, const SessionList& message);
void to_json(nlohmann::json& j, const SessionClosed& message);
void to_json(nlohmann::json& j, const SessionResetDone& message);
void to_json(nlohmann::json& j, const SessionSummary& summary);
void to_json(nlohmann::json& j, const SessionListed& message);

Parsed<SessionClose> parse_session_close(const nlohmann::json& j, const ParseOptions& options = {});
Parsed<SessionReset> parse_session_reset(const nlohmann::json& j, const ParseOptions& options = {});
Parsed<SessionListed> parse_session_listed(const nlohmann::json& j, const ParseOptions& options = {});

}  // namespace loom::proto

#include "loom/proto/session_control.hpp"

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const SessionClose& message) { j = nlohmann::json{{"session_id", message.session_id}}; }
void to_json(nlohmann::json& j, const SessionReset& message) { j = nlohmann::json{{"session_id", message.session_id}}; }
void to_json(nlohmann::json& j, const SessionList&) { j = nlohmann::json::object(); }
void to_json(nlohmann::json& j, const SessionClosed& message) { j = nlohmann::json{{"session_id", message.session_id}}; }
void to_json(nlohmann::json& j, const SessionResetDone& message) {
  j = nlohmann::json{{"session_id", message.session_id}};
}

void to_json(nlohmann::json& j, const SessionSummary& summary) {
  j = nlohmann::json{{"session_id", summary.session_id}};
  if (summary.active_request) j["active_request"] = *summary.active_request;
}

void to_json(nlohmann::json& j, const SessionListed& message) {
  j = nlohmann::json{{"sessions", nlohmann::json::array()}};
  for (const auto& summary : message.sessions) j["sessions"].push_back(summary);
}

Parsed<SessionClose> parse_session_close(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<SessionClose>([&] { return detail::read_session_close(j, "", options); }, nullptr, options);
}

Parsed<SessionReset> parse_session_reset(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<SessionReset>([&] { return detail::read_session_reset(j, "", options); }, nullptr, options);
}

Parsed<SessionListed> parse_session_listed(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<SessionListed>([&] { return detail::read_session_listed(j, "", options); }, nullptr, options);
}

namespace detail {

namespace {
// The one field of close, reset, closed and reset_done.
std::string read_session_id_only(const Json& j, const std::string& path, const ParseOptions& options,
                                 std::string_view envelope_key) {
  ObjectReader r(j, path, options);
  r.check_known({"session_id"}, envelope_key);
  return read_id(r.require("session_id"), r.path("session_id"), options);
}
}  // namespace

SessionClose read_session_close(const Json& j, const std::string& path, const ParseOptions& options,
                                std::string_view envelope_key) {
  return SessionClose{read_session_id_only(j, path, options, envelope_key)};
}

SessionReset read_session_reset(const Json& j, const std::string& path, const ParseOptions& options,
                                std::string_view envelope_key) {
  return SessionReset{read_session_id_only(j, path, options, envelope_key)};
}

SessionList read_session_list(const Json& j, const std::string& path, const ParseOptions& options,
                              std::string_view envelope_key) {
  ObjectReader r(j, path, options);
  r.check_known({}, envelope_key);
  return SessionList{};
}

SessionClosed read_session_closed(const Json& j, const std::string& path, const ParseOptions& options,
                                  std::string_view envelope_key) {
  return SessionClosed{read_session_id_only(j, path, options, envelope_key)};
}

SessionResetDone read_session_reset_done(const Json& j, const std::string& path, const ParseOptions& options,
                                         std::string_view envelope_key) {
  return SessionResetDone{read_session_id_only(j, path, options, envelope_key)};
}

SessionListed read_session_listed(const Json& j, const std::string& path, const ParseOptions& options,
                                  std::string_view envelope_key) {
  ObjectReader r(j, path, options);
  r.check_known({"sessions"}, envelope_key);
  SessionListed listed;
  // A connection holds at most max_sessions_per_connection sessions; a reader bounds what it accepts anyway.
  constexpr std::size_t kMaxListed = 1u << 16;
  listed.sessions = read_array<SessionSummary>(r.require("sessions"), r.path("sessions"), kMaxListed,
                                               [&](const Json& item, const std::string& item_path) {
                                                 ObjectReader s(item, item_path, options);
                                                 s.check_known({"session_id", "active_request"});
                                                 SessionSummary summary;
                                                 summary.session_id =
                                                     read_id(s.require("session_id"), s.path("session_id"), options);
                                                 if (const Json* v = s.find("active_request")) {
                                                   summary.active_request =
                                                       read_id(*v, s.path("active_request"), options);
                                                 }
                                                 return summary;
                                               });
  return listed;
}

}  // namespace detail

}  // namespace loom::proto

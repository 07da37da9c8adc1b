#include "loom/proto/server_message.hpp"

#include "json_text.hpp"
#include "readers.hpp"

namespace loom::proto {

namespace {

constexpr std::string_view kSessionOpened = "session.opened";
constexpr std::string_view kToken = "token";
constexpr std::string_view kDone = "done";
constexpr std::string_view kError = "error";
constexpr std::string_view kHello = "hello";
constexpr std::string_view kProgress = "progress";
constexpr std::string_view kSessionClosed = "session.closed";
constexpr std::string_view kSessionResetDone = "session.reset_done";
constexpr std::string_view kSessionListed = "session.listed";

ServerMessage read_server_message(const detail::Json& j, const ParseOptions& options) {
  const detail::ObjectReader r(j, "", options);
  const std::string type = detail::read_string(r.require("type"), "type");
  if (type == kSessionOpened) return detail::read_session_opened(j, "", options, "type");
  if (type == kToken) return detail::read_token_event(j, "", options, "type");
  if (type == kDone) return detail::read_done_event(j, "", options, "type");
  if (type == kError) return detail::read_error_event(j, "", options, "type");
  if (type == kHello) return detail::read_hello(j, "", options, "type");
  if (type == kProgress) return detail::read_progress_event(j, "", options, "type");
  if (type == kSessionClosed) return detail::read_session_closed(j, "", options, "type");
  if (type == kSessionResetDone) return detail::read_session_reset_done(j, "", options, "type");
  if (type == kSessionListed) return detail::read_session_listed(j, "", options, "type");
  detail::fail("type",
               "must be one of hello, session.opened, token, progress, done, error, session.closed, session.reset_done, "
               "session.listed, got " +
                   detail::echo_text(type));
}

}  // namespace

std::string_view message_type(const ServerMessage& message) noexcept {
  return std::visit(detail::Overloaded{
                        [](const SessionOpened&) { return kSessionOpened; },
                        [](const TokenEvent&) { return kToken; },
                        [](const DoneEvent&) { return kDone; },
                        [](const ErrorEvent&) { return kError; },
                        [](const Hello&) { return kHello; },
                        [](const ProgressEvent&) { return kProgress; },
                        [](const SessionClosed&) { return kSessionClosed; },
                        [](const SessionResetDone&) { return kSessionResetDone; },
                        [](const SessionListed&) { return kSessionListed; },
                    },
                    message);
}

void to_json(nlohmann::json& j, const ServerMessage& message) {
  std::visit([&](const auto& body) { j = body; }, message);
  j["type"] = message_type(message);
}

std::string serialize(const ServerMessage& message) {
  const nlohmann::json j = message;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Parsed<ServerMessage> parse_server_message(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<ServerMessage>([&] { return read_server_message(j, options); }, &j, options);
}

Parsed<ServerMessage> parse_server_message(std::string_view text, const ParseOptions& options) {
  return detail::parse_text<ServerMessage>(text, options, [](const nlohmann::json& j, const ParseOptions& o) {
    return parse_server_message(j, o);
  });
}

}  // namespace loom::proto

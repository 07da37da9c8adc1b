// ServerMessage: one WebSocket message from server to client: hello, session.opened, token, progress, done,
// error, session.closed, session.reset_done or session.listed. The
// gateway serialises engine events with serialize(); clients (the CLI, the tests) read frames back with
// parse_server_message. Wire format: PROTOCOL.md.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "loom/proto/done_event.hpp"
#include "loom/proto/error_event.hpp"
#include "loom/proto/hello.hpp"
#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"
#include "loom/proto/progress_event.hpp"
#include "loom/proto/session_control.hpp"
#include "loom/proto/session_opened.hpp"
#include "loom/proto/token_event.hpp"

namespace loom::proto {

using ServerMessage = std::variant<SessionOpened, TokenEvent, DoneEvent, ErrorEvent, Hello, ProgressEvent, SessionClosed,
                                   SessionResetDone, SessionListed>;

// The "type" discriminator: "hello", "session.opened", "token", "progress", "done", "error", ...
std::string_view message_type(const ServerMessage& message) noexcept;

// Whether the event is a request's last: its done event, or its error.
inline bool is_last_event(const ServerMessage& message) noexcept {
  return std::holds_alternative<DoneEvent>(message) || std::holds_alternative<ErrorEvent>(message);
}

void to_json(nlohmann::json& j, const ServerMessage& message);
// Compact JSON text, one frame. Bytes that are not valid UTF-8 (a bug upstream: token texts are cut at
// character boundaries) are replaced by U+FFFD rather than failing the whole frame.
std::string serialize(const ServerMessage& message);

Parsed<ServerMessage> parse_server_message(std::string_view text, const ParseOptions& options = {});
Parsed<ServerMessage> parse_server_message(const nlohmann::json& j, const ParseOptions& options = {});
// Text arrives as std::string or a literal as often as a string_view; these keep such calls from being
// ambiguous with the json overload (both would be one user-defined conversion away).
inline Parsed<ServerMessage> parse_server_message(const std::string& text, const ParseOptions& options = {}) {
  return parse_server_message(std::string_view(text), options);
}
inline Parsed<ServerMessage> parse_server_message(const char* text, const ParseOptions& options = {}) {
  return parse_server_message(std::string_view(text), options);
}

}  // namespace loom::proto

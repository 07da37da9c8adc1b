// ClientMessage: one WebSocket message from client to server, after parsing: session.open, session.close,
// session.reset, session.list, generate or cancel. The gateway parses each text frame with parse_client_message and dispatches on the variant;
// a frame that fails to parse is answered with to_error_event(error). Wire format: PROTOCOL.md.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "loom/proto/cancel_request.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"
#include "loom/proto/session_control.hpp"
#include "loom/proto/session_open.hpp"

namespace loom::proto {

using ClientMessage =
    std::variant<SessionOpen, GenerateRequest, CancelRequest, SessionClose, SessionReset, SessionList>;

// The "type" discriminator of a message: "session.open", "generate", "cancel", "session.close", ...
std::string_view message_type(const ClientMessage& message) noexcept;

// The message's JSON object: its body's fields plus "type".
void to_json(nlohmann::json& j, const ClientMessage& message);
// Compact JSON text, one frame. Bytes that are not valid UTF-8 are replaced by U+FFFD.
std::string serialize(const ClientMessage& message);

// Parse one frame's text: size and nesting limits first, then JSON (an error names the byte offset),
// then the message. Never throws (except std::bad_alloc).
Parsed<ClientMessage> parse_client_message(std::string_view text, const ParseOptions& options = {});
Parsed<ClientMessage> parse_client_message(const nlohmann::json& j, const ParseOptions& options = {});
// Text arrives as std::string or a literal as often as a string_view; these keep such calls from being
// ambiguous with the json overload (both would be one user-defined conversion away).
inline Parsed<ClientMessage> parse_client_message(const std::string& text, const ParseOptions& options = {}) {
  return parse_client_message(std::string_view(text), options);
}
inline Parsed<ClientMessage> parse_client_message(const char* text, const ParseOptions& options = {}) {
  return parse_client_message(std::string_view(text), options);
}

}  // namespace loom::proto

// ErrorCode: the kind of failure an error event reports. A small closed set so clients can branch on it
// (retry on overloaded, fix the request on invalid_request) while the message stays free text for humans.
#pragma once

#include <optional>
#include <string_view>

namespace loom::proto {

enum class ErrorCode {
  invalid_request,  // the message broke a rule of the protocol; the event's field names the value
  not_found,        // the message names something that does not exist, e.g. an unknown session id
  conflict,         // the message reuses an id that is still in use, e.g. a request id already running
  overloaded,       // the server is at capacity (queue or per-connection limit); retrying later may work
  unsupported,      // well formed, but asks for something this server does not offer
  unavailable,      // the server is starting up or shutting down
  internal,         // a fault inside the server; not the client's doing
};

// The wire spelling, the enumerator's name in snake_case: "invalid_request", "not_found", ...
std::string_view to_string(ErrorCode code) noexcept;
std::optional<ErrorCode> parse_error_code(std::string_view text) noexcept;

}  // namespace loom::proto

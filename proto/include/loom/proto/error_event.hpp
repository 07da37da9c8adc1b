// ErrorEvent: the server refusing a message, or failing outside any request. A request that gets an error
// event was never accepted, so it gets no other event; a request that fails after it was accepted ends
// with a done event of reason error instead.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "loom/proto/error_code.hpp"
#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"
#include "loom/proto/validation_error.hpp"

namespace loom::proto {

struct ErrorEvent {
  // The request the error is about; empty when the refused message was not a generate or cancel, or had no
  // readable id (invalid JSON, say).
  std::string request_id;  // wire name "id"
  ErrorCode code = ErrorCode::internal;
  std::string message;
  // For invalid_request: the path of the offending value (`params.top_p`); empty when the message as a
  // whole was at fault. Omitted from the JSON when empty.
  std::string field;
  // The session the refused message named (session.open, .close, .reset), when it named one that was well
  // formed; absent otherwise (and for errors about requests, which `id` names). Omitted when absent.
  std::optional<std::string> session_id{};

  bool operator==(const ErrorEvent&) const = default;
};

// The invalid_request event that answers a refused message.
ErrorEvent to_error_event(const ValidationError& error);

void to_json(nlohmann::json& j, const ErrorEvent& event);
Parsed<ErrorEvent> parse_error_event(const nlohmann::json& j, const ParseOptions& options = {});

}  // namespace loom::proto

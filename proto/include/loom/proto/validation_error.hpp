// ValidationError: why a piece of client input was refused. Every parser in loom::proto reports the first
// rule an input breaks as one of these, so the gateway can answer with an error event that tells the client
// exactly which field to fix and what the rule is, instead of a generic "bad request".
#pragma once

#include <string>

namespace loom::proto {

struct ValidationError {
  // Path of the offending value from the root of the parsed object: `params.top_p`, `messages[2].role`,
  // `params.stop[0]`. Empty when the problem is the input as a whole (not JSON, too large, not an object).
  std::string field;
  // The rule that was broken, phrased to follow the field name: "must be in (0, 1], got 1.5".
  std::string message;
  // The `id` of the request the input belonged to when that id itself was well formed, so the error can be
  // routed to the request; empty otherwise.
  std::string request_id;
  // The `session_id` of a refused session.open, session.close or session.reset when that was well formed,
  // so the client can tell which of its session messages was refused; empty otherwise.
  std::string session_id{};

  bool operator==(const ValidationError&) const = default;
};

// One line for logs and exception texts: "params.top_p: must be in (0, 1], got 1.5".
inline std::string to_string(const ValidationError& error) {
  if (error.field.empty()) return error.message;
  return error.field + ": " + error.message;
}

}  // namespace loom::proto

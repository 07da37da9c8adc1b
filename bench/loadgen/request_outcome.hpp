// RequestOutcome: what one request gave, as both protocol clients report it: its latencies, its token
// counts (the server's where it reported usage), or how it failed. ErrorKind sorts failures the way the
// report counts them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::loadgen {

enum class ErrorKind {
  connect,      // the TCP connection (or, on ws://, the handshake's transport) could not be made
  http_status,  // the server answered with a status other than 200 (or refused the WebSocket upgrade)
  protocol,     // the answer broke the protocol: not SSE, bad JSON, a message over the size limit, a cut stream
  timeout,      // the request did not finish within --timeout
  server,       // the server reported a failure in the stream: an error event, or done with reason error
};
inline constexpr int kErrorKinds = 5;

std::string_view to_string(ErrorKind kind);

struct RequestOutcome {
  bool ok = false;
  ErrorKind error = ErrorKind::protocol;  // when !ok
  int http_status = 0;                    // when error == http_status
  std::string error_message;              // when !ok

  std::optional<double> ttft_ms;  // request start (connecting included, if it had to) to the first content
  double e2e_ms = 0;              // request start to the stream's end
  std::vector<double> itl_ms;     // gaps between successive content events

  std::int64_t content_events = 0;  // token events (ws) or SSE chunks with non-empty content
  std::optional<std::int64_t> usage_completion_tokens;  // the server's counts, when it gave usage
  std::optional<std::int64_t> usage_prompt_tokens;
  std::int64_t asked_max_tokens = 0;
  std::int64_t asked_prompt_tokens = 0;

  // The output token count: the server's usage, else the content events counted.
  std::int64_t output_tokens() const { return usage_completion_tokens.value_or(content_events); }

  // Records the gap before a content event. A request keeps at most its max_tokens and a margin: a server
  // streaming more chunks than it was asked for must not grow the client's memory without bound (the
  // events are still counted).
  void add_gap(double gap_ms) {
    if (itl_ms.size() < static_cast<std::size_t>(asked_max_tokens) + kGapMargin) itl_ms.push_back(gap_ms);
  }
  static constexpr std::size_t kGapMargin = 64;
};

}  // namespace loom::loadgen

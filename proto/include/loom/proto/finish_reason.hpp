// FinishReason: why a request's generation ended, carried by its done event. Clients use it to tell a
// complete answer (eos, stop) from a truncated one (length) or an interrupted one (cancelled, timeout,
// error).
#pragma once

#include <optional>
#include <string_view>

namespace loom::proto {

enum class FinishReason {
  eos,        // the model produced its end-of-sequence token
  length,     // max_tokens reached (or the context is full)
  stop,       // a stop string or stop token id matched
  cancelled,  // the client cancelled it or its connection closed
  error,      // the engine failed while running it (done carries an error_message)
  timeout,    // it exceeded its deadline
  tool_calls,  // the model called tools (done carries them) and ended its turn to wait for their results
};

// The wire spelling, the enumerator's name: "eos", "length", "stop", "cancelled", "error", "timeout",
// "tool_calls".
std::string_view to_string(FinishReason reason) noexcept;
std::optional<FinishReason> parse_finish_reason(std::string_view text) noexcept;

}  // namespace loom::proto

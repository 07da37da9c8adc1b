// DoneEvent: the last event of every request the server accepted, whether it completed, was cancelled or
// failed. It always carries usage and timings, so accounting never depends on how a request ended.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "loom/proto/finish_reason.hpp"
#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"
#include "loom/proto/timings.hpp"
#include "loom/proto/tool_call.hpp"
#include "loom/proto/usage.hpp"

namespace loom::proto {

// How one choice of a request with n > 1 ended.
struct ChoiceEnd {
  std::int32_t index = 0;
  FinishReason finish_reason = FinishReason::eos;
  std::optional<std::string> stop;      // as DoneEvent::stop, for this choice
  std::vector<ToolCall> tool_calls{};   // as DoneEvent::tool_calls, for this choice; wire omitted when empty
  std::int32_t completion_tokens = 0;   // this choice's generated tokens

  bool operator==(const ChoiceEnd&) const = default;
};

struct DoneEvent {
  std::string request_id;  // wire name "id"
  FinishReason finish_reason = FinishReason::eos;
  Usage usage;
  Timings timings;
  // The stop string that matched, when finish_reason is stop because of a string (not a token id).
  std::optional<std::string> stop;
  // What went wrong, when finish_reason is error or timeout.
  std::optional<std::string> error_message;
  // Every tool call of the reply, whole (the token events' deltas put together); wire omitted when empty.
  // finish_reason is tool_calls when the reply ended because of them.
  std::vector<ToolCall> tool_calls{};
  // GenerateRequest::n > 1: how each choice ended, in index order (the fields above are then choice 0's, and
  // usage counts the prompt once and the tokens of every choice). Wire omitted when empty (n = 1).
  std::vector<ChoiceEnd> choices{};

  bool operator==(const DoneEvent&) const = default;
};

void to_json(nlohmann::json& j, const DoneEvent& event);
Parsed<DoneEvent> parse_done_event(const nlohmann::json& j, const ParseOptions& options = {});

}  // namespace loom::proto

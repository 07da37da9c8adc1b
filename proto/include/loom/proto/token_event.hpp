// TokenEvent: one generated token of a streaming request, as the session sends it to the client. The text
// is the piece of UTF-8 this token completes; it is empty while a multi-byte character is still split
// across tokens, so concatenating the texts of all events always gives valid UTF-8. When the session splits
// the reply (issue 22), `text` is the content only: reasoning and tool calls come in their own fields.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"
#include "loom/proto/tool_call.hpp"

namespace loom::proto {

struct TokenEvent {
  std::string request_id;  // wire name "id"
  std::int32_t token = 0;  // the vocabulary id, >= 0
  std::string text;        // UTF-8 piece of the content, possibly empty
  std::int32_t index = 0;  // position in the generated sequence, from 0
  // Natural log of the sampled token's probability (finite, <= 0); present when params.logprobs > 0.
  std::optional<double> logprob;
  // Reasoning text released with this token (GenerateRequest::reasoning_format); wire omitted when empty.
  std::string reasoning{};
  // Pieces of tool calls released with this token; wire omitted when empty.
  std::vector<ToolCallDelta> tool_calls{};

  bool operator==(const TokenEvent&) const = default;
};

void to_json(nlohmann::json& j, const TokenEvent& event);
Parsed<TokenEvent> parse_token_event(const nlohmann::json& j, const ParseOptions& options = {});

}  // namespace loom::proto

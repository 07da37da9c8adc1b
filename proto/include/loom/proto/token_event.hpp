// TokenEvent: one generated token of a streaming request, as the session sends it to the client. The text
// is the piece of UTF-8 this token completes; it is empty while a multi-byte character is still split
// across tokens, so concatenating the texts of all events always gives valid UTF-8. When the session splits
// the reply (issue 22), `text` is the content only: reasoning and tool calls come in their own fields.
// With params.logprobs, each event also carries its token's log-probability, the token's own vocabulary
// piece (not the released text, which stop strings and reply parsing may hold back or move) and the most
// likely alternatives at that position.
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

// One token as log-probabilities report it.
struct TokenAlternative {
  std::int32_t token = 0;           // the vocabulary id
  std::string text;                 // its vocabulary piece as UTF-8, invalid bytes replaced by U+FFFD
  std::vector<std::uint8_t> bytes;  // its exact bytes (a piece may be half of a character)
  double logprob = 0.0;             // natural log, <= 0 (-inf for a token the model rules out)

  bool operator==(const TokenAlternative&) const = default;
  // A vocabulary piece is short; a parser refuses longer byte lists.
  static constexpr std::size_t kMaxBytes = 1024;
};

struct TokenEvent {
  std::string request_id;  // wire name "id"
  std::int32_t token = 0;  // the vocabulary id, >= 0
  std::string text;        // UTF-8 piece of the content, possibly empty
  std::int32_t index = 0;  // position in the generated sequence, from 0
  // Natural log of the sampled token's probability under the model's raw logits (log-softmax before
  // temperature, penalties, bias, top-k/top-p/min-p and grammar masks), <= 0; present when params.logprobs > 0.
  std::optional<double> logprob;
  // Reasoning text released with this token (GenerateRequest::reasoning_format); wire omitted when empty.
  std::string reasoning{};
  // Pieces of tool calls released with this token; wire omitted when empty.
  std::vector<ToolCallDelta> tool_calls{};
  // With logprob (each wire omitted when empty): the token's vocabulary piece (lossy UTF-8) and exact bytes, and the params.logprobs most
  // likely tokens at this position, most likely first (the sampled one among them only if it ranks there).
  std::string piece{};
  std::vector<std::uint8_t> bytes{};
  std::vector<TokenAlternative> top_logprobs{};
  // The choice this token belongs to (GenerateRequest::n > 1), from 0; wire omitted when 0.
  std::int32_t choice = 0;

  bool operator==(const TokenEvent&) const = default;
};

void to_json(nlohmann::json& j, const TokenAlternative& alternative);
void to_json(nlohmann::json& j, const TokenEvent& event);
Parsed<TokenEvent> parse_token_event(const nlohmann::json& j, const ParseOptions& options = {});

}  // namespace loom::proto

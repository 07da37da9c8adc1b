// Usage: token counts of one finished request, for billing-style accounting and for seeing how much of the
// prompt the prefix cache saved.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>

#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"

namespace loom::proto {

struct Usage {
  std::int32_t prompt_tokens = 0;      // tokens of the prompt after templating, >= 0
  std::int32_t completion_tokens = 0;  // tokens generated, >= 0
  // Prompt tokens whose KV came from the prefix cache instead of being prefilled; 0..prompt_tokens.
  std::int32_t cached_tokens = 0;
  // Chat messages of the conversation (the session's history, then the request's turns) dropped from the
  // front so that the prompt fits the context; wire omitted when 0. System messages are never dropped.
  std::int32_t trimmed_messages = 0;

  bool operator==(const Usage&) const = default;
};

void to_json(nlohmann::json& j, const Usage& usage);
Parsed<Usage> parse_usage(const nlohmann::json& j, const ParseOptions& options = {});

}  // namespace loom::proto

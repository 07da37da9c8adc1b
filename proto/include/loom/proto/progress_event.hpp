// ProgressEvent: how far the prompt of a request has been computed, sent after each prefill chunk when the
// request asked for it (`progress: true`), so that a client (or a proxy) hears from a long prefill before
// its first token. Wire format: PROTOCOL.md ("progress").
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"

namespace loom::proto {

struct ProgressEvent {
  std::string request_id;                  // wire name "id"
  std::int64_t prompt_tokens_computed = 0;  // prompt positions whose K/V are ready, prefix-cache hits included
  std::int64_t prompt_tokens = 0;           // the prompt's length after templating, as usage.prompt_tokens

  bool operator==(const ProgressEvent&) const = default;
};

void to_json(nlohmann::json& j, const ProgressEvent& event);
Parsed<ProgressEvent> parse_progress_event(const nlohmann::json& j, const ParseOptions& options = {});

}  // namespace loom::proto

// Timings: where one finished request's time went, in milliseconds, so a client (and the benchmarks) can
// tell queueing from prefill from decode without server-side logs.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"

namespace loom::proto {

struct Timings {
  double queue_ms = 0.0;           // accepted until its first prefill step started
  double prefill_ms = 0.0;         // prompt processing
  double decode_ms = 0.0;          // first generated token until the last
  double first_token_ms = 0.0;     // accepted until the first token was sent (time to first token)
  double tokens_per_second = 0.0;  // decode throughput of this request

  bool operator==(const Timings&) const = default;
};

void to_json(nlohmann::json& j, const Timings& timings);
// Every field is required, finite and >= 0.
Parsed<Timings> parse_timings(const nlohmann::json& j, const ParseOptions& options = {});

}  // namespace loom::proto

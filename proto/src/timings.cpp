#include "loom/proto/timings.hpp"

#include <limits>

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const Timings& timings) {
  j = nlohmann::json{{"queue_ms", timings.queue_ms},
                     {"prefill_ms", timings.prefill_ms},
                     {"decode_ms", timings.decode_ms},
                     {"first_token_ms", timings.first_token_ms},
                     {"tokens_per_second", timings.tokens_per_second}};
}

Parsed<Timings> parse_timings(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<Timings>([&] { return detail::read_timings(j, "", options); }, nullptr, options);
}

namespace detail {

Timings read_timings(const Json& j, const std::string& path, const ParseOptions& options) {
  ObjectReader r(j, path, options);
  r.check_known({"queue_ms", "prefill_ms", "decode_ms", "first_token_ms", "tokens_per_second"});
  const Interval non_negative{0.0, std::numeric_limits<double>::infinity()};
  const auto read = [&](const char* key) { return read_number(r.require(key), r.path(key), non_negative); };
  Timings timings;
  timings.queue_ms = read("queue_ms");
  timings.prefill_ms = read("prefill_ms");
  timings.decode_ms = read("decode_ms");
  timings.first_token_ms = read("first_token_ms");
  timings.tokens_per_second = read("tokens_per_second");
  return timings;
}

}  // namespace detail

}  // namespace loom::proto

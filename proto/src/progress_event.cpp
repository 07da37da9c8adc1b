#include "loom/proto/progress_event.hpp"

#include <limits>

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const ProgressEvent& event) {
  j = nlohmann::json{{"id", event.request_id},
                     {"prompt_tokens_computed", event.prompt_tokens_computed},
                     {"prompt_tokens", event.prompt_tokens}};
}

Parsed<ProgressEvent> parse_progress_event(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<ProgressEvent>([&] { return detail::read_progress_event(j, "", options); }, &j, options);
}

namespace detail {

ProgressEvent read_progress_event(const Json& j, const std::string& path, const ParseOptions& options,
                                  std::string_view envelope_key) {
  ObjectReader r(j, path, options);
  r.check_known({"id", "prompt_tokens_computed", "prompt_tokens"}, envelope_key);
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  ProgressEvent event;
  event.request_id = read_id(r.require("id"), r.path("id"), options);
  event.prompt_tokens = read_integer(r.require("prompt_tokens"), r.path("prompt_tokens"), 1, kMax);
  event.prompt_tokens_computed =
      read_integer(r.require("prompt_tokens_computed"), r.path("prompt_tokens_computed"), 0, event.prompt_tokens);
  return event;
}

}  // namespace detail

}  // namespace loom::proto

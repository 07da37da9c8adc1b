#include "loom/proto/usage.hpp"

#include <limits>

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const Usage& usage) {
  j = nlohmann::json{{"prompt_tokens", usage.prompt_tokens},
                     {"completion_tokens", usage.completion_tokens},
                     {"cached_tokens", usage.cached_tokens}};
  if (usage.trimmed_messages > 0) j["trimmed_messages"] = usage.trimmed_messages;
}

Parsed<Usage> parse_usage(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<Usage>([&] { return detail::read_usage(j, "", options); }, nullptr, options);
}

namespace detail {

Usage read_usage(const Json& j, const std::string& path, const ParseOptions& options) {
  constexpr std::int64_t kMaxInt32 = std::numeric_limits<std::int32_t>::max();
  ObjectReader r(j, path, options);
  r.check_known({"prompt_tokens", "completion_tokens", "cached_tokens", "trimmed_messages"});
  Usage usage;
  const auto count = [&](const char* key) {
    return static_cast<std::int32_t>(read_integer(r.require(key), r.path(key), 0, kMaxInt32));
  };
  usage.prompt_tokens = count("prompt_tokens");
  usage.completion_tokens = count("completion_tokens");
  usage.cached_tokens = count("cached_tokens");
  if (const Json* v = r.find("trimmed_messages")) {
    usage.trimmed_messages = static_cast<std::int32_t>(read_integer(*v, r.path("trimmed_messages"), 0, kMaxInt32));
  }
  // Cached tokens are a part of the prompt; more would mean the server's accounting is broken.
  if (usage.cached_tokens > usage.prompt_tokens) {
    fail(r.path("cached_tokens"), "must be at most prompt_tokens (" + std::to_string(usage.prompt_tokens) + "), got " +
                                      std::to_string(usage.cached_tokens));
  }
  return usage;
}

}  // namespace detail

}  // namespace loom::proto

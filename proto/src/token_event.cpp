#include "loom/proto/token_event.hpp"

#include <limits>

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const TokenEvent& event) {
  j = nlohmann::json{{"id", event.request_id}, {"token", event.token}, {"text", event.text}, {"index", event.index}};
  if (event.logprob) j["logprob"] = *event.logprob;
  if (!event.reasoning.empty()) j["reasoning"] = event.reasoning;
  if (!event.tool_calls.empty()) j["tool_calls"] = event.tool_calls;
}

Parsed<TokenEvent> parse_token_event(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<TokenEvent>([&] { return detail::read_token_event(j, "", options); }, &j, options);
}

namespace detail {

TokenEvent read_token_event(const Json& j, const std::string& path, const ParseOptions& options,
                            std::string_view envelope_key) {
  constexpr std::int64_t kMaxInt32 = std::numeric_limits<std::int32_t>::max();
  ObjectReader r(j, path, options);
  r.check_known({"id", "token", "text", "index", "logprob", "reasoning", "tool_calls"}, envelope_key);
  TokenEvent event;
  event.request_id = read_id(r.require("id"), r.path("id"), options);
  event.token = static_cast<std::int32_t>(read_integer(r.require("token"), r.path("token"), 0, kMaxInt32));
  event.text = read_string(r.require("text"), r.path("text"));
  event.index = static_cast<std::int32_t>(read_integer(r.require("index"), r.path("index"), 0, kMaxInt32));
  if (const Json* v = r.find("logprob")) {
    event.logprob = read_number(*v, r.path("logprob"), {-std::numeric_limits<double>::infinity(), 0.0});
  }
  if (const Json* v = r.find("reasoning")) event.reasoning = read_string(*v, r.path("reasoning"));
  if (const Json* v = r.find("tool_calls")) {
    event.tool_calls = read_array<ToolCallDelta>(*v, r.path("tool_calls"), options.max_tools,
                                                 [&](const Json& item, const std::string& p) {
                                                   return read_tool_call_delta(item, p, options);
                                                 });
  }
  return event;
}

}  // namespace detail

}  // namespace loom::proto

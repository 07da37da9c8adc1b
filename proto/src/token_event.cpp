#include "loom/proto/token_event.hpp"

#include <cmath>
#include <limits>

#include "readers.hpp"

namespace loom::proto {

namespace {

// JSON has no infinity: a token the model rules out (logprob -inf) is written as the lowest finite double,
// which exp() takes to 0 all the same.
double finite_logprob(double logprob) {
  return std::isinf(logprob) ? std::numeric_limits<double>::lowest() : logprob;
}

const detail::Interval kLogprobRange{-std::numeric_limits<double>::infinity(), 0.0};
using detail::Json;

std::vector<std::uint8_t> read_bytes(const Json& value, const std::string& path) {
  return detail::read_array<std::uint8_t>(value, path, TokenAlternative::kMaxBytes,
                                          [](const Json& item, const std::string& p) {
                                            return static_cast<std::uint8_t>(detail::read_integer(item, p, 0, 255));
                                          });
}

TokenAlternative read_alternative(const Json& j, const std::string& path, const ParseOptions& options) {
  detail::ObjectReader r(j, path, options);
  r.check_known({"token", "text", "bytes", "logprob"}, {});
  TokenAlternative alternative;
  alternative.token = static_cast<std::int32_t>(
      detail::read_integer(r.require("token"), r.path("token"), 0, std::numeric_limits<std::int32_t>::max()));
  alternative.text = detail::read_string(r.require("text"), r.path("text"));
  alternative.bytes = read_bytes(r.require("bytes"), r.path("bytes"));
  alternative.logprob = detail::read_number(r.require("logprob"), r.path("logprob"), kLogprobRange);
  return alternative;
}

}  // namespace

void to_json(nlohmann::json& j, const TokenAlternative& alternative) {
  j = nlohmann::json{{"token", alternative.token},
                     {"text", alternative.text},
                     {"bytes", alternative.bytes},
                     {"logprob", finite_logprob(alternative.logprob)}};
}

void to_json(nlohmann::json& j, const TokenEvent& event) {
  j = nlohmann::json{{"id", event.request_id}, {"token", event.token}, {"text", event.text}, {"index", event.index}};
  if (event.logprob) {
    j["logprob"] = finite_logprob(*event.logprob);
    if (!event.piece.empty()) j["piece"] = event.piece;
    if (!event.bytes.empty()) j["bytes"] = event.bytes;
    if (!event.top_logprobs.empty()) j["top_logprobs"] = event.top_logprobs;
  }
  if (event.choice != 0) j["choice"] = event.choice;
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
  r.check_known({"id", "token", "text", "index", "logprob", "piece", "bytes", "top_logprobs", "reasoning", "tool_calls",
                 "choice"},
                envelope_key);
  TokenEvent event;
  event.request_id = read_id(r.require("id"), r.path("id"), options);
  event.token = static_cast<std::int32_t>(read_integer(r.require("token"), r.path("token"), 0, kMaxInt32));
  event.text = read_string(r.require("text"), r.path("text"));
  event.index = static_cast<std::int32_t>(read_integer(r.require("index"), r.path("index"), 0, kMaxInt32));
  if (const Json* v = r.find("logprob")) event.logprob = read_number(*v, r.path("logprob"), kLogprobRange);
  // The piece, bytes and alternatives come with a logprob (an event without one has none of them).
  for (const char* field : {"piece", "bytes", "top_logprobs"}) {
    if (!event.logprob && r.find(field) != nullptr) fail(r.path(field), "is only allowed beside logprob");
  }
  if (const Json* v = r.find("piece")) event.piece = read_string(*v, r.path("piece"));
  if (const Json* v = r.find("bytes")) event.bytes = read_bytes(*v, r.path("bytes"));
  if (const Json* v = r.find("top_logprobs")) {
    event.top_logprobs = read_array<TokenAlternative>(
        *v, r.path("top_logprobs"), static_cast<std::size_t>(SamplingParams::kMaxLogprobs),
        [&](const Json& item, const std::string& p) { return read_alternative(item, p, options); });
  }
  if (const Json* v = r.find("choice")) {
    event.choice = static_cast<std::int32_t>(read_integer(*v, r.path("choice"), 0, GenerateRequest::kMaxChoices - 1));
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

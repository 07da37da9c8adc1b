#include "loom/proto/done_event.hpp"

#include <limits>

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const DoneEvent& event) {
  // `reason` repeats `finish_reason` under the short name that clients of the WebSocket API expect.
  j = nlohmann::json{{"id", event.request_id},
                     {"finish_reason", to_string(event.finish_reason)},
                     {"reason", to_string(event.finish_reason)},
                     {"usage", event.usage},
                     {"timings", event.timings}};
  if (event.stop) j["stop"] = *event.stop;
  if (event.error_message) j["error_message"] = *event.error_message;
  if (!event.tool_calls.empty()) j["tool_calls"] = event.tool_calls;
  if (!event.choices.empty()) {
    nlohmann::json& choices = j["choices"] = nlohmann::json::array();
    for (const ChoiceEnd& choice : event.choices) {
      nlohmann::json c = {{"index", choice.index},
                          {"finish_reason", to_string(choice.finish_reason)},
                          {"completion_tokens", choice.completion_tokens}};
      if (choice.stop) c["stop"] = *choice.stop;
      if (!choice.tool_calls.empty()) c["tool_calls"] = choice.tool_calls;
      choices.push_back(std::move(c));
    }
  }
}

Parsed<DoneEvent> parse_done_event(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<DoneEvent>([&] { return detail::read_done_event(j, "", options); }, &j, options);
}

namespace detail {

namespace {

FinishReason read_finish_reason(const Json& value, const std::string& path) {
  const std::string reason = read_string(value, path);
  const auto parsed = parse_finish_reason(reason);
  if (!parsed) fail(path, "must be one of eos, length, stop, cancelled, error, timeout, tool_calls, got " + echo_text(reason));
  return *parsed;
}

ChoiceEnd read_choice_end(const Json& j, const std::string& path, const ParseOptions& options) {
  ObjectReader r(j, path, options);
  r.check_known({"index", "finish_reason", "stop", "tool_calls", "completion_tokens"});
  ChoiceEnd choice;
  choice.index = static_cast<std::int32_t>(read_integer(r.require("index"), r.path("index"), 0, GenerateRequest::kMaxChoices - 1));
  choice.finish_reason = read_finish_reason(r.require("finish_reason"), r.path("finish_reason"));
  if (const Json* v = r.find("stop")) choice.stop = read_string(*v, r.path("stop"));
  if (const Json* v = r.find("tool_calls")) {
    choice.tool_calls = read_array<ToolCall>(*v, r.path("tool_calls"), options.max_tools,
                                             [&](const Json& item, const std::string& p) {
                                               return read_tool_call(item, p, options);
                                             });
  }
  choice.completion_tokens = static_cast<std::int32_t>(read_integer(
      r.require("completion_tokens"), r.path("completion_tokens"), 0, std::numeric_limits<std::int32_t>::max()));
  return choice;
}

}  // namespace

DoneEvent read_done_event(const Json& j, const std::string& path, const ParseOptions& options,
                          std::string_view envelope_key) {
  ObjectReader r(j, path, options);
  r.check_known({"id", "finish_reason", "reason", "usage", "timings", "stop", "error_message", "tool_calls", "choices"},
                envelope_key);
  DoneEvent event;
  event.request_id = read_id(r.require("id"), r.path("id"), options);
  // Either name, or both when they agree.
  const Json* long_name = r.find("finish_reason");
  const Json* short_name = r.find("reason");
  const bool by_short_name = long_name == nullptr && short_name != nullptr;
  const std::string reason_path = r.path(by_short_name ? "reason" : "finish_reason");
  const std::string reason = read_string(by_short_name ? *short_name : r.require("finish_reason"), reason_path);
  const auto parsed_reason = parse_finish_reason(reason);
  if (!parsed_reason) {
    fail(reason_path, "must be one of eos, length, stop, cancelled, error, timeout, tool_calls, got " + echo_text(reason));
  }
  if (!by_short_name && short_name != nullptr && read_string(*short_name, r.path("reason")) != reason) {
    fail(r.path("reason"), "must equal finish_reason (" + reason + ") when both are given");
  }
  event.finish_reason = *parsed_reason;
  event.usage = read_usage(r.require("usage"), r.path("usage"), options);
  event.timings = read_timings(r.require("timings"), r.path("timings"), options);
  if (const Json* v = r.find("stop")) event.stop = read_string(*v, r.path("stop"));
  if (const Json* v = r.find("error_message")) event.error_message = read_string(*v, r.path("error_message"));
  if (const Json* v = r.find("tool_calls")) {
    event.tool_calls = read_array<ToolCall>(*v, r.path("tool_calls"), options.max_tools,
                                            [&](const Json& item, const std::string& p) {
                                              return read_tool_call(item, p, options);
                                            });
  }
  if (const Json* v = r.find("choices")) {
    event.choices = read_array<ChoiceEnd>(*v, r.path("choices"), GenerateRequest::kMaxChoices,
                                          [&](const Json& item, const std::string& p) {
                                            return read_choice_end(item, p, options);
                                          });
  }
  return event;
}

}  // namespace detail

}  // namespace loom::proto

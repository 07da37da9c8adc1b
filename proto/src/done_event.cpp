#include "loom/proto/done_event.hpp"

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const DoneEvent& event) {
  j = nlohmann::json{{"id", event.request_id},
                     {"finish_reason", to_string(event.finish_reason)},
                     {"usage", event.usage},
                     {"timings", event.timings}};
  if (event.stop) j["stop"] = *event.stop;
  if (event.error_message) j["error_message"] = *event.error_message;
}

Parsed<DoneEvent> parse_done_event(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<DoneEvent>([&] { return detail::read_done_event(j, "", options); }, &j, options);
}

namespace detail {

DoneEvent read_done_event(const Json& j, const std::string& path, const ParseOptions& options,
                          std::string_view envelope_key) {
  ObjectReader r(j, path, options);
  r.check_known({"id", "finish_reason", "usage", "timings", "stop", "error_message"}, envelope_key);
  DoneEvent event;
  event.request_id = read_id(r.require("id"), r.path("id"), options);
  const std::string reason_path = r.path("finish_reason");
  const std::string reason = read_string(r.require("finish_reason"), reason_path);
  const auto parsed_reason = parse_finish_reason(reason);
  if (!parsed_reason) {
    fail(reason_path, "must be one of eos, length, stop, cancelled, error, timeout, got " + echo_text(reason));
  }
  event.finish_reason = *parsed_reason;
  event.usage = read_usage(r.require("usage"), r.path("usage"), options);
  event.timings = read_timings(r.require("timings"), r.path("timings"), options);
  if (const Json* v = r.find("stop")) event.stop = read_string(*v, r.path("stop"));
  if (const Json* v = r.find("error_message")) event.error_message = read_string(*v, r.path("error_message"));
  return event;
}

}  // namespace detail

}  // namespace loom::proto

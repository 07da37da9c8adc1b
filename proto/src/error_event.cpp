#include "loom/proto/error_event.hpp"

#include "readers.hpp"

namespace loom::proto {

ErrorEvent to_error_event(const ValidationError& error) {
  ErrorEvent event{error.request_id, ErrorCode::invalid_request, error.message, error.field};
  if (!error.session_id.empty()) event.session_id = error.session_id;
  return event;
}

void to_json(nlohmann::json& j, const ErrorEvent& event) {
  j = nlohmann::json{{"id", event.request_id}, {"code", to_string(event.code)}, {"message", event.message}};
  if (!event.field.empty()) j["field"] = event.field;
  if (event.session_id) j["session_id"] = *event.session_id;
}

Parsed<ErrorEvent> parse_error_event(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<ErrorEvent>([&] { return detail::read_error_event(j, "", options); }, &j, options);
}

namespace detail {

ErrorEvent read_error_event(const Json& j, const std::string& path, const ParseOptions& options,
                            std::string_view envelope_key) {
  ObjectReader r(j, path, options);
  r.check_known({"id", "code", "message", "field", "session_id"}, envelope_key);
  ErrorEvent event;
  // Empty when the refused message had no readable id, so only a non-empty id is held to the id rules.
  const std::string id_path = r.path("id");
  event.request_id = read_string(r.require("id"), id_path);
  if (!event.request_id.empty()) check_id(event.request_id, id_path, options);
  const std::string code_path = r.path("code");
  const std::string code = read_string(r.require("code"), code_path);
  const auto parsed_code = parse_error_code(code);
  if (!parsed_code) {
    fail(code_path,
         "must be one of invalid_request, not_found, conflict, overloaded, unsupported, unavailable, internal, "
         "got " +
             echo_text(code));
  }
  event.code = *parsed_code;
  event.message = read_string(r.require("message"), r.path("message"));
  if (const Json* v = r.find("field")) event.field = read_string(*v, r.path("field"));
  if (const Json* v = r.find("session_id")) event.session_id = read_id(*v, r.path("session_id"), options);
  return event;
}

}  // namespace detail

}  // namespace loom::proto

#include "loom/proto/session_opened.hpp"

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const SessionOpened& message) {
  j = nlohmann::json{{"session_id", message.session_id}};
}

Parsed<SessionOpened> parse_session_opened(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<SessionOpened>([&] { return detail::read_session_opened(j, "", options); }, nullptr, options);
}

namespace detail {

SessionOpened read_session_opened(const Json& j, const std::string& path, const ParseOptions& options,
                                  std::string_view envelope_key) {
  ObjectReader r(j, path, options);
  r.check_known({"session_id"}, envelope_key);
  return SessionOpened{read_id(r.require("session_id"), r.path("session_id"), options)};
}

}  // namespace detail

}  // namespace loom::proto

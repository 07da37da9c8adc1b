#include "loom/proto/session_open.hpp"

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const SessionOpen& message) {
  j = nlohmann::json::object();
  if (message.session_id) j["session_id"] = *message.session_id;
  if (message.system_prompt) j["system_prompt"] = *message.system_prompt;
}

Parsed<SessionOpen> parse_session_open(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<SessionOpen>([&] { return detail::read_session_open(j, "", options); }, nullptr, options);
}

namespace detail {

SessionOpen read_session_open(const Json& j, const std::string& path, const ParseOptions& options,
                              std::string_view envelope_key) {
  ObjectReader r(j, path, options);
  r.check_known({"session_id", "system_prompt"}, envelope_key);
  SessionOpen message;
  if (const Json* v = r.find("session_id")) message.session_id = read_id(*v, r.path("session_id"), options);
  if (const Json* v = r.find("system_prompt")) {
    const std::string prompt_path = r.path("system_prompt");
    message.system_prompt = read_string(*v, prompt_path);
    check_max_bytes(*message.system_prompt, prompt_path, options.max_prompt_bytes);
  }
  return message;
}

}  // namespace detail

}  // namespace loom::proto

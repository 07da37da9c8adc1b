#include "loom/proto/hello.hpp"

#include <limits>

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const Hello& message) {
  j = nlohmann::json{{"protocol_version", message.protocol_version},
                     {"server_version", message.server_version},
                     {"model", message.model},
                     {"status", message.status},
                     {"limits", message.limits},
                     {"features", message.features}};
  if (message.context_length) j["context_length"] = *message.context_length;
}

Parsed<Hello> parse_hello(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<Hello>([&] { return detail::read_hello(j, "", options); }, nullptr, options);
}

namespace detail {

Hello read_hello(const Json& j, const std::string& path, const ParseOptions& options, std::string_view envelope_key) {
  ObjectReader r(j, path, options);
  r.check_known({"protocol_version", "server_version", "model", "status", "context_length", "limits", "features"},
                envelope_key);
  constexpr auto kMaxInt = std::numeric_limits<std::int64_t>::max();
  Hello hello;
  hello.protocol_version = read_integer(r.require("protocol_version"), r.path("protocol_version"), 1, kMaxInt);
  hello.server_version = read_string(r.require("server_version"), r.path("server_version"));
  hello.model = read_string(r.require("model"), r.path("model"));
  hello.status = read_string(r.require("status"), r.path("status"));
  if (const Json* v = r.find("context_length")) {
    hello.context_length = read_integer(*v, r.path("context_length"), 1, kMaxInt);
  }
  // Any names: a newer server may report limits and features this client does not know.
  const std::string limits_path = r.path("limits");
  const Json& limits = r.require("limits");
  if (!limits.is_object()) fail(limits_path, "must be an object, got " + describe(limits));
  for (const auto& [name, value] : limits.items()) hello.limits[name] = read_unsigned(value, child_path(limits_path, name));
  const std::string features_path = r.path("features");
  const Json& features = r.require("features");
  if (!features.is_object()) fail(features_path, "must be an object, got " + describe(features));
  for (const auto& [name, value] : features.items()) hello.features[name] = read_bool(value, child_path(features_path, name));
  return hello;
}

}  // namespace detail

}  // namespace loom::proto

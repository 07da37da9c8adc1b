#include "loom/proto/cancel_request.hpp"

#include "readers.hpp"

namespace loom::proto {

void to_json(nlohmann::json& j, const CancelRequest& message) { j = nlohmann::json{{"id", message.request_id}}; }

Parsed<CancelRequest> parse_cancel_request(const nlohmann::json& j, const ParseOptions& options) {
  return detail::guarded<CancelRequest>([&] { return detail::read_cancel_request(j, "", options); }, &j, options);
}

namespace detail {

CancelRequest read_cancel_request(const Json& j, const std::string& path, const ParseOptions& options,
                                  std::string_view envelope_key) {
  ObjectReader r(j, path, options);
  r.check_known({"id"}, envelope_key);
  return CancelRequest{read_id(r.require("id"), r.path("id"), options)};
}

}  // namespace detail

}  // namespace loom::proto

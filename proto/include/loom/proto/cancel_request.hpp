// CancelRequest: the client asking the server to stop one of its requests. Cancelling is idempotent:
// naming a request that already finished, or that never existed, is not an error, because a cancel racing
// the request's own done event is normal.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"

namespace loom::proto {

struct CancelRequest {
  std::string request_id;  // wire name "id": the id of the generate request to stop

  bool operator==(const CancelRequest&) const = default;
};

void to_json(nlohmann::json& j, const CancelRequest& message);
// On failure the error's request_id holds the id when that was well formed.
Parsed<CancelRequest> parse_cancel_request(const nlohmann::json& j, const ParseOptions& options = {});

}  // namespace loom::proto

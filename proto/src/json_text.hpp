// Internal to loom_proto: turning one message's text into a JSON value under the size and nesting limits,
// with an error that names the byte offset when the text is not JSON. Not a public header.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "loom/proto/parse_options.hpp"

namespace loom::proto::detail {

// Throws Invalid (field "") when the text is too large, too deeply nested or not JSON.
nlohmann::json parse_json_text(std::string_view text, const ParseOptions& options);

}  // namespace loom::proto::detail

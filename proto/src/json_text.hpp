// Internal to loom_proto: turning one message's text into a JSON value under the size and nesting limits,
// with an error that names the byte offset when the text is not JSON. Not a public header.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"
#include "object_reader.hpp"

namespace loom::proto::detail {

// Throws Invalid (field "") when the text is too large, too deeply nested or not JSON.
nlohmann::json parse_json_text(std::string_view text, const ParseOptions& options);

// Parses `text` into JSON under the limits, then hands the value to `parse_json` (a JSON-taking parser).
template <class T, class ParseJson>
Parsed<T> parse_text(std::string_view text, const ParseOptions& options, ParseJson parse_json) {
  nlohmann::json j;
  try {
    j = parse_json_text(text, options);
  } catch (Invalid& invalid) {
    return Parsed<T>(std::move(invalid.error));
  }
  return parse_json(j, options);
}

// The usual visitor-from-lambdas helper, for the wire messages' variants.
template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace loom::proto::detail

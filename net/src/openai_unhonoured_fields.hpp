// Fields of an OpenAI or llama.cpp request body that loom recognises but cannot honour: samplers it does not
// have (mirostat, DRY, XTC, typical-p, tail-free, dynamic temperature, top-n-sigma, a custom sampler
// order), llama.cpp's per-token probabilities (n_probs), turning the prefix cache off, and OpenAI's audio
// and web search. Ignoring one silently would answer a different request than the one sent, so each is a
// 400 naming it, unless the body opts into lenient handling with loom's `"lenient": true`: then they are
// ignored and listed (the route sends the list in the X-Loom-Ignored-Fields header). A value equal to the
// field's "off" value (mirostat 0, typical_p 1, cache_prompt true, ...) asks for nothing and passes either
// way; a field that only tunes another (mirostat_tau, dry_base, xtc_threshold, ...) changes nothing while
// that one is off, as in llama.cpp, and is not looked at. Unknown fields are not this file's business: the
// routes ignore them, as OpenAI's clients send extras.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace loom::net::openai {

struct UnhonouredField {
  std::string_view name;     // the body's field
  std::string_view what;     // what it asks for, for the refusal's message
  std::string_view off;      // its "off" value(s), for the refusal's message and the README table
  bool (*is_off)(const nlohmann::json& value);  // the value (never null) asks for nothing
};

// Every field the check knows, in the README table's order.
std::span<const UnhonouredField> unhonoured_fields();

// The fields of `body` (an object) set to something loom cannot do, in the table's order.
std::vector<std::string> unhonoured_fields_in(const nlohmann::json& body);

// The body's `lenient` field: absent or null is false; nullopt when it is not a boolean.
std::optional<bool> read_lenient(const nlohmann::json& body);

inline constexpr std::string_view kIgnoredFieldsHeader = "X-Loom-Ignored-Fields";

}  // namespace loom::net::openai

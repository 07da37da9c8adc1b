// The OpenAI-compatible routes' request translation (net/src/openai_translate_request.cpp) on arbitrary
// bodies, for both routes: a JSON body becomes a proto::GenerateRequest or an OpenAI error. Beyond not
// crashing or throwing:
// - a translated request carries the id it was given and passes proto's check_generate_request, so the
//   HTTP routes can hand the engine nothing that the WebSocket protocol would refuse;
// - a refusal is a 4xx/5xx with a message, and its error object serialises (invalid UTF-8 replaced).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "fuzz_support.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/parse_options.hpp"
#include "openai_translate.hpp"

namespace {

using loom::fuzz::check;
namespace openai = loom::net::openai;

void translate(std::string_view body, loom::net::OpenAiRoute route) {
  const loom::proto::ParseOptions options;
  const auto result = openai::translate_request(body, route, "fuzz-request", options);
  if (const auto* request = std::get_if<openai::Request>(&result)) {
    check(request->generate.id == "fuzz-request", "the translated request lost its id");
    const auto refusal = loom::proto::check_generate_request(request->generate, options);
    check(!refusal.has_value(), "a translated request breaks the protocol's rules: " +
                                    (refusal ? refusal->field + " " + refusal->message : std::string()));
    return;
  }
  const auto& error = std::get<openai::Error>(result);
  check(error.status >= 400 && error.status <= 599, "an error with status " + std::to_string(error.status));
  check(!error.message.empty(), "an error without a message");
  (void)error.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  translate(body, loom::net::OpenAiRoute::completions);
  translate(body, loom::net::OpenAiRoute::chat_completions);
  return 0;
}

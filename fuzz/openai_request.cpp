// The OpenAI-compatible routes' request translation (net/src/openai_translate_request.cpp) on arbitrary
// bodies, for both routes: a JSON body becomes a proto::GenerateRequest or an OpenAI error. Beyond not
// crashing or throwing:
// - a translated request carries the id it was given and passes proto's check_generate_request, so the
//   HTTP routes can hand the engine nothing that the WebSocket protocol would refuse;
// - a refusal is a 4xx/5xx with a message, and its error object serialises (invalid UTF-8 replaced).
// The same body also goes through the /v1/embeddings translation: an accepted one has 1 to
// kMaxEmbeddingInputs inputs, none empty.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "fuzz_support.hpp"
#include "loom/proto/generate_request.hpp"
#include "loom/proto/parse_options.hpp"
#include "openai_embeddings.hpp"
#include "openai_translate.hpp"

namespace {

using loom::fuzz::check;
namespace openai = loom::net::openai;

void check_error(const openai::Error& error) {
  check(error.status >= 400 && error.status <= 599, "an error with status " + std::to_string(error.status));
  check(!error.message.empty(), "an error without a message");
  (void)error.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

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
  check_error(std::get<openai::Error>(result));
}

void translate_embeddings(std::string_view body) {
  const auto result = openai::translate_embeddings_request(body, 64);
  if (const auto* error = std::get_if<openai::Error>(&result)) {
    check_error(*error);
    return;
  }
  const auto& inputs = std::get<openai::EmbeddingsRequest>(result).engine.inputs;
  check(!inputs.empty() && inputs.size() <= openai::kMaxEmbeddingInputs,
        "an embeddings request with " + std::to_string(inputs.size()) + " inputs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  translate(body, loom::net::OpenAiRoute::completions);
  translate(body, loom::net::OpenAiRoute::chat_completions);
  translate_embeddings(body);
  return 0;
}

// POST /v1/embeddings in OpenAI's shape: the body's `input` (a string, a list of strings, a list of token
// ids, or a list of such lists) becomes an actors::EmbedRequest whose inputs the engine runs as concurrent
// sequences, batched with generation; the vectors come back as floats or, with encoding_format "base64",
// as the base64 of their little-endian float32 bytes. `dimensions` is refused unless it is the model's
// embedding length (loom does not shorten vectors); `model` must be a string (the served model answers);
// `user` is accepted. The translation is pure (tested on its own); serve_openai_embeddings does the HTTP.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>  // before awaitable.hpp: Boost 1.74 uses std::exchange without including it
#include <variant>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "http_util.hpp"
#include "loom/actors/engine/embedding_protocol.hpp"
#include "openai_translate.hpp"

namespace loom::net::openai {

// Inputs one request may carry: each is a sequence of its own in the scheduler.
inline constexpr std::size_t kMaxEmbeddingInputs = 256;

struct EmbeddingsRequest {
  actors::EmbedRequest engine;
  bool base64 = false;
  bool single = false;  // `input` was one string or one token list: errors name "input", not "input[i]"
};

// `embedding_length`: the model's, the only `dimensions` accepted.
std::variant<EmbeddingsRequest, Error> translate_embeddings_request(std::string_view body, std::int64_t embedding_length);

// Little-endian float32 bytes in base64 (RFC 4648, padded).
std::string base64_floats(std::span<const float> values);

// {object:"list", data:[{object:"embedding", index, embedding}], model, usage:{prompt_tokens, total_tokens}}.
nlohmann::json embeddings_response(const actors::EmbedResult& result, bool base64, const std::string& model);

// The engine's refusal, its field in the client's spelling ("inputs[2]" -> "input[2]", or "input").
Error embeddings_error(const proto::ErrorEvent& event, bool single);

}  // namespace loom::net::openai

namespace loom::net {

// Writes the whole response and returns whether the connection may be kept alive. The caller (the router)
// has checked the method, auth, readiness and body size.
boost::asio::awaitable<bool> serve_openai_embeddings(GatewayContext& context, TcpStream& stream, HttpRequest request);

}  // namespace loom::net

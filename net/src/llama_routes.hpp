// The routes llama.cpp's server offers besides OpenAI's, in its names and shapes, for the tools written
// against it: POST /tokenize ({content, add_special, parse_special, with_pieces} -> {tokens}), POST
// /detokenize ({tokens} -> {content}) and POST /apply-template ({messages, tools, ...} -> {prompt,
// prompt_tokens}); and the "meta" object GET /v1/models gives each model (llama.cpp's fields and loom's).
// Tokenizing uses the tokenizer the gateway got from the load, on the connection's strand (bounded by
// max_prompt_bytes, as a request's prompt is); applying the template asks the engine, which renders with
// the code a chat request's session uses. These paths are not under /v1 but show the model: they want
// the API key as /v1 does, and the model loaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>  // before awaitable.hpp: Boost 1.74 uses std::exchange without including it

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "http_util.hpp"
#include "loom/compute/backend.hpp"
#include "loom/compute/text/tokenizer.hpp"

namespace loom::net {

// Token ids one /detokenize may send; a /tokenize content is bounded by ParseOptions::max_prompt_bytes.
inline constexpr std::size_t kMaxDetokenizeTokens = 1u << 18;

bool is_llama_route(std::string_view path);

// nullopt when the route may run; else its answer: 405 for a method other than POST, 401 without the API
// key, 503 before the model is ready or during a shutdown.
std::optional<HttpResponse> llama_route_refusal(const GatewayContext& context, const HttpRequest& request,
                                                std::string_view path);

// Answers one request to a llama route that may run; returns whether the connection may be kept alive.
boost::asio::awaitable<bool> serve_llama_route(GatewayContext& context, TcpStream& stream, HttpRequest request);

// /v1/models' "meta": llama.cpp's vocab_type (1 SentencePiece, 2 byte-level BPE), n_vocab, n_ctx_train,
// n_embd, n_params and size (bytes of the weights), and loom's architecture, context_length (what a
// request may use: the model's, or less when the KV cache is smaller), n_layer, n_head, n_head_kv and
// tensor_types (stored type -> tensors of it).
nlohmann::json model_meta(const compute::BackendInfo& info, std::int64_t context_length,
                          const compute::Tokenizer* tokenizer);

}  // namespace loom::net

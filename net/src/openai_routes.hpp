// The OpenAI-compatible routes: POST /v1/completions and POST /v1/chat/completions, streamed as
// text/event-stream (OpenAI's chunk objects, then "data: [DONE]") or answered with one JSON object.
// The request body is translated to a proto::GenerateRequest (with llama.cpp's extensions top_k, min_p,
// repeat_penalty, seed, ignore_eos), run as a stand-alone request through the Engine, and its events
// translated back. The caller (the HTTP connection) has already checked the method, auth and body size.
#pragma once

#include <utility>  // before awaitable.hpp: Boost 1.74 uses std::exchange without including it

#include <boost/asio/awaitable.hpp>

#include "http_util.hpp"

namespace loom::net {

enum class OpenAiRoute { completions, chat_completions };

// Writes the whole response to `stream` (status, headers, body or SSE events) and returns whether the
// connection may be kept alive. Errors in the body are answered with OpenAI's error object (400, 503,
// ...); a client that disconnects mid-stream cancels its request.
boost::asio::awaitable<bool> serve_openai(GatewayContext& context, TcpStream& stream, HttpRequest request,
                                          OpenAiRoute route);

}  // namespace loom::net

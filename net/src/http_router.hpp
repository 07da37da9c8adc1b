// The HTTP router: one request that is not a WebSocket upgrade, dispatched by path and method (HEAD
// wherever GET, answered with GET's headers and no body). Answered at once: the chat page (/),
// /favicon.ico, /health, /v1/models, and the errors (403 for a Host that is not this server's when no API
// key is set (host_check.hpp), 401 without the API key
// on a /v1 route, 404, 405, 426 for /v1/ws without an upgrade, 503 for the OpenAI routes before the model
// is ready or during a shutdown). Through the engine: /metrics (prometheus_metrics), the OpenAI routes
// (openai_routes) and llama.cpp's /tokenize, /detokenize and /apply-template (llama_routes). The HTTP
// connection has already read the request within its limits.
#pragma once

#include <utility>  // before awaitable.hpp: Boost 1.74 uses std::exchange without including it

#include <boost/asio/awaitable.hpp>

#include "http_util.hpp"

namespace loom::net {

// Writes the response to `request` and returns whether the connection may be kept alive.
boost::asio::awaitable<bool> route_http_request(GatewayContext& context, TcpStream& stream, HttpRequest request);

}  // namespace loom::net

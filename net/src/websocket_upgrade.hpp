// The WebSocket upgrade: an HTTP request asking to upgrade GET /v1/ws. The upgrade is refused with an
// HTTP error when its Sec-WebSocket-Key is not the base64 of 16 bytes (400), when its Host is not this
// server's and no API key is set (403, host_check.hpp), while the model loads or the gateway shuts down (503), without the API key (401: the
// Authorization header, or ?access_token= since a browser's WebSocket cannot set headers), or from a
// browser page on an Origin that is not allowed (403). Otherwise the TCP stream moves onto a strand of its
// own and the WebSocket connection (websocket_connection.hpp) takes it over.
#pragma once

#include <utility>  // before awaitable.hpp: Boost 1.74 uses std::exchange without including it

#include <boost/asio/awaitable.hpp>

#include "http_util.hpp"

namespace loom::net {

// True for a WebSocket upgrade request of /v1/ws (any query).
bool is_websocket_upgrade(const HttpRequest& request);

// Refuses the upgrade (writes the error response, returns false: the HTTP connection then ends) or
// hands `stream` to the WebSocket connection and returns true once that connection is over.
boost::asio::awaitable<bool> serve_websocket_upgrade(GatewayContext& context, TcpStream& stream, HttpRequest request);

}  // namespace loom::net

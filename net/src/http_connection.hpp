// The HTTP connection: one TCP connection's HTTP/1.1 loop, a coroutine on the connection's own strand. It
// reads each request with the limits applied at the read (16 KiB of headers: 431; max_body_bytes of
// body: 413, after which the rest of the body is drained, bounded, so the client reads the 413; a
// transfer coding other than chunked: 501; all close the connection), closes a keep-alive connection idle for http_idle_timeout,
// hands an upgrade of /v1/ws to websocket_upgrade and every other request to the router, and keeps the
// connection alive as long as the responses allow. On graceful shutdown an idle connection closes at
// once and a busy one after its response.
#pragma once

#include <memory>

#include <boost/asio/ip/tcp.hpp>

#include "gateway_context.hpp"

namespace loom::net {

// Starts serving `socket` (accepted on a strand of its own) and returns at once. The connection keeps
// `context` (and what owns it) alive until it ends; it is counted in the metrics while open.
void start_http_connection(std::shared_ptr<GatewayContext> context, boost::asio::ip::tcp::socket socket);

}  // namespace loom::net

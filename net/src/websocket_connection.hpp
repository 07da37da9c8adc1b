// One WebSocket connection on GET /v1/ws: the protocol of proto/PROTOCOL.md. Reads frames (size-limited;
// oversize closes with 1009), parses them with loom_proto, opens sessions (scoped to the connection),
// runs generate requests through the Engine (several in flight, interleaved by id), cancels, and writes
// events through a bounded send queue (overflow cancels the connection's requests). Closing the
// connection cancels its requests and closes its sessions. Pings keep idle connections alive. On graceful
// shutdown it refuses new requests, lets running ones finish, and closes with 1001.
#pragma once

#include <utility>  // before awaitable.hpp: Boost 1.74 uses std::exchange without including it

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/strand.hpp>

#include "http_util.hpp"

namespace loom::net {

// Everything of one WebSocket connection runs on one strand.
using WebSocketStrand = boost::asio::strand<boost::asio::any_io_executor>;

// Takes over the stream (its socket already on `strand`) after the upgrade was checked
// (websocket_upgrade.hpp); accepts the upgrade and runs until the connection closes.
boost::asio::awaitable<void> run_websocket(GatewayContext& context, WebSocketStrand strand, TcpStream stream,
                                           HttpRequest upgrade);

}  // namespace loom::net

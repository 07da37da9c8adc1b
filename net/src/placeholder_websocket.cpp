// PLACEHOLDER until the WebSocket connection lands (branch gw-ws deletes this file): closes at once.
#include "websocket_connection.hpp"

namespace loom::net {
boost::asio::awaitable<void> run_websocket(GatewayContext&, TcpStream stream, HttpRequest) {
  boost::system::error_code ignored;
  stream.socket().close(ignored);
  co_return;
}
}  // namespace loom::net

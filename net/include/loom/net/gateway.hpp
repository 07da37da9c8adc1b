// Gateway: the engine on the network. It owns a loom::Engine (on a thread pool of its own, so forward
// passes and actors never run on the network threads), listens on config.host:port on the application's
// io_context, and serves the WebSocket protocol (GET /v1/ws), the OpenAI-compatible HTTP API, /health,
// /metrics, /v1/models and the web chat page. loom-gateway is this class plus flags and signals.
//
//   asio::io_context io;
//   net::Gateway gateway(io, config);
//   gateway.start([](std::string error) { ... });  // listening now; the model loads in the background
//   ... io.run() on config.threads threads ...
//   gateway.async_shutdown([&] { io.stop(); });     // on SIGTERM
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "loom/net/gateway_config.hpp"

namespace loom::net {

class Gateway {
 public:
  // Throws std::invalid_argument for a config that validate() refuses.
  Gateway(boost::asio::io_context& io, GatewayConfig config);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Binds and listens (throws std::system_error naming the address when it cannot), then loads the model
  // in the background: /health answers "loading" until `on_loaded` runs with an empty string (ready) or the
  // reason the load failed (the gateway then answers 503 to everything but /health and /metrics). When
  // async_shutdown is called before the load has ended, `on_loaded` is not called: the load is cut short
  // (or its model dropped) as part of the shutdown, which is no failure.
  void start(std::function<void(std::string error)> on_loaded);
  // The bound address (port 0 in the config picks a free one).
  boost::asio::ip::tcp::endpoint local_endpoint() const;

  // Graceful shutdown: stops accepting, refuses new requests (unavailable / 503), lets the running ones
  // finish within config.shutdown_grace and cancels the rest, closes WebSockets with 1001 and idle HTTP
  // connections, stops the engine; then `done` runs (on the io_context). Safe to call more than once.
  void async_shutdown(std::function<void()> done);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace loom::net

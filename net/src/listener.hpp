// Listener: the gateway's accept loop. It binds the configured address, accepts TCP connections, puts
// each one on a strand of its own and hands it to the HTTP connection; past max_connections open ones a
// new connection is closed at once. A failed accept (out of file descriptors, say) is logged and retried
// after a pause, never fatal. Its acceptor lives on a strand: close() runs there.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>  // before awaitable.hpp: Boost 1.74 uses std::exchange without including it

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "gateway_context.hpp"

namespace loom::net {

class Listener {
 public:
  using Tcp = boost::asio::ip::tcp;
  // Runs for every accepted connection, on the connection's own strand executor.
  using ConnectionHandler = std::function<void(Tcp::socket)>;

  Listener(boost::asio::io_context& io, GatewayContext& context);

  // Binds and listens; throws boost::system::system_error naming "host:port" when it cannot.
  void listen(const std::string& host, std::uint16_t port);
  // Starts the accept loop (after listen); it ends when the acceptor closes.
  void start(ConnectionHandler on_connection);
  // The bound address (port 0 asked for a free one: this names it).
  Tcp::endpoint local_endpoint() const { return endpoint_; }

  // Stops accepting. Must run on executor() (post to it from elsewhere).
  void close();
  Tcp::acceptor::executor_type executor() { return acceptor_.get_executor(); }

 private:
  boost::asio::awaitable<void> accept_loop(ConnectionHandler on_connection);
  bool at_connection_limit() const;

  boost::asio::io_context& io_;
  GatewayContext& context_;
  Tcp::acceptor acceptor_;
  Tcp::endpoint endpoint_;
};

}  // namespace loom::net

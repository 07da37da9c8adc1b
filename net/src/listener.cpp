#include "listener.hpp"

#include <chrono>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "net_logger.hpp"

namespace loom::net {

namespace asio = boost::asio;

Listener::Listener(asio::io_context& io, GatewayContext& context)
    : io_(io), context_(context), acceptor_(asio::make_strand(io)) {}

void Listener::listen(const std::string& host, std::uint16_t port) {
  const Tcp::endpoint wanted(asio::ip::make_address(host), port);
  try {
    acceptor_.open(wanted.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(wanted);
    acceptor_.listen(asio::socket_base::max_listen_connections);
  } catch (const boost::system::system_error& e) {
    throw boost::system::system_error(e.code(), "cannot listen on " + host + ":" + std::to_string(port));
  }
  endpoint_ = acceptor_.local_endpoint();
}

void Listener::start(ConnectionHandler on_connection) {
  asio::co_spawn(acceptor_.get_executor(), accept_loop(std::move(on_connection)), asio::detached);
}

void Listener::close() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

bool Listener::at_connection_limit() const {
  return context_.metrics.snapshot().connections_open >= context_.config.max_connections;
}

asio::awaitable<void> Listener::accept_loop(ConnectionHandler on_connection) {
  for (;;) {
    boost::system::error_code ec;
    Tcp::socket socket =
        co_await acceptor_.async_accept(asio::make_strand(io_), asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
    if (ec) {
      // Out of file descriptors and the like: say so, breathe, go on.
      logger().warn("accept failed error=\"{}\"", ec.message());
      asio::steady_timer pause(acceptor_.get_executor(), std::chrono::milliseconds(50));
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    if (at_connection_limit()) {
      logger().warn("refusing a connection: max_connections={} reached", context_.config.max_connections);
      boost::system::error_code ignored;
      socket.close(ignored);
      continue;
    }
    // Tokens go out as small frames and SSE events, one at a time: Nagle's algorithm would hold each one
    // back until the previous one is acknowledged (tens of milliseconds with delayed ACKs).
    boost::system::error_code ignored;
    socket.set_option(Tcp::no_delay(true), ignored);
    on_connection(std::move(socket));
  }
}

}  // namespace loom::net

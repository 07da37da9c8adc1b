#include "peer_close_watch.hpp"

#include <boost/asio/ip/tcp.hpp>

namespace loom::net {

namespace asio = boost::asio;
using boost::system::error_code;

struct PeerCloseWatch::State {
  asio::ip::tcp::socket* socket;
  std::function<void()> on_close;
  bool active;
};

namespace {

enum class Peeked { data, nothing, closed };

// Asio's synchronous receive on a socket it drives asynchronously waits for data unless the socket is in
// non-blocking mode: a wake-up with nothing to read would then block this I/O thread, and the strand with it,
// until the client sent or closed (the soak test found requests stuck that way). So the peek is made
// non-blocking for its duration.
Peeked peek(asio::ip::tcp::socket& socket) {
  error_code ec;
  socket.non_blocking(true, ec);
  if (ec) return Peeked::nothing;
  char byte = 0;
  const std::size_t peeked = socket.receive(asio::buffer(&byte, 1), asio::socket_base::message_peek, ec);
  error_code ignored;
  socket.non_blocking(false, ignored);
  if (ec == asio::error::would_block || ec == asio::error::try_again) return Peeked::nothing;
  return ec || peeked == 0 ? Peeked::closed : Peeked::data;
}

template <class State>
void arm(const std::shared_ptr<State>& state) {
  state->socket->async_wait(asio::ip::tcp::socket::wait_read, [state](const error_code& ec) {
    if (!state->active || ec) return;  // ended, or cancelled: the socket may be gone
    switch (peek(*state->socket)) {
      case Peeked::data: return;
      case Peeked::nothing: return arm(state);
      case Peeked::closed: return state->on_close();
    }
  });
}

}  // namespace

PeerCloseWatch::PeerCloseWatch(TcpStream& stream, std::function<void()> on_close)
    : state_(std::make_shared<State>(State{&stream.socket(), std::move(on_close), true})) {
  arm(state_);
}

PeerCloseWatch::~PeerCloseWatch() {
  state_->active = false;
  error_code ignored;
  state_->socket->cancel(ignored);
}

}  // namespace loom::net

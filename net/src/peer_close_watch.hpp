// PeerCloseWatch: notices a client that leaves while its request is computed and nothing is written to its
// socket (a stream:false completion, an embeddings request), so that the request can be cancelled instead of
// running on and holding its budget slot until the answer is written. It waits for the socket to become
// readable: a close (or a reset, or a half-close: the client sends nothing more either way) calls `on_close`;
// bytes (a pipelined request) end the watch and stay unread for the connection's next read; a wake-up with
// nothing to read waits again. Everything runs on the connection's strand; the watch must be gone before
// anything else uses the socket (its destructor cancels the socket's pending operations).
#pragma once

#include <functional>
#include <memory>

#include "http_util.hpp"

namespace loom::net {

class PeerCloseWatch {
 public:
  PeerCloseWatch(TcpStream& stream, std::function<void()> on_close);
  ~PeerCloseWatch();
  PeerCloseWatch(const PeerCloseWatch&) = delete;
  PeerCloseWatch& operator=(const PeerCloseWatch&) = delete;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace loom::net

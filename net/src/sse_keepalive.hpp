// SSE keep-alive: a streamed response that has nothing to send for a while (the request waits in the
// scheduler's queue, its long prompt prefills, a step is slow) would look dead to a proxy or a client
// with a read timeout. The route waits for each event with a deadline (TimedEventWait) and, when the
// deadline passes first, writes kSsePing: an SSE comment, which clients (the OpenAI SDKs among them) skip.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>  // before awaitable.hpp: Boost 1.74 uses std::exchange without including it

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "loom/actors/engine/event_stream.hpp"

namespace loom::net {

// One SSE comment line and the blank line that ends the event.
inline constexpr std::string_view kSsePing = ": ping\n\n";

// The next event of a request's stream, or word that `within` passed first. The EventStream's own wait
// cannot be cancelled, so a wait that timed out stays pending and the next call takes its event: every
// event is delivered once, in order. Use only from the coroutine's own executor (a strand), and take
// every event through it (the stream allows one wait at a time).
class TimedEventWait {
 public:
  explicit TimedEventWait(actors::EventStream& events) : events_(events) {}

  struct Result {
    bool timed_out = false;
    std::optional<proto::ServerMessage> event;  // nullopt (not timed out): the stream has ended
  };

  // `within` zero: no deadline.
  boost::asio::awaitable<Result> next(std::chrono::milliseconds within);

 private:
  // Shared with the pending wait's handler, which may outlive this object (it runs once the event comes).
  struct State {
    explicit State(const boost::asio::any_io_executor& executor) : timer(executor) {}
    boost::asio::steady_timer timer;  // wakes the waiting coroutine: at the deadline, or cancelled by an event
    bool pending = false;             // an EventStream wait is out
    std::optional<std::optional<proto::ServerMessage>> arrived;  // taken by the pending wait, not yet returned
  };

  actors::EventStream& events_;
  std::shared_ptr<State> state_;
};

}  // namespace loom::net

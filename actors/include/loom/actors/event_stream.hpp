// EventStream: one request's events as something a coroutine awaits. The engine pushes events into it
// (from its strands) and the consumer takes them in order with async_next, which completes with the next
// event, or with nullopt once the last event (done or error) has been taken. Events pushed before anyone
// waits are buffered (a request has at most max_tokens + 1 events, so the buffer is bounded by the
// request's own limits).
//
// The only lock in the engine outside a mailbox is here: the producer is an actor strand and the consumer
// any executor, and a message to a consumer that is not an actor has nowhere to go; the critical sections
// only move an event or a handler.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/any_io_executor.hpp>

#include "loom/proto/server_message.hpp"

namespace loom::actors {

class EventStream {
 public:
  // `fallback` runs completions whose handler has no associated executor.
  explicit EventStream(boost::asio::any_io_executor fallback);

  // Producer side: the engine's ClientSink for this request.
  std::function<void(proto::ServerMessage)> sink() const;

  // Completion signature void(std::optional<proto::ServerMessage>): the next event, or nullopt after the
  // last one. One wait at a time (a second concurrent async_next is a logic error: it throws).
  template <class CompletionToken>
  auto async_next(CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(std::optional<proto::ServerMessage>)>(
        [state = state_](auto handler) {
          auto executor = boost::asio::get_associated_executor(handler, state->fallback);
          auto shared = std::make_shared<decltype(handler)>(std::move(handler));
          state->wait([shared, executor](std::optional<proto::ServerMessage> event) mutable {
            boost::asio::post(executor, [shared, event = std::move(event)]() mutable { (*shared)(std::move(event)); });
          });
        },
        token);
  }

  // True once the last event has been pushed (it may not have been taken yet).
  bool finished() const;

 private:
  struct State {
    explicit State(boost::asio::any_io_executor executor) : fallback(std::move(executor)) {}
    void push(proto::ServerMessage event);
    void wait(std::function<void(std::optional<proto::ServerMessage>)> waiter);

    boost::asio::any_io_executor fallback;
    mutable std::mutex mutex;
    std::deque<proto::ServerMessage> events;
    std::function<void(std::optional<proto::ServerMessage>)> waiter;
    bool ended = false;      // the last event was pushed
    bool delivered = false;  // the last event was taken: further waits get nullopt
  };
  std::shared_ptr<State> state_;
};

}  // namespace loom::actors

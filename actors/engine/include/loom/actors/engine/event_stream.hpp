// EventStream: one request's events as something a coroutine awaits. The engine pushes events into it
// (from its strands) and the consumer takes them in order with async_next, which completes with the next
// event, or with nullopt once the last event (done or error) has been taken. Events pushed before anyone
// waits are buffered (a request has at most max_tokens + 1 events, so the buffer is bounded by the
// request's own limits). A session.opened is not an event of a request: it passes through like a token.
//
// If every copy of the stream's sink is destroyed before a last event went through (the engine was torn
// down under the request), the stream ends there: the waiter gets nullopt rather than waiting forever.
//
// The only lock in the engine outside a mailbox is here: the producer is an actor strand and the consumer
// any executor, and a message to a consumer that is not an actor has nowhere to go; the critical sections
// only move an event or a handler.
//
//   auto stream = engine.generate_stream(request);
//   while (auto event = co_await stream.async_next(asio::use_awaitable)) { ... }
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include "loom/proto/server_message.hpp"

namespace loom::actors {

class EventStream {
 public:
  // `fallback` runs completions whose handler has no associated executor.
  explicit EventStream(boost::asio::any_io_executor fallback);

  // Producer side: the engine's ClientSink for this request. Every call returns a sink feeding the same
  // stream; the stream counts as abandoned when the last of them is gone (see above).
  std::function<void(proto::ServerMessage)> sink() const;

  // Completion signature void(std::optional<proto::ServerMessage>): the next event, or nullopt after the
  // last one. One wait at a time (a second concurrent async_next is a logic error: it throws
  // std::logic_error). The waiting operation keeps its executor's work count up, so an io_context::run()
  // does not return under a coroutine that waits for its next token.
  template <class CompletionToken>
  auto async_next(CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(std::optional<proto::ServerMessage>)>(
        [state = state_](auto handler) {
          auto executor = boost::asio::prefer(boost::asio::get_associated_executor(handler, state->fallback),
                                              boost::asio::execution::outstanding_work.tracked);
          auto shared = std::make_shared<decltype(handler)>(std::move(handler));
          state->wait([shared, executor](std::optional<proto::ServerMessage> event) mutable {
            boost::asio::post(executor, [shared, event = std::move(event)]() mutable { (*shared)(std::move(event)); });
          });
        },
        token);
  }

  // True once no more events will come: the last event was pushed (it may not have been taken yet), or
  // the stream was abandoned.
  bool finished() const;

 private:
  struct State;
  // Shared by the sinks of one stream; its destruction is the producer going away.
  struct Producer {
    explicit Producer(std::shared_ptr<State> s) : state(std::move(s)) {}
    Producer(const Producer&) = delete;
    Producer& operator=(const Producer&) = delete;
    ~Producer();
    std::shared_ptr<State> state;
  };
  struct State {
    explicit State(boost::asio::any_io_executor executor) : fallback(std::move(executor)) {}
    void push(proto::ServerMessage event);
    void abandon();
    void wait(std::function<void(std::optional<proto::ServerMessage>)> waiter);

    boost::asio::any_io_executor fallback;
    mutable std::mutex mutex;
    std::deque<proto::ServerMessage> events;
    std::function<void(std::optional<proto::ServerMessage>)> waiter;
    bool ended = false;  // nothing more will be pushed: the last event was, or every sink is gone
    // The sinks' producer; weak, so that the stream itself never keeps it alive.
    std::weak_ptr<Producer> producer;
  };

  std::shared_ptr<State> state_;
};

}  // namespace loom::actors

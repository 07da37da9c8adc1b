// Address<Protocol>: how anyone sends to an actor whose messages are the alternatives of Protocol (a
// std::variant of message structs). Cheap to copy, safe to use from any thread, never keeps the actor
// alive: telling a stopped or destroyed actor drops the message, counts it, and never crashes.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/system_executor.hpp>

#include "loom/actors/runtime/dead_letters.hpp"
#include "loom/actors/runtime/mailbox.hpp"
#include "loom/actors/runtime/message_name.hpp"
#include "loom/actors/runtime/reply.hpp"

namespace loom::actors {

// A request is a message with a `reply` member of type Reply<R>; asking it yields an R.
template <class Request>
concept RequestMessage = requires(Request request) {
  typename decltype(request.reply)::value_type;
  requires std::is_same_v<decltype(request.reply), Reply<typename decltype(request.reply)::value_type>>;
};

template <class Request>
using reply_value_t = typename decltype(std::declval<Request>().reply)::value_type;

template <class Message, class Protocol>
concept MessageOf = std::is_constructible_v<Protocol, Message&&>;

template <class Protocol>
class Address {
 public:
  using protocol_type = Protocol;

  Address() = default;  // an empty address: every message told to it is a dead letter
  explicit Address(std::weak_ptr<Mailbox<Protocol>> mailbox) : mailbox_(std::move(mailbox)) {
    if (auto live = mailbox_.lock()) io_executor_ = live->io_executor();
  }

  // Fire and forget. Never blocks; returns whether the actor accepted the message.
  template <MessageOf<Protocol> Message>
  bool tell(Message&& message) const {
    if (auto live = mailbox_.lock()) return live->enqueue(Protocol(std::forward<Message>(message)));
    detail::record_dead_letter("<gone>", message_name<std::remove_cvref_t<Message>>(), "actor destroyed");
    return false;
  }

  // Request/response. The completion signature is void(error_code, R): the reply value, or
  // ActorError::timeout, or ActorError::no_reply (dropped unanswered), or an error the actor chose.
  // The reply is delivered on the completion handler's associated executor (bind one with
  // asio::bind_executor, or use asio::use_awaitable in a coroutine); without one, on the actor's
  // io executor (for an empty address, the system executor). Works with callbacks, asio::use_awaitable and asio::use_future.
  template <RequestMessage Request, class CompletionToken>
    requires MessageOf<Request, Protocol>
  auto ask(Request request, std::chrono::steady_clock::duration timeout, CompletionToken&& token) const {
    using R = reply_value_t<Request>;
    static_assert(std::is_default_constructible_v<R>, "an ask's reply type must be default-constructible");
    return asio::async_initiate<CompletionToken, void(error_code, R)>(
        // A copy of the address, not `this`: with a deferred token (use_awaitable) the initiation runs when
        // awaited, and the Address it was called on may be a temporary that is gone by then.
        [self = *this](auto handler, Request req, std::chrono::steady_clock::duration limit) {
          // An empty address has no actor to borrow an I/O executor from; the system executor serves.
          const asio::any_io_executor timer_executor =
              self.io_executor_ ? self.io_executor_ : asio::any_io_executor(asio::system_executor());
          auto executor = asio::get_associated_executor(handler, timer_executor);
          using State = detail::AskStateFor<R, decltype(handler), decltype(executor)>;
          auto state = std::make_shared<State>(std::move(handler), std::move(executor), timer_executor);
          state->arm(limit);
          req.reply = Reply<R>(state);
          self.tell(std::move(req));  // if refused, the Reply dies with the message and answers no_reply
        },
        token, std::move(request), timeout);
  }

  // False for an empty address or an actor that is stopped or gone (a snapshot: it may stop right after).
  bool alive() const noexcept {
    auto live = mailbox_.lock();
    return live && live->state() == ActorState::running;
  }

  friend bool operator==(const Address& a, const Address& b) noexcept {
    return !a.mailbox_.owner_before(b.mailbox_) && !b.mailbox_.owner_before(a.mailbox_);
  }

 private:
  std::weak_ptr<Mailbox<Protocol>> mailbox_;
  asio::any_io_executor io_executor_;  // fallback executor for ask completions; does not keep work alive
};

}  // namespace loom::actors

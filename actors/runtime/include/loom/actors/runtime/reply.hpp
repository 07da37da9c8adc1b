// Reply<R>: the answering half of an `ask`. A request message carries one as its `reply` member; the
// actor answers by calling it once. Whatever happens, the asker hears exactly once: the value, the
// timeout, or ActorError::no_reply when the Reply is destroyed unanswered (the message was dropped by a
// stopped actor, or its handler threw, or simply forgot).
//
//   struct GetCount { Reply<int> reply; };
//   void on(GetCount m) { m.reply(count_); }
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <system_error>
#include <utility>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "loom/actors/runtime/actor_error.hpp"

namespace loom::actors {

namespace asio = boost::asio;

namespace detail {

// The meeting point of the replier, the timeout and the asker. Whoever claims it first completes it.
template <class R>
class AskState {
 public:
  virtual ~AskState() = default;
  bool try_claim() noexcept { return !claimed_.exchange(true, std::memory_order_acq_rel); }
  // Only the claimant calls this; it posts the completion to the asker's executor.
  virtual void complete(error_code error, R value) = 0;

 private:
  std::atomic<bool> claimed_{false};
};

// Handler: the asker's completion handler; Executor: where it runs (its associated executor).
// The timeout timer runs on an I/O executor (the asked actor's), since the handler's executor may not
// be one (asio::use_future's is not).
template <class R, class Handler, class Executor>
class AskStateFor final : public AskState<R>, public std::enable_shared_from_this<AskStateFor<R, Handler, Executor>> {
 public:
  AskStateFor(Handler handler, Executor executor, const asio::any_io_executor& timer_executor)
      : handler_(std::move(handler)), executor_(std::move(executor)), timer_(timer_executor) {}

  // Called once, before the request is sent, so the timer is never touched from two threads at once.
  void arm(std::chrono::steady_clock::duration timeout) {
    timer_.expires_after(timeout);
    timer_.async_wait([self = this->shared_from_this()](error_code ec) {
      if (!ec && self->try_claim()) self->complete(ActorError::timeout, R{});
    });
  }

  // The asker's side gets the handler and nothing else: this state owns a timer of the asked actor's
  // io_context, and the asker may destroy that context as soon as its handler has run (a test's future
  // returning, an application shutting down), so the state must never be released on the asker's side.
  // The timer is cancelled on its own executor instead.
  void complete(error_code error, R value) override {
    asio::post(timer_.get_executor(), [self = this->shared_from_this()] { self->timer_.cancel(); });
    asio::post(executor_, [handler = std::move(handler_), error, value = std::move(value)]() mutable {
      std::move(handler)(error, std::move(value));
    });
  }

 private:
  Handler handler_;
  Executor executor_;
  asio::steady_timer timer_;
};

}  // namespace detail

template <class R>
class Reply {
 public:
  using value_type = R;

  Reply() = default;  // an unconnected reply (the request was told, not asked): answering is a no-op
  explicit Reply(std::shared_ptr<detail::AskState<R>> state) : state_(std::move(state)) {}
  Reply(Reply&&) noexcept = default;
  Reply& operator=(Reply&& other) noexcept {
    if (this != &other) {
      abandon();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  Reply(const Reply&) = delete;
  Reply& operator=(const Reply&) = delete;
  ~Reply() { abandon(); }

  // Answer the asker. Later calls are ignored.
  void operator()(R value) {
    if (auto state = std::exchange(state_, nullptr); state && state->try_claim()) {
      state->complete({}, std::move(value));
    }
  }

  // Answer with an error instead of a value.
  void fail(error_code error) {
    if (auto state = std::exchange(state_, nullptr); state && state->try_claim()) {
      state->complete(error, R{});
    }
  }

  // True while someone is waiting for this answer.
  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  void abandon() noexcept {
    if (state_ && state_->try_claim()) state_->complete(ActorError::no_reply, R{});
    state_.reset();
  }

  std::shared_ptr<detail::AskState<R>> state_;
};

}  // namespace loom::actors

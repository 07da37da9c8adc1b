#include "sse_keepalive.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace loom::net {

namespace asio = boost::asio;

asio::awaitable<TimedEventWait::Result> TimedEventWait::next(std::chrono::milliseconds within) {
  if (!state_) state_ = std::make_shared<State>(co_await asio::this_coro::executor);
  const std::shared_ptr<State> state = state_;
  if (!state->arrived && !state->pending) {
    state->pending = true;
    // On the coroutine's executor, so the handler never runs while the coroutine looks at the state.
    events_.async_next(asio::bind_executor(state->timer.get_executor(),
                                           [state](std::optional<proto::ServerMessage> event) {
                                             state->pending = false;
                                             state->arrived = std::move(event);
                                             state->timer.cancel();
                                           }));
  }
  if (!state->arrived) {
    if (within.count() > 0) {
      state->timer.expires_after(within);
    } else {
      state->timer.expires_at(asio::steady_timer::time_point::max());
    }
    boost::system::error_code ignored;  // expired, or cancelled by the event: either way, look again
    co_await state->timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }
  if (!state->arrived) co_return Result{true, std::nullopt};
  Result result{false, std::move(*state->arrived)};
  state->arrived.reset();
  co_return result;
}

}  // namespace loom::net

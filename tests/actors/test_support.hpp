// Helpers shared by the actor tests: an io_context run by N threads for the life of a test, and a
// way to wait (bounded) for a condition that other threads make true.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

namespace loom::actors::testing {

class RunningContext {
 public:
  explicit RunningContext(int threads = 2) : work_(io_.get_executor()) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { io_.run(); });
  }
  ~RunningContext() { join(); }
  void join() {
    work_.reset();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  boost::asio::io_context& io() { return io_; }
  boost::asio::any_io_executor executor() { return io_.get_executor(); }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
};

// Polls `condition` until it holds or `limit` passes; returns whether it held.
inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return condition();
}

// Asks and returns (a future of) the error the ask completes with, delivered by a plain callback. The tests
// use this rather than asio::use_future for failures: use_future carries the error as an exception through
// std::future to another thread, and libstdc++'s exception_ptr reference counting is not instrumented for
// ThreadSanitizer, which then reports false races on the exception object.
template <class Address, class Request>
std::future<boost::system::error_code> ask_error(const Address& address, Request request,
                                                 std::chrono::steady_clock::duration timeout) {
  auto promise = std::make_shared<std::promise<boost::system::error_code>>();
  auto future = promise->get_future();
  address.ask(std::move(request), timeout,
              [promise](boost::system::error_code ec, const auto&) { promise->set_value(ec); });
  return future;
}

}  // namespace loom::actors::testing

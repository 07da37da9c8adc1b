// EventStream: events pushed by a producer come out of async_next in order, buffered or awaited, with
// callbacks, futures and coroutines; nullopt follows the last event (done or error) and an abandoned
// producer; completions run on the handler's executor; a waiting coroutine keeps its io_context running.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include "loom/actors/engine/event_stream.hpp"
#include "test_support.hpp"

namespace loom::actors {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using testing::RunningContext;

proto::ServerMessage token(int index) {
  proto::TokenEvent event;
  event.request_id = "r";
  event.token = 100 + index;
  event.text = "t" + std::to_string(index);
  event.index = index;
  return event;
}
proto::ServerMessage done() {
  proto::DoneEvent event;
  event.request_id = "r";
  event.finish_reason = proto::FinishReason::length;
  return event;
}

// Takes the next event with a plain callback and waits (bounded) for it.
std::optional<proto::ServerMessage> next(EventStream& stream) {
  std::promise<std::optional<proto::ServerMessage>> promise;
  auto future = promise.get_future();
  stream.async_next([&promise](std::optional<proto::ServerMessage> event) { promise.set_value(std::move(event)); });
  if (future.wait_for(10s) != std::future_status::ready) throw std::runtime_error("no completion within 10 s");
  return future.get();
}

int index_of(const std::optional<proto::ServerMessage>& event) {
  if (!event || !std::holds_alternative<proto::TokenEvent>(*event)) return -1;
  return std::get<proto::TokenEvent>(*event).index;
}

TEST(EventStreamTest, EventsPushedBeforeAnyWaitAreBufferedAndComeOutInOrderThenNullopt) {
  RunningContext ctx(1);
  EventStream stream(ctx.executor());
  auto sink = stream.sink();
  sink(token(0));
  sink(token(1));
  EXPECT_FALSE(stream.finished());
  sink(done());
  EXPECT_TRUE(stream.finished());

  EXPECT_EQ(index_of(next(stream)), 0);
  EXPECT_EQ(index_of(next(stream)), 1);
  auto last = next(stream);
  ASSERT_TRUE(last.has_value());
  EXPECT_TRUE(std::holds_alternative<proto::DoneEvent>(*last));
  EXPECT_FALSE(next(stream).has_value());
  EXPECT_FALSE(next(stream).has_value()) << "every wait after the end gets nullopt";
}

TEST(EventStreamTest, AWaitPendingBeforeThePushCompletesWithIt) {
  RunningContext ctx(1);
  EventStream stream(ctx.executor());
  std::promise<std::optional<proto::ServerMessage>> promise;
  auto future = promise.get_future();
  stream.async_next([&promise](std::optional<proto::ServerMessage> event) { promise.set_value(std::move(event)); });
  EXPECT_EQ(future.wait_for(0s), std::future_status::timeout);
  std::thread producer([sink = stream.sink()] { sink(token(7)); });
  producer.join();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(index_of(future.get()), 7);
}

TEST(EventStreamTest, AnErrorEventIsLastAndNothingAfterItIsDelivered) {
  RunningContext ctx(1);
  EventStream stream(ctx.executor());
  auto sink = stream.sink();
  proto::ErrorEvent error;
  error.request_id = "r";
  error.code = proto::ErrorCode::not_found;
  error.message = "no session";
  sink(error);
  sink(token(0));  // a producer bug: ignored
  auto first = next(stream);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(std::holds_alternative<proto::ErrorEvent>(*first));
  EXPECT_EQ(std::get<proto::ErrorEvent>(*first).code, proto::ErrorCode::not_found);
  EXPECT_FALSE(next(stream).has_value());
}

TEST(EventStreamTest, SessionOpenedIsNotTheLastEvent) {
  RunningContext ctx(1);
  EventStream stream(ctx.executor());
  auto sink = stream.sink();
  sink(proto::SessionOpened{"s"});
  EXPECT_FALSE(stream.finished());
  sink(token(0));
  sink(done());
  auto first = next(stream);
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(std::holds_alternative<proto::SessionOpened>(*first));
  EXPECT_EQ(index_of(next(stream)), 0);
  EXPECT_TRUE(next(stream).has_value());
  EXPECT_FALSE(next(stream).has_value());
}

TEST(EventStreamTest, ASecondConcurrentWaitThrows) {
  RunningContext ctx(1);
  EventStream stream(ctx.executor());
  std::promise<int> promise;
  auto future = promise.get_future();
  stream.async_next([&promise](std::optional<proto::ServerMessage> event) { promise.set_value(index_of(event)); });
  EXPECT_THROW(stream.async_next([](std::optional<proto::ServerMessage>) {}), std::logic_error);
  stream.sink()(token(3));  // the first wait is still served
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(future.get(), 3);
}

TEST(EventStreamTest, AnAbandonedProducerEndsTheStreamAfterWhatItHadPushed) {
  RunningContext ctx(1);
  EventStream stream(ctx.executor());
  {
    auto sink = stream.sink();
    auto copy = sink;
    copy(token(0));
    // A second sink() while the first lives feeds the same producer: its going does not end the stream.
    stream.sink()(token(1));
    EXPECT_FALSE(stream.finished());
  }
  EXPECT_TRUE(stream.finished());
  EXPECT_EQ(index_of(next(stream)), 0);
  EXPECT_EQ(index_of(next(stream)), 1);
  EXPECT_FALSE(next(stream).has_value());
}

TEST(EventStreamTest, AWaiterGetsNulloptWhenTheProducerGoesWithoutALastEvent) {
  RunningContext ctx(1);
  EventStream stream(ctx.executor());
  auto sink = std::make_unique<std::function<void(proto::ServerMessage)>>(stream.sink());
  std::promise<bool> promise;
  auto future = promise.get_future();
  stream.async_next([&promise](std::optional<proto::ServerMessage> event) { promise.set_value(event.has_value()); });
  sink.reset();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(future.get());
}

TEST(EventStreamTest, WorksWithUseFuture) {
  RunningContext ctx(1);
  EventStream stream(ctx.executor());
  auto sink = stream.sink();
  auto first = stream.async_next(asio::use_future);
  sink(token(0));
  sink(done());
  ASSERT_EQ(first.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(index_of(first.get()), 0);
  EXPECT_TRUE(stream.async_next(asio::use_future).get().has_value());
  EXPECT_FALSE(stream.async_next(asio::use_future).get().has_value());
}

TEST(EventStreamTest, ACoroutineReadsEveryEventInOrderWhileAnotherThreadProduces) {
  constexpr int kTokens = 2000;
  RunningContext ctx(2);
  EventStream stream(ctx.executor());
  auto consumed = asio::co_spawn(
      ctx.executor(),
      [&stream]() -> asio::awaitable<std::vector<int>> {
        std::vector<int> indices;
        while (auto event = co_await stream.async_next(asio::use_awaitable)) {
          if (std::holds_alternative<proto::DoneEvent>(*event)) {
            indices.push_back(-1);
          } else {
            indices.push_back(index_of(event));
          }
        }
        co_return indices;
      },
      asio::use_future);
  std::thread producer([sink = stream.sink()] {
    for (int i = 0; i < kTokens; ++i) sink(token(i));
    sink(done());
  });
  producer.join();
  ASSERT_EQ(consumed.wait_for(30s), std::future_status::ready);
  const auto indices = consumed.get();
  ASSERT_EQ(indices.size(), static_cast<std::size_t>(kTokens + 1));
  for (int i = 0; i < kTokens; ++i) ASSERT_EQ(indices[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(indices.back(), -1);
}

TEST(EventStreamTest, CompletionsRunOnTheHandlersExecutorElseOnTheFallback) {
  RunningContext fallback(1);
  RunningContext other(1);
  EventStream stream(fallback.executor());
  auto sink = stream.sink();
  sink(token(0));
  sink(token(1));

  std::promise<bool> on_fallback;
  stream.async_next([&](std::optional<proto::ServerMessage>) {
    on_fallback.set_value(fallback.io().get_executor().running_in_this_thread());
  });
  auto fallback_result = on_fallback.get_future();
  ASSERT_EQ(fallback_result.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(fallback_result.get());

  auto strand = asio::make_strand(other.executor());
  std::promise<bool> on_strand;
  stream.async_next(asio::bind_executor(strand, [&](std::optional<proto::ServerMessage>) {
    on_strand.set_value(strand.running_in_this_thread());
  }));
  auto strand_result = on_strand.get_future();
  ASSERT_EQ(strand_result.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(strand_result.get());
}

TEST(EventStreamTest, AWaitingCoroutineKeepsItsIoContextRunning) {
  // io.run() with no other work: without the wait counting as work, run() would return as soon as the
  // coroutine suspends and the event pushed later would never be handled.
  asio::io_context io;
  EventStream stream(io.get_executor());
  bool got_token = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto event = co_await stream.async_next(asio::use_awaitable);
        got_token = index_of(event) == 5;
      },
      [](std::exception_ptr) {});
  std::thread producer([sink = stream.sink()] {
    std::this_thread::sleep_for(50ms);  // lets run() find the coroutine suspended
    sink(token(5));
  });
  io.run();
  producer.join();
  EXPECT_TRUE(got_token);
}

}  // namespace
}  // namespace loom::actors

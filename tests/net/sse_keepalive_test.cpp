// TimedEventWait (sse_keepalive.hpp) without a gateway: waits that time out lose nothing. Events pushed
// from another thread, some after one or more timeouts, some all at once, come out each once and in order,
// then the end; a wait without a deadline simply waits.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>

#include "sse_keepalive.hpp"

namespace loom::net::test {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;

proto::ServerMessage token(int index) {
  proto::TokenEvent event;
  event.request_id = "r";
  event.index = index;
  return event;
}

TEST(SseKeepAlive, TimedOutWaitsLoseNoEventAndKeepTheOrder) {
  asio::io_context io;
  auto strand = asio::make_strand(io);
  actors::EventStream events(strand);
  auto sink = std::make_unique<std::function<void(proto::ServerMessage)>>(events.sink());

  // What the consumer saw: "timeout", "token N", "end".
  std::vector<std::string> seen;
  auto consumer = [&]() -> asio::awaitable<void> {
    TimedEventWait waiter(events);
    for (;;) {
      auto result = co_await waiter.next(milliseconds(5));
      if (result.timed_out) {
        if (seen.empty() || seen.back() != "timeout") seen.push_back("timeout");
        continue;
      }
      if (!result.event) break;
      seen.push_back("token " + std::to_string(std::get<proto::TokenEvent>(*result.event).index));
    }
    seen.push_back("end");
  };
  auto done = asio::co_spawn(strand, consumer(), asio::use_future);
  std::thread runner([&io] { io.run(); });

  std::this_thread::sleep_for(milliseconds(50));  // several timeouts with nothing to take
  (*sink)(token(0));
  std::this_thread::sleep_for(milliseconds(30));
  for (int i = 1; i <= 3; ++i) (*sink)(token(i));  // at once: taken one per wait
  std::this_thread::sleep_for(milliseconds(30));
  sink.reset();  // the producer is gone: the stream ends
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  runner.join();

  // The first wait had 50 ms of nothing; later timeouts depend on the threads' timing, so only the events'
  // order is checked between them.
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front(), "timeout");
  std::vector<std::string> events_seen;
  for (const auto& entry : seen) {
    if (entry != "timeout") events_seen.push_back(entry);
  }
  const std::vector<std::string> expected = {"token 0", "token 1", "token 2", "token 3", "end"};
  EXPECT_EQ(events_seen, expected);
  EXPECT_GE(seen.size(), expected.size() + 2) << "no timeout between the events";
}

TEST(SseKeepAlive, WithoutADeadlineTheWaitNeverTimesOut) {
  asio::io_context io;
  auto strand = asio::make_strand(io);
  actors::EventStream events(strand);
  auto sink = events.sink();
  bool timed_out = false;
  int index = -1;
  auto consumer = [&]() -> asio::awaitable<void> {
    TimedEventWait waiter(events);
    auto result = co_await waiter.next(milliseconds(0));
    timed_out = result.timed_out;
    if (result.event) index = std::get<proto::TokenEvent>(*result.event).index;
  };
  auto done = asio::co_spawn(strand, consumer(), asio::use_future);
  std::thread runner([&io] { io.run(); });
  std::this_thread::sleep_for(milliseconds(40));
  EXPECT_NE(done.wait_for(milliseconds(0)), std::future_status::ready);
  sink(token(7));
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  runner.join();
  EXPECT_FALSE(timed_out);
  EXPECT_EQ(index, 7);
}

}  // namespace
}  // namespace loom::net::test

// Message handling: per-sender ordering, concurrent senders without locks, metrics, dead letters.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <variant>
#include <vector>

#include <boost/asio/use_future.hpp>

#include "loom/actors/runtime/actor.hpp"
#include "test_support.hpp"

using namespace std::chrono_literals;
using loom::actors::Actor;
using loom::actors::Reply;
using loom::actors::spawn;
using loom::actors::testing::eventually;
using loom::actors::testing::RunningContext;

namespace {

struct Append {
  int sender;
  int sequence;
};
struct Snapshot {
  Reply<std::vector<std::vector<int>>> reply;
};

// Records, per sender, the sequence numbers in the order they arrived. Plain vectors, no lock: only
// the strand touches them.
class Recorder : public Actor<Recorder, std::variant<Append, Snapshot>> {
 public:
  explicit Recorder(int senders) : seen_(senders) {}
  void on(Append m) { seen_[m.sender].push_back(m.sequence); }
  void on(Snapshot m) { m.reply(seen_); }

 private:
  std::vector<std::vector<int>> seen_;
};

struct Add {
  long value;
};
struct Total {
  Reply<long> reply;
};

// A deliberately non-atomic read-modify-write: correct only if handlers never overlap.
class Accumulator : public Actor<Accumulator, std::variant<Add, Total>> {
 public:
  void on(Add m) {
    const long before = total_;
    if (m.value % 64 == 0) std::this_thread::yield();  // widen any race window
    total_ = before + m.value;
  }
  void on(Total m) { m.reply(total_); }

 private:
  long total_ = 0;
};

template <class Address, class Request>
auto ask_sync(const Address& address, Request request) {
  return address.ask(std::move(request), 10s, boost::asio::use_future).get();
}

}  // namespace

TEST(Actor, KeepsPerSenderOrder) {
  RunningContext ctx(4);
  constexpr int kSenders = 4, kPerSender = 5000;
  auto recorder = spawn<Recorder>(ctx.executor(), {.name = "recorder"}, kSenders);
  auto address = recorder.address();

  std::vector<std::thread> senders;
  for (int s = 0; s < kSenders; ++s) {
    senders.emplace_back([&, s] {
      for (int i = 0; i < kPerSender; ++i) ASSERT_TRUE(address.tell(Append{s, i}));
    });
  }
  for (auto& t : senders) t.join();

  const auto seen = ask_sync(address, Snapshot{});
  ASSERT_EQ(seen.size(), static_cast<size_t>(kSenders));
  for (int s = 0; s < kSenders; ++s) {
    ASSERT_EQ(seen[s].size(), static_cast<size_t>(kPerSender)) << "sender " << s;
    for (int i = 0; i < kPerSender; ++i) ASSERT_EQ(seen[s][i], i) << "sender " << s << " position " << i;
  }
}

TEST(Actor, ManyThreadsTellingOneActorKeepItsStateConsistent) {
  RunningContext ctx(4);
  auto accumulator = spawn<Accumulator>(ctx.executor(), {.name = "accumulator"});
  constexpr int kThreads = 8, kPerThread = 20000;

  std::vector<std::thread> senders;
  for (int t = 0; t < kThreads; ++t) {
    senders.emplace_back([&, t] {
      for (int i = 1; i <= kPerThread; ++i) accumulator.tell(Add{i + t});
    });
  }
  for (auto& t : senders) t.join();

  long expected = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 1; i <= kPerThread; ++i) expected += i + t;
  }
  EXPECT_EQ(ask_sync(accumulator.address(), Total{}), expected);

  const uint64_t all = static_cast<uint64_t>(kThreads) * kPerThread + 1;
  EXPECT_TRUE(eventually([&] { return accumulator.metrics().handled == all; }));
  const auto metrics = accumulator.metrics();
  EXPECT_EQ(metrics.dropped, 0u);
  EXPECT_EQ(metrics.failed, 0u);
}

TEST(Actor, MetricsCountHandledQueueHighWaterAndHandlerTime) {
  RunningContext ctx(1);
  auto accumulator = spawn<Accumulator>(ctx.executor(), {.name = "metered"});
  // Block the only io thread so that messages pile up in the mailbox.
  std::promise<void> release;
  auto gate = release.get_future().share();
  boost::asio::post(ctx.io(), [gate] { gate.wait(); });
  for (int i = 0; i < 100; ++i) accumulator.tell(Add{1});
  EXPECT_EQ(accumulator.metrics().queue_depth, 100u);
  release.set_value();

  EXPECT_EQ(ask_sync(accumulator.address(), Total{}), 100);
  // The reply can arrive before the handler that sent it has been counted.
  ASSERT_TRUE(eventually([&] { return accumulator.metrics().handled == 101; }));
  const auto metrics = accumulator.metrics();
  EXPECT_EQ(metrics.queue_depth, 0u);
  EXPECT_GE(metrics.queue_depth_high_water, 100u);
  EXPECT_GT(metrics.handler_time_total.count(), 0);
  EXPECT_GE(metrics.handler_time_total, metrics.handler_time_max);
  EXPECT_EQ(accumulator.name(), "metered");
}

TEST(Actor, DefaultNameIsTheTypeName) {
  RunningContext ctx(1);
  auto accumulator = spawn<Accumulator>(ctx.executor(), {});
  EXPECT_NE(accumulator.name().find("Accumulator"), std::string::npos) << accumulator.name();
}

TEST(Actor, TellingAStoppedOrDestroyedActorIsACountedNoOp) {
  RunningContext ctx(2);
  loom::actors::Address<std::variant<Add, Total>> address;
  const auto dead_before = loom::actors::dead_letter_count();
  EXPECT_FALSE(address.tell(Add{1})) << "an empty address accepts nothing";
  {
    auto accumulator = spawn<Accumulator>(ctx.executor(), {.name = "short-lived"});
    address = accumulator.address();
    EXPECT_TRUE(address.tell(Add{1}));
    accumulator.async_stop(boost::asio::use_future).get();
    EXPECT_EQ(accumulator.state(), loom::actors::ActorState::stopped);
    EXPECT_FALSE(address.tell(Add{2}));
    EXPECT_FALSE(address.alive());
    EXPECT_EQ(accumulator.metrics().dropped, 1u);
  }
  // The handle is gone: the address must not dangle.
  EXPECT_TRUE(eventually([&] { return !address.tell(Add{3}); }));
  EXPECT_GE(loom::actors::dead_letter_count(), dead_before + 3);
}

TEST(Actor, AddressesCompareByActor) {
  RunningContext ctx(1);
  auto a = spawn<Accumulator>(ctx.executor(), {});
  auto b = spawn<Accumulator>(ctx.executor(), {});
  EXPECT_EQ(a.address(), a.address());
  EXPECT_FALSE(a.address() == b.address());
}

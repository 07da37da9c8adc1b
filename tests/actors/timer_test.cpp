// Timers bound to the actor's strand: one-shot, periodic, cancellation, and cancellation at stop.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <variant>

#include <boost/asio/use_future.hpp>

#include "loom/actors/runtime/actor.hpp"
#include "test_support.hpp"

using namespace std::chrono_literals;
using loom::actors::Actor;
using loom::actors::Reply;
using loom::actors::spawn;
using loom::actors::TimerId;
using loom::actors::testing::eventually;
using loom::actors::testing::RunningContext;
namespace asio = boost::asio;

namespace {

struct Observed {
  std::atomic<int> one_shot{0};
  std::atomic<int> ticks{0};
  std::atomic<int> cancelled_fired{0};
  std::atomic<int> off_strand{0};
  std::atomic<int> after_stop{0};
  std::atomic<bool> stopped{false};
};

struct StartOneShot {
  std::chrono::milliseconds after;
};
struct StartTicking {
  std::chrono::milliseconds period;
  int stop_after;  // the periodic callback cancels itself after this many ticks (0: never)
};
struct StartAndCancel {
  Reply<bool> reply;  // whether cancel_timer reported success
};

class Clockwork : public Actor<Clockwork, std::variant<StartOneShot, StartTicking, StartAndCancel>> {
 public:
  explicit Clockwork(std::shared_ptr<Observed> seen) : seen_(std::move(seen)) {}

  void on(StartOneShot m) {
    start_timer(m.after, [this] {
      check_strand();
      seen_->one_shot++;
    });
  }
  void on(StartTicking m) {
    ticker_ = start_periodic(m.period, [this, limit = m.stop_after] {
      check_strand();
      if (seen_->stopped) seen_->after_stop++;
      if (++seen_->ticks == limit) cancel_timer(ticker_);
    });
  }
  void on(StartAndCancel m) {
    const TimerId id = start_timer(20ms, [this] { seen_->cancelled_fired++; });
    m.reply(cancel_timer(id) && !cancel_timer(id));
  }
  void on_stop() { seen_->stopped = true; }

 private:
  void check_strand() {
    if (!strand().running_in_this_thread()) seen_->off_strand++;
  }
  std::shared_ptr<Observed> seen_;
  TimerId ticker_ = 0;
};

}  // namespace

TEST(Timers, OneShotFiresOnceOnTheStrand) {
  RunningContext ctx(4);
  auto seen = std::make_shared<Observed>();
  auto actor = spawn<Clockwork>(ctx.executor(), {}, seen);
  const auto started = std::chrono::steady_clock::now();
  actor.tell(StartOneShot{30ms});
  ASSERT_TRUE(eventually([&] { return seen->one_shot == 1; }));
  EXPECT_GE(std::chrono::steady_clock::now() - started, 30ms);
  std::this_thread::sleep_for(60ms);
  EXPECT_EQ(seen->one_shot, 1);
  EXPECT_EQ(seen->off_strand, 0);
}

TEST(Timers, PeriodicTicksUntilItCancelsItself) {
  RunningContext ctx(4);
  auto seen = std::make_shared<Observed>();
  auto actor = spawn<Clockwork>(ctx.executor(), {}, seen);
  actor.tell(StartTicking{5ms, 5});
  ASSERT_TRUE(eventually([&] { return seen->ticks == 5; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(seen->ticks, 5) << "a cancelled periodic timer must not tick again";
  EXPECT_EQ(seen->off_strand, 0);
}

TEST(Timers, CancelledTimerNeverFires) {
  RunningContext ctx(2);
  auto seen = std::make_shared<Observed>();
  auto actor = spawn<Clockwork>(ctx.executor(), {}, seen);
  EXPECT_TRUE(actor.address().ask(StartAndCancel{}, 5s, asio::use_future).get())
      << "first cancel succeeds, the second reports the timer is gone";
  std::this_thread::sleep_for(60ms);
  EXPECT_EQ(seen->cancelled_fired, 0);
}

TEST(Timers, StoppingTheActorCancelsItsTimers) {
  RunningContext ctx(2);
  auto seen = std::make_shared<Observed>();
  auto actor = spawn<Clockwork>(ctx.executor(), {}, seen);
  actor.tell(StartTicking{2ms, 0});
  actor.tell(StartOneShot{80ms});
  ASSERT_TRUE(eventually([&] { return seen->ticks >= 3; }));
  actor.async_stop(asio::use_future).get();
  const int ticks_at_stop = seen->ticks;
  std::this_thread::sleep_for(120ms);
  EXPECT_EQ(seen->ticks, ticks_at_stop);
  EXPECT_EQ(seen->after_stop, 0);
  EXPECT_EQ(seen->one_shot, 0) << "the one-shot timer was pending at stop and must not fire";
}

TEST(Timers, ReleasingTheLastHandleCancelsTimers) {
  RunningContext ctx(2);
  auto seen = std::make_shared<Observed>();
  {
    auto actor = spawn<Clockwork>(ctx.executor(), {}, seen);
    actor.tell(StartTicking{2ms, 0});
    ASSERT_TRUE(eventually([&] { return seen->ticks >= 2; }));
  }
  ASSERT_TRUE(eventually([&] { return seen->stopped.load(); }));
  const int ticks_at_stop = seen->ticks;
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(seen->ticks, ticks_at_stop);
}

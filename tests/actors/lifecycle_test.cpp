// Start and stop: hooks, graceful draining of accepted messages, refusal after stop.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <string>
#include <variant>
#include <vector>

#include <boost/asio/use_future.hpp>

#include "loom/actors/runtime/actor.hpp"
#include "test_support.hpp"

using namespace std::chrono_literals;
using loom::actors::Actor;
using loom::actors::ActorState;
using loom::actors::Reply;
using loom::actors::spawn;
using loom::actors::testing::eventually;
using loom::actors::testing::RunningContext;
namespace asio = boost::asio;

namespace {

struct Journal {
  std::vector<std::string> events;  // written on the actor's strand, read after it has stopped
  std::atomic<int> constructed{0};
  std::atomic<int> destroyed{0};
  std::atomic<bool> had_self{false};
};

struct Note {
  std::string text;
};
struct StopYourself {};

class Diarist : public Actor<Diarist, std::variant<Note, StopYourself>> {
 public:
  explicit Diarist(std::shared_ptr<Journal> journal) : journal_(std::move(journal)) { journal_->constructed++; }
  ~Diarist() { journal_->destroyed++; }
  void on_start() {
    journal_->events.push_back("start");
    journal_->had_self = !(self() == address_type{});
  }
  void on(Note m) { journal_->events.push_back(m.text); }
  void on(StopYourself) {
    journal_->events.push_back("stopping");
    stop();
  }
  void on_stop() { journal_->events.push_back("stop"); }

 private:
  std::shared_ptr<Journal> journal_;
};

}  // namespace

TEST(Lifecycle, StartRunsBeforeMessagesAndStopAfterAcceptedOnes) {
  RunningContext ctx(1);
  auto journal = std::make_shared<Journal>();
  auto actor = spawn<Diarist>(ctx.executor(), {}, journal);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(actor.tell(Note{std::to_string(i)}));
  actor.async_stop(asio::use_future).get();
  EXPECT_FALSE(actor.tell(Note{"too late"}));

  ASSERT_EQ(journal->events.size(), 102u);
  EXPECT_EQ(journal->events.front(), "start");
  EXPECT_TRUE(journal->had_self) << "self() is usable from on_start";
  for (int i = 0; i < 100; ++i) EXPECT_EQ(journal->events[i + 1], std::to_string(i));
  EXPECT_EQ(journal->events.back(), "stop");
  EXPECT_EQ(actor.state(), ActorState::stopped);
  EXPECT_EQ(journal->destroyed, 1) << "the actor's object is destroyed at stop";
  EXPECT_EQ(actor.metrics().dropped, 1u);
}

TEST(Lifecycle, StopIsIdempotentAndRefusesAtOnce) {
  RunningContext ctx(2);
  auto journal = std::make_shared<Journal>();
  auto actor = spawn<Diarist>(ctx.executor(), {}, journal);
  actor.stop();
  EXPECT_NE(actor.state(), ActorState::running);
  EXPECT_FALSE(actor.tell(Note{"refused"}));
  actor.stop();
  actor.async_stop(asio::use_future).get();
  actor.async_stop(asio::use_future).get();  // completing for an already stopped actor
  EXPECT_EQ(std::count(journal->events.begin(), journal->events.end(), "stop"), 1);
}

TEST(Lifecycle, AnActorCanStopItself) {
  RunningContext ctx(2);
  auto journal = std::make_shared<Journal>();
  auto actor = spawn<Diarist>(ctx.executor(), {}, journal);
  actor.tell(StopYourself{});
  ASSERT_TRUE(eventually([&] { return actor.state() == ActorState::stopped; }));
  ASSERT_EQ(journal->events.size(), 3u);
  EXPECT_EQ(journal->events[1], "stopping");
  EXPECT_EQ(journal->events[2], "stop");
}

TEST(Lifecycle, ReleasingTheLastHandleStopsTheActor) {
  RunningContext ctx(2);
  auto journal = std::make_shared<Journal>();
  loom::actors::Address<Diarist::protocol_type> address;
  {
    auto actor = spawn<Diarist>(ctx.executor(), {}, journal);
    auto copy = actor;
    address = actor.address();
    ASSERT_TRUE(address.tell(Note{"hello"}));
  }
  ASSERT_TRUE(eventually([&] { return journal->destroyed == 1; }));
  EXPECT_EQ(journal->events.back(), "stop");
  EXPECT_FALSE(address.tell(Note{"anyone?"}));
}

TEST(Lifecycle, StoppingWhileMessagesAreQueuedHandlesThemAll) {
  RunningContext ctx(1);
  auto journal = std::make_shared<Journal>();
  auto actor = spawn<Diarist>(ctx.executor(), {}, journal);
  std::promise<void> release;
  auto gate = release.get_future().share();
  boost::asio::post(ctx.io(), [gate] { gate.wait(); });  // hold the only io thread
  for (int i = 0; i < 50; ++i) actor.tell(Note{"queued"});
  auto stopped = actor.async_stop(asio::use_future);
  release.set_value();
  stopped.get();
  EXPECT_EQ(std::count(journal->events.begin(), journal->events.end(), "queued"), 50);
  EXPECT_EQ(actor.metrics().handled, 50u);
}

namespace {

struct Park {
  Reply<int> reply;
};

// Holds unanswered requests and a periodic timer: everything that could leak if the runtime kept a
// reference cycle between an actor, its timers and its pending replies.
class Hoarder : public Actor<Hoarder, std::variant<Park>> {
 public:
  explicit Hoarder(std::shared_ptr<Journal> journal) : journal_(std::move(journal)) { journal_->constructed++; }
  ~Hoarder() { journal_->destroyed++; }
  void on_start() {
    start_periodic(1ms, [] {});
    start_timer(std::chrono::hours(1), [] {});
  }
  void on(Park m) { parked_.push_back(std::move(m.reply)); }

 private:
  std::shared_ptr<Journal> journal_;
  std::vector<Reply<int>> parked_;
};

}  // namespace

// Under AddressSanitizer (CI builds this suite with LOOM_SANITIZE=address) a leaked actor, timer or ask
// state fails the run at exit; in every build the constructed and destroyed counts must match.
TEST(Lifecycle, ActorsWithTimersAndPendingAsksAreFreedWhenReleased) {
  RunningContext ctx(2);
  auto journal = std::make_shared<Journal>();
  std::vector<std::future<loom::actors::error_code>> answers;
  for (int i = 0; i < 200; ++i) {
    auto actor = spawn<Hoarder>(ctx.executor(), {}, journal);
    for (int k = 0; k < 3; ++k) {
      answers.push_back(loom::actors::testing::ask_error(actor.address(), Park{}, std::chrono::hours(1)));
    }
  }  // each handle is released here: the actor stops, dropping its parked replies
  ASSERT_TRUE(eventually([&] { return journal->destroyed == 200; }));
  EXPECT_EQ(journal->constructed, 200);
  for (auto& answer : answers) {
    ASSERT_EQ(answer.wait_for(std::chrono::seconds(5)), std::future_status::ready)
        << "a reply dropped by a stopped actor must answer at once, not after its hour-long timeout";
    EXPECT_EQ(answer.get(), loom::actors::ActorError::no_reply);
  }
}

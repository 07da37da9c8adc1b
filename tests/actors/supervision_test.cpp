// Supervision: a throwing handler is caught, reported, and the actor restarted or stopped by policy.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <variant>

#include <boost/asio/use_future.hpp>

#include "loom/actors/runtime/supervisor.hpp"
#include "test_support.hpp"

using namespace std::chrono_literals;
using loom::actors::Actor;
using loom::actors::ActorError;
using loom::actors::ActorState;
using loom::actors::ChildFailed;
using loom::actors::GetFailures;
using loom::actors::Reply;
using loom::actors::spawn;
using loom::actors::supervised_by;
using loom::actors::Supervisor;
using loom::actors::SupervisionPolicy;
using loom::actors::testing::eventually;
using loom::actors::testing::RunningContext;
namespace asio = boost::asio;

namespace {

struct Bump {};
struct Explode {};
struct ExplodeLater {};
struct Count {
  Reply<int> reply;
};
struct Incarnations {
  std::atomic<int> started{0};
};

class Fragile : public Actor<Fragile, std::variant<Bump, Explode, ExplodeLater, Count>> {
 public:
  explicit Fragile(std::shared_ptr<Incarnations> incarnations) : incarnations_(std::move(incarnations)) {}
  void on_start() { incarnations_->started++; }
  void on(Bump) { ++count_; }
  void on(Explode) { throw std::runtime_error("kaboom"); }
  void on(ExplodeLater) {
    start_timer(1ms, [] { throw std::logic_error("timer kaboom"); });
  }
  void on(Count m) { m.reply(count_); }

 private:
  std::shared_ptr<Incarnations> incarnations_;
  int count_ = 0;
};

std::vector<ChildFailed> failures_of(const loom::actors::ActorHandle<loom::actors::SupervisorProtocol>& supervisor) {
  return supervisor.address().ask(GetFailures{}, 5s, asio::use_future).get();
}

}  // namespace

TEST(Supervision, RestartAfterThrowingHandlerKeepsTheAddressAndResetsState) {
  RunningContext ctx(2);
  auto supervisor = spawn<Supervisor>(ctx.executor(), {.name = "root"});
  auto incarnations = std::make_shared<Incarnations>();
  auto fragile = spawn<Fragile>(ctx.executor(),
                                {.name = "fragile", .supervisor = supervised_by(supervisor.address())},
                                incarnations);
  auto address = fragile.address();
  address.tell(Bump{});
  address.tell(Bump{});
  address.tell(Explode{});
  address.tell(Bump{});

  EXPECT_EQ(address.ask(Count{}, 5s, asio::use_future).get(), 1) << "a restarted actor starts from fresh state";
  EXPECT_EQ(incarnations->started, 2);
  EXPECT_EQ(fragile.state(), ActorState::running);
  const auto metrics = fragile.metrics();
  EXPECT_EQ(metrics.failed, 1u);
  EXPECT_EQ(metrics.restarts, 1u);

  ASSERT_TRUE(eventually([&] { return failures_of(supervisor).size() == 1; }));
  const auto failure = failures_of(supervisor).front();
  EXPECT_EQ(failure.actor, "fragile");
  EXPECT_NE(failure.message_type.find("Explode"), std::string::npos) << failure.message_type;
  EXPECT_EQ(failure.error, "kaboom");
  EXPECT_TRUE(failure.restarted);
  EXPECT_EQ(failure.restarts, 1u);
}

TEST(Supervision, ThrowingTimerCallbackIsSupervisedToo) {
  RunningContext ctx(2);
  auto supervisor = spawn<Supervisor>(ctx.executor(), {});
  auto incarnations = std::make_shared<Incarnations>();
  auto fragile = spawn<Fragile>(ctx.executor(), {.supervisor = supervised_by(supervisor.address())}, incarnations);
  fragile.tell(ExplodeLater{});
  ASSERT_TRUE(eventually([&] { return failures_of(supervisor).size() == 1; }));
  EXPECT_EQ(failures_of(supervisor).front().message_type, "timer");
  EXPECT_EQ(failures_of(supervisor).front().error, "timer kaboom");
  EXPECT_EQ(incarnations->started, 2);
}

TEST(Supervision, StopPolicyStopsTheActorAndFailsQueuedRequests) {
  RunningContext ctx(2);
  std::promise<ChildFailed> escalated;
  auto supervisor = spawn<Supervisor>(ctx.executor(), {},
                                      Supervisor::OnChildStopped([&](const ChildFailed& f) { escalated.set_value(f); }));
  auto incarnations = std::make_shared<Incarnations>();
  auto fragile = spawn<Fragile>(ctx.executor(),
                                {.name = "brittle",
                                 .policy = {.strategy = SupervisionPolicy::Strategy::stop},
                                 .supervisor = supervised_by(supervisor.address())},
                                incarnations);
  fragile.tell(Explode{});
  auto after = loom::actors::testing::ask_error(fragile.address(), Count{}, 5s);
  ASSERT_EQ(after.wait_for(10s), std::future_status::ready) << "a request queued behind the fatal failure must fail, not hang";
  EXPECT_EQ(after.get(), ActorError::no_reply);
  EXPECT_EQ(fragile.state(), ActorState::stopped);
  auto report = escalated.get_future();
  ASSERT_EQ(report.wait_for(5s), std::future_status::ready);
  const auto failure = report.get();
  EXPECT_EQ(failure.actor, "brittle");
  EXPECT_FALSE(failure.restarted);
}

TEST(Supervision, RestartBudgetExhaustedStopsTheActor) {
  RunningContext ctx(2);
  auto supervisor = spawn<Supervisor>(ctx.executor(), {});
  auto incarnations = std::make_shared<Incarnations>();
  auto fragile = spawn<Fragile>(ctx.executor(),
                                {.policy = {.max_restarts = 2, .window = std::chrono::minutes(1)},
                                 .supervisor = supervised_by(supervisor.address())},
                                incarnations);
  for (int i = 0; i < 3; ++i) fragile.tell(Explode{});
  ASSERT_TRUE(eventually([&] { return fragile.state() == ActorState::stopped; }));
  EXPECT_EQ(incarnations->started, 3) << "the first incarnation plus two restarts";
  ASSERT_TRUE(eventually([&] { return failures_of(supervisor).size() == 3; }));
  const auto failures = failures_of(supervisor);
  EXPECT_TRUE(failures[0].restarted);
  EXPECT_TRUE(failures[1].restarted);
  EXPECT_FALSE(failures[2].restarted);
  EXPECT_EQ(fragile.metrics().restarts, 2u);
}

TEST(Supervision, WithoutSupervisorFailuresAreStillHandledByPolicy) {
  RunningContext ctx(2);
  auto incarnations = std::make_shared<Incarnations>();
  auto fragile = spawn<Fragile>(ctx.executor(), {}, incarnations);
  fragile.tell(Explode{});
  fragile.tell(Bump{});
  EXPECT_EQ(fragile.address().ask(Count{}, 5s, asio::use_future).get(), 1);
  EXPECT_EQ(incarnations->started, 2);
}

namespace {

struct Ping {
  Reply<int> reply;
};
struct AskAndThrow {};

class Pinger : public Actor<Pinger, std::variant<Ping>> {
 public:
  void on(Ping m) { m.reply(1); }
};

// Its ask callback throws: that is a failure of this actor like any handler's.
class Asker : public Actor<Asker, std::variant<AskAndThrow, Count>> {
 public:
  Asker(loom::actors::Address<Pinger::protocol_type> pinger, std::shared_ptr<Incarnations> incarnations)
      : pinger_(std::move(pinger)), incarnations_(std::move(incarnations)) {}
  void on_start() { incarnations_->started++; }
  void on(AskAndThrow) {
    ask(pinger_, Ping{}, 5s, [](loom::actors::error_code, int) { throw std::runtime_error("callback kaboom"); });
  }
  void on(Count m) { m.reply(incarnations_->started); }

 private:
  loom::actors::Address<Pinger::protocol_type> pinger_;
  std::shared_ptr<Incarnations> incarnations_;
};

}  // namespace

TEST(Supervision, ThrowingAskCallbackIsSupervised) {
  RunningContext ctx(2);
  auto supervisor = spawn<Supervisor>(ctx.executor(), {});
  auto pinger = spawn<Pinger>(ctx.executor(), {});
  auto incarnations = std::make_shared<Incarnations>();
  auto asker = spawn<Asker>(ctx.executor(), {.supervisor = supervised_by(supervisor.address())}, pinger.address(),
                            incarnations);
  asker.tell(AskAndThrow{});
  ASSERT_TRUE(eventually([&] { return failures_of(supervisor).size() == 1; }));
  EXPECT_EQ(failures_of(supervisor).front().error, "callback kaboom");
  EXPECT_NE(failures_of(supervisor).front().message_type.find("Ping"), std::string::npos);
  EXPECT_EQ(asker.address().ask(Count{}, 5s, asio::use_future).get(), 2) << "restarted once";
}

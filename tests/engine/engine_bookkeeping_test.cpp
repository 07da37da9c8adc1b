// The engine's per-request bookkeeping under a long run: every map, queue and set the engine's actors keep
// per request or per session (EngineStats::bookkeeping_entries) is back at its idle value after a hundred
// thousand small requests, so memory does not grow with the number of requests served. The requests run
// on a ScriptedBackend (no model computed), mixed: stand-alone ones (each its own session and fairness
// key), some cancelled at once, some in a session opened for them and closed after.
//
// Count: LOOM_BOOKKEEPING_REQUESTS when set, else 100,000, or 10,000 under ASan or TSan (the same paths,
// run fewer times: a sanitized request costs ten times as much). A structure that gains an entry per
// request shows after the first few anyway.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/use_future.hpp>

#include "scripted_engine.hpp"

namespace loom::actors {
namespace {

using namespace std::chrono_literals;
using namespace loom::actors::testing;

std::size_t request_count() {
  if (const char* text = std::getenv("LOOM_BOOKKEEPING_REQUESTS")) return std::strtoull(text, nullptr, 10);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 10'000;
#else
  return 100'000;
#endif
}

// Keeps `window` requests in flight until `total` have ended; the next one starts from the handler of the
// one that ended. Counts the last events, so that each request is seen to get exactly one.
class Driver {
 public:
  Driver(Engine& engine, std::size_t total, std::size_t window)
      : engine_(engine), total_(total), window_(window), last_events_(total) {}

  void start() {
    for (std::size_t i = 0; i < window_ && i < total_; ++i) launch(next_.fetch_add(1));
  }
  bool finished() const { return ended_.load() == total_; }
  std::size_t ended() const { return ended_.load(); }
  std::size_t errors() const { return errors_.load(); }
  std::size_t requests_without_exactly_one_last_event() const {
    std::size_t wrong = 0;
    for (const auto& n : last_events_) wrong += n.load() != 1;
    return wrong;
  }

 private:
  void launch(std::size_t i) {
    if (i >= total_) return;
    const std::string id = "r" + std::to_string(i);
    if (i % 100 == 7) {
      // In a session of its own, opened for it and closed once it is done.
      proto::SessionOpen open;
      open.session_id = "s" + std::to_string(i);
      engine_.async_open_session(open, [this, i, id](error_code ec, proto::ServerMessage opened) {
        if (ec || !std::holds_alternative<proto::SessionOpened>(opened)) {
          ended(i, true);
          return;
        }
        proto::GenerateRequest request = small_request(id, 1, "a");
        request.session_id = "s" + std::to_string(i);
        engine_.generate(std::move(request), handler(i, "s" + std::to_string(i)));
      });
      return;
    }
    engine_.generate(small_request(id, 1, "a"), handler(i, {}));
    if (i % 50 == 3) engine_.cancel(id);  // cancelled while waiting, running, or already done: all fine
  }

  Engine::EventHandler handler(std::size_t i, std::string session) {
    return [this, i, session = std::move(session)](proto::ServerMessage message) {
      const bool error = std::holds_alternative<proto::ErrorEvent>(message);
      if (!error && !std::holds_alternative<proto::DoneEvent>(message)) return;
      if (!session.empty()) engine_.close_session(session);
      ended(i, error);
    };
  }

  void ended(std::size_t i, bool error) {
    ++last_events_[i];
    if (error) ++errors_;
    ++ended_;
    launch(next_.fetch_add(1));
  }

  Engine& engine_;
  const std::size_t total_;
  const std::size_t window_;
  std::vector<std::atomic<int>> last_events_;
  std::atomic<std::size_t> next_{0};
  std::atomic<std::size_t> ended_{0};
  std::atomic<std::size_t> errors_{0};
};

TEST(EngineBookkeeping, EveryPerRequestStructureIsBackToIdleAfterAHundredThousandRequests) {
  REQUIRE_SHARED_FILE(compute::testing::shared_path(kScriptedModel));
  auto script = std::make_shared<BackendScript>();
  script->keep_step_log(false);
  Engine engine(scripted_config(script));
  ASSERT_TRUE(engine.async_load(boost::asio::use_future).get().loaded());
  proto::SessionOpen open;
  open.session_id = "kept-open";  // an open session is part of the idle state
  const proto::ServerMessage opened = engine.async_open_session(open, boost::asio::use_future).get();
  ASSERT_TRUE(std::holds_alternative<proto::SessionOpened>(opened));

  const std::vector<BookkeepingEntry> idle = stats_of(engine).bookkeeping_entries();
  ASSERT_FALSE(idle.empty());
  for (const auto& entry : idle) {
    if (entry.map == "engine.sessions" || entry.map == "engine.named_sessions") {
      EXPECT_EQ(entry.entries, 1u) << entry.map;
    } else {
      EXPECT_EQ(entry.entries, 0u) << entry.map;
    }
  }

  const std::size_t total = request_count();
  Driver driver(engine, total, 128);
  driver.start();
  ASSERT_TRUE(eventually([&] { return driver.finished(); }, 600s)) << driver.ended() << " of " << total << " ended";
  EXPECT_EQ(driver.requests_without_exactly_one_last_event(), 0u);
  EXPECT_EQ(driver.errors(), 0u) << "none was refused (the window stays under max_waiting)";

  expect_bookkeeping_back_to(engine, idle);
  const EngineStats after = stats_of(engine);
  EXPECT_EQ(after.cache.cache.used_blocks, 0u);
  EXPECT_EQ(after.active_requests, 0u);
  EXPECT_EQ(after.requests_completed, total);
  expect_backend_holds_nothing(*script);

  // Still serving.
  Outcomes outcomes;
  engine.generate(small_request("after", 3), outcomes.handler("after"));
  ASSERT_TRUE(eventually([&] { return outcomes.over({"after"}); }, 30s));
  ASSERT_TRUE(outcomes.get("after").done);
  EXPECT_EQ(outcomes.get("after").done->finish_reason, proto::FinishReason::length);
}

}  // namespace
}  // namespace loom::actors

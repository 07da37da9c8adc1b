// Overload at the engine: with the waiting queue full (EngineConfig::scheduler.max_waiting), a new request
// is refused with `overloaded` at once, and the requests already admitted keep their pace. Steps are
// counted, never timed: the backend holds every step at a gate, so a refusal that arrives while a step is
// held there came without waiting for any step, and each held step's batch shows who got a token in it.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/use_future.hpp>

#include "scripted_engine.hpp"

namespace loom::actors {
namespace {

using namespace std::chrono_literals;
using namespace loom::actors::testing;
using proto::FinishReason;

constexpr auto kOverloadLong = 60s;

TEST(EngineOverload, AFullWaitingQueueRefusesAtOnceWhileTheAdmittedStreamsGetATokenEveryStep) {
  REQUIRE_SHARED_FILE(compute::testing::shared_path(kScriptedModel));
  auto script = std::make_shared<BackendScript>();
  script->hold_steps();
  auto config = scripted_config(script);
  config.scheduler.max_running = 2;
  config.scheduler.max_waiting = 2;
  Engine engine(config);
  OpenGateOnExit open_on_exit{script};
  ASSERT_TRUE(engine.async_load(boost::asio::use_future).get().loaded());
  const auto idle = stats_of(engine).bookkeeping_entries();

  // Two streams run, two requests wait: the queue is full.
  Outcomes outcomes;
  const std::vector<std::string> admitted{"stream-a", "stream-b"};
  const std::vector<std::string> queued{"queued-c", "queued-d"};
  for (const auto& id : admitted) engine.generate(small_request(id, 30), outcomes.handler(id));
  // Steps one at a time until one (held at the gate) samples both streams: from there on both decode.
  std::size_t held = 0;  // index of the step at the gate
  ASSERT_TRUE(script->wait_for_steps(1, kOverloadLong));
  while (script->steps().at(held).sampled.size() < 2) {
    ASSERT_LT(held, 4u) << "the two streams never shared a step";
    script->allow(1);
    ASSERT_TRUE(script->wait_for_steps(++held + 1, kOverloadLong));
  }
  const auto stream_ids = script->steps().at(held).sampled;
  for (const auto& id : queued) engine.generate(small_request(id, 2), outcomes.handler(id));
  ASSERT_TRUE(eventually([&] { return stats_of(engine).scheduler.waiting == 2; }, kOverloadLong));

  constexpr std::size_t kWindow = 6;  // steps during which refusals keep coming
  const std::size_t first = held;
  std::vector<std::string> refused;
  for (std::size_t step = first; step < first + kWindow; ++step) {
    ASSERT_TRUE(script->wait_for_steps(step + 1, kOverloadLong));  // this step is held at the gate
    std::vector<std::string> now;
    for (int i = 0; i < 3; ++i) {
      now.push_back("over-" + std::to_string(step) + "-" + std::to_string(i));
      engine.generate(small_request(now.back(), 5), outcomes.handler(now.back()));
    }
    ASSERT_TRUE(eventually([&] { return outcomes.over(now); }, kOverloadLong)) << "refused while step " << step << " is held";
    EXPECT_EQ(script->steps_entered(), step + 1) << "no step ran while the refusals came";
    for (const auto& id : now) {
      const Outcomes::Of of = outcomes.get(id);
      ASSERT_TRUE(of.error) << id;
      EXPECT_EQ(of.error->code, proto::ErrorCode::overloaded) << id;
      EXPECT_EQ(of.tokens, 0u);
    }
    refused.insert(refused.end(), now.begin(), now.end());
    script->allow(1);
  }

  // Every step of the window gave both streams their token (and nobody else one: the queue waits).
  ASSERT_TRUE(script->wait_for_steps(first + kWindow + 1, kOverloadLong));
  const auto steps = script->steps();
  for (std::size_t step = first; step < first + kWindow; ++step) {
    EXPECT_EQ(steps.at(step).sampled, stream_ids) << "step " << step;
  }

  script->open();
  std::vector<std::string> all = admitted;
  all.insert(all.end(), queued.begin(), queued.end());
  ASSERT_TRUE(eventually([&] { return outcomes.over(all); }, kOverloadLong));
  all.insert(all.end(), refused.begin(), refused.end());
  EXPECT_TRUE(outcomes.not_exactly_one_last_event(all).empty());
  for (const auto& id : admitted) EXPECT_EQ(outcomes.get(id).done->finish_reason, FinishReason::length) << id;
  for (const auto& id : queued) EXPECT_EQ(outcomes.get(id).done->finish_reason, FinishReason::length) << id;
  const EngineStats stats = stats_of(engine);
  EXPECT_EQ(stats.requests_refused, refused.size());
  EXPECT_EQ(stats.scheduler.rejected, refused.size());
  expect_bookkeeping_back_to(engine, idle);
}

}  // namespace
}  // namespace loom::actors

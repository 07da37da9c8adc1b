// The engine's step time by phase (EngineStats::scheduler.step_time), on the scripted backend whose steps
// take a known time: the counters grow with the steps, and their sum fits in the time the requests took.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "scripted_engine.hpp"

namespace loom::actors::testing {
namespace {

using namespace std::chrono_literals;

TEST(EngineStepTime, PhasesGrowWithTheStepsAndSumWithinTheWallTime) {
  auto script = std::make_shared<BackendScript>();
  script->keep_step_log(false);
  constexpr auto kForward = 2ms;
  script->take_per_step(kForward);
  Engine engine(scripted_config(script));
  ASSERT_TRUE(engine.async_load(boost::asio::use_future).get().loaded());
  EXPECT_EQ(stats_of(engine).scheduler.step_time.steps, 0u);

  Outcomes outcomes;
  std::vector<std::string> ids;
  const auto began = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i) {
    ids.push_back("r" + std::to_string(i));
    engine.generate(small_request(ids.back(), 8), outcomes.handler(ids.back()));
  }
  ASSERT_TRUE(eventually([&] { return outcomes.over(ids); }, 60s));
  const EngineStats stats = stats_of(engine);  // answered after the last step's handler has ended
  const auto wall = std::chrono::steady_clock::now() - began;

  const StepTimeStats& time = stats.scheduler.step_time;
  EXPECT_EQ(time.steps, stats.scheduler.steps);
  EXPECT_GE(time.steps, 8u);  // at least one step per token of the longest request
  EXPECT_GE(time.forward, kForward * time.steps);
  EXPECT_GT(time.executor, 0ns);
  EXPECT_GT(time.scheduler, 0ns);
  EXPECT_GE(time.gap, 0ns);
  EXPECT_LE(time.total(), wall);
  EXPECT_GT(time.overhead_fraction(), 0.0);
  EXPECT_LT(time.overhead_fraction(), 1.0);
}

}  // namespace
}  // namespace loom::actors::testing

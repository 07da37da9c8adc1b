// StepTimer: the step loop's time split into forward, executor, scheduler and gap, from given time points.
#include "loom/actors/engine/step_timer.hpp"

#include <gtest/gtest.h>

namespace loom::actors {
namespace {

using namespace std::chrono_literals;
using Clock = StepTimer::Clock;

const Clock::time_point kStepT0{};
Clock::time_point at(std::chrono::microseconds us) { return kStepT0 + us; }

// One step from an idle loop: a Tick plans and asks for blocks, the Reserve's answer sends the step, the
// StepDone comes back.
void first_step(StepTimer& timer) {
  timer.handler_began(at(0us), /*is_tick=*/true);  // the window opens
  timer.handler_ended(at(10us));                   // planned: 10 us of scheduler
  timer.handler_began(at(30us), false);            // 20 us of hops to the cache manager and back
  timer.step_sent(at(40us));                       // built the batch: 10 us
  timer.handler_ended(at(41us));
  timer.handler_began(at(1040us), false);
  timer.step_answered(at(1040us), 900us, 50us);  // 1000 us out: 900 forward, 50 executor, 50 hops
  timer.handler_ended(at(1060us));               // applied the tokens: 20 us; the next window opens
}

TEST(StepTimer, SplitsAStepIntoItsPhases) {
  StepTimer timer;
  first_step(timer);
  const StepTimeStats& s = timer.stats();
  EXPECT_EQ(s.steps, 1u);
  EXPECT_EQ(s.forward, 900us);
  EXPECT_EQ(s.executor, 50us);
  EXPECT_EQ(s.scheduler, 10us + 11us + 20us);
  EXPECT_EQ(s.gap, 20us + 50us);
  // 1060 us from the Tick to the end of the StepDone's handler, nothing lost; the 1 us of the Reserve's
  // handler after the send overlaps the step's span (the executor already runs) and counts twice.
  EXPECT_EQ(s.total(), 1060us + 1us);
}

TEST(StepTimer, TheTimeBetweenAnAnswerAndTheNextStepIsSchedulerAndGap) {
  StepTimer timer;
  first_step(timer);
  timer.handler_began(at(1070us), true);  // 10 us hop to the Tick
  timer.handler_ended(at(1080us));
  timer.handler_began(at(1100us), false);
  timer.step_sent(at(1105us));
  timer.handler_ended(at(1106us));
  timer.handler_began(at(2105us), false);
  timer.step_answered(at(2105us), 990us, 10us);
  timer.handler_ended(at(2115us));
  const StepTimeStats& s = timer.stats();
  EXPECT_EQ(s.steps, 2u);
  EXPECT_EQ(s.forward, 1890us);
  EXPECT_EQ(s.gap, 70us + 30us);  // 1060 -> 1105 is 45 us, 15 of them in handlers
  EXPECT_EQ(s.total(), 2115us + 2us);  // as above, with each step's 1 us after its send
  EXPECT_NEAR(s.overhead_fraction(), 227.0 / 2117.0, 1e-12);
}

TEST(StepTimer, IdleAndPausedTimeIsNotTheLoops) {
  StepTimer timer;
  first_step(timer);
  timer.loop_stopped();                       // nothing left to run (or a pacing pause)
  timer.handler_began(at(60'000us), true);    // a minute later a Submit's Tick opens a new window
  timer.step_sent(at(60'005us));
  timer.handler_ended(at(60'006us));
  const StepTimeStats& s = timer.stats();
  EXPECT_EQ(s.gap, 70us);  // not a minute
  EXPECT_EQ(s.scheduler, 41us + 6us);
}

TEST(StepTimer, AnAnswerWithoutAStepOutIsIgnored) {
  StepTimer timer;
  timer.step_answered(at(5us), 1us, 1us);
  EXPECT_EQ(timer.stats().steps, 0u);
  EXPECT_EQ(timer.stats().total(), 0ns);
  EXPECT_EQ(timer.stats().overhead_fraction(), 0.0);
}

}  // namespace
}  // namespace loom::actors

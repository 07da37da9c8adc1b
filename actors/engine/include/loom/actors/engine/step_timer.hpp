// StepTimer: where the step loop's time goes, measured by the SchedulerActor on its strand with a steady
// clock and summed over the steps, so that the overhead around the forward pass is a ratio of counters
// (the engine's stats and /metrics' loom_step_seconds_total). Four phases partition the loop's busy time:
//   forward    the backend's run (block copies, forward pass, sampling), as the executor timed it
//   executor   the executor outside it: taking the RunStep, the hand-over to its compute thread and back,
//              answering
//   scheduler  the scheduler's handlers on the step's path: Tick (planning, preemption), the Reserve's
//              answer (building the batch), the StepDone's (applying tokens, token events, releases)
//   gap        the rest: messages between the actors (the hops to and from the executor and the cache
//              manager, the cache manager's Reserve) and waiting behind other messages on the strands
// Time the loop is idle (no sequence to run) or paused by the thermal policy is not counted. A plain class
// over time points it is given, so it is tested without actors or clocks; nothing in it allocates.
#pragma once

#include <chrono>
#include <cstdint>

namespace loom::actors {

struct StepTimeStats {
  std::uint64_t steps = 0;  // steps answered StepDone, whose phases are summed here
  std::chrono::nanoseconds forward{0};
  std::chrono::nanoseconds executor{0};
  std::chrono::nanoseconds scheduler{0};
  std::chrono::nanoseconds gap{0};

  std::chrono::nanoseconds total() const noexcept { return forward + executor + scheduler + gap; }
  // (executor + scheduler + gap) / total: the share of the loop spent outside the forward pass, 0 when empty.
  double overhead_fraction() const noexcept;
};

class StepTimer {
 public:
  using Clock = std::chrono::steady_clock;

  // A handler on the step's path starts and ends; a Tick may open the loop's window (when it was idle).
  void handler_began(Clock::time_point now, bool is_tick) noexcept;
  void handler_ended(Clock::time_point now) noexcept;
  // The RunStep goes out: the time since the window opened, less the scheduler's handlers, was hops.
  void step_sent(Clock::time_point now) noexcept;
  // Its StepDone is back (at the start of the handler that takes it), with the executor's two times.
  void step_answered(Clock::time_point now, std::chrono::nanoseconds forward, std::chrono::nanoseconds executor) noexcept;
  // Nothing to run, or a pause before the next Tick: the loop's clock stops until a Tick.
  void loop_stopped() noexcept;

  const StepTimeStats& stats() const noexcept { return stats_; }

 private:
  StepTimeStats stats_;
  Clock::time_point handler_began_{};
  Clock::time_point sent_at_{};
  bool step_out_ = false;
  // The window from a step's answer (or an idle loop's first Tick) to the next RunStep.
  Clock::time_point window_began_{};
  std::chrono::nanoseconds window_handlers_{0};  // scheduler handlers that ended inside the window
  bool window_open_ = false;
  bool open_window_when_handler_ends_ = false;
};

}  // namespace loom::actors

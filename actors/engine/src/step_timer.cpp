#include "loom/actors/engine/step_timer.hpp"

#include <algorithm>

namespace loom::actors {

namespace {

std::chrono::nanoseconds at_least_zero(std::chrono::nanoseconds d) { return std::max(d, std::chrono::nanoseconds{0}); }

}  // namespace

double StepTimeStats::overhead_fraction() const noexcept {
  const auto all = total();
  if (all.count() <= 0) return 0.0;
  return static_cast<double>((all - forward).count()) / static_cast<double>(all.count());
}

void StepTimer::handler_began(Clock::time_point now, bool is_tick) noexcept {
  handler_began_ = now;
  if (is_tick && !window_open_) {
    window_open_ = true;
    window_began_ = now;
    window_handlers_ = {};
  }
}

void StepTimer::handler_ended(Clock::time_point now) noexcept {
  const auto spent = at_least_zero(now - handler_began_);
  stats_.scheduler += spent;
  if (window_open_) window_handlers_ += spent;
  if (open_window_when_handler_ends_) {
    open_window_when_handler_ends_ = false;
    window_open_ = true;
    window_began_ = now;
    window_handlers_ = {};
  }
}

void StepTimer::step_sent(Clock::time_point now) noexcept {
  if (window_open_) {
    const auto handlers = window_handlers_ + (now - handler_began_);  // this handler up to the send included
    stats_.gap += at_least_zero((now - window_began_) - handlers);
    window_open_ = false;
  }
  step_out_ = true;
  sent_at_ = now;
}

void StepTimer::step_answered(Clock::time_point now, std::chrono::nanoseconds forward,
                              std::chrono::nanoseconds executor) noexcept {
  if (!step_out_) return;
  step_out_ = false;
  ++stats_.steps;
  stats_.forward += forward;
  stats_.executor += executor;
  stats_.gap += at_least_zero((now - sent_at_) - forward - executor);
  open_window_when_handler_ends_ = true;
}

void StepTimer::loop_stopped() noexcept {
  window_open_ = false;
  open_window_when_handler_ends_ = false;
}

}  // namespace loom::actors

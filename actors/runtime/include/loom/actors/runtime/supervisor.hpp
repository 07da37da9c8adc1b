// Supervisor: a ready-made supervising actor. Children spawned with `supervised_by(supervisor.address())`
// report every failure to it; it logs them, keeps the most recent ones for inspection, and calls an
// escalation callback (on its own strand) when a child has stopped for good.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <variant>
#include <vector>

#include "loom/actors/runtime/actor.hpp"

namespace loom::actors {

struct GetFailures {
  Reply<std::vector<ChildFailed>> reply;
};

using SupervisorProtocol = std::variant<ChildFailed, GetFailures>;

class Supervisor : public Actor<Supervisor, SupervisorProtocol> {
 public:
  using OnChildStopped = std::function<void(const ChildFailed&)>;
  static constexpr std::size_t kHistory = 256;  // failures kept for GetFailures, oldest dropped first

  explicit Supervisor(OnChildStopped on_child_stopped = {}) : on_child_stopped_(std::move(on_child_stopped)) {}

  void on(ChildFailed failure) {
    detail::log_child_failed(name(), failure.actor, failure.message_type, failure.restarted, failure.restarts);
    if (!failure.restarted && on_child_stopped_) on_child_stopped_(failure);
    history_.push_back(std::move(failure));
    if (history_.size() > kHistory) history_.pop_front();
  }

  void on(GetFailures request) { request.reply({history_.begin(), history_.end()}); }

 private:
  OnChildStopped on_child_stopped_;
  std::deque<ChildFailed> history_;
};

}  // namespace loom::actors

// Supervision: what happens when an actor's handler (or timer callback) throws.
//
// The failure is caught on the actor's strand, logged with the actor's name and the message type, and the
// actor's SupervisionPolicy is applied right there, before the next message, so no message ever reaches a
// half-broken instance: `restart` replaces the actor's object with a fresh one from its factory (same
// address, same mailbox; the failing message is dropped and its Reply, if any, answers no_reply), unless
// the restart budget (max_restarts within window) is spent, in which case the actor stops. `stop` stops it
// at once. Either way the supervisor (if the actor has one) is told a ChildFailed, so it can log, count,
// alert, or escalate (for example stop a whole subsystem when a child is gone for good).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "loom/actors/runtime/address.hpp"

namespace loom::actors {

struct SupervisionPolicy {
  enum class Strategy { restart, stop };
  Strategy strategy = Strategy::restart;
  unsigned max_restarts = 3;                     // within `window`; one more failure stops the actor
  std::chrono::steady_clock::duration window = std::chrono::seconds(10);
};

struct ChildFailed {
  std::string actor;         // the child's name
  std::string message_type;  // what it was handling when it threw ("timer", "on_start" for hooks)
  std::string error;         // the exception's what()
  bool restarted = false;    // false: the child is stopped for good
  std::uint64_t restarts = 0;  // restarts of this child so far, including this one
};

// What a supervisor must accept. Any actor can supervise by handling ChildFailed in its protocol;
// loom::actors::Supervisor (supervisor.hpp) is a ready-made one.
using SupervisorAddress = std::function<void(ChildFailed)>;

template <class Protocol>
  requires MessageOf<ChildFailed, Protocol>
SupervisorAddress supervised_by(Address<Protocol> supervisor) {
  return [supervisor = std::move(supervisor)](ChildFailed failure) { supervisor.tell(std::move(failure)); };
}

}  // namespace loom::actors

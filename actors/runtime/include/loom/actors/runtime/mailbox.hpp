// The type-erased faces of a running actor. Mailbox<Protocol> is what an Address sends to; ActorControl is
// what a handle or a supervisor needs (name, state, metrics, stop) without knowing the actor's type.
#pragma once

#include <string>

#include <boost/asio/any_io_executor.hpp>

#include "loom/actors/runtime/mailbox_metrics.hpp"

namespace loom::actors {

enum class ActorState {
  running,   // handling messages
  stopping,  // stop() was called: new messages are refused, the ones accepted before are still handled
  stopped,   // on_stop() has run and the actor's object is destroyed
};

class ActorControl {
 public:
  virtual ~ActorControl() = default;
  virtual const std::string& name() const noexcept = 0;
  virtual ActorState state() const noexcept = 0;
  virtual MailboxMetrics metrics() const noexcept = 0;
  // Graceful stop, callable from any thread, idempotent.
  virtual void request_stop() = 0;
  // The executor the actor's strand runs on (not the strand itself).
  virtual const boost::asio::any_io_executor& io_executor() const noexcept = 0;
};

template <class Protocol>
class Mailbox : public ActorControl {
 public:
  // Accepts the message for handling on the actor's strand, or drops it (counted, logged at debug level,
  // any Reply inside fails with no_reply) and returns false when the actor no longer accepts messages.
  virtual bool enqueue(Protocol&& message) = 0;
};

}  // namespace loom::actors

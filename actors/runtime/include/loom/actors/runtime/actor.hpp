// Actor<Derived, Protocol>: state plus a strand. Messages told to the actor's Address are handled one at a
// time on its strand, so its state needs no lock. Protocol is a std::variant of the message structs it
// accepts; Derived has a public handler `on(M)` (by value, M&& or const M&) for each alternative M.
//
//   struct Add { int n; };
//   struct Get { Reply<int> reply; };
//   class Counter : public Actor<Counter, std::variant<Add, Get>> {
//    public:
//     void on(Add m) { total_ += m.n; }
//     void on(Get m) { m.reply(total_); }
//    private:
//     int total_ = 0;
//   };
//   auto counter = spawn<Counter>(io.get_executor(), {.name = "counter"});
//   counter.address().tell(Add{2});
//   counter.address().ask(Get{}, 100ms, [](error_code ec, int total) { ... });
//
// Lifecycle. spawn() constructs the object on the strand and calls its optional on_start(); from then on
// messages are handled in the order each sender told them. stop() is graceful: messages accepted before it
// are still handled, later ones are refused (counted as dropped; requests among them answer no_reply);
// then timers are cancelled, on_stop() runs and the object is destroyed. The last ActorHandle going away
// stops the actor. Handles must be released (or actors stopped) before their io_context is destroyed.
//
// Failures. An exception thrown by a handler, a timer callback, an ask callback or on_start() is caught
// on the strand and handled by the actor's SupervisionPolicy (see supervision.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "loom/actors/runtime/address.hpp"
#include "loom/actors/runtime/lifecycle_log.hpp"
#include "loom/actors/runtime/mailbox.hpp"
#include "loom/actors/runtime/message_name.hpp"
#include "loom/actors/runtime/supervision.hpp"

namespace loom::actors {

using Strand = asio::strand<asio::any_io_executor>;
using TimerId = std::uint64_t;

struct SpawnOptions {
  std::string name{};             // for logs and metrics; defaults to the actor's type name
  SupervisionPolicy policy{};     // what a thrown exception does (default: restart, 3 times in 10 s)
  SupervisorAddress supervisor{}; // told every failure; empty: failures are only logged
};

namespace detail {
template <class Derived>
class ActorCell;
}

template <class Derived, class Protocol>
class Actor {
 public:
  using protocol_type = Protocol;
  using address_type = Address<Protocol>;

  Actor() = default;
  Actor(const Actor&) = delete;
  Actor& operator=(const Actor&) = delete;

  // Optional hooks; Derived hides them with its own.
  void on_start() {}
  void on_stop() {}

 protected:
  ~Actor() = default;

  Address<Protocol> self() const;
  const std::string& name() const;
  const Strand& strand() const;

  // One-shot timer on this actor's strand. Cancelled when the actor stops or restarts.
  TimerId start_timer(std::chrono::steady_clock::duration after, std::function<void()> callback);
  // Periodic timer: first fires after `period`, then every `period` (scheduled without drift).
  TimerId start_periodic(std::chrono::steady_clock::duration period, std::function<void()> callback);
  // Returns false when the timer already fired (one-shot) or was cancelled; its callback will not run.
  bool cancel_timer(TimerId id);

  // Graceful stop of this actor (see the lifecycle above).
  void stop();

  // Ask another actor; `on_reply(error_code, R)` runs on this actor's strand, and not at all if this
  // actor has stopped or restarted since (the reply is then dropped and logged at debug level).
  template <class OtherProtocol, RequestMessage Request, class OnReply>
  void ask(const Address<OtherProtocol>& to, Request request, std::chrono::steady_clock::duration timeout,
           OnReply on_reply);

  // The other way work comes back to this actor without being a message of its protocol: calling the
  // returned function, from any thread and any number of times, with arguments (args...) queues
  // `callback(args...)` in this actor's mailbox, behind what it has already accepted; it runs on the
  // strand, supervised like a handler, and not at all once this actor has stopped or restarted since
  // (dropped and counted like a message). For a job this actor handed to a thread of its own (a compute thread,
  // a blocking read) reporting back, or a completion of something it started; a reply to an ask comes
  // through ask's on_reply instead. `kind` names it in logs and dead letters. Arguments are copied.
  template <class F>
  auto continuation(std::string_view kind, F callback);

 private:
  friend class detail::ActorCell<Derived>;
  detail::ActorCell<Derived>* cell_ = nullptr;
};

namespace detail {

// Releasing the last owner stops the actor.
class StopOnRelease {
 public:
  explicit StopOnRelease(std::shared_ptr<ActorControl> actor) : actor_(std::move(actor)) {}
  StopOnRelease(const StopOnRelease&) = delete;
  StopOnRelease& operator=(const StopOnRelease&) = delete;
  ~StopOnRelease() { actor_->request_stop(); }

 private:
  std::shared_ptr<ActorControl> actor_;
};

template <class Derived>
class ActorCell final : public Mailbox<typename Derived::protocol_type>,
                        public std::enable_shared_from_this<ActorCell<Derived>> {
 public:
  using Protocol = typename Derived::protocol_type;
  using Factory = std::function<std::unique_ptr<Derived>()>;
  using Clock = std::chrono::steady_clock;

  ActorCell(asio::any_io_executor io, SpawnOptions options, Factory factory)
      : io_(std::move(io)),
        strand_(asio::make_strand(io_)),
        name_(options.name.empty() ? std::string(message_name<Derived>()) : std::move(options.name)),
        policy_(options.policy),
        supervisor_(std::move(options.supervisor)),
        factory_(std::move(factory)) {}

  void start() {
    asio::post(strand_, [self = this->shared_from_this()] { self->begin_incarnation(); });
  }

  // --- Mailbox / ActorControl (any thread) ---
  const std::string& name() const noexcept override { return name_; }
  ActorState state() const noexcept override { return state_.load(std::memory_order_acquire); }
  MailboxMetrics metrics() const noexcept override {
    MailboxMetrics m;
    counters_.fill(m);
    std::lock_guard lock(mailbox_mutex_);
    m.queue_depth = pending_;
    m.queue_depth_high_water = pending_high_water_;
    return m;
  }
  const asio::any_io_executor& io_executor() const noexcept override { return io_; }

  bool enqueue(Protocol&& message) override { return enqueue_envelope(Envelope(std::move(message))); }

  // A continuation of the incarnation `incarnation` (Actor::continuation): queued behind the messages
  // already accepted, so that it keeps its place in the order of what reaches the actor.
  bool enqueue_continuation(std::string kind, std::uint64_t incarnation, std::function<void()> work) {
    return enqueue_envelope(Envelope(Continuation{std::move(kind), incarnation, std::move(work)}));
  }

  std::uint64_t incarnation() const noexcept { return incarnation_; }

 private:
  // Work the actor gave itself: not a message of its protocol, but queued and handled like one.
  struct Continuation {
    std::string kind;
    std::uint64_t incarnation = 0;
    std::function<void()> work;
  };
  using Envelope = std::variant<Protocol, Continuation>;

  bool enqueue_envelope(Envelope&& envelope) {
    if (state() != ActorState::running) {
      drop(envelope, "stopped");
      return false;
    }
    bool schedule_drain = false;
    {
      std::lock_guard lock(mailbox_mutex_);
      mailbox_.push_back(std::move(envelope));
      pending_high_water_ = std::max(pending_high_water_, ++pending_);
      schedule_drain = !std::exchange(drain_scheduled_, true);
    }
    if (schedule_drain) post_drain();
    return true;
  }

 public:
  void request_stop() override {
    auto expected = ActorState::running;
    if (state_.compare_exchange_strong(expected, ActorState::stopping, std::memory_order_acq_rel)) {
      asio::post(strand_, [self = this->shared_from_this()] { self->finish_stop(); });
    }
  }

  // Calls `done` on the strand once the actor is stopped (at once if it already is).
  void when_stopped(std::function<void()> done) {
    asio::post(strand_, [self = this->shared_from_this(), done = std::move(done)]() mutable {
      if (self->finished_) {
        done();
      } else {
        self->stop_waiters_.push_back(std::move(done));
      }
    });
  }

  // --- services for the Actor base (strand only) ---
  Address<Protocol> address() { return Address<Protocol>(this->weak_from_this()); }
  const Strand& strand() const noexcept { return strand_; }

  TimerId start_timer(Clock::duration after, Clock::duration period, bool periodic, std::function<void()> callback) {
    const TimerId id = next_timer_++;
    auto timer = std::make_unique<Timer>(strand_, std::move(callback), period, periodic);
    timer->timer.expires_after(after);
    arm(id, *timer);
    timers_.emplace(id, std::move(timer));
    return id;
  }

  bool cancel_timer(TimerId id) {
    auto it = timers_.find(id);
    if (it == timers_.end()) return false;
    it->second->timer.cancel();
    timers_.erase(it);
    return true;
  }

  // Wraps a callback so that it runs only while the current incarnation lives, with failures supervised.
  template <class F>
  auto guarded(std::string_view kind, F callback) {
    return [weak = this->weak_from_this(), incarnation = incarnation_, kind = std::string(kind),
            callback = std::move(callback)](auto&&... args) mutable {
      auto self = weak.lock();
      if (!self || self->finished_ || self->incarnation_ != incarnation) {
        record_dead_letter(self ? self->name_ : "<gone>", kind, "actor stopped or restarted");
        return;
      }
      self->run_supervised(kind, [&] { callback(std::forward<decltype(args)>(args)...); });
    };
  }

 private:
  struct Timer {
    Timer(const Strand& strand, std::function<void()> cb, Clock::duration every, bool repeat)
        : timer(strand), callback(std::move(cb)), period(every), periodic(repeat) {}
    asio::steady_timer timer;
    std::function<void()> callback;
    Clock::duration period;
    bool periodic;
  };

  static std::string_view name_of(const Envelope& envelope) {
    if (const auto* continuation = std::get_if<Continuation>(&envelope)) return continuation->kind;
    return std::visit([](const auto& m) { return message_name<std::remove_cvref_t<decltype(m)>>(); },
                      std::get<Protocol>(envelope));
  }

  void drop(Envelope& message, std::string_view reason) {
    counters_.on_dropped();
    record_dead_letter(name_, name_of(message), reason);
    // Destroying the message here answers any Reply in it with no_reply.
  }

  void post_drain() {
    asio::post(strand_, [self = this->shared_from_this()] { self->drain(); });
  }

  // Moves up to kBatch messages from the mailbox into batch_; returns whether it took any.
  bool take_batch() {
    std::lock_guard lock(mailbox_mutex_);
    const auto n = std::min(mailbox_.size(), kBatch);
    for (std::size_t i = 0; i < n; ++i) {
      batch_.push_back(std::move(mailbox_.front()));
      mailbox_.pop_front();
    }
    return n > 0;
  }

  // One clock reading per message: each handler's time runs from the end of the previous one.
  void handle_batch() {
    auto previous = Clock::now();
    const auto began = previous;
    Clock::duration longest{};
    std::uint64_t handled = 0;
    for (auto& message : batch_) {
      if (!deliver(message)) continue;
      const auto now = Clock::now();
      longest = std::max(longest, now - previous);
      previous = now;
      ++handled;
    }
    {
      std::lock_guard lock(mailbox_mutex_);
      pending_ -= batch_.size();
    }
    counters_.add_handled(handled, previous - began, longest);
    batch_.clear();
  }

  // On the strand: handles one batch, then yields the strand (so timers and replies interleave with a
  // busy mailbox) and comes back while messages remain.
  void drain() {
    take_batch();
    handle_batch();
    {
      std::lock_guard lock(mailbox_mutex_);
      if (mailbox_.empty()) {
        drain_scheduled_ = false;
        return;
      }
    }
    post_drain();
  }

  // Returns whether a handler ran (false: the message was dropped).
  bool deliver(Envelope& message) {
    if (finished_ || !instance_) {
      drop(message, "stopped");
      return false;
    }
    if (auto* continuation = std::get_if<Continuation>(&message); continuation && continuation->incarnation != incarnation_) {
      drop(message, "actor restarted");
      return false;
    }
    try {
      if (auto* continuation = std::get_if<Continuation>(&message)) {
        continuation->work();
      } else {
        std::visit([&](auto& m) { instance_->on(std::move(m)); }, std::get<Protocol>(message));
      }
    } catch (const std::exception& e) {
      on_failure(name_of(message), e.what());
    } catch (...) {
      on_failure(name_of(message), "unknown exception");
    }
    return true;
  }

  template <class F>
  void run_supervised(std::string_view kind, F&& work) {
    try {
      work();
    } catch (const std::exception& e) {
      on_failure(kind, e.what());
    } catch (...) {
      on_failure(kind, "unknown exception");
    }
  }

  void begin_incarnation() {
    if (finished_) return;
    ++incarnation_;
    run_supervised("on_start", [&] {
      instance_ = factory_();
      static_cast<Actor<Derived, Protocol>&>(*instance_).cell_ = this;
      instance_->on_start();
    });
  }

  void end_incarnation(bool graceful) {
    for (auto& [id, timer] : timers_) timer->timer.cancel();
    timers_.clear();
    if (instance_ && graceful) {
      try {
        instance_->on_stop();
      } catch (const std::exception& e) {
        log_on_stop_failed(name_, e.what());
      } catch (...) {
        log_on_stop_failed(name_, "unknown exception");
      }
    }
    instance_.reset();
  }

  void finish_stop() {
    if (finished_) return;
    // Everything accepted before the stop is handled first; the mailbox takes nothing new by now, except
    // a sender that raced the stop, whose message a later drain drops and counts.
    while (take_batch()) handle_batch();
    end_incarnation(true);
    mark_stopped();
  }

  void mark_stopped() {
    finished_ = true;
    state_.store(ActorState::stopped, std::memory_order_release);
    log_stopped(name_);
    auto waiters = std::move(stop_waiters_);
    for (auto& done : waiters) done();
  }

  void on_failure(std::string_view kind, const char* what) {
    counters_.on_failed();
    log_handler_failed(name_, kind, what);
    const bool restart = policy_.strategy == SupervisionPolicy::Strategy::restart && restart_budget_left();
    end_incarnation(false);
    ChildFailed report{name_, std::string(kind), what, restart, restarts_};
    if (restart) {
      ++restarts_;
      report.restarts = restarts_;
      counters_.on_restarted();
      log_restarting(name_, restarts_);
    } else {
      log_stopping_after_failure(name_, restarts_);
      state_.store(ActorState::stopping, std::memory_order_release);
      mark_stopped();
    }
    if (supervisor_) supervisor_(std::move(report));
    if (restart) begin_incarnation();
  }

  bool restart_budget_left() {
    const auto now = Clock::now();
    while (!recent_restarts_.empty() && now - recent_restarts_.front() > policy_.window) {
      recent_restarts_.pop_front();
    }
    if (recent_restarts_.size() >= policy_.max_restarts) return false;
    recent_restarts_.push_back(now);
    return true;
  }

  void arm(TimerId id, Timer& timer) {
    timer.timer.async_wait([weak = this->weak_from_this(), id](error_code ec) {
      if (auto self = weak.lock(); self && !ec) self->fire(id);
    });
  }

  void fire(TimerId id) {
    auto it = timers_.find(id);
    if (it == timers_.end() || !instance_) return;  // cancelled after it had already expired
    std::function<void()> callback;
    if (it->second->periodic) {
      auto& timer = *it->second;
      timer.timer.expires_at(timer.timer.expiry() + timer.period);
      arm(id, timer);
      callback = timer.callback;  // a copy: the callback may cancel its own timer
    } else {
      callback = std::move(it->second->callback);
      timers_.erase(it);
    }
    run_supervised("timer", callback);
  }

  static constexpr std::size_t kBatch = 256;

  const asio::any_io_executor io_;
  const Strand strand_;
  const std::string name_;
  const SupervisionPolicy policy_;
  const SupervisorAddress supervisor_;
  const Factory factory_;
  std::atomic<ActorState> state_{ActorState::running};
  HandlerCounters counters_;

  // The hand-off between senders (any thread) and the strand. A lock rather than a message because this
  // *is* the message transport: one short critical section per tell, and one strand post per batch
  // instead of one per message (see bench/README.md for what that buys over posting each message).
  mutable std::mutex mailbox_mutex_;
  std::deque<Envelope> mailbox_;
  bool drain_scheduled_ = false;
  std::uint64_t pending_ = 0;  // accepted and not yet through a batch: the queue depth
  std::uint64_t pending_high_water_ = 0;

  // Touched only on the strand.
  std::vector<Envelope> batch_;
  std::unique_ptr<Derived> instance_;
  bool finished_ = false;
  std::uint64_t incarnation_ = 0;
  std::uint64_t restarts_ = 0;
  std::deque<Clock::time_point> recent_restarts_;
  std::map<TimerId, std::unique_ptr<Timer>> timers_;
  TimerId next_timer_ = 1;
  std::vector<std::function<void()>> stop_waiters_;
};

}  // namespace detail

// Owning handle to a spawned actor. Copies share ownership; when the last copy goes, the actor stops.
template <class Protocol>
class ActorHandle {
 public:
  ActorHandle() = default;

  template <class Derived>
  explicit ActorHandle(std::shared_ptr<detail::ActorCell<Derived>> cell)
      : mailbox_(cell),
        owner_(std::make_shared<detail::StopOnRelease>(cell)),
        when_stopped_([cell](std::function<void()> done) { cell->when_stopped(std::move(done)); }) {}

  Address<Protocol> address() const { return Address<Protocol>(std::weak_ptr<Mailbox<Protocol>>(mailbox_)); }

  template <MessageOf<Protocol> Message>
  bool tell(Message&& message) const {
    return address().tell(std::forward<Message>(message));
  }

  const std::string& name() const noexcept { return mailbox_->name(); }
  ActorState state() const noexcept { return mailbox_->state(); }
  MailboxMetrics metrics() const noexcept { return mailbox_->metrics(); }
  explicit operator bool() const noexcept { return mailbox_ != nullptr; }

  void stop() const { mailbox_->request_stop(); }

  // Stops the actor and completes (signature void()) once it has stopped: on_stop has run and the
  // messages accepted before the stop have been handled.
  template <class CompletionToken>
  auto async_stop(CompletionToken&& token) const {
    return asio::async_initiate<CompletionToken, void()>(
        // Copies, not `this`: with a deferred token (use_awaitable) the initiation runs when awaited, and the
        // handle it was called on may be a temporary that is gone by then.
        [mailbox = mailbox_, when_stopped = when_stopped_](auto handler) {
          auto executor = asio::get_associated_executor(handler, mailbox->io_executor());
          auto shared = std::make_shared<decltype(handler)>(std::move(handler));
          mailbox->request_stop();
          when_stopped([shared, executor] { asio::post(executor, std::move(*shared)); });
        },
        token);
  }

 private:
  std::shared_ptr<Mailbox<Protocol>> mailbox_;
  std::shared_ptr<detail::StopOnRelease> owner_;
  std::function<void(std::function<void()>)> when_stopped_;
};

// Starts an actor built by `factory` (called again for each restart) on a new strand of `executor`.
template <class Derived, class Factory>
ActorHandle<typename Derived::protocol_type> spawn_with(asio::any_io_executor executor, SpawnOptions options,
                                                        Factory factory) {
  auto cell = std::make_shared<detail::ActorCell<Derived>>(
      std::move(executor), std::move(options),
      typename detail::ActorCell<Derived>::Factory(std::move(factory)));
  cell->start();
  return ActorHandle<typename Derived::protocol_type>(cell);
}

// Starts Derived(args...) on a new strand of `executor`. The arguments are kept (copied) so the policy
// can restart the actor with the same ones; share non-copyable dependencies through a shared_ptr.
template <class Derived, class... Args>
ActorHandle<typename Derived::protocol_type> spawn(asio::any_io_executor executor, SpawnOptions options,
                                                   Args... args) {
  return spawn_with<Derived>(std::move(executor), std::move(options),
                             [... args = std::move(args)] { return std::make_unique<Derived>(args...); });
}

// --- Actor members that need the cell ---

template <class Derived, class Protocol>
Address<Protocol> Actor<Derived, Protocol>::self() const {
  return cell_->address();
}

template <class Derived, class Protocol>
const std::string& Actor<Derived, Protocol>::name() const {
  return cell_->name();
}

template <class Derived, class Protocol>
const Strand& Actor<Derived, Protocol>::strand() const {
  return cell_->strand();
}

template <class Derived, class Protocol>
TimerId Actor<Derived, Protocol>::start_timer(std::chrono::steady_clock::duration after,
                                              std::function<void()> callback) {
  return cell_->start_timer(after, {}, false, std::move(callback));
}

template <class Derived, class Protocol>
TimerId Actor<Derived, Protocol>::start_periodic(std::chrono::steady_clock::duration period,
                                                 std::function<void()> callback) {
  return cell_->start_timer(period, period, true, std::move(callback));
}

template <class Derived, class Protocol>
bool Actor<Derived, Protocol>::cancel_timer(TimerId id) {
  return cell_->cancel_timer(id);
}

template <class Derived, class Protocol>
void Actor<Derived, Protocol>::stop() {
  cell_->request_stop();
}

template <class Derived, class Protocol>
template <class OtherProtocol, RequestMessage Request, class OnReply>
void Actor<Derived, Protocol>::ask(const Address<OtherProtocol>& to, Request request,
                                   std::chrono::steady_clock::duration timeout, OnReply on_reply) {
  using R = reply_value_t<Request>;
  auto guarded = cell_->guarded(message_name<Request>(), [on_reply = std::move(on_reply)](error_code ec, R value) mutable {
    on_reply(ec, std::move(value));
  });
  to.ask(std::move(request), timeout, asio::bind_executor(strand(), std::move(guarded)));
}

template <class Derived, class Protocol>
template <class F>
auto Actor<Derived, Protocol>::continuation(std::string_view kind, F callback) {
  auto shared = std::make_shared<F>(std::move(callback));
  return [cell = std::weak_ptr<detail::ActorCell<Derived>>(cell_->shared_from_this()), incarnation = cell_->incarnation(),
          kind = std::string(kind), shared](auto... args) {
    const auto target = cell.lock();
    if (!target) {
      detail::record_dead_letter("<gone>", kind, "actor stopped");
      return;
    }
    target->enqueue_continuation(kind, incarnation, [shared, ... args = std::move(args)]() mutable {
      (*shared)(std::move(args)...);
    });
  };
}

}  // namespace loom::actors

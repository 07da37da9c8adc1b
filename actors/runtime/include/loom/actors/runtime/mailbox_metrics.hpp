// Counters an actor keeps about its mailbox, readable from any thread while it runs (relaxed atomics:
// each value is exact, a snapshot of several is not one instant).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace loom::actors {

struct MailboxMetrics {
  std::uint64_t handled = 0;           // messages whose handler ran (including ones that threw)
  std::uint64_t failed = 0;            // handlers and timer callbacks that threw
  std::uint64_t dropped = 0;           // messages refused or discarded because the actor was stopped
  std::uint64_t restarts = 0;          // restarts by the supervision policy
  std::uint64_t queue_depth = 0;       // accepted, not yet handled
  std::uint64_t queue_depth_high_water = 0;
  std::chrono::nanoseconds handler_time_total{0};
  std::chrono::nanoseconds handler_time_max{0};
};

namespace detail {

// The counters the actor's strand keeps. Only the strand writes them (plain stores of relaxed atomics, no
// read-modify-write), so handling a message costs no contended cache line; any thread may read them.
// Dropped messages are counted by whichever thread drops them, hence the one fetch_add.
class HandlerCounters {
 public:
  void add_handled(std::uint64_t messages, std::chrono::nanoseconds took, std::chrono::nanoseconds longest) noexcept {
    bump(handled_, messages);
    bump(time_total_, took.count());
    if (longest.count() > time_max_.load(std::memory_order_relaxed)) {
      time_max_.store(longest.count(), std::memory_order_relaxed);
    }
  }
  void on_failed() noexcept { bump(failed_, 1); }
  void on_restarted() noexcept { bump(restarts_, 1); }
  void on_dropped() noexcept { dropped_.fetch_add(1, std::memory_order_relaxed); }

  // Fills everything but the queue depths, which the mailbox knows.
  void fill(MailboxMetrics& m) const noexcept {
    m.handled = handled_.load(std::memory_order_relaxed);
    m.failed = failed_.load(std::memory_order_relaxed);
    m.dropped = dropped_.load(std::memory_order_relaxed);
    m.restarts = restarts_.load(std::memory_order_relaxed);
    m.handler_time_total = std::chrono::nanoseconds{time_total_.load(std::memory_order_relaxed)};
    m.handler_time_max = std::chrono::nanoseconds{time_max_.load(std::memory_order_relaxed)};
  }

 private:
  template <class T, class N>
  static void bump(std::atomic<T>& counter, N by) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + static_cast<T>(by), std::memory_order_relaxed);
  }

  std::atomic<std::uint64_t> handled_{0}, failed_{0}, restarts_{0};
  std::atomic<std::int64_t> time_total_{0}, time_max_{0};
  alignas(64) std::atomic<std::uint64_t> dropped_{0};
};

}  // namespace detail
}  // namespace loom::actors

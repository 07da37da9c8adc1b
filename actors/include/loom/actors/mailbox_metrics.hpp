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

class MailboxCounters {
 public:
  void on_enqueued() noexcept {
    const auto depth = depth_.fetch_add(1, std::memory_order_relaxed) + 1;
    auto high = high_water_.load(std::memory_order_relaxed);
    while (depth > high && !high_water_.compare_exchange_weak(high, depth, std::memory_order_relaxed)) {
    }
  }
  void on_dequeued() noexcept { depth_.fetch_sub(1, std::memory_order_relaxed); }
  void on_handled(std::chrono::nanoseconds took) noexcept {
    handled_.fetch_add(1, std::memory_order_relaxed);
    time_total_.fetch_add(took.count(), std::memory_order_relaxed);
    // Only the actor's strand writes the maximum, so a plain compare-and-store suffices.
    if (took.count() > time_max_.load(std::memory_order_relaxed)) {
      time_max_.store(took.count(), std::memory_order_relaxed);
    }
  }
  void on_failed() noexcept { failed_.fetch_add(1, std::memory_order_relaxed); }
  void on_dropped() noexcept { dropped_.fetch_add(1, std::memory_order_relaxed); }
  void on_restarted() noexcept { restarts_.fetch_add(1, std::memory_order_relaxed); }

  MailboxMetrics snapshot() const noexcept {
    MailboxMetrics m;
    m.handled = handled_.load(std::memory_order_relaxed);
    m.failed = failed_.load(std::memory_order_relaxed);
    m.dropped = dropped_.load(std::memory_order_relaxed);
    m.restarts = restarts_.load(std::memory_order_relaxed);
    m.queue_depth = depth_.load(std::memory_order_relaxed);
    m.queue_depth_high_water = high_water_.load(std::memory_order_relaxed);
    m.handler_time_total = std::chrono::nanoseconds{time_total_.load(std::memory_order_relaxed)};
    m.handler_time_max = std::chrono::nanoseconds{time_max_.load(std::memory_order_relaxed)};
    return m;
  }

 private:
  std::atomic<std::uint64_t> handled_{0}, failed_{0}, dropped_{0}, restarts_{0};
  std::atomic<std::uint64_t> depth_{0}, high_water_{0};
  std::atomic<std::int64_t> time_total_{0}, time_max_{0};
};

}  // namespace detail
}  // namespace loom::actors

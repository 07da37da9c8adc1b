// LatencyHistogram: a fixed set of log-spaced buckets for latencies (time to first token, time between
// tokens), cheap to record into on an actor's strand and to copy out in a stats answer. Quantiles are read
// from the buckets (so they are upper bounds within one bucket's width, about 19%), count, sum, min and max
// are exact.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace loom::actors {

class LatencyHistogram {
 public:
  // Bucket i holds samples in (bound(i-1), bound(i)]; bound(i) = 10 us * 2^(i/4), so bucket 0 takes
  // everything up to 10 us and the finite bounds reach about 119 s; the last bucket is open-ended.
  static constexpr std::size_t kBuckets = 96;

  // A negative latency (a clock that went backwards) counts as 0.
  void record(std::chrono::nanoseconds latency) noexcept;
  void merge(const LatencyHistogram& other) noexcept;

  std::uint64_t count() const noexcept { return count_; }
  std::chrono::nanoseconds sum() const noexcept { return sum_; }
  std::chrono::nanoseconds min() const noexcept { return count_ ? min_ : std::chrono::nanoseconds{0}; }
  std::chrono::nanoseconds max() const noexcept { return max_; }
  std::chrono::nanoseconds mean() const noexcept;
  // The upper bound of the bucket holding the q-quantile (q in [0, 1]), clamped to [min, max]; exactly min
  // for q <= 0 and max for q >= 1; 0 when empty.
  std::chrono::nanoseconds quantile(double q) const noexcept;

  // Upper bound of bucket i (the last is nanoseconds::max()).
  static std::chrono::nanoseconds bound(std::size_t i) noexcept;
  std::uint64_t bucket_count(std::size_t i) const noexcept { return buckets_[i]; }

 private:
  std::array<std::uint64_t, kBuckets> buckets_{};
  std::uint64_t count_ = 0;
  std::chrono::nanoseconds sum_{0};
  std::chrono::nanoseconds min_{std::chrono::nanoseconds::max()};
  std::chrono::nanoseconds max_{0};
};

}  // namespace loom::actors

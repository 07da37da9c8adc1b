#include "loom/actors/engine/latency_histogram.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loom::actors {

namespace {

using std::chrono::nanoseconds;

constexpr std::size_t kFiniteBuckets = LatencyHistogram::kBuckets - 1;

// The finite bounds in whole nanoseconds, computed once: recording is then a binary search over integers,
// so a sample exactly on a bound always lands in the same bucket.
const std::array<std::int64_t, kFiniteBuckets>& finite_bounds() {
  static const auto bounds = [] {
    std::array<std::int64_t, kFiniteBuckets> b{};
    for (std::size_t i = 0; i < kFiniteBuckets; ++i) {
      b[i] = static_cast<std::int64_t>(std::llround(10'000.0 * std::exp2(static_cast<double>(i) / 4.0)));
    }
    return b;
  }();
  return bounds;
}

}  // namespace

nanoseconds LatencyHistogram::bound(std::size_t i) noexcept {
  if (i >= kFiniteBuckets) return nanoseconds::max();
  return nanoseconds{finite_bounds()[i]};
}

void LatencyHistogram::record(nanoseconds latency) noexcept {
  latency = std::max(latency, nanoseconds{0});
  const auto& bounds = finite_bounds();
  const auto it = std::lower_bound(bounds.begin(), bounds.end(), latency.count());
  ++buckets_[static_cast<std::size_t>(it - bounds.begin())];
  ++count_;
  sum_ += latency;
  min_ = std::min(min_, latency);
  max_ = std::max(max_, latency);
}

void LatencyHistogram::merge(const LatencyHistogram& other) noexcept {
  for (std::size_t i = 0; i < kBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

nanoseconds LatencyHistogram::mean() const noexcept {
  return count_ == 0 ? nanoseconds{0} : sum_ / static_cast<std::int64_t>(count_);
}

nanoseconds LatencyHistogram::quantile(double q) const noexcept {
  if (count_ == 0) return nanoseconds{0};
  // The ends are known exactly; NaN counts as 0.
  if (!(q > 0.0)) return min();
  if (q >= 1.0) return max_;
  // The rank of the sample sought, 1-based: the smallest r with r >= q * count (at least the first).
  const auto rank = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count_))));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::clamp(bound(i), min(), max_);
  }
  return max_;
}

}  // namespace loom::actors

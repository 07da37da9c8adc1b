// LatencySamples: the values of one latency (time to first token, inter-token gap, end-to-end) over a
// run, and their percentiles. A percentile is the nearest-rank one: the smallest recorded value such that
// at least p % of the values are at or below it, so it is always a value that was measured.
//
// Memory is bounded: past `capacity` values the samples become a uniform random sample of everything
// recorded (reservoir sampling, with a fixed seed so that runs repeat), and percentiles are estimates
// from it; count(), mean(), min() and max() stay exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace loom::loadgen {

class LatencySamples {
 public:
  static constexpr std::size_t kDefaultCapacity = std::size_t{1} << 22;  // 32 MiB of doubles

  explicit LatencySamples(std::size_t capacity = kDefaultCapacity);

  void add(double value);

  std::uint64_t count() const { return count_; }
  bool empty() const { return count_ == 0; }
  // Whether percentiles come from a sample rather than every value.
  bool sampled() const { return count_ > kept_.size(); }

  // p in [0, 100]; nullopt when nothing was recorded. p = 0 gives the smallest kept value.
  std::optional<double> percentile(double p) const;
  std::optional<double> mean() const;
  std::optional<double> min() const;
  std::optional<double> max() const;

 private:
  std::uint64_t next_random();

  std::size_t capacity_;
  std::uint64_t count_ = 0;
  double sum_ = 0;
  double min_ = 0;
  double max_ = 0;
  std::uint64_t random_state_ = 0x9E3779B97F4A7C15ull;
  mutable std::vector<double> kept_;
  mutable bool sorted_ = true;
};

}  // namespace loom::loadgen

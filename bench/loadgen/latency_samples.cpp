#include "latency_samples.hpp"

#include <algorithm>
#include <cmath>

namespace loom::loadgen {

LatencySamples::LatencySamples(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

// splitmix64: small, and the same sequence on every platform.
std::uint64_t LatencySamples::next_random() {
  std::uint64_t z = (random_state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void LatencySamples::add(double value) {
  min_ = count_ == 0 ? value : std::min(min_, value);
  max_ = count_ == 0 ? value : std::max(max_, value);
  sum_ += value;
  ++count_;
  if (kept_.size() < capacity_) {
    kept_.push_back(value);
    sorted_ = false;
    return;
  }
  // Algorithm R: the count_-th value replaces a kept one with probability capacity / count_.
  const std::uint64_t slot = next_random() % count_;
  if (slot < capacity_) {
    kept_[slot] = value;
    sorted_ = false;
  }
}

std::optional<double> LatencySamples::percentile(double p) const {
  if (kept_.empty()) return std::nullopt;
  if (!sorted_) {
    std::sort(kept_.begin(), kept_.end());
    sorted_ = true;
  }
  p = std::clamp(p, 0.0, 100.0);
  // Nearest rank: the ceil(p/100 * n)-th smallest, 1-based; rank 0 (p = 0) is the smallest. p * n first,
  // and a hair below the ceiling, so that 7 % of 100 values is rank 7 (p / 100 * n is 7.000000000000001).
  const auto n = static_cast<double>(kept_.size());
  const auto rank = static_cast<std::size_t>(std::ceil(p * n / 100.0 - 1e-9));
  return kept_[rank == 0 ? 0 : std::min(rank, kept_.size()) - 1];
}

std::optional<double> LatencySamples::mean() const {
  if (count_ == 0) return std::nullopt;
  return sum_ / static_cast<double>(count_);
}

std::optional<double> LatencySamples::min() const {
  if (count_ == 0) return std::nullopt;
  return min_;
}

std::optional<double> LatencySamples::max() const {
  if (count_ == 0) return std::nullopt;
  return max_;
}

}  // namespace loom::loadgen

// LatencyHistogram: bucket bounds, where samples land, the exact summary values, quantiles read from the
// buckets (upper bounds within one bucket's width), and merging.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>

#include "loom/actors/engine/latency_histogram.hpp"

namespace loom::actors {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

std::size_t bucket_of(const LatencyHistogram& h) {
  std::size_t found = LatencyHistogram::kBuckets;
  for (std::size_t i = 0; i < LatencyHistogram::kBuckets; ++i) {
    if (h.bucket_count(i) == 0) continue;
    EXPECT_EQ(found, LatencyHistogram::kBuckets) << "more than one bucket holds samples";
    found = i;
  }
  return found;
}

std::size_t bucket_for(nanoseconds latency) {
  LatencyHistogram h;
  h.record(latency);
  return bucket_of(h);
}

TEST(LatencyHistogramTest, EmptyHistogramReadsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.sum(), 0ns);
  EXPECT_EQ(h.min(), 0ns);
  EXPECT_EQ(h.max(), 0ns);
  EXPECT_EQ(h.mean(), 0ns);
  EXPECT_EQ(h.quantile(0.5), 0ns);
  EXPECT_EQ(h.quantile(1.0), 0ns);
}

TEST(LatencyHistogramTest, BoundsGrowByAQuarterPowerOfTwoFromTenMicroseconds) {
  EXPECT_EQ(LatencyHistogram::bound(0), 10us);
  EXPECT_EQ(LatencyHistogram::bound(4), 20us);
  EXPECT_EQ(LatencyHistogram::bound(8), 40us);
  EXPECT_EQ(LatencyHistogram::bound(40), 10240us);
  for (std::size_t i = 1; i + 1 < LatencyHistogram::kBuckets; ++i) {
    const double ratio = static_cast<double>(LatencyHistogram::bound(i).count()) /
                         static_cast<double>(LatencyHistogram::bound(i - 1).count());
    EXPECT_NEAR(ratio, std::exp2(0.25), 1e-3) << "bucket " << i;
  }
  // The last finite bound is about two minutes; the last bucket has none.
  const auto last_finite = LatencyHistogram::bound(LatencyHistogram::kBuckets - 2);
  EXPECT_GT(last_finite, 100s);
  EXPECT_LT(last_finite, 130s);
  EXPECT_EQ(LatencyHistogram::bound(LatencyHistogram::kBuckets - 1), nanoseconds::max());
}

TEST(LatencyHistogramTest, ASampleOnABoundBelongsToThatBucketAndOneNanosecondMoreToTheNext) {
  for (std::size_t i : {0u, 1u, 7u, 40u, 94u}) {
    const auto b = LatencyHistogram::bound(i);
    EXPECT_EQ(bucket_for(b), i) << "on bound " << i;
    EXPECT_EQ(bucket_for(b + 1ns), i + 1) << "just past bound " << i;
    if (i > 0) {
      EXPECT_EQ(bucket_for(LatencyHistogram::bound(i - 1) + 1ns), i) << "just inside bucket " << i;
    }
  }
}

TEST(LatencyHistogramTest, ZeroNegativeAndHugeSamplesLandInTheEndBuckets) {
  EXPECT_EQ(bucket_for(0ns), 0u);
  EXPECT_EQ(bucket_for(-5ms), 0u);
  EXPECT_EQ(bucket_for(1h), LatencyHistogram::kBuckets - 1);

  LatencyHistogram h;
  h.record(-5ms);
  EXPECT_EQ(h.min(), 0ns) << "a negative latency counts as 0";
  EXPECT_EQ(h.sum(), 0ns);
}

TEST(LatencyHistogramTest, CountSumMinMaxAndMeanAreExact) {
  LatencyHistogram h;
  h.record(1234567ns);
  h.record(3ms);
  h.record(17us);
  EXPECT_EQ(h.count(), 3u);
  EXPECT_EQ(h.sum(), 1234567ns + 3ms + 17us);
  EXPECT_EQ(h.min(), 17us);
  EXPECT_EQ(h.max(), 3ms);
  EXPECT_EQ(h.mean(), (1234567ns + 3ms + 17us) / 3);
}

TEST(LatencyHistogramTest, QuantilesAreBucketUpperBoundsWithinOneBucketWidth) {
  LatencyHistogram h;
  for (int ms = 1; ms <= 100; ++ms) h.record(std::chrono::milliseconds(ms));
  const double width = std::exp2(0.25);
  for (double q : {0.1, 0.5, 0.9, 0.99}) {
    const auto exact = std::chrono::milliseconds(static_cast<int>(std::ceil(q * 100)));
    const auto read = h.quantile(q);
    EXPECT_GE(read, exact) << "q=" << q;
    EXPECT_LE(static_cast<double>(read.count()), static_cast<double>(nanoseconds(exact).count()) * width) << "q=" << q;
  }
  // The ends are clamped to the exact extremes.
  EXPECT_EQ(h.quantile(0.0), 1ms);
  EXPECT_EQ(h.quantile(1.0), 100ms);
  // Out of range and NaN are taken as the nearest end.
  EXPECT_EQ(h.quantile(2.0), 100ms);
  EXPECT_EQ(h.quantile(-1.0), 1ms);
  EXPECT_EQ(h.quantile(std::nan("")), 1ms);
}

TEST(LatencyHistogramTest, ASingleSampleIsEveryQuantile) {
  LatencyHistogram h;
  h.record(777us);
  EXPECT_EQ(h.quantile(0.0), 777us);
  EXPECT_EQ(h.quantile(0.5), 777us);
  EXPECT_EQ(h.quantile(1.0), 777us);
}

TEST(LatencyHistogramTest, QuantileInTheOpenBucketIsTheMaximum) {
  LatencyHistogram h;
  h.record(1ms);
  h.record(10min);
  EXPECT_EQ(h.quantile(1.0), 10min);
  EXPECT_EQ(h.quantile(0.5), LatencyHistogram::bound(bucket_for(1ms)));  // 1 ms is no bound: its bucket's
}

TEST(LatencyHistogramTest, MergeEqualsRecordingEverySampleInOne) {
  LatencyHistogram a, b, all;
  for (int i = 0; i < 50; ++i) {
    const auto sample = std::chrono::microseconds(7 + i * i * 13);
    (i % 3 == 0 ? a : b).record(sample);
    all.record(sample);
  }
  LatencyHistogram merged = a;
  merged.merge(b);
  EXPECT_EQ(merged.count(), all.count());
  EXPECT_EQ(merged.sum(), all.sum());
  EXPECT_EQ(merged.min(), all.min());
  EXPECT_EQ(merged.max(), all.max());
  for (std::size_t i = 0; i < LatencyHistogram::kBuckets; ++i) EXPECT_EQ(merged.bucket_count(i), all.bucket_count(i)) << i;
  for (double q : {0.0, 0.25, 0.5, 0.75, 1.0}) EXPECT_EQ(merged.quantile(q), all.quantile(q)) << q;

  // Merging an empty histogram changes nothing, in either direction.
  LatencyHistogram empty;
  merged.merge(empty);
  EXPECT_EQ(merged.min(), all.min());
  empty.merge(all);
  EXPECT_EQ(empty.min(), all.min());
  EXPECT_EQ(empty.count(), all.count());
}

}  // namespace
}  // namespace loom::actors

// LatencySamples: nearest-rank percentiles, exact count/mean/min/max, the bounded reservoir.
#include "latency_samples.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace loom::loadgen {
namespace {

TEST(LatencySamples, EmptyHasNoStatistics) {
  const LatencySamples samples;
  EXPECT_TRUE(samples.empty());
  EXPECT_EQ(samples.count(), 0u);
  EXPECT_FALSE(samples.percentile(50));
  EXPECT_FALSE(samples.mean());
  EXPECT_FALSE(samples.min());
  EXPECT_FALSE(samples.max());
}

TEST(LatencySamples, NearestRankOfOneToHundredInAnyOrder) {
  std::vector<double> values(100);
  std::iota(values.begin(), values.end(), 1.0);
  std::shuffle(values.begin(), values.end(), std::mt19937(7));
  LatencySamples samples;
  for (const double value : values) samples.add(value);
  EXPECT_EQ(samples.percentile(50), 50.0);
  EXPECT_EQ(samples.percentile(90), 90.0);
  // p / 100 * n is 7.000000000000001 and 56.00000000000001 in doubles: rank 8 and 57 if computed that way.
  EXPECT_EQ(samples.percentile(7), 7.0);
  EXPECT_EQ(samples.percentile(56), 56.0);
  EXPECT_EQ(samples.percentile(99), 99.0);
  EXPECT_EQ(samples.percentile(100), 100.0);
  EXPECT_EQ(samples.percentile(0), 1.0);
  EXPECT_EQ(samples.percentile(0.5), 1.0);
  EXPECT_EQ(samples.percentile(99.5), 100.0);
  EXPECT_EQ(samples.mean(), 50.5);
  EXPECT_EQ(samples.min(), 1.0);
  EXPECT_EQ(samples.max(), 100.0);
  EXPECT_FALSE(samples.sampled());
}

TEST(LatencySamples, NinetyNinePointNineOfAThousandIsTheNineHundredNinetyNinth) {
  LatencySamples samples;
  for (int i = 1000; i >= 1; --i) samples.add(i);
  EXPECT_EQ(samples.percentile(99.9), 999.0);
  EXPECT_EQ(samples.percentile(99.91), 1000.0);
}

TEST(LatencySamples, SmallSetsGiveMeasuredValuesInOrder) {
  LatencySamples samples;
  for (const double value : {30.0, 10.0, 20.0}) samples.add(value);
  EXPECT_EQ(samples.percentile(33), 10.0);
  EXPECT_EQ(samples.percentile(34), 20.0);
  EXPECT_EQ(samples.percentile(50), 20.0);
  EXPECT_EQ(samples.percentile(90), 30.0);
  EXPECT_EQ(samples.percentile(99), 30.0);
  LatencySamples one;
  one.add(4.5);
  EXPECT_EQ(one.percentile(0), 4.5);
  EXPECT_EQ(one.percentile(50), 4.5);
  EXPECT_EQ(one.percentile(100), 4.5);
}

TEST(LatencySamples, AddingAfterAPercentileKeepsItRight) {
  LatencySamples samples;
  samples.add(5);
  samples.add(1);
  EXPECT_EQ(samples.percentile(100), 5.0);
  samples.add(3);
  samples.add(0.5);
  EXPECT_EQ(samples.percentile(50), 1.0);
  EXPECT_EQ(samples.percentile(100), 5.0);
  EXPECT_EQ(samples.min(), 0.5);
}

TEST(LatencySamples, PastCapacityKeepsAUniformSampleAndExactTotals) {
  LatencySamples samples(1000);
  for (int i = 1; i <= 100000; ++i) samples.add(i);
  EXPECT_EQ(samples.count(), 100000u);
  EXPECT_TRUE(samples.sampled());
  EXPECT_EQ(samples.min(), 1.0);
  EXPECT_EQ(samples.max(), 100000.0);
  EXPECT_DOUBLE_EQ(*samples.mean(), 50000.5);
  // A uniform sample of 1000 from 1..100000: its quantiles are within a few percent of the true ones.
  EXPECT_NEAR(*samples.percentile(50), 50000, 5000);
  EXPECT_NEAR(*samples.percentile(90), 90000, 3000);
  EXPECT_LE(*samples.percentile(50), *samples.percentile(90));
  EXPECT_LE(*samples.percentile(90), *samples.percentile(99));
  // The same values give the same sample: runs repeat.
  LatencySamples again(1000);
  for (int i = 1; i <= 100000; ++i) again.add(i);
  EXPECT_EQ(samples.percentile(50), again.percentile(50));
}

}  // namespace
}  // namespace loom::loadgen

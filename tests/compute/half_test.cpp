// f16 and bf16 conversions: exhaustive round trips over every 16-bit pattern, and rounding of f32 values
// checked against a reference that finds the nearest representable value by search.
#include "loom/compute/model/half.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace loom::compute {
namespace {

// IEEE half value from its fields, computed in double with ldexp: a different route from the bit shuffling.
double half_value_reference(std::uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exponent = (h >> 10) & 31;
  const int mantissa = h & 1023;
  double v;
  if (exponent == 31) {
    v = mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    v = std::ldexp(mantissa, -24);
  } else {
    v = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return sign ? -v : v;
}

// All finite non-negative halves in increasing order (bit patterns 0x0000..0x7BFF are monotonic).
std::vector<double> positive_halves() {
  std::vector<double> v;
  for (std::uint32_t h = 0; h <= 0x7BFF; ++h) v.push_back(half_value_reference(static_cast<std::uint16_t>(h)));
  return v;
}

// Round-to-nearest-even by search, the slow obvious way.
std::uint16_t float_to_half_reference(float f, const std::vector<double>& halves) {
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  const double max_half = 65504.0, overflow_tie = 65520.0;  // halfway from 65504 to 2^16
  if (a >= overflow_tie) return sign | 0x7C00;
  if (a >= max_half) return sign | 0x7BFF;
  auto it = std::lower_bound(halves.begin(), halves.end(), a);
  const auto hi = static_cast<std::uint16_t>(it - halves.begin());
  if (halves[hi] == a || hi == 0) return sign | hi;
  const std::uint16_t lo = hi - 1;
  const double dlo = a - halves[lo], dhi = halves[hi] - a;
  if (dlo < dhi) return sign | lo;
  if (dhi < dlo) return sign | hi;
  return sign | ((lo & 1) ? hi : lo);
}

TEST(HalfConversion, EveryHalfConvertsExactly) {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float f = half_to_float(h);
    const double expected = half_value_reference(h);
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << bits;
      const std::uint16_t back = float_to_half(f);
      EXPECT_EQ(back & 0x7C00, 0x7C00) << std::hex << bits;
      EXPECT_NE(back & 0x03FF, 0) << "NaN must stay NaN, bits " << std::hex << bits;
      EXPECT_EQ(back & 0x8000, bits & 0x8000);
      continue;
    }
    EXPECT_EQ(static_cast<double>(f), expected) << std::hex << bits;
    EXPECT_EQ(std::signbit(f), (bits & 0x8000) != 0) << std::hex << bits;
    EXPECT_EQ(float_to_half(f), h) << "round trip of " << std::hex << bits;
  }
}

TEST(HalfConversion, EdgeValues) {
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);    // largest finite
  EXPECT_EQ(float_to_half(65519.996f), 0x7BFF);  // just below the overflow tie
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);    // the tie rounds to even: infinity
  EXPECT_EQ(float_to_half(1e9f), 0x7C00);
  EXPECT_EQ(float_to_half(-1e9f), 0xFC00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 2^-24: even is 0
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);     // tie between 1 and 2 ulps: even is 2
  EXPECT_EQ(float_to_half(std::ldexp(1023.5f, -24)), 0x0400);  // largest subnormal rounds up into normals
  EXPECT_EQ(float_to_half(1e-10f), 0x0000);
  EXPECT_EQ(float_to_half(-1e-10f), 0x8000);
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie: stays at even 1.0
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // tie: goes up to even
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  // A signalling NaN whose payload lives only in bits that f16 drops must not become infinity.
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::bit_cast<float>(0x7F800001u)))));
  EXPECT_EQ(half_to_float(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float(0x03FF), std::ldexp(1023.0f, -24));
}

TEST(HalfConversion, RoundsToNearestEvenLikeTheSearchReference) {
  const std::vector<double> halves = positive_halves();
  // Every midpoint between neighbouring halves, and the floats right beside it.
  for (std::size_t i = 0; i + 1 < halves.size(); ++i) {
    const float mid = static_cast<float>((halves[i] + halves[i + 1]) / 2);  // exact in f32
    for (const float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e6f), -mid}) {
      ASSERT_EQ(float_to_half(f), float_to_half_reference(f, halves)) << f;
    }
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const float f = std::bit_cast<float>(bits(rng));
    if (std::isnan(f) || std::isinf(f)) continue;
    ASSERT_EQ(float_to_half(f), float_to_half_reference(f, halves)) << f;
  }
  std::lognormal_distribution<float> spread(0.0f, 6.0f);
  for (int i = 0; i < 200000; ++i) {
    const float f = spread(rng) * (i % 2 ? 1.0f : -1.0f);
    ASSERT_EQ(float_to_half(f), float_to_half_reference(f, halves)) << f;
  }
}

TEST(HalfConversion, IsConstexpr) {
  static_assert(half_to_float(0x3C00) == 1.0f);
  static_assert(float_to_half(-2.0f) == 0xC000);
  static_assert(half_to_float(0x0001) == 5.9604644775390625e-08f);
  static_assert(bf16_to_float(0x3F80) == 1.0f);
  static_assert(float_to_bf16(1.0f) == 0x3F80);
  SUCCEED();
}

TEST(HalfBf16Conversion, EveryBf16ConvertsExactly) {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const auto b = static_cast<std::uint16_t>(bits);
    const float f = bf16_to_float(b);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(f), bits << 16);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f))));
    } else {
      EXPECT_EQ(float_to_bf16(f), b);
    }
  }
}

TEST(HalfBf16Conversion, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie: stays at even
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3F82);  // tie: up to even
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3F81);
  EXPECT_EQ(float_to_bf16(-1.0f), 0xBF80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // past the last bf16: infinity
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::bit_cast<float>(0x7F800001u)))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::bit_cast<float>(0xFFC00000u)))));
  // Against a search reference on random floats: the nearer of the two neighbours, ties to even.
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t u = bits(rng);
    const float f = std::bit_cast<float>(u);
    if ((u & 0x7FFFFFFFu) >= 0x7F7F0000u) continue;  // at or above the largest bf16: covered above
    const std::uint32_t down = u & 0xFFFF0000u, up = down + 0x10000u;
    const double dd = std::fabs(static_cast<double>(f) - static_cast<double>(std::bit_cast<float>(down)));
    const double du = std::fabs(static_cast<double>(std::bit_cast<float>(up)) - static_cast<double>(f));
    const std::uint32_t expected = dd < du ? down : du < dd ? up : ((down >> 16) & 1 ? up : down);
    ASSERT_EQ(float_to_bf16(f), static_cast<std::uint16_t>(expected >> 16)) << std::hex << u;
  }
}

}  // namespace
}  // namespace loom::compute

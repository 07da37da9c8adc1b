// The kernels whose arithmetic is pinned to the reference implementation's (attention.hpp, vec_dot.hpp):
// each is checked bit for bit against a spelled-out emulation of that order written here, the AVX2 path
// against the scalar one, and both against plain double-precision math within rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <bit>
#include <stdexcept>
#include <string>
#include <limits>
#include <random>
#include <vector>

#include "loom/compute/cpu/attention.hpp"
#include "loom/compute/cpu/kernel_path.hpp"
#include "loom/compute/cpu/quantize.hpp"
#include "loom/compute/cpu/rotary.hpp"
#include "loom/compute/cpu/vec_dot.hpp"
#include "loom/compute/model/half.hpp"
#include "loom/compute/model/quant_blocks.hpp"

namespace loom::compute {
namespace {

std::uint32_t summation_bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// Sixteen lanes summed as an AVX-512 horizontal add: lanes l and l + 8, then four apart, then pairs.
float sum_16_lanes(const float (&x)[16]) {
  float t[8];
  for (int i = 0; i < 8; ++i) t[i] = x[i] + x[i + 8];
  return ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7]));
}

// ---- vector_expf / swiglu ----

TEST(VectorExpf, WithinTwoUlpOfExpf) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-87.0f, 88.0f);
  for (int i = 0; i < 200000; ++i) {
    const float x = u(rng);
    const float want = std::exp(x);
    const float got = vector_expf(x);
    const auto ulps = std::abs(static_cast<std::int64_t>(summation_bits(got)) - static_cast<std::int64_t>(summation_bits(want)));
    ASSERT_LE(ulps, 2) << "x = " << x << ": " << got << " vs expf " << want;
  }
}

TEST(VectorExpf, LimitsAndSubnormals) {
  EXPECT_EQ(vector_expf(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(vector_expf(0.0f), 1.0f);
  EXPECT_EQ(vector_expf(-200.0f), 0.0f);
  EXPECT_TRUE(std::isinf(vector_expf(100.0f)));
  // The split-scale path (|n| > 126) reaches the subnormals with the right magnitude.
  const float tiny = vector_expf(-100.0f);
  EXPECT_GT(tiny, 0.0f);
  EXPECT_NEAR(tiny / std::exp(-100.0f), 1.0f, 1e-5f);
}

// The AVX2 exp gives the scalar bits everywhere, the two-step scaling of |n| > 126 (results near the float
// limits and in the subnormals) and the 0 / inf limits included.
TEST(VectorExpf, Avx2GivesTheScalarBits) {
  std::vector<float> x;
  for (float v = -200.0f; v < 100.0f; v += 0.0137f) x.push_back(v);
  for (float v = -105.0f; v < -86.0f; v += 0.00071f) x.push_back(v);  // the subnormal results
  for (float v = 87.0f; v < 90.0f; v += 0.00013f) x.push_back(v);     // the last finite results and overflow
  for (float v : {0.0f, -0.0f, -INFINITY, INFINITY, 1e-30f, -1e-30f, 88.72283f, 88.72284f, -103.97208f, -133.0f, 133.0f})
    x.push_back(v);
  std::vector<float> scalar(x.size()), simd(x.size());
  vector_expf(x.data(), scalar.data(), static_cast<std::int64_t>(x.size()), KernelPath::scalar);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(summation_bits(scalar[i]), summation_bits(vector_expf(x[i]))) << x[i];
  int subnormal = 0;
  for (float v : scalar) subnormal += v > 0.0f && v < std::numeric_limits<float>::min();
  EXPECT_GT(subnormal, 1000) << "the sweep misses the subnormal results";
  if (!kernel_path_supported(KernelPath::avx2)) GTEST_SKIP() << "this CPU has no AVX2+FMA+F16C: only the scalar path ran";
  vector_expf(x.data(), simd.data(), static_cast<std::int64_t>(x.size()), KernelPath::avx2);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(summation_bits(simd[i]), summation_bits(scalar[i])) << "x = " << x[i];
}

// The AVX2 reference's exp (avx2_expf, the softmax of LaneWidth::avx2): the AVX2 kernel gives its bits on the
// same sweep, and it differs from vector_expf in the last bit for some inputs (2^n + 2^n p(b) in one FMA).
TEST(VectorExpf, Avx2ReferenceFormGivesTheScalarBits) {
  std::vector<float> x;
  for (float v = -200.0f; v < 100.0f; v += 0.0137f) x.push_back(v);
  for (float v = -105.0f; v < -86.0f; v += 0.00071f) x.push_back(v);
  for (float v = 87.0f; v < 90.0f; v += 0.00013f) x.push_back(v);
  for (float v : {0.0f, -0.0f, -INFINITY, INFINITY, 88.72283f, 88.72284f, -103.97208f, -133.0f, 133.0f}) x.push_back(v);
  int differs = 0;
  for (float v : x) {
    const float want = avx2_expf(v);
    if (std::isfinite(v) && v > -80.0f && v < 80.0f) {
      ASSERT_NEAR(want, std::exp(static_cast<double>(v)), 4e-7 * std::exp(static_cast<double>(v))) << v;
    }
    differs += summation_bits(want) != summation_bits(vector_expf(v));
  }
  EXPECT_EQ(avx2_expf(-INFINITY), 0.0f);
  EXPECT_EQ(avx2_expf(0.0f), 1.0f);
  EXPECT_TRUE(std::isinf(avx2_expf(100.0f)));
  EXPECT_GT(differs, 0) << "the two exps never differ on the sweep";
  std::vector<float> scalar(x.size()), simd(x.size());
  avx2_expf(x.data(), scalar.data(), static_cast<std::int64_t>(x.size()), KernelPath::scalar);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(summation_bits(scalar[i]), summation_bits(avx2_expf(x[i]))) << x[i];
  if (!kernel_path_supported(KernelPath::avx2)) GTEST_SKIP() << "this CPU has no AVX2+FMA+F16C: only the scalar path ran";
  avx2_expf(x.data(), simd.data(), static_cast<std::int64_t>(x.size()), KernelPath::avx2);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(summation_bits(simd[i]), summation_bits(scalar[i])) << "x = " << x[i];
}

// The exp's last step: 1 + p(b) is rounded to float and then scaled (not 2^n + 2^n p(b) with one rounding).
// Spelled out here for x = 0.3 (n = 0): the two forms round differently for some inputs, so sweep for one.
TEST(VectorExpf, RoundsOnePlusPolynomialThenScales) {
  int other_form_differs = 0;
  for (float x = -2.0f; x < 2.0f; x += 0.001f) {
    const float shifter = 0x1.8p23f;
    const float z = std::fma(x, 0x1.715476p+0f, shifter);
    const float n = z - shifter;
    const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float p = std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f));
    const float scale = std::ldexp(1.0f, static_cast<int>(n));
    const float want = std::fma(p, u, std::fma(0x1.ffffecp-1f, b, 1.0f)) * scale;
    const float other = std::fma(scale, std::fma(p, u, 0x1.ffffecp-1f * b), scale);
    ASSERT_EQ(summation_bits(vector_expf(x)), summation_bits(want)) << "x = " << x;
    other_form_differs += summation_bits(other) != summation_bits(want);
  }
  EXPECT_GT(other_form_differs, 0) << "the sweep does not tell the two forms apart";
}

// Keys and values entering an F16 cache: F16C's conversion must give float_to_half's bits, ties to even,
// subnormals and overflow included (NaN aside: only its NaN-ness is compared).
TEST(StoreAsF16, Avx2GivesTheScalarBits) {
  std::vector<float> x;
  for (std::uint32_t h = 0; h < 0x7C00; ++h) {
    const float v = half_to_float(static_cast<std::uint16_t>(h));
    const float next = half_to_float(static_cast<std::uint16_t>(h + 1));
    const float mid = (v + next) / 2;  // exact: at most 12 significant bits
    for (float y : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      x.push_back(y);
      x.push_back(-y);
    }
  }
  for (float y : {65504.0f, 65519.99f, 65520.0f, 1e30f, INFINITY, 1e-30f, 2.9e-8f, 3.0e-8f, std::nanf("")}) {
    x.push_back(y);
    x.push_back(-y);
  }
  x.push_back(1.0f);  // an odd count: the last values take the one-at-a-time tail
  std::vector<std::uint16_t> scalar(x.size()), simd(x.size());
  store_as_f16(x.data(), scalar.data(), static_cast<std::int64_t>(x.size()), KernelPath::scalar);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(scalar[i], float_to_half(x[i])) << x[i];
  if (!kernel_path_supported(KernelPath::avx2)) GTEST_SKIP() << "this CPU has no AVX2+FMA+F16C: only the scalar path ran";
  store_as_f16(x.data(), simd.data(), static_cast<std::int64_t>(x.size()), KernelPath::avx2);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      ASSERT_TRUE(std::isnan(half_to_float(simd[i])));
    } else {
      ASSERT_EQ(simd[i], scalar[i]) << "value " << x[i] << " (index " << i << ")";
    }
  }
}

TEST(Swiglu, Avx2MatchesScalarBitForBitAndMath) {
  if (!kernel_path_supported(KernelPath::avx2)) GTEST_SKIP() << "this CPU has no AVX2+FMA+F16C: only the scalar path runs";
  std::mt19937 rng(2);
  std::normal_distribution<float> g(0.0f, 4.0f);
  for (std::int64_t n : {1, 7, 8, 172, 768}) {
    std::vector<float> gate(static_cast<std::size_t>(n)), up(gate.size());
    for (auto& v : gate) v = g(rng);
    for (auto& v : up) v = g(rng);
    gate[0] = -150.0f;  // exp overflow region of silu(-x)
    for (LaneWidth lanes : {LaneWidth::avx512, LaneWidth::avx2}) {  // the reference's AVX-512 and AVX2 forms
      std::vector<float> a = gate, b = gate;
      swiglu(a.data(), up.data(), n, KernelPath::scalar, lanes);
      swiglu(b.data(), up.data(), n, KernelPath::avx2, lanes);
      for (std::int64_t i = 0; i < n; ++i) {
        const auto k = static_cast<std::size_t>(i);
        ASSERT_EQ(summation_bits(a[k]), summation_bits(b[k])) << "n " << n << " i " << i << (lanes == LaneWidth::avx2 ? " (AVX2 form)" : "");
        const double x = gate[k];
        const double want = x / (1.0 + std::exp(-x)) * up[k];
        EXPECT_NEAR(a[k], want, 1e-5 * (1.0 + std::fabs(want))) << "n " << n << " i " << i;
      }
    }
  }
}

// ---- rotary embedding ----

TEST(RotatePairs, FusesTheFirstProductOfEachLine) {
  constexpr std::int64_t heads = 3, head_dim = 48;
  std::mt19937 rng(9);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_real_distribution<float> angle(-100.0f, 100.0f);
  std::vector<float> x(static_cast<std::size_t>(heads * head_dim)), rotation(static_cast<std::size_t>(head_dim));
  for (auto& v : x) v = g(rng);
  for (std::int64_t i = 0; i < head_dim / 2; ++i) {
    const float a = angle(rng);
    rotation[static_cast<std::size_t>(2 * i)] = std::cos(a);
    rotation[static_cast<std::size_t>(2 * i + 1)] = std::sin(a);
  }
  for (const bool adjacent : {true, false}) {
    std::vector<float> want = x;
    int unfused_differs = 0;
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t i = 0; i < head_dim / 2; ++i) {
        const auto a = static_cast<std::size_t>(h * head_dim + (adjacent ? 2 * i : i));
        const auto b = static_cast<std::size_t>(h * head_dim + (adjacent ? 2 * i + 1 : i + head_dim / 2));
        const float c = rotation[static_cast<std::size_t>(2 * i)], s = rotation[static_cast<std::size_t>(2 * i + 1)];
        want[a] = std::fma(x[a], c, -(x[b] * s));
        want[b] = std::fma(x[a], s, x[b] * c);
        const float plain_a = x[a] * c - x[b] * s, plain_b = x[a] * s + x[b] * c;
        unfused_differs += (summation_bits(plain_a) != summation_bits(want[a])) + (summation_bits(plain_b) != summation_bits(want[b]));
      }
    }
    EXPECT_GT(unfused_differs, 0) << "the data does not tell fused from unfused products";
    for (const KernelPath path : {KernelPath::scalar, KernelPath::avx2}) {
      if (!kernel_path_supported(path)) {
        std::printf("[ skipped ] AVX2 path: not supported by this CPU\n");
        continue;
      }
      std::vector<float> got = x;
      rotate_pairs(got.data(), heads, head_dim, rotation.data(), adjacent, path);
      for (std::size_t k = 0; k < got.size(); ++k) {
        ASSERT_EQ(summation_bits(got[k]), summation_bits(want[k])) << (adjacent ? "adjacent" : "halves") << " path " << static_cast<int>(path) << " at " << k;
      }
    }
  }
}

// ---- attention ----

struct AttentionCase {
  std::int64_t positions, head_dim;
  SumOrder order;
  std::int64_t span = 0;
  LaneWidth lanes = LaneWidth::avx512;
};

// Plain attention in double over the same F16-rounded query, keys and values.
std::vector<double> naive_attention(const std::vector<std::uint16_t>& keys, const std::vector<std::uint16_t>& values,
                                    const std::vector<float>& query, std::size_t stride, std::int64_t positions,
                                    std::int64_t head_dim, float scale) {
  std::vector<double> scores(static_cast<std::size_t>(positions));
  double max_score = -INFINITY;
  for (std::int64_t p = 0; p < positions; ++p) {
    double s = 0;
    for (std::int64_t d = 0; d < head_dim; ++d) {
      s += static_cast<double>(half_to_float(float_to_half(query[static_cast<std::size_t>(d)]))) *
           half_to_float(keys[static_cast<std::size_t>(p) * stride + static_cast<std::size_t>(d)]);
    }
    scores[static_cast<std::size_t>(p)] = s * scale;
    max_score = std::max(max_score, s * scale);
  }
  double sum = 0;
  for (auto& s : scores) sum += (s = std::exp(s - max_score));
  std::vector<double> out(static_cast<std::size_t>(head_dim), 0.0);
  for (std::int64_t p = 0; p < positions; ++p) {
    for (std::int64_t d = 0; d < head_dim; ++d) {
      out[static_cast<std::size_t>(d)] += scores[static_cast<std::size_t>(p)] / sum *
                                          half_to_float(values[static_cast<std::size_t>(p) * stride + static_cast<std::size_t>(d)]);
    }
  }
  return out;
}

// One head over F16 keys and values `stride` elements apart, scratch and output supplied by the caller.
HeadAttention f16_head(const std::vector<float>& query, const std::vector<std::uint16_t>& keys,
                       const std::vector<std::uint16_t>& values, std::size_t stride, std::int64_t positions,
                       std::int64_t head_dim, float scale, SumOrder order, std::vector<float>& scratch, float* out) {
  HeadAttention head;
  head.query = query.data();
  head.keys = keys.data();
  head.values = values.data();
  head.stride = stride;
  head.positions = positions;
  head.head_dim = head_dim;
  head.scale = scale;
  head.order = order;
  head.scores = scratch.data();
  head.out = out;
  return head;
}

class AttentionOrders : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionOrders, PathsAgreeBitForBitAndMatchPlainMath) {
  const auto [positions, head_dim, order, span, lanes] = GetParam();
  const std::size_t stride = static_cast<std::size_t>(head_dim) + 3;  // other heads sit between positions
  std::mt19937 rng(static_cast<unsigned>(positions * 131 + head_dim));
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<std::uint16_t> keys(static_cast<std::size_t>(positions) * stride), values(keys.size());
  for (auto& k : keys) k = float_to_half(g(rng));
  for (auto& v : values) v = float_to_half(g(rng));
  std::vector<float> query(static_cast<std::size_t>(head_dim));
  for (auto& q : query) q = 2.0f * g(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));

  std::vector<float> scratch(attention_scratch_floats(std::max(span, positions), head_dim));
  std::vector<float> scalar_out(static_cast<std::size_t>(head_dim)), simd_out(scalar_out.size());
  HeadAttention head = f16_head(query, keys, values, stride, positions, head_dim, scale, order, scratch, scalar_out.data());
  head.span = span;
  head.lanes = lanes;
  const std::vector<float> query_before = query;
  attend(head, KernelPath::scalar);
  EXPECT_EQ(query, query_before) << "the query is an input only";

  const auto want = naive_attention(keys, values, query, stride, positions, head_dim, scale);
  for (std::int64_t d = 0; d < head_dim; ++d) {
    // Probabilities are rounded to F16 (relative 2^-11) before they weight the values.
    EXPECT_NEAR(scalar_out[static_cast<std::size_t>(d)], want[static_cast<std::size_t>(d)], 2e-3) << "dim " << d;
  }
  if (!kernel_path_supported(KernelPath::avx2)) GTEST_SKIP() << "this CPU has no AVX2+FMA+F16C: only the scalar path ran";
  head.out = simd_out.data();
  attend(head, KernelPath::avx2);
  for (std::int64_t d = 0; d < head_dim; ++d) {
    ASSERT_EQ(summation_bits(scalar_out[static_cast<std::size_t>(d)]), summation_bits(simd_out[static_cast<std::size_t>(d)])) << "dim " << d;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionOrders,
    ::testing::Values(AttentionCase{1, 32, SumOrder::vector_dot}, AttentionCase{1, 32, SumOrder::tiled},
                      AttentionCase{7, 16, SumOrder::vector_dot}, AttentionCase{7, 16, SumOrder::tiled},
                      AttentionCase{33, 64, SumOrder::vector_dot}, AttentionCase{33, 64, SumOrder::tiled},
                      AttentionCase{100, 80, SumOrder::vector_dot}, AttentionCase{100, 80, SumOrder::tiled},
                      AttentionCase{65, 128, SumOrder::vector_dot}, AttentionCase{40, 20, SumOrder::tiled},
                      AttentionCase{9, 6, SumOrder::tiled}, AttentionCase{300, 64, SumOrder::vector_dot},
                      // Spans padded as the reference's (reference_span): 64-cell steps plus a rest, all in
                      // steps, 16-lane tiles, and a span that is not a multiple of 16 (a capped cache).
                      AttentionCase{70, 64, SumOrder::vector_dot, 96}, AttentionCase{40, 32, SumOrder::vector_dot, 64},
                      AttentionCase{13, 32, SumOrder::tiled, 32}, AttentionCase{45, 48, SumOrder::tiled, 64},
                      AttentionCase{100, 16, SumOrder::tiled, 100}, AttentionCase{130, 20, SumOrder::vector_dot, 160},
                      // The reference's AVX2 orders: 32-element steps of four 8-lane accumulators, 8-lane tiles
                      // (a head of 40 or 24 tiles here, not with 16 lanes), steps plus a rest, spans of 32 cells.
                      AttentionCase{33, 64, SumOrder::vector_dot, 64, LaneWidth::avx2},
                      AttentionCase{70, 40, SumOrder::vector_dot, 96, LaneWidth::avx2},
                      AttentionCase{45, 40, SumOrder::tiled, 64, LaneWidth::avx2},
                      AttentionCase{100, 24, SumOrder::tiled, 100, LaneWidth::avx2},
                      AttentionCase{7, 16, SumOrder::tiled, 0, LaneWidth::avx2},
                      AttentionCase{300, 128, SumOrder::vector_dot, 320, LaneWidth::avx2},
                      AttentionCase{130, 20, SumOrder::vector_dot, 160, LaneWidth::avx2},
                      AttentionCase{9, 6, SumOrder::tiled, 0, LaneWidth::avx2}),
    [](const auto& tested) {
      return "p" + std::to_string(tested.param.positions) + "_d" + std::to_string(tested.param.head_dim) +
             (tested.param.order == SumOrder::tiled ? "_tiled" : "_vector_dot") +
             (tested.param.span != 0 ? "_span" + std::to_string(tested.param.span) : "") +
             (tested.param.lanes == LaneWidth::avx2 ? "_avx2" : "");
    });

TEST(Attention, ReferenceSpanPadsTo32CellsWithinTheCache) {
  EXPECT_EQ(reference_span(1, 2048), 32);
  EXPECT_EQ(reference_span(32, 2048), 32);
  EXPECT_EQ(reference_span(33, 2048), 64);
  EXPECT_EQ(reference_span(100, 128), 128);
  EXPECT_EQ(reference_span(120, 120), 120);  // capped at the cache
  EXPECT_EQ(reference_span(101, 110), 110);
  EXPECT_EQ(reference_span(50, 40), 50);     // never shorter than the positions
}

// Random F16 keys and values (head_dim apart) and a zero query: every position gets the probability
// f16(float(1 / positions)), so a test can spell out the expected weighted sums.
struct ZeroQueryHead {
  std::vector<std::uint16_t> keys, values;
  std::vector<float> query;
  float probability;
  ZeroQueryHead(std::int64_t positions, std::int64_t head_dim, unsigned seed)
      : keys(static_cast<std::size_t>(positions * head_dim)),
        values(keys.size()),
        query(static_cast<std::size_t>(head_dim), 0.0f),
        probability(half_to_float(float_to_half(static_cast<float>(1.0 / static_cast<double>(positions))))) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (auto& k : keys) k = float_to_half(g(rng));
    for (auto& v : values) v = float_to_half(g(rng));
  }
};

// One query over a padded span: the first span - span % 64 cells in four 16-lane float accumulators (cells
// past the sequence add nothing), the rest in double; a batch over a span that is a multiple of 16: one
// 16-lane accumulator. A zero query gives every position the probability f16(float(1 / n)), so the expected
// bits can be spelled out; the data is checked to tell each order from a plain double sum.
TEST(Attention, PaddedSpanChoosesTheLaneOrders) {
  constexpr std::int64_t positions = 100, head_dim = 24;
  const ZeroQueryHead zero(positions, head_dim, 8);
  const auto& [keys, values, query, probability] = zero;
  const auto product = [&](std::int64_t p, std::int64_t d) {
    return half_to_float(values[static_cast<std::size_t>(p * head_dim + d)]) * probability;
  };
  struct Case {
    SumOrder order;
    std::int64_t span;
  };
  for (const Case c : {Case{SumOrder::vector_dot, 128}, Case{SumOrder::vector_dot, 100}, Case{SumOrder::tiled, 128}}) {
    std::vector<float> want(static_cast<std::size_t>(head_dim));
    int differs_from_double = 0;
    for (std::int64_t d = 0; d < head_dim; ++d) {
      double plain = 0.0;
      for (std::int64_t p = 0; p < positions; ++p) plain += static_cast<double>(product(p, d));
      float result;
      if (c.order == SumOrder::tiled) {
        float lanes[16] = {};
        // Each lane adds by FMA; an F16 value times an F16 probability is exact in float, so the FMA is this add.
        for (std::int64_t p = 0; p < positions; ++p) lanes[p % 16] += product(p, d);
        result = sum_16_lanes(lanes);
      } else {
        const std::int64_t in_lanes = std::min(positions, c.span / 64 * 64);
        float acc[4][16] = {};
        for (std::int64_t p = 0; p < in_lanes; ++p) acc[(p / 16) % 4][p % 16] += product(p, d);  // (the FMA, as above)
        float folded[16];
        for (int l = 0; l < 16; ++l) folded[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
        double sum = sum_16_lanes(folded);
        for (std::int64_t p = in_lanes; p < positions; ++p) sum += static_cast<double>(product(p, d));
        result = static_cast<float>(sum);
      }
      want[static_cast<std::size_t>(d)] = result;
      differs_from_double += summation_bits(result) != summation_bits(static_cast<float>(plain));
    }
    ASSERT_GT(differs_from_double, 0) << "span " << c.span << ": the data does not tell the order from a double sum";

    std::vector<float> scratch(attention_scratch_floats(c.span, head_dim)), out(static_cast<std::size_t>(head_dim));
    HeadAttention head = f16_head(query, keys, values, head_dim, positions, head_dim, 1.0f, c.order, scratch, out.data());
    head.span = c.span;
    for (KernelPath path : {KernelPath::scalar, KernelPath::avx2}) {
      if (path == KernelPath::avx2 && !kernel_path_supported(path)) {
        std::printf("[ skipped ] AVX2 path: not supported by this CPU\n");
        continue;
      }
      std::fill(out.begin(), out.end(), 0.0f);
      attend(head, path);
      for (std::int64_t d = 0; d < head_dim; ++d) {
        ASSERT_EQ(summation_bits(out[static_cast<std::size_t>(d)]), summation_bits(want[static_cast<std::size_t>(d)]))
            << "span " << c.span << " path " << static_cast<int>(path) << " dim " << d;
      }
    }
  }
}

// One query: each output adds float(value * probability) position by position in double. A zero query
// gives every position the probability f16(float(1 / n)), so the expected bits can be spelled out here;
// the data is checked to be such that a float accumulation (the batch order) would give other bits.
TEST(Attention, OneQueryAddsWeightedValuesInDouble) {
  constexpr std::int64_t positions = 45, head_dim = 40;
  const ZeroQueryHead zero(positions, head_dim, 7);
  const auto& [keys, values, query, probability] = zero;
  std::vector<float> want(static_cast<std::size_t>(head_dim));
  int float_order_differs = 0;
  for (std::int64_t d = 0; d < head_dim; ++d) {
    double sum = 0.0;
    float float_sum = 0.0f;
    for (std::int64_t p = 0; p < positions; ++p) {
      const float product = half_to_float(values[static_cast<std::size_t>(p * head_dim + d)]) * probability;
      sum += static_cast<double>(product);
      float_sum += product;
    }
    want[static_cast<std::size_t>(d)] = static_cast<float>(sum);
    float_order_differs += summation_bits(float_sum) != summation_bits(static_cast<float>(sum));
  }
  ASSERT_GT(float_order_differs, 0) << "the data does not tell a double sum from a float one";

  std::vector<float> scratch(attention_scratch_floats(positions, head_dim)), out(static_cast<std::size_t>(head_dim));
  const HeadAttention head =
      f16_head(query, keys, values, head_dim, positions, head_dim, 1.0f, SumOrder::vector_dot, scratch, out.data());
  for (KernelPath path : {KernelPath::scalar, KernelPath::avx2}) {
    if (path == KernelPath::avx2 && !kernel_path_supported(path)) {
      GTEST_SKIP() << "this CPU has no AVX2+FMA+F16C: only the scalar path ran";
    }
    std::fill(out.begin(), out.end(), 0.0f);
    attend(head, path);
    for (std::int64_t d = 0; d < head_dim; ++d) {
      ASSERT_EQ(summation_bits(out[static_cast<std::size_t>(d)]), summation_bits(want[static_cast<std::size_t>(d)]))
          << "path " << static_cast<int>(path) << " dim " << d;
    }
  }
}

TEST(Attention, RejectsEmptyInput) {
  std::vector<float> scratch(64), q(8), out(8);
  std::vector<std::uint16_t> kv(8);
  HeadAttention head;
  head.query = q.data();
  head.keys = kv.data();
  head.values = kv.data();
  head.stride = 8;
  head.positions = 0;
  head.head_dim = 8;
  head.scores = scratch.data();
  head.out = out.data();
  EXPECT_THROW(attend(head), std::invalid_argument);
}

// ---- Q8_0 / Q4_0 / F32 dot kernels: the reference order ----

// Sum of the 8 lanes as (l0+l4 + l2+l6) + (l1+l5 + l3+l7).
float sum_lanes(const float (&l)[8]) {
  const float s0 = l[0] + l[4], s1 = l[1] + l[5], s2 = l[2] + l[6], s3 = l[3] + l[7];
  return (s0 + s2) + (s1 + s3);
}

// Q8_0: one 8-lane accumulator; lane k of a block holds the exact integer dot of elements 4k..4k+3.
float q8_0_reference_order(const BlockQ8_0* w, const BlockQ8_0* a, std::int64_t nb) {
  float acc[8] = {};
  for (std::int64_t b = 0; b < nb; ++b) {
    const float d = half_to_float(w[b].d) * half_to_float(a[b].d);
    for (int k = 0; k < 8; ++k) {
      int lane = 0;
      for (int i = 4 * k; i < 4 * k + 4; ++i) lane += w[b].qs[i] * a[b].qs[i];
      acc[k] = std::fma(d, static_cast<float>(lane), acc[k]);
    }
  }
  return sum_lanes(acc);
}

// Q4_0 (the reference's repacked kernels): one float accumulator, the whole block's integer dot per FMA.
float q4_0_reference_order(const BlockQ4_0* w, const BlockQ8_0* a, std::int64_t nb) {
  float acc = 0.0f;
  for (std::int64_t b = 0; b < nb; ++b) {
    int dot = 0;
    for (int i = 0; i < 16; ++i) dot += ((w[b].qs[i] & 0x0F) - 8) * a[b].qs[i] + ((w[b].qs[i] >> 4) - 8) * a[b].qs[i + 16];
    acc = std::fma(static_cast<float>(dot), half_to_float(w[b].d) * half_to_float(a[b].d), acc);
  }
  return acc;
}

TEST(ReferenceOrder, Q8_0AndQ4_0KernelsSumLikeTheReference) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  const std::int64_t n = 32 * 24;
  const std::int64_t nb = n / 32;
  int q4_0_lane_order_differs = 0;
  for (const TensorType type : {TensorType::q8_0, TensorType::q4_0}) {
    for (const int cols : {1, 2, 3, 4, 6, 9}) {
      for (const int rows : {11, 16, 3}) {
        const std::size_t row_bytes = *tensor_bytes(type, n);
        std::vector<std::uint8_t> weights(row_bytes * rows);
        for (auto& v : weights) v = static_cast<std::uint8_t>(byte(rng));
        for (int r = 0; r < rows; ++r) {  // sane f16 scales in every block
          for (std::int64_t b = 0; b < nb; ++b) {
            const std::uint16_t d = float_to_half(0.01f * (1.0f + g(rng) * 0.1f));
            std::memcpy(weights.data() + r * row_bytes + b * (row_bytes / nb), &d, sizeof d);
          }
        }
        std::vector<float> x(static_cast<std::size_t>(n * cols));
        for (auto& v : x) v = g(rng);
        std::vector<BlockQ8_0> act(static_cast<std::size_t>(nb * cols));
        for (int c = 0; c < cols; ++c) quantize_row(TensorType::q8_0, x.data() + c * n, act.data() + c * nb, n);
        for (const KernelPath path : {KernelPath::scalar, KernelPath::avx2, KernelPath::avx512}) {
          if (!kernel_path_supported(path)) {
            std::printf("[ skipped ] kernel path %d: not supported by this CPU\n", static_cast<int>(path));
            continue;
          }
          std::vector<float> out(static_cast<std::size_t>(rows * cols));
          vec_dot_kernel(type, path).rows_cols(weights.data(), row_bytes, rows, act.data(), nb * sizeof(BlockQ8_0), cols, n,
                                               out.data(), rows);
          for (int r = 0; r < rows; ++r) {
            for (int c = 0; c < cols; ++c) {
              const BlockQ8_0* a = act.data() + c * nb;
              float want;
              if (type == TensorType::q8_0) {
                want = q8_0_reference_order(reinterpret_cast<const BlockQ8_0*>(weights.data() + r * row_bytes), a, nb);
              } else {
                const auto* w = reinterpret_cast<const BlockQ4_0*>(weights.data() + r * row_bytes);
                want = q4_0_reference_order(w, a, nb);
                // The same values in Q8_0's 8-lane order, to show the data tells the orders apart.
                std::vector<BlockQ8_0> as_q8(static_cast<std::size_t>(nb));
                for (std::int64_t b = 0; b < nb; ++b) {
                  as_q8[b].d = w[b].d;
                  for (int i = 0; i < 16; ++i) {
                    as_q8[b].qs[i] = static_cast<std::int8_t>((w[b].qs[i] & 0x0F) - 8);
                    as_q8[b].qs[i + 16] = static_cast<std::int8_t>((w[b].qs[i] >> 4) - 8);
                  }
                }
                q4_0_lane_order_differs += summation_bits(q8_0_reference_order(as_q8.data(), a, nb)) != summation_bits(want);
              }
              ASSERT_EQ(summation_bits(out[static_cast<std::size_t>(c * rows + r)]), summation_bits(want))
                  << name(type) << " path " << static_cast<int>(path) << " row " << r << " of " << rows << " column " << c
                  << " of " << cols;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(q4_0_lane_order_differs, 0) << "the data does not tell Q4_0's whole-block order from the 8-lane one";
}

TEST(ReferenceOrder, F32KernelUsesTheSingleAndBatchOrders) {
  std::mt19937 rng(4);
  std::normal_distribution<float> g(0.0f, 1.0f);
  int single_differs_from_batch = 0, fused_differs = 0;
  for (const std::int64_t n : {64, 172, 256, 40}) {
    for (const int cols : {1, 2, 5}) {
      const int rows = 6;
      std::vector<float> w(static_cast<std::size_t>(n * rows)), x(static_cast<std::size_t>(n * cols));
      for (auto& v : w) v = g(rng);
      for (auto& v : x) v = g(rng);
      for (const KernelPath path : {KernelPath::scalar, KernelPath::avx2, KernelPath::avx512}) {
        if (!kernel_path_supported(path)) {
          std::printf("[ skipped ] %s path: not supported by this CPU\n", path == KernelPath::avx2 ? "AVX2" : "AVX-512");
          continue;
        }
        std::vector<float> out(static_cast<std::size_t>(rows * cols));
        vec_dot_kernel(TensorType::f32, path)
            .rows_cols(w.data(), n * sizeof(float), rows, x.data(), n * sizeof(float), cols, n, out.data(), rows);
        for (int r = 0; r < rows; ++r) {
          for (int c = 0; c < cols; ++c) {
            const float* wr = w.data() + r * n;
            const float* xc = x.data() + c * n;
            // One column: four 16-lane accumulators over 64-value steps, folded, then the leftovers one by
            // one with the product rounded first.
            float acc[4][16] = {};
            const std::int64_t whole = n / 64 * 64;
            for (std::int64_t i = 0; i < whole; ++i) acc[(i / 16) % 4][i % 16] = std::fma(wr[i], xc[i], acc[(i / 16) % 4][i % 16]);
            float folded[16];
            for (int l = 0; l < 16; ++l) folded[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
            float single = sum_16_lanes(folded), fused = single;
            for (std::int64_t i = whole; i < n; ++i) {
              const float product = wr[i] * xc[i];
              single += product;
              fused = std::fma(wr[i], xc[i], fused);
            }
            fused_differs += summation_bits(single) != summation_bits(fused);
            // A batch (n a multiple of 16): one 16-lane accumulator.
            float lanes[16] = {};
            for (std::int64_t i = 0; i < n; ++i) lanes[i % 16] = std::fma(wr[i], xc[i], lanes[i % 16]);
            const float batch = sum_16_lanes(lanes);
            single_differs_from_batch += summation_bits(single) != summation_bits(batch);
            const float want = cols > 1 && n % 16 == 0 ? batch : single;
            ASSERT_EQ(summation_bits(out[static_cast<std::size_t>(c * rows + r)]), summation_bits(want))
                << "path " << static_cast<int>(path) << " n " << n << " row " << r << " column " << c << " of " << cols;
          }
        }
      }
    }
  }
  EXPECT_GT(single_differs_from_batch, 0) << "the data does not tell the two orders apart";
  EXPECT_GT(fused_differs, 0) << "the data does not tell rounded leftover products from fused ones";
}

// ---- Q8_K activations and the K-quant orders ----

// Q8_0 activations: scaled by 127 / max|x|, rounded half to even, d = max|x| / 127 as f16; the AVX2
// quantizer (every decode step's) must give the scalar bytes, ties, zeros and tiny scales included.
TEST(ReferenceOrder, Q8_0QuantizerPathsGiveTheSameBytes) {
  std::mt19937 rng(6);
  std::normal_distribution<float> g(0.0f, 1.0f);
  constexpr std::int64_t kBlocks = 64;
  std::vector<float> x(static_cast<std::size_t>(kBlocks * 32));
  for (std::int64_t b = 0; b < kBlocks; ++b) {
    const float magnitude = std::pow(10.0f, static_cast<float>(b % 16) - 9.0f);  // 1e-9 .. 1e6
    for (int i = 0; i < 32; ++i) x[static_cast<std::size_t>(b * 32 + i)] = magnitude * g(rng);
  }
  std::fill_n(x.begin() + 32, 32, 0.0f);  // block 1: all zero
  for (int i = 0; i < 32; ++i) x[static_cast<std::size_t>(64 + i)] = static_cast<float>(i % 2 ? i : -i) + 0.5f;  // block 2: ties
  x[64 + 31] = 127.0f;  // ... with max 127: the scale is exactly 1, every other value a tie
  std::vector<BlockQ8_0> scalar(kBlocks), simd(kBlocks);
  quantize_row(TensorType::q8_0, x.data(), scalar.data(), kBlocks * 32, KernelPath::scalar);
  for (int i = 0; i < 31; ++i) {  // ties went to the even neighbour
    const float v = x[static_cast<std::size_t>(64 + i)];
    ASSERT_EQ(scalar[2].qs[i], static_cast<int>(std::nearbyint(v))) << "tie " << v;
  }
  if (!kernel_path_supported(KernelPath::avx2)) GTEST_SKIP() << "this CPU has no AVX2+FMA+F16C: only the scalar path ran";
  quantize_row(TensorType::q8_0, x.data(), simd.data(), kBlocks * 32, KernelPath::avx2);
  for (std::int64_t b = 0; b < kBlocks; ++b) {
    ASSERT_EQ(scalar[static_cast<std::size_t>(b)].d, simd[static_cast<std::size_t>(b)].d) << "block " << b;
    for (int i = 0; i < 32; ++i) {
      ASSERT_EQ(scalar[static_cast<std::size_t>(b)].qs[i], simd[static_cast<std::size_t>(b)].qs[i]) << "block " << b << " value " << i;
    }
  }
}

TEST(ReferenceOrder, Q8_KQuantizesByTheSignedMaximum) {
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(512);
  for (auto& v : x) v = g(rng);
  x[17] = -9.0f;   // block 0: the largest magnitude is negative
  x[300] = 7.5f;   // block 1: positive
  BlockQ8_K blocks[2];
  quantize_row(TensorType::q8_k, x.data(), blocks, 512);
  for (int b = 0; b < 2; ++b) {
    const float max = b == 0 ? -9.0f : 7.5f;
    const float iscale = -127.0f / max;
    EXPECT_EQ(summation_bits(blocks[b].d), summation_bits(1.0f / iscale)) << "block " << b;
    for (int i = 0; i < 256; ++i) {
      const float v = iscale * x[static_cast<std::size_t>(256 * b + i)];
      ASSERT_EQ(blocks[b].qs[i], static_cast<int>(std::min(127.0f, std::nearbyint(v)))) << "block " << b << " value " << i;
    }
    for (int k = 0; k < 16; ++k) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += blocks[b].qs[16 * k + i];
      EXPECT_EQ(blocks[b].bsums[k], sum);
    }
  }
}

// Random K-quant weights (sane f16 scales), Q8_K activations, and the AVX2 kernel's outputs.
struct KProblem {
  std::int64_t n = 512;
  int rows = 5, cols = 3;
  std::size_t row_bytes = 0;
  std::vector<std::uint8_t> weights;
  std::vector<BlockQ8_K> act;
  std::vector<float> out;
};

KProblem k_problem(TensorType type, void (*set_scales)(std::uint8_t* block, std::mt19937& rng)) {
  KProblem p;
  std::mt19937 rng(static_cast<unsigned>(type) + 7);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> g(0.0f, 1.0f);
  p.row_bytes = *tensor_bytes(type, static_cast<std::uint64_t>(p.n));
  p.weights.resize(p.row_bytes * static_cast<std::size_t>(p.rows));
  for (auto& v : p.weights) v = static_cast<std::uint8_t>(byte(rng));
  const std::size_t block_bytes = p.row_bytes / static_cast<std::size_t>(p.n / 256);
  for (std::size_t off = 0; off < p.weights.size(); off += block_bytes) set_scales(p.weights.data() + off, rng);
  std::vector<float> x(static_cast<std::size_t>(p.n * p.cols));
  for (auto& v : x) v = g(rng);
  p.act.resize(static_cast<std::size_t>(p.n / 256 * p.cols));
  for (int c = 0; c < p.cols; ++c) quantize_row(TensorType::q8_k, x.data() + c * p.n, p.act.data() + c * p.n / 256, p.n);
  p.out.resize(static_cast<std::size_t>(p.rows * p.cols));
  vec_dot_kernel(type, KernelPath::avx2)
      .rows_cols(p.weights.data(), p.row_bytes, p.rows, p.act.data(), static_cast<std::size_t>(p.n / 256) * sizeof(BlockQ8_K),
                 p.cols, p.n, p.out.data(), static_cast<std::size_t>(p.rows));
  return p;
}

void sane_scales_q4k(std::uint8_t* block, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.001f, 0.02f);
  auto* b = reinterpret_cast<BlockQ4_K*>(block);
  b->d = float_to_half(u(rng));
  b->dmin = float_to_half(u(rng));
}
void sane_scales_q6k(std::uint8_t* block, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.001f, 0.02f);
  reinterpret_cast<BlockQ6_K*>(block)->d = float_to_half(u(rng));
}

// Lane u of a 32-value group: values 4u..4u+3.
int lane_dot(const int* q, const std::int8_t* a, int u) {
  int s = 0;
  for (int i = 4 * u; i < 4 * u + 4; ++i) s += q[i] * a[i];
  return s;
}

TEST(ReferenceOrder, Q4_KSumsWholeSuperblocksThenSubtractsTheMins) {
  if (!kernel_path_supported(KernelPath::avx2)) GTEST_SKIP() << "this CPU has no AVX2+FMA+F16C: the order is pinned on the AVX2 path";
  const KProblem p = k_problem(TensorType::q4_k, sane_scales_q4k);
  for (int r = 0; r < p.rows; ++r) {
    for (int c = 0; c < p.cols; ++c) {
      const auto* w = reinterpret_cast<const BlockQ4_K*>(p.weights.data() + static_cast<std::size_t>(r) * p.row_bytes);
      const BlockQ8_K* a = p.act.data() + c * p.n / 256;
      float total = 0.0f, mins = 0.0f;
      for (std::int64_t b = 0; b < p.n / 256; ++b) {
        int isum = 0, msum = 0;
        for (int j = 0; j < 8; ++j) {
          const KScaleMin sm = k_scale_min(w[b].scales, j);
          int q[32];
          for (int l = 0; l < 32; ++l) q[l] = j % 2 == 0 ? (w[b].qs[32 * (j / 2) + l] & 0x0F) : (w[b].qs[32 * (j / 2) + l] >> 4);
          int dot = 0;
          for (int l = 0; l < 32; ++l) dot += q[l] * a[b].qs[32 * j + l];
          isum += sm.scale * dot;
          msum += sm.min * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
        }
        total = std::fma(static_cast<float>(isum), half_to_float(w[b].d) * a[b].d, total);
        mins = std::fma(static_cast<float>(msum), half_to_float(w[b].dmin) * a[b].d, mins);
      }
      ASSERT_EQ(summation_bits(p.out[static_cast<std::size_t>(c * p.rows + r)]), summation_bits(total - mins)) << "row " << r << " column " << c;
    }
  }
}

TEST(ReferenceOrder, Q6_KSumsEightLanesPerSuperblock) {
  if (!kernel_path_supported(KernelPath::avx2)) GTEST_SKIP() << "this CPU has no AVX2+FMA+F16C: the order is pinned on the AVX2 path";
  const KProblem p = k_problem(TensorType::q6_k, sane_scales_q6k);
  for (int r = 0; r < p.rows; ++r) {
    for (int c = 0; c < p.cols; ++c) {
      const auto* w = reinterpret_cast<const BlockQ6_K*>(p.weights.data() + static_cast<std::size_t>(r) * p.row_bytes);
      const BlockQ8_K* a = p.act.data() + c * p.n / 256;
      float acc[8] = {};
      for (std::int64_t b = 0; b < p.n / 256; ++b) {
        int lanes[8] = {};
        for (int group = 0; group < 8; ++group) {  // 32 values: half group / 4, quarter group % 4
          const int h = group / 4, k = group % 4;
          int q[32];
          for (int l = 0; l < 32; ++l) {
            const int low = k % 2 == 0 ? w[b].ql[64 * h + l] : w[b].ql[64 * h + l + 32];
            const int nibble = k < 2 ? (low & 0x0F) : (low >> 4);
            q[l] = (nibble | (((w[b].qh[32 * h + l] >> (2 * k)) & 3) << 4)) - 32;
          }
          for (int u = 0; u < 8; ++u) {
            const int scale = w[b].scales[2 * group + (u >= 4 ? 1 : 0)];
            lanes[u] += scale * lane_dot(q, a[b].qs + 32 * group, u);
          }
        }
        const float d = half_to_float(w[b].d) * a[b].d;
        for (int u = 0; u < 8; ++u) acc[u] = std::fma(d, static_cast<float>(lanes[u]), acc[u]);
      }
      ASSERT_EQ(summation_bits(p.out[static_cast<std::size_t>(c * p.rows + r)]), summation_bits(sum_lanes(acc))) << "row " << r << " column " << c;
    }
  }
}

}  // namespace
}  // namespace loom::compute

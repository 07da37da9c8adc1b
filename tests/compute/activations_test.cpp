// GeGLU (activations.hpp): GELU in its tanh form as the reference computes it (the input rounded to F16, the
// result an F16 table entry), against the formula in double; the AVX2 path gives the scalar path's bits on
// every F16 input and the edges (+-10, NaN, infinities, a tail shorter than eight); the soft-cap.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "loom/compute/cpu/activations.hpp"
#include "loom/compute/model/half.hpp"

namespace loom::compute {
namespace {

double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

TEST(Geglu, GeluIsTheTanhFormToF16Precision) {
  for (float x = -12.0f; x <= 12.0f; x += 0.0137f) {
    const double want = x <= -10.0f ? 0.0 : (x >= 10.0f ? x : gelu(half_to_float(float_to_half(x))));
    // One F16 rounding of the result, and one float rounding inside: within 2^-10 relative (or a tiny absolute).
    EXPECT_NEAR(gelu_tanh(x), want, std::abs(want) * 0x1p-10 + 1e-6) << "x = " << x;
  }
  EXPECT_EQ(gelu_tanh(-10.0f), 0.0f);
  EXPECT_EQ(gelu_tanh(10.0f), 10.0f);
  EXPECT_EQ(gelu_tanh(0.0f), 0.0f);
}

TEST(Geglu, Avx2GivesTheScalarBits) {
  if (!kernel_path_supported(KernelPath::avx2)) GTEST_SKIP() << "this CPU has no AVX2+FMA+F16C";
  std::vector<float> gate, up;
  for (std::uint32_t h = 0; h < 65536; ++h) {  // every F16 value, and some floats between them
    gate.push_back(half_to_float(static_cast<std::uint16_t>(h)));
    gate.push_back(std::nextafter(gate.back(), 0.0f));
  }
  for (float edge : {-10.0f, 10.0f, std::nextafter(-10.0f, 0.0f), std::nextafter(10.0f, 0.0f), 1e30f, -1e30f, INFINITY,
                     -INFINITY, NAN, 65520.0f, -65520.0f, 3.0f}) {
    gate.push_back(edge);
  }
  for (std::size_t i = 0; i < gate.size(); ++i) up.push_back(1.0f + static_cast<float>(i % 7) * 0.25f);
  std::vector<float> scalar = gate, avx2 = gate;
  geglu(scalar.data(), up.data(), static_cast<std::int64_t>(gate.size()), KernelPath::scalar);
  geglu(avx2.data(), up.data(), static_cast<std::int64_t>(gate.size()), KernelPath::avx2);  // a tail of four
  for (std::size_t i = 0; i < gate.size(); ++i) {
    if (std::isnan(scalar[i])) {
      EXPECT_TRUE(std::isnan(avx2[i])) << "input " << gate[i];
      continue;
    }
    ASSERT_EQ(std::bit_cast<std::uint32_t>(scalar[i]), std::bit_cast<std::uint32_t>(avx2[i])) << "input " << gate[i];
  }
}

TEST(SoftCap, CapsAsCapTimesTanh) {
  std::vector<float> x{-100.0f, -3.0f, 0.0f, 0.5f, 3.0f, 100.0f};
  const std::vector<float> in = x;
  soft_cap(x.data(), static_cast<std::int64_t>(x.size()), 3.0f);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], 3.0 * std::tanh(in[i] / 3.0), 1e-6) << in[i];
  soft_cap(x.data(), static_cast<std::int64_t>(x.size()), 0.0f);  // 0: none
  EXPECT_NEAR(x[5], 3.0f, 1e-6);
}

}  // namespace
}  // namespace loom::compute

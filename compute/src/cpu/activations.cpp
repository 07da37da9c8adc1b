// GeGLU and logit soft-capping (activations.hpp). Scalar: both are a small share of a step (one pass over
// the feed-forward width, or the vocabulary), next to the matrix products around them.
#include "loom/compute/cpu/activations.hpp"

#include <array>
#include <cmath>

#include "loom/compute/model/half.hpp"

namespace loom::compute {
namespace {

float gelu_exact(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

// The F16 result for every F16 input, built once (128 KiB).
const std::array<std::uint16_t, 65536>& gelu_table() {
  static const auto table = [] {
    std::array<std::uint16_t, 65536> t{};
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = float_to_half(gelu_exact(half_to_float(static_cast<std::uint16_t>(i))));
    return t;
  }();
  return table;
}

}  // namespace

float gelu_tanh(float x) noexcept {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return half_to_float(gelu_table()[float_to_half(x)]);
}

void geglu(float* gate, const float* up, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) gate[i] = gelu_tanh(gate[i]) * up[i];
}

void soft_cap(float* x, std::int64_t n, float cap) {
  if (!(cap > 0.0f)) return;
  const float inverse = 1.0f / cap;
  for (std::int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inverse);
}

}  // namespace loom::compute

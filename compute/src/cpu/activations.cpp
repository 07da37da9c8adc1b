// GeGLU and logit soft-capping (activations.hpp): the scalar definitions; GeGLU's AVX2 path is in
// activations_avx2.cpp (a prefill's GELUs are a pass over tokens x the feed-forward width on one thread).
#include "loom/compute/cpu/activations.hpp"

#include <array>
#include <cmath>

#include "activations_kernels.hpp"
#include "loom/compute/model/half.hpp"

namespace loom::compute {
namespace {

float gelu_exact(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

}  // namespace

// The F16 result for every F16 input, built once (128 KiB).
const std::uint16_t* detail::gelu_f16_table() {
  static const auto table = [] {
    std::array<std::uint16_t, detail::kGeluTableEntries> t{};
    for (std::size_t i = 0; i < 65536; ++i) t[i] = float_to_half(gelu_exact(half_to_float(static_cast<std::uint16_t>(i))));
    return t;
  }();
  return table.data();
}

float gelu_tanh(float x) noexcept {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return half_to_float(detail::gelu_f16_table()[float_to_half(x)]);
}

void geglu(float* gate, const float* up, std::int64_t n, KernelPath path) {
  if (path >= KernelPath::avx2 && kernel_path_supported(KernelPath::avx2)) {
    return detail::geglu_avx2(gate, up, n, detail::gelu_f16_table());
  }
  for (std::int64_t i = 0; i < n; ++i) gate[i] = gelu_tanh(gate[i]) * up[i];
}

void geglu(float* gate, const float* up, std::int64_t n) { geglu(gate, up, n, default_kernel_path()); }

void soft_cap(float* x, std::int64_t n, float cap) {
  if (!(cap > 0.0f)) return;
  const float inverse = 1.0f / cap;
  for (std::int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inverse);
}

}  // namespace loom::compute

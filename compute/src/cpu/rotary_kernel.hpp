// Internal: the rotation loop of rotary.hpp, compiled by rotary.cpp (scalar: std::fma is a library call)
// and by rotary_avx2.cpp (-mfma: the same std::fma as one instruction). Internal linkage, for the reason
// attention_kernels.hpp gives.
#pragma once

#include <cmath>
#include <cstdint>

namespace loom::compute::detail {
namespace {

inline void rotate_pairs_kernel(float* heads, std::int64_t n_heads, std::int64_t head_dim, const float* rotation,
                                bool adjacent) {
  const std::int64_t pairs = head_dim / 2;
  for (std::int64_t h = 0; h < n_heads; ++h) {
    float* head = heads + h * head_dim;
    for (std::int64_t i = 0; i < pairs; ++i) {
      const float cos_a = rotation[2 * i];
      const float sin_a = rotation[2 * i + 1];
      const std::int64_t a = adjacent ? 2 * i : i;
      const std::int64_t b = adjacent ? 2 * i + 1 : i + pairs;
      const float x0 = head[a];
      const float x1 = head[b];
      head[a] = std::fma(x0, cos_a, -(x1 * sin_a));
      head[b] = std::fma(x0, sin_a, x1 * cos_a);
    }
  }
}

}  // namespace
}  // namespace loom::compute::detail

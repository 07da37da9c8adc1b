// Rotary position embedding (RoPE) applied to query or key heads.
#pragma once

#include <cstdint>

#include "loom/compute/cpu/kernel_path.hpp"

namespace loom::compute {

// Rotates pair i of each of `n_heads` consecutive heads (head_dim floats each) by the angle whose cosine and
// sine are rotation[2i] and rotation[2i + 1]. The pair is (head[2i], head[2i + 1]) when `adjacent` (llama),
// else (head[i], head[i + head_dim / 2]) (NeoX style: qwen2, qwen3). With (x0, x1) the pair:
//   x0' = fma(x0, cos, -(x1 * sin)),   x1' = fma(x0, sin, x1 * cos)
// which is the reference implementation's rope loop as its compiler contracts it (the first product of each
// line fused), pinned for the reason attention.hpp gives. Scalar and AVX2 paths give the same bits.
void rotate_pairs(float* heads, std::int64_t n_heads, std::int64_t head_dim, const float* rotation, bool adjacent,
                  KernelPath path);

}  // namespace loom::compute

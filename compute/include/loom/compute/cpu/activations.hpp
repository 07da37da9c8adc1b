// Feed-forward activations besides SwiGLU (attention.hpp holds that one, for its shared exp): GeGLU with
// GELU in its tanh form (Gemma), and the soft-cap of logits (Gemma 2).
#pragma once

#include <cstdint>

#include "loom/compute/cpu/kernel_path.hpp"

namespace loom::compute {

// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed as the reference implementation
// does: x rounded to F16 and looked up in a table of F16 results (so each value is exact to F16 precision);
// 0 at or below -10, x at or above 10.
float gelu_tanh(float x) noexcept;

// gate[i] = gelu_tanh(gate[i]) * up[i]; the AVX2 path (F16C conversions, a gathered lookup) gives the same bits.
void geglu(float* gate, const float* up, std::int64_t n, KernelPath path);
void geglu(float* gate, const float* up, std::int64_t n);  // default_kernel_path()

// x[i] = cap * tanh(x[i] / cap) (times 1/cap, tanhf, times cap, as the reference does); cap <= 0: unchanged.
void soft_cap(float* x, std::int64_t n, float cap);

}  // namespace loom::compute

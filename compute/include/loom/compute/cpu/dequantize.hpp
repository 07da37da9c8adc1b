// Conversion of a stored tensor row (any weight type loom computes with) to f32. This is the scalar reference
// that every SIMD kernel and every quantizer is checked against, and the path for the few places that need
// plain floats from a quantized tensor (an embedding row, a debug dump). It favours being obviously right
// over being fast.
#pragma once

#include <cstdint>

#include "loom/compute/tensor_type.hpp"

namespace loom::compute {

// Writes the `n` values stored at `src` (a row in `type`) to `dst`. Supports f32, f16, bf16, q8_0, q4_0,
// q2_k, q3_k, q4_k, q5_k, q6_k, iq4_xs and q8_k. Throws std::invalid_argument naming the type when it is not
// supported or when n is negative or not a whole number of blocks.
void dequantize_row(TensorType type, const void* src, float* dst, std::int64_t n);

}  // namespace loom::compute

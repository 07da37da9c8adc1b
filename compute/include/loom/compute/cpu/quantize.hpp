// Conversion of f32 values to a stored tensor type: used to quantize activations before a dot product with
// quantized weights (q8_0 for Q8_0/Q4_0/Q5_0/IQ4_NL weights, q8_1 for Q4_1/Q5_1, q8_k for the K-quants; see
// vec_dot.hpp), and by the GGUF
// writer and `loom synth` to produce weights. dequantize_row() is the inverse, up to the format's error.
//
// Choices that differ from other quantizers (the formats are the same, the chosen integers may differ):
//   q8_0, q8_k: symmetric, q = x * 127 / max|x| rounded half to even, in -127..127, and d = max|x| / 127 (for
//               q8_0 stored as f16): what the reference implementation does to activations, so dot products
//               match it exactly. Never -128, which keeps the SIMD sign trick (|a| * sign(b, a)) exact. q8_k
//               also fills bsums.
//   q8_1:       as q8_0, plus s = d * sum(q) with d before its f16 rounding, as the reference computes it.
//   q4_0:       the value of largest magnitude, sign kept, maps to -8: d = max / -8, q = min(15, x / d + 8.5).
//   q5_0:       as q4_0 with 32 levels: the extreme value maps to -16.
//   q4_1, q5_1: the block's range: m = min, d = (max - min) / 15 (31), q = (x - m) / d rounded.
//   iq4_nl:     the extreme value on the table's level -127, each value to its nearest level, then d refitted
//               by least squares while the error falls.
//   q4_k, q5_k: per 32-value sub-block an affine fit x ~ scale * q - min (min >= 0), refined by least squares,
//               then scales and mins quantized to 6 bits against the block's d and dmin.
//   q6_k:       per 16-value sub-block the largest-magnitude value maps to -32; the sub-block scales are
//               quantized to int8 against d = max|scale| / 127.
//   q2_k:       per 16-value sub-block the affine fit of q4_k with q in 0..3, scales and mins to 4 bits.
//   q3_k, iq4_xs: per sub-block (16 / 32 values) the scale that maps the largest magnitude to an extreme
//               level (or a little inside), the best of a few by squared error; q the nearest level (-4..3,
//               or the 16 IQ4 values); scales to 6 bits against d = max|scale| / 31.
#pragma once

#include <cstdint>

#include "loom/compute/cpu/kernel_path.hpp"
#include "loom/compute/tensor_type.hpp"

namespace loom::compute {

// Writes `n` values from `src` to `dst` in `type`: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0,
// q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_xs, q8_1 or q8_k.
// `dst` must hold tensor_bytes(type, n) bytes. Throws std::invalid_argument naming the type when it is not
// supported or when n is negative or not a whole number of blocks.
void quantize_row(TensorType type, const float* src, void* dst, std::int64_t n);

// The same on a chosen code path (quantize_row() takes default_kernel_path()). q8_0, the activation format
// of every decode step's Q8_0/Q4_0 products, has an AVX2 path; it gives the scalar path's bytes for finite
// input. Other types always run the scalar code.
void quantize_row(TensorType type, const float* src, void* dst, std::int64_t n, KernelPath path);

}  // namespace loom::compute

// Attention of one query head over the keys and values of positions [0, positions): scores, softmax, the
// weighted sum of values. Also the SwiGLU activation, whose exponential shares this file's exp().
//
// Keys and values are read through a block table (the paged KV cache, paged_kv_cache.hpp): position p lives
// in row block_table[p / block_size] * block_size + p % block_size of the storage. Only the addresses come
// from the table; which positions are summed, and in what order, does not depend on it, so a sequence's
// attention gives the same bits however its blocks are scattered (and equals the contiguous layout's, which
// is the table 0, 1, 2, ...).
//
// The arithmetic is pinned, not just "close": the query is rounded to F16 (what an F16 dot product does with
// an F32 operand), the scores are F32 dot products summed in a fixed lane order, the exponentials come from
// a vectorised expf (range reduction to 2^n * e^b, a degree-5 polynomial for e^b), the softmax sum is taken
// per 8 positions in float and across chunks in double, the probabilities are multiplied by the reciprocal
// of the sum and rounded to F16 before they weight the F16 values. That is how the widely used reference
// implementation in ../shared/reference computes attention on x86, and reproducing it bit for bit keeps our
// logits on top of its logits instead of drifting away through activations that round the other way.
//
// Two summation orders exist, because the reference uses two kernels. SumOrder::vector_dot (one query, the
// decode step): scores in four 8-lane accumulators over 32-element steps with leftovers in double, and each
// output's weighted values added position by position in double (an F16 value times an F16 probability is
// exact in float, so this is the correctly rounded sum in practice). SumOrder::tiled (a batch of queries):
// one 8-lane accumulator per output, for scores and values. Scalar and AVX2 paths give identical bits.
// (The decode value sum was pinned by experiment against ../shared/reference: the 32-lane float order of
// the decode scores, used for the values too, matched every reference value except one flipped activation
// in each of three of the four Q8_0/Q6_K runs; the sum in double matches all four runs throughout.)
//
// F32 keys and values (a KV cache stored in F32) take the same orders without the F16 roundings (of the
// query, the keys, the values and the probabilities): close to the F16 results, not equal to them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "loom/compute/kernel_path.hpp"
#include "loom/compute/tensor_type.hpp"

namespace loom::compute {

enum class SumOrder : std::uint8_t { vector_dot, tiled };

struct HeadAttention {
  const float* query = nullptr;         // head_dim values
  const void* keys = nullptr;           // of kv_type; storage row r starts at keys + r * stride elements
  const void* values = nullptr;
  TensorType kv_type = TensorType::f16;  // f16 or f32
  std::size_t stride = 0;               // elements from one storage row to the next
  // Position p is in row block_table[p / block_size] * block_size + p % block_size; without a table
  // (nullptr) in row p. The table must cover every position and name only rows that exist: the caller checks.
  const std::int32_t* block_table = nullptr;
  std::int64_t block_size = 0;          // >= 1 when there is a table
  std::int64_t positions = 0;           // >= 1
  std::int64_t head_dim = 0;
  float scale = 1.0f;                   // applied to every score before the softmax
  SumOrder order = SumOrder::vector_dot;
  float* scores = nullptr;              // scratch of attention_scratch_floats(positions, head_dim) floats
  float* out = nullptr;                 // head_dim values
};

// Scratch one HeadAttention needs (the scores, padded to whole 8-position chunks, the rounded query, and
// each position's storage row, 64 bits a position).
constexpr std::size_t attention_scratch_floats(std::int64_t positions, std::int64_t head_dim) noexcept {
  return static_cast<std::size_t>((positions + 7) / 8 * 8 + head_dim + 2 * positions);
}

void attend(const HeadAttention& head, KernelPath path);
void attend(const HeadAttention& head);  // default_kernel_path()

// gate[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)) with the same exp() as the softmax for
// whole groups of 8 and the C library's expf for the rest (again the reference's arithmetic).
void swiglu(float* gate, const float* up, std::int64_t n, KernelPath path);
void swiglu(float* gate, const float* up, std::int64_t n);

// dst[i] = float_to_half(src[i]) for i < n: keys and values entering an F16 cache, eight at a time with F16C
// on the AVX2 path (the same bits: both round to nearest even).
void store_as_f16(const float* src, std::uint16_t* dst, std::int64_t n, KernelPath path);

// The vectorised expf, one lane's worth: within 2 ulp of expf, exactly 0 for -inf, +inf for large x.
float vector_expf(float x) noexcept;

}  // namespace loom::compute

// The portable code of the Q4_1, Q5_0, Q5_1 and IQ4_NL weight types and of Q8_1 activations: quantizers,
// dequantizers and the scalar dot kernels (small_blocks.hpp says which order they fix for the SIMD ones).
#include "small_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "loom/compute/model/half.hpp"

namespace loom::compute::detail {
namespace {

// Round to nearest, ties to even, for |x| < 2^22 (callers clamp): the activation quantizers must round as
// the reference does, and this avoids a library call per value.
inline int round_even(float x) {
  if (!(std::fabs(x) < 4194304.0f)) return x > 0 ? 4194304 : (x < 0 ? -4194304 : 0);
  const float shifted = x + 12582912.0f;
  std::int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007FFFFF) - 0x00400000;
}

// The value of largest magnitude with its sign (the first on ties).
float signed_max_abs(const float* x, int n) {
  float best = 0.0f, best_abs = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > best_abs) {
      best_abs = std::fabs(x[i]);
      best = x[i];
    }
  }
  return best;
}

// Value i of a Q4_0-style nibble array: low nibbles hold values 0..15, high nibbles 16..31.
inline int nibble(const std::uint8_t* qs, int i) { return i < 16 ? qs[i] & 0x0F : qs[i - 16] >> 4; }

inline std::uint32_t fifth_bits(const std::uint8_t* qh) {
  return static_cast<std::uint32_t>(qh[0]) | static_cast<std::uint32_t>(qh[1]) << 8 |
         static_cast<std::uint32_t>(qh[2]) << 16 | static_cast<std::uint32_t>(qh[3]) << 24;
}

inline void store_fifth_bits(std::uint32_t bits, std::uint8_t* qh) {
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<std::uint8_t>(bits >> (8 * k));
}

// 32 levels q (0..qmax) into the nibbles (and, for 5-bit types, the returned fifth bits).
std::uint32_t pack_levels(const int* q, std::uint8_t* qs) {
  std::uint32_t high = 0;
  for (int i = 0; i < 16; ++i) {
    qs[i] = static_cast<std::uint8_t>((q[i] & 0x0F) | ((q[i + 16] & 0x0F) << 4));
    high |= static_cast<std::uint32_t>((q[i] >> 4) & 1) << i;
    high |= static_cast<std::uint32_t>((q[i + 16] >> 4) & 1) << (i + 16);
  }
  return high;
}

// Symmetric types (Q5_0): the extreme value, sign kept, maps to the lowest level -half; q = x / d + half.
void quantize_symmetric(const float* x, int half, std::uint16_t& d_out, int* q) {
  const float d = signed_max_abs(x, 32) / static_cast<float>(-half);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  d_out = float_to_half(d);
  for (int i = 0; i < 32; ++i) q[i] = std::clamp(static_cast<int>(x[i] * id + static_cast<float>(half) + 0.5f), 0, 2 * half - 1);
}

// Affine types (Q4_1, Q5_1): x ~ q * d + m over the block's range, m the minimum.
void quantize_affine(const float* x, int qmax, std::uint16_t& d_out, std::uint16_t& m_out, int* q) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < 32; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const float d = (hi - lo) / static_cast<float>(qmax);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  d_out = float_to_half(d);
  m_out = float_to_half(lo);
  for (int i = 0; i < 32; ++i) q[i] = std::clamp(static_cast<int>((x[i] - lo) * id + 0.5f), 0, qmax);
}

int nearest_iq4_nl(float v) {
  int best = 0;
  float best_err = std::fabs(v - kIQ4NLValues[0]);
  for (int k = 1; k < 16; ++k) {
    const float err = std::fabs(v - kIQ4NLValues[k]);
    if (err < best_err) {
      best_err = err;
      best = k;
    }
  }
  return best;
}

}  // namespace

void quantize_q4_1(const float* x, BlockQ4_1* blocks, std::int64_t n_blocks) {
  int q[32];
  for (std::int64_t b = 0; b < n_blocks; ++b, x += 32) {
    quantize_affine(x, 15, blocks[b].d, blocks[b].m, q);
    pack_levels(q, blocks[b].qs);
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* blocks, std::int64_t n_blocks) {
  int q[32];
  for (std::int64_t b = 0; b < n_blocks; ++b, x += 32) {
    quantize_symmetric(x, 16, blocks[b].d, q);
    store_fifth_bits(pack_levels(q, blocks[b].qs), blocks[b].qh);
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* blocks, std::int64_t n_blocks) {
  int q[32];
  for (std::int64_t b = 0; b < n_blocks; ++b, x += 32) {
    quantize_affine(x, 31, blocks[b].d, blocks[b].m, q);
    store_fifth_bits(pack_levels(q, blocks[b].qs), blocks[b].qh);
  }
}

// IQ4_NL: start with the extreme value on the table's widest level (-127), pick each value's nearest level,
// then refit d by least squares over the chosen levels and pick again, keeping the better of the two. The
// table is uneven, so the first guess leaves most of the error a refit removes.
void quantize_iq4_nl(const float* x, BlockIQ4_NL* blocks, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, x += 32) {
    float d = signed_max_abs(x, 32) / static_cast<float>(kIQ4NLValues[0]);
    int q[32] = {};
    const auto assign = [&](float scale, int* levels) {
      const float id = scale != 0.0f ? 1.0f / scale : 0.0f;
      double err = 0;
      for (int i = 0; i < 32; ++i) {
        levels[i] = nearest_iq4_nl(x[i] * id);
        const double diff = static_cast<double>(scale) * kIQ4NLValues[levels[i]] - x[i];
        err += diff * diff;
      }
      return err;
    };
    double best_err = assign(d, q);
    for (int iteration = 0; d != 0.0f && iteration < 3; ++iteration) {
      double sxv = 0, svv = 0;
      for (int i = 0; i < 32; ++i) {
        sxv += static_cast<double>(x[i]) * kIQ4NLValues[q[i]];
        svv += static_cast<double>(kIQ4NLValues[q[i]]) * kIQ4NLValues[q[i]];
      }
      if (svv <= 0) break;
      const float refit = static_cast<float>(sxv / svv);
      int levels[32];
      const double err = assign(refit, levels);
      if (!(err < best_err)) break;
      best_err = err;
      d = refit;
      std::copy(levels, levels + 32, q);
    }
    blocks[b].d = float_to_half(d);
    pack_levels(q, blocks[b].qs);
  }
}

// As quantize_q8_0 (quantize.cpp): scaled by 127/amax and rounded half to even, the reference's activation
// arithmetic; s carries d * sum(q) with d before its rounding to f16, as the reference computes it.
void quantize_q8_1(const float* x, BlockQ8_1* blocks, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, x += 32) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int q = std::clamp(round_even(x[i] * id), -127, 127);
      blocks[b].qs[i] = static_cast<std::int8_t>(q);
      sum += q;
    }
    blocks[b].d = float_to_half(d);
    blocks[b].s = float_to_half(d * static_cast<float>(sum));
  }
}

void dequantize_q4_1(const BlockQ4_1* blocks, float* dst, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, dst += 32) {
    const float d = half_to_float(blocks[b].d), m = half_to_float(blocks[b].m);
    for (int i = 0; i < 32; ++i) dst[i] = static_cast<float>(nibble(blocks[b].qs, i)) * d + m;
  }
}

void dequantize_q5_0(const BlockQ5_0* blocks, float* dst, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, dst += 32) {
    const float d = half_to_float(blocks[b].d);
    const std::uint32_t high = fifth_bits(blocks[b].qh);
    for (int i = 0; i < 32; ++i) {
      dst[i] = static_cast<float>((nibble(blocks[b].qs, i) | static_cast<int>((high >> i) & 1) << 4) - 16) * d;
    }
  }
}

void dequantize_q5_1(const BlockQ5_1* blocks, float* dst, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, dst += 32) {
    const float d = half_to_float(blocks[b].d), m = half_to_float(blocks[b].m);
    const std::uint32_t high = fifth_bits(blocks[b].qh);
    for (int i = 0; i < 32; ++i) {
      dst[i] = static_cast<float>(nibble(blocks[b].qs, i) | static_cast<int>((high >> i) & 1) << 4) * d + m;
    }
  }
}

void dequantize_iq4_nl(const BlockIQ4_NL* blocks, float* dst, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, dst += 32) {
    const float d = half_to_float(blocks[b].d);
    for (int i = 0; i < 32; ++i) dst[i] = static_cast<float>(kIQ4NLValues[nibble(blocks[b].qs, i)]) * d;
  }
}

void dequantize_q8_1(const BlockQ8_1* blocks, float* dst, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, dst += 32) {
    const float d = half_to_float(blocks[b].d);
    for (int i = 0; i < 32; ++i) dst[i] = static_cast<float>(blocks[b].qs[i]) * d;
  }
}

// The dots, in the reference's AVX2 orders (small_blocks.hpp). Lane k of a block: the exact integer dot of
// its values 4k..4k+3 (Q5_0 as q - 16, IQ4_NL as table values) with the activations.
namespace {

template <class WBlock>
int weight_value(const WBlock& w, int i);
template <>
int weight_value(const BlockQ4_1& w, int i) { return nibble(w.qs, i); }
template <>
int weight_value(const BlockQ5_0& w, int i) {
  return (nibble(w.qs, i) | static_cast<int>((fifth_bits(w.qh) >> i) & 1) << 4) - 16;
}
template <>
int weight_value(const BlockQ5_1& w, int i) { return nibble(w.qs, i) | static_cast<int>((fifth_bits(w.qh) >> i) & 1) << 4; }
template <>
int weight_value(const BlockIQ4_NL& w, int i) { return kIQ4NLValues[nibble(w.qs, i)]; }

template <class WBlock, class ABlock>
int lane(const WBlock& w, const ABlock& a, int k) {
  int sum = 0;
  for (int i = 4 * k; i < 4 * k + 4; ++i) sum += weight_value(w, i) * a.qs[i];
  return sum;
}

// The horizontal sum of 8 lanes as the SIMD kernels' hsum: (l0+l4 + l2+l6) + (l1+l5 + l3+l7).
float sum_8_lanes(const float (&acc)[8]) {
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// One 8-lane accumulator, one FMA per block and lane with d_w * d_a; the min types add their m_w * s_a terms
// in a scalar sum, fused, after the lanes' sum.
template <class WBlock, class ABlock>
float dot_8_lanes(const WBlock* w, const ABlock* a, std::int64_t n_blocks) {
  float acc[8] = {};
  float mins = 0.0f;
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    const float d = half_to_float(w[b].d) * half_to_float(a[b].d);
    for (int k = 0; k < 8; ++k) acc[k] = std::fma(d, static_cast<float>(lane(w[b], a[b], k)), acc[k]);
    if constexpr (std::is_same_v<ABlock, BlockQ8_1>) mins = std::fma(half_to_float(w[b].m), half_to_float(a[b].s), mins);
  }
  if constexpr (std::is_same_v<ABlock, BlockQ8_1>) return sum_8_lanes(acc) + mins;
  return sum_8_lanes(acc);
}

// IQ4_NL against one column: two 8-lane accumulators, even and odd blocks of each pair, added before the
// horizontal sum; an odd last block as a whole-block integer dot fused into the sum.
float dot_iq4_nl_single(const BlockIQ4_NL* w, const BlockQ8_0* a, std::int64_t n_blocks) {
  float even[8] = {}, odd[8] = {};
  std::int64_t b = 0;
  for (; b + 1 < n_blocks; b += 2) {
    const float d0 = half_to_float(a[b].d) * half_to_float(w[b].d);
    const float d1 = half_to_float(a[b + 1].d) * half_to_float(w[b + 1].d);
    for (int k = 0; k < 8; ++k) {
      even[k] = std::fma(d0, static_cast<float>(lane(w[b], a[b], k)), even[k]);
      odd[k] = std::fma(d1, static_cast<float>(lane(w[b + 1], a[b + 1], k)), odd[k]);
    }
  }
  float both[8];
  for (int k = 0; k < 8; ++k) both[k] = even[k] + odd[k];
  float sum = sum_8_lanes(both);
  if (b < n_blocks) {
    int whole = 0;
    for (int k = 0; k < 8; ++k) whole += lane(w[b], a[b], k);
    sum = std::fma(half_to_float(a[b].d) * half_to_float(w[b].d), static_cast<float>(whole), sum);
  }
  return sum;
}

template <class WBlock, class ABlock, bool kIQ4NL>
void scalar_rows_cols(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                      const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols, std::int64_t n,
                      float* out, std::size_t out_col_stride) {
  for (int c = 0; c < n_cols; ++c) {
    const auto* a = reinterpret_cast<const ABlock*>(activation_rows + static_cast<std::size_t>(c) * activation_row_bytes);
    for (int r = 0; r < n_rows; ++r) {
      const auto* w = reinterpret_cast<const WBlock*>(weight_rows + static_cast<std::size_t>(r) * weight_row_bytes);
      float v;
      if constexpr (kIQ4NL) {
        v = n_cols > 1 ? dot_8_lanes(w, a, n / 32) : dot_iq4_nl_single(w, a, n / 32);
      } else {
        v = dot_8_lanes(w, a, n / 32);
      }
      out[static_cast<std::size_t>(c) * out_col_stride + static_cast<std::size_t>(r)] = v;
    }
  }
}

}  // namespace

void q4_1_rows_cols_scalar(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                           const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols, std::int64_t n,
                           float* out, std::size_t out_col_stride) {
  scalar_rows_cols<BlockQ4_1, BlockQ8_1, false>(weight_rows, weight_row_bytes, n_rows, activation_rows,
                                                activation_row_bytes, n_cols, n, out, out_col_stride);
}
void q5_0_rows_cols_scalar(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                           const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols, std::int64_t n,
                           float* out, std::size_t out_col_stride) {
  scalar_rows_cols<BlockQ5_0, BlockQ8_0, false>(weight_rows, weight_row_bytes, n_rows, activation_rows,
                                                activation_row_bytes, n_cols, n, out, out_col_stride);
}
void q5_1_rows_cols_scalar(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                           const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols, std::int64_t n,
                           float* out, std::size_t out_col_stride) {
  scalar_rows_cols<BlockQ5_1, BlockQ8_1, false>(weight_rows, weight_row_bytes, n_rows, activation_rows,
                                                activation_row_bytes, n_cols, n, out, out_col_stride);
}
void iq4_nl_rows_cols_scalar(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                             const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                             std::int64_t n, float* out, std::size_t out_col_stride) {
  scalar_rows_cols<BlockIQ4_NL, BlockQ8_0, true>(weight_rows, weight_row_bytes, n_rows, activation_rows,
                                                 activation_row_bytes, n_cols, n, out, out_col_stride);
}

}  // namespace loom::compute::detail

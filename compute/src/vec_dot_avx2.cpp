// AVX2 + FMA + F16C vec_dot kernels (compiled with -mavx2 -mfma -mf16c; only reached when cpu_features()
// reports that set). See vec_dot_kernels.hpp for why nothing here calls shared inline code.
//
// Shape of every kernel: a row function templated on the number of activation columns NC (1..4) dots one
// weight row with NC activation rows, unpacking each weight block once for all columns and keeping one
// float accumulator per column (several for NC = 1, to hide FMA latency); a driver walks rows and column
// groups. Quantized blocks are multiplied as bytes (maddubs: unsigned x signed -> int16 pairs), widened with
// madd, converted to float once per block and scaled with one FMA. The small loops over columns, unroll
// copies and chunks carry "#pragma GCC unroll": they must become straight-line code so that their
// accumulators live in registers, and -O2 does not always unroll them on its own.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "loom/compute/quant_blocks.hpp"
#include "vec_dot_kernels.hpp"

namespace loom::compute::detail {
namespace {

inline float hsum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

inline float f16_scalar(std::uint16_t h) { return _cvtsh_ss(h); }

inline const std::byte* column(const std::byte* first, std::size_t stride, int c) {
  return first + static_cast<std::size_t>(c) * stride;
}

// Rows are taken in tiles of kRowTile so that with many columns (prefill) a tile's weight rows stay in L1/L2
// while every column group passes over them; each column group of 4 is held in registers per row.
constexpr int kRowTile = 8;

// Driver: each row tile against column groups of 4, then the 1..3 leftover columns.
template <class K>
void rows_cols(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activation_rows,
               std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out, std::size_t out_col_stride) {
  const bool batch = n_cols > 1;  // which summation order (the float kernels have two)
  for (int r0 = 0; r0 < n_rows; r0 += kRowTile) {
    const int r1 = n_rows - r0 < kRowTile ? n_rows : r0 + kRowTile;
    for (int c = 0; c < n_cols; c += 4) {
      const std::byte* a = column(activation_rows, activation_row_bytes, c);
      float* o = out + static_cast<std::size_t>(c) * out_col_stride;
      for (int r = r0; r < r1; ++r) {
        const std::byte* w = weight_rows + static_cast<std::size_t>(r) * weight_row_bytes;
        switch (n_cols - c < 4 ? n_cols - c : 4) {
          case 4:
            K::template row<4>(w, a, activation_row_bytes, n, batch, o + r, out_col_stride);
            break;
          case 3:
            K::template row<3>(w, a, activation_row_bytes, n, batch, o + r, out_col_stride);
            break;
          case 2:
            K::template row<2>(w, a, activation_row_bytes, n, batch, o + r, out_col_stride);
            break;
          default:
            K::template row<1>(w, a, activation_row_bytes, n, batch, o + r, out_col_stride);
            break;
        }
      }
    }
  }
}

// ---- f32, f16, bf16 weights x f32 activations ----

// Weight formats as policies (a struct, not function-pointer template arguments, which would drop the
// vector types' attributes): load 8 weights as f32, or convert one for the tail.
struct F32Weights {
  using W = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static float scalar(const float* p) { return *p; }
};
struct F16Weights {
  using W = std::uint16_t;
  static __m256 load(const std::uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float scalar(const std::uint16_t* p) { return f16_scalar(*p); }
};
struct BF16Weights {
  using W = std::uint16_t;
  static __m256 load(const std::uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float scalar(const std::uint16_t* p) {
    const std::uint32_t bits = static_cast<std::uint32_t>(*p) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
};

// Two summation orders, the reference implementation's two kernels (see attention.hpp for why we match it):
// a single activation column sums in four 8-lane accumulators over 32-element steps, folded as
// (a0 + a2) + (a1 + a3) and reduced with two horizontal adds, leftovers added one by one; a batch of
// columns (when n is a multiple of 8) keeps one 8-lane accumulator per column.
template <class Format>
struct FloatKernel {
  using W = typename Format::W;

  template <int NC>
  static void row_batch(const W* w, const float* const* a, std::int64_t n, float* out, std::size_t out_col_stride) {
    __m256 acc[NC];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    for (std::int64_t i = 0; i < n; i += 8) {
      const __m256 wv = Format::load(w + i);
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) acc[c] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(a[c] + i), acc[c]);
    }
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) out[static_cast<std::size_t>(c) * out_col_stride] = hsum(acc[c]);
  }

  template <int NC>
  static void row_single(const W* w, const float* const* a, std::int64_t n, float* out, std::size_t out_col_stride) {
    __m256 acc[NC][4];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c)
#pragma GCC unroll 8
      for (int u = 0; u < 4; ++u) acc[c][u] = _mm256_setzero_ps();
    const std::int64_t whole = n / 32 * 32;
    for (std::int64_t i = 0; i < whole; i += 32) {
#pragma GCC unroll 8
      for (int u = 0; u < 4; ++u) {
        const __m256 wv = Format::load(w + i + 8 * u);
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) acc[c][u] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(a[c] + i + 8 * u), acc[c][u]);
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      const __m256 folded = _mm256_add_ps(_mm256_add_ps(acc[c][0], acc[c][2]), _mm256_add_ps(acc[c][1], acc[c][3]));
      const __m128 t = _mm_add_ps(_mm256_castps256_ps128(folded), _mm256_extractf128_ps(folded, 1));
      const __m128 h = _mm_hadd_ps(t, t);
      float sum = _mm_cvtss_f32(_mm_hadd_ps(h, h));
      // Leftovers fused (as a compiler contracts the reference's scalar loop), spelled out so that it does
      // not depend on this file's floating-point contraction setting.
      for (std::int64_t j = whole; j < n; ++j) sum = std::fma(Format::scalar(w + j), a[c][j], sum);
      out[static_cast<std::size_t>(c) * out_col_stride] = sum;
    }
  }

  template <int NC>
  static void row(const std::byte* weight_row, const std::byte* activations, std::size_t activation_row_bytes,
                  std::int64_t n, bool batch, float* out, std::size_t out_col_stride) {
    const W* w = reinterpret_cast<const W*>(weight_row);
    const float* a[NC];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) a[c] = reinterpret_cast<const float*>(column(activations, activation_row_bytes, c));
    if (batch && n % 8 == 0) return row_batch<NC>(w, a, n, out, out_col_stride);
    row_single<NC>(w, a, n, out, out_col_stride);
  }
};

using F32Kernel = FloatKernel<F32Weights>;
using F16Kernel = FloatKernel<F16Weights>;
using BF16Kernel = FloatKernel<BF16Weights>;

// ---- Q8_0 and Q4_0 weights x Q8_0 activations ----
//
// Per block the integer dot product lands in 8 int32 lanes (lane k: elements 4k..4k+3, exact), is converted
// to float and added with one FMA, scaled by d_w * d_a, into ONE accumulator per (row, column); the
// accumulator is summed across lanes at the end. That order is the reference implementation's, so a product
// gives the same bits (and the model the same activations) as there. FMA latency is hidden by working on
// several rows at once (independent chains) instead of splitting one row's sum.

inline __m256i madd_ones(__m256i pairs) { return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)); }

struct Q4_0Weights {
  using Block = BlockQ4_0;
  // (q - 8) . a = q . a - 8 * (sums of a), lane by lane in int32: with 8 * the activation's 4-element sums
  // precomputed per column, the unsigned nibbles go straight into maddubs (no sign trick), and the result is
  // the same integer as with q - 8.
  static constexpr bool kOffsetBySums = true;
  // Values 0..15 are the low nibbles, 16..31 the high ones: low nibbles to the low lane, high to the high.
  static __m256i nibbles(const BlockQ4_0& block) {
    // The 16 bytes in both lanes (a load-port broadcast), the high lane shifted by 4: two ALU operations.
    const __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block.qs)));
    const __m256i both = _mm256_srlv_epi32(raw, _mm256_set_epi32(4, 4, 4, 4, 0, 0, 0, 0));
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
  }
};
struct Q8_0Weights {
  using Block = BlockQ8_0;
  static constexpr bool kOffsetBySums = false;
};

// Q8_0 activations carry f16 scales; converting them in the inner loop would cost a third of the kernel, so
// a call converts each activation column's scales once (and, for Q4_0, its 8 x lane sums) into a side
// buffer that every weight row reuses. kInline is the fallback for rows too long for the stack buffer.
template <class Format>
struct Q8_0ActivationKernel {
  using WBlock = typename Format::Block;
  static constexpr bool kSums = Format::kOffsetBySums;
  // Per block and column: one float scale, and for Q4_0 eight int32 lane sums (stored as 8 floats' room).
  static constexpr std::int64_t kSideFloats = kSums ? 9 : 1;

  struct Side {
    const float* scales = nullptr;   // [column][block]
    const __m256i* sums = nullptr;   // [column][block], Q4_0 only
  };

  static __m256i eight_times_sums(const BlockQ8_0& a) {
    return madd_ones(_mm256_maddubs_epi16(_mm256_set1_epi8(8), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs))));
  }

  static void fill_side(const BlockQ8_0* a, std::int64_t nb, float* scales, __m256i* sums) {
    for (std::int64_t b = 0; b < nb; ++b) scales[b] = f16_scalar(a[b].d);
    if constexpr (kSums) {
      for (std::int64_t b = 0; b < nb; ++b) _mm256_storeu_si256(sums + b, eight_times_sums(a[b]));
    }
  }

  // NR weight rows x NC activation columns, one accumulator each.
  template <int NR, int NC, bool kInline>
  static void tile(const std::byte* weight_rows, std::size_t weight_row_bytes, const std::byte* activations,
                   std::size_t activation_row_bytes, Side side, std::int64_t nb, float* out,
                   std::size_t out_col_stride) {
    const WBlock* w[NR];
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) w[r] = reinterpret_cast<const WBlock*>(weight_rows + static_cast<std::size_t>(r) * weight_row_bytes);
    const BlockQ8_0* a[NC];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) a[c] = reinterpret_cast<const BlockQ8_0*>(column(activations, activation_row_bytes, c));
    __m256 acc[NR][NC];
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) acc[r][c] = _mm256_setzero_ps();
    }
    for (std::int64_t b = 0; b < nb; ++b) {
      __m256i aq[NC];
      float da[NC];
      __m256i sums[NC];
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) {
        aq[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][b].qs));
        da[c] = kInline ? f16_scalar(a[c][b].d) : side.scales[c * nb + b];
        if constexpr (kSums) sums[c] = kInline ? eight_times_sums(a[c][b]) : _mm256_loadu_si256(side.sums + c * nb + b);
      }
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) {
        // The rows of a tile are NR short streams read side by side, too short for the hardware prefetcher
        // to ramp up on; fetch the same place in the next tile's rows (a contiguous continuation) ahead.
        _mm_prefetch(reinterpret_cast<const char*>(w[r] + b) + NR * weight_row_bytes, _MM_HINT_T0);
        const float dw = f16_scalar(w[r][b].d);
        if constexpr (kSums) {
          const __m256i nq = Format::nibbles(w[r][b]);
#pragma GCC unroll 8
          for (int c = 0; c < NC; ++c) {
            const __m256i lanes = _mm256_sub_epi32(madd_ones(_mm256_maddubs_epi16(nq, aq[c])), sums[c]);
            acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(dw * da[c]), _mm256_cvtepi32_ps(lanes), acc[r][c]);
          }
        } else {
          // maddubs wants an unsigned operand: |w| times a with w's sign (exact: activations are never -128,
          // quantize.hpp, and 2 * 128 * 127 fits int16).
          const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r][b].qs));
          const __m256i abs_w = _mm256_sign_epi8(wq, wq);
#pragma GCC unroll 8
          for (int c = 0; c < NC; ++c) {
            const __m256i lanes = madd_ones(_mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(aq[c], wq)));
            acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(dw * da[c]), _mm256_cvtepi32_ps(lanes), acc[r][c]);
          }
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) out[static_cast<std::size_t>(c) * out_col_stride + r] = hsum(acc[r][c]);
    }
  }

  // Rows [0, n_rows) against NC columns: NR rows at a time where the registers allow, then one at a time.
  template <int NC, bool kInline>
  static void rows(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activations,
                   std::size_t activation_row_bytes, Side side, std::int64_t nb, float* out, std::size_t out_col_stride) {
    constexpr int NR = NC == 1 ? 4 : NC == 2 ? 2 : 1;
    int r = 0;
    for (; r + NR <= n_rows; r += NR) {
      tile<NR, NC, kInline>(weight_rows + static_cast<std::size_t>(r) * weight_row_bytes, weight_row_bytes, activations,
                            activation_row_bytes, side, nb, out + r, out_col_stride);
    }
    for (; r < n_rows; ++r) {
      tile<1, NC, kInline>(weight_rows + static_cast<std::size_t>(r) * weight_row_bytes, weight_row_bytes, activations,
                           activation_row_bytes, side, nb, out + r, out_col_stride);
    }
  }

  template <bool kInline>
  static void rows_group(int n_cols, const std::byte* w, std::size_t weight_row_bytes, int n_rows, const std::byte* a,
                         std::size_t activation_row_bytes, Side side, std::int64_t nb, float* out,
                         std::size_t out_col_stride) {
    switch (n_cols) {
      case 4:
        return rows<4, kInline>(w, weight_row_bytes, n_rows, a, activation_row_bytes, side, nb, out, out_col_stride);
      case 3:
        return rows<3, kInline>(w, weight_row_bytes, n_rows, a, activation_row_bytes, side, nb, out, out_col_stride);
      case 2:
        return rows<2, kInline>(w, weight_row_bytes, n_rows, a, activation_row_bytes, side, nb, out, out_col_stride);
      default:
        return rows<1, kInline>(w, weight_row_bytes, n_rows, a, activation_row_bytes, side, nb, out, out_col_stride);
    }
  }

  static void rows_cols(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                        const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols, std::int64_t n,
                        float* out, std::size_t out_col_stride) {
    constexpr std::int64_t kSideBuffer = 16384;  // floats (64 KiB of stack)
    const std::int64_t nb = n / 32;
    constexpr std::int64_t kUsable = kSideBuffer - 8;  // room for aligning the sums after the scales
    if (nb == 0 || kSideFloats * nb > kUsable) {
      for (int c = 0; c < n_cols; c += 4) {
        rows_group<true>(n_cols - c < 4 ? n_cols - c : 4, weight_rows, weight_row_bytes, n_rows,
                         column(activation_rows, activation_row_bytes, c), activation_row_bytes, Side{}, nb,
                         out + static_cast<std::size_t>(c) * out_col_stride, out_col_stride);
      }
      return;
    }
    // Columns in chunks whose side data fits the buffer; each row tile meets every column group of a chunk
    // while it is in cache.
    alignas(32) float side_buffer[kSideBuffer];
    std::int64_t chunk_cols = kUsable / (kSideFloats * nb);
    if (chunk_cols > 4) chunk_cols -= chunk_cols % 4;
    for (int c0 = 0; c0 < n_cols; c0 += static_cast<int>(chunk_cols)) {
      const int chunk = n_cols - c0 < chunk_cols ? n_cols - c0 : static_cast<int>(chunk_cols);
      float* scales = side_buffer;
      auto* sums = reinterpret_cast<__m256i*>(side_buffer + (chunk * nb + 7) / 8 * 8);
      for (int c = 0; c < chunk; ++c) {
        fill_side(reinterpret_cast<const BlockQ8_0*>(column(activation_rows, activation_row_bytes, c0 + c)), nb,
                  scales + c * nb, sums + c * nb);
      }
      for (int r0 = 0; r0 < n_rows; r0 += kRowTile) {
        const int tile_rows = n_rows - r0 < kRowTile ? n_rows - r0 : kRowTile;
        for (int c = 0; c < chunk; c += 4) {
          const Side side{scales + c * nb, sums + c * nb};
          rows_group<false>(chunk - c < 4 ? chunk - c : 4, weight_rows + static_cast<std::size_t>(r0) * weight_row_bytes,
                            weight_row_bytes, tile_rows, column(activation_rows, activation_row_bytes, c0 + c),
                            activation_row_bytes, side, nb, out + r0 + static_cast<std::size_t>(c0 + c) * out_col_stride,
                            out_col_stride);
        }
      }
    }
  }
};

using Q8_0Kernel = Q8_0ActivationKernel<Q8_0Weights>;
using Q4_0Kernel = Q8_0ActivationKernel<Q4_0Weights>;

// ---- Q4_K and Q5_K weights x Q8_K activations ----

// The 8 scales and 8 mins of a Q4_K/Q5_K block as bytes 0..7 of two registers, unpacked four at a time
// with 32-bit masks (the same bit layout as k_scale_min()).
struct ScalesMins {
  __m128i scales;
  __m128i mins;
};
inline ScalesMins unpack_scales_mins(const std::uint8_t* packed) {
  std::uint32_t w[3];
  std::memcpy(w, packed, sizeof w);
  const std::uint32_t scales_lo = w[0] & 0x3F3F3F3Fu;
  const std::uint32_t mins_lo = w[1] & 0x3F3F3F3Fu;
  const std::uint32_t scales_hi = (w[2] & 0x0F0F0F0Fu) | ((w[0] >> 2) & 0x30303030u);
  const std::uint32_t mins_hi = ((w[2] >> 4) & 0x0F0F0F0Fu) | ((w[1] >> 2) & 0x30303030u);
  return {_mm_set_epi32(0, 0, static_cast<int>(scales_hi), static_cast<int>(scales_lo)),
          _mm_set_epi32(0, 0, static_cast<int>(mins_hi), static_cast<int>(mins_lo))};
}

// shuffle_epi8 controls broadcasting int16 element j of each 128-bit lane.
inline __m256i broadcast_i16_control(int j) {
  return _mm256_set1_epi16(static_cast<short>((2 * j) | ((2 * j + 1) << 8)));
}

inline int hsum_i32(__m128i x) {
  x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4E));
  x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xB1));
  return _mm_cvtsi128_si32(x);
}
inline int hsum_i32(__m256i v) {
  return hsum_i32(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

// The integer part is the same for both formats: per superblock, 8 int32 lanes where lane u holds, for every
// 64-value chunk j, scale[2j] * (values 4u..4u+3 of its first 32) + scale[2j+1] * (of its last 32); and the
// mins term sum_j min_j * (bsums[2j] + bsums[2j+1]). The float part follows the reference implementation
// (vec_dot.hpp): Q4_K as its repacked kernel does it (whole-superblock integer sums, one float FMA each for
// the scales and the mins, subtracted at the end); Q5_K as its vec_dot does (the lanes into an 8-lane
// accumulator, the mins into a scalar).
template <class Block, bool kFifthBit>
struct KAffineKernel {
  template <int NC>
  static void row(const std::byte* weight_row, const std::byte* activations, std::size_t activation_row_bytes,
                  std::int64_t n, bool /*batch: one order for both*/, float* out, std::size_t out_col_stride) {
    const std::int64_t nb = n / 256;
    const Block* w = reinterpret_cast<const Block*>(weight_row);
    const BlockQ8_K* a[NC];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c)
      a[c] = reinterpret_cast<const BlockQ8_K*>(column(activations, activation_row_bytes, c));
    __m256 acc[NC];       // Q5_K
    float total[NC];      // Q4_K: scales part
    float mins_part[NC];  // Q4_K: subtracted at the end; Q5_K: added at the end (its scale carries the sign)
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      acc[c] = _mm256_setzero_ps();
      total[c] = 0.0f;
      mins_part[c] = 0.0f;
    }
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (std::int64_t b = 0; b < nb; ++b) {
      const Block& block = w[b];
      const float d = f16_scalar(block.d);
      const float dmin = f16_scalar(block.dmin);
      const ScalesMins sm = unpack_scales_mins(block.scales);
      const __m256i scales16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm.scales));
      const __m128i mins16 = _mm_cvtepu8_epi16(sm.mins);
      __m256i isum[NC];
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) isum[c] = _mm256_setzero_si256();
      __m256i high_bits;
      if constexpr (kFifthBit) high_bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qh));
#pragma GCC unroll 8
      for (int chunk = 0; chunk < 4; ++chunk) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qs + 32 * chunk));
        __m256i lo = _mm256_and_si256(q, low4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
        if constexpr (kFifthBit) {
          // Bits 2*chunk and 2*chunk+1 of qh[l], shifted down as we go, become bit 4 of the values.
          lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(high_bits, _mm256_set1_epi8(1)), 4));
          hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(high_bits, _mm256_set1_epi8(2)), 3));
          high_bits = _mm256_srli_epi16(high_bits, 2);
        }
        const __m256i scale_lo = _mm256_shuffle_epi8(scales16, broadcast_i16_control(2 * chunk));
        const __m256i scale_hi = _mm256_shuffle_epi8(scales16, broadcast_i16_control(2 * chunk + 1));
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) {
          const auto* x = a[c][b].qs + 64 * chunk;
          const __m256i p_lo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
          const __m256i p_hi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32)));
          isum[c] = _mm256_add_epi32(
              isum[c], _mm256_add_epi32(_mm256_madd_epi16(p_lo, scale_lo), _mm256_madd_epi16(p_hi, scale_hi)));
        }
      }
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) {
        // Mins: sum_j min_j * (bsums[2j] + bsums[2j+1]), the pair sums by a horizontal add.
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][b].bsums));
        const __m128i pair_sums = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
        const int mins_sum = hsum_i32(_mm_madd_epi16(mins16, pair_sums));
        const float da = a[c][b].d;
        if constexpr (kFifthBit) {
          acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(da * d), _mm256_cvtepi32_ps(isum[c]), acc[c]);
          mins_part[c] = std::fma(-da * dmin, static_cast<float>(mins_sum), mins_part[c]);
        } else {
          total[c] = std::fma(static_cast<float>(hsum_i32(isum[c])), d * da, total[c]);
          mins_part[c] = std::fma(static_cast<float>(mins_sum), dmin * da, mins_part[c]);
        }
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      out[static_cast<std::size_t>(c) * out_col_stride] =
          kFifthBit ? hsum(acc[c]) + mins_part[c] : total[c] - mins_part[c];
    }
  }
};

using Q4KKernel = KAffineKernel<BlockQ4_K, false>;
using Q5KKernel = KAffineKernel<BlockQ5_K, true>;

// ---- Q6_K weights x Q8_K activations ----

// shuffle_epi8 control: the low lane broadcasts int16 element 2k, the high lane element 2k + 1, so one
// register scales a 32-value group made of sub-blocks 2k (low 16 values) and 2k + 1 (high 16).
inline __m256i pair_control(int k) {
  const short lo = static_cast<short>((4 * k) | ((4 * k + 1) << 8));
  const short hi = static_cast<short>((4 * k + 2) | ((4 * k + 3) << 8));
  return _mm256_setr_m128i(_mm_set1_epi16(lo), _mm_set1_epi16(hi));
}

struct Q6KKernel {
  template <int NC>
  static void row(const std::byte* weight_row, const std::byte* activations, std::size_t activation_row_bytes,
                  std::int64_t n, bool /*batch: one order for both*/, float* out, std::size_t out_col_stride) {
    const std::int64_t nb = n / 256;
    const BlockQ6_K* w = reinterpret_cast<const BlockQ6_K*>(weight_row);
    const BlockQ8_K* a[NC];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c)
      a[c] = reinterpret_cast<const BlockQ8_K*>(column(activations, activation_row_bytes, c));
    __m256 acc[NC];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (std::int64_t b = 0; b < nb; ++b) {
      const BlockQ6_K& block = w[b];
      const float d = f16_scalar(block.d);
      const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales));
      // q is stored as q + 32 (0..63, fine for maddubs' unsigned side); the 32 comes back out of each int16
      // pair before the scales (32 * a by a second maddubs), so every int32 lane holds exactly what the
      // reference implementation's lane holds (vec_dot.hpp).
      __m256i isum[NC];
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) isum[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int half = 0; half < 2; ++half) {
        const std::uint8_t* ql = block.ql + 64 * half;
        const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
        const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qh + 32 * half));
        const __m128i half_scales = half == 0 ? scales8 : _mm_srli_si128(scales8, 8);
        const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(half_scales));
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4),
                               _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x03)), 4));
        q[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                               _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x0C)), 2));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                               _mm256_and_si256(qh, _mm256_set1_epi8(0x30)));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                               _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(static_cast<char>(0xC0))), 2));
#pragma GCC unroll 8
        for (int k = 0; k < 4; ++k) {
          const __m256i scale = _mm256_shuffle_epi8(sc, pair_control(k));
#pragma GCC unroll 8
          for (int c = 0; c < NC; ++c) {
            const auto* x = a[c][b].qs + 128 * half + 32 * k;
            const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
            const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], xv), _mm256_maddubs_epi16(_mm256_set1_epi8(32), xv));
            isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(p, scale));
          }
        }
      }
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) {
        acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d * a[c][b].d), _mm256_cvtepi32_ps(isum[c]), acc[c]);
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) out[static_cast<std::size_t>(c) * out_col_stride] = hsum(acc[c]);
  }
};

// Constant-initialized: nothing in this file runs before the CPU has been checked.
constinit const VecDotTable kAvx2Table{
    .f32 = rows_cols<F32Kernel>,
    .f16 = rows_cols<F16Kernel>,
    .bf16 = rows_cols<BF16Kernel>,
    .q8_0 = Q8_0Kernel::rows_cols,
    .q4_0 = Q4_0Kernel::rows_cols,
    .q4_k = rows_cols<Q4KKernel>,
    .q5_k = rows_cols<Q5KKernel>,
    .q6_k = rows_cols<Q6KKernel>,
};

}  // namespace

const VecDotTable& avx2_vec_dot_table() noexcept { return kAvx2Table; }

}  // namespace loom::compute::detail

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
  for (int r0 = 0; r0 < n_rows; r0 += kRowTile) {
    const int r1 = n_rows - r0 < kRowTile ? n_rows : r0 + kRowTile;
    for (int c = 0; c < n_cols; c += 4) {
      const std::byte* a = column(activation_rows, activation_row_bytes, c);
      float* o = out + static_cast<std::size_t>(c) * out_col_stride;
      for (int r = r0; r < r1; ++r) {
        const std::byte* w = weight_rows + static_cast<std::size_t>(r) * weight_row_bytes;
        switch (n_cols - c < 4 ? n_cols - c : 4) {
          case 4:
            K::template row<4>(w, a, activation_row_bytes, n, o + r, out_col_stride);
            break;
          case 3:
            K::template row<3>(w, a, activation_row_bytes, n, o + r, out_col_stride);
            break;
          case 2:
            K::template row<2>(w, a, activation_row_bytes, n, o + r, out_col_stride);
            break;
          default:
            K::template row<1>(w, a, activation_row_bytes, n, o + r, out_col_stride);
            break;
        }
      }
    }
  }
}

// Accumulators per column: 4 for a single column, so one row keeps 4 FMA chains in flight.
template <int NC>
inline constexpr int kUnroll = NC == 1   ? 4
                               : NC == 2 ? 2
                                         : 1;

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

template <class Format>
struct FloatKernel {
  using W = typename Format::W;
  template <int NC>
  static void row(const std::byte* weight_row, const std::byte* activations, std::size_t activation_row_bytes,
                  std::int64_t n, float* out, std::size_t out_col_stride) {
    constexpr int U = kUnroll<NC>;
    const W* w = reinterpret_cast<const W*>(weight_row);
    const float* a[NC];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) a[c] = reinterpret_cast<const float*>(column(activations, activation_row_bytes, c));
    __m256 acc[NC][U];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c)
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) acc[c][u] = _mm256_setzero_ps();
    std::int64_t i = 0;
    for (; i + 8 * U <= n; i += 8 * U) {
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) {
        const __m256 wv = Format::load(w + i + 8 * u);
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) acc[c][u] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(a[c] + i + 8 * u), acc[c][u]);
      }
    }
    for (; i + 8 <= n; i += 8) {
      const __m256 wv = Format::load(w + i);
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) acc[c][0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(a[c] + i), acc[c][0]);
    }
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
#pragma GCC unroll 8
      for (int u = 1; u < U; ++u) acc[c][0] = _mm256_add_ps(acc[c][0], acc[c][u]);
      float sum = hsum(acc[c][0]);
      for (std::int64_t j = i; j < n; ++j) sum += Format::scalar(w + j) * a[c][j];
      out[static_cast<std::size_t>(c) * out_col_stride] = sum;
    }
  }
};

using F32Kernel = FloatKernel<F32Weights>;
using F16Kernel = FloatKernel<F16Weights>;
using BF16Kernel = FloatKernel<BF16Weights>;

// ---- Q8_0 and Q4_0 weights x Q8_0 activations ----

// Signed bytes w . a in 8 int32 lanes (as float). maddubs wants an unsigned operand, so it gets |w| and the
// activations take w's sign: exact because activations are never -128 (quantize.hpp), and 2 * 128 * 127 fits
// int16.
inline __m256 dot_i8(__m256i abs_w, __m256i w, __m256i a) {
  const __m256i pairs = _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(a, w));
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

struct Q4_0Weights {
  using Block = BlockQ4_0;
  // sum (q - 8) a = sum q a - 8 sum a: with the activation block sums precomputed, the unsigned nibbles go
  // straight into maddubs and the sign trick (three instructions per block) is not needed.
  static constexpr bool kOffsetBySums = true;
  // Values 0..15 are the low nibbles, 16..31 the high ones: low nibbles to the low lane, high to the high.
  static __m256i nibbles(const BlockQ4_0& block) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.qs));
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
  }
  static __m256i unpack(const BlockQ4_0& block) { return _mm256_sub_epi8(nibbles(block), _mm256_set1_epi8(8)); }
};
struct Q8_0Weights {
  using Block = BlockQ8_0;
  static constexpr bool kOffsetBySums = false;
  static __m256i unpack(const BlockQ8_0& block) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qs));
  }
};

inline int sum_i8x32(const std::int8_t* q) {
  const __m256i pairs =
      _mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
  const __m256i quads = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
  __m128i x = _mm_add_epi32(_mm256_castsi256_si128(quads), _mm256_extracti128_si256(quads, 1));
  x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4E));
  x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xB1));
  return _mm_cvtsi128_si32(x);
}

// Q8_0 activations carry f16 scales; converting them costs as much as a third of the kernel, so a matrix call
// converts each activation row's scales once and every weight row reuses them. Per column the side buffer
// holds nb scales, then (for Q4_0) nb values 8 * d * sum(q). kInline is the fallback for rows too long for
// the stack buffer: scales converted in the loop, and Q4_0 through the sign trick.
template <class Format>
struct Q8_0ActivationKernel {
  using WBlock = typename Format::Block;
  static constexpr int kSideFloats = Format::kOffsetBySums ? 2 : 1;  // per block and column

  static void fill_side(const BlockQ8_0* a, std::int64_t nb, float* side) {
    for (std::int64_t b = 0; b < nb; ++b) side[b] = f16_scalar(a[b].d);
    if constexpr (Format::kOffsetBySums) {
      for (std::int64_t b = 0; b < nb; ++b) side[nb + b] = 8.0f * side[b] * static_cast<float>(sum_i8x32(a[b].qs));
    }
  }

  template <int NC, bool kInline>
  static void row(const std::byte* weight_row, const std::byte* activations, std::size_t activation_row_bytes,
                  const float* side, std::int64_t nb, float* out, std::size_t out_col_stride) {
    constexpr int U = kUnroll<NC>;
    constexpr bool kSums = Format::kOffsetBySums && !kInline;
    const WBlock* w = reinterpret_cast<const WBlock*>(weight_row);
    const std::int64_t side_stride = kSideFloats * nb;
    const BlockQ8_0* a[NC];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c)
      a[c] = reinterpret_cast<const BlockQ8_0*>(column(activations, activation_row_bytes, c));
    __m256 acc[NC][U];
    float offset[NC][U];  // sum over blocks of dw * 8 * da * sum(a), subtracted at the end (kSums only)
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) {
        acc[c][u] = _mm256_setzero_ps();
        offset[c][u] = 0.0f;
      }
    }
    const auto step = [&](std::int64_t b, int u) {
      const float dw = f16_scalar(w[b].d);
      if constexpr (kSums) {
        const __m256i nq = Format::nibbles(w[b]);
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) {
          const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][b].qs));
          const __m256i quads = _mm256_madd_epi16(_mm256_maddubs_epi16(nq, aq), _mm256_set1_epi16(1));
          const float* col_side = side + c * side_stride;
          acc[c][u] = _mm256_fmadd_ps(_mm256_set1_ps(dw * col_side[b]), _mm256_cvtepi32_ps(quads), acc[c][u]);
          offset[c][u] += dw * col_side[nb + b];
        }
      } else {
        const __m256i wq = Format::unpack(w[b]);
        const __m256i abs_w = _mm256_sign_epi8(wq, wq);
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) {
          const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][b].qs));
          const float da = kInline ? f16_scalar(a[c][b].d) : side[c * side_stride + b];
          acc[c][u] = _mm256_fmadd_ps(_mm256_set1_ps(dw * da), dot_i8(abs_w, wq, aq), acc[c][u]);
        }
      }
    };
    std::int64_t b = 0;
    for (; b + U <= nb; b += U) {
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) step(b + u, u);
    }
    for (; b < nb; ++b) step(b, 0);
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
#pragma GCC unroll 8
      for (int u = 1; u < U; ++u) {
        acc[c][0] = _mm256_add_ps(acc[c][0], acc[c][u]);
        offset[c][0] += offset[c][u];
      }
      out[static_cast<std::size_t>(c) * out_col_stride] = hsum(acc[c][0]) - offset[c][0];
    }
  }

  template <bool kInline>
  static void row_group(int n_cols, const std::byte* w, const std::byte* a, std::size_t activation_row_bytes,
                        const float* side, std::int64_t nb, float* out, std::size_t out_col_stride) {
    switch (n_cols) {
      case 4:
        return row<4, kInline>(w, a, activation_row_bytes, side, nb, out, out_col_stride);
      case 3:
        return row<3, kInline>(w, a, activation_row_bytes, side, nb, out, out_col_stride);
      case 2:
        return row<2, kInline>(w, a, activation_row_bytes, side, nb, out, out_col_stride);
      default:
        return row<1, kInline>(w, a, activation_row_bytes, side, nb, out, out_col_stride);
    }
  }

  static void rows_cols(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                        const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols, std::int64_t n,
                        float* out, std::size_t out_col_stride) {
    constexpr std::int64_t kSideBuffer = 4096;  // floats (16 KiB of stack)
    const std::int64_t nb = n / 32;
    if (nb == 0 || kSideFloats * nb > kSideBuffer) {
      for (int r = 0; r < n_rows; ++r) {
        const std::byte* w = weight_rows + static_cast<std::size_t>(r) * weight_row_bytes;
        for (int c = 0; c < n_cols; c += 4) {
          row_group<true>(n_cols - c < 4 ? n_cols - c : 4, w, column(activation_rows, activation_row_bytes, c),
                          activation_row_bytes, nullptr, nb, out + r + static_cast<std::size_t>(c) * out_col_stride,
                          out_col_stride);
        }
      }
      return;
    }
    // Columns in chunks whose side data fits the buffer (at least 4 columns per chunk unless rows are very
    // long); each weight row is read from memory once per chunk.
    float side[kSideBuffer];
    std::int64_t chunk_cols = kSideBuffer / (kSideFloats * nb);
    if (chunk_cols > 4) chunk_cols -= chunk_cols % 4;
    for (int c0 = 0; c0 < n_cols; c0 += static_cast<int>(chunk_cols)) {
      const int chunk = n_cols - c0 < chunk_cols ? n_cols - c0 : static_cast<int>(chunk_cols);
      for (int c = 0; c < chunk; ++c) {
        fill_side(reinterpret_cast<const BlockQ8_0*>(column(activation_rows, activation_row_bytes, c0 + c)), nb,
                  side + c * kSideFloats * nb);
      }
      for (int r0 = 0; r0 < n_rows; r0 += kRowTile) {
        const int r1 = n_rows - r0 < kRowTile ? n_rows : r0 + kRowTile;
        for (int c = 0; c < chunk; c += 4) {
          for (int r = r0; r < r1; ++r) {
            row_group<false>(chunk - c < 4 ? chunk - c : 4,
                             weight_rows + static_cast<std::size_t>(r) * weight_row_bytes,
                             column(activation_rows, activation_row_bytes, c0 + c), activation_row_bytes,
                             side + c * kSideFloats * nb, nb,
                             out + r + static_cast<std::size_t>(c0 + c) * out_col_stride, out_col_stride);
          }
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

template <class Block, bool kFifthBit>
struct KAffineKernel {
  template <int NC>
  static void row(const std::byte* weight_row, const std::byte* activations, std::size_t activation_row_bytes,
                  std::int64_t n, float* out, std::size_t out_col_stride) {
    const std::int64_t nb = n / 256;
    const Block* w = reinterpret_cast<const Block*>(weight_row);
    const BlockQ8_K* a[NC];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c)
      a[c] = reinterpret_cast<const BlockQ8_K*>(column(activations, activation_row_bytes, c));
    __m256 acc[NC];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
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
      for (int c = 0; c < NC; ++c) {
        // Mins: sum_j min_j * (bsums[2j] + bsums[2j+1]), the pair sums by a horizontal add.
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][b].bsums));
        const __m128i pair_sums = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
        const __m128 min_part = _mm_cvtepi32_ps(_mm_madd_epi16(mins16, pair_sums));
        const __m256 min_scale = _mm256_set1_ps(-dmin * a[c][b].d);
        acc[c] = _mm256_fmadd_ps(min_scale, _mm256_zextps128_ps256(min_part), acc[c]);
        isum[c] = _mm256_setzero_si256();
      }
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
        acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d * a[c][b].d), _mm256_cvtepi32_ps(isum[c]), acc[c]);
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) out[static_cast<std::size_t>(c) * out_col_stride] = hsum(acc[c]);
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
                  std::int64_t n, float* out, std::size_t out_col_stride) {
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
      const __m256i scales16 = _mm256_cvtepi8_epi16(scales8);
      // q is stored as q + 32 (0..63, fine for maddubs' unsigned side); the 32 comes back out as
      // 32 * sum_s scale_s * bsums[s] per column.
      __m256i isum[NC];
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) {
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][b].bsums));
        isum[c] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(scales16, bsums), 5));
      }
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
            const __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
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

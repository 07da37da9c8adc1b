// The AVX-512 VNNI panel GEMM (gemm_panel_avx512.hpp) for Q4_1, Q5_0, Q5_1 and IQ4_NL weights: prefill and
// batched decode from 4 columns on, 16 rows at a time, as Q8_0's (gemm_avx512.cpp) and in its eight-lane
// order, which is these types' batch order too (small_blocks.hpp): per (row, column) eight float
// accumulators, lane k of a block taking the integer dot of values 4k..4k+3 times d_w * d_a in one FMA; Q4_1
// and Q5_1 keep a ninth, their mins, fma(m_w, s_a, mins), added after the lanes' sum. So the outputs have the
// one-column kernels' bits (tests/compute/gemm_test.cpp).
//
// Each row's 32 values are first made signed bytes (Q5_0 as q - 16, IQ4_NL from its table, Q4_1/Q5_1 as q,
// 0..31) in a small buffer, then transposed into the panel as Q8_0's stored bytes are; from there the
// arithmetic is Q8_0's: activations as unsigned a + 128, each quad starting from -128 x the rows' quad sums.
// The unpacking helpers are this file's own (vec_dot_kernels.hpp: no inline code shared across SIMD units).
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "loom/compute/model/quant_blocks.hpp"
#include "vec_dot_kernels.hpp"

namespace loom::compute::detail {
namespace {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "gemm_panel_avx512.hpp"

constexpr std::int64_t kBlocksPerPanel = 24;     // 768 values: ~28 KiB of panel (L1)
constexpr std::size_t kSideBufferBytes = 65536;  // activation side data of a column chunk (on the stack)

// Values 0..15 (low nibbles) in the low 128-bit lane, 16..31 (high nibbles) in the high one.
__m256i nibbles(const std::uint8_t* qs) {
  const __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi32(raw, _mm256_set_epi32(4, 4, 4, 4, 0, 0, 0, 0)), _mm256_set1_epi8(0x0F));
}

// 0x10 in byte i where bit i of the 32-bit field qh is set.
__m256i fifth_bits(const std::uint8_t* qh) {
  std::uint32_t bits;
  std::memcpy(&bits, qh, sizeof bits);
  return _mm256_and_si256(_mm256_movm_epi8(static_cast<__mmask32>(bits)), _mm256_set1_epi8(0x10));
}

struct Q4_1Values {
  using WBlock = BlockQ4_1;
  using ABlock = BlockQ8_1;
  static __m256i values(const BlockQ4_1& x) { return nibbles(x.qs); }
};
struct Q5_0Values {
  using WBlock = BlockQ5_0;
  using ABlock = BlockQ8_0;
  static __m256i values(const BlockQ5_0& x) {
    return _mm256_sub_epi8(_mm256_or_si256(nibbles(x.qs), fifth_bits(x.qh)), _mm256_set1_epi8(16));
  }
};
struct Q5_1Values {
  using WBlock = BlockQ5_1;
  using ABlock = BlockQ8_1;
  static __m256i values(const BlockQ5_1& x) { return _mm256_or_si256(nibbles(x.qs), fifth_bits(x.qh)); }
};
struct IQ4_NLValues {
  using WBlock = BlockIQ4_NL;
  using ABlock = BlockQ8_0;
  static __m256i values(const BlockIQ4_NL& x) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues)));
    return _mm256_shuffle_epi8(table, nibbles(x.qs));
  }
};

struct SmallBlockColumns {
  const float* scales = nullptr;                 // [column][block] activation scales as floats
  const float* s = nullptr;                      // [column][block] Q8_1's s as floats (min types)
  const std::uint8_t* unsigned_bytes = nullptr;  // [column][block][32]: a + 128
  std::int64_t blocks_per_column = 0;
};

template <class Format>
struct SmallBlockGemm {
  using WBlock = typename Format::WBlock;
  using ABlock = typename Format::ABlock;
  static constexpr bool kMin = std::is_same_v<ABlock, BlockQ8_1>;
  using Columns = SmallBlockColumns;
  static constexpr std::int64_t kBlockValues = 32;
  static constexpr std::int64_t kPanelBlocks = kBlocksPerPanel;
  static constexpr std::size_t kSideBytes = kSideBufferBytes;
  static constexpr int kLanes = kMin ? 9 : 8;  // eight lanes, and the mins
  static constexpr int kColumns = 2;
  static constexpr int kPanels = 1;
  static constexpr std::size_t kSideBytesPerBlock = 32 + (kMin ? 2 : 1) * sizeof(float);

  struct Panel {
    __m512i q[kPanelBlocks][kQuads];       // the rows' values as signed bytes
    __m512i offset[kPanelBlocks][kQuads];  // -128 x the rows' quad sums
    __m512 d[kPanelBlocks];
    __m512 m[kPanelBlocks];                // min types
  };

  static void unpack(const std::byte* rows, std::size_t row_bytes, std::int64_t first, std::int64_t count, Panel& p) noexcept {
    const __m512i ones = _mm512_set1_epi8(1);
    alignas(64) std::uint8_t values[kPanelRows][32];
    for (std::int64_t b = 0; b < count; ++b) {
      const std::size_t at = static_cast<std::size_t>(first + b) * sizeof(WBlock);
      p.d[b] = row_scales(rows, row_bytes, at + offsetof(WBlock, d));
      if constexpr (kMin) p.m[b] = row_scales(rows, row_bytes, at + offsetof(WBlock, m));
#pragma GCC unroll 16
      for (int r = 0; r < kPanelRows; ++r) {
        const auto* block = reinterpret_cast<const WBlock*>(rows + static_cast<std::size_t>(r) * row_bytes + at);
        _mm256_store_si256(reinterpret_cast<__m256i*>(values[r]), Format::values(*block));
      }
      __m512i lo[4], hi[4];
      const auto* bytes = reinterpret_cast<const std::byte*>(values);
      transpose_rows(bytes, 32, 0, lo);
      transpose_rows(bytes, 32, 16, hi);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        p.q[b][j] = lo[j];
        p.q[b][4 + j] = hi[j];
      }
#pragma GCC unroll 8
      for (int j = 0; j < kQuads; ++j) {
        const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, p.q[b][j]);
        p.offset[b][j] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sums, 7));
      }
    }
  }

  // Side data: per column and block the scale (and s) as floats, then the 32 bytes as a + 128.
  static Columns prepare(std::byte* side, const std::byte* activations, std::size_t stride, int columns, std::int64_t nb) noexcept {
    const std::size_t entries = static_cast<std::size_t>(columns * nb);
    auto* scales = reinterpret_cast<float*>(side);
    auto* s = scales + entries;
    auto* bytes = reinterpret_cast<std::uint8_t*>(side + entries * (kMin ? 2 : 1) * sizeof(float));
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int c = 0; c < columns; ++c) {
      const auto* a = reinterpret_cast<const ABlock*>(activations + static_cast<std::size_t>(c) * stride);
      for (std::int64_t b = 0; b < nb; ++b) {
        scales[c * nb + b] = _cvtsh_ss(a[b].d);
        if constexpr (kMin) s[c * nb + b] = _cvtsh_ss(a[b].s);
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(bytes + (c * nb + b) * 32), _mm256_xor_si256(q, flip));
      }
    }
    return Columns{scales, kMin ? s : nullptr, bytes, nb};
  }

  template <int P, int NC>
  static void run(const Panel (&panels)[kPanels], std::int64_t count, const Columns& cols, int c0, std::int64_t first,
                  __m512 (&accs)[P][NC][kLanes]) noexcept {
    const Panel& p = panels[0];
    auto& acc = accs[0];
    const std::uint8_t* a[NC];
    const float* da[NC];
    const float* sa[NC];
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) {
      const std::int64_t at = (c0 + c) * cols.blocks_per_column + first;
      a[c] = cols.unsigned_bytes + at * 32;
      da[c] = cols.scales + at;
      sa[c] = kMin ? cols.s + at : nullptr;
    }
    for (std::int64_t b = 0; b < count; ++b) {
      __m512 d[NC];
#pragma GCC unroll 4
      for (int c = 0; c < NC; ++c) {
        d[c] = _mm512_mul_ps(p.d[b], _mm512_set1_ps(da[c][b]));
        if constexpr (kMin) acc[c][8] = _mm512_fmadd_ps(p.m[b], _mm512_set1_ps(sa[c][b]), acc[c][8]);
      }
#pragma GCC unroll 8
      for (int j = 0; j < kQuads; ++j) {
        __m512i w = p.q[b][j];
        __m512i offset = p.offset[b][j];
        in_register(w);
        in_register(offset);
#pragma GCC unroll 4
        for (int c = 0; c < NC; ++c) {
          const __m512i lane = _mm512_dpbusd_epi32(offset, _mm512_set1_epi32(load_i32(a[c] + b * 32 + 4 * j)), w);
          acc[c][j] = _mm512_fmadd_ps(d[c], _mm512_cvtepi32_ps(lane), acc[c][j]);
        }
      }
    }
  }

  // The lanes' horizontal-sum tree, ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), then the mins.
  static __m512 finish(const __m512 (&lanes)[kLanes]) noexcept {
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(lanes[0], lanes[4]), _mm512_add_ps(lanes[2], lanes[6])),
                                     _mm512_add_ps(_mm512_add_ps(lanes[1], lanes[5]), _mm512_add_ps(lanes[3], lanes[7])));
    if constexpr (kMin) return _mm512_add_ps(sum, lanes[kLanes - 1]);
    return sum;
  }
};

#pragma GCC diagnostic pop

}  // namespace

bool small_block_panel_gemm_fits(std::int64_t n) noexcept {
  const std::int64_t nb = n / 32;
  return nb > 0 && static_cast<std::size_t>(nb) * SmallBlockGemm<Q4_1Values>::kSideBytesPerBlock <= kSideBufferBytes;
}

void q4_1_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride) {
  panel_gemm<SmallBlockGemm<Q4_1Values>>(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes,
                                         n_cols, n, out, out_col_stride);
}
void q5_0_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride) {
  panel_gemm<SmallBlockGemm<Q5_0Values>>(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes,
                                         n_cols, n, out, out_col_stride);
}
void q5_1_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride) {
  panel_gemm<SmallBlockGemm<Q5_1Values>>(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes,
                                         n_cols, n, out, out_col_stride);
}
void iq4_nl_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                              const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                              std::int64_t n, float* out, std::size_t out_col_stride) {
  panel_gemm<SmallBlockGemm<IQ4_NLValues>>(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes,
                                           n_cols, n, out, out_col_stride);
}

}  // namespace loom::compute::detail

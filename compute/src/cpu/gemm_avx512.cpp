// Matrix-matrix products of quantized weights with several activation columns on AVX-512 VNNI: the
// register-blocked path of prefill and batched decode (vec_dot.hpp's rows_cols, reached through
// vec_dot_x86.inc's table when a call has enough columns and 16 rows or more).
//
// Layout. Weights are taken 16 rows at a time, one int32 lane per row of a 512-bit vector. A *panel* is 16
// rows x a chunk of the row length, unpacked once into what the inner loop wants: for every 4-value quad
// of every block, one vector holding the 16 rows' four bytes of that quad (an outer-product layout), and per
// block the 16 rows' scales as floats. Every activation column then meets the panel with one vpdpbusd per
// quad (the column's four bytes broadcast to all lanes, 64 multiply-adds per instruction) while the panel
// sits in L1. A weight type only *feeds* the panel (its unpacker and its activation side data); the loops
// over row tiles, panels and column groups exist once (gemm_panel_avx512.hpp). Unpacking costs about as
// much as one column's products, so the panel pays from a few columns on (kMinPanelColumns in
// vec_dot_x86.inc). This file holds Q8_0 and Q4_0; gemm_kquant_avx512.cpp the K-quants.
//
// Orders: the reference implementation's, so every output has the bits of the one-column kernels (and of
// vec_dot.cpp's scalar spelling; tests/compute/gemm_test.cpp checks it over many shapes):
// - whole-block (Q4_0, the order of the reference's repacked kernels): per (row, column) one float
//   accumulator; per block acc = fma(float(block's integer dot), dw * da, acc). The lanes gather a block's
//   whole dot over its 8 quads, exact integers in any order.
// - eight lanes (Q8_0): per (row, column) eight float accumulators, lane k of each block taking the integer
//   dot of its values 4k..4k+3 times dw * da in one FMA, summed at the end as ((l0 + l4) + (l2 + l6)) +
//   ((l1 + l5) + (l3 + l7)). Quad k's vpdpbusd gives exactly lane k for 16 rows, so each column keeps eight
//   accumulators and pays a convert and an FMA per vpdpbusd (the whole-block order: per eight). That order
//   is what keeps Q8_0 logits on the reference's (compute/README.md) and it is what limits this kernel:
//   FMA and multiply issue on vpdpbusd's pipes, so 8 FMAs and a multiply per 8 vpdpbusd cap it at 8/17 of
//   the int8 peak however it is tiled (bench/README.md; whole-block: 8/10).
//
// vpdpbusd multiplies unsigned by signed bytes. Q4_0's nibbles are the unsigned side (0..15; the -8 offset
// comes back as -8 x the column's block sum); Q8_0's weights are signed, so its activations go unsigned as
// a + 128 and each quad starts from -128 x the rows' quad sums (kept in the panel): exact either way.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "loom/compute/model/quant_blocks.hpp"
#include "vec_dot_kernels.hpp"

namespace loom::compute::detail {
namespace {

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and then warn, once inlined, that it "may be
// used uninitialized": a known false positive of those headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "gemm_panel_avx512.hpp"

constexpr std::int64_t kBlocksPerPanel = 24;  // 768 values, ~26 KiB for Q8_0 (L1)
constexpr std::size_t kSideBufferBytes = 65536;  // activation side data of a column chunk (on the stack)

// The columns of one chunk as the Q8_0 and Q4_0 kernels see them: the activation blocks as stored and the side data the
// type prepared (per column `blocks` entries of each array).
struct Q8_0Columns {
  const std::byte* blocks = nullptr;  // Q8_0 activation blocks, column c at c * stride
  std::size_t stride = 0;
  const float* scales = nullptr;      // [column][block] activation scales as floats
  const std::int32_t* offsets = nullptr;  // [column][block] (Q4_0: -8 x the block's sum)
  const std::uint8_t* unsigned_bytes = nullptr;  // [column][block][32] (Q8_0: a + 128)
  std::int64_t blocks_per_column = 0;
};

// ---- Q8_0 weights: the eight-lane order ----
struct Q8_0Gemm {
  using Columns = Q8_0Columns;
  static constexpr std::int64_t kBlockValues = 32;
  static constexpr std::int64_t kPanelBlocks = kBlocksPerPanel;
  static constexpr std::size_t kSideBytes = kSideBufferBytes;
  static constexpr int kLanes = 8;    // float accumulators per output
  static constexpr int kColumns = 2;  // 16 accumulators; the quad's weights and offsets stay in registers
  static constexpr int kPanels = 1;
  static constexpr std::size_t kSideBytesPerBlock = 32 + sizeof(float);

  struct Panel {
    __m512i q[kPanelBlocks][kQuads];       // the rows' signed bytes
    __m512i offset[kPanelBlocks][kQuads];  // -128 x the rows' quad sums
    __m512 d[kPanelBlocks];
  };

  static void unpack(const std::byte* rows, std::size_t row_bytes, std::int64_t first, std::int64_t count, Panel& p) noexcept {
    const __m512i ones = _mm512_set1_epi8(1);
    for (std::int64_t b = 0; b < count; ++b) {
      const std::size_t at = static_cast<std::size_t>(first + b) * sizeof(BlockQ8_0);
      p.d[b] = row_scales(rows, row_bytes, at + offsetof(BlockQ8_0, d));
      __m512i lo[4], hi[4];
      transpose_rows(rows, row_bytes, at + offsetof(BlockQ8_0, qs), lo);
      transpose_rows(rows, row_bytes, at + offsetof(BlockQ8_0, qs) + 16, hi);
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

  // Side data: per column and block the scale as a float, then the 32 bytes as a + 128.
  static Q8_0Columns prepare(std::byte* side, const std::byte* activations, std::size_t stride, int columns, std::int64_t nb) noexcept {
    auto* scales = reinterpret_cast<float*>(side);
    auto* bytes = reinterpret_cast<std::uint8_t*>(side + static_cast<std::size_t>(columns * nb) * sizeof(float));
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int c = 0; c < columns; ++c) {
      const auto* a = reinterpret_cast<const BlockQ8_0*>(activations + static_cast<std::size_t>(c) * stride);
      for (std::int64_t b = 0; b < nb; ++b) {
        scales[c * nb + b] = _cvtsh_ss(a[b].d);
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(bytes + (c * nb + b) * 32), _mm256_xor_si256(q, flip));
      }
    }
    return Q8_0Columns{activations, stride, scales, nullptr, bytes, nb};
  }

  // NC columns over the panel's `count` blocks, which are blocks first.. of the row.
  template <int P, int NC>
  static void run(const Panel (&panels)[kPanels], std::int64_t count, const Q8_0Columns& cols, int c0, std::int64_t first,
                  __m512 (&accs)[P][NC][kLanes]) noexcept {
    const Panel& p = panels[0];
    auto& acc = accs[0];
    const std::uint8_t* a[NC];
    const float* s[NC];
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) {
      const std::int64_t at = (c0 + c) * cols.blocks_per_column + first;
      a[c] = cols.unsigned_bytes + at * 32;
      s[c] = cols.scales + at;
    }
    for (std::int64_t b = 0; b < count; ++b) {
      __m512 d[NC];
#pragma GCC unroll 4
      for (int c = 0; c < NC; ++c) d[c] = _mm512_mul_ps(p.d[b], _mm512_set1_ps(s[c][b]));
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

  static __m512 finish(const __m512 (&lanes)[kLanes]) noexcept {
    return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(lanes[0], lanes[4]), _mm512_add_ps(lanes[2], lanes[6])),
                         _mm512_add_ps(_mm512_add_ps(lanes[1], lanes[5]), _mm512_add_ps(lanes[3], lanes[7])));
  }
};

// ---- Q4_0 weights: the whole-block order ----
struct Q4_0Gemm {
  using Columns = Q8_0Columns;
  static constexpr std::int64_t kBlockValues = 32;
  static constexpr std::int64_t kPanelBlocks = kBlocksPerPanel;
  static constexpr std::size_t kSideBytes = kSideBufferBytes;
  static constexpr int kLanes = 1;
  static constexpr int kColumns = 6;  // 2 panels x 6 columns: 12 accumulators and 12 integer dots
  static constexpr int kPanels = 2;
  static constexpr std::size_t kSideBytesPerBlock = sizeof(float) + sizeof(std::int32_t);

  struct Panel {
    __m512i q[kPanelBlocks][kQuads];  // the rows' nibbles as unsigned bytes: quad j < 4 low, j >= 4 high
    __m512 d[kPanelBlocks];
  };

  static void unpack(const std::byte* rows, std::size_t row_bytes, std::int64_t first, std::int64_t count, Panel& p) noexcept {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (std::int64_t b = 0; b < count; ++b) {
      const std::size_t at = static_cast<std::size_t>(first + b) * sizeof(BlockQ4_0);
      p.d[b] = row_scales(rows, row_bytes, at + offsetof(BlockQ4_0, d));
      __m512i raw[4];
      transpose_rows(rows, row_bytes, at + offsetof(BlockQ4_0, qs), raw);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        // Byte i holds value i (low nibble) and value i + 16 (high): quads j and j + 4.
        p.q[b][j] = _mm512_and_si512(raw[j], low4);
        p.q[b][4 + j] = _mm512_and_si512(_mm512_srli_epi16(raw[j], 4), low4);
      }
    }
  }

  // Side data: per column and block the scale as a float and -8 x the sum of its 32 values.
  static Q8_0Columns prepare(std::byte* side, const std::byte* activations, std::size_t stride, int columns, std::int64_t nb) noexcept {
    auto* scales = reinterpret_cast<float*>(side);
    auto* offsets = reinterpret_cast<std::int32_t*>(side + static_cast<std::size_t>(columns * nb) * sizeof(float));
    const __m256i eights = _mm256_set1_epi8(8);
    for (int c = 0; c < columns; ++c) {
      const auto* a = reinterpret_cast<const BlockQ8_0*>(activations + static_cast<std::size_t>(c) * stride);
      for (std::int64_t b = 0; b < nb; ++b) {
        scales[c * nb + b] = _cvtsh_ss(a[b].d);
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs));
        const __m256i eight_sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), eights, q);
        const __m128i half = _mm_add_epi32(_mm256_castsi256_si128(eight_sums), _mm256_extracti128_si256(eight_sums, 1));
        const __m128i pairs = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0x4E));
        offsets[c * nb + b] = -_mm_cvtsi128_si32(_mm_add_epi32(pairs, _mm_shuffle_epi32(pairs, 0xB1)));
      }
    }
    return Q8_0Columns{activations, stride, scales, offsets, nullptr, nb};
  }

  // P panels x NC columns: per quad, each column's four bytes are broadcast once for the P panels' rows.
  template <int P, int NC>
  static void run(const Panel (&panels)[kPanels], std::int64_t count, const Q8_0Columns& cols, int c0, std::int64_t first,
                  __m512 (&acc)[P][NC][kLanes]) noexcept {
    const BlockQ8_0* a[NC];
    const float* s[NC];
    const std::int32_t* o[NC];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      a[c] = reinterpret_cast<const BlockQ8_0*>(cols.blocks + static_cast<std::size_t>(c0 + c) * cols.stride) + first;
      const std::int64_t at = (c0 + c) * cols.blocks_per_column + first;
      s[c] = cols.scales + at;
      o[c] = cols.offsets + at;
    }
    for (std::int64_t b = 0; b < count; ++b) {
      __m512i dot[P][NC];
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) {
        const __m512i offset = _mm512_set1_epi32(o[c][b]);
#pragma GCC unroll 4
        for (int q = 0; q < P; ++q) dot[q][c] = offset;
      }
      // Quad by quad: the P panels' weights of the quad in registers, each column's bytes broadcast once.
#pragma GCC unroll 8
      for (int j = 0; j < kQuads; ++j) {
        __m512i w[P];
#pragma GCC unroll 4
        for (int q = 0; q < P; ++q) {
          w[q] = panels[q].q[b][j];
          in_register(w[q]);
        }
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) {
          const __m512i x = _mm512_set1_epi32(load_i32(a[c][b].qs + 4 * j));
#pragma GCC unroll 4
          for (int q = 0; q < P; ++q) dot[q][c] = _mm512_dpbusd_epi32(dot[q][c], w[q], x);
        }
      }
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) {
        const __m512 da = _mm512_set1_ps(s[c][b]);
#pragma GCC unroll 4
        for (int q = 0; q < P; ++q) {
          acc[q][c][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[q][c]), _mm512_mul_ps(panels[q].d[b], da), acc[q][c][0]);
        }
      }
    }
  }

  static __m512 finish(const __m512 (&lanes)[kLanes]) noexcept { return lanes[0]; }
};

#pragma GCC diagnostic pop

}  // namespace

bool panel_gemm_fits(std::int64_t n) noexcept {
  const std::int64_t nb = n / 32;
  return nb > 0 && static_cast<std::size_t>(nb) * Q8_0Gemm::kSideBytesPerBlock <= Q8_0Gemm::kSideBytes;
}

void q8_0_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride) {
  panel_gemm<Q8_0Gemm>(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes, n_cols, n, out,
                       out_col_stride);
}

void q4_0_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride) {
  panel_gemm<Q4_0Gemm>(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes, n_cols, n, out,
                       out_col_stride);
}

}  // namespace loom::compute::detail

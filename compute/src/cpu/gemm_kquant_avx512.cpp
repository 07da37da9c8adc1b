// The panel GEMM (gemm_panel_avx512.hpp) for the K-quants: Q4_K, Q5_K and Q6_K weights against Q8_K
// activations, with the bits of the one-column kernels (vec_dot_x86.inc; tests/compute/gemm_test.cpp).
//
// What the one-column kernels sum, per superblock of 256 values and per (row, column), is exact integers:
// - Q4_K: S = sum_j scale_j * (q . a over sub-block j), one integer for the whole superblock;
// - Q5_K: 8 integer lanes, lane u = sum over the 8 groups of 32 values of scale * (q . a over values
//   4u..4u+3 of the group);
// - Q6_K: the same 8 lanes with scale * (q - 32), the scale that of each value's 16-value sub-block;
// - Q4_K and Q5_K also M = sum_j min_j * (a's sum over sub-block j), from Q8_K's bsums.
// Only these integers have to come out the same; the float steps after them are the one-column kernels'.
//
// Two ways to meet the rows' sub-block scales, one per order:
// - Q4_K (whole superblock) keeps Q4_0's byte panel: the nibbles are vpdpbusd's unsigned side as they are,
//   8 vpdpbusd give a sub-block's dot, one vpmulld by the 16 rows' scales and an add fold it into the
//   superblock's integer. A multiply per 8 vpdpbusd costs little (about 0.65 of the int8 probe at 64
//   columns, bench/README.md).
// - Q5_K and Q6_K (eight lanes) would need that multiply after every vpdpbusd (each quad's lane is scaled
//   before it joins the lane), and vpmulld zmm runs at half vpdpbusd's rate here. Instead the unpacker
//   multiplies every value by its scale once per panel; scale x q does not fit a byte (up to 63 x 31, or
//   -128 x -32 for Q6_K) but fits an int16, so the inner loop is one vpdpwssd per pair of values (16 rows
//   against one column), exact like every integer sum here, with the activations widened to int16 once
//   per call in the columns' side data. Two vpdpwssd per quad: half the byte path's rate at best.
//
// Q5_K/Q6_K panel layout: per superblock 128 vectors, vector m holding in int32 lane r the row's scaled
// values 2m and 2m + 1 (int16 each): a 16 x 128 transpose of 32-bit pairs. Lane u of the eight-lane order
// is then vectors 16g + 2u and 16g + 2u + 1 over the 8 groups g.
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
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "gemm_panel_avx512.hpp"

constexpr int kGroups = 8;           // 32-value groups in a superblock
constexpr int kPairs = 128;          // int16 pairs in a superblock
constexpr int kMinPairs = 4;         // int16 pairs of the 8 mins (and of the 8 bsum pairs)
constexpr std::size_t kKSideBytes = 131072;  // on the stack: the widened activations of a column chunk

// ---- The formats: a row's superblock as 8 groups of 32 scaled int16 values ----

inline __m512i widen(__m256i bytes) noexcept { return _mm512_cvtepu8_epi16(bytes); }

inline __m256i load256(const std::uint8_t* p) noexcept { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The 6-bit scales and mins of a Q4_K/Q5_K superblock's 8 sub-blocks, byte j for sub-block j, unpacked a
// 32-bit word at a time (quant_blocks.hpp's k_scale_min() layout; spelled here again because this file is
// compiled for AVX-512 and must not instantiate the shared inline function). Words, not byte arrays: bytes
// stored one by one and read back wider stall store forwarding, which cost a quarter of a few-column call.
struct ScalesMins {
  std::uint64_t scales;
  std::uint64_t mins;
};
constexpr std::uint32_t kSixBits = 0x3F3F3F3Fu, kLow4 = 0x0F0F0F0Fu, kTop2 = 0x30303030u;
inline ScalesMins scales_mins(const std::uint8_t* packed) noexcept {
  std::uint32_t w[3];
  std::memcpy(w, packed, sizeof w);
  const std::uint32_t scales_hi = (w[2] & kLow4) | ((w[0] >> 2) & kTop2);
  const std::uint32_t mins_hi = ((w[2] >> 4) & kLow4) | ((w[1] >> 2) & kTop2);
  return {(w[0] & kSixBits) | (std::uint64_t{scales_hi} << 32), (w[1] & kSixBits) | (std::uint64_t{mins_hi} << 32)};
}
inline int byte_of(std::uint64_t bytes, int j) noexcept { return static_cast<int>((bytes >> (8 * j)) & 0xFF); }

// The same for 16 rows at once, as vectors: lane r of the results holds row r's words (k_scale_min()'s bit
// layout applied lane-wise), so byte_lanes() then gives a sub-block's 16 scales or mins as int32.
struct RowScalesMins {
  __m512i scales_lo, scales_hi, mins_lo, mins_hi;  // byte j: sub-block j (lo), 4 + j (hi)
};
inline RowScalesMins row_scales_mins(const std::byte* rows, std::size_t row_bytes, std::size_t offset) noexcept {
  __m512i w[4];  // w[k] lane r: bytes 4k..4k+3 of row r's packed scales (w[3] reads past them, unused)
  transpose_rows(rows, row_bytes, offset, w);
  const __m512i six = _mm512_set1_epi32(static_cast<int>(kSixBits)), low4 = _mm512_set1_epi32(static_cast<int>(kLow4));
  const __m512i top2 = _mm512_set1_epi32(static_cast<int>(kTop2));
  return {_mm512_and_si512(w[0], six),
          _mm512_or_si512(_mm512_and_si512(w[2], low4), _mm512_and_si512(_mm512_srli_epi32(w[0], 2), top2)),
          _mm512_and_si512(w[1], six),
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w[2], 4), low4),
                          _mm512_and_si512(_mm512_srli_epi32(w[1], 2), top2))};
}
inline __m512i byte_lanes(__m512i words, int k) noexcept {
  return _mm512_and_si512(_mm512_srli_epi32(words, 8 * k), _mm512_set1_epi32(0xFF));
}

struct Q5KFormat {
  using Block = BlockQ5_K;
  static constexpr bool kHasMins = true;

  // As Q4_K, bit 2c (2c + 1) of qh[l] becoming bit 4 of the low (high) nibble's value.
  static void scaled_values(const Block& block, __m512i (&out)[kGroups]) noexcept {
    const __m256i low4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    const __m256i qh = load256(block.qh);
    const ScalesMins sm = scales_mins(block.scales);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(block.qs + 32 * c);
      // 16-bit shifts by less than 8 keep each byte's bit 0 its own after the mask.
      const __m256i bit_lo = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one);
      const __m256i bit_hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low4), _mm256_slli_epi16(bit_lo, 4));
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), _mm256_slli_epi16(bit_hi, 4));
      out[2 * c] = _mm512_mullo_epi16(widen(lo), _mm512_set1_epi16(static_cast<short>(byte_of(sm.scales, 2 * c))));
      out[2 * c + 1] = _mm512_mullo_epi16(widen(hi), _mm512_set1_epi16(static_cast<short>(byte_of(sm.scales, 2 * c + 1))));
    }
  }
};

struct Q6KFormat {
  using Block = BlockQ6_K;
  static constexpr bool kHasMins = false;

  // Group g = 4h + k of half h (quant_blocks.hpp's layout), q - 32 times the scales of sub-blocks 2g (first
  // 16 values) and 2g + 1.
  static void scaled_values(const Block& block, __m512i (&out)[kGroups]) noexcept {
    const __m256i low4 = _mm256_set1_epi8(0x0F), two_bits = _mm256_set1_epi8(0x03);
    const __m512i thirty_two = _mm512_set1_epi16(32);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load256(block.ql + 64 * h), ql1 = load256(block.ql + 64 * h + 32);
      const __m256i qh = load256(block.qh + 32 * h);
      const auto high = [&](int shift) {
        return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), two_bits), 4);
      };
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, low4), high(0)),
          _mm256_or_si256(_mm256_and_si256(ql1, low4), high(2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), high(4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), high(6)),
      };
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const int g = 4 * h + k;
        const __m512i scales =
            _mm512_inserti64x4(_mm512_set1_epi16(block.scales[2 * g]), _mm256_set1_epi16(block.scales[2 * g + 1]), 1);
        out[g] = _mm512_mullo_epi16(_mm512_sub_epi16(widen(q[k]), thirty_two), scales);
      }
    }
  }
};

// ---- Unpacking 16 rows ----

// v[i] holds 16 int32 of row i; afterwards v[e] holds element e of row r in lane r.
inline void transpose16x16(__m512i (&v)[16]) noexcept {
  __m512i t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane L: rows 2i, 2i + 1 interleaved
    t[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // u[4i + k], lane L: element 4L + k of rows 4i..4i+3
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {  // element 4L + k: lane L of u[k], u[4 + k], u[8 + k], u[12 + k]
    const __m512i even01 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x88);
    const __m512i odd01 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xDD);
    const __m512i even23 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x88);
    const __m512i odd23 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xDD);
    v[k] = _mm512_shuffle_i32x4(even01, even23, 0x88);
    v[8 + k] = _mm512_shuffle_i32x4(even01, even23, 0xDD);
    v[4 + k] = _mm512_shuffle_i32x4(odd01, odd23, 0x88);
    v[12 + k] = _mm512_shuffle_i32x4(odd01, odd23, 0xDD);
  }
}

inline std::int32_t int16_pair(int low, int high) noexcept {
  const auto high_bits = static_cast<std::uint32_t>(static_cast<std::uint16_t>(high)) << 16;
  return static_cast<std::int32_t>(static_cast<std::uint16_t>(low) | high_bits);
}

// ---- The activations: Q8_K blocks and the side data both kernels share ----

struct KColumns {
  const std::byte* blocks = nullptr;        // the Q8_K blocks as stored, column c at c * stride
  std::size_t stride = 0;
  const std::int16_t* values = nullptr;     // [column][block][256] the activations widened (Q5_K, Q6_K)
  const float* scales = nullptr;            // [column][block]
  const std::int32_t* sum_pairs = nullptr;  // [column][block][4] bsums of sub-blocks 2i, 2i + 1 as int16 pairs
  std::int64_t blocks_per_column = 0;

  const BlockQ8_K& block(int column, std::int64_t b) const noexcept {
    return reinterpret_cast<const BlockQ8_K*>(blocks + static_cast<std::size_t>(column) * stride)[b];
  }
};

constexpr std::size_t kWidenedBytesPerBlock = 256 * sizeof(std::int16_t);
constexpr std::size_t kSideBytesPerBlockNarrow = sizeof(float) + kMinPairs * sizeof(std::int32_t);

// Per column and superblock: the scale, the bsum pairs of the mins' dot, and if `widened` the 256 values as
// int16 (first in the buffer, which is 64-byte aligned).
KColumns prepare_k_columns(std::byte* side, const std::byte* activations, std::size_t stride, int columns, std::int64_t nb,
                           bool widened) noexcept {
  const auto blocks = static_cast<std::size_t>(columns * nb);
  auto* values = reinterpret_cast<std::int16_t*>(side);
  std::byte* rest = side + (widened ? blocks * kWidenedBytesPerBlock : 0);
  auto* scales = reinterpret_cast<float*>(rest);
  auto* sum_pairs = reinterpret_cast<std::int32_t*>(rest + blocks * sizeof(float));
  for (int c = 0; c < columns; ++c) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(activations + static_cast<std::size_t>(c) * stride);
    for (std::int64_t b = 0; b < nb; ++b) {
      const std::int64_t at = c * nb + b;
      if (widened) {
        for (int k = 0; k < 8; ++k) {
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs + 32 * k));
          _mm512_storeu_si512(values + at * 256 + 32 * k, _mm512_cvtepi8_epi16(q));
        }
      }
      scales[at] = a[b].d;
      const std::int16_t* bs = a[b].bsums;
      for (int i = 0; i < kMinPairs; ++i) {
        sum_pairs[at * kMinPairs + i] = int16_pair(bs[4 * i] + bs[4 * i + 1], bs[4 * i + 2] + bs[4 * i + 3]);
      }
    }
  }
  return KColumns{activations, stride, widened ? values : nullptr, scales, sum_pairs, nb};
}

// The mins of 16 rows' superblock (Q4_K, Q5_K): lane r of pairs[i] holds row r's mins 2i and 2i + 1 as int16.
struct KMins {
  __m512i pairs[kMinPairs];
  __m512 dmin;
};

template <class Block>
void unpack_mins(const std::byte* rows, std::size_t row_bytes, std::size_t at, KMins& mins) noexcept {
  const RowScalesMins sm = row_scales_mins(rows, row_bytes, at + offsetof(Block, scales));
#pragma GCC unroll 4
  for (int i = 0; i < kMinPairs; ++i) {  // mins 2i and 2i + 1, int16 each
    const __m512i words = i < 2 ? sm.mins_lo : sm.mins_hi;
    const int low = 2 * (i % 2);
    mins.pairs[i] = _mm512_or_si512(byte_lanes(words, low), _mm512_slli_epi32(byte_lanes(words, low + 1), 16));
  }
  mins.dmin = row_scales(rows, row_bytes, at + offsetof(Block, dmin));
}

// acc += float(M) * (dmin * da), M = sum_j min_j * (bsums[2j] + bsums[2j + 1]) by vpdpwssd. Q4_K's kernel
// sums exactly this and subtracts it at the end. Q5_K's adds fma(-da * dmin, M) instead and adds that at
// the end: round-to-nearest is symmetric, so its sum is exactly minus this one and subtracting this one
// gives its bits.
inline void add_mins(const KMins& mins, const KColumns& cols, std::int64_t at, __m512 da, __m512& acc) noexcept {
  __m512i m = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int i = 0; i < kMinPairs; ++i) {
    m = _mm512_dpwssd_epi32(m, mins.pairs[i], _mm512_set1_epi32(cols.sum_pairs[at * kMinPairs + i]));
  }
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(mins.dmin, da), acc);
}

// ---- Q4_K: bytes, the whole-superblock order ----
//
// The nibbles fit vpdpbusd's unsigned side as they are (Q4_0's panel), so Q4_K keeps bytes: per sub-block
// the integer dot from 8 vpdpbusd, times the rows' scales (vpmulld), into one integer per superblock, which
// then takes the one-column kernel's FMA. A multiply per 8 vpdpbusd is cheaper than twice the vpdpwssd.
struct Q4KGemm {
  using Columns = KColumns;
  static constexpr std::int64_t kBlockValues = 256;
  static constexpr int kLanes = 2;    // the scales' sum and the mins' sum, subtracted at the end
  static constexpr int kPanels = 2;
  static constexpr int kColumns = 4;  // 8 dots and 8 superblock sums in registers
  static constexpr std::int64_t kPanelBlocks = 2;  // 2 x 5 KiB a panel
  static constexpr std::size_t kSideBytes = kKSideBytes;
  static constexpr std::size_t kSideBytesPerBlock = kSideBytesPerBlockNarrow;

  struct Panel {
    __m512i q[kPanelBlocks][kGroups][kQuads];  // quad k of sub-block j: the rows' nibbles as unsigned bytes
    __m512i scale[kPanelBlocks][kGroups];      // sub-block j's scale, per row
    KMins mins[kPanelBlocks];
    __m512 d[kPanelBlocks];
  };

  static void unpack(const std::byte* rows, std::size_t row_bytes, std::int64_t first, std::int64_t count, Panel& p) noexcept {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (std::int64_t b = 0; b < count; ++b) {
      const std::size_t at = static_cast<std::size_t>(first + b) * sizeof(BlockQ4_K);
      // Chunk c's 32 bytes: low nibbles are sub-block 2c, high nibbles 2c + 1, quad k in bytes 4k..4k+3.
      for (int c = 0; c < 4; ++c) {
        __m512i lo[4], hi[4];
        transpose_rows(rows, row_bytes, at + offsetof(BlockQ4_K, qs) + 32 * c, lo);
        transpose_rows(rows, row_bytes, at + offsetof(BlockQ4_K, qs) + 32 * c + 16, hi);
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          p.q[b][2 * c][k] = _mm512_and_si512(lo[k], low4);
          p.q[b][2 * c][4 + k] = _mm512_and_si512(hi[k], low4);
          p.q[b][2 * c + 1][k] = _mm512_and_si512(_mm512_srli_epi16(lo[k], 4), low4);
          p.q[b][2 * c + 1][4 + k] = _mm512_and_si512(_mm512_srli_epi16(hi[k], 4), low4);
        }
      }
      const RowScalesMins sm = row_scales_mins(rows, row_bytes, at + offsetof(BlockQ4_K, scales));
#pragma GCC unroll 8
      for (int j = 0; j < kGroups; ++j) p.scale[b][j] = byte_lanes(j < 4 ? sm.scales_lo : sm.scales_hi, j % 4);
      unpack_mins<BlockQ4_K>(rows, row_bytes, at, p.mins[b]);
      p.d[b] = row_scales(rows, row_bytes, at + offsetof(BlockQ4_K, d));
    }
  }

  static Columns prepare(std::byte* side, const std::byte* activations, std::size_t stride, int columns, std::int64_t nb) noexcept {
    return prepare_k_columns(side, activations, stride, columns, nb, false);
  }

  template <int P, int NC>
  static void run(const Panel (&panels)[kPanels], std::int64_t count, const Columns& cols, int c0, std::int64_t first,
                  __m512 (&acc)[P][NC][kLanes]) noexcept {
    for (std::int64_t b = 0; b < count; ++b) {
      const std::int8_t* x[NC];
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) x[c] = cols.block(c0 + c, first + b).qs;
      __m512i whole[P][NC];
#pragma GCC unroll 4
      for (int q = 0; q < P; ++q)
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) whole[q][c] = _mm512_setzero_si512();
      for (int j = 0; j < kGroups; ++j) {
        __m512i dot[P][NC];
#pragma GCC unroll 4
        for (int q = 0; q < P; ++q)
#pragma GCC unroll 8
          for (int c = 0; c < NC; ++c) dot[q][c] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int k = 0; k < kQuads; ++k) {
          __m512i w[P];
#pragma GCC unroll 4
          for (int q = 0; q < P; ++q) {
            w[q] = panels[q].q[b][j][k];
            in_register(w[q]);
          }
#pragma GCC unroll 8
          for (int c = 0; c < NC; ++c) {
            const __m512i xv = _mm512_set1_epi32(load_i32(x[c] + 32 * j + 4 * k));
#pragma GCC unroll 4
            for (int q = 0; q < P; ++q) dot[q][c] = _mm512_dpbusd_epi32(dot[q][c], w[q], xv);
          }
        }
#pragma GCC unroll 4
        for (int q = 0; q < P; ++q)
#pragma GCC unroll 8
          for (int c = 0; c < NC; ++c) {
            whole[q][c] = _mm512_add_epi32(whole[q][c], _mm512_mullo_epi32(dot[q][c], panels[q].scale[b][j]));
          }
      }
#pragma GCC unroll 4
      for (int q = 0; q < P; ++q) {
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) {
          const std::int64_t at = (c0 + c) * cols.blocks_per_column + first + b;
          const __m512 da = _mm512_set1_ps(cols.scales[at]);
          acc[q][c][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(whole[q][c]), _mm512_mul_ps(panels[q].d[b], da), acc[q][c][0]);
          add_mins(panels[q].mins[b], cols, at, da, acc[q][c][1]);
        }
      }
    }
  }

  static __m512 finish(const __m512 (&lanes)[kLanes]) noexcept { return _mm512_sub_ps(lanes[0], lanes[1]); }
};

// ---- Q5_K and Q6_K: int16, the eight-lane order ----
template <class Format>
struct KQuantGemm {
  using Block = typename Format::Block;
  using Columns = KColumns;
  static constexpr std::int64_t kBlockValues = 256;
  static constexpr int kLanes = 8 + (Format::kHasMins ? 1 : 0);  // the mins' accumulator last
  static constexpr int kPanels = 2;
  static constexpr int kColumns = 6;  // 12 integer lanes in flight, each broadcast serving 2 vpdpwssd
  static constexpr std::int64_t kPanelBlocks = 2;  // 17 KiB a panel, 34 KiB the two of a tile
  static constexpr std::size_t kSideBytes = kKSideBytes;
  static constexpr std::size_t kSideBytesPerBlock = kWidenedBytesPerBlock + kSideBytesPerBlockNarrow;

  struct Panel {
    __m512i values[kPanelBlocks][kPairs];  // scaled values 2m, 2m + 1 of row r in lane r
    KMins mins[kPanelBlocks];              // Q5_K
    __m512 d[kPanelBlocks];
  };

  static void unpack(const std::byte* rows, std::size_t row_bytes, std::int64_t first, std::int64_t count, Panel& p) noexcept {
    for (std::int64_t b = 0; b < count; ++b) {
      const std::size_t at = static_cast<std::size_t>(first + b) * sizeof(Block);
      alignas(64) __m512i scaled[kPanelRows][kGroups];
      for (int r = 0; r < kPanelRows; ++r) {
        const std::byte* block = rows + static_cast<std::size_t>(r) * row_bytes + at;
        Format::scaled_values(*reinterpret_cast<const Block*>(block), scaled[r]);
      }
      for (int g = 0; g < kGroups; ++g) {
        __m512i v[kPanelRows];
#pragma GCC unroll 16
        for (int r = 0; r < kPanelRows; ++r) v[r] = scaled[r][g];
        transpose16x16(v);
#pragma GCC unroll 16
        for (int e = 0; e < 16; ++e) p.values[b][16 * g + e] = v[e];
      }
      p.d[b] = row_scales(rows, row_bytes, at + offsetof(Block, d));
      if constexpr (Format::kHasMins) unpack_mins<Block>(rows, row_bytes, at, p.mins[b]);
    }
  }

  static Columns prepare(std::byte* side, const std::byte* activations, std::size_t stride, int columns, std::int64_t nb) noexcept {
    return prepare_k_columns(side, activations, stride, columns, nb, true);
  }

  // Lane u at a time: its 16 vectors (2 per group) into one integer per (panel, column), then the one-column
  // kernel's FMA of that lane.
  template <int P, int NC>
  static void run(const Panel (&panels)[kPanels], std::int64_t count, const Columns& cols, int c0, std::int64_t first,
                  __m512 (&acc)[P][NC][kLanes]) noexcept {
    for (std::int64_t b = 0; b < count; ++b) {
      const std::int16_t* x[NC];
      __m512 da[NC];
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) {
        const std::int64_t at = (c0 + c) * cols.blocks_per_column + first + b;
        x[c] = cols.values + at * 256;
        da[c] = _mm512_set1_ps(cols.scales[at]);
      }
      __m512 scale[P][NC];  // d * da, the one-column kernel's factor
#pragma GCC unroll 4
      for (int q = 0; q < P; ++q)
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) scale[q][c] = _mm512_mul_ps(panels[q].d[b], da[c]);
      for (int u = 0; u < 8; ++u) {
        __m512i lane[P][NC];
#pragma GCC unroll 4
        for (int q = 0; q < P; ++q)
#pragma GCC unroll 8
          for (int c = 0; c < NC; ++c) lane[q][c] = _mm512_setzero_si512();
#pragma GCC unroll 16
        for (int s = 0; s < 2 * kGroups; ++s) {
          const int m = 16 * (s / 2) + 2 * u + s % 2;  // pair s % 2 of quad u of group s / 2
          __m512i w[P];
#pragma GCC unroll 4
          for (int q = 0; q < P; ++q) {
            w[q] = panels[q].values[b][m];
            in_register(w[q]);
          }
#pragma GCC unroll 8
          for (int c = 0; c < NC; ++c) {
            const __m512i xv = _mm512_set1_epi32(load_i32(x[c] + 2 * m));
#pragma GCC unroll 4
            for (int q = 0; q < P; ++q) lane[q][c] = _mm512_dpwssd_epi32(lane[q][c], w[q], xv);
          }
        }
#pragma GCC unroll 4
        for (int q = 0; q < P; ++q) {
#pragma GCC unroll 8
          for (int c = 0; c < NC; ++c) {
            acc[q][c][u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lane[q][c]), scale[q][c], acc[q][c][u]);
          }
        }
      }
      if constexpr (Format::kHasMins) {
#pragma GCC unroll 4
        for (int q = 0; q < P; ++q) {
#pragma GCC unroll 8
          for (int c = 0; c < NC; ++c) {
            add_mins(panels[q].mins[b], cols, (c0 + c) * cols.blocks_per_column + first + b, da[c], acc[q][c][kLanes - 1]);
          }
        }
      }
    }
  }

  // The 8 lanes summed as the 256-bit kernel's hsum() does; Q5_K's mins subtracted (add_mins()).
  static __m512 finish(const __m512 (&lanes)[kLanes]) noexcept {
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(lanes[0], lanes[4]), _mm512_add_ps(lanes[2], lanes[6])),
                                     _mm512_add_ps(_mm512_add_ps(lanes[1], lanes[5]), _mm512_add_ps(lanes[3], lanes[7])));
    if constexpr (Format::kHasMins) return _mm512_sub_ps(sum, lanes[kLanes - 1]);
    return sum;
  }
};

#pragma GCC diagnostic pop

}  // namespace

namespace {
// Rows the panel takes: side data for at least 4 columns a chunk.
template <class Type>
bool fits(std::int64_t n) noexcept {
  constexpr std::size_t kMinChunkColumns = 4;
  const std::int64_t nb = n / 256;
  return nb > 0 && static_cast<std::size_t>(nb) * Type::kSideBytesPerBlock * kMinChunkColumns <= Type::kSideBytes;
}
}  // namespace

bool q4_k_panel_gemm_fits(std::int64_t n) noexcept { return fits<Q4KGemm>(n); }
bool q5_k_q6_k_panel_gemm_fits(std::int64_t n) noexcept { return fits<KQuantGemm<Q6KFormat>>(n); }

void q4_k_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride) {
  panel_gemm<Q4KGemm>(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes, n_cols, n, out,
                      out_col_stride);
}

void q5_k_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride) {
  panel_gemm<KQuantGemm<Q5KFormat>>(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes, n_cols,
                                    n, out, out_col_stride);
}

void q6_k_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride) {
  panel_gemm<KQuantGemm<Q6KFormat>>(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes, n_cols,
                                    n, out, out_col_stride);
}

}  // namespace loom::compute::detail

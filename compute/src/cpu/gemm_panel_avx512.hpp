// The shared part of the AVX-512 VNNI panel GEMMs (gemm_avx512.cpp: Q8_0 and Q4_0; gemm_kquant_avx512.cpp:
// Q4_K, Q5_K, Q6_K): the helpers that transpose 16 rows into the panel layout, and the loops over row tiles,
// panels and column groups, which exist once. A weight type plugs in as a struct (Q8_0Gemm, Q4KGemm, ...):
//
//   kBlockValues, kPanelBlocks     values per weight block; blocks per panel (the panel fits L1)
//   kPanels, kColumns, kLanes      row panels and columns per register group; float accumulators per output
//   kSideBytes, kSideBytesPerBlock the stack buffer for a column chunk's activation side data; its use per block
//   Panel, Columns                 the unpacked weights of 16 rows; a chunk's activations and side data
//   unpack(), prepare(), run<P, NC>(), finish()
//
// Included inside each file's anonymous namespace (vec_dot_kernels.hpp says why), where that file has turned
// off GCC 12's false -Wmaybe-uninitialized for AVX-512 intrinsics.
// Not a general header: nothing outside these two files includes it.
// The including file brings <immintrin.h>, <algorithm>, <cstddef>, <cstdint> and <cstring> first.
#pragma once


constexpr int kPanelRows = 16;              // one int32 lane per row
constexpr int kQuads = 8;                   // 4-value quads in a 32-value block
constexpr int kMaxChunkColumns = 64;        // columns whose accumulators wait between panels

inline std::int32_t load_i32(const void* p) noexcept {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Keeps v in a register from here on: without it GCC folds the panel's loads into every instruction that
// uses v (one 64-byte load per vpdpbusd instead of one per column group), and loads become the bottleneck.
inline void in_register(__m512i& v) noexcept { asm("" : "+v"(v)); }

// 16 bytes at `offset` of rows k, 4 + k, 8 + k and 12 + k, one row per 128-bit lane.
inline __m512i four_rows(const std::byte* rows, std::size_t row_bytes, std::size_t offset, int k) noexcept {
  const auto row = [&](int r) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows + static_cast<std::size_t>(r) * row_bytes + offset));
  };
  __m512i v = _mm512_castsi128_si512(row(k));
  v = _mm512_inserti32x4(v, row(4 + k), 1);
  v = _mm512_inserti32x4(v, row(8 + k), 2);
  return _mm512_inserti32x4(v, row(12 + k), 3);
}

// The 16 rows' bytes [offset, offset + 16) as four vectors: out[j] holds bytes 4j..4j+3 of row r in int32
// lane r. (A 4 x 4 transpose of 32-bit elements inside each 128-bit lane of four_rows(): lane l of the k-th
// input is row 4l + k, so element m of lane l of the output is row 4l + m, lane 4l + m.)
inline void transpose_rows(const std::byte* rows, std::size_t row_bytes, std::size_t offset, __m512i (&out)[4]) noexcept {
  const __m512i r0 = four_rows(rows, row_bytes, offset, 0), r1 = four_rows(rows, row_bytes, offset, 1);
  const __m512i r2 = four_rows(rows, row_bytes, offset, 2), r3 = four_rows(rows, row_bytes, offset, 3);
  const __m512i t0 = _mm512_unpacklo_epi32(r0, r1), t1 = _mm512_unpackhi_epi32(r0, r1);
  const __m512i t2 = _mm512_unpacklo_epi32(r2, r3), t3 = _mm512_unpackhi_epi32(r2, r3);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// The 16 rows' f16 scales at `offset` as floats, lane r for row r. Inserted into registers (vpinsrw), not
// stored as halves and read back as one vector: that read cannot be forwarded from sixteen 2-byte stores and
// stalls until they retire, once a block (the K-quant unpackers lost a quarter of a call to the same pattern).
inline __m512 row_scales(const std::byte* rows, std::size_t row_bytes, std::size_t offset) noexcept {
  const auto half = [&](int r) {
    std::uint16_t h;
    std::memcpy(&h, rows + static_cast<std::size_t>(r) * row_bytes + offset, sizeof h);
    return static_cast<int>(h);
  };
  const auto eight = [&](int r0) {
    __m128i v = _mm_cvtsi32_si128(half(r0));  // the lane index must be an immediate: spelled out
    v = _mm_insert_epi16(v, half(r0 + 1), 1);
    v = _mm_insert_epi16(v, half(r0 + 2), 2);
    v = _mm_insert_epi16(v, half(r0 + 3), 3);
    v = _mm_insert_epi16(v, half(r0 + 4), 4);
    v = _mm_insert_epi16(v, half(r0 + 5), 5);
    v = _mm_insert_epi16(v, half(r0 + 6), 6);
    return _mm_insert_epi16(v, half(r0 + 7), 7);
  };
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(eight(0)), eight(8), 1));
}

// One group of NC columns against P panels (16 P rows): accumulators from zero (first panels of the rows)
// or from `saved`, and after the panels either the outputs (last panels) or back into `saved`.
template <class Type, int P, int NC>
void columns_over_panels(const typename Type::Panel (&panels)[Type::kPanels], std::int64_t count, const typename Type::Columns& cols,
                         int c0, std::int64_t first, bool is_first, bool is_last, __m512* saved, float* out,
                         std::size_t out_col_stride) noexcept {
  constexpr int L = Type::kLanes;
  __m512 acc[P][NC][L];
#pragma GCC unroll 4
  for (int q = 0; q < P; ++q) {
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
#pragma GCC unroll 8
      for (int l = 0; l < L; ++l) acc[q][c][l] = is_first ? _mm512_setzero_ps() : saved[(q * NC + c) * L + l];
    }
  }
  Type::template run<P, NC>(panels, count, cols, c0, first, acc);
#pragma GCC unroll 4
  for (int q = 0; q < P; ++q) {
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      if (is_last) {
        _mm512_storeu_ps(out + static_cast<std::size_t>(c) * out_col_stride + q * kPanelRows, Type::finish(acc[q][c]));
      } else {
#pragma GCC unroll 8
        for (int l = 0; l < L; ++l) saved[(q * NC + c) * L + l] = acc[q][c][l];
      }
    }
  }
}

template <class Type, int P, int NC>
void column_group(int columns, const typename Type::Panel (&panels)[Type::kPanels], std::int64_t count,
                  const typename Type::Columns& cols, int c0, std::int64_t first, bool is_first, bool is_last, __m512* saved,
                  float* out, std::size_t out_col_stride) noexcept {
  if constexpr (NC > 1) {
    if (columns < NC) {
      return column_group<Type, P, NC - 1>(columns, panels, count, cols, c0, first, is_first, is_last, saved, out,
                                           out_col_stride);
    }
  }
  columns_over_panels<Type, P, NC>(panels, count, cols, c0, first, is_first, is_last, saved, out, out_col_stride);
}

// P panels of rows (16 P rows from `rows`) against the chunk's columns, panel by panel along the row.
template <class Type, int P>
void row_tile(const std::byte* rows, std::size_t weight_row_bytes, std::int64_t nb, const typename Type::Columns& cols, int chunk,
              typename Type::Panel (&panels)[Type::kPanels], __m512* saved, float* out,
              std::size_t out_col_stride) noexcept {
  for (std::int64_t first = 0; first < nb; first += Type::kPanelBlocks) {
    const std::int64_t count = std::min(Type::kPanelBlocks, nb - first);
#pragma GCC unroll 4
    for (int q = 0; q < P; ++q) {
      Type::unpack(rows + static_cast<std::size_t>(q * kPanelRows) * weight_row_bytes, weight_row_bytes, first, count,
                   panels[q]);
    }
    for (int c = 0; c < chunk; c += Type::kColumns) {
      column_group<Type, P, Type::kColumns>(chunk - c, panels, count, cols, c, first, first == 0, first + count == nb,
                                            saved + c * P * Type::kLanes,
                                            out + static_cast<std::size_t>(c) * out_col_stride, out_col_stride);
    }
  }
}

// Rows [0, n_rows) (a multiple of 16) x every column. Columns go in chunks whose side data fits the stack
// buffer; within a chunk, each tile of Type::kPanels x 16 rows (16 for the last one if that is what is
// left) meets every column of the chunk in groups of Type::kColumns, one panel of Type::kPanelBlocks blocks
// after the other, the accumulators kept in between.
template <class Type>
void panel_gemm(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activation_rows,
                std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out, std::size_t out_col_stride) noexcept {
  constexpr int P = Type::kPanels;
  const std::int64_t nb = n / Type::kBlockValues;
  alignas(64) std::byte side[Type::kSideBytes];
  alignas(64) __m512 saved[kMaxChunkColumns * P * Type::kLanes];
  alignas(64) typename Type::Panel panels[P];
  const auto fit = static_cast<std::int64_t>(Type::kSideBytes / (Type::kSideBytesPerBlock * static_cast<std::size_t>(nb)));
  const int chunk_columns = static_cast<int>(std::min<std::int64_t>(fit, kMaxChunkColumns));
  for (int c0 = 0; c0 < n_cols; c0 += chunk_columns) {
    const int chunk = std::min(chunk_columns, n_cols - c0);
    const typename Type::Columns cols =
        Type::prepare(side, activation_rows + static_cast<std::size_t>(c0) * activation_row_bytes, activation_row_bytes, chunk, nb);
    float* chunk_out = out + static_cast<std::size_t>(c0) * out_col_stride;
    int r0 = 0;
    for (; r0 + P * kPanelRows <= n_rows; r0 += P * kPanelRows) {
      row_tile<Type, P>(weight_rows + static_cast<std::size_t>(r0) * weight_row_bytes, weight_row_bytes, nb, cols, chunk,
                        panels, saved, chunk_out + r0, out_col_stride);
    }
    if constexpr (P > 1) {
      for (; r0 < n_rows; r0 += kPanelRows) {
        row_tile<Type, 1>(weight_rows + static_cast<std::size_t>(r0) * weight_row_bytes, weight_row_bytes, nb, cols,
                          chunk, panels, saved, chunk_out + r0, out_col_stride);
      }
    }
  }
}

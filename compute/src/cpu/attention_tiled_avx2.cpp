// A prefill tile (attention.hpp, "Prefill tiles"): several consecutive queries of one sequence times the
// group's query heads (the rows) over the same keys and values, each key and value loaded and converted to
// float once for all rows. Each row's arithmetic is attention_avx2.cpp's for that query alone, in the tiled
// order: the same FMAs in the same lanes, the same sums. Lanes: the reference's vector width (16 for its
// AVX-512 build, 8 for its AVX2 one: plan.lanes).
#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "attention_avx2.hpp"
#include "attention_kernels.hpp"

namespace loom::compute::detail {
namespace {

// Where attention_scratch_floats(..., queries) puts a tile's parts: per row its scores (padded) and rounded
// query, the positions' offsets, per row 16 lanes of partial sums per output, eight keys and a chunk of values
// as floats. Row r is query r / query_heads, head r % query_heads.
struct TileScratch {
  TileScratch(const HeadAttention& h, const AttentionPlan& plan)
      : rows(h.query_heads * h.queries), per_row_(plan.padded_scores + h.head_dim), padded_(plan.padded_scores),
        base_(h.scores), offsets(reinterpret_cast<std::uint64_t*>(h.scores + rows * per_row_)),
        partial(reinterpret_cast<float*>(offsets + plan.last)), keys(partial + rows * 16 * h.head_dim),
        values(keys + 8 * h.head_dim) {}
  float* scores(std::int64_t r) const noexcept { return base_ + r * per_row_; }
  float* query(std::int64_t r) const noexcept { return scores(r) + padded_; }

  std::int64_t rows;

 private:
  std::int64_t per_row_, padded_;
  float* base_;

 public:
  std::uint64_t* offsets;
  float* partial;  // row r, output d: plan.lanes lanes at partial + (r * head_dim + d) * plan.lanes
  float* keys;     // eight positions' keys, head_dim floats each
  float* values;   // output d of a chunk's position i at values + d * kTileValueChunk + i
};

// Row r's positions: its query's (causal); and the first it sees (its sliding window's start, else 0).
inline std::int64_t row_positions(const HeadAttention& h, std::int64_t r) { return h.positions + r / h.query_heads; }
inline std::int64_t row_first(const HeadAttention& h, std::int64_t r) { return window_start(h, row_positions(h, r)); }

// Eight dots' 8-lane sums x[k] (the 16 lanes' two halves already added, as sum_16_lanes() does first), each
// summed as sum_lanes() does, (x0+x4 + x2+x6) + (x1+x5 + x3+x7), side by side: result lane k is dot k.
inline __m256 sum_lanes8(const __m256* x) {
  __m256 y[4];
  for (int k = 0; k < 4; ++k) {  // y[k] = lanes 0-3 plus lanes 4-7 of dot k (low half) and of dot k + 4
    y[k] = _mm256_add_ps(_mm256_permute2f128_ps(x[k], x[k + 4], 0x31), _mm256_permute2f128_ps(x[k], x[k + 4], 0x20));
  }
  const __m256 t0 = _mm256_unpacklo_ps(y[0], y[1]), t1 = _mm256_unpackhi_ps(y[0], y[1]);
  const __m256 t2 = _mm256_unpacklo_ps(y[2], y[3]), t3 = _mm256_unpackhi_ps(y[2], y[3]);
  const __m256 c0 = _mm256_shuffle_ps(t0, t2, 0x44), c1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 c2 = _mm256_shuffle_ps(t1, t3, 0x44), c3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  return _mm256_add_ps(_mm256_add_ps(c0, c2), _mm256_add_ps(c1, c3));
}

// Positions p0..p0+7's keys as floats into the scratch (zeros past the last position, and before the tile's
// first under a sliding window: those are not read).
template <typename T>
void load_keys8(const HeadAttention& h, const TileScratch& s, std::int64_t p0, std::int64_t first, std::int64_t last) {
  const T* keys = static_cast<const T*>(h.keys);
  for (std::int64_t k = 0; k < 8; ++k) {
    float* row = s.keys + k * h.head_dim;
    if (p0 + k >= last || p0 + k < first) {
      std::fill_n(row, h.head_dim, 0.0f);
      continue;
    }
    const T* key = keys + s.offsets[p0 + k];
    for (std::int64_t d = 0; d < h.head_dim; d += 8) _mm256_storeu_ps(row + d, load8(key + d));
  }
}

// One row's scores at the eight positions in the scratch: per position the tiled order's 16-lane
// accumulator (score_tiled() in attention_avx2.cpp), four positions at a time to stay in registers; 8 lanes:
// one 8-lane accumulator per position, all eight at once.
template <int Lanes>
inline void score8(const float* keys, const float* q, std::int64_t head_dim, float* out) {
  __m256 x[8];
  if constexpr (Lanes == 8) {
    for (int k = 0; k < 8; ++k) x[k] = _mm256_setzero_ps();
    for (std::int64_t i = 0; i < head_dim; i += 8) {
      const __m256 qv = _mm256_loadu_ps(q + i);
      for (int k = 0; k < 8; ++k) x[k] = _mm256_fmadd_ps(_mm256_loadu_ps(keys + k * head_dim + i), qv, x[k]);
    }
    _mm256_storeu_ps(out, sum_lanes8(x));
    return;
  }
  for (int half = 0; half < 8; half += 4) {
    __m256 lo[4], hi[4];
    for (int k = 0; k < 4; ++k) lo[k] = hi[k] = _mm256_setzero_ps();
    for (std::int64_t i = 0; i < head_dim; i += 16) {
      const __m256 ql = _mm256_loadu_ps(q + i), qh = _mm256_loadu_ps(q + i + 8);
      for (int k = 0; k < 4; ++k) {
        const float* key = keys + (half + k) * head_dim + i;
        lo[k] = _mm256_fmadd_ps(_mm256_loadu_ps(key), ql, lo[k]);
        hi[k] = _mm256_fmadd_ps(_mm256_loadu_ps(key + 8), qh, hi[k]);
      }
    }
    for (int k = 0; k < 4; ++k) x[half + k] = _mm256_add_ps(hi[k], lo[k]);
  }
  _mm256_storeu_ps(out, sum_lanes8(x));
}

// Every row's scores, eight positions at a time; a row past its own positions, or before its window, scores
// too within a group of eight it partly sees (its softmax then masks those), which keeps the loop branch-free.
// Under a sliding window the walk starts at the first query's window (plan.first), each row scoring only
// the groups that reach its own window.
template <typename T, int Lanes>
void score_tile(const HeadAttention& h, const AttentionPlan& plan, const TileScratch& s) {
  for (std::int64_t p0 = plan.first / 8 * 8; p0 < plan.last; p0 += 8) {
    load_keys8<T>(h, s, p0, plan.first, plan.last);
    for (std::int64_t r = 0; r < s.rows; ++r) {
      if (p0 < row_positions(h, r) && p0 + 8 > row_first(h, r)) score8<Lanes>(s.keys, s.query(r), h.head_dim, s.scores(r) + p0);
    }
  }
}

// Positions [c0, c1)'s values as floats, output after output, zeros from `valid` on and before `first` (a
// sliding window's; those are not read). value_offsets[p] is p's block start + slot; a block's slots are a
// run of each output's values.
template <typename T>
void load_value_chunk(const HeadAttention& h, const TileScratch& s, std::int64_t c0, std::int64_t c1, std::int64_t first,
                      std::int64_t valid) {
  const T* values = static_cast<const T*>(h.values);
  const auto dim_stride = static_cast<std::size_t>(h.block_size);
  const std::int64_t from = std::min(std::max(c0, first), valid);
  for (std::int64_t d = 0; d < h.head_dim; ++d) std::fill(s.values + d * kTileValueChunk, s.values + d * kTileValueChunk + (from - c0), 0.0f);
  for (std::int64_t p = from; p < valid;) {
    const std::int64_t end = std::min(valid, p - p % h.block_size + h.block_size);
    for (std::int64_t d = 0; d < h.head_dim; ++d) {
      const T* run = values + s.offsets[p] + static_cast<std::size_t>(d) * dim_stride;
      float* to = s.values + d * kTileValueChunk + (p - c0);
      std::int64_t i = 0;
      for (; i + 8 <= end - p; i += 8) _mm256_storeu_ps(to + i, load8(run + i));
      for (; i < end - p; ++i) to[i] = load1(run[i]);
    }
    p = end;
  }
  for (std::int64_t d = 0; d < h.head_dim; ++d) std::fill(s.values + d * kTileValueChunk + (valid - c0), s.values + d * kTileValueChunk + (c1 - c0), 0.0f);
}

// Row r's weighted values over the chunk's positions [c0, end) (whole Lanes-position cycles): Outputs outputs
// at a time, each output's Lanes lanes (position i in lane i % Lanes, as weigh_transposed<T, Lanes>) in
// Lanes / 8 registers, outputs d0 .. d0 + Outputs - 1.
// Positions past the row's own weigh 0: a (finite) value times 0 adds a zero to a lane that is never -0,
// which leaves it as the one-query kernel's skipped or zeroed lanes do.
template <int Lanes, int Outputs>
inline void weigh_outputs(const TileScratch& s, std::int64_t head_dim, std::int64_t r, std::int64_t d0, std::int64_t c0,
                          std::int64_t from, std::int64_t end) {
  constexpr int kRegs = Lanes / 8;
  const float* p = s.scores(r);
  float* sums = s.partial + (r * head_dim + d0) * Lanes;
  __m256 acc[Outputs][kRegs];
  for (int j = 0; j < Outputs; ++j) {
    for (int k = 0; k < kRegs; ++k) acc[j][k] = _mm256_loadu_ps(sums + Lanes * j + 8 * k);
  }
  for (std::int64_t q = from; q < end; q += Lanes) {
    __m256 w[kRegs];
    for (int k = 0; k < kRegs; ++k) w[k] = _mm256_loadu_ps(p + q + 8 * k);
    for (int j = 0; j < Outputs; ++j) {
      const float* v = s.values + (d0 + j) * kTileValueChunk + (q - c0);
      for (int k = 0; k < kRegs; ++k) acc[j][k] = _mm256_fmadd_ps(_mm256_loadu_ps(v + 8 * k), w[k], acc[j][k]);
    }
  }
  for (int j = 0; j < Outputs; ++j) {
    for (int k = 0; k < kRegs; ++k) _mm256_storeu_ps(sums + Lanes * j + 8 * k, acc[j][k]);
  }
}

// Every output of row r over the chunk: eight accumulators at a time where the head size allows (16 lanes:
// four outputs; 8 lanes: eight outputs, then four).
template <int Lanes>
inline void weigh_chunk(const TileScratch& s, std::int64_t head_dim, std::int64_t r, std::int64_t c0, std::int64_t from,
                        std::int64_t end) {
  std::int64_t d0 = 0;
  if constexpr (Lanes == 8) {
    for (; d0 + 8 <= head_dim; d0 += 8) weigh_outputs<8, 8>(s, head_dim, r, d0, c0, from, end);
  }
  for (; d0 < head_dim; d0 += 4) weigh_outputs<Lanes, 4>(s, head_dim, r, d0, c0, from, end);
}

// Every row's weighted values, chunk after chunk, then each output's lanes summed as sum_16_lanes() (or for 8
// lanes sum_lanes()) does. Under a sliding window the chunks start at plan.base and each row at its own
// window's Lanes-position cycle.
template <typename T, int Lanes>
void weigh_tile(const HeadAttention& h, const AttentionPlan& plan, const TileScratch& s) {
  std::fill_n(s.partial, s.rows * h.head_dim * Lanes, 0.0f);
  const std::int64_t cycles_end = (plan.last + Lanes - 1) / Lanes * Lanes;
  for (std::int64_t c0 = plan.base; c0 < cycles_end; c0 += kTileValueChunk) {
    const std::int64_t c1 = std::min(cycles_end, c0 + kTileValueChunk);
    load_value_chunk<T>(h, s, c0, c1, plan.first, std::min(c1, plan.last));
    for (std::int64_t r = 0; r < s.rows; ++r) {
      const std::int64_t from = std::max(c0, row_first(h, r) / Lanes * Lanes);
      const std::int64_t end = std::min(c1, (row_positions(h, r) + Lanes - 1) / Lanes * Lanes);
      if (end > from) weigh_chunk<Lanes>(s, h.head_dim, r, c0, from, end);
    }
  }
  for (std::int64_t r = 0; r < s.rows; ++r) {
    float* out = h.out + static_cast<std::size_t>(r / h.query_heads) * h.out_stride + (r % h.query_heads) * h.head_dim;
    for (std::int64_t d0 = 0; d0 < h.head_dim; d0 += 8) {  // eight outputs' sums side by side
      __m256 x[8];
      for (int k = 0; k < 8; ++k) {
        const float* lanes = s.partial + (r * h.head_dim + d0 + k) * Lanes;
        x[k] = Lanes == 8 ? _mm256_loadu_ps(lanes) : _mm256_add_ps(_mm256_loadu_ps(lanes + 8), _mm256_loadu_ps(lanes));
      }
      _mm256_storeu_ps(out + d0, sum_lanes8(x));
    }
  }
}

// Rounds each row's query (F16 cache), finds the keys' offsets, scores, takes each row's softmax over its own
// positions (zero probability past them, up to its last 16-position cycle), then weighs the values.
template <typename T, int Lanes>
void attend_tile(const HeadAttention& h, const AttentionPlan& plan) {
  constexpr bool half_cache = std::is_same_v<T, std::uint16_t>;
  const TileScratch s(h, plan);
  for (std::int64_t r = 0; r < s.rows; ++r) {
    const float* query = h.query + static_cast<std::size_t>(r / h.query_heads) * h.query_stride + (r % h.query_heads) * h.head_dim;
    for (std::int64_t d = 0; d < h.head_dim; d += 8) {
      const __m256 x = _mm256_loadu_ps(query + d);
      _mm256_storeu_ps(s.query(r) + d, half_cache ? round_to_f16(x) : x);
    }
  }
  HeadAttention all = h;  // the last query's positions: every position the tile reads
  all.positions = plan.last;
  PositionRows rows(all, h.stride, plan.first);
  for (std::int64_t p = plan.first; p < plan.last; ++p, rows.next()) s.offsets[p] = rows.offset();
  score_tile<T, Lanes>(h, plan, s);
  for (std::int64_t r = 0; r < s.rows; ++r) {
    HeadAttention one = h;
    one.positions = row_positions(h, r);
    softmax<half_cache>(one, plan, s.scores(r), row_first(h, r));
    std::fill(s.scores(r) + one.positions, s.scores(r) + (one.positions + 15) / 16 * 16, 0.0f);
  }
  find_value_offsets(all, s.offsets, plan.first);
  weigh_tile<T, Lanes>(h, plan, s);
}

}  // namespace

void attend_tile_avx2(const HeadAttention& h, const AttentionPlan& plan) {
  if (plan.lanes == 8) {
    if (plan.f32_cache) return attend_tile<float, 8>(h, plan);
    return attend_tile<std::uint16_t, 8>(h, plan);
  }
  if (plan.f32_cache) return attend_tile<float, 16>(h, plan);
  attend_tile<std::uint16_t, 16>(h, plan);
}

}  // namespace loom::compute::detail

// AVX2 + FMA + F16C attention and SwiGLU: the arithmetic of attention.cpp, eight lanes at a time.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "attention_avx2.hpp"
#include "attention_kernels.hpp"
#include "loom/compute/model/half.hpp"

namespace loom::compute::detail {
namespace {

// The tiled order (n a multiple of Lanes): one Lanes-lane accumulator.
template <int Lanes, typename T>
float score_tiled(const T* key, const float* q, std::int64_t n) {
  if constexpr (Lanes == 8) {
    __m256 acc = _mm256_setzero_ps();
    for (std::int64_t i = 0; i < n; i += 8) acc = _mm256_fmadd_ps(load8(key + i), _mm256_loadu_ps(q + i), acc);
    return sum_lanes(acc);
  }
  __m256 lo = _mm256_setzero_ps(), hi = lo;
  for (std::int64_t i = 0; i < n; i += 16) {
    lo = _mm256_fmadd_ps(load8(key + i), _mm256_loadu_ps(q + i), lo);
    hi = _mm256_fmadd_ps(load8(key + i + 8), _mm256_loadu_ps(q + i + 8), hi);
  }
  return sum_16_lanes(lo, hi);
}

// The vector_dot order's lanes: four 16-lane accumulators (accumulator u / 2, half u % 2 of acc[u]) over the
// first n - n % 64 elements, folded as (a0 + a2) + (a1 + a3) and summed. Lanes 8: four 8-lane accumulators
// over the first n - n % 32, folded the same way, summed by horizontal adds.
template <int Lanes, typename T>
float score_lanes(const T* key, const float* q, std::int64_t n) {
  if constexpr (Lanes == 8) {
    const std::int64_t whole = n / 32 * 32;
    __m256 acc[4];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (std::int64_t i = 0; i < whole; i += 32) {
      for (int u = 0; u < 4; ++u) acc[u] = _mm256_fmadd_ps(load8(key + i + 8 * u), _mm256_loadu_ps(q + i + 8 * u), acc[u]);
    }
    return sum_lanes_hadd(_mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3])));
  }
  const std::int64_t whole = n / 64 * 64;
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < whole; i += 64) {
    for (int u = 0; u < 8; ++u) acc[u] = _mm256_fmadd_ps(load8(key + i + 8 * u), _mm256_loadu_ps(q + i + 8 * u), acc[u]);
  }
  const __m256 lo = _mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6]));
  const __m256 hi = _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7]));
  return sum_16_lanes(lo, hi);
}

// The whole vector_dot order for one position: the lanes, then the rest added one by one in double.
template <int Lanes, typename T>
float score_vector_dot(const T* key, const float* q, std::int64_t n) {
  double sum = score_lanes<Lanes>(key, q, n);
  for (std::int64_t i = n / (4 * Lanes) * (4 * Lanes); i < n; ++i) sum += static_cast<double>(load1(key[i]) * q[i]);
  return static_cast<float>(sum);
}

// The same for four positions at once when the rest is whole groups of 8 (n % 8 == 0): the rest's double
// sums, one chain per position, run side by side in the lanes of one double vector, the products transposed
// from per-position registers to per-element ones. (One chain alone waits on the add latency at every
// element: a 32-dim head spent most of a decode step's attention there.)
template <int Lanes, typename T>
void score_vector_dot4(const T* const* key, const float* q, std::int64_t n, float* out) {
  const std::int64_t whole = n / (4 * Lanes) * (4 * Lanes);
  __m256d sum = whole > 0 ? _mm256_set_pd(score_lanes<Lanes>(key[3], q, n), score_lanes<Lanes>(key[2], q, n),
                                          score_lanes<Lanes>(key[1], q, n), score_lanes<Lanes>(key[0], q, n))
                          : _mm256_setzero_pd();
  for (std::int64_t i = whole; i < n; i += 8) {
    const __m256 qv = _mm256_loadu_ps(q + i);
    const __m256 p0 = _mm256_mul_ps(load8(key[0] + i), qv), p1 = _mm256_mul_ps(load8(key[1] + i), qv);
    const __m256 p2 = _mm256_mul_ps(load8(key[2] + i), qv), p3 = _mm256_mul_ps(load8(key[3] + i), qv);
    const __m256 t0 = _mm256_unpacklo_ps(p0, p1), t1 = _mm256_unpackhi_ps(p0, p1);
    const __m256 t2 = _mm256_unpacklo_ps(p2, p3), t3 = _mm256_unpackhi_ps(p2, p3);
    // e[k]: element k (low half) and element k + 4 (high half) of the four positions, position j in lane j.
    const __m256 e[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE),
                         _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xEE)};
    for (int k = 0; k < 4; ++k) sum = _mm256_add_pd(sum, _mm256_cvtps_pd(_mm256_castps256_ps128(e[k])));
    for (int k = 0; k < 4; ++k) sum = _mm256_add_pd(sum, _mm256_cvtps_pd(_mm256_extractf128_ps(e[k], 1)));
  }
  _mm_storeu_ps(out, _mm256_cvtpd_ps(sum));
}

// The AVX2 reference's lane sums of one output (sum_in_slots() with 8 and 32 slots; not a hot path).
inline float sum_8_lanes(const float* x) { return sum_lanes(_mm256_loadu_ps(x)); }
inline float fold_32_lanes(const float* x) {
  const auto reg = [&](int r) { return _mm256_loadu_ps(x + 8 * r); };
  return sum_lanes_hadd(_mm256_add_ps(_mm256_add_ps(reg(0), reg(2)), _mm256_add_ps(reg(1), reg(3))));
}

// The weighted values of the first `dims` outputs (a multiple of 8), positions [0, count) summed in `slots`
// partial sums, position i into slot i % slots (each slot adds its positions by FMA in order), then the slots
// summed per output as the lanes of the orders in attention.hpp: 16 slots are one 16-lane accumulator, 64
// are four, folded first; 8 and 32 the same with 8-lane accumulators (the AVX2 reference). partial has
// slots * dims floats. Vectorised across outputs, so every output gets
// the same float operations as attention.cpp's one-output loops.
// A sliding window (plan.base, plan.first): the loop starts at base, a multiple of 64, so each position keeps
// its slot; positions before first are not read (their slots start at zero).
template <typename T>
void sum_in_slots(const HeadAttention& h, const AttentionPlan& plan, const float* p, const std::uint64_t* offsets,
                  std::int64_t count, int slots, std::int64_t dims, float* partial, float* out) {
  const T* v = static_cast<const T*>(h.values);
  const std::int64_t from = plan.base;
  for (std::int64_t i = from; i < count; ++i) {
    float* slot = partial + (i % slots) * dims;
    const bool first = i < from + slots;
    if (i < plan.first) {
      if (first) std::fill_n(slot, dims, 0.0f);
      continue;
    }
    const T* row = v + offsets[i];
    const __m256 weight = _mm256_set1_ps(p[i]);
    for (std::int64_t d = 0; d < dims; d += 8) {
      const __m256 before = first ? _mm256_setzero_ps() : _mm256_loadu_ps(slot + d);
      _mm256_storeu_ps(slot + d, _mm256_fmadd_ps(load8(row + d), weight, before));
    }
  }
  for (std::int64_t i = std::max(count, from); i < from + slots; ++i) std::fill_n(partial + (i % slots) * dims, dims, 0.0f);
  const bool eight_lanes = slots == 8 || slots == 32;  // the AVX2 reference's accumulators
  for (std::int64_t d = 0; d < dims && eight_lanes; ++d) {
    float x[32];
    for (int k = 0; k < slots; ++k) x[k] = partial[k * dims + d];
    out[d] = slots == 8 ? sum_8_lanes(x) : fold_32_lanes(x);
  }
  for (std::int64_t d = 0; d < dims && !eight_lanes; d += 8) {
    const auto slot = [&](int k) { return _mm256_loadu_ps(partial + k * dims + d); };
    __m256 x[16];
    for (int l = 0; l < 16; ++l) {
      x[l] = slots == 64 ? _mm256_add_ps(_mm256_add_ps(slot(l), slot(32 + l)), _mm256_add_ps(slot(16 + l), slot(48 + l)))
                         : slot(l);
    }
    __m256 t[8];
    for (int i = 0; i < 8; ++i) t[i] = _mm256_add_ps(x[8 + i], x[i]);
    const __m256 t0 = _mm256_add_ps(t[4], t[0]), t1 = _mm256_add_ps(t[5], t[1]);
    const __m256 t2 = _mm256_add_ps(t[6], t[2]), t3 = _mm256_add_ps(t[7], t[3]);
    _mm256_storeu_ps(out + d, _mm256_add_ps(_mm256_add_ps(t0, t2), _mm256_add_ps(t1, t3)));
  }
}

// out[d0..d0+8*Groups) += positions [first, positions) of the weighted values, each float(value * probability)
// added in double, position after position (the vector_dot order's rest); out holds the float sum so far.
// Positions are the outer loop so that the 2 * Groups double accumulators are independent chains.
template <typename T, int Groups>
void add_rest_in_double(const HeadAttention& h, const float* p, const std::uint64_t* offsets, std::int64_t first,
                        std::int64_t d0, float* out) {
  const T* v = static_cast<const T*>(h.values) + d0;
  __m256d acc[2 * Groups];
  for (int g = 0; g < Groups; ++g) {
    const __m256 start = _mm256_loadu_ps(out + 8 * g);
    acc[2 * g] = _mm256_cvtps_pd(_mm256_castps256_ps128(start));
    acc[2 * g + 1] = _mm256_cvtps_pd(_mm256_extractf128_ps(start, 1));
  }
  for (std::int64_t i = std::max(first, window_start(h, h.positions)); i < h.positions; ++i) {
    const T* row = v + offsets[i];
    const __m256 weight = _mm256_set1_ps(p[i]);
    for (int g = 0; g < Groups; ++g) {
      const __m256 product = _mm256_mul_ps(load8(row + 8 * g), weight);
      acc[2 * g] = _mm256_add_pd(acc[2 * g], _mm256_cvtps_pd(_mm256_castps256_ps128(product)));
      acc[2 * g + 1] = _mm256_add_pd(acc[2 * g + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(product, 1)));
    }
  }
  for (int g = 0; g < Groups; ++g) {
    _mm256_storeu_ps(out + 8 * g, _mm256_set_m128(_mm256_cvtpd_ps(acc[2 * g + 1]), _mm256_cvtpd_ps(acc[2 * g])));
  }
}

// ---- Values stored transposed (HeadAttention::values_transposed): output d of positions q..q+7 is a run ----

// Positions q..q+7 of one output's values (v: the values plus that output's dimension offset), zero from
// `count` on, one by one: for block sizes that are not a multiple of 8, where q..q+7 may span two blocks
// (values8() picks one load where they cannot), and for the group that holds a sliding window's first
// position: those before `from` are zeros too, and not read.
template <typename T>
__attribute__((noinline)) __m256 gather_values8(const T* v, const std::uint64_t* offsets, std::int64_t q, std::int64_t count,
                                                std::int64_t from = 0) {
  alignas(32) float lanes[8] = {};
  for (int j = 0; j < 8 && q + j < count; ++j) {
    if (q + j >= from) lanes[j] = load1(v[offsets[q + j]]);
  }
  return _mm256_load_ps(lanes);
}
// The same when the block size is a multiple of 8, so that slots q..q+7 lie in one block's run even past
// the last position (q is a multiple of 8): one load, then the lanes from `count` on zeroed, since slots
// not yet written may hold anything (a NaN times a zero probability would still be a NaN).
template <typename T>
inline __m256 run_values8(const T* v, const std::uint64_t* offsets, std::int64_t q, std::int64_t count) {
  const __m256 x = load8(v + offsets[q]);
  if (q + 8 <= count) return x;
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count - q)), lanes)));
}
template <typename T, bool Checked>
inline __m256 values8(const T* v, const std::uint64_t* offsets, std::int64_t q, std::int64_t count, bool runs_of_8,
                      std::int64_t from) {
  if constexpr (Checked) {
    return runs_of_8 && q >= from ? run_values8(v, offsets, q, count) : gather_values8(v, offsets, q, count, from);
  }
  return load8(v + offsets[q]);
}
template <bool Checked>
inline __m256 probabilities8(const float* p, std::int64_t q, std::int64_t count) {
  if constexpr (Checked) {
    if (q + 8 > count) {
      alignas(32) float lanes[8] = {};
      std::copy(p + q, p + count, lanes);
      return _mm256_load_ps(lanes);
    }
  }
  return _mm256_loadu_ps(p + q);
}

// Asks for the transposed values of positions [first, last) to come into the second-level cache: a whole
// block's runs at once when the range covers it (they are contiguous), else each dimension's part of its run.
// value_offsets[q] is q's block start + slot.
template <typename T>
void prefetch_values(const HeadAttention& h, const std::uint64_t* value_offsets, std::int64_t first, std::int64_t last) {
  const char* values = static_cast<const char*>(h.values);
  const std::int64_t block_size = h.block_size;
  for (std::int64_t q = first; q < last;) {
    const std::int64_t slot = q % block_size;
    const std::int64_t end = std::min(last, q - slot + block_size);
    const char* block = values + (value_offsets[q] - static_cast<std::uint64_t>(slot)) * sizeof(T);
    if (slot == 0 && end - q == block_size) {
      const std::size_t bytes = static_cast<std::size_t>(block_size * h.head_dim) * sizeof(T);
      for (std::size_t byte = 0; byte < bytes; byte += 64) _mm_prefetch(block + byte, _MM_HINT_T1);
    } else {
      for (std::int64_t d = 0; d < h.head_dim; ++d) {
        const char* run = block + static_cast<std::size_t>(d * block_size + slot) * sizeof(T);
        for (std::size_t byte = 0; byte < static_cast<std::size_t>(end - q) * sizeof(T); byte += 64) _mm_prefetch(run + byte, _MM_HINT_T1);
      }
    }
    q = end;
  }
}

// The weighted values of the first `dims` outputs (a multiple of 8) of every query head in `Slots` lanes (16:
// the tiled order's accumulator, 64: the vector_dot order's four), position i into lane i % Slots of each
// output, positions [0, count); head g's out[d] (out + g * head_dim) gets the lanes folded and summed as
// sum_in_slots() does. The positions go in chunks; within one, for each head in turn, eight 8-lane
// accumulators stay in registers (one output's 64 lanes, or four outputs' 16) while they run along the
// chunk's runs, and wait in the scratch's partial sums (dims * Slots floats a head) between chunks. A chunk's
// values come from memory once (the next chunk's asked for meanwhile, a slice per group of outputs) and stay
// in the second-level cache for the other heads.
// A sliding window: chunks start at plan.base (each position keeps its lane); positions before plan.first are
// not read (a cycle across it takes the checked path; their probabilities are 0).
template <typename T, int Slots>
void weigh_transposed(const HeadAttention& h, const AttentionPlan& plan, const AttentionScratch& scratch,
                      std::int64_t count, std::int64_t dims, float* out) {
  constexpr int kRegs = Slots / 8;     // registers per output
  constexpr int kOutputs = 8 / kRegs;  // outputs per group
  constexpr std::int64_t kChunk = 512;
  const T* values = static_cast<const T*>(h.values);
  const std::uint64_t* offsets = scratch.offsets;
  const auto dim_stride = static_cast<std::size_t>(h.block_size);
  const bool runs_of_8 = h.block_size % 8 == 0;  // then every whole group of 8 positions is one run
  const std::int64_t groups = dims / kOutputs;
  const std::int64_t slice = (kChunk / groups + 15) / 16 * 16;  // of the next chunk, per group
  const auto partial = [&](std::int64_t g) { return scratch.partial + g * dims * Slots; };
  std::fill_n(partial(0), h.query_heads * dims * Slots, 0.0f);
  const std::int64_t from = plan.first;
  if (from < count) prefetch_values<T>(h, offsets, from, std::min(count, plan.base + kChunk));
  for (std::int64_t c0 = plan.base; c0 < count; c0 += kChunk) {
    const std::int64_t c1 = std::min(count, c0 + kChunk);
    const std::int64_t unchecked = runs_of_8 ? c0 + (c1 - c0) / Slots * Slots : c0;  // whole cycles of runs
    const std::int64_t clean = std::max(c0, (from + Slots - 1) / Slots * Slots);  // cycles from here hold no masked position
    for (std::int64_t head = 0; head < h.query_heads; ++head) {
      const float* p = scratch.scores(head);
      for (std::int64_t g = 0; g < groups; ++g) {
        const std::int64_t ahead = c1 + g * slice;
        if (head == 0 && ahead < count) prefetch_values<T>(h, offsets, ahead, std::min(count, ahead + slice));
        const std::int64_t d0 = g * kOutputs;
        const T* v[kOutputs];
        float* sums = partial(head) + d0 * Slots;
        __m256 acc[kOutputs][kRegs];
        for (int j = 0; j < kOutputs; ++j) {
          v[j] = values + static_cast<std::size_t>(d0 + j) * dim_stride;
          for (int r = 0; r < kRegs; ++r) acc[j][r] = _mm256_loadu_ps(sums + j * Slots + 8 * r);
        }
        const auto cycle = [&]<bool Checked>(std::int64_t q0) {
#pragma GCC unroll 8
          for (int r = 0; r < kRegs; ++r) {
            const std::int64_t q = q0 + 8 * r;
            if (Checked && q >= count) break;
            if (Checked && q + 8 <= from) continue;
            const __m256 weight = probabilities8<Checked>(p, q, count);
#pragma GCC unroll 8
            for (int j = 0; j < kOutputs; ++j) {
              acc[j][r] = _mm256_fmadd_ps(values8<T, Checked>(v[j], offsets, q, count, runs_of_8, from), weight, acc[j][r]);
            }
          }
        };
        std::int64_t q0 = c0;
        for (; q0 < std::min(clean, c1); q0 += Slots) {
          if (q0 + Slots > from) cycle.template operator()<true>(q0);
        }
        for (; q0 < unchecked; q0 += Slots) cycle.template operator()<false>(q0);
        for (; q0 < c1; q0 += Slots) cycle.template operator()<true>(q0);
        for (int j = 0; j < kOutputs; ++j) {
          for (int r = 0; r < kRegs; ++r) _mm256_storeu_ps(sums + j * Slots + 8 * r, acc[j][r]);
        }
      }
    }
  }
  for (std::int64_t head = 0; head < h.query_heads; ++head) {
    for (std::int64_t d = 0; d < dims; ++d) {
      const auto reg = [&](int r) { return _mm256_loadu_ps(partial(head) + d * Slots + 8 * r); };
      if constexpr (Slots == 64) {
        const __m256 lo = _mm256_add_ps(_mm256_add_ps(reg(0), reg(4)), _mm256_add_ps(reg(2), reg(6)));
        const __m256 hi = _mm256_add_ps(_mm256_add_ps(reg(1), reg(5)), _mm256_add_ps(reg(3), reg(7)));
        out[head * h.head_dim + d] = sum_16_lanes(lo, hi);
      } else if constexpr (Slots == 32) {
        out[head * h.head_dim + d] = sum_lanes_hadd(_mm256_add_ps(_mm256_add_ps(reg(0), reg(2)), _mm256_add_ps(reg(1), reg(3))));
      } else if constexpr (Slots == 8) {
        out[head * h.head_dim + d] = sum_lanes(reg(0));
      } else {
        out[head * h.head_dim + d] = sum_16_lanes(reg(0), reg(1));
      }
    }
  }
}

// Eight registers, r[j] = output j at positions q..q+7, turned into c[i] = position q + i at outputs 0..7.
inline void transpose8(const __m256* r, __m256* c) {
  __m256 t[8], u[8];
  for (int k = 0; k < 8; k += 4) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]), t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    t[k + 2] = _mm256_unpacklo_ps(r[k + 2], r[k + 3]), t[k + 3] = _mm256_unpackhi_ps(r[k + 2], r[k + 3]);
    u[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44), u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
    u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44), u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    c[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
    c[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
  }
}

// add_rest_in_double() for transposed values: positions [first, positions) (first a multiple of 8), each
// float(value * probability) added in double in position order, eight outputs at a time; those before `from`
// (a sliding window's first) neither read nor added.
template <typename T>
void add_rest_transposed(const HeadAttention& h, const float* p, const std::uint64_t* offsets, std::int64_t first,
                         std::int64_t from, std::int64_t dims, float* out) {
  const T* values = static_cast<const T*>(h.values);
  const auto dim_stride = static_cast<std::size_t>(h.block_size);
  const bool runs_of_8 = h.block_size % 8 == 0;
  for (std::int64_t d0 = 0; d0 < dims; d0 += 8) {
    const __m256 start = _mm256_loadu_ps(out + d0);
    __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(start)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(start, 1));
    for (std::int64_t q = std::max(first, from / 8 * 8); q < h.positions; q += 8) {
      __m256 r[8], c[8];
      for (int j = 0; j < 8; ++j) {
        const T* v = values + static_cast<std::size_t>(d0 + j) * dim_stride;
        r[j] = values8<T, true>(v, offsets, q, h.positions, runs_of_8, from);
      }
      transpose8(r, c);
      for (int i = 0; i < 8 && q + i < h.positions; ++i) {
        if (q + i < from) continue;
        const __m256 product = _mm256_mul_ps(c[i], _mm256_set1_ps(p[q + i]));
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(product)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(product, 1)));
      }
    }
    _mm256_storeu_ps(out + d0, _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo)));
  }
}

// ---- Prefetching ahead of the scores ----

// While the scores run over the positions, asks for the keys kAhead positions on (and, for values in rows,
// their values into the second-level cache, where they wait for the weighted sum; transposed values are asked
// for by weigh_transposed() as it goes). A head's keys and values at long contexts are more than the
// first-level cache holds, so asking for all of them at once evicted the first before use.
template <typename T>
class Prefetcher {
 public:
  static constexpr std::int64_t kAhead = 128;
  Prefetcher(const HeadAttention& h, const std::uint64_t* key_offsets, std::int64_t first)
      : h_(h), keys_(static_cast<const char*>(h.keys)), values_(static_cast<const char*>(h.values)),
        key_offsets_(key_offsets), row_bytes_(static_cast<std::size_t>(h.head_dim) * sizeof(T)), next_(first) {}
  // Positions up to `until` (exclusive) have been asked for.
  void ask_until(std::int64_t until) {
    until = std::min(until, h_.positions);
    for (; next_ < until; ++next_) {
      const std::size_t offset = key_offsets_[next_] * sizeof(T);
      for (std::size_t line = 0; line < row_bytes_; line += 64) _mm_prefetch(keys_ + offset + line, _MM_HINT_T0);
      if (!h_.values_transposed) {
        for (std::size_t line = 0; line < row_bytes_; line += 64) _mm_prefetch(values_ + offset + line, _MM_HINT_T1);
      }
    }
  }

 private:
  const HeadAttention& h_;
  const char* keys_;
  const char* values_;
  const std::uint64_t* key_offsets_;
  std::size_t row_bytes_;
  std::int64_t next_;  // positions before it have been asked for (or lie before the window)
};

// The weighted values of every query head: the tiled order is 16 slots over every position; the vector_dot
// order 64 slots over the span's whole 64-cell steps, then the rest in double. For the AVX2 reference
// (Lanes 8) 8 and 32 slots, over the span's whole 32-cell steps.
template <typename T, int Lanes>
void weigh_values(const HeadAttention& h, const AttentionPlan& plan, const AttentionScratch& scratch) {
  const std::int64_t dims = h.head_dim / 8 * 8;
  const std::int64_t step = 4 * Lanes;
  const std::int64_t in_slots = plan.tiled_values ? h.positions : std::min(h.positions, plan.span / step * step);
  if (dims > 0 && h.values_transposed) {
    if (plan.tiled_values) {
      weigh_transposed<T, Lanes>(h, plan, scratch, in_slots, dims, h.out);
    } else {
      if (in_slots > 0) {
        weigh_transposed<T, 4 * Lanes>(h, plan, scratch, in_slots, dims, h.out);
      } else {  // a short span: all in double; the 64 lanes' fold of nothing would give these zeros
        for (std::int64_t g = 0; g < h.query_heads; ++g) std::fill_n(h.out + g * h.head_dim, dims, 0.0f);
      }
      for (std::int64_t g = 0; g < h.query_heads; ++g) {
        add_rest_transposed<T>(h, scratch.scores(g), scratch.offsets, in_slots, plan.first, dims, h.out + g * h.head_dim);
      }
    }
  }
  for (std::int64_t g = 0; g < h.query_heads; ++g) {
    const float* p = scratch.scores(g);
    float* out = h.out + g * h.head_dim;
    if (dims > 0 && !h.values_transposed) {
      if (plan.tiled_values) {
        sum_in_slots<T>(h, plan, p, scratch.offsets, h.positions, Lanes, dims, scratch.partial, out);
      } else {
        if (in_slots > 0) {
          sum_in_slots<T>(h, plan, p, scratch.offsets, in_slots, 4 * Lanes, dims, scratch.partial, out);
        } else {
          std::fill_n(out, dims, 0.0f);
        }
        std::int64_t d = 0;
        for (; d + 32 <= dims; d += 32) add_rest_in_double<T, 4>(h, p, scratch.offsets, in_slots, d, out + d);
        for (; d < dims; d += 8) add_rest_in_double<T, 1>(h, p, scratch.offsets, in_slots, d, out + d);
      }
    }
    for (std::int64_t d = dims; d < h.head_dim; ++d) out[d] = weigh_values_one_dim(h, plan, p, scratch.offsets, d);
  }
}

// F16 storage rounds the query and the probabilities to F16 (the reference's F16 dot products); F32 does not.
// The query heads of a group (HeadAttention::query_heads) take turns on each few positions' keys and each
// piece's values, so those are read from memory (and converted) once for all of them; each head's arithmetic
// is its own.
template <typename T, int Lanes>
void attend_typed(const HeadAttention& h, const AttentionPlan& plan) {
  constexpr bool half_cache = std::is_same_v<T, std::uint16_t>;
  const T* keys = static_cast<const T*>(h.keys);
  const std::int64_t heads = h.query_heads;
  const AttentionScratch scratch(h, plan);
  for (std::int64_t g = 0; g < heads; ++g) {
    const float* query = h.query + g * h.head_dim;
    float* q = scratch.query(g);
    std::int64_t d = 0;
    for (; d + 8 <= h.head_dim; d += 8) {
      const __m256 x = _mm256_loadu_ps(query + d);
      _mm256_storeu_ps(q + d, half_cache ? round_to_f16(x) : x);
    }
    for (; d < h.head_dim; ++d) q[d] = half_cache ? half_to_float(float_to_half(query[d])) : query[d];
  }

  // Each position's key offset, found once through the block table.
  // A sliding window's positions before plan.first are skipped: neither their table entries nor their keys.
  std::uint64_t* offsets = scratch.offsets;
  PositionRows rows(h, h.stride, plan.first);
  for (std::int64_t p = plan.first; p < h.positions; ++p, rows.next()) offsets[p] = rows.offset();
  Prefetcher<T> prefetcher(h, offsets, plan.first);
  prefetcher.ask_until(plan.first + Prefetcher<T>::kAhead);
  std::int64_t scored = plan.first;
  if (!plan.tiled_scores && h.head_dim % 8 == 0) {
    for (; scored + 4 <= h.positions; scored += 4) {
      prefetcher.ask_until(scored + 4 + Prefetcher<T>::kAhead);
      const T* key[4];
      for (int j = 0; j < 4; ++j) key[j] = keys + offsets[scored + j];
      for (std::int64_t g = 0; g < heads; ++g) score_vector_dot4<Lanes>(key, scratch.query(g), h.head_dim, scratch.scores(g) + scored);
    }
  }
  for (; scored < h.positions; ++scored) {
    prefetcher.ask_until(scored + 1 + Prefetcher<T>::kAhead);
    const T* key = keys + offsets[scored];
    for (std::int64_t g = 0; g < heads; ++g) {
      const float* q = scratch.query(g);
      scratch.scores(g)[scored] = plan.tiled_scores ? score_tiled<Lanes>(key, q, h.head_dim) : score_vector_dot<Lanes>(key, q, h.head_dim);
    }
  }
  for (std::int64_t g = 0; g < heads; ++g) softmax<half_cache>(h, plan, scratch.scores(g), plan.first);

  if (h.values_transposed) find_value_offsets(h, offsets, plan.first);  // rows: the keys' offsets
  weigh_values<T, Lanes>(h, plan, scratch);
}

}  // namespace

void attend_avx2(const HeadAttention& h, const AttentionPlan& plan) {
  if (plan.lanes == 8) {
    if (plan.f32_cache) return attend_typed<float, 8>(h, plan);
    return attend_typed<std::uint16_t, 8>(h, plan);
  }
  if (plan.f32_cache) return attend_typed<float, 16>(h, plan);
  attend_typed<std::uint16_t, 16>(h, plan);
}

void store_as_f16_avx2(const float* src, std::uint16_t* dst, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) dst[i] = static_cast<std::uint16_t>(_cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT));
}

void vector_expf_avx2(const float* x, float* out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, exp8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float in[8] = {}, result[8];
    std::copy(x + i, x + n, in);
    _mm256_storeu_ps(result, exp8(_mm256_loadu_ps(in)));
    std::copy(result, result + (n - i), out + i);
  }
}

void avx2_expf_avx2(const float* x, float* out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, exp8_avx2(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float in[8] = {}, result[8];
    std::copy(x + i, x + n, in);
    _mm256_storeu_ps(result, exp8_avx2(_mm256_loadu_ps(in)));
    std::copy(result, result + (n - i), out + i);
  }
}

void swiglu_avx2(float* gate, const float* up, std::int64_t n, LaneWidth lanes) {
  // Whole groups of 16 through exp8 (the reference's 16-lane register), the rest through the C library; for
  // its AVX2 build whole groups of 8 through exp8_avx2.
  const __m256 one = _mm256_set1_ps(1.0f);
  if (lanes == LaneWidth::avx2) {
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 x = _mm256_loadu_ps(gate + i);
      const __m256 silu = _mm256_div_ps(x, _mm256_add_ps(one, exp8_avx2(_mm256_sub_ps(_mm256_setzero_ps(), x))));
      _mm256_storeu_ps(gate + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
    }
    for (; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    return;
  }
  const std::int64_t whole = n / 16 * 16;
  std::int64_t i = 0;
  for (; i < whole; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    const __m256 silu = _mm256_div_ps(x, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace loom::compute::detail

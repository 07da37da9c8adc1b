// AVX2 + FMA + F16C attention and SwiGLU: the arithmetic of attention.cpp, eight lanes at a time.
#include <immintrin.h>

#include <cmath>
#include <type_traits>

#include "attention_kernels.hpp"
#include "loom/compute/half.hpp"

namespace loom::compute::detail {
namespace {

// (l0+l4 + l2+l6) + (l1+l5 + l3+l7), as attention.cpp's sum_lanes().
inline float sum_lanes(__m256 x) {
  __m128 t = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
  t = _mm_add_ps(t, _mm_movehl_ps(t, t));
  t = _mm_add_ss(t, _mm_movehdup_ps(t));
  return _mm_cvtss_f32(t);
}

// (c0+c4 + c1+c5) + (c2+c6 + c3+c7) of c = (a0+a2) + (a1+a3), as sum_four_accumulators().
inline __m256 fold_four(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  return _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
}
inline float sum_folded(__m256 c) {
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1));
  const __m128 h = _mm_hadd_ps(t, t);
  return _mm_cvtss_f32(_mm_hadd_ps(h, h));
}

// Eight stored keys or values as floats: F16 widened, F32 as is.
inline __m256 load8(const std::uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline float load1(std::uint16_t h) { return half_to_float(h); }
inline float load1(float x) { return x; }
inline __m256 round_to_f16(__m256 x) { return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)); }

// vector_expf() on eight lanes (see attention.cpp for the method).
inline __m256 exp8(__m256 x) {
  const __m256 shifter = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shifter);
  const __m256 n = _mm256_sub_ps(z, shifter);
  const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                    _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
  const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0f))));
  const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 big = _mm256_cmp_ps(magnitude, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
  const __m256 normal = _mm256_fmadd_ps(k, j, k);
  if (_mm256_movemask_ps(big) == 0) return normal;
  const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                     _mm256_set1_epi32(static_cast<int>(0x82000000u)));
  const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
  const __m256 huge = _mm256_cmp_ps(magnitude, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
  const __m256 scaled = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
  const __m256 r = _mm256_blendv_ps(normal, scaled, big);
  return _mm256_blendv_ps(r, _mm256_mul_ps(s1, s1), huge);
}

template <typename T>
float score(const T* key, const float* q, std::int64_t n, bool tiled) {
  if (tiled) {
    __m256 acc = _mm256_setzero_ps();
    for (std::int64_t i = 0; i < n; i += 8) acc = _mm256_fmadd_ps(load8(key + i), _mm256_loadu_ps(q + i), acc);
    return sum_lanes(acc);
  }
  const std::int64_t whole = n / 32 * 32;
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (std::int64_t i = 0; i < whole; i += 32) {
    a0 = _mm256_fmadd_ps(load8(key + i), _mm256_loadu_ps(q + i), a0);
    a1 = _mm256_fmadd_ps(load8(key + i + 8), _mm256_loadu_ps(q + i + 8), a1);
    a2 = _mm256_fmadd_ps(load8(key + i + 16), _mm256_loadu_ps(q + i + 16), a2);
    a3 = _mm256_fmadd_ps(load8(key + i + 24), _mm256_loadu_ps(q + i + 24), a3);
  }
  double sum = sum_folded(fold_four(a0, a1, a2, a3));
  for (std::int64_t i = whole; i < n; ++i) sum += static_cast<double>(load1(key[i]) * q[i]);
  return static_cast<float>(sum);
}

// out[d0..d0+7] from the probabilities in p and eight value columns starting at values + d0; position i's
// values are in storage row storage_rows[i]. The batch (tiled) order: position i goes to accumulator i % 8,
// each summing its positions in increasing order, folded as (a0+a4 + a2+a6) + (a1+a5 + a3+a7). Walking one
// accumulator at a time keeps it in a register with the same FMAs in the same order: the same bits.
template <typename T>
void weigh_values8_tiled(const HeadAttention& h, const float* p, const std::uint64_t* storage_rows, std::int64_t d0,
                         float* out) {
  const T* v = static_cast<const T*>(h.values) + d0;
  const std::size_t stride = h.stride;
  const std::int64_t n = h.positions;
  __m256 acc[8];
  for (int l = 0; l < 8; ++l) {
    __m256 a = _mm256_setzero_ps();
    for (std::int64_t i = l; i < n; i += 8) a = _mm256_fmadd_ps(load8(v + storage_rows[i] * stride), _mm256_set1_ps(p[i]), a);
    acc[l] = a;
  }
  const __m256 s0 = _mm256_add_ps(acc[0], acc[4]), s1 = _mm256_add_ps(acc[1], acc[5]);
  const __m256 s2 = _mm256_add_ps(acc[2], acc[6]), s3 = _mm256_add_ps(acc[3], acc[7]);
  _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3)));
}

// The one-query (vector_dot) order for Groups x 8 outputs from d0: each output adds its float products
// value * probability in double, position after position, as the scalar weigh_values(). Positions are the
// outer loop so that the 2 * Groups double accumulators are independent chains (one chain per output would
// wait on the add latency at every position).
template <typename T, int Groups>
void weigh_values_in_double(const HeadAttention& h, const float* p, const std::uint64_t* storage_rows, std::int64_t d0,
                            float* out) {
  const T* v = static_cast<const T*>(h.values) + d0;
  __m256d acc[2 * Groups];
  for (auto& a : acc) a = _mm256_setzero_pd();
  for (std::int64_t i = 0; i < h.positions; ++i) {
    const T* row = v + storage_rows[i] * h.stride;
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

// F16 storage rounds the query and the probabilities to F16 (the reference's F16 dot products); F32 does not.
template <typename T>
void attend_typed(const HeadAttention& h, const AttentionPlan& plan) {
  constexpr bool half_cache = std::is_same_v<T, std::uint16_t>;
  const T* keys = static_cast<const T*>(h.keys);
  float* scores = h.scores;
  float* q = h.scores + plan.padded_positions;
  std::int64_t d = 0;
  for (; d + 8 <= h.head_dim; d += 8) {
    const __m256 x = _mm256_loadu_ps(h.query + d);
    _mm256_storeu_ps(q + d, half_cache ? round_to_f16(x) : x);
  }
  for (; d < h.head_dim; ++d) q[d] = half_cache ? half_to_float(float_to_half(h.query[d])) : h.query[d];

  // Each position's storage row, found once through the block table and kept for both passes (the value
  // pass visits positions out of order). After the rounded query: head_dim is even, so 8-byte aligned when
  // the scratch is. In a decode step this head's keys and values (short rows at the KV row stride) were
  // evicted by the weights streamed since the layer last ran: ask for all of them at once, so the misses
  // overlap.
  auto* storage_rows = reinterpret_cast<std::uint64_t*>(q + h.head_dim);
  const std::size_t row_bytes = static_cast<std::size_t>(h.head_dim) * sizeof(T);
  const T* values = static_cast<const T*>(h.values);
  PositionRows rows(h);
  for (std::int64_t p = 0; p < h.positions; ++p, rows.next()) {
    storage_rows[p] = rows.row();
    for (std::size_t line = 0; line < row_bytes; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(keys + rows.offset()) + line, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(values + rows.offset()) + line, _MM_HINT_T0);
    }
  }
  float max_score = -INFINITY;
  for (std::int64_t p = 0; p < h.positions; ++p) {
    scores[p] = score(keys + storage_rows[p] * h.stride, q, h.head_dim, plan.tiled_scores) * h.scale;
    max_score = scores[p] > max_score ? scores[p] : max_score;
  }
  for (std::int64_t p = h.positions; p < plan.padded_positions; ++p) scores[p] = -INFINITY;
  const __m256 max8 = _mm256_set1_ps(max_score);
  double sum = 0.0;
  for (std::int64_t p = 0; p < plan.padded_positions; p += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(scores + p), max8));
    _mm256_storeu_ps(scores + p, e);
    sum += static_cast<double>(sum_lanes(e));
  }
  const __m256 inverse = _mm256_set1_ps(static_cast<float>(1.0 / sum));
  for (std::int64_t p = 0; p < plan.padded_positions; p += 8) {
    const __m256 probability = _mm256_mul_ps(_mm256_loadu_ps(scores + p), inverse);
    _mm256_storeu_ps(scores + p, half_cache ? round_to_f16(probability) : probability);
  }

  d = 0;
  if (plan.tiled_values) {
    for (; d + 8 <= h.head_dim; d += 8) weigh_values8_tiled<T>(h, scores, storage_rows, d, h.out + d);
  } else {
    for (; d + 32 <= h.head_dim; d += 32) weigh_values_in_double<T, 4>(h, scores, storage_rows, d, h.out + d);
    for (; d + 8 <= h.head_dim; d += 8) weigh_values_in_double<T, 1>(h, scores, storage_rows, d, h.out + d);
  }
  for (; d < h.head_dim; ++d) h.out[d] = weigh_values_one_dim(h, scores, plan.tiled_values, d);
}

}  // namespace

void attend_avx2(const HeadAttention& h, const AttentionPlan& plan) {
  if (plan.f32_cache) return attend_typed<float>(h, plan);
  attend_typed<std::uint16_t>(h, plan);
}

void store_as_f16_avx2(const float* src, std::uint16_t* dst, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) dst[i] = static_cast<std::uint16_t>(_cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT));
}

void swiglu_avx2(float* gate, const float* up, std::int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    const __m256 silu = _mm256_div_ps(x, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace loom::compute::detail

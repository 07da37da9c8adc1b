// Internal: the AVX2 pieces that attention_avx2.cpp (one query at a time) and attention_tiled_avx2.cpp (a
// tile of a prompt's queries) share, so that both do the same float operations. Include only from files
// compiled for AVX2 + FMA + F16C (*_avx2.cpp); internal linkage on purpose (attention_kernels.hpp).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "attention_kernels.hpp"

namespace loom::compute::detail {
namespace {

// (l0+l4 + l2+l6) + (l1+l5 + l3+l7): the last three levels of attention.cpp's sum_16_lanes().
inline float sum_lanes(__m256 x) {
  __m128 t = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
  t = _mm_add_ps(t, _mm_movehl_ps(t, t));
  t = _mm_add_ss(t, _mm_movehdup_ps(t));
  return _mm_cvtss_f32(t);
}

// (l0+l4 + l1+l5) + (l2+l6 + l3+l7): the reference's AVX2 vector dot's two horizontal adds.
inline float sum_lanes_hadd(__m256 x) {
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  const __m128 t1 = _mm_hadd_ps(t, t);
  return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

// Eight stored keys or values as floats: F16 widened, F32 as is.
inline __m256 load8(const std::uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline float load1(std::uint16_t h) { return _cvtsh_ss(h); }  // exact, as half_to_float()
inline float load1(float x) { return x; }
inline __m256 round_to_f16(__m256 x) { return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)); }

// vector_expf() on eight lanes (see attention.cpp for the method). 2^n is built in the exponent field;
// beyond |n| > 126 it is not a normal float, so such lanes scale in two steps, the first exact.
inline __m256 exp8(__m256 x) {
  const __m256 shifter = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shifter);
  const __m256 n = _mm256_sub_ps(z, shifter);
  const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                    _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);  // n << 23: z's low bits hold n
  const __m256i one = _mm256_castps_si256(_mm256_set1_ps(1.0f));
  const __m256 normal = _mm256_mul_ps(j, _mm256_castsi256_ps(_mm256_add_epi32(e, one)));
  const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 big = _mm256_cmp_ps(magnitude, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
  if (_mm256_movemask_ps(big) == 0) return normal;
  // j * 2^(n -+ 100) is exact; times 2^(+-100) rounds once, as a single scaling by 2^n would.
  const __m256 nonpositive = _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ);
  const __m256i hundred = _mm256_set1_epi32(100 << 23);
  const __m256i toward = _mm256_blendv_epi8(_mm256_sub_epi32(_mm256_setzero_si256(), hundred), hundred,
                                            _mm256_castps_si256(nonpositive));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_add_epi32(e, one), toward));
  const __m256 s1 = _mm256_blendv_ps(_mm256_set1_ps(0x1p100f), _mm256_set1_ps(0x1p-100f), nonpositive);
  const __m256 scaled = _mm256_mul_ps(_mm256_mul_ps(j, s2), s1);
  const __m256 huge = _mm256_cmp_ps(magnitude, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
  const __m256 limit = _mm256_blendv_ps(_mm256_set1_ps(INFINITY), _mm256_setzero_ps(), nonpositive);
  return _mm256_blendv_ps(_mm256_blendv_ps(normal, scaled, big), limit, huge);
}

// avx2_expf() on eight lanes: the reference's AVX2 exp, operation for operation.
inline __m256 exp8_avx2(__m256 x) {
  const __m256 r = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
  const __m256 n = _mm256_sub_ps(z, r);
  const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                    _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
  const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0f))));
  const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 c = _mm256_cmp_ps(magnitude, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
  if (_mm256_movemask_ps(c) == 0) return _mm256_fmadd_ps(j, k, k);
  const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                     _mm256_set1_epi32(static_cast<int>(0x82000000u)));
  const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
  const __m256 d = _mm256_cmp_ps(magnitude, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
  return _mm256_or_ps(_mm256_and_ps(d, _mm256_mul_ps(s1, s1)),
                      _mm256_andnot_ps(d, _mm256_or_ps(_mm256_and_ps(c, _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1)),
                                                       _mm256_andnot_ps(c, _mm256_fmadd_ps(k, j, k)))));
}

// Sixteen lanes held as two 8-lane halves, summed as attention.cpp's sum_16_lanes(): lane l of the low half
// with lane l of the high one, then as sum_lanes().
inline float sum_16_lanes(__m256 lo, __m256 hi) { return sum_lanes(_mm256_add_ps(hi, lo)); }

// Scores to probabilities in place: scale (and soft-cap), the maximum, exp in 16-lane groups (the rest by the
// C library's expf), the sum per 16 in float and across in double, times its reciprocal (rounded to F16 for an
// F16 cache). Positions before `first` (the query's window start) are masked: probability 0 from plan.base on,
// their scores neither read nor needed; the 16-position groups stay where they are without a window.
// For the AVX2 reference (plan.lanes 8) groups of 8 through exp8_avx2(), each summed as sum_lanes() (the
// masked groups before `first` add exact zeros, as the reference's do).
template <bool HalfCache>
void softmax(const HeadAttention& h, const AttentionPlan& plan, float* scores, std::int64_t first) {
  float max_score = -INFINITY;
  for (std::int64_t p = first; p < h.positions; ++p) {
    scores[p] = soft_cap(scores[p] * h.scale, h.softcap);
    max_score = scores[p] > max_score ? scores[p] : max_score;
  }
  const std::int64_t group = first / 16 * 16;
  std::fill(scores + plan.base, scores + group, 0.0f);
  std::fill(scores + group, scores + first, -INFINITY);
  for (std::int64_t p = h.positions; p < plan.padded_scores; ++p) scores[p] = -INFINITY;
  const __m256 max8 = _mm256_set1_ps(max_score);
  double sum = 0.0;
  std::int64_t p0 = group;
  if (plan.lanes == 8) {
    for (; p0 + 8 <= plan.span && p0 < h.positions; p0 += 8) {
      const __m256 x = exp8_avx2(_mm256_sub_ps(_mm256_loadu_ps(scores + p0), max8));
      _mm256_storeu_ps(scores + p0, x);
      sum += static_cast<double>(sum_lanes(x));
    }
  }
  for (; p0 + 16 <= plan.span && p0 < h.positions; p0 += 16) {
    const __m256 lo = exp8(_mm256_sub_ps(_mm256_loadu_ps(scores + p0), max8));
    const __m256 hi = exp8(_mm256_sub_ps(_mm256_loadu_ps(scores + p0 + 8), max8));
    _mm256_storeu_ps(scores + p0, lo);
    _mm256_storeu_ps(scores + p0 + 8, hi);
    sum += static_cast<double>(sum_16_lanes(lo, hi));
  }
  for (std::int64_t p = p0; p < h.positions; ++p) sum += static_cast<double>(scores[p] = std::exp(scores[p] - max_score));
  const __m256 inverse = _mm256_set1_ps(static_cast<float>(1.0 / sum));
  for (std::int64_t p = group; p < h.positions; p += 8) {
    const __m256 probability = _mm256_mul_ps(_mm256_loadu_ps(scores + p), inverse);
    _mm256_storeu_ps(scores + p, HalfCache ? round_to_f16(probability) : probability);
  }
}

}  // namespace
}  // namespace loom::compute::detail

// The router's logits in the reference's AVX2 F32 order (expert_feed_forward.cpp, router_logits): one 8-lane
// FMA accumulator per expert, four experts at a time so that their FMA chains overlap, then the lanes'
// horizontal sum as the reference's kernel takes it.
#include <immintrin.h>

#include <cstdint>

namespace loom::compute::detail {

namespace {

float lane_sum(__m256 acc) {
  __m128 s = _mm_add_ps(_mm256_extractf128_ps(acc, 1), _mm256_castps256_ps128(acc));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

// out[e] = dot(weights + e * n, x) over the first n - n % 8 values; the caller adds the rest.
void router_logits_avx2(const float* weights, int experts, const float* x, std::int64_t n, float* out) {
  const std::int64_t whole = n - n % 8;
  int e = 0;
  for (; e + 4 <= experts; e += 4) {
    const float* w = weights + e * n;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    for (std::int64_t i = 0; i < whole; i += 8) {
      const __m256 v = _mm256_loadu_ps(x + i);
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), v, a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + n + i), v, a1);
      a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 2 * n + i), v, a2);
      a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 3 * n + i), v, a3);
    }
    out[e] = lane_sum(a0);
    out[e + 1] = lane_sum(a1);
    out[e + 2] = lane_sum(a2);
    out[e + 3] = lane_sum(a3);
  }
  for (; e < experts; ++e) {
    const float* w = weights + e * n;
    __m256 a = _mm256_setzero_ps();
    for (std::int64_t i = 0; i < whole; i += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a);
    out[e] = lane_sum(a);
  }
}

// router_logits_one() (expert_feed_forward.cpp): per expert four 8-lane accumulators over the first n - n % 32
// values, folded (a0 + a2) + (a1 + a3), the lanes summed by two horizontal adds; the caller adds the rest.
void router_logits_one_avx2(const float* weights, int experts, const float* x, std::int64_t n, float* out) {
  const std::int64_t whole = n / 32 * 32;
  for (int e = 0; e < experts; ++e) {
    const float* w = weights + e * n;
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (std::int64_t i = 0; i < whole; i += 32) {
      for (int k = 0; k < 4; ++k) a[k] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8 * k), _mm256_loadu_ps(x + i + 8 * k), a[k]);
    }
    const __m256 folded = _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
    const __m128 t = _mm_add_ps(_mm256_castps256_ps128(folded), _mm256_extractf128_ps(folded, 1));
    const __m128 t1 = _mm_hadd_ps(t, t);
    out[e] = _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
  }
}

}  // namespace loom::compute::detail

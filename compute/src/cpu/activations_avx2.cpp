// AVX2 + F16C GeGLU: activations.cpp's table lookup eight at a time (F16C rounds to F16 as float_to_half
// does, to nearest even; a gather reads the eight entries).
#include <immintrin.h>

#include "activations_kernels.hpp"

namespace loom::compute::detail {

void geglu_avx2(float* gate, const float* up, std::int64_t n, const std::uint16_t* table) {
  const __m256 low = _mm256_set1_ps(-10.0f), high = _mm256_set1_ps(10.0f);
  const __m256i low_half = _mm256_set1_epi32(0xFFFF);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    const __m256i index = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    // 32 bits from each entry (the table has a padding entry for the last), the entry in the low half.
    const __m256i entries = _mm256_and_si256(_mm256_i32gather_epi32(reinterpret_cast<const int*>(table), index, 2), low_half);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(entries, entries), 0x08);
    __m256 y = _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
    y = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, high, _CMP_GE_OQ));                 // x >= 10: x
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, low, _CMP_LE_OQ));  // x <= -10: 0
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(y, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float x = gate[i];
    // F16C's scalar forms, not half.hpp's inline functions (compute/README.md, "SIMD files").
    const float y = x <= -10.0f ? 0.0f : (x >= 10.0f ? x : _cvtsh_ss(table[_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)]));
    gate[i] = y * up[i];
  }
}

}  // namespace loom::compute::detail

// AVX2 + FMA + F16C vec_dot kernels (compiled with -mavx2 -mfma -mf16c; only reached when cpu_features()
// reports that set). The kernels themselves are in vec_dot_x86.inc, shared with the AVX-512 file; here are
// the two integer primitives they are written against, from AVX2's byte and word multiply-adds. See
// vec_dot_kernels.hpp for why nothing here calls shared inline code.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "loom/compute/model/quant_blocks.hpp"
#include "vec_dot_kernels.hpp"

namespace loom::compute::detail {
namespace {

// acc + per int32 lane the four products of unsigned and signed bytes: maddubs makes int16 pair sums (which
// never saturate here: |u| <= 128 and |s| <= 127), madd against ones widens them to int32.
inline __m256i add_byte_quads(__m256i acc, __m256i u8, __m256i s8) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u8, s8), _mm256_set1_epi16(1)));
}

// acc + per int32 lane the two products of int16 words.
inline __m256i add_word_pairs(__m256i acc, __m256i s16, __m256i t16) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(s16, t16));
}

#include "vec_dot_x86.inc"

}  // namespace

const VecDotTable& avx2_vec_dot_table() noexcept { return kX86Table; }

// quantize.cpp's quantize_q8_0, 32 values at a time: the largest magnitude, d = amax / 127 rounded to f16,
// q = x * (127 / amax) rounded half to even (the MXCSR default of vcvtps2dq), bytes restored to their order
// after the saturating packs (which never saturate: |q| <= 127).
void quantize_q8_0_avx2(const float* x, BlockQ8_0* blocks, std::int64_t n_blocks) noexcept {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (std::int64_t b = 0; b < n_blocks; ++b, x += 32) {
    const __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    const __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                   _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    blocks[b].d = static_cast<std::uint16_t>(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    const __m256 scale = _mm256_set1_ps(id);
    const __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, scale)), q1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, scale));
    const __m256i q2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, scale)), q3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, scale));
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(blocks[b].qs), _mm256_permutevar8x32_epi32(bytes, order));
  }
}

}  // namespace loom::compute::detail

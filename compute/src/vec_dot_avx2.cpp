// AVX2 + FMA + F16C vec_dot kernels (compiled with -mavx2 -mfma -mf16c; only reached when cpu_features()
// reports that set). The kernels themselves are in vec_dot_x86.inc, shared with the AVX-512 file; here are
// the two integer primitives they are written against, from AVX2's byte and word multiply-adds. See
// vec_dot_kernels.hpp for why nothing here calls shared inline code.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "loom/compute/quant_blocks.hpp"
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

}  // namespace loom::compute::detail

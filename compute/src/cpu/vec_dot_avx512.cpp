// AVX-512 vec_dot kernels (compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni on top of
// the AVX2 set; only reached when cpu_features().has_avx512_set()). The kernels are those of
// vec_dot_x86.inc, shared with the AVX2 file; VNNI gives each of their two integer primitives as one
// instruction where AVX2 needs two or three, which shortens the inner loops of the quantized kernels.
//
// The float operations are the AVX2 kernels' on purpose: they follow the reference implementation's
// summation orders, and matching them bit for bit is what keeps logits at its print precision
// (compute/README.md). Where 512-bit vectors are used (Q8_0, Q4_0 and Q6_K against one column), they carry
// several rows or half superblocks with exactly the narrow integer sums in their lanes; VNNI's integer sums
// are exact. So this path gives exactly the AVX2 path's bits (tests/compute/vec_dot_test.cpp).
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "loom/compute/model/quant_blocks.hpp"
#include "vec_dot_kernels.hpp"

namespace loom::compute::detail {
namespace {

// acc + per int32 lane the four products of unsigned and signed bytes (vpdpbusd, no saturation).
inline __m256i add_byte_quads(__m256i acc, __m256i u8, __m256i s8) { return _mm256_dpbusd_epi32(acc, u8, s8); }

// acc + per int32 lane the two products of int16 words (vpdpwssd).
inline __m256i add_word_pairs(__m256i acc, __m256i s16, __m256i t16) { return _mm256_dpwssd_epi32(acc, s16, t16); }

// GCC 12's AVX-512 intrinsics (broadcasts, conversions) start from _mm512_undefined_*() and then warn, once
// inlined here, that it "may be used uninitialized": a known false positive of those headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "vec_dot_x86.inc"
#pragma GCC diagnostic pop

}  // namespace

const VecDotTable& avx512_vec_dot_table() noexcept { return kX86Table; }

}  // namespace loom::compute::detail

// The machine probes' AVX-512 loops (machine_probe_kernels.hpp): vpdpbusd and vfmadd231ps on 512-bit
// registers, 16 chains each (of the 32 registers), enough to keep two such units busy through a 4-5 cycle
// latency.
#include <immintrin.h>

#include <cstring>

#include "machine_probe_kernels.hpp"

namespace loom::compute::probe {

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and then warn, once inlined, that it is
// "used uninitialized": a known false positive of those headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

std::uint64_t int8_dot_avx512_vnni(std::int64_t iterations) {
  static_assert(kAvx512VnniChains == 16);
  const __m512i weights = _mm512_set1_epi8(3);
  const __m512i activations = _mm512_set1_epi8(-5);
  __m512i acc[kAvx512VnniChains];
  for (auto& a : acc) a = _mm512_setzero_si512();
  for (std::int64_t i = 0; i < iterations; ++i) {
    for (auto& a : acc) a = _mm512_dpbusd_epi32(a, weights, activations);
  }
  __m512i all = acc[0];
  for (int c = 1; c < kAvx512VnniChains; ++c) all = _mm512_xor_si512(all, acc[c]);
  return static_cast<std::uint64_t>(_mm512_reduce_add_epi64(all));
}

std::uint64_t fma_512(std::int64_t iterations) {
  static_assert(kFma512Chains == 16);
  // acc = acc * a + b converges to 1: the values stay normal (no denormal slow path).
  const __m512 a = _mm512_set1_ps(0.999f);
  const __m512 b = _mm512_set1_ps(0.001f);
  __m512 acc[kFma512Chains];
  for (auto& v : acc) v = _mm512_set1_ps(0.5f);
  for (std::int64_t i = 0; i < iterations; ++i) {
    for (auto& v : acc) v = _mm512_fmadd_ps(v, a, b);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kFma512Chains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  const float total = _mm512_reduce_add_ps(sum);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &total, sizeof bits);
  return bits;
}

#pragma GCC diagnostic pop

}  // namespace loom::compute::probe

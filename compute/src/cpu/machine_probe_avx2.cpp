// The machine probes' AVX2 loops (machine_probe_kernels.hpp): the streaming read, the int8 dot product as
// the AVX2 kernels write it (vpmaddubsw + vpmaddwd + vpaddd) and as AVX-VNNI's 256-bit vpdpbusd, and FP32
// FMA on 256-bit registers.
#include <immintrin.h>

#include <cstring>

#include "machine_probe_kernels.hpp"

namespace loom::compute::probe {
namespace {

std::uint64_t fold(__m256i v) {
  return static_cast<std::uint64_t>(_mm256_extract_epi64(v, 0) ^ _mm256_extract_epi64(v, 1) ^
                                    _mm256_extract_epi64(v, 2) ^ _mm256_extract_epi64(v, 3));
}

}  // namespace

std::uint64_t stream_read_avx2(const std::uint64_t* data, std::size_t words) {
  const auto* p = reinterpret_cast<const __m256i*>(data);
  const std::size_t vectors = words / 4;
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 4 <= vectors; i += 4) {
    a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(p + i));
    a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(p + i + 1));
    a2 = _mm256_xor_si256(a2, _mm256_loadu_si256(p + i + 2));
    a3 = _mm256_xor_si256(a3, _mm256_loadu_si256(p + i + 3));
  }
  std::uint64_t folded = fold(_mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3)));
  for (std::size_t w = i * 4; w < words; ++w) folded ^= data[w];
  return folded;
}

std::uint64_t int8_dot_avx2_maddubs(std::int64_t iterations) {
  static_assert(kMaddubsChains == 8);
  __m256i weights = _mm256_set1_epi8(3);
  __m256i activations = _mm256_set1_epi8(-5);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[kMaddubsChains];
  for (auto& a : acc) a = _mm256_setzero_si256();
  for (std::int64_t i = 0; i < iterations; ++i) {
    // Tell the compiler the operands may have changed: the products are loop-invariant otherwise, and it
    // would hoist them out of the loop, leaving only the adds. The empty asm emits no instruction.
    asm volatile("" : "+x"(weights), "+x"(activations));
    for (auto& a : acc) {
      const __m256i pairs = _mm256_maddubs_epi16(weights, activations);
      a = _mm256_add_epi32(a, _mm256_madd_epi16(pairs, ones));
      asm volatile("" : "+x"(weights));  // each chain its own products, as the kernels' blocks are
    }
  }
  __m256i all = acc[0];
  for (int c = 1; c < kMaddubsChains; ++c) all = _mm256_xor_si256(all, acc[c]);
  return fold(all);
}

// AVX-VNNI is VEX-encoded (unlike AVX-512 VNNI's EVEX form), so it needs its own target; the dispatch only
// calls this on CPUs that report it.
__attribute__((target("avxvnni"))) std::uint64_t int8_dot_avx_vnni(std::int64_t iterations) {
  static_assert(kAvxVnniChains == 12);
  const __m256i weights = _mm256_set1_epi8(3);
  const __m256i activations = _mm256_set1_epi8(-5);
  __m256i acc[kAvxVnniChains];
  for (auto& a : acc) a = _mm256_setzero_si256();
  for (std::int64_t i = 0; i < iterations; ++i) {
    for (auto& a : acc) a = _mm256_dpbusd_avx_epi32(a, weights, activations);
  }
  __m256i all = acc[0];
  for (int c = 1; c < kAvxVnniChains; ++c) all = _mm256_xor_si256(all, acc[c]);
  return fold(all);
}

std::uint64_t fma_256(std::int64_t iterations) {
  static_assert(kFma256Chains == 12);
  // acc = acc * a + b converges to b / (1 - a) = 1: the values stay normal (no denormal slow path).
  const __m256 a = _mm256_set1_ps(0.999f);
  const __m256 b = _mm256_set1_ps(0.001f);
  __m256 acc[kFma256Chains];
  for (auto& v : acc) v = _mm256_set1_ps(0.5f);
  for (std::int64_t i = 0; i < iterations; ++i) {
    for (auto& v : acc) v = _mm256_fmadd_ps(v, a, b);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kFma256Chains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &lanes[0], sizeof bits);
  return bits;
}

}  // namespace loom::compute::probe

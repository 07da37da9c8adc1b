#include "stream_read.hpp"

#include <immintrin.h>

namespace loom::bench {
namespace {

__attribute__((target("avx2"))) std::uint64_t stream_read_avx2(const std::uint64_t* data, std::size_t words) {
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
  a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  std::uint64_t folded = static_cast<std::uint64_t>(_mm256_extract_epi64(a0, 0) ^ _mm256_extract_epi64(a0, 1) ^
                                                    _mm256_extract_epi64(a0, 2) ^ _mm256_extract_epi64(a0, 3));
  for (std::size_t w = i * 4; w < words; ++w) folded ^= data[w];
  return folded;
}

std::uint64_t stream_read_plain(const std::uint64_t* data, std::size_t words) {
  std::uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  std::size_t i = 0;
  for (; i + 4 <= words; i += 4) a0 ^= data[i], a1 ^= data[i + 1], a2 ^= data[i + 2], a3 ^= data[i + 3];
  for (; i < words; ++i) a0 ^= data[i];
  return a0 ^ a1 ^ a2 ^ a3;
}

}  // namespace

std::uint64_t stream_read(const std::uint64_t* data, std::size_t words) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2 ? stream_read_avx2(data, words) : stream_read_plain(data, words);
}

}  // namespace loom::bench

// The timed loops of the machine probes (machine_probe.hpp), one per instruction form, each in the source
// compiled for its instruction set (machine_probe.cpp, machine_probe_avx2.cpp, machine_probe_avx512.cpp)
// and reached only through machine_probe.cpp's run-time dispatch.
//
// Each compute loop runs `iterations` times a body of independent chains (kChains* accumulators, enough to
// cover the instruction's latency times the issue width of current cores), so its time is the
// instructions' throughput. Each returns a fold of its accumulators, which the caller keeps, so the work
// cannot be optimised away.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::compute::probe {

// Instruction sequences per loop iteration, and MACs (int8) or FLOPs (FMA) per sequence.
inline constexpr int kScalarInt8Chains = 64;      // one byte-pair multiply-add each
inline constexpr int kMaddubsChains = 8;          // vpmaddubsw + vpmaddwd + vpaddd: 32 MACs
inline constexpr int kAvxVnniChains = 12;         // vpdpbusd ymm: 32 MACs
inline constexpr int kAvx512VnniChains = 16;      // vpdpbusd zmm: 64 MACs
inline constexpr int kScalarFmaChains = 16;       // a * b + c in float: 2 FLOPs
inline constexpr int kFma256Chains = 12;          // vfmadd231ps ymm: 16 FLOPs
inline constexpr int kFma512Chains = 16;          // vfmadd231ps zmm: 32 FLOPs

std::uint64_t int8_dot_scalar(std::int64_t iterations);
std::uint64_t fma_scalar(std::int64_t iterations);

// machine_probe_avx2.cpp (AVX2 + FMA; int8_dot_avx_vnni also AVX-VNNI)
std::uint64_t stream_read_avx2(const std::uint64_t* data, std::size_t words);
std::uint64_t int8_dot_avx2_maddubs(std::int64_t iterations);
std::uint64_t int8_dot_avx_vnni(std::int64_t iterations);
std::uint64_t fma_256(std::int64_t iterations);

// machine_probe_avx512.cpp
std::uint64_t int8_dot_avx512_vnni(std::int64_t iterations);
std::uint64_t fma_512(std::int64_t iterations);

}  // namespace loom::compute::probe

// The bandwidth baseline's inner loop: read `words` 64-bit words as fast as the core can issue loads
// (AVX2 when the CPU has it, else plain 64-bit loads), XOR-folding them so nothing is optimised away.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::bench {

std::uint64_t stream_read(const std::uint64_t* data, std::size_t words);

}  // namespace loom::bench

// Internal: the AVX2 GeGLU (activations_avx2.cpp, compiled for AVX2 + FMA + F16C) and the table it shares with
// the scalar path in activations.cpp.
#pragma once

#include <cstdint>

namespace loom::compute::detail {

// GELU's F16 result for each F16 input, plus one padding entry: the AVX2 path gathers 32 bits at each entry.
inline constexpr std::int64_t kGeluTableEntries = 65536 + 1;
const std::uint16_t* gelu_f16_table();

// gate[i] = gelu_tanh(gate[i]) * up[i], eight at a time; the same bits as the scalar loop.
void geglu_avx2(float* gate, const float* up, std::int64_t n, const std::uint16_t* table);

}  // namespace loom::compute::detail

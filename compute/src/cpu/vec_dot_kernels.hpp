// Internal to loom_compute: the per-path tables of vec_dot kernels that vec_dot.cpp dispatches through. Each
// *_avx2.cpp / *_avx512.cpp file defines its table; a null entry means "no kernel for this type on this path".
//
// The SIMD translation units are compiled with wider instruction sets than the rest of the library, so they
// must not instantiate inline functions or templates that other units also use (the linker keeps one copy,
// and it could be the AVX one): they use only intrinsics and functions of their own anonymous namespace.
#pragma once

#include "loom/compute/cpu/vec_dot.hpp"
#include "loom/compute/model/quant_blocks.hpp"

namespace loom::compute::detail {

struct VecDotTable {
  VecDotFn f32 = nullptr;
  VecDotFn f16 = nullptr;
  VecDotFn bf16 = nullptr;
  VecDotFn q8_0 = nullptr;
  VecDotFn q4_0 = nullptr;
  VecDotFn q4_k = nullptr;
  VecDotFn q5_k = nullptr;
  VecDotFn q6_k = nullptr;
};

// Activation quantizers with SIMD paths (quantize.hpp): the scalar code's bytes for finite input.
void quantize_q8_0_avx2(const float* x, BlockQ8_0* blocks, std::int64_t n_blocks) noexcept;

const VecDotTable& scalar_vec_dot_table() noexcept;
const VecDotTable& avx2_vec_dot_table() noexcept;
const VecDotTable& avx512_vec_dot_table() noexcept;

}  // namespace loom::compute::detail

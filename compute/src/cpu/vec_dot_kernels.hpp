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
  VecDotFn q4_1 = nullptr;
  VecDotFn q5_0 = nullptr;
  VecDotFn q5_1 = nullptr;
  VecDotFn iq4_nl = nullptr;
  VecDotFn q2_k = nullptr;
  VecDotFn q3_k = nullptr;
  VecDotFn iq4_xs = nullptr;
};

// Activation quantizers with SIMD paths (quantize.hpp): the scalar code's bytes for finite input.
void quantize_q8_0_avx2(const float* x, BlockQ8_0* blocks, std::int64_t n_blocks) noexcept;

// The AVX-512 VNNI panel GEMMs (gemm_avx512.cpp): VecDotFn's contract for n_rows a multiple of 16 and
// rows that panel_gemm_fits(); the AVX-512 table sends calls with enough columns there.
bool panel_gemm_fits(std::int64_t n) noexcept;
void q8_0_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride);
void q4_0_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride);

// The same for the K-quants (gemm_kquant_avx512.cpp), for rows that q4_k_panel_gemm_fits() (Q4_K) or
// q5_k_q6_k_panel_gemm_fits() (Q5_K, Q6_K: their activations widened to int16 need more side data).
bool q4_k_panel_gemm_fits(std::int64_t n) noexcept;
bool q5_k_q6_k_panel_gemm_fits(std::int64_t n) noexcept;
void q4_k_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride);
void q5_k_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride);
void q6_k_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride);

// The same for Q4_1, Q5_0, Q5_1 and IQ4_NL (gemm_small_blocks_avx512.cpp), for rows that
// small_block_panel_gemm_fits().
bool small_block_panel_gemm_fits(std::int64_t n) noexcept;
void q4_1_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride);
void q5_0_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride);
void q5_1_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                            const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                            std::int64_t n, float* out, std::size_t out_col_stride);
void iq4_nl_panel_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                              const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                              std::int64_t n, float* out, std::size_t out_col_stride);

// The register-blocked float GEMMs (gemm_float.inc): VecDotFn's contract in the batch order, for n a
// multiple of 16 (F32) or 8 (F16, BF16); the x86 tables send batches there.
void f32_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activation_rows,
                     std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out, std::size_t out_col_stride);
void f16_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activation_rows,
                     std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out, std::size_t out_col_stride);
void bf16_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activation_rows,
                      std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out, std::size_t out_col_stride);
void f32_gemm_avx2(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activation_rows,
                   std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out, std::size_t out_col_stride);
void f16_gemm_avx2(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activation_rows,
                   std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out, std::size_t out_col_stride);
void bf16_gemm_avx2(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activation_rows,
                    std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out, std::size_t out_col_stride);

const VecDotTable& scalar_vec_dot_table() noexcept;
const VecDotTable& avx2_vec_dot_table() noexcept;
const VecDotTable& avx512_vec_dot_table() noexcept;

}  // namespace loom::compute::detail

// Internal to loom_compute: the portable code of the 32-value block types added after Q8_0/Q4_0 (Q4_1, Q5_0,
// Q5_1, IQ4_NL weights and Q8_1 activations): quantizers, dequantizers and the scalar dot kernels, kept in
// one file (small_blocks.cpp) so that quantize.cpp, dequantize.cpp and vec_dot.cpp only dispatch to them.
//
// The scalar kernels spell out the reference's AVX2 summation orders, which the SIMD kernels
// (vec_dot_small_blocks.inc) keep bit for bit: its references for these types were made on an AVX2 machine
// without repacked weights (../shared/reference/README.md), and a sum in another order drifts the logits of
// a random-weight model past the 0.05 tolerance. Per (row, column) output, one 8-lane float accumulator;
// lane k of a block is the exact integer dot of its values 4k..4k+3, added as fma(d_w * d_a, lane, acc).
// Q4_1/Q5_1 add their min terms in a scalar sum, mins = fma(m_w, s_a, mins), after the lanes' horizontal
// sum. IQ4_NL against one column (the reference's vec_dot) keeps two accumulators, even and odd blocks,
// added before the horizontal sum, an odd last block fused in whole; against several columns (its batched
// product) one accumulator, as Q5_0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "loom/compute/model/quant_blocks.hpp"

namespace loom::compute::detail {

void quantize_q4_1(const float* x, BlockQ4_1* blocks, std::int64_t n_blocks);
void quantize_q5_0(const float* x, BlockQ5_0* blocks, std::int64_t n_blocks);
void quantize_q5_1(const float* x, BlockQ5_1* blocks, std::int64_t n_blocks);
void quantize_iq4_nl(const float* x, BlockIQ4_NL* blocks, std::int64_t n_blocks);
void quantize_q8_1(const float* x, BlockQ8_1* blocks, std::int64_t n_blocks);

void dequantize_q4_1(const BlockQ4_1* blocks, float* dst, std::int64_t n_blocks);
void dequantize_q5_0(const BlockQ5_0* blocks, float* dst, std::int64_t n_blocks);
void dequantize_q5_1(const BlockQ5_1* blocks, float* dst, std::int64_t n_blocks);
void dequantize_iq4_nl(const BlockIQ4_NL* blocks, float* dst, std::int64_t n_blocks);
void dequantize_q8_1(const BlockQ8_1* blocks, float* dst, std::int64_t n_blocks);

// VecDotFn's contract (vec_dot_kernels.hpp): the scalar table's entries.
void q4_1_rows_cols_scalar(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                           const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols, std::int64_t n,
                           float* out, std::size_t out_col_stride);
void q5_0_rows_cols_scalar(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                           const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols, std::int64_t n,
                           float* out, std::size_t out_col_stride);
void q5_1_rows_cols_scalar(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                           const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols, std::int64_t n,
                           float* out, std::size_t out_col_stride);
void iq4_nl_rows_cols_scalar(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                             const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols,
                             std::int64_t n, float* out, std::size_t out_col_stride);

}  // namespace loom::compute::detail

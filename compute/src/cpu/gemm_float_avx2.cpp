// The float GEMM (gemm_float.inc) on AVX2 + FMA + F16C: F32 in a (lo, hi) ymm pair per output (2 rows x 3
// columns), F16/BF16 in one ymm per output (3 rows x 4 columns); 12 accumulators of the 16 registers either
// way. Only reached when cpu_features() reports that set.
#include <immintrin.h>

#include <cstdint>

#include "vec_dot_kernels.hpp"

namespace loom::compute::detail {
namespace {

#include "gemm_float.inc"

}  // namespace

void f32_gemm_avx2(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activation_rows,
                   std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out, std::size_t out_col_stride) {
  float_gemm<SixteenLanes, F32Loader>(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes, n_cols,
                                      n, out, out_col_stride);
}

void f16_gemm_avx2(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activation_rows,
                   std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out, std::size_t out_col_stride) {
  float_gemm<EightLanes, F16Loader>(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes, n_cols, n,
                                    out, out_col_stride);
}

void bf16_gemm_avx2(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activation_rows,
                    std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out, std::size_t out_col_stride) {
  float_gemm<EightLanes, BF16Loader>(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes, n_cols, n,
                                     out, out_col_stride);
}

}  // namespace loom::compute::detail

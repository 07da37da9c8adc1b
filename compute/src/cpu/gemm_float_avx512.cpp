// The float GEMM (gemm_float.inc) on AVX-512: F32 in one zmm per output, F16/BF16 with two rows' 8-lane
// accumulators in each zmm's halves; 4 x 6 zmm accumulators either way. Only reached when
// cpu_features().has_avx512_set().
#include <immintrin.h>

#include <cstdint>

#include "vec_dot_kernels.hpp"

namespace loom::compute::detail {
namespace {

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and then warn, once inlined, that it "may be
// used uninitialized": a known false positive of those headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "gemm_float.inc"
#pragma GCC diagnostic pop

}  // namespace

void f32_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activation_rows,
                     std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out, std::size_t out_col_stride) {
  float_gemm<SixteenLanes, F32Loader>(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes, n_cols,
                                      n, out, out_col_stride);
}

void f16_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activation_rows,
                     std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out, std::size_t out_col_stride) {
  float_gemm<EightLanes, F16Loader>(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes, n_cols, n,
                                    out, out_col_stride);
}

void bf16_gemm_avx512(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activation_rows,
                      std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out, std::size_t out_col_stride) {
  float_gemm<EightLanes, BF16Loader>(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes, n_cols, n,
                                     out, out_col_stride);
}

}  // namespace loom::compute::detail

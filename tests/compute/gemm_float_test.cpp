// The float GEMM (gemm_float.inc: F32, F16 and BF16 weights against several F32 activation columns, on AVX2
// and on AVX-512): every output must have the bits of the batch orders of vec_dot.hpp, spelled out here
// for F16/BF16 (one 8-lane FMA accumulator, hsum's tree; the scalar kernel sums those in another order) and
// by the scalar kernel for F32 (one 16-lane accumulator), over shapes that take every branch: row counts
// with and without a remainder of the row tiles (2 or 3 rows on AVX2, 4 or 8 on AVX-512), column counts
// around the register groups (3, 4, 6) and the column chunks, and row lengths of whole steps. Lengths the
// batch order does not take go to the one-row kernels; there AVX-512 must give AVX2's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/compute/cpu/kernel_path.hpp"
#include "loom/compute/cpu/matmul.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/cpu/vec_dot.hpp"
#include "loom/compute/tensor_type.hpp"
#include "quant_problem.hpp"

namespace loom::compute {
namespace {

using testing::make_problem;
using testing::Problem;
using testing::rows_cols_on;
using testing::same_outputs;

// The 8-lane batch order of F16/BF16 weights: lane k of one accumulator takes values 8i + k with one FMA
// each, and the lanes are summed as hsum() does: (l + l+4), then (t0 + t2) + (t1 + t3).
float eight_lane_dot(const float* w, const float* a, std::int64_t n) {
  float lane[8] = {};
  for (std::int64_t i = 0; i < n; ++i) lane[i % 8] = std::fma(w[i], a[i], lane[i % 8]);
  float t[4];
  for (int k = 0; k < 4; ++k) t[k] = lane[k] + lane[k + 4];
  return (t[0] + t[2]) + (t[1] + t[3]);
}

// The expected outputs (padding -3): the order spelled out where the batch order applies (the weights'
// dequantized values are exact for F16/BF16), otherwise the scalar kernel (F32) or nothing (F16/BF16 rows
// outside the batch order, whose SIMD single-column order only the paths' agreement checks).
std::vector<float> expected(const Problem& p, std::size_t out_stride, bool& have) {
  std::vector<float> want(out_stride * static_cast<std::size_t>(p.cols), -3.0f);
  have = true;
  if (p.type == TensorType::f32) {
    vec_dot_kernel(p.type, KernelPath::scalar)
        .rows_cols(p.weights.data(), p.row_bytes, p.rows, p.activations.data(), p.act_row_bytes, p.cols, p.n,
                   want.data(), out_stride);
  } else if (p.n % 8 == 0) {
    for (int c = 0; c < p.cols; ++c) {
      for (int r = 0; r < p.rows; ++r) {
        want[c * out_stride + r] = eight_lane_dot(p.w.data() + r * p.n, p.a.data() + c * p.n, p.n);
      }
    }
  } else {
    have = false;
  }
  return want;
}

// Every SIMD path this CPU runs against the expected bits on the same problem, padding of the output
// columns included (it must stay untouched); without expected bits, the paths against the first of them.
void expect_order_bits(TensorType type, std::int64_t n, int rows, int cols, std::size_t out_stride) {
  const Problem p = make_problem(type, n, rows, cols, false, static_cast<unsigned>(n * 131 + rows * 7 + cols));
  bool have = false;
  std::vector<float> want = expected(p, out_stride, have);
  for (KernelPath path : {KernelPath::avx2, KernelPath::avx512}) {
    if (!kernel_path_supported(path)) continue;
    if (!have) {
      want = rows_cols_on(type, path, p, n, rows, cols, out_stride);
      have = true;
      continue;
    }
    ASSERT_TRUE(same_outputs(rows_cols_on(type, path, p, n, rows, cols, out_stride), want, rows, cols, out_stride))
        << name(type) << " on " << name(path) << ": n=" << n << " rows=" << rows << " cols=" << cols;
  }
}

class FloatGemm : public ::testing::TestWithParam<TensorType> {};

TEST_P(FloatGemm, RowTilesAndColumnGroupsKeepTheBatchOrder) {
  const TensorType type = GetParam();
  for (std::int64_t n : {16, 48, 256, 768}) {
    for (int rows : {1, 2, 3, 4, 5, 7, 8, 9, 12, 17, 24, 35}) {
      for (int cols : {2, 3, 4, 5, 6, 7, 11, 12, 13}) {
        expect_order_bits(type, n, rows, cols, static_cast<std::size_t>(rows));
      }
    }
  }
}

TEST_P(FloatGemm, ManyColumnsChunksAndPaddedOutputs) {
  const TensorType type = GetParam();
  for (int cols = 2; cols <= 130; cols += cols < 20 ? 1 : 9) expect_order_bits(type, 64, 11, cols, 11);
  expect_order_bits(type, 768, 32, 64, 40);
  expect_order_bits(type, 2048, 35, 130, 40);    // two column chunks and a remainder of one
  expect_order_bits(type, 16384, 9, 7, 9);       // a chunk of one column group; a panel far beyond L1
}

TEST_P(FloatGemm, RowLengthsOutsideTheBatchOrderKeepTheirKernels) {
  const TensorType type = GetParam();
  // 8-value multiples (the F16/BF16 batch order, F32's single-column order), and lengths with leftovers
  // (the single-column orders).
  for (std::int64_t n : {8, 24, 40, 100, 777}) {
    for (int cols : {2, 5, 9}) expect_order_bits(type, n, 13, cols, 13);
  }
}

// Through matmul (threads, row tasks): a token's outputs have the same bits in every batch of two tokens
// or more, whatever its size (F16/BF16 batches of 8 or more used to go to OpenBLAS and differ).
TEST_P(FloatGemm, MatmulGivesATokenTheSameBitsInEveryBatch) {
  const TensorType type = GetParam();
  constexpr std::int64_t kWidth = 256;
  constexpr int kRows = 300, kTokens = 19;
  const Problem p = make_problem(type, kWidth, kRows, 1, false, 7);
  const TensorView w{"w", type, {kWidth, kRows}, reinterpret_cast<const std::byte*>(p.weights.data()), p.weights.size()};
  std::vector<float> x(static_cast<std::size_t>(kTokens * kWidth));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 101.0f - 0.5f;
  ThreadPool pool(2);
  MatmulScratch scratch;
  scratch.reserve(kTokens, kWidth);
  std::vector<float> all(static_cast<std::size_t>(kTokens * kRows));
  matmul(w, x.data(), kTokens, all.data(), pool, scratch);
  for (int batch : {2, 7, 8, 9}) {
    std::vector<float> part(static_cast<std::size_t>(batch * kRows));
    for (int first = 0; first + batch <= kTokens; first += batch) {
      matmul(w, x.data() + first * kWidth, batch, part.data(), pool, scratch);
      for (std::size_t i = 0; i < part.size(); ++i) {
        ASSERT_EQ(part[i], all[first * kRows + i]) << name(type) << ": batch of " << batch << " from token " << first
                                                   << ", output " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Gemm, FloatGemm, ::testing::Values(TensorType::f32, TensorType::f16, TensorType::bf16),
                         [](const ::testing::TestParamInfo<TensorType>& type_info) { return std::string(name(type_info.param)); });

}  // namespace
}  // namespace loom::compute

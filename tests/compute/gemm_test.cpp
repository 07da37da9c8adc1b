// The matrix-matrix path of the dot kernels (prefill and batched decode: rows_cols with several columns),
// whichever micro-kernel serves it on this CPU (the AVX-512 panel GEMM takes whole groups of 16 rows from 4
// columns on): every output must have the bits of the kernels that spell out the reference implementation's
// summation orders, over shapes that take every branch: row counts with and without a remainder of 16, column
// counts around the register groups and the 64-column chunks, row lengths inside one panel, across several,
// and too long for the side buffer. For Q8_0 and Q4_0 that is the scalar kernel; for the K-quants the AVX2
// one-column kernels (their scalar kernels keep a plainer float order, vec_dot_test.cpp checks them to a
// tolerance), so there the test needs a CPU that runs AVX2.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "loom/compute/cpu/kernel_path.hpp"
#include "loom/compute/cpu/vec_dot.hpp"
#include "loom/compute/tensor_type.hpp"
#include "quant_problem.hpp"

namespace loom::compute {
namespace {

using testing::make_problem;
using testing::Problem;
using testing::rows_cols_on;
using testing::same_outputs;

bool is_k_quant(TensorType type) {
  return type == TensorType::q4_k || type == TensorType::q5_k || type == TensorType::q6_k;
}

// The path whose kernels spell out `type`'s summation order.
KernelPath order_reference(TensorType type) { return is_k_quant(type) ? KernelPath::avx2 : KernelPath::scalar; }

// Every SIMD path this CPU runs, against the order reference's kernel on the same problem, bit for bit.
void expect_reference_bits(TensorType type, std::int64_t n, int rows, int cols, bool random_bits, std::size_t out_stride) {
  const Problem p = make_problem(type, n, rows, cols, random_bits, static_cast<unsigned>(n * 131 + rows * 7 + cols));
  const std::vector<float> want = rows_cols_on(type, order_reference(type), p, n, rows, cols, out_stride);
  for (KernelPath path : {KernelPath::avx2, KernelPath::avx512}) {
    if (!kernel_path_supported(path)) continue;
    ASSERT_TRUE(same_outputs(rows_cols_on(type, path, p, n, rows, cols, out_stride), want, rows, cols, out_stride))
        << name(type) << " on " << name(path) << ": n=" << n << " rows=" << rows << " cols=" << cols
        << (random_bits ? " (random bits)" : "");
  }
}

class GemmOrders : public ::testing::TestWithParam<TensorType> {
 protected:
  void SetUp() override {
    if (!kernel_path_supported(order_reference(GetParam()))) GTEST_SKIP() << "this CPU runs no AVX2";
  }
};

TEST_P(GemmOrders, EveryShapeGivesTheReferenceBits) {
  const TensorType type = GetParam();
  // Q8_0/Q4_0: one panel of 24 blocks, a second one, several. K-quants: panels of two superblocks, so half
  // a panel, one, one and a half, four.
  const std::vector<std::int64_t> lengths = is_k_quant(type) ? std::vector<std::int64_t>{256, 512, 768, 2048}
                                                             : std::vector<std::int64_t>{32, 64, 768, 800, 2048};
  // Around each type's first panel column count (4; Q4_K 2; Q5_K and Q6_K 12) and its register groups.
  const std::vector<int> column_counts =
      is_k_quant(type) ? std::vector<int>{2, 3, 5, 6, 11, 12, 13, 23} : std::vector<int>{4, 5, 6, 7, 13};
  for (std::int64_t n : lengths) {
    for (int rows : {16, 21, 48}) {  // 48: a tile of two panels and one of one (K-quants)
      for (int cols : column_counts) {
        expect_reference_bits(type, n, rows, cols, (rows + cols) % 2 == 0, static_cast<std::size_t>(rows));
      }
    }
  }
}

TEST_P(GemmOrders, ManyColumnsAndPaddedOutputs) {
  const TensorType type = GetParam();
  // 64-column chunks and their remainder, and an output stride wider than the rows.
  expect_reference_bits(type, 768, 32, 64, false, 32);
  expect_reference_bits(type, 768, 16, 70, true, 16);
  expect_reference_bits(type, 2048, 35, 130, false, 40);
  // Side data of few columns per chunk (long rows), and rows too long for it (the narrow kernels).
  if (type == TensorType::q4_k) {  // 20 bytes of side data a superblock
    expect_reference_bits(type, 1300 * 256, 16, 9, true, 16);
    expect_reference_bits(type, 1700 * 256, 16, 5, false, 16);
  } else if (is_k_quant(type)) {  // 1,044 bytes a superblock (the activations widened to int16)
    expect_reference_bits(type, 24 * 256, 16, 17, true, 16);
    expect_reference_bits(type, 40 * 256, 16, 17, false, 16);
  } else {
    expect_reference_bits(type, 1500 * 32, 16, 9, true, 16);
    expect_reference_bits(type, 2100 * 32, 16, 5, false, 16);
  }
}

INSTANTIATE_TEST_SUITE_P(Gemm, GemmOrders,
                         ::testing::Values(TensorType::q8_0, TensorType::q4_0, TensorType::q4_k, TensorType::q5_k,
                                           TensorType::q6_k, TensorType::q4_1, TensorType::q5_0, TensorType::q5_1,
                                           TensorType::iq4_nl),
                         [](const ::testing::TestParamInfo<TensorType>& param_info) {
                           return std::string(name(param_info.param));
                         });

}  // namespace
}  // namespace loom::compute

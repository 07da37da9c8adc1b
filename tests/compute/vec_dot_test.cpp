// vec_dot kernels on random data: the scalar path against dequantize-then-dot in double, every SIMD path
// against the scalar one, and the batched forms against single dots.
#include "loom/compute/cpu/vec_dot.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "loom/compute/cpu/cpu_features.hpp"
#include "loom/compute/cpu/dequantize.hpp"
#include "loom/compute/cpu/kernel_path.hpp"
#include "loom/compute/cpu/quantize.hpp"
#include "loom/compute/model/half.hpp"
#include "loom/compute/model/quant_blocks.hpp"
#include "loom/compute/tensor_type.hpp"
#include "quant_problem.hpp"

namespace loom::compute {
namespace {

using testing::make_problem;
using testing::Problem;

constexpr TensorType kWeightTypes[] = {TensorType::f32,  TensorType::f16,  TensorType::bf16, TensorType::q8_0,
                                       TensorType::q4_0, TensorType::q4_k, TensorType::q5_k, TensorType::q6_k,
                                       TensorType::q4_1, TensorType::q5_0, TensorType::q5_1, TensorType::iq4_nl,
                                       TensorType::q2_k, TensorType::q3_k, TensorType::iq4_xs};

std::vector<std::int64_t> lengths_for(TensorType type) {
  const auto block = static_cast<std::int64_t>(traits(type).block_elements);
  if (block == 1) return {1, 7, 8, 13, 31, 64, 100, 257, 4099};
  return {block, 2 * block, 3 * block, 16 * block};
}

}  // namespace

// Readable parameter names in gtest output (found by argument-dependent lookup, so beside TensorType).
static void PrintTo(TensorType type, std::ostream* os) { *os << name(type); }

namespace {

class VecDotTypes : public ::testing::TestWithParam<TensorType> {};

TEST_P(VecDotTypes, ScalarMatchesDequantizedReference) {
  const TensorType type = GetParam();
  const VecDotKernel kernel = vec_dot_kernel(type, KernelPath::scalar);
  ASSERT_EQ(kernel.path(), KernelPath::scalar);
  for (bool random_bits : {false, true}) {
    for (std::int64_t n : lengths_for(type)) {
      const Problem p = make_problem(type, n, 5, 2, random_bits, static_cast<unsigned>(n) * 7 + random_bits);
      for (int r = 0; r < p.rows; ++r) {
        for (int c = 0; c < p.cols; ++c) {
          const float got = kernel.dot(p.weight_row(r), p.activation_row(c), n);
          ASSERT_NEAR(got, p.reference(r, c), 1e-5 * p.magnitude(r, c) + 1e-12)
              << name(type) << " n=" << n << " row " << r << " col " << c << (random_bits ? " (random bits)" : "");
        }
      }
    }
  }
}

TEST_P(VecDotTypes, SimdPathsMatchScalar) {
  const TensorType type = GetParam();
  int paths_run = 0;
  for (KernelPath path : {KernelPath::avx2, KernelPath::avx512}) {
    if (!kernel_path_supported(path)) continue;
    const VecDotKernel simd = vec_dot_kernel(type, path);
    const VecDotKernel scalar = vec_dot_kernel(type, KernelPath::scalar);
    ASSERT_NE(simd.path(), KernelPath::scalar) << name(type) << " has no SIMD kernel on " << name(path);
    ++paths_run;
    for (bool random_bits : {false, true}) {
      for (std::int64_t n : lengths_for(type)) {
        const int rows = 7, cols = 9;  // odd counts: every column-group remainder
        const Problem p = make_problem(type, n, rows, cols, random_bits, static_cast<unsigned>(n) * 3 + random_bits);
        std::vector<float> got(static_cast<std::size_t>(rows) * cols), want(got.size());
        simd.rows_cols(p.weights.data(), p.row_bytes, rows, p.activations.data(), p.act_row_bytes, cols, n, got.data(),
                       rows);
        scalar.rows_cols(p.weights.data(), p.row_bytes, rows, p.activations.data(), p.act_row_bytes, cols, n,
                         want.data(), rows);
        for (int c = 0; c < cols; ++c) {
          for (int r = 0; r < rows; ++r) {
            const std::size_t at = static_cast<std::size_t>(c) * rows + r;
            ASSERT_NEAR(got[at], want[at], 1e-5 * p.magnitude(r, c) + 1e-12)
                << name(type) << " on " << name(simd.path()) << " n=" << n << " row " << r << " col " << c;
            const float single = simd.dot(p.weight_row(r), p.activation_row(c), n);
            ASSERT_NEAR(single, want[at], 1e-5 * p.magnitude(r, c) + 1e-12);
          }
        }
      }
    }
  }
  if (paths_run == 0) GTEST_SKIP() << "this CPU runs no SIMD path";
}

TEST_P(VecDotTypes, RowsEqualsPerRowDot) {
  const TensorType type = GetParam();
  for (KernelPath path : {KernelPath::scalar, KernelPath::avx2, KernelPath::avx512}) {
    if (!kernel_path_supported(path)) continue;
    const VecDotKernel kernel = vec_dot_kernel(type, path);
    const std::int64_t n =
        4 * static_cast<std::int64_t>(traits(type).block_elements) * (traits(type).block_elements == 1 ? 64 : 1);
    const Problem p = make_problem(type, n, 13, 1, false, 99);
    std::vector<float> out(p.rows + 1, -1.0f);
    kernel.rows(p.weights.data(), p.row_bytes, p.rows, p.activations.data(), n, out.data());
    for (int r = 0; r < p.rows; ++r) {
      // The same row kernel runs either way, so the results are identical, not merely close.
      EXPECT_EQ(out[r], kernel.dot(p.weight_row(r), p.activation_row(0), n))
          << name(type) << " " << name(path) << " row " << r;
    }
    EXPECT_EQ(out[p.rows], -1.0f) << "wrote past n_rows";
    // The convenience functions use the default path.
    std::vector<float> dflt(p.rows);
    vec_dot_rows(type, p.weights.data(), p.row_bytes, p.rows, p.activations.data(), n, dflt.data());
    const VecDotKernel def = vec_dot_kernel(type);
    for (int r = 0; r < p.rows; ++r) {
      EXPECT_EQ(dflt[r], def.dot(p.weight_row(r), p.activation_row(0), n));
      EXPECT_EQ(dflt[r], vec_dot(type, p.weight_row(r), p.activation_row(0), n));
    }
  }
}

TEST_P(VecDotTypes, RowsColsHonoursStrides) {
  const TensorType type = GetParam();
  const std::int64_t n =
      2 * static_cast<std::int64_t>(traits(type).block_elements) * (traits(type).block_elements == 1 ? 32 : 1);
  const Problem p = make_problem(type, n, 6, 5, false, 5);
  const std::size_t stride = 11;  // output columns padded
  for (KernelPath path : {KernelPath::scalar, KernelPath::avx2, KernelPath::avx512}) {
    if (!kernel_path_supported(path)) continue;
    const VecDotKernel kernel = vec_dot_kernel(type, path);
    std::vector<float> out(stride * p.cols, -7.0f);
    kernel.rows_cols(p.weights.data(), p.row_bytes, p.rows, p.activations.data(), p.act_row_bytes, p.cols, n,
                     out.data(), stride);
    for (int c = 0; c < p.cols; ++c) {
      for (std::size_t r = 0; r < stride; ++r) {
        if (r >= static_cast<std::size_t>(p.rows)) {
          EXPECT_EQ(out[c * stride + r], -7.0f) << "wrote into the padding";
          continue;
        }
        EXPECT_NEAR(out[c * stride + r], p.reference(static_cast<int>(r), c),
                    1e-5 * p.magnitude(static_cast<int>(r), c))
            << name(type) << " " << name(path);
      }
    }
    std::vector<float> via_free(stride * p.cols, -7.0f);
    vec_dot_rows_cols(type, p.weights.data(), p.row_bytes, p.rows, p.activations.data(), p.act_row_bytes, p.cols, n,
                      via_free.data(), stride);
    for (std::size_t i = 0; i < via_free.size(); ++i) EXPECT_NEAR(via_free[i], out[i], 1e-5 * (std::fabs(out[i]) + 1));
  }
}

// The AVX-512 kernels differ from the AVX2 ones only in how the exact integer sums are formed (VNNI), so
// they must give the same bits, for one column (decode's order) and for batches of every remainder.
TEST_P(VecDotTypes, Avx512GivesTheAvx2PathsBits) {
  if (!kernel_path_supported(KernelPath::avx512)) {
    GTEST_SKIP() << "this CPU has no AVX-512 F/BW/VL/DQ with VNNI (" << to_string(cpu_features())
                 << "): the AVX-512 kernels cannot run here";
  }
  const TensorType type = GetParam();
  const VecDotKernel wide = vec_dot_kernel(type, KernelPath::avx512);
  const VecDotKernel avx2 = vec_dot_kernel(type, KernelPath::avx2);
  ASSERT_EQ(wide.path(), KernelPath::avx512) << name(type) << " has no AVX-512 kernel";
  for (bool random_bits : {false, true}) {
    for (std::int64_t n : lengths_for(type)) {
      for (int cols : {1, 2, 3, 4, 5, 9}) {
        const int rows = 11;  // tiles of 8 (Q4_0 x one column, AVX-512), 4 and 2 rows with leftovers
        const Problem p = make_problem(type, n, rows, cols, random_bits, static_cast<unsigned>(n * 7 + cols) + random_bits);
        std::vector<float> got(static_cast<std::size_t>(rows) * cols), want(got.size());
        wide.rows_cols(p.weights.data(), p.row_bytes, rows, p.activations.data(), p.act_row_bytes, cols, n, got.data(),
                       rows);
        avx2.rows_cols(p.weights.data(), p.row_bytes, rows, p.activations.data(), p.act_row_bytes, cols, n, want.data(),
                       rows);
        for (std::size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(got[i], want[i]) << name(type) << " n=" << n << " cols=" << cols << " output " << i;
        }
      }
    }
  }
}

// Q4_1/Q5_1 kernels take the min term from the activations' s (an f16 of d * sum(q)), not from the
// dequantized activations: against the plain double dot of the dequantized rows they differ by that
// rounding at most (relative 2^-11 of each block's |m * s|, plus d's), on every path.
class MinTermTypes : public ::testing::TestWithParam<TensorType> {};

TEST_P(MinTermTypes, MatchThePlainDequantizedDot) {
  const TensorType type = GetParam();
  ASSERT_EQ(activation_type(type), TensorType::q8_1) << name(type);
  for (KernelPath path : {KernelPath::scalar, KernelPath::avx2, KernelPath::avx512}) {
    if (!kernel_path_supported(path)) continue;
    const VecDotKernel kernel = vec_dot_kernel(type, path);
    for (std::int64_t n : lengths_for(type)) {
      const Problem p = make_problem(type, n, 9, 3, false, static_cast<unsigned>(n) + 17);
      for (int r = 0; r < p.rows; ++r) {
        for (int c = 0; c < p.cols; ++c) {
          double min_terms = 0;  // sum over blocks of |m * s|
          for (std::int64_t b = 0; b < n / 32; ++b) min_terms += std::fabs(p.w_min[r * n / 32 + b] * p.a_s[c * n / 32 + b]);
          const float got = kernel.dot(p.weight_row(r), p.activation_row(c), n);
          ASSERT_NEAR(got, p.dequantized_dot(r, c), 1e-5 * p.dequantized_magnitude(r, c) + 2e-3 * min_terms)
              << name(type) << " on " << name(path) << " n=" << n << " row " << r << " col " << c;
        }
      }
    }
  }
}

// The 32-value types' SIMD kernels keep the scalar kernels' order (small_blocks.hpp): the same bits on every
// path, for one column and for every column-group and row-tile remainder.
class SmallBlockTypes : public ::testing::TestWithParam<TensorType> {};

TEST_P(SmallBlockTypes, GiveTheScalarBitsOnEveryPath) {
  const TensorType type = GetParam();
  for (KernelPath path : {KernelPath::avx2, KernelPath::avx512}) {
    if (!kernel_path_supported(path)) continue;
    for (bool random_bits : {false, true}) {
      for (std::int64_t n : lengths_for(type)) {
        for (int cols : {1, 2, 3, 4, 5, 9}) {
          const int rows = 13;
          const Problem p = make_problem(type, n, rows, cols, random_bits, static_cast<unsigned>(n * 5 + cols) + random_bits);
          EXPECT_TRUE(testing::same_outputs(testing::rows_cols_on(type, path, p, n, rows, cols, 15),
                                            testing::rows_cols_on(type, KernelPath::scalar, p, n, rows, cols, 15), rows,
                                            cols, 15))
              << name(type) << " on " << name(path) << " n=" << n << " cols=" << cols;
        }
      }
    }
  }
}

// Q2_K, Q3_K and IQ4_XS: the scalar kernels spell out the SIMD kernels' lanes and float order (the
// reference's), so every path gives the same bits, one column or several.
class LowBitKTypes : public ::testing::TestWithParam<TensorType> {};

TEST_P(LowBitKTypes, EveryPathGivesTheScalarBits) {
  const TensorType type = GetParam();
  int paths_run = 0;
  for (KernelPath path : {KernelPath::avx2, KernelPath::avx512}) {
    if (!kernel_path_supported(path)) continue;
    ASSERT_EQ(vec_dot_kernel(type, path).path(), path) << name(type) << " has no " << name(path) << " kernel";
    ++paths_run;
    for (bool random_bits : {false, true}) {
      for (std::int64_t n : lengths_for(type)) {
        for (int cols : {1, 2, 3, 4, 7}) {
          const int rows = 9;
          const Problem p = make_problem(type, n, rows, cols, random_bits, static_cast<unsigned>(n + cols) + random_bits);
          const auto want = testing::rows_cols_on(type, KernelPath::scalar, p, n, rows, cols, rows + 2);
          const auto got = testing::rows_cols_on(type, path, p, n, rows, cols, rows + 2);
          ASSERT_TRUE(testing::same_outputs(got, want, rows, cols, rows + 2))
              << name(type) << " on " << name(path) << " n=" << n << " cols=" << cols;
        }
      }
    }
  }
  if (paths_run == 0) GTEST_SKIP() << "this CPU runs no SIMD path";
}

INSTANTIATE_TEST_SUITE_P(VecDot, LowBitKTypes, ::testing::Values(TensorType::q2_k, TensorType::q3_k, TensorType::iq4_xs),
                         [](const ::testing::TestParamInfo<TensorType>& case_info) {
                           return std::string(name(case_info.param));
                         });

INSTANTIATE_TEST_SUITE_P(VecDot, MinTermTypes, ::testing::Values(TensorType::q4_1, TensorType::q5_1),
                         [](const ::testing::TestParamInfo<TensorType>& case_info) {
                           return std::string(name(case_info.param));
                         });

INSTANTIATE_TEST_SUITE_P(VecDot, SmallBlockTypes,
                         ::testing::Values(TensorType::q4_1, TensorType::q5_0, TensorType::q5_1, TensorType::iq4_nl),
                         [](const ::testing::TestParamInfo<TensorType>& case_info) {
                           return std::string(name(case_info.param));
                         });

INSTANTIATE_TEST_SUITE_P(VecDot, VecDotTypes, ::testing::ValuesIn(kWeightTypes),
                         [](const ::testing::TestParamInfo<TensorType>& case_info) {
                           return std::string(name(case_info.param));
                         });

// Q8_0-activation kernels convert activation scales into a fixed stack buffer in column chunks, and fall
// back to converting inline for rows longer than the buffer (the one-column AVX-512 kernels of Q6_K, Q2_K,
// Q3_K and IQ4_XS to the 256-bit ones); lengths around those limits take every branch.
TEST(VecDot, LongRowsMatchScalarOnEverySimdPath) {
  for (TensorType type : {TensorType::q8_0, TensorType::q4_0, TensorType::q4_k, TensorType::q6_k, TensorType::f16,
                          TensorType::q4_1, TensorType::q5_0, TensorType::q5_1, TensorType::iq4_nl, TensorType::q2_k,
                          TensorType::q3_k, TensorType::iq4_xs}) {
    for (std::int64_t blocks : {1500, 2048, 4096, 4100}) {
      const std::int64_t n = blocks * 32;
      if (n % static_cast<std::int64_t>(traits(type).block_elements) != 0) continue;
      const int rows = 3, cols = 5;
      const Problem p = make_problem(type, n, rows, cols, false, static_cast<unsigned>(blocks));
      std::vector<float> want(rows * cols), got(rows * cols);
      vec_dot_kernel(type, KernelPath::scalar)
          .rows_cols(p.weights.data(), p.row_bytes, rows, p.activations.data(), p.act_row_bytes, cols, n, want.data(),
                     rows);
      for (KernelPath path : {KernelPath::avx2, KernelPath::avx512}) {
        if (!kernel_path_supported(path)) continue;
        vec_dot_kernel(type, path)
            .rows_cols(p.weights.data(), p.row_bytes, rows, p.activations.data(), p.act_row_bytes, cols, n, got.data(),
                       rows);
        for (int c = 0; c < cols; ++c) {
          for (int r = 0; r < rows; ++r) {
            ASSERT_NEAR(got[c * rows + r], want[c * rows + r], 1e-5 * p.magnitude(r, c))
                << name(type) << " on " << name(path) << " blocks=" << blocks << " row " << r << " col " << c;
          }
        }
      }
    }
  }
}

// A row stride of 0 dots the same weight row again for every output row: tiles of 8 rows (the AVX-512
// one-column kernels) must not divide by their (zero) byte size when they place their prefetches.
TEST(VecDot, ZeroRowStrideRepeatsTheRowOnEveryPath) {
  for (TensorType type : kWeightTypes) {
    const std::int64_t n = 512;
    const Problem p = make_problem(type, n, 1, 1, false, 11);
    constexpr int kRows = 17;
    for (KernelPath path : {KernelPath::scalar, KernelPath::avx2, KernelPath::avx512}) {
      if (!kernel_path_supported(path)) {
        std::printf("[ skipped ] %s on %s: not supported by this CPU\n", std::string(name(type)).c_str(), name(path).data());
        continue;
      }
      std::vector<float> one(1), repeated(kRows);
      const VecDotKernel kernel = vec_dot_kernel(type, path);
      kernel.rows_cols(p.weights.data(), p.row_bytes, 1, p.activations.data(), p.act_row_bytes, 1, n, one.data(), 1);
      kernel.rows_cols(p.weights.data(), 0, kRows, p.activations.data(), p.act_row_bytes, 1, n, repeated.data(), kRows);
      for (int r = 0; r < kRows; ++r) {
        ASSERT_EQ(repeated[r], one[0]) << name(type) << " on " << name(path) << " row " << r;
      }
    }
  }
}

TEST(VecDot, ActivationTypes) {
  EXPECT_EQ(activation_type(TensorType::f32), TensorType::f32);
  EXPECT_EQ(activation_type(TensorType::f16), TensorType::f32);
  EXPECT_EQ(activation_type(TensorType::bf16), TensorType::f32);
  EXPECT_EQ(activation_type(TensorType::q8_0), TensorType::q8_0);
  EXPECT_EQ(activation_type(TensorType::q4_0), TensorType::q8_0);
  EXPECT_EQ(activation_type(TensorType::q4_k), TensorType::q8_k);
  EXPECT_EQ(activation_type(TensorType::q5_k), TensorType::q8_k);
  EXPECT_EQ(activation_type(TensorType::q6_k), TensorType::q8_k);
  // The reference's pairings: symmetric 32-value types with Q8_0, those with a min with Q8_1 (its s).
  EXPECT_EQ(activation_type(TensorType::q5_0), TensorType::q8_0);
  EXPECT_EQ(activation_type(TensorType::iq4_nl), TensorType::q8_0);
  EXPECT_EQ(activation_type(TensorType::q4_1), TensorType::q8_1);
  EXPECT_EQ(activation_type(TensorType::q5_1), TensorType::q8_1);
  EXPECT_EQ(activation_type(TensorType::q2_k), TensorType::q8_k);
  EXPECT_EQ(activation_type(TensorType::q3_k), TensorType::q8_k);
  EXPECT_EQ(activation_type(TensorType::iq4_xs), TensorType::q8_k);
  EXPECT_THROW(activation_type(TensorType::q8_k), std::invalid_argument);
  EXPECT_THROW(activation_type(TensorType::q8_1), std::invalid_argument);
  EXPECT_THROW(activation_type(TensorType::i8), std::invalid_argument);
}

TEST(VecDot, RejectsBadArguments) {
  std::vector<std::uint8_t> w(4096), a(4096);
  std::vector<float> out(8);
  EXPECT_THROW(vec_dot(TensorType::q4_0, w.data(), a.data(), 48), std::invalid_argument);
  EXPECT_THROW(vec_dot(TensorType::q6_k, w.data(), a.data(), 128), std::invalid_argument);
  EXPECT_THROW(vec_dot(TensorType::q8_k, w.data(), a.data(), 256), std::invalid_argument);
  EXPECT_THROW(vec_dot(TensorType::i16, w.data(), a.data(), 256), std::invalid_argument);
  EXPECT_THROW(vec_dot(TensorType::iq4_xs, w.data(), a.data(), 128), std::invalid_argument);
  EXPECT_THROW(vec_dot_rows(TensorType::q8_0, w.data(), 34, -1, a.data(), 32, out.data()), std::invalid_argument);
  EXPECT_THROW(VecDotKernel{}.dot(w.data(), a.data(), 32), std::invalid_argument);
  try {
    vec_dot(TensorType::q4_k, w.data(), a.data(), 100);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("q4_K"), std::string::npos) << e.what();
  }
  EXPECT_EQ(vec_dot(TensorType::q4_0, w.data(), a.data(), 0), 0.0f);
}

TEST(VecDot, KernelReportsWhatRuns) {
  const VecDotKernel k = vec_dot_kernel(TensorType::q4_0);
  EXPECT_EQ(k.weight_type(), TensorType::q4_0);
  EXPECT_EQ(k.activation_type(), TensorType::q8_0);
  EXPECT_LE(k.path(), default_kernel_path());
  if (!kernel_path_supported(KernelPath::avx512)) {
    EXPECT_THROW(vec_dot_kernel(TensorType::q4_0, KernelPath::avx512), std::invalid_argument);
  }
}

// Saturation corners of the byte products: |w| = 128 (a Q8_0 weight of -128) against +-127 activations,
// and all-maximum nibbles, where an int16 overflow in the SIMD pairs would show.
TEST(VecDot, ExtremeQuantsDoNotOverflow) {
  for (KernelPath path : {KernelPath::scalar, KernelPath::avx2, KernelPath::avx512}) {
    if (!kernel_path_supported(path)) continue;
    std::vector<BlockQ8_0> w(4), a(4);
    for (int b = 0; b < 4; ++b) {
      w[b].d = float_to_half(1.0f);
      a[b].d = float_to_half(1.0f);
      for (int i = 0; i < 32; ++i) {
        w[b].qs[i] = -128;
        a[b].qs[i] = static_cast<std::int8_t>(i % 2 ? -127 : 127);
      }
      a[b].qs[0] = -127;
    }
    // Per block: 16 * (-128 * -127) + 16 * (-128 * 127) - (-128 * 127) + (-128 * -127) = 2 * 128 * 127.
    EXPECT_EQ(vec_dot_kernel(TensorType::q8_0, path).dot(w.data(), a.data(), 128), 4.0f * 2 * 128 * 127) << name(path);

    std::vector<BlockQ6_K> w6(1);
    BlockQ8_K a6{};
    std::memset(w6[0].ql, 0xFF, sizeof w6[0].ql);
    std::memset(w6[0].qh, 0xFF, sizeof w6[0].qh);  // every q = 63, i.e. 31 after the offset
    for (auto& s : w6[0].scales) s = 127;
    w6[0].d = float_to_half(1.0f);
    a6.d = 1.0f;
    for (auto& q : a6.qs) q = 127;
    for (auto& s : a6.bsums) s = 16 * 127;
    EXPECT_EQ(vec_dot_kernel(TensorType::q6_k, path).dot(w6.data(), &a6, 256), 256.0f * 31 * 127 * 127) << name(path);

    // IQ4_NL's largest level, -127, against -127 activations (AVX2 pairs: 2 * 127 * 127 fits int16 only
    // through the sign trick), and Q5_0's and Q5_1's largest level, 31 (15 and 31 after their offsets).
    std::vector<BlockIQ4_NL> wn(2);
    std::vector<BlockQ8_0> an(2);
    for (int b = 0; b < 2; ++b) {
      wn[b].d = an[b].d = float_to_half(1.0f);
      std::memset(wn[b].qs, 0x00, sizeof wn[b].qs);  // nibble 0: level -127
      for (auto& q : an[b].qs) q = -127;
    }
    EXPECT_EQ(vec_dot_kernel(TensorType::iq4_nl, path).dot(wn.data(), an.data(), 64), 64.0f * 127 * 127) << name(path);
    std::vector<BlockQ5_0> w5(2);
    std::vector<BlockQ8_0> a5(2);
    std::vector<BlockQ5_1> w51(2);
    std::vector<BlockQ8_1> a51(2);
    for (int b = 0; b < 2; ++b) {
      w5[b].d = a5[b].d = w51[b].d = a51[b].d = float_to_half(1.0f);
      w51[b].m = 0;
      a51[b].s = float_to_half(32.0f * 127);
      std::memset(w5[b].qs, 0xFF, sizeof w5[b].qs);
      std::memset(w5[b].qh, 0xFF, sizeof w5[b].qh);
      std::memset(w51[b].qs, 0xFF, sizeof w51[b].qs);
      std::memset(w51[b].qh, 0xFF, sizeof w51[b].qh);
      for (auto& q : a5[b].qs) q = 127;
      for (auto& q : a51[b].qs) q = 127;
    }
    EXPECT_EQ(vec_dot_kernel(TensorType::q5_0, path).dot(w5.data(), a5.data(), 64), 64.0f * 15 * 127) << name(path);
    EXPECT_EQ(vec_dot_kernel(TensorType::q5_1, path).dot(w51.data(), a51.data(), 64), 64.0f * 31 * 127) << name(path);
    // IQ4_XS: every nibble 0 (value -127) with scale -32 against -127 everywhere (a maddubs pair of
    // 2 * 127 * 127 is the largest that fits int16); Q3_K: every q = -4 with scale -32.
    BlockIQ4_XS wx{};
    wx.d = float_to_half(1.0f);  // scales_l, scales_h and qs all 0: scale 0 - 32, value -127
    BlockQ8_K am{};
    am.d = 1.0f;
    for (auto& q : am.qs) q = -127;
    for (auto& s : am.bsums) s = -16 * 127;
    EXPECT_EQ(vec_dot_kernel(TensorType::iq4_xs, path).dot(&wx, &am, 256), 256.0f * -32 * -127 * -127) << name(path);
    BlockQ3_K w3{};
    w3.d = float_to_half(1.0f);  // hmask 0 (q = low - 4), qs 0 (low 0), scales 0 (-32)
    EXPECT_EQ(vec_dot_kernel(TensorType::q3_k, path).dot(&w3, &am, 256), 256.0f * -32 * -4 * -127) << name(path);
    // Q2_K: every q = 3 with scale 15 and min 15.
    BlockQ2_K w2{};
    std::memset(w2.qs, 0xFF, sizeof w2.qs);
    std::memset(w2.scales, 0xFF, sizeof w2.scales);
    w2.d = float_to_half(1.0f);
    w2.dmin = float_to_half(1.0f);
    EXPECT_EQ(vec_dot_kernel(TensorType::q2_k, path).dot(&w2, &am, 256), 256.0f * (15 * 3 - 15) * -127) << name(path);
  }
}

}  // namespace
}  // namespace loom::compute

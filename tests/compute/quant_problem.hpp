// Random weight matrices and activation rows for the dot-product and GEMM tests: `rows` weight rows of
// `n` values in a weight type, `cols` activation rows in activation_type() of it, and both dequantized, so
// that a test can compare a kernel with another path bit for bit or with an exact double-precision dot.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "loom/compute/cpu/dequantize.hpp"
#include "loom/compute/cpu/quantize.hpp"
#include "loom/compute/cpu/vec_dot.hpp"
#include "loom/compute/model/half.hpp"
#include "loom/compute/tensor_type.hpp"

namespace loom::compute::testing {

// A matrix of `rows` rows of `n` values in `type`, plus `cols` activation rows in activation_type(type), and
// their dequantized forms. Weights come either from quantizing Gaussian values or, for the quantized types,
// from random bits (so every bit pattern, -128 in Q8_0 included, gets exercised) with sane scales.
struct Problem {
  TensorType type;
  std::int64_t n;
  int rows, cols;
  std::size_t row_bytes, act_row_bytes;
  std::vector<std::uint8_t> weights, activations;
  std::vector<float> w, a;  // dequantized
  // Types whose activations are Q8_1 (Q4_1, Q5_1): each weight block's min m ([row][block]) and each
  // activation block's s = d * sum(q) ([column][block]), which the kernels use for the min term in place of
  // m times the dequantized activations' sum (s is f16, so the two differ by its rounding).
  std::vector<float> w_min, a_s;

  const std::uint8_t* weight_row(int r) const { return weights.data() + r * row_bytes; }
  const std::uint8_t* activation_row(int c) const { return activations.data() + c * act_row_bytes; }

  // Exact dot of the dequantized rows, and the scale errors are measured against: sum |w| |a|. For Q8_1
  // activations, the exact value of what the kernels compute: (w - m) . a + sum over blocks of m * s.
  double reference(int r, int c) const {
    double s = 0;
    if (w_min.empty()) {
      for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(w[r * n + i]) * a[c * n + i];
      return s;
    }
    for (std::int64_t i = 0; i < n; ++i) s += (static_cast<double>(w[r * n + i]) - min_of(r, i)) * a[c * n + i];
    for (std::int64_t b = 0; b < n / 32; ++b) s += static_cast<double>(w_min[r * n / 32 + b]) * a_s[c * n / 32 + b];
    return s;
  }
  double magnitude(int r, int c) const {
    double s = 0;
    if (w_min.empty()) {
      for (std::int64_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(w[r * n + i]) * a[c * n + i]);
      return s;
    }
    for (std::int64_t i = 0; i < n; ++i) s += std::fabs((static_cast<double>(w[r * n + i]) - min_of(r, i)) * a[c * n + i]);
    for (std::int64_t b = 0; b < n / 32; ++b) s += std::fabs(static_cast<double>(w_min[r * n / 32 + b]) * a_s[c * n / 32 + b]);
    return s;
  }
  // The plain dot of the dequantized rows (reference() without Q8_1's s), and its magnitude.
  double dequantized_dot(int r, int c) const {
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(w[r * n + i]) * a[c * n + i];
    return s;
  }
  double dequantized_magnitude(int r, int c) const {
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(w[r * n + i]) * a[c * n + i]);
    return s;
  }

 private:
  double min_of(int r, std::int64_t i) const { return w_min[r * n / 32 + i / 32]; }
};

inline void randomize_scales(TensorType type, std::uint8_t* data, std::size_t n_blocks, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-0.02f, 0.02f);
  const auto& t = traits(type);
  for (std::size_t b = 0; b < n_blocks; ++b) {
    std::uint8_t* blk = data + b * t.block_bytes;
    const std::uint16_t d = float_to_half(u(rng)), dmin = float_to_half(std::fabs(u(rng)));
    switch (type) {
      case TensorType::q8_0:
      case TensorType::q4_0:
      case TensorType::q5_0:
      case TensorType::iq4_nl:
        std::memcpy(blk, &d, 2);
        break;
      case TensorType::q4_1:
      case TensorType::q5_1: {
        const std::uint16_t m = float_to_half(u(rng) * 8.0f);  // about the weights' range (d * 15 or 31)
        std::memcpy(blk, &d, 2);
        std::memcpy(blk + 2, &m, 2);
        break;
      }
      case TensorType::q4_k:
      case TensorType::q5_k:
        std::memcpy(blk, &d, 2);
        std::memcpy(blk + 2, &dmin, 2);
        break;
      case TensorType::q6_k:
        std::memcpy(blk + 208, &d, 2);
        break;
      case TensorType::q2_k:
        std::memcpy(blk + 80, &d, 2);
        std::memcpy(blk + 82, &dmin, 2);
        break;
      case TensorType::q3_k:
        std::memcpy(blk + 108, &d, 2);
        break;
      case TensorType::iq4_xs:
        std::memcpy(blk, &d, 2);
        break;
      default:
        break;
    }
  }
}

inline Problem make_problem(TensorType type, std::int64_t n, int rows, int cols, bool random_bits, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  Problem p{type, n, rows, cols, *tensor_bytes(type, n), *tensor_bytes(activation_type(type), n), {}, {}, {}, {}, {}, {}};
  p.weights.resize(p.row_bytes * rows);
  p.activations.resize(p.act_row_bytes * cols);
  std::vector<float> x(n);
  const bool quantized = traits(type).block_elements > 1;
  for (int r = 0; r < rows; ++r) {
    if (random_bits && quantized) {
      std::uniform_int_distribution<int> byte(0, 255);
      for (std::size_t i = 0; i < p.row_bytes; ++i)
        p.weights[r * p.row_bytes + i] = static_cast<std::uint8_t>(byte(rng));
      randomize_scales(type, p.weights.data() + r * p.row_bytes,
                       static_cast<std::size_t>(n) / traits(type).block_elements, rng);
    } else {
      for (auto& v : x) v = gauss(rng) * 0.05f + (r % 3 == 0 ? 0.01f : 0.0f);  // some rows off-centre
      quantize_row(type, x.data(), p.weights.data() + r * p.row_bytes, n);
    }
  }
  for (int c = 0; c < cols; ++c) {
    for (auto& v : x) v = gauss(rng);
    quantize_row(activation_type(type), x.data(), p.activations.data() + c * p.act_row_bytes, n);
  }
  p.w.resize(n * rows);
  p.a.resize(n * cols);
  for (int r = 0; r < rows; ++r) dequantize_row(type, p.weight_row(r), p.w.data() + r * n, n);
  for (int c = 0; c < cols; ++c) dequantize_row(activation_type(type), p.activation_row(c), p.a.data() + c * n, n);
  if (activation_type(type) == TensorType::q8_1) {
    // m at byte 2 of a Q4_1/Q5_1 block, s at byte 2 of a Q8_1 block (quant_blocks.hpp).
    const auto half_at = [](const std::uint8_t* block) {
      std::uint16_t h;
      std::memcpy(&h, block + 2, 2);
      return half_to_float(h);
    };
    const std::int64_t nb = n / 32;
    for (int r = 0; r < rows; ++r) {
      for (std::int64_t b = 0; b < nb; ++b) p.w_min.push_back(half_at(p.weight_row(r) + b * traits(type).block_bytes));
    }
    for (int c = 0; c < cols; ++c) {
      for (std::int64_t b = 0; b < nb; ++b) p.a_s.push_back(half_at(p.activation_row(c) + b * 36));
    }
  }
  return p;
}

// The problem's product on `path`: `cols` output columns `out_stride` floats apart, the padding past `rows`
// left at -3 (a kernel must not write there).
inline std::vector<float> rows_cols_on(TensorType type, KernelPath path, const Problem& p, std::int64_t n, int rows,
                                       int cols, std::size_t out_stride) {
  std::vector<float> out(out_stride * static_cast<std::size_t>(cols), -3.0f);
  vec_dot_kernel(type, path)
      .rows_cols(p.weights.data(), p.row_bytes, rows, p.activations.data(), p.act_row_bytes, cols, n, out.data(),
                 out_stride);
  return out;
}

// Every output, padding included, equal bit for bit; else the first that differs.
inline ::testing::AssertionResult same_outputs(const std::vector<float>& got, const std::vector<float>& want, int rows,
                                               int cols, std::size_t out_stride) {
  for (int c = 0; c < cols; ++c) {
    for (std::size_t r = 0; r < out_stride; ++r) {
      const std::size_t at = static_cast<std::size_t>(c) * out_stride + r;
      if (!(got[at] == want[at])) {
        return ::testing::AssertionFailure() << "row " << r << " column " << c
                                             << (r >= static_cast<std::size_t>(rows) ? " (padding)" : "") << ": "
                                             << got[at] << " where " << want[at] << " was expected";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace loom::compute::testing

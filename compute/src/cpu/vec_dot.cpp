#include "loom/compute/cpu/vec_dot.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "loom/compute/model/half.hpp"
#include "loom/compute/model/quant_blocks.hpp"
#include "small_blocks.hpp"
#include "vec_dot_kernels.hpp"

namespace loom::compute {
namespace detail {
namespace {

// Scalar kernels: the portable fallback and the reference the SIMD paths are tested against. Quantized
// blocks are summed in exact integer arithmetic and scaled once per block, the same association the SIMD
// kernels use, so paths differ only in the order of the float additions.

// F32: the reference's two 16-lane orders (vec_dot.hpp), lane by lane. Sum of 16 lanes as its tree:
// lanes l and l + 8, then those four apart, then (t0 + t2) + (t1 + t3).
float sum_16_lanes(const float (&x)[16]) {
  float t[8];
  for (int i = 0; i < 8; ++i) t[i] = x[8 + i] + x[i];
  const float t0 = t[4] + t[0], t1 = t[5] + t[1], t2 = t[6] + t[2], t3 = t[7] + t[3];
  return (t0 + t2) + (t1 + t3);
}

// One activation row: four 16-lane accumulators over 64-element steps, folded (a0 + a2) + (a1 + a3), then
// the leftovers one by one, each product rounded before the add.
float dot_f32_single(const float* w, const float* a, std::int64_t n) {
  float acc[4][16] = {};
  const std::int64_t whole = n / 64 * 64;
  for (std::int64_t i = 0; i < whole; ++i) acc[(i / 16) % 4][i % 16] = std::fma(w[i], a[i], acc[(i / 16) % 4][i % 16]);
  float x[16];
  for (int l = 0; l < 16; ++l) x[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  float sum = sum_16_lanes(x);
  for (std::int64_t i = whole; i < n; ++i) {
    const float product = w[i] * a[i];
    sum += product;
  }
  return sum;
}

// A batch of activation rows (n a multiple of 16): one 16-lane accumulator per output.
float dot_f32_batch(const float* w, const float* a, std::int64_t n) {
  float acc[16] = {};
  for (std::int64_t i = 0; i < n; ++i) acc[i % 16] = std::fma(w[i], a[i], acc[i % 16]);
  return sum_16_lanes(acc);
}

void f32_rows_cols(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows, const std::byte* activation_rows,
                   std::size_t activation_row_bytes, int n_cols, std::int64_t n, float* out, std::size_t out_col_stride) {
  const bool batch = n_cols > 1 && n % 16 == 0;
  for (int c = 0; c < n_cols; ++c) {
    const auto* a = reinterpret_cast<const float*>(activation_rows + static_cast<std::size_t>(c) * activation_row_bytes);
    for (int r = 0; r < n_rows; ++r) {
      const auto* w = reinterpret_cast<const float*>(weight_rows + static_cast<std::size_t>(r) * weight_row_bytes);
      out[static_cast<std::size_t>(c) * out_col_stride + static_cast<std::size_t>(r)] =
          batch ? dot_f32_batch(w, a, n) : dot_f32_single(w, a, n);
    }
  }
}

// f16 through a table of all 65536 values (256 KiB, built on first use): the branches of half_to_float()
// keep the compiler from vectorizing, and a table load is several times faster than the bit manipulation.
const float* f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (std::uint32_t h = 0; h < 65536; ++h) t[h] = half_to_float(static_cast<std::uint16_t>(h));
    return t;
  }();
  return table.data();
}

struct F16ToFloat {
  const float* table = f16_table();
  float operator()(std::uint16_t h) const { return table[h]; }
};
struct BF16ToFloat {
  float operator()(std::uint16_t h) const { return bf16_to_float(h); }
};

template <class ToFloat>
float dot_16bit(const std::uint16_t* w, const float* a, std::int64_t n) {
  const ToFloat to_float;
  float acc[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += to_float(w[i + k]) * a[i + k];
  }
  for (; i < n; ++i) acc[0] += to_float(w[i]) * a[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Q8_0 in the SIMD kernels' order (the reference's): eight float lanes, lane k of a block taking the exact
// integer dot of its values 4k..4k+3 times the two scales in one fused multiply-add, and the lanes summed as
// (l0+l4 + l2+l6) + (l1+l5 + l3+l7). So every path gives the same bits.
float dot_q8_0(const BlockQ8_0* w, const BlockQ8_0* a, std::int64_t nb) {
  float acc[8] = {};
  for (std::int64_t b = 0; b < nb; ++b) {
    const float d = half_to_float(w[b].d) * half_to_float(a[b].d);
    for (int k = 0; k < 8; ++k) {
      int lane = 0;
      for (int i = 4 * k; i < 4 * k + 4; ++i) lane += w[b].qs[i] * a[b].qs[i];
      acc[k] = std::fma(d, static_cast<float>(lane), acc[k]);
    }
  }
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// Q4_0 in the reference's order (that of its repacked Q4_0 kernels), which the SIMD kernels keep: one float
// accumulator, per block the whole 32-product integer dot times the two scales in one fused multiply-add.
float dot_q4_0(const BlockQ4_0* w, const BlockQ8_0* a, std::int64_t nb) {
  float acc = 0.0f;
  for (std::int64_t b = 0; b < nb; ++b) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) {
      sum += ((w[b].qs[i] & 0x0F) - 8) * a[b].qs[i];
      sum += ((w[b].qs[i] >> 4) - 8) * a[b].qs[i + 16];
    }
    acc = std::fma(static_cast<float>(sum), half_to_float(w[b].d) * half_to_float(a[b].d), acc);
  }
  return acc;
}

// Q4_K and Q5_K: x = d * scale * q - dmin * min, so a block's dot is d * sum_j scale_j * (q . a)_j minus
// dmin * sum_j min_j * (sum of a over sub-block j), the latter straight from Q8_K's bsums.
template <bool kFifthBit, class Block>
float dot_k_affine(const Block* w, const BlockQ8_K* a, std::int64_t nb) {
  float acc = 0.0f;
  for (std::int64_t b = 0; b < nb; ++b) {
    const Block& block = w[b];
    int scaled = 0, mins = 0;
    for (int j = 0; j < 8; ++j) {
      const KScaleMin sm = k_scale_min(block.scales, j);
      const std::uint8_t* q = block.qs + 32 * (j / 2);
      const std::int8_t* x = a[b].qs + 32 * j;
      const int shift = (j % 2) * 4;
      int sum = 0;
      for (int l = 0; l < 32; ++l) {
        int v = (q[l] >> shift) & 0x0F;
        if constexpr (kFifthBit) v |= ((block.qh[l] >> j) & 1) << 4;
        sum += v * x[l];
      }
      scaled += sm.scale * sum;
      mins += sm.min * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
    }
    acc += a[b].d *
           (half_to_float(block.d) * static_cast<float>(scaled) - half_to_float(block.dmin) * static_cast<float>(mins));
  }
  return acc;
}

float dot_q6_k(const BlockQ6_K* w, const BlockQ8_K* a, std::int64_t nb) {
  float acc = 0.0f;
  for (std::int64_t b = 0; b < nb; ++b) {
    const BlockQ6_K& block = w[b];
    int total = 0;
    for (int half = 0; half < 2; ++half) {
      const std::uint8_t* ql = block.ql + 64 * half;
      const std::uint8_t* qh = block.qh + 32 * half;
      const std::int8_t* x = a[b].qs + 128 * half;
      int sums[8] = {};  // per 16-value sub-block of this half
      // One 16-value sub-block per inner loop (s = sub-block within the half), so each loop vectorizes.
      for (int s = 0; s < 2; ++s) {
        int s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int l = 16 * s; l < 16 * s + 16; ++l) {
          s0 += (((ql[l] & 0x0F) | ((qh[l] & 0x03) << 4)) - 32) * x[l];
          s1 += (((ql[l + 32] & 0x0F) | ((qh[l] & 0x0C) << 2)) - 32) * x[l + 32];
          s2 += (((ql[l] >> 4) | (qh[l] & 0x30)) - 32) * x[l + 64];
          s3 += (((ql[l + 32] >> 4) | ((qh[l] & 0xC0) >> 2)) - 32) * x[l + 96];
        }
        sums[s] = s0;
        sums[s + 2] = s1;
        sums[s + 4] = s2;
        sums[s + 6] = s3;
      }
      for (int s = 0; s < 8; ++s) total += block.scales[8 * half + s] * sums[s];
    }
    acc += half_to_float(block.d) * a[b].d * static_cast<float>(total);
  }
  return acc;
}

// Q2_K, Q3_K and IQ4_XS in the reference's (AVX2) order, which the SIMD kernels keep, so every path gives the
// same bits: eight int32 lanes per superblock, lane k taking, from every 32-value group g of the block, its
// scale times the exact dot of the group's values 4k..4k+3 (k < 4 in the group's first 16 values, k >= 4 in
// its last 16: Q2_K/Q3_K's two sub-blocks); each superblock then adds float(lane) * d_w * d_a into an 8-lane
// float accumulator with one fused multiply-add, Q2_K first adding its mins the same way (lane k: min[2k] *
// bsums[2k] + min[2k + 1] * bsums[2k + 1], times -dmin_w * d_a); the lanes are summed as hsum() does.
float sum_8_lanes(const float (&acc)[8]) {
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// Adds scale * (the dot of 4 values at 4k) to lane k for the 8 quads of a 32-value group.
void add_group(int (&lanes)[8], const int* q, const std::int8_t* a, int scale_lo, int scale_hi) {
  for (int k = 0; k < 8; ++k) {
    int dot = 0;
    for (int i = 4 * k; i < 4 * k + 4; ++i) dot += q[i] * a[i];
    lanes[k] += (k < 4 ? scale_lo : scale_hi) * dot;
  }
}

float dot_q2_k(const BlockQ2_K* w, const BlockQ8_K* a, std::int64_t nb) {
  float acc[8] = {};
  for (std::int64_t b = 0; b < nb; ++b) {
    const BlockQ2_K& block = w[b];
    const float d = a[b].d * half_to_float(block.d);
    const float dmin = -a[b].d * half_to_float(block.dmin);
    for (int k = 0; k < 8; ++k) {
      const int mins = (block.scales[2 * k] >> 4) * a[b].bsums[2 * k] + (block.scales[2 * k + 1] >> 4) * a[b].bsums[2 * k + 1];
      acc[k] = std::fma(dmin, static_cast<float>(mins), acc[k]);
    }
    int lanes[8] = {};
    for (int g = 0; g < 8; ++g) {  // group g = 4 * half + j
      const int half = g / 4, j = g % 4;
      int q[32];
      for (int l = 0; l < 32; ++l) q[l] = (block.qs[32 * half + l] >> (2 * j)) & 3;
      add_group(lanes, q, a[b].qs + 32 * g, block.scales[2 * g] & 0x0F, block.scales[2 * g + 1] & 0x0F);
    }
    for (int k = 0; k < 8; ++k) acc[k] = std::fma(d, static_cast<float>(lanes[k]), acc[k]);
  }
  return sum_8_lanes(acc);
}

float dot_q3_k(const BlockQ3_K* w, const BlockQ8_K* a, std::int64_t nb) {
  float acc[8] = {};
  for (std::int64_t b = 0; b < nb; ++b) {
    const BlockQ3_K& block = w[b];
    const float d = a[b].d * half_to_float(block.d);
    int lanes[8] = {};
    for (int g = 0; g < 8; ++g) {
      const int half = g / 4, j = g % 4;
      int q[32];
      for (int l = 0; l < 32; ++l) {
        q[l] = ((block.qs[32 * half + l] >> (2 * j)) & 3) - (((block.hmask[l] >> g) & 1) ? 0 : 4);
      }
      add_group(lanes, q, a[b].qs + 32 * g, q3_k_scale(block.scales, 2 * g) - 32,
                q3_k_scale(block.scales, 2 * g + 1) - 32);
    }
    for (int k = 0; k < 8; ++k) acc[k] = std::fma(d, static_cast<float>(lanes[k]), acc[k]);
  }
  return sum_8_lanes(acc);
}

float dot_iq4_xs(const BlockIQ4_XS* w, const BlockQ8_K* a, std::int64_t nb) {
  float acc[8] = {};
  for (std::int64_t b = 0; b < nb; ++b) {
    const BlockIQ4_XS& block = w[b];
    const float d = half_to_float(block.d) * a[b].d;
    int lanes[8] = {};
    for (int s = 0; s < 8; ++s) {
      int q[32];
      for (int l = 0; l < 16; ++l) {
        q[l] = kIQ4NLValues[block.qs[16 * s + l] & 0x0F];
        q[l + 16] = kIQ4NLValues[block.qs[16 * s + l] >> 4];
      }
      const int scale = iq4_xs_scale(block, s) - 32;
      add_group(lanes, q, a[b].qs + 32 * s, scale, scale);
    }
    for (int k = 0; k < 8; ++k) acc[k] = std::fma(d, static_cast<float>(lanes[k]), acc[k]);
  }
  return sum_8_lanes(acc);
}

// Adapts a one-row dot to the table's rows x columns signature. The scalar path gains nothing from reusing
// a weight row across columns, so it simply loops.
template <class W, class A, auto RowDot, std::int64_t kBlock>
void scalar_rows_cols(const std::byte* weight_rows, std::size_t weight_row_bytes, int n_rows,
                      const std::byte* activation_rows, std::size_t activation_row_bytes, int n_cols, std::int64_t n,
                      float* out, std::size_t out_col_stride) {
  for (int c = 0; c < n_cols; ++c) {
    const auto* a = reinterpret_cast<const A*>(activation_rows + static_cast<std::size_t>(c) * activation_row_bytes);
    for (int r = 0; r < n_rows; ++r) {
      const auto* w = reinterpret_cast<const W*>(weight_rows + static_cast<std::size_t>(r) * weight_row_bytes);
      out[static_cast<std::size_t>(c) * out_col_stride + static_cast<std::size_t>(r)] = RowDot(w, a, n / kBlock);
    }
  }
}

constexpr VecDotTable kScalarTable{
    .f32 = f32_rows_cols,
    .f16 = scalar_rows_cols<std::uint16_t, float, dot_16bit<F16ToFloat>, 1>,
    .bf16 = scalar_rows_cols<std::uint16_t, float, dot_16bit<BF16ToFloat>, 1>,
    .q8_0 = scalar_rows_cols<BlockQ8_0, BlockQ8_0, dot_q8_0, 32>,
    .q4_0 = scalar_rows_cols<BlockQ4_0, BlockQ8_0, dot_q4_0, 32>,
    .q4_k = scalar_rows_cols<BlockQ4_K, BlockQ8_K, dot_k_affine<false, BlockQ4_K>, 256>,
    .q5_k = scalar_rows_cols<BlockQ5_K, BlockQ8_K, dot_k_affine<true, BlockQ5_K>, 256>,
    .q6_k = scalar_rows_cols<BlockQ6_K, BlockQ8_K, dot_q6_k, 256>,
    .q4_1 = q4_1_rows_cols_scalar,
    .q5_0 = q5_0_rows_cols_scalar,
    .q5_1 = q5_1_rows_cols_scalar,
    .iq4_nl = iq4_nl_rows_cols_scalar,
    .q2_k = scalar_rows_cols<BlockQ2_K, BlockQ8_K, dot_q2_k, 256>,
    .q3_k = scalar_rows_cols<BlockQ3_K, BlockQ8_K, dot_q3_k, 256>,
    .iq4_xs = scalar_rows_cols<BlockIQ4_XS, BlockQ8_K, dot_iq4_xs, 256>,
};

VecDotFn table_entry(const VecDotTable& table, TensorType type) {
  switch (type) {
    case TensorType::f32:
      return table.f32;
    case TensorType::f16:
      return table.f16;
    case TensorType::bf16:
      return table.bf16;
    case TensorType::q8_0:
      return table.q8_0;
    case TensorType::q4_0:
      return table.q4_0;
    case TensorType::q4_k:
      return table.q4_k;
    case TensorType::q5_k:
      return table.q5_k;
    case TensorType::q6_k:
      return table.q6_k;
    case TensorType::q4_1:
      return table.q4_1;
    case TensorType::q5_0:
      return table.q5_0;
    case TensorType::q5_1:
      return table.q5_1;
    case TensorType::iq4_nl:
      return table.iq4_nl;
    case TensorType::q2_k:
      return table.q2_k;
    case TensorType::q3_k:
      return table.q3_k;
    case TensorType::iq4_xs:
      return table.iq4_xs;
    default:
      return nullptr;
  }
}

std::string type_name(TensorType type) {
  const TensorTypeTraits* t = find_tensor_type(static_cast<std::uint32_t>(type));
  return t ? std::string(t->name) : "id " + std::to_string(static_cast<std::uint32_t>(type));
}

}  // namespace

const VecDotTable& scalar_vec_dot_table() noexcept { return kScalarTable; }

}  // namespace detail

TensorType activation_type(TensorType weight_type) {
  switch (weight_type) {
    case TensorType::f32:
    case TensorType::f16:
    case TensorType::bf16:
      return TensorType::f32;
    case TensorType::q8_0:
    case TensorType::q4_0:
    case TensorType::q5_0:  // the reference's pairings: symmetric types with Q8_0, those with a min with Q8_1
    case TensorType::iq4_nl:
      return TensorType::q8_0;
    case TensorType::q4_1:
    case TensorType::q5_1:
      return TensorType::q8_1;
    case TensorType::q4_k:
    case TensorType::q5_k:
    case TensorType::q6_k:
    case TensorType::q2_k:
    case TensorType::q3_k:
    case TensorType::iq4_xs:  // the reference dots IQ4_XS with Q8_K too (IQ4_NL with Q8_0)
      return TensorType::q8_k;
    default:
      break;
  }
  throw std::invalid_argument("activation_type: no dot-product kernels for weight type " +
                              detail::type_name(weight_type));
}

VecDotKernel vec_dot_kernel(TensorType weight_type, KernelPath path) {
  if (!kernel_path_supported(path)) {
    throw std::invalid_argument("vec_dot_kernel: this CPU cannot run the " + std::string(name(path)) + " path");
  }
  VecDotKernel kernel;
  kernel.weight_type_ = weight_type;
  kernel.activation_type_ = activation_type(weight_type);  // throws for unsupported types
  kernel.block_elements_ = static_cast<std::int64_t>(traits(weight_type).block_elements);
  // Widest implementation at or below the requested path; every type has a scalar kernel.
  struct PathTable {
    KernelPath path;
    const detail::VecDotTable& table;
  };
  for (const PathTable& candidate : {PathTable{KernelPath::avx512, detail::avx512_vec_dot_table()},
                                     PathTable{KernelPath::avx2, detail::avx2_vec_dot_table()}}) {
    if (path < candidate.path) continue;
    if (detail::VecDotFn fn = detail::table_entry(candidate.table, weight_type)) {
      kernel.fn_ = fn;
      kernel.path_ = candidate.path;
      return kernel;
    }
  }
  kernel.fn_ = detail::table_entry(detail::scalar_vec_dot_table(), weight_type);
  kernel.path_ = KernelPath::scalar;
  return kernel;
}

VecDotKernel vec_dot_kernel(TensorType weight_type) { return vec_dot_kernel(weight_type, default_kernel_path()); }

void VecDotKernel::check(std::int64_t n, int n_rows, int n_cols) const {
  if (fn_ == nullptr) throw std::invalid_argument("VecDotKernel: used before vec_dot_kernel() set it up");
  if (n < 0 || n % block_elements_ != 0) {
    throw std::invalid_argument("vec_dot: row length " + std::to_string(n) + " is not a whole number of " +
                                std::to_string(block_elements_) + "-value " + detail::type_name(weight_type_) +
                                " blocks");
  }
  if (n_rows < 0 || n_cols < 0) {
    throw std::invalid_argument("vec_dot: negative count (rows " + std::to_string(n_rows) + ", columns " +
                                std::to_string(n_cols) + ")");
  }
}

float VecDotKernel::dot(const void* weight_row, const void* activation_row, std::int64_t n) const {
  check(n, 1, 1);
  float out = 0.0f;
  fn_(static_cast<const std::byte*>(weight_row), 0, 1, static_cast<const std::byte*>(activation_row), 0, 1, n, &out, 0);
  return out;
}

void VecDotKernel::rows(const void* weight_rows, std::size_t weight_row_bytes, int n_rows, const void* activation_row,
                        std::int64_t n, float* out) const {
  check(n, n_rows, 1);
  fn_(static_cast<const std::byte*>(weight_rows), weight_row_bytes, n_rows,
      static_cast<const std::byte*>(activation_row), 0, 1, n, out, 0);
}

void VecDotKernel::rows_cols(const void* weight_rows, std::size_t weight_row_bytes, int n_rows,
                             const void* activation_rows, std::size_t activation_row_bytes, int n_cols, std::int64_t n,
                             float* out, std::size_t out_col_stride) const {
  check(n, n_rows, n_cols);
  fn_(static_cast<const std::byte*>(weight_rows), weight_row_bytes, n_rows,
      static_cast<const std::byte*>(activation_rows), activation_row_bytes, n_cols, n, out, out_col_stride);
}

float vec_dot(TensorType weight_type, const void* weight_row, const void* activation_row, std::int64_t n) {
  return vec_dot_kernel(weight_type).dot(weight_row, activation_row, n);
}

void vec_dot_rows(TensorType weight_type, const void* weight_rows, std::size_t weight_row_bytes, int n_rows,
                  const void* activation_row, std::int64_t n, float* out) {
  vec_dot_kernel(weight_type).rows(weight_rows, weight_row_bytes, n_rows, activation_row, n, out);
}

void vec_dot_rows_cols(TensorType weight_type, const void* weight_rows, std::size_t weight_row_bytes, int n_rows,
                       const void* activation_rows, std::size_t activation_row_bytes, int n_cols, std::int64_t n,
                       float* out, std::size_t out_col_stride) {
  vec_dot_kernel(weight_type)
      .rows_cols(weight_rows, weight_row_bytes, n_rows, activation_rows, activation_row_bytes, n_cols, n, out,
                 out_col_stride);
}

}  // namespace loom::compute

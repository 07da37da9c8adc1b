// Scalar attention and SwiGLU: the definition of the arithmetic (attention.hpp) that attention_avx2.cpp
// reproduces bit for bit. Lanes and accumulators are spelled out as arrays so that each float operation
// happens in the same order as in the 8-wide kernels.
#include "loom/compute/attention.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "attention_kernels.hpp"
#include "loom/compute/half.hpp"

namespace loom::compute {

float vector_expf(float x) noexcept {
  // exp(x) = 2^n * e^b with n = round(x / ln 2) (by the 1.5 * 2^23 trick) and b = x - n ln 2 (ln 2 in two
  // parts), e^b ~ 1 + b * p(b). For |n| > 126 the scale 2^n is split in two factors to reach the
  // subnormals and infinity without overflowing the exponent field.
  const float shifter = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, shifter);
  const float n = z - shifter;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const std::uint32_t e = std::bit_cast<std::uint32_t>(z) << 23;
  const float k = std::bit_cast<float>(e + std::bit_cast<std::uint32_t>(1.0f));
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, 0x1.ffffecp-1f * b);
  const float magnitude = std::fabs(n);
  if (!(magnitude > 126.0f)) return std::fma(k, j, k);
  const std::uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = std::bit_cast<float>(g + 0x7f000000u);
  if (magnitude > 192.0f) return s1 * s1;
  const float s2 = std::bit_cast<float>(e - g);
  return std::fma(s2, j, s2) * s1;
}

namespace detail {
namespace {

// A stored key or value as float: F16 widened, F32 as is.
float load(std::uint16_t h) { return half_to_float(h); }
float load(float x) { return x; }
float f16(float x) { return half_to_float(float_to_half(x)); }

// One 8-lane register summed as (l0+l4 + l2+l6) + (l1+l5 + l3+l7).
float sum_lanes(const float* lane) {
  const float s0 = lane[0] + lane[4], s1 = lane[1] + lane[5], s2 = lane[2] + lane[6], s3 = lane[3] + lane[7];
  return (s0 + s2) + (s1 + s3);
}

// Four 8-lane accumulators folded as (a0+a2) + (a1+a3), then summed as (c0+c4 + c1+c5) + (c2+c6 + c3+c7).
float sum_four_accumulators(const float (&acc)[4][8]) {
  float c[8];
  for (int l = 0; l < 8; ++l) c[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  const float t0 = c[0] + c[4], t1 = c[1] + c[5], t2 = c[2] + c[6], t3 = c[3] + c[7];
  return (t0 + t1) + (t2 + t3);
}

template <typename T>
float score(const T* key, const float* q, std::int64_t n, bool tiled) {
  if (tiled) {
    float acc[8] = {};
    for (std::int64_t i = 0; i < n; i += 8) {
      for (int l = 0; l < 8; ++l) acc[l] = std::fma(load(key[i + l]), q[i + l], acc[l]);
    }
    return sum_lanes(acc);
  }
  const std::int64_t whole = n / 32 * 32;
  float acc[4][8] = {};
  for (std::int64_t i = 0; i < whole; i += 32) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 8; ++l) acc[j][l] = std::fma(load(key[i + 8 * j + l]), q[i + 8 * j + l], acc[j][l]);
    }
  }
  double sum = sum_four_accumulators(acc);
  for (std::int64_t i = whole; i < n; ++i) sum += static_cast<double>(load(key[i]) * q[i]);
  return static_cast<float>(sum);
}

template <typename T>
float weigh_values(const HeadAttention& h, const float* probabilities, bool tiled, std::int64_t d) {
  const T* v = static_cast<const T*>(h.values) + d;
  PositionRows rows(h);
  if (tiled) {
    float acc[8] = {};
    for (std::int64_t p = 0; p < h.positions; ++p, rows.next()) {
      acc[p % 8] = std::fma(load(v[rows.offset()]), probabilities[p], acc[p % 8]);
    }
    return sum_lanes(acc);
  }
  double sum = 0.0;
  for (std::int64_t p = 0; p < h.positions; ++p, rows.next()) {
    sum += static_cast<double>(load(v[rows.offset()]) * probabilities[p]);
  }
  return static_cast<float>(sum);
}

// F16 storage rounds the query and the probabilities to F16 (the reference's F16 dot products); F32 does not.
template <typename T>
void attend_scalar(const HeadAttention& h, const AttentionPlan& plan) {
  constexpr bool half_cache = std::is_same_v<T, std::uint16_t>;
  const T* keys = static_cast<const T*>(h.keys);
  float* scores = h.scores;
  float* q = h.scores + plan.padded_positions;
  for (std::int64_t d = 0; d < h.head_dim; ++d) q[d] = half_cache ? f16(h.query[d]) : h.query[d];

  float max_score = -INFINITY;
  PositionRows rows(h);
  for (std::int64_t p = 0; p < h.positions; ++p, rows.next()) {
    scores[p] = score(keys + rows.offset(), q, h.head_dim, plan.tiled_scores) * h.scale;
    max_score = std::max(max_score, scores[p]);
  }
  double sum = 0.0;
  for (std::int64_t p0 = 0; p0 < plan.padded_positions; p0 += 8) {
    float lane[8];
    for (int l = 0; l < 8; ++l) {
      const std::int64_t p = p0 + l;
      lane[l] = p < h.positions ? vector_expf(scores[p] - max_score) : 0.0f;
      scores[p] = lane[l];
    }
    sum += static_cast<double>(sum_lanes(lane));
  }
  const auto inverse = static_cast<float>(1.0 / sum);
  for (std::int64_t p = 0; p < h.positions; ++p) scores[p] = half_cache ? f16(scores[p] * inverse) : scores[p] * inverse;

  for (std::int64_t d = 0; d < h.head_dim; ++d) h.out[d] = weigh_values<T>(h, scores, plan.tiled_values, d);
}

void swiglu_scalar(float* gate, const float* up, std::int64_t n) {
  const std::int64_t whole = n / 8 * 8;
  for (std::int64_t i = 0; i < whole; ++i) gate[i] = gate[i] / (1.0f + vector_expf(0.0f - gate[i])) * up[i];
  for (std::int64_t i = whole; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace

float weigh_values_one_dim(const HeadAttention& h, const float* probabilities, bool tiled, std::int64_t d) {
  return h.kv_type == TensorType::f32 ? weigh_values<float>(h, probabilities, tiled, d)
                                      : weigh_values<std::uint16_t>(h, probabilities, tiled, d);
}

AttentionPlan plan_attention(const HeadAttention& h) {
  if (h.positions < 1 || h.head_dim < 1 || h.stride < static_cast<std::size_t>(h.head_dim)) {
    throw std::invalid_argument("attend: needs at least one position, a positive head size and a stride >= it");
  }
  if (h.kv_type != TensorType::f16 && h.kv_type != TensorType::f32) {
    throw std::invalid_argument("attend: keys and values must be f16 or f32, not " + std::string(name(h.kv_type)));
  }
  if (h.block_table != nullptr && h.block_size < 1) throw std::invalid_argument("attend: a block table needs a block size >= 1");
  AttentionPlan plan;
  plan.padded_positions = (h.positions + 7) / 8 * 8;
  // The batch kernel needs whole 8-lane steps along the dot and rows in fours; otherwise the reference falls
  // back to its one-query kernel, and so do we.
  plan.tiled_scores = h.order == SumOrder::tiled && h.head_dim % 8 == 0;
  plan.tiled_values = h.order == SumOrder::tiled && h.head_dim % 4 == 0;
  plan.f32_cache = h.kv_type == TensorType::f32;
  return plan;
}

}  // namespace detail

void attend(const HeadAttention& head, KernelPath path) {
  const detail::AttentionPlan plan = detail::plan_attention(head);
  if (path >= KernelPath::avx2 && kernel_path_supported(KernelPath::avx2)) return detail::attend_avx2(head, plan);
  if (plan.f32_cache) return detail::attend_scalar<float>(head, plan);
  detail::attend_scalar<std::uint16_t>(head, plan);
}

void attend(const HeadAttention& head) { attend(head, default_kernel_path()); }

void swiglu(float* gate, const float* up, std::int64_t n, KernelPath path) {
  if (path >= KernelPath::avx2 && kernel_path_supported(KernelPath::avx2)) return detail::swiglu_avx2(gate, up, n);
  detail::swiglu_scalar(gate, up, n);
}

void swiglu(float* gate, const float* up, std::int64_t n) { swiglu(gate, up, n, default_kernel_path()); }

void store_as_f16(const float* src, std::uint16_t* dst, std::int64_t n, KernelPath path) {
  if (path >= KernelPath::avx2 && kernel_path_supported(KernelPath::avx2)) return detail::store_as_f16_avx2(src, dst, n);
  for (std::int64_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i]);
}

}  // namespace loom::compute

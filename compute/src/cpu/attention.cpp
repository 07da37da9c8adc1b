// Scalar attention and SwiGLU: the definition of the arithmetic (attention.hpp) that attention_avx2.cpp
// reproduces bit for bit. Lanes and accumulators are spelled out as arrays so that each float operation
// happens in the same order as in the vector kernels.
#include "loom/compute/cpu/attention.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "attention_kernels.hpp"
#include "loom/compute/model/half.hpp"

namespace loom::compute {

float vector_expf(float x) noexcept {
  // n = round(x / ln 2) by the 1.5 * 2^23 trick, b = x - n ln 2 (ln 2 in two parts), e^b ~ 1 + p(b) rounded
  // to float, then times 2^n rounded once (exact unless the result is subnormal); |n| > 192 is 0 or inf.
  const float shifter = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, shifter);
  const float n = z - shifter;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  if (!(std::fabs(n) <= 192.0f)) return std::isnan(n) ? n : (n <= 0.0f ? 0.0f : INFINITY);
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, std::fma(0x1.ffffecp-1f, b, 1.0f));
  return static_cast<float>(std::ldexp(static_cast<double>(j), static_cast<int>(n)));  // exact in double
}

float avx2_expf(float x) noexcept {
  // As the reference's AVX2 kernel: k = 2^n from n's bits in z, j = p(b) without the 1, then k + k j in one
  // FMA; beyond |n| > 126, 2^n as s1 * s2 (s1 = 2^127 or 2^-125), and |n| > 192 as s1 * s1 (inf or 0).
  const float shifter = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, shifter);
  const float n = z - shifter;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  if (std::isnan(n)) return n;
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, 0x1.ffffecp-1f * b);
  const auto e = std::bit_cast<std::uint32_t>(z) << 23;
  if (std::fabs(n) <= 126.0f) {
    const float k = std::bit_cast<float>(e + std::bit_cast<std::uint32_t>(1.0f));
    return std::fma(k, j, k);
  }
  const std::uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = std::bit_cast<float>(g + 0x7f000000u);
  if (std::fabs(n) > 192.0f) return s1 * s1;
  const float s2 = std::bit_cast<float>(e - g);
  return std::fma(s2, j, s2) * s1;
}

namespace detail {
namespace {

// A stored key or value as float: F16 widened, F32 as is.
float load(std::uint16_t h) { return half_to_float(h); }
float load(float x) { return x; }
float f16(float x) { return half_to_float(float_to_half(x)); }

// Sixteen lanes summed as an AVX-512 horizontal add does: lanes l and l + 8, then those four apart, then
// (t0 + t2) + (t1 + t3).
float sum_16_lanes(const float* x) {
  float t[8];
  for (int i = 0; i < 8; ++i) t[i] = x[8 + i] + x[i];
  const float t0 = t[4] + t[0], t1 = t[5] + t[1], t2 = t[6] + t[2], t3 = t[7] + t[3];
  return (t0 + t2) + (t1 + t3);
}

// Eight lanes summed as the reference's AVX2 tiled kernel (and its softmax) does: lanes l and l + 4, then
// (t0 + t2) + (t1 + t3).
float sum_8_lanes(const float* x) {
  float t[4];
  for (int i = 0; i < 4; ++i) t[i] = x[4 + i] + x[i];
  return (t[0] + t[2]) + (t[1] + t[3]);
}

// Eight lanes summed as its AVX2 vector dot does, by two horizontal adds: (t0 + t1) + (t2 + t3).
float sum_8_lanes_hadd(const float* x) {
  float t[4];
  for (int i = 0; i < 4; ++i) t[i] = x[i] + x[4 + i];
  return (t[0] + t[1]) + (t[2] + t[3]);
}

// The vector_dot order (attention.hpp) of term(0..n-1): four Lanes-lane accumulators over the first
// n - n % (4 Lanes) terms, folded and summed, then the rest in double.
// Terms before `from` (a multiple of 64: a sliding window's base) are zero and not asked for.
template <int Lanes, class Term>
float vector_dot(Term term, std::int64_t n, std::int64_t from = 0) {
  const std::int64_t whole = n / (4 * Lanes) * (4 * Lanes);
  float acc[4][Lanes] = {};
  for (std::int64_t i = from; i < whole; ++i) {
    const auto [a, b] = term(i);
    acc[(i / Lanes) % 4][i % Lanes] = std::fma(a, b, acc[(i / Lanes) % 4][i % Lanes]);
  }
  float x[Lanes];
  for (int l = 0; l < Lanes; ++l) x[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  double sum = Lanes == 16 ? sum_16_lanes(x) : sum_8_lanes_hadd(x);
  for (std::int64_t i = std::max(whole, from); i < n; ++i) {
    const auto [a, b] = term(i);
    sum += static_cast<double>(a * b);
  }
  return static_cast<float>(sum);
}

// The tiled order: one Lanes-lane accumulator (n a multiple of Lanes for the reference; here any n).
template <int Lanes, class Term>
float tiled_dot(Term term, std::int64_t n, std::int64_t from = 0) {
  float acc[Lanes] = {};
  for (std::int64_t i = from; i < n; ++i) {
    const auto [a, b] = term(i);
    acc[i % Lanes] = std::fma(a, b, acc[i % Lanes]);
  }
  return Lanes == 16 ? sum_16_lanes(acc) : sum_8_lanes(acc);
}

template <class Term>
float dot(const AttentionPlan& plan, bool tiled, Term term, std::int64_t n, std::int64_t from = 0) {
  if (plan.lanes == 8) return tiled ? tiled_dot<8>(term, n, from) : vector_dot<8>(term, n, from);
  return tiled ? tiled_dot<16>(term, n, from) : vector_dot<16>(term, n, from);
}

struct Pair {
  float a, b;
};

template <typename T>
float score(const AttentionPlan& plan, const T* key, const float* q, std::int64_t n) {
  const auto term = [&](std::int64_t i) { return Pair{load(key[i]), q[i]}; };
  return dot(plan, plan.tiled_scores, term, n);
}

// Output dimension d; positions from `positions` to the span, and before the window's first, have
// probability 0 and add nothing (those before are not read).
template <typename T>
float weigh_values(const HeadAttention& h, const AttentionPlan& plan, const float* probabilities,
                   const std::uint64_t* value_offsets, std::int64_t d) {
  const T* v = static_cast<const T*>(h.values) + static_cast<std::size_t>(d) * value_dim_stride(h);
  const std::int64_t first = window_start(h, h.positions);
  const auto term = [&](std::int64_t p) {
    return p < h.positions && p >= first ? Pair{load(v[value_offsets[p]]), probabilities[p]} : Pair{0.0f, 0.0f};
  };
  return dot(plan, plan.tiled_values, term, plan.span, plan.base);
}

// Each position's key offset, found once through the block table and kept for the scores.
std::uint64_t* find_key_offsets(const HeadAttention& h, float* q) {
  auto* offsets = reinterpret_cast<std::uint64_t*>(q + h.head_dim);
  const std::int64_t first = window_start(h, h.positions);
  PositionRows rows(h, h.stride, first);
  for (std::int64_t p = first; p < h.positions; ++p, rows.next()) offsets[p] = rows.offset();
  return offsets;
}

// F16 storage rounds the query and the probabilities to F16 (the reference's F16 dot products); F32 does not.
template <typename T>
void attend_scalar(const HeadAttention& h, const AttentionPlan& plan) {
  constexpr bool half_cache = std::is_same_v<T, std::uint16_t>;
  const T* keys = static_cast<const T*>(h.keys);
  float* scores = h.scores;
  float* q = h.scores + plan.padded_scores;
  for (std::int64_t d = 0; d < h.head_dim; ++d) q[d] = half_cache ? f16(h.query[d]) : h.query[d];
  std::uint64_t* offsets = find_key_offsets(h, q);

  const std::int64_t first = window_start(h, h.positions);
  float max_score = -INFINITY;
  for (std::int64_t p = plan.base; p < first; ++p) scores[p] = -INFINITY;  // outside the window: masked
  for (std::int64_t p = first; p < h.positions; ++p) {
    scores[p] = soft_cap(score(plan, keys + offsets[p], q, h.head_dim) * h.scale, h.softcap);
    max_score = std::max(max_score, scores[p]);
  }
  for (std::int64_t p = h.positions; p < plan.padded_scores; ++p) scores[p] = -INFINITY;
  double sum = 0.0;
  std::int64_t p0 = plan.base;
  const std::int64_t lanes = plan.lanes;
  for (; p0 + lanes <= plan.span && p0 < h.positions; p0 += lanes) {
    float lane[16] = {};
    for (int l = 0; l < lanes; ++l) {
      const float x = scores[p0 + l] - max_score;
      scores[p0 + l] = lane[l] = lanes == 16 ? vector_expf(x) : avx2_expf(x);
    }
    sum += static_cast<double>(lanes == 16 ? sum_16_lanes(lane) : sum_8_lanes(lane));
  }
  for (std::int64_t p = p0; p < h.positions; ++p) sum += static_cast<double>(scores[p] = std::exp(scores[p] - max_score));
  const auto inverse = static_cast<float>(1.0 / sum);
  for (std::int64_t p = plan.base; p < h.positions; ++p) scores[p] = half_cache ? f16(scores[p] * inverse) : scores[p] * inverse;

  if (h.values_transposed) find_value_offsets(h, offsets, first);  // rows: the keys' offsets
  for (std::int64_t d = 0; d < h.head_dim; ++d) h.out[d] = weigh_values<T>(h, plan, scores, offsets, d);
}

void swiglu_scalar(float* gate, const float* up, std::int64_t n, LaneWidth lanes) {
  const bool avx2 = lanes == LaneWidth::avx2;
  const std::int64_t whole = avx2 ? n / 8 * 8 : n / 16 * 16;
  for (std::int64_t i = 0; i < whole; ++i) {
    const float e = avx2 ? avx2_expf(0.0f - gate[i]) : vector_expf(0.0f - gate[i]);
    gate[i] = gate[i] / (1.0f + e) * up[i];
  }
  for (std::int64_t i = whole; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace

void find_value_offsets(const HeadAttention& h, std::uint64_t* offsets, std::int64_t first) {
  PositionRows rows(h, h.values_transposed ? 1 : h.stride, first);
  for (std::int64_t p = first; p < h.positions; ++p, rows.next()) offsets[p] = rows.offset();
}

float weigh_values_one_dim(const HeadAttention& h, const AttentionPlan& plan, const float* probabilities,
                           const std::uint64_t* value_offsets, std::int64_t d) {
  return h.kv_type == TensorType::f32 ? weigh_values<float>(h, plan, probabilities, value_offsets, d)
                                      : weigh_values<std::uint16_t>(h, plan, probabilities, value_offsets, d);
}

AttentionPlan plan_attention(const HeadAttention& h) {
  if (h.positions < 1 || h.head_dim < 1 || h.stride < static_cast<std::size_t>(h.head_dim)) {
    throw std::invalid_argument("attend: needs at least one position, a positive head size and a stride >= it");
  }
  if (h.queries < 1) throw std::invalid_argument("attend: needs at least one query");
  const std::int64_t last = h.positions + h.queries - 1;
  if (h.span != 0 && h.span < last) {
    throw std::invalid_argument("attend: a span of " + std::to_string(h.span) + " cells is shorter than the " +
                                std::to_string(last) + " positions");
  }
  if (h.kv_type != TensorType::f16 && h.kv_type != TensorType::f32) {
    throw std::invalid_argument("attend: keys and values must be f16 or f32, not " + std::string(name(h.kv_type)));
  }
  if (h.block_table != nullptr && h.block_size < 1) throw std::invalid_argument("attend: a block table needs a block size >= 1");
  if (h.values_transposed && h.block_table == nullptr) throw std::invalid_argument("attend: transposed values need a block table");
  if (h.query_heads < 1) throw std::invalid_argument("attend: needs at least one query head");
  AttentionPlan plan;
  plan.span = h.span != 0 ? h.span : last;
  plan.last = last;
  plan.padded_scores = (std::max(plan.span, last) + 15) / 16 * 16;
  // The batch kernel needs whole 16-lane steps along the dot and rows in fours (the keys' rows are the span's
  // cells, the values' the head's dimensions); otherwise the reference falls back to its one-query kernel,
  // and so do we.
  plan.lanes = h.lanes == LaneWidth::avx2 ? 8 : 16;
  plan.tiled_scores = h.order == SumOrder::tiled && h.head_dim % plan.lanes == 0 && plan.span % 4 == 0;
  plan.tiled_values = h.order == SumOrder::tiled && plan.span % plan.lanes == 0 && h.head_dim % 4 == 0;
  plan.f32_cache = h.kv_type == TensorType::f32;
  if (h.window < 0) throw std::invalid_argument("attend: a negative window");
  if (!(h.softcap >= 0.0f)) throw std::invalid_argument("attend: the soft-cap must be 0 (none) or positive");
  plan.first = window_start(h, h.positions);
  plan.base = plan.first / 64 * 64;
  return plan;
}

}  // namespace detail

namespace {

// A prefill tile's queries one at a time: the definition of its bits.
void attend_one_by_one(const HeadAttention& head, std::int64_t span, KernelPath path) {
  for (std::int64_t i = 0; i < head.queries; ++i) {
    HeadAttention one = head;
    one.query = head.query + static_cast<std::size_t>(i) * head.query_stride;
    one.out = head.out + static_cast<std::size_t>(i) * head.out_stride;
    one.positions = head.positions + i;
    one.queries = 1;
    one.span = span;  // the tile's, not the query's own positions
    attend(one, path);
  }
}

}  // namespace

void attend(const HeadAttention& head, KernelPath path) {
  const detail::AttentionPlan plan = detail::plan_attention(head);
  if (head.queries > 1) {
    const bool avx2 = path >= KernelPath::avx2 && kernel_path_supported(KernelPath::avx2);
    if (avx2 && plan.tiled_scores && plan.tiled_values && head.values_transposed) return detail::attend_tile_avx2(head, plan);
    return attend_one_by_one(head, plan.span, path);
  }
  if (path >= KernelPath::avx2 && kernel_path_supported(KernelPath::avx2)) return detail::attend_avx2(head, plan);
  for (std::int64_t g = 0; g < head.query_heads; ++g) {  // one at a time, in the scratch one needs
    HeadAttention alone = head;
    alone.query = head.query + g * head.head_dim;
    alone.out = head.out + g * head.head_dim;
    alone.query_heads = 1;
    if (plan.f32_cache) {
      detail::attend_scalar<float>(alone, plan);
    } else {
      detail::attend_scalar<std::uint16_t>(alone, plan);
    }
  }
}

void attend(const HeadAttention& head) { attend(head, default_kernel_path()); }

void swiglu(float* gate, const float* up, std::int64_t n, KernelPath path, LaneWidth lanes) {
  if (path >= KernelPath::avx2 && kernel_path_supported(KernelPath::avx2)) return detail::swiglu_avx2(gate, up, n, lanes);
  detail::swiglu_scalar(gate, up, n, lanes);
}

void swiglu(float* gate, const float* up, std::int64_t n) { swiglu(gate, up, n, default_kernel_path()); }

void vector_expf(const float* x, float* out, std::int64_t n, KernelPath path) {
  if (path >= KernelPath::avx2 && kernel_path_supported(KernelPath::avx2)) return detail::vector_expf_avx2(x, out, n);
  for (std::int64_t i = 0; i < n; ++i) out[i] = vector_expf(x[i]);
}

void avx2_expf(const float* x, float* out, std::int64_t n, KernelPath path) {
  if (path >= KernelPath::avx2 && kernel_path_supported(KernelPath::avx2)) return detail::avx2_expf_avx2(x, out, n);
  for (std::int64_t i = 0; i < n; ++i) out[i] = avx2_expf(x[i]);
}

void store_as_f16(const float* src, std::uint16_t* dst, std::int64_t n, KernelPath path) {
  if (path >= KernelPath::avx2 && kernel_path_supported(KernelPath::avx2)) return detail::store_as_f16_avx2(src, dst, n);
  for (std::int64_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i]);
}

}  // namespace loom::compute

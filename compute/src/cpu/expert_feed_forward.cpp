// The mixture-of-experts feed-forward (expert_feed_forward.hpp): route, group the tokens by expert, run each
// chosen expert once over its tokens, and sum each token's weighted expert outputs in its choice order.
#include "loom/compute/cpu/expert_feed_forward.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "loom/compute/cpu/attention.hpp"
#include "f16_activations.hpp"

namespace loom::compute {
namespace detail {
void router_logits_avx2(const float* weights, int experts, const float* x, std::int64_t n, float* out);
void router_logits_one_avx2(const float* weights, int experts, const float* x, std::int64_t n, float* out);
}  // namespace detail

namespace {

// The router's logits in the reference's F32 product order on the AVX2 machine that made the MoE references
// (its tinyBLAS kernel): per expert eight lanes, lane l accumulating elements l, l + 8, ... with one FMA each,
// then the lanes summed as (l0+l4 + l2+l6) + (l1+l5 + l3+l7); values past the last whole 8 added after, one
// product each. The routing weights scale whole expert outputs, so a last-bit difference here moves the odd
// activation across a quantization step: with the 16-lane order of loom's other F32 products,
// synth-mixtral-q8_0 missed its reference by 0.004 at two decode steps; with this order it matches to 1e-5.
void router_logits(const float* weights, std::int64_t experts, const float* x, std::int64_t n, float* out,
                   KernelPath path) {
  const std::int64_t whole = n - n % 8;
  if (path >= KernelPath::avx2 && kernel_path_supported(KernelPath::avx2)) {
    detail::router_logits_avx2(weights, static_cast<int>(experts), x, n, out);
  } else {
    for (std::int64_t e = 0; e < experts; ++e) {
      const float* w = weights + e * n;
      float lane[8] = {};
      for (std::int64_t i = 0; i < whole; i += 8) {
        for (int l = 0; l < 8; ++l) lane[l] = std::fma(w[i + l], x[i + l], lane[l]);
      }
      float s[4];
      for (int l = 0; l < 4; ++l) s[l] = lane[l + 4] + lane[l];
      out[e] = (s[0] + s[2]) + (s[1] + s[3]);
    }
  }
  for (std::int64_t e = 0; e < experts; ++e) {
    for (std::int64_t i = whole; i < n; ++i) out[e] += weights[e * n + i] * x[i];
  }
}

// The same for a step of one token, which the reference multiplies with its vector dot instead (its tiled
// kernel takes two or more rows): four 8-lane accumulators over the first n - n % 32 values (value i in
// accumulator (i / 8) % 4, lane i % 8), folded (a0 + a2) + (a1 + a3), the lanes summed by two horizontal adds
// ((l0+l4) + (l1+l5)) + ((l2+l6) + (l3+l7)), then the rest added one product at a time in float. With the
// tiled order here, synth-qwen3moe-q8_0 missed its "fox" reference by 0.004 at a decode step; with this one
// it matches to 1e-5.
void router_logits_one(const float* weights, std::int64_t experts, const float* x, std::int64_t n, float* out,
                       KernelPath path) {
  const std::int64_t whole = n / 32 * 32;
  if (path >= KernelPath::avx2 && kernel_path_supported(KernelPath::avx2)) {
    detail::router_logits_one_avx2(weights, static_cast<int>(experts), x, n, out);
  } else {
    for (std::int64_t e = 0; e < experts; ++e) {
      const float* w = weights + e * n;
      float acc[4][8] = {};
      for (std::int64_t i = 0; i < whole; ++i) acc[(i / 8) % 4][i % 8] = std::fma(w[i], x[i], acc[(i / 8) % 4][i % 8]);
      float lane[8], t[4];
      for (int l = 0; l < 8; ++l) lane[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
      for (int l = 0; l < 4; ++l) t[l] = lane[l] + lane[l + 4];
      out[e] = (t[0] + t[1]) + (t[2] + t[3]);
    }
  }
  for (std::int64_t e = 0; e < experts; ++e) {
    for (std::int64_t i = whole; i < n; ++i) out[e] += weights[e * n + i] * x[i];
  }
}

// Whether an expert's products take each token alone: the reference multiplies expert weights with one row
// at a time (its indexed product uses the one-row vector dot for every row, prompt or decode step), and for
// float weights our batch order differs from the one-row order (vec_dot.hpp), so they go token by token
// (synth-qwen3moe-f16 and synth-mixtral-f16 were 0.002-0.003 off in batch order, 1e-5 so). Quantized
// weights' batch kernels keep the one-row order, so they stay batched.
bool one_token_at_a_time(const TensorView& weight) {
  return weight.type == TensorType::f32 || weight.type == TensorType::f16 || weight.type == TensorType::bf16;
}

}  // namespace

ExpertFeedForward::ExpertFeedForward(const ModelConfig& config, std::int64_t max_batch)
    : config_(config), max_batch_(max_batch) {
  const auto& c = config_;
  if (c.experts <= 0 || c.experts_used <= 0 || c.experts_used > c.experts || c.expert_ffn_dim <= 0) {
    throw std::invalid_argument("a mixture of experts needs 1 <= experts used (" + std::to_string(c.experts_used) +
                                ") <= experts (" + std::to_string(c.experts) + ") and a positive expert width");
  }
  const auto b = static_cast<std::size_t>(max_batch);
  const auto used = static_cast<std::size_t>(c.experts_used);
  const auto dim = static_cast<std::size_t>(c.dim);
  const std::int64_t width = std::max(c.expert_ffn_dim, c.shared_expert_ffn_dim);
  logits_.resize(b * static_cast<std::size_t>(c.experts));
  chosen_.resize(b * used);
  weight_.resize(b * used);
  members_.resize(b * used);
  first_member_.resize(static_cast<std::size_t>(c.experts) + 1);
  gathered_.resize(b * dim);
  gate_.resize(b * static_cast<std::size_t>(width));
  up_.resize(b * static_cast<std::size_t>(width));
  expert_out_.resize(b * dim);
  slot_out_.resize(b * used * dim);
  shared_gate_.resize(b);
  scratch_.reserve(max_batch, std::max(c.dim, width));
}

// Softmax over every expert's logit (max subtracted, the sum in double, as the reference's soft_max), the top
// `used` by probability, ties to the lower index, then optionally divided by their sum.
void ExpertFeedForward::route(const LayerWeights& layer, const float* xn, std::int64_t n, ThreadPool& pool,
                              KernelPath path) {
  const auto& c = config_;
  const TensorView& router = *layer.router;  // F32, checked by bind_weights
  const std::int64_t experts = c.experts;
  const auto* weights = reinterpret_cast<const float*>(router.data);
  // One order for every token of a step, so that a token's choice does not depend on its place in the batch;
  // a step of one token takes the reference's one-row order (router_logits_one).
  if (n == 1) {
    router_logits_one(weights, experts, xn, c.dim, logits_.data(), path);
  } else {
    pool.parallel_for(n, router.bytes * static_cast<std::uint64_t>(n), [&](std::int64_t t) {
      router_logits(weights, experts, xn + t * c.dim, c.dim, &logits_[t * experts], path);
    });
  }
  bytes_read_ += router.bytes;
  for (std::int64_t t = 0; t < n; ++t) {
    float* p = &logits_[t * experts];
    const float max = *std::max_element(p, p + experts);
    double sum = 0.0;
    for (std::int64_t e = 0; e < experts; ++e) {
      p[e] = std::exp(p[e] - max);
      sum += p[e];
    }
    const auto inverse = static_cast<float>(1.0 / sum);
    for (std::int64_t e = 0; e < experts; ++e) p[e] *= inverse;
    std::int32_t* chosen = &chosen_[t * c.experts_used];
    float* weight = &weight_[t * c.experts_used];
    float total = 0.0f;
    for (std::int64_t k = 0; k < c.experts_used; ++k) {
      std::int64_t best = -1;
      for (std::int64_t e = 0; e < experts; ++e) {
        if (std::find(chosen, chosen + k, static_cast<std::int32_t>(e)) != chosen + k) continue;
        if (best < 0 || p[e] > p[best]) best = e;
      }
      chosen[k] = static_cast<std::int32_t>(best);
      weight[k] = p[best];
      total += p[best];
    }
    if (c.expert_weights_norm) {
      for (std::int64_t k = 0; k < c.experts_used; ++k) weight[k] /= total;
    }
  }
}

// gathered_ (m rows) through one SwiGLU expert into expert_out_ (m rows).
void ExpertFeedForward::run_expert(const ExpertWeights& expert, std::int64_t m, ThreadPool& pool, KernelPath path) {
  const std::int64_t width = expert.gate->rows();
  // F16 experts meet F16-rounded activations (f16_activations.hpp); the router before them kept F32 ones.
  detail::round_for_f16_weight(gathered_.data(), m * expert.gate->cols(), {expert.gate, expert.up}, path);
  const std::int64_t cols = expert.gate->cols();
  if (one_token_at_a_time(*expert.gate) || one_token_at_a_time(*expert.up)) {
    for (std::int64_t t = 0; t < m; ++t) {
      matmul_many({{expert.gate, &gate_[t * width]}, {expert.up, &up_[t * width]}}, &gathered_[t * cols], 1, pool, scratch_);
    }
  } else {
    matmul_many({{expert.gate, gate_.data()}, {expert.up, up_.data()}}, gathered_.data(), m, pool, scratch_);
  }
  for (std::int64_t t = 0; t < m; ++t) swiglu(&gate_[t * width], &up_[t * width], width, path, lanes_);
  detail::round_for_f16_weight(gate_.data(), m * width, {expert.down}, path);
  if (one_token_at_a_time(*expert.down)) {
    for (std::int64_t t = 0; t < m; ++t) matmul(*expert.down, &gate_[t * width], 1, &expert_out_[t * config_.dim], pool, scratch_);
  } else {
    matmul(*expert.down, gate_.data(), m, expert_out_.data(), pool, scratch_);
  }
  bytes_read_ += expert.gate->bytes + expert.up->bytes + expert.down->bytes;
}

// The shared expert over every token, times sigmoid of its gate, into expert_out_ (n rows).
void ExpertFeedForward::shared_expert(const LayerWeights& layer, const float* xn, std::int64_t n, ThreadPool& pool,
                                      KernelPath path) {
  const ExpertWeights& s = layer.shared_expert;
  const std::int64_t width = s.gate->rows();
  if (layer.shared_expert_gate != nullptr) {
    matmul_many({{s.gate, gate_.data()}, {s.up, up_.data()}, {layer.shared_expert_gate, shared_gate_.data()}}, xn, n, pool,
                scratch_);
    bytes_read_ += layer.shared_expert_gate->bytes;
  } else {
    matmul_many({{s.gate, gate_.data()}, {s.up, up_.data()}}, xn, n, pool, scratch_);
  }
  for (std::int64_t t = 0; t < n; ++t) swiglu(&gate_[t * width], &up_[t * width], width, path, lanes_);
  matmul(*s.down, gate_.data(), n, expert_out_.data(), pool, scratch_);
  bytes_read_ += s.gate->bytes + s.up->bytes + s.down->bytes;
  if (layer.shared_expert_gate == nullptr) return;
  for (std::int64_t t = 0; t < n; ++t) {
    const float gate = 1.0f / (1.0f + std::exp(-shared_gate_[static_cast<std::size_t>(t)]));
    for (std::int64_t i = 0; i < config_.dim; ++i) expert_out_[t * config_.dim + i] *= gate;
  }
}

void ExpertFeedForward::forward(const LayerWeights& layer, const float* xn, std::int64_t n, float* residual,
                                ThreadPool& pool, KernelPath path, LaneWidth lanes) {
  const auto& c = config_;
  lanes_ = lanes;
  if (n > max_batch_) throw std::invalid_argument("expert feed-forward: " + std::to_string(n) + " tokens exceed its batch");
  const std::int64_t used = c.experts_used;
  const std::int64_t dim = c.dim;
  route(layer, xn, n, pool, path);

  // Group the (token, slot) choices by expert, a counting sort: members_[first_member_[e] ..] are expert e's.
  std::fill(first_member_.begin(), first_member_.end(), 0);
  for (std::int64_t i = 0; i < n * used; ++i) ++first_member_[static_cast<std::size_t>(chosen_[i]) + 1];
  for (std::int64_t e = 0; e < c.experts; ++e) first_member_[e + 1] += first_member_[e];
  // Fill by walking the choices in token order; first_member_[e] is used as expert e's write cursor and then
  // restored (it ends at the next expert's start).
  for (std::int64_t i = 0; i < n * used; ++i) members_[first_member_[static_cast<std::size_t>(chosen_[i])]++] = i;
  for (std::int64_t e = c.experts; e > 0; --e) first_member_[e] = first_member_[e - 1];
  first_member_[0] = 0;

  for (std::int64_t e = 0; e < c.experts; ++e) {
    const std::int64_t begin = first_member_[e];
    const std::int64_t m = first_member_[e + 1] - begin;
    if (m == 0) continue;  // no token chose it: its weights are not read
    for (std::int64_t j = 0; j < m; ++j) {
      const std::int64_t token = members_[begin + j] / used;
      std::copy_n(xn + token * dim, dim, &gathered_[j * dim]);
    }
    run_expert(layer.experts[static_cast<std::size_t>(e)], m, pool, path);
    for (std::int64_t j = 0; j < m; ++j) std::copy_n(&expert_out_[j * dim], dim, &slot_out_[members_[begin + j] * dim]);
  }

  const bool shared = layer.shared_expert.gate != nullptr;
  if (shared) shared_expert(layer, xn, n, pool, path);
  for (std::int64_t t = 0; t < n; ++t) {
    float* out = residual + t * dim;
    for (std::int64_t i = 0; i < dim; ++i) {
      // The reference weighs each slot's output, then adds the slots in order, then the shared expert.
      float sum = slot_out_[(t * used) * dim + i] * weight_[t * used];
      for (std::int64_t k = 1; k < used; ++k) sum += slot_out_[(t * used + k) * dim + i] * weight_[t * used + k];
      if (shared) sum += expert_out_[t * dim + i];
      out[i] += sum;
    }
  }
}

}  // namespace loom::compute

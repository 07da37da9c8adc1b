// LlamaModel: the forward pass of the Llama family (llama, qwen2, qwen3) on the CPU: RMSNorm, rotary
// embeddings, grouped-query causal attention, SwiGLU, over a batch of consecutive positions of one sequence
// (prefill many tokens at once, or decode one). Activations are F32; weights are used in their stored type
// through matmul(). Scratch is allocated at construction for `max_batch` positions, so a step allocates
// nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "loom/compute/kernel_path.hpp"
#include "loom/compute/kv_cache.hpp"
#include "loom/compute/matmul.hpp"
#include "loom/compute/model_config.hpp"
#include "loom/compute/model_weights.hpp"
#include "loom/compute/thread_pool.hpp"

namespace loom::compute {

class LlamaModel {
 public:
  LlamaModel(ModelConfig config, ModelWeights weights, ThreadPool& pool, std::int64_t max_batch = 512);

  const ModelConfig& config() const noexcept { return config_; }
  KvCache make_cache(std::int64_t context_length = 0) const;  // 0: the model's context length

  enum class Logits { none, last, all };

  // Feeds tokens[i] at position start + i, for all i, using and extending `cache` (positions before
  // `start` must already be in it). Writes vocab_size logits per position into `logits` (Logits::all:
  // tokens.size() rows; Logits::last: one row, for the last token). Longer inputs than max_batch are fed
  // in chunks.
  void forward(std::span<const std::int32_t> tokens, std::int64_t start, KvCache& cache, Logits mode,
               float* logits);

 private:
  void forward_chunk(std::span<const std::int32_t> tokens, std::int64_t start, KvCache& cache, Logits mode,
                     float* logits);
  void attention(std::int64_t layer, std::int64_t n, std::int64_t start, KvCache& cache);
  void rope(float* vectors, std::int64_t heads, std::int64_t n, std::int64_t start);

  ModelConfig config_;
  ModelWeights weights_;
  ThreadPool& pool_;
  std::int64_t max_batch_;
  float theta_step_ = 1.0f;         // base^(-2/head_dim): the ratio of consecutive pairs' frequencies
  float position_scale_ = 1.0f;          // 1 / rope_scale (linear scaling)
  std::vector<float> frequency_factor_;  // per pair: llama3-style divisor of the angle, else 1

  // Scratch, [max_batch][width] each.
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_;
  std::vector<float> scores_;  // [threads][attention_scratch_floats(context, head_dim)]
  KernelPath kernel_path_ = default_kernel_path();
  MatmulScratch matmul_scratch_;
};

}  // namespace loom::compute

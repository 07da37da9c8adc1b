// LlamaModel: the forward pass of the Llama family (llama, qwen2, qwen3, gemma, gemma2, gemma3 text, phi3 and
// the mixture-of-experts qwen2moe, qwen3moe and Mixtral-style llama) on the CPU: RMSNorm, rotary embeddings
// (with llama3 frequency factors or phi3's LongRoPE), grouped-query causal attention (with a sliding window
// on the layers whose ModelConfig::layer_window says so, and soft-capped scores), SwiGLU or GeGLU (with
// experts: ExpertFeedForward), gemma's scaled embeddings, post-norms and final soft-cap (ModelConfig says
// which), over a batch of steps of several sequences, each of consecutive positions (a prompt's prefill, or
// one decode token), with keys and values in a PagedKvCache read through each sequence's block table.
// Activations are F32; weights are used in their stored type through matmul(). All tokens of all sequences
// go through the matrix products together (one pass over the weights per step, which is where batching
// pays); attention runs per (sequence, token, head). Scratch is allocated at construction for `max_batch`
// tokens in all, so a step allocates nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "loom/compute/cpu/attention.hpp"
#include "loom/compute/cpu/expert_feed_forward.hpp"
#include "loom/compute/cpu/kernel_path.hpp"
#include "loom/compute/cpu/kv_cache.hpp"
#include "loom/compute/cpu/matmul.hpp"
#include "loom/compute/cpu/paged_kv_cache.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/model_weights.hpp"
#include "loom/compute/model_config.hpp"

namespace loom::compute {

class LlamaModel {
 public:
  LlamaModel(ModelConfig config, ModelWeights weights, ThreadPool& pool, std::int64_t max_batch = 512);

  const ModelConfig& config() const noexcept { return config_; }
  std::int64_t max_batch() const noexcept { return max_batch_; }

  // A pool for this model's layers and KV width: options.budget_bytes, or without a budget room for
  // `tokens` positions (0: the model's context length). A stop requested on `stop` while the pool is
  // committed ends it with LoadCancelled.
  PagedKvCache make_paged_cache(const KvCacheOptions& options = {}, std::int64_t tokens = 0,
                                const std::stop_token& stop = {}) const;
  // One sequence's cache of up to `context_length` positions (0: the model's), fewer when a budget in
  // `options` holds fewer.
  KvCache make_cache(std::int64_t context_length = 0, const KvCacheOptions& options = {}) const;

  enum class Logits { none, last, all };

  // One sequence's part of a step: tokens[i] at position start + i. Positions before `start` must already
  // be in the cache, in the blocks block_table names (it must cover start + tokens.size() positions).
  // Logits::all writes tokens.size() rows of vocab_size logits to `logits`, Logits::last one row (the last
  // token's), Logits::none nothing (`logits` may be null).
  struct SequenceStep {
    std::span<const std::int32_t> tokens;
    std::int64_t start = 0;
    std::span<const std::int32_t> block_table;
    float* logits = nullptr;
    Logits mode = Logits::last;
    // Non-null: the final hidden state of every token (after the output norm, what the logits are computed
    // from), tokens.size() rows of dim floats, for embeddings.
    float* hidden = nullptr;
  };

  // Runs one step of several sequences (each at least one token, max_batch tokens in all) and writes their
  // keys and values into `cache`. A sequence's results do not depend on its physical blocks, nor (beyond
  // the summation order of F32 weights, single-token vs batch, vec_dot.hpp) on the other sequences of the
  // step. Throws std::invalid_argument / std::out_of_range for a step that breaks these rules, before any
  // work. Sequences of one step must not write to the same block (copy-on-write is the caller's).
  void forward(std::span<const SequenceStep> steps, PagedKvCache& cache);

  // The single-sequence form: feeds tokens[i] at position start + i through `cache`'s own block table;
  // inputs longer than max_batch are fed in chunks.
  void forward(std::span<const std::int32_t> tokens, std::int64_t start, KvCache& cache, Logits mode,
               float* logits);

  // Positions computed (tokens run through the layers) since construction: how tests show, by count, that a
  // cached prefix was not computed again.
  std::uint64_t positions_computed() const noexcept { return positions_computed_; }
  // Whose arithmetic attention and SwiGLU follow (attention.hpp, LaneWidth): by default the reference built
  // for the vector width of this model's kernel path (AVX2 on the AVX2 path, AVX-512 otherwise); a parity
  // test sets that of the machine its reference came from. Either runs on every kernel path.
  LaneWidth reference_lanes() const noexcept { return reference_lanes_; }
  void set_reference_lanes(LaneWidth lanes) noexcept { reference_lanes_ = lanes; }
  // Expert weight bytes read since construction (0 for a dense model): ExpertFeedForward::weight_bytes_read
  // summed over the layers.
  std::uint64_t expert_bytes_read() const noexcept { return experts_ ? experts_->weight_bytes_read() : 0; }

 private:
  void check_step(std::span<const SequenceStep> steps, const PagedKvCache& cache) const;
  void store_keys_values(std::int64_t layer, std::int64_t n, std::span<const SequenceStep> steps, PagedKvCache& cache);
  void attention(std::int64_t layer, std::int64_t n, std::span<const SequenceStep> steps, PagedKvCache& cache);
  std::int64_t find_tiles(std::int64_t n, std::int64_t queries);
  void rotation_angles(std::int64_t n, float theta_step, float position_scale, float* out);
  void rope(float* vectors, std::int64_t heads, std::int64_t n, const float* rotation);
  void post_norm(const TensorView* weight, std::int64_t n);
  void output_logits(std::span<const SequenceStep> steps);
  void output_hidden(std::span<const SequenceStep> steps);

  ModelConfig config_;
  ModelWeights weights_;
  ThreadPool& pool_;
  std::int64_t max_batch_;
  std::uint64_t positions_computed_ = 0;
  float theta_step_ = 1.0f;         // base^(-2/head_dim): the ratio of consecutive pairs' frequencies
  float position_scale_ = 1.0f;          // 1 / rope_scale (linear scaling)
  float theta_step_swa_ = 0.0f;          // > 0: the sliding-window layers' own ratio (rope_freq_base_swa), unscaled
  std::vector<float> frequency_factor_;  // per pair: llama3-style (or LongRoPE) divisor of the angle, else 1
  float rotation_scale_ = 1.0f;          // LongRoPE's attn_factor: cos and sin are multiplied by it
  std::unique_ptr<ExpertFeedForward> experts_;  // MoE models: one for every layer (scratch shared)

  // Scratch, [max_batch][width] each.
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_;
  std::vector<float> scores_;  // [threads][attention_scratch_floats(context, head_dim, group, tile queries)]
  // Per token of the step: its position, and the step (sequence) it belongs to.
  std::vector<std::int64_t> position_;
  std::vector<std::int32_t> sequence_of_;
  // The step's attention tiles (consecutive tokens of one sequence): tile i is tokens [tile_[i], tile_[i + 1]).
  std::vector<std::int64_t> tile_;
  // Per token of the step, the cosine and sine of each rotary pair's angle: [max_batch][head_dim / 2][2].
  // They depend on the position alone, so a step computes them once for every layer, queries and keys.
  std::vector<float> rotation_;
  std::vector<float> rotation_swa_;  // the same with the sliding-window layers' base, when they have their own
  // Logits of several sequences are computed together into this buffer, kLogitRows rows at a time, then
  // copied to each sequence's own buffer.
  static constexpr std::int64_t kLogitRows = 64;
  std::vector<float> staged_logits_;
  KernelPath kernel_path_ = default_kernel_path();
  LaneWidth reference_lanes_ = kernel_path_ == KernelPath::avx2 ? LaneWidth::avx2 : LaneWidth::avx512;
  MatmulScratch matmul_scratch_;
};

}  // namespace loom::compute

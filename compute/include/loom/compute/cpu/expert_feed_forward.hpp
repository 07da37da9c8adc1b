// ExpertFeedForward: the mixture-of-experts feed-forward of one layer (qwen2moe, qwen3moe, Mixtral-style
// llama), for a step's batch of tokens. A softmax router over all experts picks each token's top
// `experts_used` (ties to the lower index) and weighs them, renormalized to sum 1 where the config says so;
// each expert is a SwiGLU feed-forward. A step reads only the experts its tokens chose: the tokens are
// grouped by expert and each chosen expert's three products run once over its own tokens, so a decode token
// reads about the active parameters, not all of them. Each token's output is then its experts' weighted
// outputs summed in its choice order (highest weight first, as the reference adds them), plus qwen2moe's
// shared expert times sigmoid(its gate), and is added to the residual. The router runs one token at a time,
// so a token's choice does not depend on its batch mates. Scratch is sized at construction: no allocation.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/compute/cpu/attention.hpp"
#include "loom/compute/cpu/kernel_path.hpp"
#include "loom/compute/cpu/matmul.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/model_weights.hpp"
#include "loom/compute/model_config.hpp"

namespace loom::compute {

class ExpertFeedForward {
 public:
  ExpertFeedForward(const ModelConfig& config, std::int64_t max_batch);

  // residual[t] += moe(xn[t]) for t < n; xn and residual are [n][dim].
  // `lanes`: whose SwiGLU form the experts use (attention.hpp, swiglu()).
  void forward(const LayerWeights& layer, const float* xn, std::int64_t n, float* residual, ThreadPool& pool,
               KernelPath path, LaneWidth lanes = LaneWidth::avx512);

  // Weight bytes the products have read since construction (router, chosen experts, shared expert): how a
  // benchmark shows that decode reads the active parameters only.
  std::uint64_t weight_bytes_read() const noexcept { return bytes_read_; }

 private:
  void route(const LayerWeights& layer, const float* xn, std::int64_t n, ThreadPool& pool, KernelPath path);
  void run_expert(const ExpertWeights& expert, std::int64_t m, ThreadPool& pool, KernelPath path);
  void shared_expert(const LayerWeights& layer, const float* xn, std::int64_t n, ThreadPool& pool, KernelPath path);

  ModelConfig config_;
  std::int64_t max_batch_;
  std::uint64_t bytes_read_ = 0;
  LaneWidth lanes_ = LaneWidth::avx512;  // forward()'s, for the experts' SwiGLU
  std::vector<float> logits_;                 // [max_batch][experts]
  std::vector<std::int32_t> chosen_;          // [max_batch][used]: expert ids, highest weight first
  std::vector<float> weight_;                 // [max_batch][used]
  std::vector<std::int64_t> members_;         // the (token * used + slot) of each expert's tokens, grouped
  std::vector<std::int64_t> first_member_;    // [experts + 1]: expert e's members start here
  std::vector<float> gathered_;               // [max_batch][dim]: one expert's tokens' inputs
  std::vector<float> gate_, up_;              // [max_batch][max(expert, shared) width]
  std::vector<float> expert_out_;             // [max_batch][dim], then copied to slot_out_
  std::vector<float> slot_out_;               // [max_batch][used][dim]
  std::vector<float> shared_gate_;            // [max_batch]: the shared expert's gate logit
  MatmulScratch scratch_;
};

}  // namespace loom::compute

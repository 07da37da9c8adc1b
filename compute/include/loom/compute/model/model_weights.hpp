// ModelWeights: the tensors of a Llama-family model, found by their GGUF names in whatever file holds them
// (GGUF, or a llama2.c checkpoint exposing the same names) and checked against the ModelConfig's shapes.
// The views point into the memory-mapped file: nothing is copied or converted. Where one stored tensor
// holds several matrices (phi3's fused attn_qkv and ffn_up, the 3-D expert tensors of MoE models, one
// [experts][rows][cols] block per expert) each is bound as a TensorView over its own rows, kept in
// `derived` so that they live as long as any copy of the weights.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "loom/compute/model/tensor_view.hpp"
#include "loom/compute/model_config.hpp"

namespace loom::compute {

// One SwiGLU feed-forward: an expert's slice of the 3-D tensors, or the shared expert.
struct ExpertWeights {
  const TensorView* gate = nullptr;
  const TensorView* up = nullptr;
  const TensorView* down = nullptr;
};

struct LayerWeights {
  const TensorView* attn_norm = nullptr;
  const TensorView* wq = nullptr;
  const TensorView* wk = nullptr;
  const TensorView* wv = nullptr;
  const TensorView* wo = nullptr;
  const TensorView* bq = nullptr;  // qwen2 biases
  const TensorView* bk = nullptr;
  const TensorView* bv = nullptr;
  const TensorView* q_norm = nullptr;  // qwen3 per-head norms
  const TensorView* k_norm = nullptr;
  const TensorView* ffn_norm = nullptr;
  const TensorView* gate = nullptr;
  const TensorView* up = nullptr;
  const TensorView* down = nullptr;
  const TensorView* post_attn_norm = nullptr;  // gemma2/gemma3 (ModelConfig::post_norms)
  const TensorView* post_ffn_norm = nullptr;
  // Mixture of experts (config.experts > 0; gate/up/down above are then null).
  const TensorView* router = nullptr;         // ffn_gate_inp: [experts][dim]
  std::vector<ExpertWeights> experts;
  ExpertWeights shared_expert;                // qwen2moe *_shexp, absent elsewhere
  const TensorView* shared_expert_gate = nullptr;  // ffn_gate_inp_shexp: [dim], a sigmoid gate
};

struct ModelWeights {
  const TensorView* token_embd = nullptr;
  const TensorView* output_norm = nullptr;
  const TensorView* output = nullptr;      // token_embd when the embeddings are tied
  const TensorView* rope_freqs = nullptr;  // optional llama3 frequency factors
  const TensorView* rope_factors_long = nullptr;   // phi3 LongRoPE, with config.rope_original_context
  const TensorView* rope_factors_short = nullptr;
  std::shared_ptr<std::deque<TensorView>> derived;  // the row-range views above point into
  std::vector<LayerWeights> layers;
};

// Looks a tensor up by name; nullptr when absent.
using TensorLookup = std::function<const TensorView*(std::string_view name)>;

// Binds and checks every tensor the config implies; throws std::runtime_error naming the missing or
// misshapen tensor, its expected dimensions and what the file has.
ModelWeights bind_weights(const ModelConfig& config, const TensorLookup& find);

}  // namespace loom::compute

// ModelWeights: the tensors of a Llama-family model, found by their GGUF names in whatever file holds them
// (GGUF, or a llama2.c checkpoint exposing the same names) and checked against the ModelConfig's shapes.
// The views point into the memory-mapped file: nothing is copied or converted.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "loom/compute/model/tensor_view.hpp"
#include "loom/compute/model_config.hpp"

namespace loom::compute {

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
};

struct ModelWeights {
  const TensorView* token_embd = nullptr;
  const TensorView* output_norm = nullptr;
  const TensorView* output = nullptr;      // token_embd when the embeddings are tied
  const TensorView* rope_freqs = nullptr;  // optional llama3 frequency factors
  std::vector<LayerWeights> layers;
};

// Looks a tensor up by name; nullptr when absent.
using TensorLookup = std::function<const TensorView*(std::string_view name)>;

// Binds and checks every tensor the config implies; throws std::runtime_error naming the missing or
// misshapen tensor, its expected dimensions and what the file has.
ModelWeights bind_weights(const ModelConfig& config, const TensorLookup& find);

}  // namespace loom::compute

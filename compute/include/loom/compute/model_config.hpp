// ModelConfig: the hyperparameters of a Llama-family model (llama, qwen2, qwen3), read from GGUF metadata
// (`{arch}.*` keys) or a llama2.c header. Everything the forward pass needs to know about the shape.
#pragma once

#include <cstdint>
#include <string>

namespace loom::compute {

enum class Architecture { llama, qwen2, qwen3 };

// How rotary embeddings pair the dimensions of a head: llama rotates adjacent pairs (x[2i], x[2i+1]);
// qwen2/qwen3 ("NeoX" style) rotate x[i] with x[i + head_dim/2].
enum class RopeStyle { adjacent_pairs, split_halves };

struct ModelConfig {
  Architecture architecture = Architecture::llama;
  std::int64_t vocab_size = 0;
  std::int64_t dim = 0;           // embedding length
  std::int64_t ffn_dim = 0;       // feed-forward length
  std::int64_t layers = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;      // usually dim / heads; qwen3 may say otherwise (attention.key_length)
  std::int64_t context_length = 0;
  float rms_epsilon = 1e-5f;
  float rope_freq_base = 10000.0f;
  float rope_scale = 1.0f;        // linear scaling: positions are divided by this factor
  RopeStyle rope_style = RopeStyle::adjacent_pairs;
  bool qkv_bias = false;          // qwen2
  bool qk_norm = false;           // qwen3: RMSNorm over each head of Q and K

  std::int64_t q_dim() const noexcept { return heads * head_dim; }
  std::int64_t kv_dim() const noexcept { return kv_heads * head_dim; }
};

std::string to_string(Architecture architecture);

}  // namespace loom::compute

// ModelConfig: the hyperparameters of a Llama-family model (llama, qwen2, qwen3, gemma, gemma2, gemma3 text),
// read from GGUF metadata (`{arch}.*` keys) or a llama2.c header. Everything the forward pass needs to know
// about the shape, and the per-architecture switches that depart from plain Llama: GELU instead of SwiGLU,
// scaled embeddings, norms after attention and feed-forward, soft-capped scores and logits, and a sliding
// attention window per layer (gemma2/gemma3; a Mistral-style `llama` whose metadata sets one; any other
// architecture's reader may set it, phi3's for one), each layer's window in `layer_window`.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::compute {

enum class Architecture { llama, qwen2, qwen3, gemma, gemma2, gemma3 };

// How rotary embeddings pair the dimensions of a head: llama rotates adjacent pairs (x[2i], x[2i+1]);
// qwen2/qwen3/gemma ("NeoX" style) rotate x[i] with x[i + head_dim/2].
enum class RopeStyle { adjacent_pairs, split_halves };

// The feed-forward's gate activation: SiLU (SwiGLU, Llama) or GELU in its tanh form (GeGLU, Gemma).
enum class FfnActivation { silu, gelu_tanh };

struct ModelConfig {
  Architecture architecture = Architecture::llama;
  std::int64_t vocab_size = 0;
  std::int64_t dim = 0;           // embedding length
  std::int64_t ffn_dim = 0;       // feed-forward length
  std::int64_t layers = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;      // usually dim / heads; qwen3/gemma may say otherwise (attention.key_length)
  std::int64_t context_length = 0;
  float rms_epsilon = 1e-5f;
  float rope_freq_base = 10000.0f;
  float rope_scale = 1.0f;        // linear scaling: positions are divided by this factor
  RopeStyle rope_style = RopeStyle::adjacent_pairs;
  bool qkv_bias = false;          // qwen2
  bool qk_norm = false;           // qwen3, gemma3: RMSNorm over each head of Q and K

  // ---- Gemma family ----
  FfnActivation ffn_activation = FfnActivation::silu;
  float embedding_scale = 1.0f;   // the token embeddings are multiplied by this (gemma: sqrt(dim))
  // > 0: queries are multiplied by this before attention, which then scales scores by 1 (the reference
  // scales gemma's queries, not its scores; the F16 rounding of the query comes after). 0: scores are
  // scaled by 1/sqrt(head_dim).
  float query_scale = 0.0f;
  bool post_norms = false;        // gemma2/3: RMSNorm of the attention and feed-forward outputs before each residual add
  float attn_softcap = 0.0f;      // > 0: attention scores become cap * tanh(score / cap) after scaling (gemma2)
  float final_softcap = 0.0f;     // > 0: the same for the output logits (gemma2)
  // Per layer (empty: none): 0 for full causal attention, W > 0 for a sliding window where the query at
  // position p sees keys p-W+1 .. p.
  std::vector<std::int64_t> layer_window;
  // > 0: sliding-window layers rotate with this base and no linear scaling (gemma3's local layers); the
  // full-attention layers keep rope_freq_base and rope_scale. 0: every layer rotates alike.
  float rope_freq_base_swa = 0.0f;

  std::int64_t q_dim() const noexcept { return heads * head_dim; }
  std::int64_t kv_dim() const noexcept { return kv_heads * head_dim; }
  std::int64_t window(std::int64_t layer) const noexcept {
    return layer >= 0 && static_cast<std::size_t>(layer) < layer_window.size() ? layer_window[static_cast<std::size_t>(layer)] : 0;
  }
  bool has_sliding_window() const noexcept {
    for (auto w : layer_window) {
      if (w > 0) return true;
    }
    return false;
  }
};

std::string to_string(Architecture architecture);

// Every architecture loom runs, by its `general.architecture` name: one table, so that the loader's
// "unsupported architecture" message and to_string() never disagree with what is supported.
struct ArchitectureName {
  Architecture architecture;
  std::string_view name;
};
std::span<const ArchitectureName> supported_architectures();
std::string supported_architecture_list();  // "llama, qwen2, ..."

}  // namespace loom::compute

// ModelConfig: the hyperparameters of a Llama-family model (llama, qwen2, qwen3, gemma, gemma2, gemma3 text,
// phi3, and the mixture-of-experts qwen2moe, qwen3moe and Mixtral-style llama), read from GGUF metadata
// (`{arch}.*` keys) or a llama2.c header. Everything the forward pass needs to know about the shape, and the
// per-architecture switches that depart from plain Llama: GELU instead of SwiGLU, scaled embeddings, norms
// after attention and feed-forward, soft-capped scores and logits, and a sliding attention window per layer
// (gemma2/gemma3; a Mistral-style `llama` whose metadata sets one; any other architecture's reader may set
// it), each layer's window in `layer_window`.
//
// phi3 stores Q, K and V as one fused matrix and gate and up as another (bound as row ranges of them,
// model_weights.hpp); its LongRoPE files carry two sets of per-pair frequency divisors, chosen by the
// context the model runs with (`context_length`): up to `rope_original_context` the short ones, beyond it
// the long ones, as the reference implementation chooses by its context size; cos and sin are multiplied
// by `rope_attn_factor` either way. A MoE model (experts > 0) replaces each layer's feed-forward by
// `experts` SwiGLU experts of width `expert_ffn_dim`, `experts_used` of them chosen per token by a softmax
// router (expert_feed_forward.hpp), plus on qwen2moe an always-on shared expert behind a sigmoid gate.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::compute {

enum class Architecture { llama, qwen2, qwen3, gemma, gemma2, gemma3, phi3, qwen2moe, qwen3moe };

constexpr bool is_gemma(Architecture a) {
  return a == Architecture::gemma || a == Architecture::gemma2 || a == Architecture::gemma3;
}

// How rotary embeddings pair the dimensions of a head: llama rotates adjacent pairs (x[2i], x[2i+1]);
// qwen2/qwen3/gemma ("NeoX" style) rotate x[i] with x[i + head_dim/2].
enum class RopeStyle { adjacent_pairs, split_halves };

// The feed-forward's gate activation: SiLU (SwiGLU, Llama) or GELU in its tanh form (GeGLU, Gemma).
enum class FfnActivation { silu, gelu_tanh };

// How a sequence's final hidden states (after the output norm) become one embedding: `{arch}.pooling_type`
// in GGUF, with the values of that key's enum (0 none, 1 mean, 2 cls, 3 last, 4 rank). none (per-token
// vectors) and rank (a reranker's score) give no sequence embedding, so loom refuses embeddings for them.
enum class Pooling { none = 0, mean = 1, cls = 2, last = 3, rank = 4 };
std::string to_string(Pooling pooling);
inline bool pools_sequences(Pooling pooling) noexcept {
  return pooling == Pooling::mean || pooling == Pooling::cls || pooling == Pooling::last;
}

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

  // phi3: fused attn_qkv (q rows, then k, then v) and ffn_up (gate rows, then up rows).
  bool fused_qkv = false;
  bool fused_gate_up = false;
  // LongRoPE (phi3 rope_factors_long/short): the short factors apply while context_length <= this.
  std::int64_t rope_original_context = 0;  // 0: no LongRoPE
  float rope_attn_factor = 1.0f;           // cos and sin are multiplied by this

  // Mixture of experts (0 experts: a dense feed-forward of ffn_dim).
  std::int64_t experts = 0;
  std::int64_t experts_used = 0;            // top-k per token
  std::int64_t expert_ffn_dim = 0;          // each expert's hidden width
  std::int64_t shared_expert_ffn_dim = 0;   // qwen2moe's shared expert (0: none)
  bool expert_weights_norm = true;          // renormalize the chosen experts' weights to sum 1

  // Embeddings: mean when the file does not say (a decoder model has no pooling of its own).
  Pooling pooling = Pooling::mean;

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

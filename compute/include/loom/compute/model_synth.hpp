// Synthetic models: random-weight GGUF files of any Llama-family shape, deterministic per seed. Tests use
// them for architectures, features and shapes that ../shared does not provide (qwen2, qwen3, the gemma
// family with windows shorter than a test's prompt, odd head counts), and
// benchmarks for realistic sizes (`loom synth`).
#pragma once

#include <cstdint>
#include <string>

#include "loom/compute/model_config.hpp"
#include "loom/compute/tensor_type.hpp"

namespace loom::compute {

struct SynthSpec {
  Architecture architecture = Architecture::llama;
  std::int64_t dim = 64;
  std::int64_t ffn_dim = 172;
  std::int64_t layers = 2;
  std::int64_t heads = 4;
  std::int64_t kv_heads = 4;
  std::int64_t context_length = 256;
  std::int64_t vocab_size = 512;  // ignored when vocab_from is set: the vocabulary file decides
  TensorType type = TensorType::f32;  // of the matrices and the embedding: f32 f16 bf16 q8_0 q4_0 q2_K q3_K q4_K q5_K q6_K iq4_xs
  std::string vocab_from;         // a GGUF whose tokenizer.* metadata is copied (e.g. ../shared/vocab/...)
  // Without vocab_from: true writes a small SentencePiece vocabulary of loom's own (byte fallback, ASCII
  // characters and common English words), so the model needs no other file to take and produce text (the
  // gateway's demo model); false writes no tokenizer (vocab_size tokens, for the maths only).
  bool builtin_vocabulary = false;
  // Written as tokenizer.chat_template when non-empty (replacing one vocab_from carries): a Jinja chat
  // template, so that tests can serve a model whose own template is a tool or reasoning template.
  std::string chat_template;
  std::uint64_t seed = 1;
  float rope_freq_base = 10000.0f;
  float rms_epsilon = 1e-5f;
  // Shape and features beyond Llama's (the gemma family, sliding windows):
  std::int64_t head_dim = 0;        // 0: dim / heads; else written as attention.key_length / value_length
  std::int64_t sliding_window = 0;  // > 0: attention.sliding_window (gemma2/gemma3 place it; llama: every layer)
  float attn_softcap = 0.0f;        // gemma2: attn_logit_softcapping (written when > 0)
  float final_softcap = 0.0f;       // gemma2: final_logit_softcapping (written when > 0)
  float rope_freq_base_swa = 0.0f;  // gemma3: rope.freq_base_swa (written when > 0; the loader's default 10000)
  // Mixture of experts (experts > 0; qwen2moe, qwen3moe, or llama for Mixtral-style): each layer's
  // feed-forward is `experts` SwiGLU experts of expert_ffn_dim (0: ffn_dim), experts_used chosen per token;
  // shared_expert_ffn_dim > 0 adds a shared expert with its sigmoid gate (the qwen2moe tensors).
  std::int64_t experts = 0;
  std::int64_t experts_used = 2;
  std::int64_t expert_ffn_dim = 0;
  std::int64_t shared_expert_ffn_dim = 0;
  // phi3 LongRoPE (> 0): rope_factors_long/short and this original context, attn_factor rope_attn_factor.
  std::int64_t rope_original_context = 0;
  float rope_attn_factor = 1.19f;
};

// Writes the model to `path`; throws std::invalid_argument for an impossible shape (naming the field)
// and ModelFileError for an unreadable vocabulary file.
void write_synthetic_model(const SynthSpec& spec, const std::string& path);

}  // namespace loom::compute

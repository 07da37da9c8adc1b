#include "loom/compute/model/model_loader.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>

#include "loom/compute/model/model_file_error.hpp"

namespace loom::compute {
namespace {

std::int64_t positive(const GgufFile& file, const std::string& key, std::int64_t value) {
  if (value <= 0) throw ModelFileError(file.path(), std::nullopt, key, "expected a positive value, got " + std::to_string(value));
  return value;
}

// `llama.attention.sliding_window`: a Mistral-style llama slides on every layer. Only llama: a Qwen2 file may
// carry a window its model does not use (use_sliding_window false), phi3's reader sets its own, and
// gemma2/gemma3 place theirs in read_gemma_keys().
void read_sliding_window(const GgufFile& file, const std::string& p, ModelConfig& c) {
  if (c.architecture != Architecture::llama) return;
  const auto window = file.find_u64(p + "attention.sliding_window");
  if (!window || *window == 0) return;
  // A window at least as long as the context never hides a key: full attention, with nothing to skip.
  if (static_cast<std::int64_t>(*window) >= c.context_length) return;
  c.layer_window.assign(static_cast<std::size_t>(c.layers), static_cast<std::int64_t>(*window));
}

// Gemma's departures from Llama (compute/README.md, "Gemma"): GeGLU, embeddings times sqrt(dim), NeoX rope,
// queries scaled before attention; gemma2 adds post-norms, soft-caps and a window on even layers; gemma3
// post-norms, Q/K norms, a window on five layers of six and its own rope base on those.
void read_gemma_keys(const GgufFile& file, const std::string& p, ModelConfig& c) {
  if (!is_gemma(c.architecture)) return;
  c.rope_style = RopeStyle::split_halves;
  c.ffn_activation = FfnActivation::gelu_tanh;
  c.embedding_scale = std::sqrt(static_cast<float>(c.dim));  // rounded as a float, as the reference does
  // The reference scales queries by 1/sqrt(key_length), except for the 27B shapes (gemma2 46 layers, gemma3
  // 62), whose query_pre_attn_scalar is dim/heads and which it recognises by their layer count; a file that
  // states the scalar is taken at its word.
  const bool big = (c.architecture == Architecture::gemma2 && c.layers == 46) ||
                   (c.architecture == Architecture::gemma3 && c.layers == 62);
  float scalar = static_cast<float>(big ? c.dim / c.heads : c.head_dim);
  if (auto stated = file.find_u64(p + "attention.query_pre_attn_scalar"); stated && *stated > 0) scalar = static_cast<float>(*stated);
  c.query_scale = 1.0f / std::sqrt(scalar);
  if (c.architecture == Architecture::gemma) return;

  c.post_norms = true;
  const auto window = static_cast<std::int64_t>(file.find_u64(p + "attention.sliding_window").value_or(0));
  if (c.architecture == Architecture::gemma2) {
    c.attn_softcap = file.find_f32(p + "attn_logit_softcapping").value_or(0.0f);
    c.final_softcap = file.find_f32(p + "final_logit_softcapping").value_or(0.0f);
    c.layer_window.assign(static_cast<std::size_t>(c.layers), 0);
    for (std::int64_t l = 0; l < c.layers; l += 2) c.layer_window[static_cast<std::size_t>(l)] = window;
    return;
  }
  c.qk_norm = true;
  // Every sixth layer (1-based) attends fully. Newer files may say which in a pattern key: a count (every
  // n-th layer is full) or one flag per layer (true: sliding).
  std::int64_t pattern = 6;
  std::vector<bool> sliding;
  const std::string pattern_key = p + "attention.sliding_window_pattern";
  if (const GgufValue* value = file.find(pattern_key); value != nullptr) {
    if (const GgufArray* flags = value->array(); flags != nullptr) {
      const auto* bools = flags->get_if<bool>();
      if (bools == nullptr || static_cast<std::int64_t>(bools->size()) != c.layers) {
        throw ModelFileError(file.path(), std::nullopt, pattern_key, "expected a count or one bool per layer");
      }
      sliding = *bools;
    } else {
      pattern = static_cast<std::int64_t>(file.get_u64(pattern_key));
    }
  }
  c.layer_window.assign(static_cast<std::size_t>(c.layers), 0);
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const bool slides = sliding.empty() ? pattern <= 0 || (l + 1) % pattern != 0 : sliding[static_cast<std::size_t>(l)];
    if (slides) c.layer_window[static_cast<std::size_t>(l)] = window;
  }
  c.rope_freq_base_swa = file.find_f32(p + "rope.freq_base_swa").value_or(10000.0f);
}

// phi3: fused tensors, and LongRoPE when the file has an original context (rope_factors_* are weights).
void read_phi3_keys(const GgufFile& file, const std::string& p, ModelConfig& c) {
  c.fused_qkv = true;
  c.fused_gate_up = true;
  if (auto rotated = file.find_u64(p + "rope.dimension_count"); rotated && static_cast<std::int64_t>(*rotated) != c.head_dim) {
    throw ModelFileError(file.path(), std::nullopt, p + "rope.dimension_count",
                         "partial rotary embeddings are not supported (" + std::to_string(*rotated) + " of " +
                             std::to_string(c.head_dim) + " dimensions)");
  }
  // phi3.attention.sliding_window: every layer slides (the shared test files say 2047 and 262144, longer than
  // every context they are run at, so their attention is full either way); none when it covers the context.
  if (auto window = file.find_u64(p + "attention.sliding_window");
      window && *window > 0 && static_cast<std::int64_t>(*window) < c.context_length) {
    c.layer_window.assign(static_cast<std::size_t>(c.layers), static_cast<std::int64_t>(*window));
  }
  if (auto original = file.find_u64(p + "rope.scaling.original_context_length")) {
    c.rope_original_context = positive(file, p + "rope.scaling.original_context_length", static_cast<std::int64_t>(*original));
    c.rope_attn_factor = file.find_f32(p + "rope.scaling.attn_factor").value_or(1.0f);
    if (!(c.rope_attn_factor > 0.0f)) {
      throw ModelFileError(file.path(), std::nullopt, p + "rope.scaling.attn_factor", "expected a positive factor");
    }
  }
}

// Mixture of experts: {arch}.expert_count / expert_used_count (llama with them is Mixtral-style), the
// experts' width (expert_feed_forward_length, else feed_forward_length) and qwen2moe's shared expert.
void read_expert_keys(const GgufFile& file, const std::string& p, ModelConfig& c) {
  const auto count = file.find_u64(p + "expert_count");
  if (!count || *count == 0) {
    if (c.architecture == Architecture::qwen2moe || c.architecture == Architecture::qwen3moe) {
      throw ModelFileError(file.path(), std::nullopt, p + "expert_count", "a mixture-of-experts model needs experts");
    }
    return;
  }
  c.experts = positive(file, p + "expert_count", static_cast<std::int64_t>(*count));
  c.experts_used = positive(file, p + "expert_used_count", static_cast<std::int64_t>(file.get_u64(p + "expert_used_count")));
  if (c.experts_used > c.experts) {
    throw ModelFileError(file.path(), std::nullopt, p + "expert_used_count",
                         std::to_string(c.experts_used) + " used of " + std::to_string(c.experts) + " experts");
  }
  c.expert_ffn_dim = positive(file, p + "expert_feed_forward_length",
                              static_cast<std::int64_t>(file.find_u64(p + "expert_feed_forward_length")
                                                            .value_or(static_cast<std::uint64_t>(c.ffn_dim))));
  if (auto shared = file.find_u64(p + "expert_shared_feed_forward_length")) {
    c.shared_expert_ffn_dim = positive(file, p + "expert_shared_feed_forward_length", static_cast<std::int64_t>(*shared));
  } else if (file.find_tensor("blk.0.ffn_up_shexp.weight") != nullptr) {
    c.shared_expert_ffn_dim = file.find_tensor("blk.0.ffn_up_shexp.weight")->rows();
  }
  // Qwen2-MoE keeps the softmax weights of its top-k as they are (norm_topk_prob false); Qwen3-MoE and
  // Mixtral renormalize them. A file may say so itself.
  c.expert_weights_norm = c.architecture != Architecture::qwen2moe;
  if (auto norm = file.find_bool(p + "expert_weights_norm")) c.expert_weights_norm = *norm;
}

}  // namespace

ModelConfig read_model_config(const GgufFile& file) {
  const std::string arch = file.get_string("general.architecture");
  ModelConfig c;
  const auto& known = supported_architectures();
  const auto found = std::find_if(known.begin(), known.end(), [&](const auto& a) { return a.name == arch; });
  if (found == known.end()) {
    throw ModelFileError(file.path(), std::nullopt, "general.architecture",
                         "unsupported architecture '" + arch + "' (supported: " + supported_architecture_list() + ")");
  }
  c.architecture = found->architecture;
  switch (c.architecture) {
    case Architecture::llama:
      c.rope_style = RopeStyle::adjacent_pairs;
      break;
    case Architecture::qwen2:
      c.rope_style = RopeStyle::split_halves;
      c.qkv_bias = true;
      break;
    case Architecture::qwen3:
      c.rope_style = RopeStyle::split_halves;
      c.qk_norm = true;
      break;
    case Architecture::gemma:
    case Architecture::gemma2:
    case Architecture::gemma3:
      break;  // read_gemma_keys(), once the shape is known
    case Architecture::phi3:
      c.rope_style = RopeStyle::split_halves;
      break;  // read_phi3_keys() for the rest
    case Architecture::qwen2moe:
      c.rope_style = RopeStyle::split_halves;
      c.qkv_bias = true;
      break;
    case Architecture::qwen3moe:
      c.rope_style = RopeStyle::split_halves;
      c.qk_norm = true;
      break;
  }
  const std::string p = arch + ".";
  c.dim = positive(file, p + "embedding_length", file.get_u64(p + "embedding_length"));
  c.ffn_dim = positive(file, p + "feed_forward_length", file.get_u64(p + "feed_forward_length"));
  c.layers = positive(file, p + "block_count", file.get_u64(p + "block_count"));
  c.heads = positive(file, p + "attention.head_count", file.get_u64(p + "attention.head_count"));
  c.kv_heads = positive(file, p + "attention.head_count_kv",
                        file.find_u64(p + "attention.head_count_kv").value_or(static_cast<std::uint64_t>(c.heads)));
  c.context_length = positive(file, p + "context_length", file.get_u64(p + "context_length"));
  if (c.dim % c.heads != 0 && !file.has(p + "attention.key_length")) {
    throw ModelFileError(file.path(), std::nullopt, p + "attention.head_count",
                         "embedding length " + std::to_string(c.dim) + " is not a multiple of the head count " +
                             std::to_string(c.heads));
  }
  c.head_dim = positive(file, p + "attention.key_length",
                        file.find_u64(p + "attention.key_length").value_or(static_cast<std::uint64_t>(c.dim / c.heads)));
  if (c.heads % c.kv_heads != 0) {
    throw ModelFileError(file.path(), std::nullopt, p + "attention.head_count_kv",
                         "head count " + std::to_string(c.heads) + " is not a multiple of the KV head count " +
                             std::to_string(c.kv_heads));
  }
  c.rms_epsilon = file.find_f32(p + "attention.layer_norm_rms_epsilon").value_or(1e-5f);
  c.rope_freq_base = file.find_f32(p + "rope.freq_base").value_or(10000.0f);
  if (auto scaling = file.find_string(p + "rope.scaling.type"); scaling && *scaling != "none") {
    if (*scaling != "linear") {
      throw ModelFileError(file.path(), std::nullopt, p + "rope.scaling.type",
                           "unsupported rope scaling '" + *scaling + "' (supported: none, linear)");
    }
    c.rope_scale = file.find_f32(p + "rope.scaling.factor").value_or(1.0f);
    if (!(c.rope_scale > 0.0f)) {
      throw ModelFileError(file.path(), std::nullopt, p + "rope.scaling.factor", "expected a positive factor");
    }
  }
  read_sliding_window(file, p, c);
  read_gemma_keys(file, p, c);
  if (c.architecture == Architecture::phi3) read_phi3_keys(file, p, c);
  read_expert_keys(file, p, c);
  if (auto pooling = file.find_u32(p + "pooling_type")) {
    if (*pooling > static_cast<std::uint32_t>(Pooling::rank)) {
      throw ModelFileError(file.path(), std::nullopt, p + "pooling_type",
                           "unknown pooling type " + std::to_string(*pooling) + " (0 none, 1 mean, 2 cls, 3 last, 4 rank)");
    }
    c.pooling = static_cast<Pooling>(*pooling);
  }
  const TensorView& embd = file.get_tensor("token_embd.weight");
  c.vocab_size = embd.dims.size() == 2 ? embd.dims[1] : 0;
  if (c.vocab_size <= 0) {
    throw ModelFileError(file.path(), std::nullopt, "token_embd.weight", "expected a 2-D embedding matrix");
  }
  return c;
}

ModelConfig read_model_config(const Llama2cCheckpoint& file) {
  const auto& h = file.config();
  ModelConfig c;
  c.architecture = Architecture::llama;
  c.rope_style = RopeStyle::adjacent_pairs;
  c.vocab_size = h.vocab_size;
  c.dim = h.dim;
  c.ffn_dim = h.hidden_dim;
  c.layers = h.n_layers;
  c.heads = h.n_heads;
  c.kv_heads = h.n_kv_heads;
  c.head_dim = h.head_size();
  c.context_length = h.seq_len;
  c.rms_epsilon = 1e-5f;  // what llama2.c's run.c uses
  c.rope_freq_base = 10000.0f;
  return c;
}

LoadedModel::LoadedModel(std::variant<GgufFile, Llama2cCheckpoint> file) : file_(std::move(file)) {
  std::visit(
      [this](const auto& f) {
        config_ = read_model_config(f);
        try {
          weights_ = bind_weights(config_, [&f](std::string_view name) { return f.find_tensor(name); });
        } catch (const std::runtime_error& e) {
          if (dynamic_cast<const ModelFileError*>(&e) != nullptr) throw;
          throw ModelFileError(f.path(), std::nullopt, "", e.what());
        }
      },
      file_);
}

std::unique_ptr<LoadedModel> LoadedModel::open(const std::string& path) {
  if (GgufFile::has_magic(path)) return std::make_unique<LoadedModel>(GgufFile::open(path));
  return std::make_unique<LoadedModel>(Llama2cCheckpoint::open(path));
}

}  // namespace loom::compute

#include "loom/compute/model/model_loader.hpp"

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

// phi3: fused tensors, and LongRoPE when the file has an original context (rope_factors_* are weights).
void read_phi3_keys(const GgufFile& file, const std::string& p, ModelConfig& c) {
  c.fused_qkv = true;
  c.fused_gate_up = true;
  if (auto rotated = file.find_u64(p + "rope.dimension_count"); rotated && static_cast<std::int64_t>(*rotated) != c.head_dim) {
    throw ModelFileError(file.path(), std::nullopt, p + "rope.dimension_count",
                         "partial rotary embeddings are not supported (" + std::to_string(*rotated) + " of " +
                             std::to_string(c.head_dim) + " dimensions)");
  }
  // TODO(sliding window): phi3.attention.sliding_window is not applied yet; the shared test files say 2047 and
  // 262144, longer than every context they are run at, so attention there is full either way. It belongs in
  // the per-layer window that the gemma work adds to the config and the attention.
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
  if (arch == "llama") {
    c.architecture = Architecture::llama;
    c.rope_style = RopeStyle::adjacent_pairs;
  } else if (arch == "qwen2") {
    c.architecture = Architecture::qwen2;
    c.rope_style = RopeStyle::split_halves;
    c.qkv_bias = true;
  } else if (arch == "qwen3") {
    c.architecture = Architecture::qwen3;
    c.rope_style = RopeStyle::split_halves;
    c.qk_norm = true;
  } else if (arch == "phi3") {
    c.architecture = Architecture::phi3;
    c.rope_style = RopeStyle::split_halves;
  } else if (arch == "qwen2moe") {
    c.architecture = Architecture::qwen2moe;
    c.rope_style = RopeStyle::split_halves;
    c.qkv_bias = true;
  } else if (arch == "qwen3moe") {
    c.architecture = Architecture::qwen3moe;
    c.rope_style = RopeStyle::split_halves;
    c.qk_norm = true;
  } else {
    throw ModelFileError(file.path(), std::nullopt, "general.architecture",
                         "unsupported architecture '" + arch + "' (supported: llama, qwen2, qwen3, phi3, qwen2moe, qwen3moe)");
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
  if (c.architecture == Architecture::phi3) read_phi3_keys(file, p, c);
  read_expert_keys(file, p, c);
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

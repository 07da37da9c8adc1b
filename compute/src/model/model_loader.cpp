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
  } else {
    throw ModelFileError(file.path(), std::nullopt, "general.architecture",
                         "unsupported architecture '" + arch + "' (supported: llama, qwen2, qwen3)");
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

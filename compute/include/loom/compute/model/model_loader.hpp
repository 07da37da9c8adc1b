// LoadedModel: a model file opened, its hyperparameters read and its weights bound, ready for LlamaModel.
// Accepts GGUF (the architectures of supported_architectures(): llama, qwen2, qwen3, phi3, qwen2moe, qwen3moe,
// gemma, gemma2, gemma3) and llama2.c checkpoints, told apart by their first bytes. The file
// stays memory-mapped for the LoadedModel's lifetime: the weights are used in place, in their stored type.
#pragma once

#include <memory>
#include <string>
#include <variant>

#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/model/llama2c_checkpoint.hpp"
#include "loom/compute/model/model_weights.hpp"
#include "loom/compute/model_config.hpp"

namespace loom::compute {

// Reads the `{arch}.*` hyperparameters; throws ModelFileError naming the key when one is missing or
// invalid, or the architecture when it is not supported.
ModelConfig read_model_config(const GgufFile& file);
ModelConfig read_model_config(const Llama2cCheckpoint& file);

class LoadedModel {
 public:
  static std::unique_ptr<LoadedModel> open(const std::string& path);

  const ModelConfig& config() const noexcept { return config_; }
  const ModelWeights& weights() const noexcept { return weights_; }
  // The GGUF file (metadata, tokenizer) or nullptr for a llama2.c checkpoint.
  const GgufFile* gguf() const noexcept { return std::get_if<GgufFile>(&file_); }
  // Every tensor of the file, in file order.
  const std::vector<TensorView>& tensors() const noexcept {
    return std::visit([](const auto& f) -> const std::vector<TensorView>& { return f.tensors(); }, file_);
  }

  explicit LoadedModel(std::variant<GgufFile, Llama2cCheckpoint> file);

 private:
  std::variant<GgufFile, Llama2cCheckpoint> file_;
  ModelConfig config_;
  ModelWeights weights_;
};

}  // namespace loom::compute

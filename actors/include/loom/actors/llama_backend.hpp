// LlamaBackend: the CPU ExecutorBackend: a LoadedModel run by a LlamaModel over one PagedKvCache, with one
// Sampler per sequence. A step checks everything it can before it touches anything (ids, sampler
// parameters, logprob counts, block ids), then does the block copies, the forward pass of the whole batch,
// and the sampling.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/actors/executor_backend.hpp"
#include "loom/compute/llama_model.hpp"
#include "loom/compute/model_loader.hpp"
#include "loom/compute/paged_kv_cache.hpp"
#include "loom/compute/sampler.hpp"
#include "loom/compute/thread_pool.hpp"

namespace loom::actors {

class LlamaBackend final : public ExecutorBackend {
 public:
  // Most alternatives a sequence may ask for with its sampled token.
  static constexpr std::int32_t kMaxLogprobs = 20;

  // Opens the model and its vocabulary and allocates the KV storage and the step's scratch. Throws
  // std::invalid_argument for options out of range, compute::ModelFileError (or std::runtime_error) for a
  // file that cannot be read.
  static std::unique_ptr<LlamaBackend> load(const LoadOptions& options);

  BackendInfo info() const override;
  std::shared_ptr<const compute::Tokenizer> tokenizer() const override { return tokenizer_; }
  StepResult run(const StepBatch& batch) override;
  void release(cache::SequenceId sequence) override { samplers_.erase(sequence); }

  // Positions the model has computed since the load (a count tests compare with the steps they ran).
  std::uint64_t positions_computed() const noexcept { return model_->positions_computed(); }

  LlamaBackend(std::unique_ptr<compute::LoadedModel> loaded, std::shared_ptr<const compute::Tokenizer> tokenizer,
               const LoadOptions& options);

 private:
  void check(const StepBatch& batch);
  SampledToken sample(const StepSequence& sequence, std::span<const float> logits);

  std::unique_ptr<compute::LoadedModel> loaded_;
  std::shared_ptr<const compute::Tokenizer> tokenizer_;
  std::unique_ptr<compute::ThreadPool> pool_;
  std::unique_ptr<compute::LlamaModel> model_;
  compute::PagedKvCache cache_;
  std::string chat_template_source_;
  std::unordered_map<cache::SequenceId, compute::Sampler> samplers_;
  // Scratch of the step: the sequences' model views and the logits of those that sample, one row each.
  std::vector<compute::LlamaModel::SequenceStep> steps_;
  std::vector<float> logits_;
};

// The BackendFactory of the real engine.
std::unique_ptr<ExecutorBackend> load_llama_backend(const LoadOptions& options);

}  // namespace loom::actors

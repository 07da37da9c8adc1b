// CpuBackend: the CPU Backend (backend.hpp): a LoadedModel run by a LlamaModel over one PagedKvCache,
// with one Sampler per sequence. A step checks everything it can before it touches anything (ids, sampler
// parameters, logprob counts, block ids), then does the block copies, the forward pass of the whole batch,
// and the sampling.
//
// The checks, the sequences held between steps, their samplers and grammar states, forks and the pooling
// of embedding sequences are StepSampling's (step_sampling.hpp), shared with the Vulkan backend.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "loom/compute/backend.hpp"
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/cpu/paged_kv_cache.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/step_sampling.hpp"
#include "loom/compute/text/tokenizer.hpp"

namespace loom::compute {

class CpuBackend final : public Backend {
 public:
  // Opens the model and its vocabulary and allocates the KV storage and the step's scratch. Throws
  // std::invalid_argument for options out of range, ModelFileError (or std::runtime_error) for a
  // file that cannot be read.
  static std::unique_ptr<CpuBackend> load(const LoadOptions& options);

  BackendInfo info() const override;
  std::shared_ptr<const Tokenizer> tokenizer() const override { return tokenizer_; }
  StepResult run(const StepBatch& batch) override;
  void release(SequenceId sequence) override { sampling_.release(sequence); }

  // Positions the model has computed since the load (a count tests compare with the steps they ran).
  std::uint64_t positions_computed() const noexcept { return model_->positions_computed(); }

  CpuBackend(std::unique_ptr<LoadedModel> loaded, std::shared_ptr<const Tokenizer> tokenizer,
               const LoadOptions& options);

 private:
  std::unique_ptr<LoadedModel> loaded_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<LlamaModel> model_;
  PagedKvCache cache_;
  std::string chat_template_source_;
  std::string kv_sizing_;  // how the KV storage was sized from the machine's memory, else empty
  StepSampling sampling_;  // checks, held sequences, samplers, pooling (shared with the Vulkan backend)
  // Scratch of the step: the sequences' model views and the logits of those that sample, one row each.
  std::vector<LlamaModel::SequenceStep> steps_;
  std::vector<float> logits_;
  std::vector<StepSampling::LogitRow> rows_;
  std::vector<float> hidden_;  // the embedding sequences' final hidden states of a step, [max_batch][dim]
};

// The BackendFactory of the real engine.
std::unique_ptr<Backend> load_cpu_backend(const LoadOptions& options);

}  // namespace loom::compute

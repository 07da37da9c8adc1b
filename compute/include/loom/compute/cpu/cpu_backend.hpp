// CpuBackend: the CPU Backend (backend.hpp): a LoadedModel run by a LlamaModel over one PagedKvCache,
// with one Sampler per sequence. A step checks everything it can before it touches anything (ids, sampler
// parameters, logprob counts, block ids), then does the block copies, the forward pass of the whole batch,
// and the sampling.
//
// A sequence whose parameters carry an output constraint also holds a GrammarState, compiled through the
// backend's ConstraintCache (grammar and masker shared by every sequence with the same constraint). At each
// sample its TokenMasker fills the allowed-token mask (the vocabulary's EOS and EOT allowed exactly where the
// grammar may end), the sampler picks under it, and the token's bytes move the state on. A sequence that
// cannot go on under its constraint gets a SampledToken with an error; the rest of the step is unaffected.
//
// An embedding sequence (StepSequence::embed) computes no logits: each step adds its tokens' final hidden
// states to the pooling kept for it (a running sum in double for mean pooling, the first or the last row
// for cls and last), and its last chunk turns that into its L2-normalised embedding.
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
#include "loom/compute/grammar/constraint_cache.hpp"
#include "loom/compute/grammar/grammar_state.hpp"
#include "loom/compute/grammar/token_masker.hpp"
#include "loom/compute/cpu/llama_model.hpp"
#include "loom/compute/cpu/paged_kv_cache.hpp"
#include "loom/compute/cpu/thread_pool.hpp"
#include "loom/compute/held_sequences.hpp"
#include "loom/compute/model/model_loader.hpp"
#include "loom/compute/sampler.hpp"
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
  void release(SequenceId sequence) override {
    decodings_.erase(sequence);
    pooled_.erase(sequence);
    held_.release(sequence);
  }

  // Positions the model has computed since the load (a count tests compare with the steps they ran).
  std::uint64_t positions_computed() const noexcept { return model_->positions_computed(); }

  CpuBackend(std::unique_ptr<LoadedModel> loaded, std::shared_ptr<const Tokenizer> tokenizer,
               const LoadOptions& options);

 private:
  // A sequence's sampling, from its start until release() (kept across a preempted sequence's fresh start
  // with the same parameters): its sampler and, under a constraint, where its grammar has got to.
  struct Decoding {
    Sampler sampler;
    std::shared_ptr<const grammar::TokenMasker> masker;  // null: free text
    std::optional<grammar::GrammarState> grammar;        // present with masker
    std::string error;  // non-empty: the sequence cannot go on (its constraint failed); each sample says so
  };

  // An embedding sequence's pooling so far, from its start until its last chunk (or release()): the sum of
  // its hidden states and how many (mean), or the one row the pooling keeps (cls, last) with a count of 1.
  struct Pooled {
    std::vector<double> sum;
    std::int64_t rows = 0;
  };

  void check(const StepBatch& batch) const;
  void check_embedding(const StepSequence& s) const;
  void pool(const StepSequence& s, const float* hidden);
  PooledEmbedding finish_pooling(SequenceId id);
  void check_block(BlockId block, const std::string& what) const;
  void check_forks(const StepSequence& s, std::unordered_set<SequenceId>& seen, std::int32_t vocab) const;
  std::vector<std::pair<SequenceId, Decoding>> new_decodings(const StepBatch& batch);
  SampledToken sample(SequenceId id, std::span<const float> logits);
  std::int32_t sample_constrained(SequenceId id, Decoding& decoding, std::span<const float> logits,
                                  std::span<const std::int32_t> history);

  std::unique_ptr<LoadedModel> loaded_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<LlamaModel> model_;
  PagedKvCache cache_;
  std::string chat_template_source_;
  std::string kv_sizing_;  // how the KV storage was sized from the machine's memory, else empty
  HeldSequences held_;                                  // tables, histories and parameters between steps
  std::unordered_map<SequenceId, Decoding> decodings_;  // kept across a preempted sequence's fresh start
  grammar::ConstraintCache constraints_;                // compiled constraints, by kind and text
  std::vector<std::int32_t> end_ids_;                   // EOS and EOT: allowed where a grammar may end
  std::vector<std::uint8_t> mask_;                      // a constrained sample's allowed tokens
  // Scratch of the step: the sequences' model views and the logits of those that sample, one row each.
  std::vector<LlamaModel::SequenceStep> steps_;
  std::vector<float> logits_;
  std::unordered_map<SequenceId, Pooled> pooled_;  // embedding sequences, by id
  std::vector<float> hidden_;  // the embedding sequences' final hidden states of a step, [max_batch][dim]
};

// The BackendFactory of the real engine.
std::unique_ptr<Backend> load_cpu_backend(const LoadOptions& options);

}  // namespace loom::compute

// StepSampling: the part of a Backend (backend.hpp) that does not depend on where the forward pass runs:
// the checks of a step, the sequences held between steps (HeldSequences), each sequence's Decoding (its
// sampler and, under an output constraint, its grammar state), forks, the sampling with logprobs, and the
// pooling of embedding sequences. The CPU and the Vulkan backends each own one: a step is
//   check(batch) -> begin(batch) -> [block copies, forward pass] -> finish(batch, logit rows, hidden rows)
// so both follow the same rules and give the same tokens from the same logits.
//
// A sequence's decoding is kept across a preempted sequence's fresh start with the same parameters (its random
// stream goes on). A constraint that does not compile fails only its sequence (its first sample carries the
// error). An embedding sequence's pooling is a running sum in double for mean pooling, the first or the last
// row for cls and last; its last chunk turns that into its L2-normalised embedding.
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
#include "loom/compute/held_sequences.hpp"
#include "loom/compute/sampler.hpp"
#include "loom/compute/text/tokenizer.hpp"

namespace loom::compute {

class StepSampling {
 public:
  // What the backend's storage allows a step: its block pool and the tokens of one forward pass.
  struct Limits {
    std::int64_t blocks = 0;
    std::int64_t block_size = 0;
    std::int64_t max_batch_tokens = 0;
  };

  // What the forward pass produced for one sequence that samples (in batch order): its full logits row, or,
  // when the sequence's token depends only on the row's best few (best_logits_wanted() > 0), those alone.
  struct LogitRow {
    std::span<const float> logits{};       // vocab_size values, or empty
    std::span<const std::int32_t> ids{};   // with empty logits: the row's best tokens, best first (the lower id
    std::span<const float> values{};       // on ties), at least best_logits_wanted() of them, and their logits
  };

  StepSampling(const ModelConfig& config, std::shared_ptr<const Tokenizer> tokenizer, Limits limits);

  // Checks everything it can before a block is copied or a position written, with the sequence's id in the
  // message: ids, positions against the context, tokens in the vocabulary, the held tables (HeldSequences),
  // block ids in the pool, forks, embeddings, logprob counts, the step's token total.
  void check(const StepBatch& batch) const;
  // After check(): makes the decodings of the sequences that start (throws, keeping nothing, when a sampler
  // refuses its parameters), applies each sequence's changes and forks, starts the pooling of embedding
  // sequences. Returns each sequence's held state (its block table covers the step), in batch order; the
  // pointers stay valid until the next begin() or release().
  std::vector<const HeldSequences::Sequence*> begin(const StepBatch& batch);
  // How many of its logits row's best values the sequence (and every fork of it) needs after this step: 0 for
  // the whole row (a constraint, logprobs, a logit bias, a penalty, temperature sampling without top-k), 1 for
  // greedy, top_k + 1 for temperature sampling with top-k (Sampler::best_logits_needed); the most of them over
  // the forks. Only for a sequence that samples, after begin(). A backend that selects the best few on its
  // device reads back only those; whole rows only where this is 0.
  std::int32_t best_logits_wanted(const StepSequence& s) const;
  // Whether best values `values` (best first) give the sequence's token as its whole row would: enough of them,
  // and none of those it needs NaN or infinite (such rows are left to the whole row's rules). When false, the
  // backend sends the whole row.
  bool best_logits_suffice(const StepSequence& s, std::span<const float> values) const;
  // The step's result: `rows` has one entry per sequence with sample && !embed, in batch order; `hidden`
  // holds every embedding sequence's tokens' final hidden states, in batch order, dim values each.
  StepResult finish(const StepBatch& batch, std::span<const LogitRow> rows, const float* hidden);
  // Forgets the sequence (unknown ids are ignored).
  void release(SequenceId sequence);

  const HeldSequences& held() const noexcept { return held_; }

 private:
  // A sequence's sampling, from its start until release(): its sampler and, under a constraint, where its
  // grammar has got to.
  struct Decoding {
    Sampler sampler;
    std::shared_ptr<const grammar::TokenMasker> masker;  // null: free text
    std::optional<grammar::GrammarState> grammar;        // present with masker
    std::string error;  // non-empty: the sequence cannot go on (its constraint failed); each sample says so
  };

  // An embedding sequence's pooling so far: the sum of its hidden states and how many (mean), or the one row
  // the pooling keeps (cls, last) with a count of 1.
  struct Pooled {
    std::vector<double> sum;
    std::int64_t rows = 0;
  };

  void check_embedding(const StepSequence& s) const;
  void check_block(BlockId block, const std::string& what) const;
  void check_forks(const StepSequence& s, std::unordered_set<SequenceId>& seen) const;
  std::vector<std::pair<SequenceId, Decoding>> new_decodings(const StepBatch& batch);
  std::int32_t sequence_best_logits_wanted(SequenceId id) const;
  void pool(const StepSequence& s, const float* hidden);
  PooledEmbedding finish_pooling(SequenceId id);
  SampledToken sample(SequenceId id, const LogitRow& row);
  std::int32_t sample_constrained(SequenceId id, Decoding& decoding, std::span<const float> logits,
                                  std::span<const std::int32_t> history);

  ModelConfig config_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  Limits limits_;
  HeldSequences held_;                                  // tables, histories and parameters between steps
  std::unordered_map<SequenceId, Decoding> decodings_;  // kept across a preempted sequence's fresh start
  grammar::ConstraintCache constraints_;                // compiled constraints, by kind and text
  std::vector<std::int32_t> end_ids_;                   // EOS and EOT: allowed where a grammar may end
  std::vector<std::uint8_t> mask_;                      // a constrained sample's allowed tokens
  std::unordered_map<SequenceId, Pooled> pooled_;       // embedding sequences, by id
};

}  // namespace loom::compute

// StepBatch and its outcomes: what the scheduler asks the executor to compute in one step, and what comes
// back. A step first does the block copies the cache manager's reservations asked for (copy-on-write of a
// shared block), then runs every sequence's tokens (a prefill chunk, or one decode token) through one
// forward pass, then samples the sequences that want a next token, each with its own sampler.
//
// Plain values: a batch moves from the scheduler to the executor's compute thread and its outcome moves
// back, never sharing state.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "loom/cache/block_manager.hpp"
#include "loom/cache/block_types.hpp"
#include "loom/compute/sampler.hpp"

namespace loom::actors {

// One sequence's share of a step.
struct StepSequence {
  cache::SequenceId sequence = 0;
  std::vector<std::int32_t> tokens{};       // computed at positions start, start + 1, ...
  std::int64_t start = 0;                   // positions before it are already in the KV storage
  std::vector<std::int32_t> block_table{};  // physical block ids, covering start + tokens.size() positions
  // Sample a next token after the last of `tokens`: a decode, or the last chunk of a prompt.
  bool sample = false;
  // The sequence's sampling parameters. Its sampler (and random stream) is made at its first sampled step
  // and kept until the executor is told ReleaseSequence; later steps must give the same parameters.
  compute::SamplerConfig sampler{};
  std::vector<std::int32_t> history{};      // every token of the sequence so far, for the penalties
  std::int32_t logprobs = 0;                // how many top alternatives to report with the sampled token (0: none)
};

struct StepBatch {
  std::vector<cache::BlockCopy> copies{};  // done before the forward pass, in order
  std::vector<StepSequence> sequences{};   // each id at most once
};

// A token's log-probability under the model's own distribution: the softmax of the raw logits (temperature
// 1, before logit bias and penalties), so it does not depend on the sampling parameters.
struct TokenLogprob {
  std::int32_t token = 0;
  float logprob = 0.0f;
};

struct SampledToken {
  cache::SequenceId sequence = 0;
  std::int32_t token = 0;
  float logprob = 0.0f;              // of `token`; set only when logprobs were asked for (else 0)
  std::vector<TokenLogprob> top{};   // the `logprobs` most likely tokens, most likely first (lower id on ties)
};

// What a backend returns for a step: one entry per sequence that asked to sample, in batch order.
struct StepResult {
  std::vector<SampledToken> sampled{};
};

struct StepDone {
  std::vector<SampledToken> sampled{};          // as StepResult
  std::size_t tokens_computed = 0;              // positions run through the model
  std::chrono::nanoseconds queued_time{0};      // from the RunStep's arrival to the start of its computation
  std::chrono::nanoseconds compute_time{0};     // block copies, forward pass and sampling
};

// The step did not happen (or not wholly): every sequence in it is to be failed; the executor carries on.
struct StepFailed {
  std::string error{};
  std::vector<cache::SequenceId> sequences{};
};

using StepOutcome = std::variant<StepDone, StepFailed>;

}  // namespace loom::actors

// The GpuExecutorActor's messages (gpu_executor_actor.hpp has the actor): load a model, run a step, forget
// a sequence's sampler, and the queries. A step's answer is a StepOutcome: StepDone or StepFailed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "loom/actors/engine/bookkeeping.hpp"
#include "loom/actors/runtime/reply.hpp"
#include "loom/compute/backend.hpp"

namespace loom::actors {

struct LoadResult {
  std::string error;  // empty: loaded
  compute::BackendInfo info;
  std::shared_ptr<const compute::Tokenizer> tokenizer;
  // Filled in by the engine once it chose the chat template, for what a server advertises (its hello):
  // the template's description (empty: none, chat requests are unsupported), and whether the replies of
  // its family carry tool calls or reasoning in a syntax loom parses.
  std::string chat_template{};
  bool chat_tool_calls = false;
  bool chat_reasoning = false;
  bool loaded() const noexcept { return error.empty(); }
};

struct ExecutorStats {
  bool model_loaded = false;
  std::uint64_t loads = 0;            // successful loads
  std::uint64_t steps_run = 0;        // answered StepDone
  std::uint64_t steps_failed = 0;     // answered StepFailed
  std::uint64_t tokens_computed = 0;  // positions run through the model by successful steps
  std::uint64_t tokens_sampled = 0;
  std::chrono::nanoseconds busy_time{0};  // on the compute thread: loads and steps, failed ones included
  std::size_t queued_jobs = 0;            // loads and steps posted and not yet reported back
  ExecutorBookkeeping bookkeeping{};      // the sizes of its per-sequence and per-job structures
};

struct StepDone {
  std::vector<compute::SampledToken> sampled{};  // as compute::StepResult
  std::vector<compute::PooledEmbedding> embeddings{};  // as compute::StepResult
  std::size_t tokens_computed = 0;               // positions run through the model
  std::chrono::nanoseconds queued_time{0};       // from the RunStep's arrival to the start of its computation
  std::chrono::nanoseconds compute_time{0};      // block copies, forward pass and sampling
  // In the executor outside compute_time: from the RunStep's arrival to the answer (the hand-over to the
  // compute thread and back to the strand), for the scheduler's StepTimer.
  std::chrono::nanoseconds executor_time{0};
};

// The step did not happen (or not wholly): every sequence in it is to be failed; the executor carries on.
struct StepFailed {
  std::string error{};
  std::vector<compute::SequenceId> sequences{};
};

using StepOutcome = std::variant<StepDone, StepFailed>;

// Replaces the loaded model (the old one, with every sequence's sampler, is released first, so two models
// never hold memory together; a failed load leaves none). Progress goes to the log.
struct LoadModel {
  compute::LoadOptions options;
  Reply<LoadResult> reply;
};
// Runs one step after the jobs already queued.
struct RunStep {
  compute::StepBatch batch;
  Reply<StepOutcome> reply;
};
// Forgets the sequence's sampler, after the steps already queued.
struct ReleaseSequence {
  compute::SequenceId sequence = 0;
};
// The model loaded now, or an error when there is none.
struct GetLoadedModel {
  Reply<LoadResult> reply;
};
struct GetExecutorStats {
  Reply<ExecutorStats> reply;
};

using GpuExecutorProtocol =
    std::variant<LoadModel, RunStep, ReleaseSequence, GetLoadedModel, GetExecutorStats>;

}  // namespace loom::actors

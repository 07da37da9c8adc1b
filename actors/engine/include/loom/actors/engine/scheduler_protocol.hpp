// The SchedulerActor's messages (scheduler_actor.hpp has the actor): submit and cancel a sequence, the
// thermal state, drain, stats; its configuration; and the events it tells a sequence's sink.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "loom/actors/engine/step_timer.hpp"
#include "loom/actors/engine/bookkeeping.hpp"
#include "loom/actors/engine/latency_histogram.hpp"
#include "loom/actors/engine/thermal_monitor_protocol.hpp"
#include "loom/actors/engine/thermal_state.hpp"
#include "loom/actors/runtime/reply.hpp"
#include "loom/cache/block_manager.hpp"
#include "loom/compute/backend.hpp"
#include "loom/proto/error_code.hpp"
#include "loom/proto/finish_reason.hpp"
#include "loom/proto/timings.hpp"

namespace loom::actors {

// What the scheduler does in one thermal state. A sequence whose priority is below min_priority is paused:
// it keeps its place and its blocks but gets no steps (and waiting ones are not admitted) until the state
// allows it again.
struct ThermalPolicy {
  std::size_t max_running = 0;                       // cap on sequences stepped together (0: no cap of its own)
  std::chrono::milliseconds step_delay{0};           // pause between steps
  std::int32_t min_priority = -10;                   // lowest priority that may run
};

// Defaults, from cool to hot: nominal and fair change nothing but a small delay at fair; serious halves the
// batch, paces steps by 10 ms and pauses background work (priority < 0); critical runs at most 2 sequences,
// paces by 50 ms and also pauses background work. User prompts (priority >= 0) always finish.
struct ThermalPolicyTable {
  ThermalPolicy nominal{.max_running = 0, .step_delay = std::chrono::milliseconds(0), .min_priority = -10};
  ThermalPolicy fair{.max_running = 0, .step_delay = std::chrono::milliseconds(2), .min_priority = -10};
  ThermalPolicy serious{.max_running = 0, .step_delay = std::chrono::milliseconds(10), .min_priority = 0};
  ThermalPolicy critical{.max_running = 2, .step_delay = std::chrono::milliseconds(50), .min_priority = 0};

  const ThermalPolicy& at(ThermalState state) const noexcept;
};

struct SchedulerConfig {
  std::size_t max_batch_tokens = 512;  // tokens of one step, all sequences together (prefill chunk budget)
  std::size_t max_running = 64;        // sequences in the running batch at most
  std::size_t max_waiting = 256;       // submitted and not yet running; beyond it: overloaded
  std::int64_t context_length = 0;     // positions one sequence may use (prompt + generated); required > 0
  // Under serious, max_running / 2 applies when the table's own cap is 0 (no cap).
  ThermalPolicyTable thermal{};
  // The executor's answer to a step must come within this long, or the step's sequences fail.
  std::chrono::milliseconds step_timeout{std::chrono::minutes(10)};

  // Throws std::invalid_argument naming the field that is out of range.
  void validate() const;
};

// ---- What the scheduler tells a sequence's sink ----

// One sampled token that does not end the sequence (an end-of-generation or stop token id is not sent;
// SequenceFinished says why it ended).
struct SequenceToken {
  cache::SequenceId sequence = 0;
  std::int32_t token = 0;
  std::int32_t index = 0;                // 0 for the first generated token
  std::optional<float> logprob;          // when the submit asked for logprobs
  std::vector<compute::TokenLogprob> top{};
  std::int32_t choice = 0;               // 0 for the submitted sequence, i for SubmitSequence::forks[i - 1]
};

// The last event of an accepted sequence.
struct SequenceFinished {
  cache::SequenceId sequence = 0;
  proto::FinishReason reason = proto::FinishReason::eos;
  std::string error{};                   // for error and timeout
  std::int32_t prompt_tokens = 0;
  std::int32_t cached_tokens = 0;        // prompt tokens whose K/V came from the prefix cache (first run)
  std::int32_t completion_tokens = 0;    // tokens sampled, the one that ended it included
  std::int32_t prefilled_tokens = 0;     // positions this sequence ran through the model, recompute included
  std::int32_t preemptions = 0;
  proto::Timings timings{};
  // An embedding sequence that completed (reason stop): its pooled, L2-normalised vector. Empty otherwise.
  std::vector<float> embedding{};
  std::int32_t choice = 0;               // as SequenceToken::choice
};

// A submit that was never accepted (queue full, bad input, shutting down).
struct SequenceRejected {
  cache::SequenceId sequence = 0;
  proto::ErrorCode code = proto::ErrorCode::overloaded;
  std::string message{};
};

// How much of the prompt is computed, after each prefill step of a sequence whose submit asked for it
// (SubmitSequence::progress); not once the sequence was preempted, so the counts only grow.
struct SequenceProgress {
  cache::SequenceId sequence = 0;
  std::int32_t computed = 0;             // prompt positions in the cache, reused prefix included
  std::int32_t prompt_tokens = 0;
};

using SequenceEvent = std::variant<SequenceToken, SequenceFinished, SequenceRejected, SequenceProgress>;
// Called on the scheduler's strand: must be quick and must not block (a session binds it to its tell).
using SequenceSink = std::function<void(SequenceEvent)>;

// ---- Messages ----

struct SubmitSequence {
  cache::SequenceId sequence = 0;            // chosen by the submitter, unique among live sequences
  std::vector<std::int32_t> prompt{};        // at least one token, shorter than context_length
  // The request's own: max_tokens (at least 1), stop_token_ids (reason stop) and logprobs (alternatives
  // per token) rule the sequence here; the rest go to the backend's sampler in the sequence's first step.
  proto::SamplingParams params{};
  std::vector<std::int32_t> end_ids{};       // end of generation (EOS, EOT): reason eos
  std::int32_t priority = 0;
  std::string fairness_key{};                // the session: round-robin among keys of equal priority
  std::optional<std::chrono::steady_clock::time_point> deadline{};  // reason timeout past it
  std::chrono::steady_clock::time_point accepted = std::chrono::steady_clock::now();  // for timings
  SequenceSink sink{};
  // Embed the prompt instead of generating: it runs (in as many chunks as the steps give it, sharing them
  // with generation, never from a cached prefix) and ends with SequenceFinished (reason stop) carrying its
  // embedding; no token is sampled or sent. params and end_ids are unused.
  bool embed = false;
  bool progress = false;                     // tell the sink SequenceProgress after each prefill step
  // More choices of the same prompt (GenerateRequest::n > 1): new ids, unique among live sequences. The prompt
  // is computed once: where this sequence samples its first token, each fork i (choice i + 1) takes a copy of
  // its block table (blocks shared, copied on write) and samples from the same logits with seed + i + 1.
  // Each is a sequence of its own from then on, with its own events (choice i + 1) and SequenceFinished; a
  // fork that never began (the sequence ended first) gets a SequenceFinished all the same.
  std::vector<cache::SequenceId> forks{};
  static constexpr std::size_t kMaxForks = 15;
};

// Ends a sequence (waiting, running or paused) with `reason` (cancelled, or stop when its session matched a
// stop string). A sequence in the step being computed ends when that step completes. Unknown ids are ignored.
struct CancelSequence {
  cache::SequenceId sequence = 0;
  proto::FinishReason reason = proto::FinishReason::cancelled;
};

// Draining: new submits are rejected (`unavailable`); with cancel_running, every live sequence ends with
// reason cancelled. The reply comes once no sequence is left.
struct DrainScheduler {
  bool cancel_running = false;
  Reply<bool> reply;
};

struct SchedulerStats {
  std::size_t waiting = 0;
  std::size_t running = 0;
  std::size_t paused = 0;                // running sequences the thermal policy holds back
  std::size_t last_batch_sequences = 0;  // sequences in the last step
  std::size_t last_batch_tokens = 0;
  ThermalState thermal = ThermalState::nominal;
  std::uint64_t submitted = 0;
  std::uint64_t rejected = 0;
  std::uint64_t finished = 0;            // every SequenceFinished, whatever the reason
  std::uint64_t cancelled = 0;
  std::uint64_t timed_out = 0;
  std::uint64_t failed = 0;
  std::uint64_t preemptions = 0;
  std::uint64_t steps = 0;
  std::uint64_t steps_failed = 0;
  std::uint64_t prefill_tokens = 0;      // positions prefilled (recompute included)
  std::uint64_t generated_tokens = 0;
  double tokens_per_second = 0.0;        // generated tokens over the last few seconds
  LatencyHistogram time_to_first_token{};
  LatencyHistogram inter_token_latency{};
  StepTimeStats step_time{};             // the step loop's time by phase: forward pass, executor, scheduler, gap
  SchedulerBookkeeping bookkeeping{};    // the sizes of its per-sequence structures
};
struct GetSchedulerStats {
  Reply<SchedulerStats> reply;
};

using SchedulerProtocol =
    std::variant<SubmitSequence, CancelSequence, ThermalStateChanged, DrainScheduler, GetSchedulerStats>;

}  // namespace loom::actors

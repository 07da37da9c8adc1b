// Scheduler: the SchedulerActor's policy as a plain class, the way cache::BlockManager sits under the
// CacheManagerActor. It owns the sequences (waiting, running, paused) and decides everything about them:
// admission (higher priority first, then round-robin across fairness keys with every wait bounded, then
// arrival; a bounded waiting queue), the plan of a step under the token budget (every decode's one token first, then prefill chunks),
// which sequence yields on a KV shortage, the thermal policy (which priorities run, the batch cap), what a
// step's sampled tokens do (append, stream, finish on an end id, a stop id, max_tokens or the context),
// deadlines and cancellation. It does no I/O and reads no clock: a call that needs the time is given `now`.
// Its answers are plain values the actor carries out: the Reserve items of a plan, the batch to run, and an
// ordered list of actions (events for sinks, Commit / Release for the cache manager, ReleaseSequence for the
// executor).
//
// A step's life: plan_step() -> the actor reserves the plan's blocks -> start_step(reservation) (or
// shortage(), or fail_step()) -> the actor runs the batch -> apply_step(done) (or fail_step()). While a step
// is out (step_out()), a sequence in it that is cancelled or passes its deadline ends when the step is back.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "loom/actors/engine/cache_manager_protocol.hpp"
#include "loom/actors/engine/gpu_executor_protocol.hpp"
#include "loom/actors/engine/scheduler_protocol.hpp"
#include "loom/compute/backend.hpp"

namespace loom::actors {

// One event for one sequence's sink.
struct SinkEvent {
  std::shared_ptr<const SequenceSink> sink;  // null when the submit carried none
  SequenceEvent event;
};

// Something the actor is to do, in the order given: a Commit before the Release of the same sequence, a
// preemption's Release before the next Reserve.
// A choice forked from a sequence: the cache manager gives the new `sequence` the blocks of `parent` (Fork).
struct ForkSequence {
  cache::SequenceId sequence = 0;
  cache::SequenceId parent = 0;
};
using SchedulerAction = std::variant<SinkEvent, Commit, Release, ReleaseSequence, ForkSequence>;
using SchedulerActions = std::vector<SchedulerAction>;

// The next step, as planned. When `planned`, the step is out: `reserve` goes to the cache manager (empty
// when every sequence in it already holds its slots) and the answer comes back through start_step().
struct StepPlan {
  bool planned = false;              // false: nothing to step until a submit, a cancel or a thermal change
  std::vector<ReserveItem> reserve;
  SchedulerActions actions;          // preemptions made while admitting
};

// What a step's answer did, for the actor to carry out and count.
struct AppliedStep {
  SchedulerActions actions;
  std::size_t generated_tokens = 0;  // tokens sampled and appended, ending ones included
  std::size_t prefill_tokens = 0;    // positions computed for prompts (recompute included), not decodes
  std::vector<std::chrono::steady_clock::duration> first_token_latencies;  // from the submit's acceptance
  std::vector<std::chrono::steady_clock::duration> inter_token_latencies;
};

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;

  // Throws std::invalid_argument for a config validate() refuses.
  explicit Scheduler(SchedulerConfig config);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  const SchedulerConfig& config() const noexcept { return config_; }

  // ---- Sequences come and go ----

  // Accepts the sequence into the waiting queue (nullopt), or answers the rejection to send: conflict (a live
  // id), invalid_request (no prompt, no room for a generated token, max_tokens < 1, negative logprobs),
  // overloaded (the waiting queue is full).
  std::optional<SinkEvent> submit(SubmitSequence m);
  // Ends the sequence with `reason`. Empty: the id is unknown, or the sequence is in the step that is out
  // and ends when it is back.
  SchedulerActions cancel(cache::SequenceId id, proto::FinishReason reason, Clock::time_point now);
  SchedulerActions cancel_all(proto::FinishReason reason, Clock::time_point now);
  // Ends (reason timeout) every sequence past its deadline; those in the step that is out end when it is back.
  // Empty: none was past it.
  SchedulerActions expire_deadlines(Clock::time_point now);

  // ---- Thermal policy ----

  bool set_thermal(ThermalState state) noexcept;  // false: the state was already this one
  ThermalState thermal() const noexcept { return thermal_; }
  const ThermalPolicy& policy() const noexcept { return config_.thermal.at(thermal_); }
  // How many sequences one step may hold in the current state.
  std::size_t step_cap() const noexcept;

  // ---- A step ----

  // Admits waiting sequences and plans the next step. Nothing while a step is out.
  StepPlan plan_step();
  // The plan's reservation came back granted: block tables, reused prefixes, the chunks, and the batch to
  // run. An empty batch means nothing was left to compute: the step is over, plan again.
  compute::StepBatch start_step(const ReserveResult& reserved, Clock::time_point now);
  // The reservation came back short: the lowest-priority, most recently admitted sequence holding blocks
  // yields (preempted; admissions wait until a sequence leaves) or, alone, fails. The step is over.
  SchedulerActions shortage(std::size_t missing_blocks, Clock::time_point now);
  // The reservation or the step failed: every sequence of the step ends with `error`. The step is over.
  SchedulerActions fail_step(const std::string& error, Clock::time_point now);
  // The step's answer: tokens appended and streamed, finished sequences retired. The step is over.
  AppliedStep apply_step(StepDone done, Clock::time_point now);

  // ---- Queries ----

  bool step_out() const noexcept { return step_out_; }
  bool empty() const noexcept { return sequences_.empty(); }  // no live sequence
  bool contains(cache::SequenceId id) const { return sequences_.contains(id); }
  const std::deque<cache::SequenceId>& waiting() const noexcept { return waiting_; }  // preempted ones first
  const std::vector<cache::SequenceId>& running() const noexcept { return running_; }  // admission order
  std::size_t paused_count() const;    // running sequences the thermal policy holds back
  std::uint64_t preemptions() const noexcept { return preemptions_; }
  // The sizes of every per-sequence structure: all of them are 0 once no sequence is live.
  SchedulerBookkeeping bookkeeping() const noexcept;

 private:
  struct Sequence;
  struct PlannedItem;  // one sequence's share of the step that is out

  Sequence& at(cache::SequenceId id) { return *sequences_.at(id); }
  const Sequence& at(cache::SequenceId id) const { return *sequences_.at(id); }
  bool may_run(const Sequence& s) const noexcept;
  bool in_step(cache::SequenceId id) const noexcept;
  bool yields_to(const Sequence& x, const Sequence& y) const noexcept;  // x goes before y on a preemption

  void admit(SchedulerActions& actions);
  std::deque<cache::SequenceId>::iterator next_to_admit();
  std::uint64_t admission_rank(const Sequence& s) const;
  void preempt(cache::SequenceId id, SchedulerActions& actions);
  std::vector<cache::SequenceId> stepping_order() const;
  void plan_chunks(const std::vector<cache::SequenceId>& order);
  std::vector<ReserveItem> reserve_items() const;
  std::vector<compute::BlockCopy> apply_reservations(const ReserveResult& reserved);
  void settle_chunks();
  // The one place a step's batch is built from the plan: what it carries per sequence (tokens, start, block
  // table, sampling parameters, history) is decided here and nowhere else.
  compute::StepBatch build_step_batch(std::vector<compute::BlockCopy> copies);
  void apply_item(const PlannedItem& p, StepDone& done, std::size_t& sampled_index, Clock::time_point now,
                  AppliedStep& out);
  void apply_embedding(cache::SequenceId id, StepDone& done, Clock::time_point now, AppliedStep& out);
  void take_token(cache::SequenceId id, compute::SampledToken& sampled, Clock::time_point now, AppliedStep& out);
  std::vector<compute::SequenceFork> fork_steps(const Sequence& s) const;
  std::vector<cache::SequenceId> fork_choices(cache::SequenceId parent, SchedulerActions& actions);
  void finish_unforked(const Sequence& s, proto::FinishReason reason, const std::string& error,
                       SchedulerActions& actions) const;
  std::optional<proto::FinishReason> ending_for(const Sequence& s, std::int32_t token) const;
  void end_step();
  void finish(cache::SequenceId id, proto::FinishReason reason, std::string error, Clock::time_point now,
              SchedulerActions& actions);

  SchedulerConfig config_;
  std::unordered_map<cache::SequenceId, std::unique_ptr<Sequence>> sequences_;
  std::deque<cache::SequenceId> waiting_;   // arrival order (preempted ones at the front)
  std::vector<cache::SequenceId> running_;  // admission order
  // Round-robin state of the fairness keys that have a live sequence (a key goes with its last sequence, so
  // the map never holds more keys than there are live sequences).
  struct FairnessKey {
    std::uint64_t last_admitted = 0;  // admission number of the key's last admitted sequence (0: none yet)
    std::size_t live = 0;             // its sequences not yet finished
  };
  std::unordered_map<std::string, FairnessKey> fairness_keys_;
  std::uint64_t admissions_ = 0;
  std::uint64_t preemptions_ = 0;
  std::vector<PlannedItem> plan_;           // the step that is out
  bool step_out_ = false;                   // a plan is out (reserving or computing)
  bool admission_held_ = false;             // after a KV shortage's preemption, until a sequence leaves
  ThermalState thermal_ = ThermalState::nominal;
};

}  // namespace loom::actors

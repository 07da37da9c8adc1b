// SchedulerActor: continuous batching. It owns the waiting, running and paused sequences and drives the
// decode loop as messages: a Tick plans one step (decodes first, then prefill chunks under the step's token
// budget), asks the CacheManager to reserve blocks for the whole plan (on a shortage it preempts the
// lowest-priority, most recently started sequence and plans again), sends RunStep to the GpuExecutor and
// waits for StepDone; then it appends the sampled tokens, tells each sequence's sink, retires the finished
// sequences (their blocks go back at once) and posts the next Tick, after the thermal policy's delay.
//
// What a sequence is to the scheduler: token ids in, token ids out. Text (templates, detokenizing, stop
// strings) is the session's job; a session that sees a stop string tells CancelSequence with reason stop.
//
// Ordering: priorities first (higher runs first), then round-robin across fairness keys (sessions), then
// FIFO. The waiting queue is bounded: a Submit beyond it is rejected at once (`overloaded`). A preempted
// sequence keeps its tokens and is requeued ahead of its priority class; when it runs again its prompt and
// the tokens it had generated are prefilled anew (recompute), invisibly to its client.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loom/actors/engine/cache_manager_protocol.hpp"
#include "loom/actors/engine/gpu_executor_protocol.hpp"
#include "loom/actors/engine/scheduler_protocol.hpp"
#include "loom/actors/runtime/actor.hpp"
#include "loom/actors/runtime/address.hpp"

namespace loom::actors {

class SchedulerActor : public Actor<SchedulerActor, SchedulerProtocol> {
 public:
  // Throws std::invalid_argument for a config validate() refuses or an empty address.
  SchedulerActor(SchedulerConfig config, Address<CacheManagerProtocol> cache, Address<GpuExecutorProtocol> executor);
  ~SchedulerActor();

  void on_start();

  void on(SubmitSequence m);
  void on(CancelSequence m);
  void on(ThermalStateChanged m);
  void on(DrainScheduler m);
  void on(GetSchedulerStats m);

 private:
  struct Sequence;     // scheduler_actor.cpp
  struct PlannedItem;  // one sequence's share of the plan being reserved or computed
  using Clock = std::chrono::steady_clock;

  void request_tick(Clock::duration delay = Clock::duration::zero());
  void tick();
  // The answers to the step's two asks, on the strand; `plan` tells a stale answer from the current one.
  void reserved(std::uint64_t plan, error_code ec, ReserveResult result);
  void step_answered(std::uint64_t plan, error_code ec, StepOutcome outcome);
  void plan_step();
  void admit();
  void preempt(cache::SequenceId id);
  void run_step(ReserveResult&& result);
  void deliver_step(StepDone&& done);
  void fail_plan(const std::string& error);
  void finish(cache::SequenceId id, proto::FinishReason reason, std::string error = {});
  void expire_deadlines();
  void maybe_answer_drain();
  const ThermalPolicy& policy() const noexcept;
  std::size_t step_cap() const noexcept;
  bool may_run(const Sequence& s) const noexcept;
  bool in_step(cache::SequenceId id) const noexcept;
  void forget_old_rates(Clock::time_point now);

  SchedulerConfig config_;
  Address<CacheManagerProtocol> cache_;
  Address<GpuExecutorProtocol> executor_;
  std::unordered_map<cache::SequenceId, std::unique_ptr<Sequence>> sequences_;
  std::deque<cache::SequenceId> waiting_;   // arrival order (preempted ones at the front)
  std::vector<cache::SequenceId> running_;  // admission order
  std::unordered_map<std::string, std::uint64_t> last_admitted_;  // fairness key -> admission number
  std::uint64_t admissions_ = 0;
  std::uint64_t plan_id_ = 0;
  std::vector<PlannedItem> plan_;           // the plan being reserved or computed
  bool busy_ = false;                       // a plan is out (reserving or computing)
  bool tick_posted_ = false;
  bool admission_held_ = false;             // after a preemption, until a sequence leaves
  ThermalState thermal_ = ThermalState::nominal;
  bool draining_ = false;
  std::vector<Reply<bool>> drain_replies_;
  SchedulerStats stats_;
  std::deque<std::pair<Clock::time_point, std::size_t>> recent_tokens_;  // (step end, tokens) for tokens/s
};

}  // namespace loom::actors

// SchedulerActor: continuous batching as messages. The policy is a plain Scheduler (scheduler.hpp: queues,
// admission, planning, preemption, the thermal table, what a step's tokens do, deadlines, cancellation), owned
// here the way the CacheManagerActor owns a cache::BlockManager; this actor is its plumbing. A Tick asks the
// Scheduler for a plan, asks the CacheManager to Reserve its blocks (a shortage goes back to the Scheduler,
// which preempts, and the actor plans again), sends RunStep to the GpuExecutor and hands the StepDone back;
// after each call it carries out the answer in order (sink events, Commit / Release to the cache manager,
// ReleaseSequence to the executor) and posts the next Tick after the thermal policy's delay. It also keeps
// the timers (pacing, the 20 ms deadline check, the reserve and step timeouts), stale answers, stats, drain.
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
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "loom/actors/engine/cache_manager_protocol.hpp"
#include "loom/actors/engine/gpu_executor_protocol.hpp"
#include "loom/actors/engine/scheduler.hpp"
#include "loom/actors/engine/scheduler_protocol.hpp"
#include "loom/actors/engine/step_timer.hpp"
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
  using Clock = std::chrono::steady_clock;

  void request_tick(Clock::duration delay = Clock::duration::zero());
  void tick();
  void plan_step();
  // The answers to the step's two asks, on the strand; `plan` tells a stale answer from the current one.
  void reserved(std::uint64_t plan, error_code ec, ReserveResult result);
  void step_answered(std::uint64_t plan, error_code ec, StepOutcome outcome);
  void run_step(const ReserveResult& result);
  void deliver_step(StepDone&& done);
  void fail_step(const std::string& error);
  void expire_deadlines();
  // Does what the Scheduler answered, in order.
  void carry_out(SchedulerActions&& actions);
  void notify(SinkEvent&& event);
  void record(const AppliedStep& applied, Clock::time_point now);
  void log_preemptions(std::uint64_t before);
  void maybe_answer_drain();
  void forget_old_rates(Clock::time_point now);

  Scheduler scheduler_;
  Address<CacheManagerProtocol> cache_;
  Address<GpuExecutorProtocol> executor_;
  std::uint64_t plan_id_ = 0;               // the plan out now (reserving or computing), while step_out()
  bool tick_posted_ = false;
  bool draining_ = false;
  std::vector<Reply<bool>> drain_replies_;
  SchedulerStats stats_;
  StepTimer step_timer_;
  // (first step end of a 100 ms bucket, tokens) for tokens/s, over the last 5 s
  std::deque<std::pair<Clock::time_point, std::size_t>> recent_tokens_;
};

}  // namespace loom::actors

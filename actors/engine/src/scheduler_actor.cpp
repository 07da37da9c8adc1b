#include "loom/actors/engine/scheduler_actor.hpp"

#include <algorithm>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "loom/actors/runtime/logger.hpp"

namespace loom::actors {

namespace {

using Clock = std::chrono::steady_clock;
using proto::FinishReason;

constexpr auto kDeadlineCheck = std::chrono::milliseconds(20);
constexpr auto kRateWindow = std::chrono::seconds(5);
// Steps ending this close together share one entry of the rate window, so the window holds at most
// kRateWindow / kRateBucket entries however fast the steps are (a fake backend's take microseconds).
constexpr auto kRateBucket = std::chrono::milliseconds(100);
constexpr auto kReserveTimeout = std::chrono::seconds(30);

// Times a handler on the step's path as the scheduler's share of the step loop (step_timer.hpp).
class StepHandlerClock {
 public:
  StepHandlerClock(StepTimer& timer, bool is_tick) : timer_(timer), began_(Clock::now()) {
    timer_.handler_began(began_, is_tick);
  }
  ~StepHandlerClock() { timer_.handler_ended(Clock::now()); }
  StepHandlerClock(const StepHandlerClock&) = delete;
  StepHandlerClock& operator=(const StepHandlerClock&) = delete;
  Clock::time_point began() const noexcept { return began_; }

 private:
  StepTimer& timer_;
  Clock::time_point began_;
};

}  // namespace

SchedulerActor::SchedulerActor(SchedulerConfig config, Address<CacheManagerProtocol> cache,
                               Address<GpuExecutorProtocol> executor)
    : scheduler_(std::move(config)), cache_(std::move(cache)), executor_(std::move(executor)) {
  if (cache_ == Address<CacheManagerProtocol>()) throw std::invalid_argument("scheduler: empty cache manager address");
  if (executor_ == Address<GpuExecutorProtocol>()) throw std::invalid_argument("scheduler: empty executor address");
}

SchedulerActor::~SchedulerActor() = default;

void SchedulerActor::on_start() {
  start_periodic(kDeadlineCheck, [this] { expire_deadlines(); });
}

void SchedulerActor::forget_old_rates(Clock::time_point now) {
  while (!recent_tokens_.empty() && now - recent_tokens_.front().first > kRateWindow) recent_tokens_.pop_front();
}

// ---- Carrying out the Scheduler's answers ----

void SchedulerActor::carry_out(SchedulerActions&& actions) {
  for (SchedulerAction& action : actions) {
    std::visit(
        [this](auto&& a) {
          using A = std::decay_t<decltype(a)>;
          if constexpr (std::is_same_v<A, SinkEvent>) {
            notify(std::move(a));
          } else if constexpr (std::is_same_v<A, ReleaseSequence>) {
            executor_.tell(std::move(a));
          } else if constexpr (std::is_same_v<A, ForkSequence>) {
            cache_.tell(Fork{a.parent, a.sequence, {}});  // before the child's first Reserve: same mailbox
          } else {
            cache_.tell(std::move(a));  // Commit, Release
          }
        },
        action);
  }
}

void SchedulerActor::notify(SinkEvent&& e) {
  if (const auto* finished = std::get_if<SequenceFinished>(&e.event)) {
    ++stats_.finished;
    if (finished->reason == FinishReason::cancelled) ++stats_.cancelled;
    if (finished->reason == FinishReason::timeout) ++stats_.timed_out;
    if (finished->reason == FinishReason::error) ++stats_.failed;
  } else if (std::holds_alternative<SequenceRejected>(e.event)) {
    ++stats_.rejected;
  }
  if (e.sink && *e.sink) (*e.sink)(std::move(e.event));
}

void SchedulerActor::log_preemptions(std::uint64_t before) {
  if (scheduler_.preemptions() == before) return;
  logger().debug("actor=scheduler preempted={} waiting={} running={}", scheduler_.preemptions() - before,
                 scheduler_.waiting().size(), scheduler_.running().size());
}

// ---- Messages ----

void SchedulerActor::on(SubmitSequence m) {
  ++stats_.submitted;
  if (draining_) {
    ++stats_.rejected;
    if (m.sink) m.sink(SequenceRejected{m.sequence, proto::ErrorCode::unavailable, "the engine is shutting down"});
    return;
  }
  if (auto rejected = scheduler_.submit(std::move(m))) {
    notify(std::move(*rejected));
    return;
  }
  request_tick();
}

void SchedulerActor::on(CancelSequence m) {
  SchedulerActions actions = scheduler_.cancel(m.sequence, m.reason, Clock::now());
  if (actions.empty()) return;  // unknown, or it ends when its step is back
  carry_out(std::move(actions));
  maybe_answer_drain();
  request_tick();
}

void SchedulerActor::on(ThermalStateChanged m) {
  const ThermalState before = scheduler_.thermal();
  if (!scheduler_.set_thermal(m.state)) return;
  logger().info("actor=scheduler thermal={} -> {} reason=\"{}\"", to_string(before), to_string(m.state), m.reason);
  request_tick();
}

void SchedulerActor::on(DrainScheduler m) {
  draining_ = true;
  drain_replies_.push_back(std::move(m.reply));
  SchedulerActions actions;
  if (m.cancel_running) actions = scheduler_.cancel_all(FinishReason::cancelled, Clock::now());
  const bool ended = !actions.empty();
  carry_out(std::move(actions));
  maybe_answer_drain();
  if (ended) request_tick();
}

void SchedulerActor::maybe_answer_drain() {
  if (!draining_ || !scheduler_.empty() || scheduler_.step_out()) return;
  for (auto& reply : drain_replies_) reply(true);
  drain_replies_.clear();
}

void SchedulerActor::on(GetSchedulerStats m) {
  SchedulerStats out = stats_;
  out.waiting = scheduler_.waiting().size();
  out.running = scheduler_.running().size();
  out.paused = scheduler_.paused_count();
  out.thermal = scheduler_.thermal();
  out.preemptions = scheduler_.preemptions();
  out.step_time = step_timer_.stats();
  out.bookkeeping = scheduler_.bookkeeping();
  out.bookkeeping.drain_replies = drain_replies_.size();
  const auto now = Clock::now();
  forget_old_rates(now);
  std::size_t tokens = 0;
  for (const auto& [when, n] : recent_tokens_) tokens += n;
  if (!recent_tokens_.empty()) {
    const double seconds = std::max(0.1, std::chrono::duration<double>(now - recent_tokens_.front().first).count());
    out.tokens_per_second = static_cast<double>(tokens) / seconds;
  }
  m.reply(std::move(out));
}

// ---- The loop ----

void SchedulerActor::request_tick(Clock::duration delay) {
  if (tick_posted_ || scheduler_.step_out()) return;
  tick_posted_ = true;
  if (delay > Clock::duration::zero()) step_timer_.loop_stopped();  // a pause is not the loop's time
  if (delay <= Clock::duration::zero()) {
    continuation("Tick", [this] { tick(); })();
  } else {
    start_timer(delay, [this] { tick(); });
  }
}

void SchedulerActor::tick() {
  const StepHandlerClock clock(step_timer_, /*is_tick=*/true);
  tick_posted_ = false;
  if (scheduler_.step_out()) return;
  expire_deadlines();
  plan_step();
}

void SchedulerActor::expire_deadlines() {
  SchedulerActions actions = scheduler_.expire_deadlines(Clock::now());
  if (actions.empty()) return;
  carry_out(std::move(actions));
  maybe_answer_drain();
  request_tick();
}

void SchedulerActor::plan_step() {
  const std::uint64_t preempted_before = scheduler_.preemptions();
  StepPlan plan = scheduler_.plan_step();
  carry_out(std::move(plan.actions));  // an admission's preemption releases its blocks before the Reserve
  log_preemptions(preempted_before);
  if (!plan.planned) {
    step_timer_.loop_stopped();
    maybe_answer_drain();
    return;  // idle until a submit, a cancel or a thermal change
  }
  const std::uint64_t id = ++plan_id_;
  if (plan.reserve.empty()) {
    ReserveResult nothing_to_reserve;
    nothing_to_reserve.reserved = true;
    run_step(nothing_to_reserve);
    return;
  }
  Reserve request{std::move(plan.reserve), {}};
  ask(cache_, std::move(request), kReserveTimeout,
      [this, id](error_code ec, ReserveResult result) { reserved(id, ec, std::move(result)); });
}

void SchedulerActor::reserved(std::uint64_t plan, error_code ec, ReserveResult result) {
  const StepHandlerClock clock(step_timer_, /*is_tick=*/false);
  if (!scheduler_.step_out() || plan != plan_id_) return;  // a stale answer (its plan was given up)
  if (ec || !result.error.empty()) {
    const std::string error = ec ? "the cache manager did not answer: " + ec.message() : result.error;
    logger().error("actor=scheduler reserve failed: {}", error);
    fail_step("KV cache reservation failed: " + error);
    return;
  }
  if (!result.reserved) {
    const std::uint64_t preempted_before = scheduler_.preemptions();
    carry_out(scheduler_.shortage(result.missing_blocks, Clock::now()));
    log_preemptions(preempted_before);
    maybe_answer_drain();
    request_tick();
    return;
  }
  // Cancelled while reserving: their reservations stand; the Scheduler releases them when the step is back.
  run_step(result);
}

void SchedulerActor::run_step(const ReserveResult& result) {
  compute::StepBatch batch = scheduler_.start_step(result, Clock::now());
  if (batch.sequences.empty()) {
    request_tick();
    return;
  }
  std::size_t tokens = 0;
  for (const compute::StepSequence& s : batch.sequences) tokens += s.tokens.size();
  stats_.last_batch_sequences = batch.sequences.size();
  stats_.last_batch_tokens = tokens;
  const std::uint64_t plan = plan_id_;
  RunStep request{std::move(batch), {}};
  step_timer_.step_sent(Clock::now());
  ask(executor_, std::move(request), scheduler_.config().step_timeout,
      [this, plan](error_code ec, StepOutcome outcome) { step_answered(plan, ec, std::move(outcome)); });
}

void SchedulerActor::step_answered(std::uint64_t plan, error_code ec, StepOutcome outcome) {
  if (!scheduler_.step_out() || plan != plan_id_) return;
  const StepHandlerClock clock(step_timer_, /*is_tick=*/false);
  if (ec) {
    fail_step("the executor did not answer the step: " + ec.message());
  } else if (auto* failed = std::get_if<StepFailed>(&outcome)) {
    ++stats_.steps_failed;
    fail_step(failed->error);
  } else {
    ++stats_.steps;
    auto& done = std::get<StepDone>(outcome);
    step_timer_.step_answered(clock.began(), done.compute_time, done.executor_time);
    deliver_step(std::move(done));
  }
}

// Every sequence of the step ends with the error; the engine carries on with the others.
void SchedulerActor::fail_step(const std::string& error) {
  carry_out(scheduler_.fail_step(error, Clock::now()));
  maybe_answer_drain();
  request_tick();
}

void SchedulerActor::record(const AppliedStep& applied, Clock::time_point now) {
  stats_.prefill_tokens += applied.prefill_tokens;
  stats_.generated_tokens += applied.generated_tokens;
  for (const auto latency : applied.first_token_latencies) stats_.time_to_first_token.record(latency);
  for (const auto latency : applied.inter_token_latencies) stats_.inter_token_latency.record(latency);
  if (applied.generated_tokens > 0) {
    if (!recent_tokens_.empty() && now - recent_tokens_.back().first < kRateBucket) {
      recent_tokens_.back().second += applied.generated_tokens;
    } else {
      recent_tokens_.emplace_back(now, applied.generated_tokens);
    }
  }
  forget_old_rates(now);
}

void SchedulerActor::deliver_step(StepDone&& done) {
  const auto now = Clock::now();
  AppliedStep applied = scheduler_.apply_step(std::move(done), now);
  record(applied, now);
  carry_out(std::move(applied.actions));
  maybe_answer_drain();
  request_tick(scheduler_.policy().step_delay);
}

}  // namespace loom::actors
